/* The scanner's state, shared by scan.c (the opcode loop outside trace entries) and
 * entry.c (trace entries, frame lists and frame dicts, parsed straight into columns). */
#ifndef MEMTUI_SCANNER_H
#define MEMTUI_SCANNER_H

#include "native.h"

/* ---- opcodes (pickletools names) ------------------------------------------------------ */
#define OP_MARK '('
#define OP_STOP '.'
#define OP_POP '0'
#define OP_POP_MARK '1'
#define OP_DUP '2'
#define OP_BININT 'J'
#define OP_BININT1 'K'
#define OP_BININT2 'M'
#define OP_NONE 'N'
#define OP_BINUNICODE 'X'
#define OP_SHORT_BINBYTES 'C'
#define OP_BINBYTES 'B'
#define OP_APPEND 'a'
#define OP_APPENDS 'e'
#define OP_BINFLOAT 'G'
#define OP_BINGET 'h'
#define OP_LONG_BINGET 'j'
#define OP_LIST 'l'
#define OP_EMPTY_LIST ']'
#define OP_BINPUT 'q'
#define OP_LONG_BINPUT 'r'
#define OP_SETITEM 's'
#define OP_TUPLE 't'
#define OP_EMPTY_TUPLE ')'
#define OP_SETITEMS 'u'
#define OP_DICT 'd'
#define OP_EMPTY_DICT '}'
#define OP_PROTO 0x80
#define OP_TUPLE1 0x85
#define OP_TUPLE2 0x86
#define OP_TUPLE3 0x87
#define OP_NEWTRUE 0x88
#define OP_NEWFALSE 0x89
#define OP_LONG1 0x8a
#define OP_LONG4 0x8b
#define OP_SHORT_BINUNICODE 0x8c
#define OP_BINUNICODE8 0x8d
#define OP_BINBYTES8 0x8e
#define OP_MEMOIZE 0x94
#define OP_FRAME 0x95
#define OP_BYTEARRAY8 0x96

/* ---- memo slots: 3 bits of kind, 29 bits of value ------------------------------------ */
enum {
    SK_OBJ = 1,     /* value: index into objs (a Python object built outside the traces) */
    SK_STR = 2,     /* value: string id */
    SK_FRAME = 3,   /* value: frame record */
    SK_STACK = 4,   /* value: stack id + 1 (0: an empty frame list) */
    SK_ENTRY = 5,   /* a trace entry: never built, so never to be referred to */
    SK_OPAQUE = 6,  /* a trace list, the list of traces, a container still being read */
    SK_DEFERRED = 7,  /* a worker's view of a slot another worker fills (parallel.c) */
};
#define SLOT(kind, value) (((uint32_t)(kind) << 29) | (uint32_t)(value))
#define SLOT_KIND(slot) ((slot) >> 29)
#define SLOT_VALUE(slot) ((slot) & 0x1FFFFFFFu)
#define SLOT_VALUE_MAX 0x1FFFFFFF
#define MEMO_CHUNK_BITS 20
#define MEMO_CHUNK (1 << MEMO_CHUNK_BITS)

/* ---- stack items ------------------------------------------------------------------------ */
enum { I_MARK = 1, I_OBJ, I_TRACE, I_ENTRY, I_ANNOT };

typedef struct {
    uint8_t kind;
    int32_t trace;  /* I_TRACE, I_ENTRY */
    int64_t row;    /* I_ENTRY; I_ANNOT: the annotation's row in the columns */
    PyObject *obj;  /* I_OBJ (owned) */
} Item;

/* ---- one device trace ------------------------------------------------------------------- */
typedef struct {
    IntCol action, addr, size, stream, stack, ctx, meta, device_free;
    Vec time;          /* double */
    int64_t appended;  /* rows the file has put in the list so far (APPENDS) */
    Map64 ctx_ids, meta_ids;  /* string id + 1 (0: None) -> local id */
    int32_t last_ctx, last_ctx_local, last_meta, last_meta_local;  /* the last lookup of each */
    Vec ctx_vals, meta_vals;  /* local id -> string id (-1: None) */
    PyObject *placeholder;    /* stands for the trace in the list of traces */
} Trace;

