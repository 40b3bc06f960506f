/* memtui._native: the optional compiled half of memtui (see docs/performance.md).
 *
 * Two things live here: a scanner that reads a snapshot pickle's opcodes once and writes
 * the device traces straight into columns (scan.c, entry.c, tables.c), and the pairing of
 * allocations with their frees for the model (lifetimes.c). Everything is optional: the
 * package works without this module, and the scanner hands any file it does not fully
 * recognise back to the Python decoder by raising Unsupported.
 */
#ifndef MEMTUI_NATIVE_H
#define MEMTUI_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* The longest FRAME a file may declare: memtui/load/shape.py's MAX_FRAME (a test holds them equal). */
#define MAX_FRAME ((uint64_t)64 << 20)

/* ---- results of the parsing functions ------------------------------------------------ */
enum { ST_OK = 0, ST_MORE = 1, ST_FAIL = 2, ST_ERROR = 3 };
/* ST_MORE: the buffer ends inside the item (feed more and try again from its start);
 * ST_FAIL: the file is not one the scanner handles (reason set; the caller falls back);
 * ST_ERROR: a Python exception is set, or, with none set, memory ran out (the helpers
 * below never call Python, so worker threads can use them without the GIL). */

/* ---- large blocks (large.c) ----------------------------------------------------------- */
void large_init(void);                            /* once, as the module is made */
size_t large_bytes(size_t bytes);                 /* the size to ask for a block of at least ``bytes`` */
void advise_large(void *data, size_t bytes);      /* ask for 2 MiB pages for a block from malloc */
void *large_realloc(void *data, size_t bytes);    /* realloc, then advise_large; ``bytes`` from large_bytes */
void *large_malloc(size_t bytes);
void *large_calloc(size_t items, size_t item_size);
void *large_aligned(size_t bytes);                /* ``bytes`` (a whole number of 2 MiB) on a 2 MiB boundary */

/* ---- growable arrays ----------------------------------------------------------------- */
typedef struct {
    void *data;
    Py_ssize_t n, cap;  /* in items */
} Vec;

int vec_reserve(Vec *v, Py_ssize_t items, size_t item_size);
void vec_free(Vec *v);
#define VEC_AT(v, type, i) (((type *)(v)->data)[i])
#define VEC_PUSH(v, type, value)                                                     \
    (((v)->n < (v)->cap || vec_reserve((v), (v)->n + 1, sizeof(type)) == 0)          \
         ? (((type *)(v)->data)[(v)->n++] = (value), 0)                              \
         : -1)

/* A signed integer column that starts one byte wide and widens (2, 4, 8) when a value
 * needs it, so a column whose values are small costs little while it is built. */
typedef struct {
    uint8_t *data;
    Py_ssize_t n, cap;
    int width;
} IntCol;

int intcol_grow(IntCol *c, int64_t value);  /* the slow path of intcol_push */
int intcol_fit(IntCol *c, Py_ssize_t items, int width);
int intcol_extend(IntCol *c, const int64_t *values, Py_ssize_t n);  /* n values at the end, widened as needed */
void intcol_free(IntCol *c);

static inline int width_of(int64_t v)
{
    if (v >= INT8_MIN && v <= INT8_MAX) return 1;
    if (v >= INT16_MIN && v <= INT16_MAX) return 2;
    if (v >= INT32_MIN && v <= INT32_MAX) return 4;
    return 8;
}

static inline int intcol_push(IntCol *c, int64_t v)
{
    uint64_t half = (uint64_t)1 << (8 * c->width - 1);  /* v fits the width when v + half < 2 * half */
    if (c->n == c->cap || (c->width < 8 && (uint64_t)v + half >= 2 * half)) {
        if (intcol_grow(c, v) < 0) return -1;
    }
    switch (c->width) {
    case 1: ((int8_t *)c->data)[c->n] = (int8_t)v; break;
    case 2: ((int16_t *)c->data)[c->n] = (int16_t)v; break;
    case 4: ((int32_t *)c->data)[c->n] = (int32_t)v; break;
    default: ((int64_t *)c->data)[c->n] = v; break;
    }
    c->n++;
    return 0;
}

/* ---- hash map from a 64-bit key to a 32-bit value (open addressing) ------------------ */
typedef struct {
    uint64_t *keys;
    int32_t *values;
    Py_ssize_t n, cap;  /* cap is a power of two (0 when empty) */
} Map64;

int32_t map64_get(const Map64 *m, uint64_t key, int32_t missing);
int map64_put(Map64 *m, uint64_t key, int32_t value);
void map64_free(Map64 *m);