/* ---- one entry while it is read ------------------------------------------------------- */
typedef struct {
    uint32_t seen;  /* bit per K_* key */
    int32_t action, ctx, meta, stack;  /* string ids (ctx/meta: -1 for None), stack id */
    int64_t addr, size, stream, device_free;
    double time;
} Row;

typedef struct {
    const uint8_t *p, *end;
    int final;
} Cur;

#define STAGED_ROWS 256
#define STAGED_COLUMNS 8  /* action, addr, size, stream, stack, ctx, meta, device_free */
#define KEY_SHAPES 9  /* an entry's keys remembered by place: torch writes nine at most */

typedef struct {
    uint64_t bytes, mask;  /* the memo reference's bytes (little-endian), and which bytes they are */
    uint64_t epoch;        /* the scanner's memo_epoch + 1 when learnt: 0 never matches */
    uint8_t length;
    int8_t key;            /* K_* */
} KeyShape;

typedef struct {
    PyObject_HEAD
    uint32_t **memo;          /* chunks of MEMO_CHUNK slots */
    Py_ssize_t memo_chunks;
    int64_t memo_len;         /* slots filled; a worker: the read bound (2**32), its own slots in ``own`` */
    Vec own;                  /* a worker's own slots (uint32) until it knows where they go (guess) */
    int64_t own_count;        /* a worker's own slots, numbered from 0: its range's first slot */
    int64_t guess;            /* a worker's guess of its range's first slot (-1: none yet); from then on
                               * its own slots are in the memo at guess + j (the merge checks it) */
    int64_t prev_list_own;    /* the own slot of the frame list the last entry made, or -1 */
    int64_t p_memo;           /* a worker: the slots its parent had filled (read from the parent's) */
    int64_t this_list_own;
    Vec objs;                 /* PyObject* (owned), referred to by SK_OBJ slots */
    Vec obj_conv;             /* int32 per object: its string/frame/stack id once converted */
    Vec stack;                /* Item */
    StrTable strings;
    FrameTables ft;
    Vec frecs;                /* FrameRec */
    Vec rec_extras;           /* int32 (key, value) string id pairs of frame records */
    Vec fids;                 /* int32 scratch: the frames of the list being read */
    Vec actions;              /* int32 string id per local action id */
    Vec traces;               /* Trace* */
    Map64 frozen;             /* objects the traces refer to: changing one is refused */
    PyObject *dtlist;         /* the list of device traces (borrowed: it lives on the stack or in root) */
    /* The root's 'external_annotations' list (owned), whose items are read into the columns
     * below while ann_plain is 0; from ann_plain on, they are dicts again (annotations.c). */
    PyObject *annlist;
    int ann_plain;
    int64_t ann_appended;     /* rows the file has put in the list so far */
    Vec ann_device, ann_time; /* int64 and double per annotation */
    Vec ann_stage, ann_name;  /* int32 string ids */
    PyObject *root;           /* the unpickled object, once STOP is read */
    const uint8_t *base;      /* start of the buffer being fed */
    int64_t offset;           /* stream offset of base */
    int64_t max_frame_end;    /* every FRAME's end, which the stream must reach */
    int64_t stream_size;      /* the stream's length where known before reading (a file), else 0 */
    int32_t empty_str;        /* id of "" */
    struct {                  /* short strings seen lately (torch writes 'N/A' afresh each entry) */
        uint8_t length;
        char bytes[15];
        int32_t strid;
    } short_strings[512];
    /* The memo reference each of an entry's first keys was read from, and the key it named
     * (entry.c, read_key): torch refers to an entry's keys by the same slots every time, so
     * an entry whose key at a place has the same bytes names the same key, without a memo
     * lookup. Good for as long as no slot that held a string is written again (memo_epoch). */
    KeyShape key_shapes[KEY_SHAPES];
    uint64_t memo_epoch;          /* bumped whenever a memo slot filled before may hold something else */
    /* Memo slots the workers of a parallel pass read from (those filled when they were set
     * up: 0 before) that were written again since (a PUT over one): a worker set up before
     * such a write read the slot as it was, so its range is read again in order. */
    int64_t workers_memo, memo_rewrites;
    /* The last entries' integer values, one row a place (entry.c, commit), put in their
     * trace's columns STAGED_ROWS at a time: one width check a column for them all rather
     * than one a value. Each entry's time goes to the trace at once, so a trace's rows are
     * its time.n; whatever reads its other columns calls stage_flush first. */
    struct {
        Trace *trace;             /* whose rows they are (NULL: none) */
        int n;
        int64_t values[STAGED_COLUMNS][STAGED_ROWS];
    } staged;
    int done;
    int64_t rows_total;       /* trace entries read so far, every trace */
    int64_t containers;       /* lists, dicts and tuples built outside the traces */
    int64_t stop_offset;      /* the stream offset just after STOP */
    int64_t par_ranges, par_merged, par_discarded, par_merged_early;  /* what the parallel pass did (parallel.c) */
    double par_prefix_s, par_workers_s, par_merge_s;  /* and how long its steps took (for benchmarks/phases.py) */
    double *par_range_s;      /* each range's thread time, par_ranges of them (malloc'd; NULL before a parallel pass) */
    /* A worker of the parallel pass (parallel.c): it reads a range of entries with a copy of
     * the tables, and refers to memo slots filled before its range by deferred codes
     * (-2 - k, k indexing deferred_index), which the merge resolves. */
    int worker;
    Vec memo_own;             /* uint8 per memo chunk: the worker's own (else the parent's or shared) */
    Vec deferred_index;       /* int64 memo index of each k (the slot holds SK_DEFERRED k + 1) */
    Vec deferred_use;         /* uint8 per k: how it was used (USE_*) */
    Vec deferred_own;         /* int64 per k: its own slots filled when k was first used (a slot of
                               * its own it names must be one of those, as the unpickler's would) */
    Map64 deferred_actions;   /* deferred code -> local action id */
    /* Frame lists built outside the traces, as frame ids, converted before a parallel pass
     * (its workers cannot look at Python objects): per object, -1 or an index into
     * objlist_offsets (int64, n + 1) over objlist_fids (int32). */
    Vec obj_list, objlist_offsets, objlist_fids;
    const char *reason;       /* why the file is not handled */
    int refused;              /* the reason is an opcode that runs code: the plain path names it */
    int64_t reason_at;
} Scanner;

#define CONV_UNKNOWN INT32_MIN
#define CONV_BAD (INT32_MIN + 1)  /* an object the traces cannot use (a worker's pre-conversion) */
enum { USE_STR = 1, USE_FRAME = 2, USE_LIST = 4, USE_NONE = 8 };  /* how a deferred code was used */
#define IS_DEFERRED(code) ((code) <= -2)

/* The deferred code for memo slot ``index`` (a worker only), noting how it is used. */
int defer_code(Scanner *s, int64_t index, int use, int32_t *code);

/* A slot already deferred with this use: its code, without a call (the common case). */
static inline int deferred_known(const Scanner *s, uint32_t slot, int use, int32_t *code)
{
    if (SLOT_KIND(slot) != SK_DEFERRED || !SLOT_VALUE(slot)) return 0;
    int32_t k = (int32_t)SLOT_VALUE(slot) - 1;
    if ((((const uint8_t *)s->deferred_use.data)[k] & use) != use) return 0;
    *code = -2 - k;
    return 1;
}

/* failure with a reason (the caller falls back to the Python decoder) */
static inline uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t le64(const uint8_t *p) { return (uint64_t)le32(p) | ((uint64_t)le32(p + 4) << 32); }

int scan_fail(Scanner *s, const uint8_t *at, const char *reason);
#define NEED(c, n) ((c)->end - (c)->p >= (Py_ssize_t)(n))
#define SHORT(s, c) ((c)->final ? scan_fail((s), (c)->p, "the pickle ends inside an object") : ST_MORE)