/* ---- interned strings, by content ----------------------------------------------------- */
enum {
    K_NONE = 0,
    /* trace entry keys */
    K_ACTION, K_ADDR, K_SIZE, K_STREAM, K_TIME, K_CTX, K_META, K_FRAMES, K_DEVICE_FREE,
    /* frame keys */
    K_FILENAME, K_LINE, K_NAME,
    /* the root key whose value holds the traces */
    K_DEVICE_TRACES,
    /* an external annotation's keys besides name and time_us (annotations.c) */
    K_STAGE, K_DEVICE,
    K_COUNT
};
#define ENTRY_KEYS_END K_FILENAME  /* K_ACTION..K_DEVICE_FREE are entry keys */

typedef struct {
    Py_ssize_t offset;  /* into the arena */
    uint32_t length;
    uint32_t hash;
    int8_t key;         /* K_* */
    int32_t action;     /* local action id, -1 until the string is seen as an action */
    PyObject *obj;      /* the str, made when the string was interned */
} StrRec;

typedef struct {
    Vec recs;          /* StrRec */
    Vec arena;         /* char */
    int32_t *slots;    /* hash table of record ids, -1 empty */
    Py_ssize_t cap;
    int no_python;     /* a worker thread's copy: new strings get no str (obj NULL) */
    int borrowed_objs; /* the strs belong to the table this one was copied from */
} StrTable;

int utf8_surrogatepass_valid(const uint8_t *p, Py_ssize_t n);

/* The id of the string with these UTF-8 bytes (surrogates allowed, as pickle writes
 * them), interning it when new; -1 with reason set when the bytes are not valid. */
int32_t str_intern(StrTable *t, const char *s, Py_ssize_t n, const char **reason);
void strtable_free(StrTable *t);

/* ---- frames and stacks -------------------------------------------------------------- */
/* A frame dict as the file wrote it (a memo slot may hold one). Its content id (fid) is
 * given when it first becomes part of a stack, so ids follow first use, as in Python. */
typedef struct {
    int32_t filename, name;  /* string ids */
    int64_t line;            /* as written */
    int32_t extras_at;       /* index into the extras vector, -1 when none */
    int32_t n_extras;
    int32_t fid;             /* -1 until used in a stack */
    PyObject *obj;           /* made when a non-trace part refers to the frame */
    PyObject *line_obj;      /* the line when it does not fit 64 bits (line is then -1) */
} FrameRec;

typedef struct {
    /* content-interned frames: fid -> (filename, line, name, extras) */
    Vec frames;        /* FrameKey */
    Vec extras;        /* int32 pairs (key id, value id), shared by FrameRec and FrameKey */
    int32_t *fslots;   /* hash table of fids */
    Py_ssize_t fcap;
    /* content-interned stacks: sid -> fids */
    Vec flat;          /* int32 */
    Vec offsets;       /* int64, n_stacks + 1 */
    int32_t *sslots;
    Py_ssize_t scap;
    Vec objs;          /* PyObject* per sid, made when a non-trace part refers to a stack */
} FrameTables;

typedef struct {
    int32_t filename, name;
    int64_t line;   /* clamped to [0, 2**62) as the model does */
    int32_t extras_at, n_extras;
    uint32_t hash;
} FrameKey;

int32_t frame_intern(FrameTables *t, int32_t filename, int64_t line, int32_t name, const int32_t *extras,
                     int32_t n_extras);
int32_t stack_intern(FrameTables *t, const int32_t *fids, Py_ssize_t n);
int frametables_init(FrameTables *t);
void frametables_free(FrameTables *t);

/* ---- module-level objects ------------------------------------------------------------ */
extern PyObject *Unsupported;  /* memtui._native.Unsupported */
extern PyTypeObject BufferType;
PyObject *buffer_from_memory(void *data, Py_ssize_t nbytes);  /* owns data (malloc) from then on, even on failure */
PyObject *intcol_to_buffer(IntCol *c);  /* hands the column over; c is left empty */
extern PyTypeObject ScannerType;
PyObject *native_lifetimes(PyObject *self, PyObject *args);
PyObject *native_allocated_curve(PyObject *self, PyObject *args);
PyObject *native_remap(PyObject *self, PyObject *args);
PyObject *native_finite_times(PyObject *self, PyObject *args);
PyObject *native_time_span(PyObject *self, PyObject *args);
PyObject *native_code_counts(PyObject *self, PyObject *args);
PyObject *native_positions(PyObject *self, PyObject *args);
PyObject *native_reserved_curve(PyObject *self, PyObject *args);
static PyObject *native_parallel_limits(PyObject *self, PyObject *args);
static PyObject *native_utf8_valid(PyObject *self, PyObject *args);

#endif