int memo_set(Scanner *s, const uint8_t *at, int64_t index, uint32_t slot);
int memo_reserve(Scanner *s, int64_t upto);
int opt_memo(Scanner *s, Cur *c, uint32_t slot, int64_t *index);
int read_get_index(Scanner *s, Cur *c, int64_t *index);
int push_item(Scanner *s, Item item);
/* annotations.c: the external annotations in columns */
int is_annotations_position(Scanner *s);
int in_annotations(Scanner *s);
int parse_annotation(Scanner *s, Cur *c);
int annotations_plain(Scanner *s);
int append_annotations(Scanner *s, Py_ssize_t from);
PyObject *annotation_columns(Scanner *s);
void free_annotation_columns(Scanner *s);

int obj_to_strid(Scanner *s, const uint8_t *at, Py_ssize_t obj_index, int32_t *strid);
int obj_to_fid(Scanner *s, const uint8_t *at, PyObject *obj, int32_t *fid);
int obj_to_sid(Scanner *s, const uint8_t *at, Py_ssize_t obj_index, int32_t *sid);
int freeze(Scanner *s, PyObject *obj);
int worker_obj_sid(Scanner *s, const uint8_t *at, Py_ssize_t obj_index, int32_t *sid);
int is_frozen(Scanner *s, PyObject *obj);

/* The next opcode (not consumed), FRAME headers skipped: the C unpickler takes FRAME as an
 * opcode like any other that only asks for its bytes to exist, wherever it comes. */
static inline __attribute__((always_inline)) int next_op(Scanner *s, Cur *c, uint8_t *op)
{
    for (;;) {
        if (c->p >= c->end) return SHORT(s, c);
        if (*c->p != OP_FRAME) { *op = *c->p; return ST_OK; }
        if (!NEED(c, 9)) return SHORT(s, c);
        uint64_t length = le64(c->p + 1);
        /* memtui/load/shape.py's MAX_FRAME: picklers write frames of about 64 KiB, and the
         * shape check, which runs only when this scanner hands a file over, refuses longer ones */
        if (length > MAX_FRAME) return scan_fail(s, c->p, "a frame longer than picklers write");
        int64_t end = s->offset + (c->p - s->base) + 9 + (int64_t)length;
        /* refused at once, before the rest is built: finish() would only find it at the end */
        if (s->stream_size > 0 && end > s->stream_size) return scan_fail(s, c->p, "a frame runs past the end of the file");
        if (end > s->max_frame_end) s->max_frame_end = end;
        c->p += 9;
    }
}

/* Whether a slot may name a string (an entry's key): writing it again ends what read_key
 * remembers (entry.c). */
static inline int names_a_string(uint32_t slot) { return SLOT_KIND(slot) == SK_STR || SLOT_KIND(slot) == SK_OBJ; }

static inline int memo_get(Scanner *s, const uint8_t *at, int64_t index, uint32_t *slot)
{
    if (index < 0 || index >= s->memo_len) return scan_fail(s, at, "a reference to a memo slot never filled");
    *slot = s->memo[index >> MEMO_CHUNK_BITS][index & (MEMO_CHUNK - 1)];
    return ST_OK;
}

int parse_entry(Scanner *s, Cur *c, int32_t trace);
int stage_flush(Scanner *s);  /* the staged rows into their trace's columns: ST_OK or ST_ERROR */
PyObject *long_from_bytes(const uint8_t *p, Py_ssize_t n);
PyObject *frame_object(Scanner *s, int32_t frec);
PyObject *stack_object(Scanner *s, int32_t sid);

/* A LONG1/LONG4 payload (little-endian two's complement) as int64; 0 when it does not fit.
 * ``avail`` is how many bytes may be read from p (at least n): with 8 of them, one load. */
static inline __attribute__((always_inline)) int long_fits_at(const uint8_t *p, Py_ssize_t n, Py_ssize_t avail, int64_t *value)
{
    if (n == 0) { *value = 0; return 1; }
    if (n <= 8 && avail >= 8) {
        uint64_t u;
        memcpy(&u, p, 8);  /* little-endian hosts: the bytes as they are */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        int shift = 64 - 8 * (int)n;
        *value = shift ? (int64_t)(u << shift) >> shift : (int64_t)u;
        return 1;
#endif
    }
    uint8_t sign = (p[n - 1] & 0x80) ? 0xFF : 0x00;
    for (Py_ssize_t i = 8; i < n; i++)
        if (p[i] != sign) return 0;
    if (n > 8 && ((p[7] & 0x80) ? 0xFF : 0x00) != sign) return 0;
    uint64_t u = sign ? ~(uint64_t)0 : 0;
    Py_ssize_t m = n < 8 ? n : 8;
    for (Py_ssize_t i = 0; i < m; i++) {
        u &= ~((uint64_t)0xFF << (8 * i));
        u |= (uint64_t)p[i] << (8 * i);
    }
    *value = (int64_t)u;
    return 1;
}

static inline int long_fits(const uint8_t *p, Py_ssize_t n, int64_t *value) { return long_fits_at(p, n, n, value); }

/* How many slots are filled (a worker: of its own). */
static inline int64_t memo_count(const Scanner *s) { return s->worker ? s->own_count : s->memo_len; }

int own_set(Scanner *s, int64_t j, uint32_t slot);  /* parallel.c */
int guess_base(Scanner *s, int64_t index);

/* Add the next memo slot; the common case inline. */
/* Where a worker's own slot ``index`` lies in the memo in the common case: the worker knows
 * where its slots go, and the chunk there is its own already. NULL otherwise (own_set and
 * memo_set do the rest). */
static inline uint32_t *worker_place(Scanner *s, int64_t index)
{
    int64_t i = s->guess + index;
    if (s->guess < 0 || i >= ((int64_t)1 << 32) || !((const uint8_t *)s->memo_own.data)[i >> MEMO_CHUNK_BITS])
        return NULL;
    return &s->memo[i >> MEMO_CHUNK_BITS][i & (MEMO_CHUNK - 1)];
}

static inline int memo_append(Scanner *s, const uint8_t *at, uint32_t slot)
{
    if (s->worker) {
        uint32_t *place = worker_place(s, s->own_count);
        if (!place) return own_set(s, s->own_count, slot);
        *place = slot;
        s->own_count++;
        return ST_OK;
    }
    int64_t index = s->memo_len;
    if ((index & (MEMO_CHUNK - 1)) && index < ((int64_t)1 << 32)) {
        s->memo[index >> MEMO_CHUNK_BITS][index & (MEMO_CHUNK - 1)] = slot;
        s->memo_len++;
        return ST_OK;
    }
    return memo_set(s, at, index, slot);
}

/* opt_memo's common case, inline: a MEMOIZE right after the value (how protocol 4 and 5
 * write every trace value); anything else is opt_memo's. */
static inline int opt_memoize(Scanner *s, Cur *c, uint32_t slot, int64_t *index)
{
    if (c->p < c->end && *c->p == OP_MEMOIZE) {
        int64_t at = memo_count(s);
        int r = memo_append(s, c->p, slot);
        if (r) return r;
        c->p++;
        if (index) *index = at;
        return ST_OK;
    }
    return opt_memo(s, c, slot, index);
}

/* Fill the slot ``index`` that this entry reserved (opt_memo gave it): what memo_set does,
 * without the checks that a slot already filled needs. */
static inline int memo_fill(Scanner *s, const uint8_t *at, int64_t index, uint32_t slot)
{
    uint32_t *place = s->worker ? worker_place(s, index) : &s->memo[index >> MEMO_CHUNK_BITS][index & (MEMO_CHUNK - 1)];
    if (!place) return memo_set(s, at, index, slot);
    if (names_a_string(*place)) s->memo_epoch++;  /* a file that wrote a string there meanwhile */
    *place = slot;
    return ST_OK;
}

#endif
