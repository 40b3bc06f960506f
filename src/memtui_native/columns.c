/* Passes over whole columns of the model (memtui/model/column_passes.py): the scanner's ids
 * looked up in the model's tables with the bounds of what comes out, infinite times made no
 * time, the events per action code, the rows of some codes, the least and greatest time.
 *
 * numpy does each of these as several passes and temporaries (a lookup of ten million ids
 * 59 ms on one core, counting them 105 ms, the bool mask of a comparison and its nonzero),
 * taken a slice at a time by a pool of Python threads that hand the GIL back and forth: on
 * the 16-core host the model's columns of 10M events took 80 ms, and the figures `info`
 * prints 45 ms. Here each is one pass, its rows cut into parts run on threads without the
 * GIL (run_pool, parallel.c), each part keeping its own bounds or counts until the parts are
 * put together. The answers are numpy's, value for value (tests compare them).
 */
#include "native.h"

#include <math.h>
#include <stdlib.h>

/* Rows a part takes at least: a part is a millisecond or two of one core, and a thread that
 * must wait for a core (the scan's thread pairs beside the model on two cores) waits a
 * scheduler's slice, several milliseconds; at a million rows on two cores, parts of 65,536
 * rows made the model's passes 22 ms instead of 11. */
static Py_ssize_t PART_ROWS = (Py_ssize_t)1 << 20;  /* tests make it a few rows (_part_rows) */
#define MAX_COLUMN_PARTS 64

static int parts_for(Py_ssize_t n, int threads)
{
    Py_ssize_t most = n / PART_ROWS + 1;
    int parts = threads < 1 ? 1 : threads;
    if (parts > MAX_COLUMN_PARTS) parts = MAX_COLUMN_PARTS;
    return most < parts ? (int)most : parts;
}

/* _part_rows(rows) -> the old value: tests make parts a few rows long, so that small columns
 * are cut into many parts (0 or less changes nothing). */
static PyObject *native_part_rows(PyObject *self, PyObject *args)
{
    (void)self;
    Py_ssize_t rows;
    if (!PyArg_ParseTuple(args, "n", &rows)) return NULL;
    Py_ssize_t old = PART_ROWS;
    if (rows > 0) PART_ROWS = rows;
    return PyLong_FromSsize_t(old);
}

static inline Py_ssize_t part_start(Py_ssize_t n, int parts, int p) { return n / parts * p; }
static inline Py_ssize_t part_stop(Py_ssize_t n, int parts, int p) { return p + 1 < parts ? n / parts * (p + 1) : n; }

/* A signed integer view of a buffer (int_view, lifetimes.c, and signed only), else TypeError. */
static int signed_view(Py_buffer *b, IntView *v, const char *what)
{
    if (int_view(b, v, what)) return -1;
    if (!v->is_signed) {
        PyErr_Format(PyExc_TypeError, "%s: signed integers are needed", what);
        return -1;
    }
    return 0;
}

/* A contiguous 1-D buffer of doubles, else TypeError. */
static int double_view(Py_buffer *b, const char *what)
{
    const char *f = b->format ? b->format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    if (b->ndim != 1 || strcmp(f, "d") != 0 || b->itemsize != 8) {
        PyErr_Format(PyExc_TypeError, "%s: a contiguous 1-D array of float64 is needed", what);
        return -1;
    }
    return 0;
}

/* ---- remap: out[i] = lut[ids[i]] (a negative id counts from the end), with out's bounds -------- */

typedef struct {
    IntView ids;
    const int64_t *lut;  /* NULL: the bounds of the ids themselves */
    Py_ssize_t lut_n;
    char *out;
    int out_width;
    Py_ssize_t lo, hi;
    int64_t low, high;
    int outside;  /* an id outside the table was met */
    uint8_t *used;  /* per table entry: read by this part (lut_n of them, zeroed) */
} RemapJob;

/* An id outside the table reads entry 0 and is noted: nothing written then is kept. The
 * bounds of what is written are those of the table's entries used, marked as they are read
 * (a table of a few thousand entries: no comparison per row). */
#define REMAP_ROWS(IT, OT)                                                                    \
    do {                                                                                      \
        /* locals, not the job's fields: a store to ``used`` (bytes may alias anything) would \
         * have every field read again for each row */                                        \
        const IT *restrict ids = (const IT *)j->ids.data;                                     \
        OT *restrict out = (OT *)j->out;                                                      \
        const int64_t *restrict lut = j->lut;                                                 \
        uint8_t *restrict used = j->used;                                                     \
        const uint64_t m = (uint64_t)j->lut_n;                                                \
        const Py_ssize_t hi = j->hi;                                                          \
        int outside = 0;                                                                      \
        for (Py_ssize_t i = j->lo; i < hi; i++) {                                             \
            int64_t id = (int64_t)ids[i];                                                     \
            uint64_t at = (uint64_t)(id < 0 ? id + (int64_t)m : id);                          \
            outside |= at >= m;                                                               \
            at = at < m ? at : 0;                                                             \
            out[i] = (OT)lut[at];                                                             \
            used[at] = 1;                                                                     \
        }                                                                                     \
        j->outside = outside;                                                                 \
    } while (0)

#define REMAP_TO(IT)                                                     \
    do {                                                                 \
        switch (j->out_width) {                                          \
        case 1: REMAP_ROWS(IT, int8_t); break;                           \
        case 2: REMAP_ROWS(IT, int16_t); break;                          \
        case 4: REMAP_ROWS(IT, int32_t); break;                          \
        default: REMAP_ROWS(IT, int64_t); break;                         \
        }                                                                \
    } while (0)

/* Four bounds at a time, so that no comparison waits for the one before it. */
#define MIN_MAX(v, l, h)              \
    do {                              \
        l = (v) < l ? (v) : l;        \
        h = (v) > h ? (v) : h;        \
    } while (0)

/* l, h: the bounds of both sets, from those of each (a set of none has l > h, and changes neither). */
#define MERGE_BOUNDS(l, h, l2, h2)    \
    do {                              \
        l = (l2) < l ? (l2) : l;      \
        h = (h2) > h ? (h2) : h;      \
    } while (0)

#define BOUND_ROWS(IT)                                                                        \
    do {                                                                                      \
        const IT *restrict ids = (const IT *)j->ids.data;                                     \
        const Py_ssize_t hi = j->hi;                                                          \
        int64_t l0 = INT64_MAX, l1 = INT64_MAX, l2 = INT64_MAX, l3 = INT64_MAX;               \
        int64_t h0 = INT64_MIN, h1 = INT64_MIN, h2 = INT64_MIN, h3 = INT64_MIN;               \
        Py_ssize_t i = j->lo;                                                                 \
        for (; i + 4 <= hi; i += 4) {                                                         \
            MIN_MAX((int64_t)ids[i], l0, h0);                                                 \
            MIN_MAX((int64_t)ids[i + 1], l1, h1);                                             \
            MIN_MAX((int64_t)ids[i + 2], l2, h2);                                             \
            MIN_MAX((int64_t)ids[i + 3], l3, h3);                                             \
        }                                                                                     \
        for (; i < hi; i++) MIN_MAX((int64_t)ids[i], l0, h0);                                 \
        MERGE_BOUNDS(l0, h0, l1, h1); MERGE_BOUNDS(l0, h0, l2, h2); MERGE_BOUNDS(l0, h0, l3, h3); \
        low = l0;                                                                             \
        high = h0;                                                                            \
    } while (0)

static void *remap_part(void *arg)
{
    RemapJob *j = arg;
    int64_t low = INT64_MAX, high = INT64_MIN;
    switch (j->ids.width * (j->lut ? 1 : -1)) {
    case 1: REMAP_TO(int8_t); break;
    case 2: REMAP_TO(int16_t); break;
    case 4: REMAP_TO(int32_t); break;
    case 8: REMAP_TO(int64_t); break;
    case -1: BOUND_ROWS(int8_t); break;
    case -2: BOUND_ROWS(int16_t); break;
    case -4: BOUND_ROWS(int32_t); break;
    default: BOUND_ROWS(int64_t); break;
    }
    if (j->lut)
        for (Py_ssize_t k = 0; k < j->lut_n; k++)
            if (j->used[k]) MIN_MAX(j->lut[k], low, high);
    j->low = low;
    j->high = high;
    return NULL;
}
#undef BOUND_ROWS
#undef REMAP_TO
#undef REMAP_ROWS

/* remap(ids, lut, out, threads) -> (low, high) of what out holds, or None for no rows.
 * lut and out None: the bounds of ids. ValueError for an id outside the table. */
PyObject *native_remap(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *ids_obj, *lut_obj, *out_obj, *result = NULL;
    int threads = 1;
    if (!PyArg_ParseTuple(args, "OOO|i", &ids_obj, &lut_obj, &out_obj, &threads)) return NULL;
    if ((lut_obj == Py_None) != (out_obj == Py_None)) {
        PyErr_SetString(PyExc_TypeError, "a table and an output, or neither");
        return NULL;
    }
    Py_buffer ib = {0}, lb = {0}, ob = {0};
    IntView ids, lut = {0}, out = {0};
    int64_t *lut64 = NULL;
    RemapJob *jobs = NULL;
    int parts = 0;
    int flags = PyBUF_FORMAT | PyBUF_C_CONTIGUOUS;
    if (PyObject_GetBuffer(ids_obj, &ib, flags) < 0) return NULL;
    if (signed_view(&ib, &ids, "ids")) goto done;
    if (lut_obj != Py_None) {
        if (PyObject_GetBuffer(lut_obj, &lb, flags) < 0) goto done;
        if (signed_view(&lb, &lut, "lut")) goto done;
        if (PyObject_GetBuffer(out_obj, &ob, flags | PyBUF_WRITABLE) < 0) goto done;
        if (signed_view(&ob, &out, "out")) goto done;
        if (out.n != ids.n || out.width != lut.width) {
            PyErr_SetString(PyExc_TypeError, "out: as long as the ids, of the table's type");
            goto done;
        }
        lut64 = calloc((size_t)(lut.n ? lut.n : 1), sizeof(int64_t));  /* entry 0 read (and refused) for an empty table */
        if (!lut64) { PyErr_NoMemory(); goto done; }
        for (Py_ssize_t k = 0; k < lut.n; k++) lut64[k] = view_get(&lut, k);
    }
    Py_ssize_t n = ids.n;
    if (n == 0) { result = Py_NewRef(Py_None); goto done; }
    parts = parts_for(n, threads);
    jobs = calloc((size_t)parts, sizeof(RemapJob));
    if (!jobs) { PyErr_NoMemory(); goto done; }
    for (int p = 0; p < parts; p++) {
        jobs[p] = (RemapJob){ids, lut64, lut64 ? lut.n : 0, lut64 ? ob.buf : NULL, lut64 ? out.width : 0,
                             part_start(n, parts, p), part_stop(n, parts, p), 0, 0, 0, NULL};
        if (lut64 && !(jobs[p].used = calloc((size_t)(lut.n ? lut.n : 1), 1))) { PyErr_NoMemory(); goto done; }
    }
    Py_BEGIN_ALLOW_THREADS  /* the buffers stay exported, so the arrays cannot change meanwhile */
    run_pool(remap_part, jobs, sizeof(RemapJob), parts, parts);
    Py_END_ALLOW_THREADS
    int64_t low = INT64_MAX, high = INT64_MIN;
    for (int p = 0; p < parts; p++) {
        if (jobs[p].outside) {
            PyErr_SetString(PyExc_ValueError, "an id outside the table");
            goto done;
        }
        if (jobs[p].low < low) low = jobs[p].low;
        if (jobs[p].high > high) high = jobs[p].high;
    }
    result = Py_BuildValue("(LL)", (long long)low, (long long)high);
done:
    for (int p = 0; jobs && p < parts; p++) free(jobs[p].used);
    free(jobs);
    free(lut64);
    PyBuffer_Release(&ib);
    PyBuffer_Release(&lb);
    PyBuffer_Release(&ob);
    return result;
}

/* ---- times: infinities made NaN; the least and greatest time ---------------------------------- */

typedef struct {
    double *values;
    Py_ssize_t lo, hi;
    double low, high;
} TimesJob;

static void *finite_part(void *arg)
{
    TimesJob *j = arg;
    for (Py_ssize_t i = j->lo; i < j->hi; i++)
        if (isinf(j->values[i])) j->values[i] = NAN;
    return NULL;
}

static void *span_part(void *arg)
{
    TimesJob *j = arg;
    /* A comparison with NaN (no time) is false, so it changes neither bound, as numpy's fmin
     * and fmax skip it; four bounds at a time, so that no comparison waits for the one before. */
    const double *v = j->values;
    double l0 = INFINITY, l1 = INFINITY, l2 = INFINITY, l3 = INFINITY;
    double h0 = -INFINITY, h1 = -INFINITY, h2 = -INFINITY, h3 = -INFINITY;
    Py_ssize_t i = j->lo;
    for (; i + 4 <= j->hi; i += 4) {
        MIN_MAX(v[i], l0, h0);
        MIN_MAX(v[i + 1], l1, h1);
        MIN_MAX(v[i + 2], l2, h2);
        MIN_MAX(v[i + 3], l3, h3);
    }
    for (; i < j->hi; i++) MIN_MAX(v[i], l0, h0);
    MERGE_BOUNDS(l0, h0, l1, h1);
    MERGE_BOUNDS(l0, h0, l2, h2);
    MERGE_BOUNDS(l0, h0, l3, h3);
    int none = l0 > h0;  /* no value but NaN: still the starting bounds */
    j->low = none ? NAN : l0;
    j->high = none ? NAN : h0;
    return NULL;
}

/* Runs fn over the doubles of obj in parts; jobs[0..parts) hold the parts after. */
static int times_pass(PyObject *obj, int threads, int writable, void *(*fn)(void *), TimesJob **jobs_out,
                      int *parts_out)
{
    Py_buffer b = {0};
    int flags = PyBUF_FORMAT | PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &b, flags) < 0) return -1;
    if (double_view(&b, "times")) { PyBuffer_Release(&b); return -1; }
    Py_ssize_t n = b.len / 8;
    int parts = parts_for(n, threads);
    TimesJob *jobs = calloc((size_t)parts, sizeof(TimesJob));
    if (!jobs) { PyBuffer_Release(&b); PyErr_NoMemory(); return -1; }
    for (int p = 0; p < parts; p++) jobs[p] = (TimesJob){b.buf, part_start(n, parts, p), part_stop(n, parts, p), NAN, NAN};
    Py_BEGIN_ALLOW_THREADS
    run_pool(fn, jobs, sizeof(TimesJob), parts, parts);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    *jobs_out = jobs;
    *parts_out = parts;
    return 0;
}

/* finite_times(times, threads) -> None: each infinite time (either sign) made NaN, in place. */
PyObject *native_finite_times(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *obj;
    int threads = 1, parts;
    TimesJob *jobs;
    if (!PyArg_ParseTuple(args, "O|i", &obj, &threads)) return NULL;
    if (times_pass(obj, threads, 1, finite_part, &jobs, &parts)) return NULL;
    free(jobs);
    Py_RETURN_NONE;
}

/* time_span(times, threads) -> (least, greatest) of the times that are not NaN; NaN for none. */
PyObject *native_time_span(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *obj;
    int threads = 1, parts;
    TimesJob *jobs;
    if (!PyArg_ParseTuple(args, "O|i", &obj, &threads)) return NULL;
    if (times_pass(obj, threads, 0, span_part, &jobs, &parts)) return NULL;
    double low = NAN, high = NAN;
    for (int p = 0; p < parts; p++) {
        if (!isnan(jobs[p].low) && !(jobs[p].low >= low)) low = jobs[p].low;
        if (!isnan(jobs[p].high) && !(jobs[p].high <= high)) high = jobs[p].high;
    }
    free(jobs);
    return Py_BuildValue("(dd)", low, high);
}

/* ---- codes: the events of each code, the rows of some codes ----------------------------------- */

/* Codes of one or two bytes (the model's action codes): a table entry per possible value. */
#define CODE_VALUES 65536
#define CODE_INDEX(v) ((Py_ssize_t)(v) + 32768)

typedef struct {
    IntView codes;
    Py_ssize_t lo, hi;
    int64_t *counts;       /* code_counts: CODE_VALUES entries of this part's own */
    const uint8_t *wanted; /* positions: CODE_VALUES flags */
    int64_t *at;           /* positions: where this part's rows go (NULL while counting) */
    Py_ssize_t found;
} CodesJob;

static void *count_part(void *arg)
{
    CodesJob *j = arg;
    int64_t *restrict counts = j->counts;  /* a local: a count's store would have j->hi read again each row */
    const Py_ssize_t hi = j->hi;
    if (j->codes.width == 1) {
        const int8_t *restrict c = (const int8_t *)j->codes.data;
        for (Py_ssize_t i = j->lo; i < hi; i++) counts[CODE_INDEX(c[i])]++;
    } else {
        const int16_t *restrict c = (const int16_t *)j->codes.data;
        for (Py_ssize_t i = j->lo; i < hi; i++) counts[CODE_INDEX(c[i])]++;
    }
    return NULL;
}

#define POSITION_ROWS(type)                                                                 \
    do {                                                                                    \
        const type *restrict c = (const type *)j->codes.data;                              \
        const uint8_t *restrict wanted = j->wanted;                                        \
        int64_t *restrict at = j->at;                                                      \
        const Py_ssize_t hi = j->hi;                                                       \
        Py_ssize_t found = 0;                                                               \
        if (!at)                                                                            \
            for (Py_ssize_t i = j->lo; i < hi; i++) found += wanted[CODE_INDEX(c[i])];      \
        else                                                                                \
            for (Py_ssize_t i = j->lo; i < hi; i++)                                         \
                if (wanted[CODE_INDEX(c[i])]) at[found++] = i;                              \
        j->found = found;                                                                   \
    } while (0)

static void *position_part(void *arg)
{
    CodesJob *j = arg;
    if (j->codes.width == 1) POSITION_ROWS(int8_t);
    else POSITION_ROWS(int16_t);
    return NULL;
}
#undef POSITION_ROWS

/* A view of one- or two-byte signed codes, else TypeError (the caller counts wider ones with numpy). */
static int codes_view(PyObject *obj, Py_buffer *b, IntView *v)
{
    if (PyObject_GetBuffer(obj, b, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (signed_view(b, v, "codes")) return -1;
    if (v->width > 2) {
        PyErr_SetString(PyExc_TypeError, "codes: one or two bytes are needed");
        return -1;
    }
    return 0;
}

/* code_counts(codes, threads) -> buffer of int64: the events of each code 0..highest, as
 * numpy's bincount; ValueError for a negative code. */
PyObject *native_code_counts(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *obj, *result = NULL;
    int threads = 1;
    if (!PyArg_ParseTuple(args, "O|i", &obj, &threads)) return NULL;
    Py_buffer b = {0};
    IntView codes;
    CodesJob *jobs = NULL;
    int64_t *counts = NULL;
    int parts = 0;
    if (codes_view(obj, &b, &codes)) goto done;
    parts = parts_for(codes.n, threads);
    jobs = calloc((size_t)parts, sizeof(CodesJob));
    if (!jobs) { PyErr_NoMemory(); goto done; }
    for (int p = 0; p < parts; p++) {
        jobs[p] = (CodesJob){codes, part_start(codes.n, parts, p), part_stop(codes.n, parts, p), NULL, NULL, NULL, 0};
        if (!(jobs[p].counts = calloc(CODE_VALUES, sizeof(int64_t)))) { PyErr_NoMemory(); goto done; }
    }
    Py_BEGIN_ALLOW_THREADS
    run_pool(count_part, jobs, sizeof(CodesJob), parts, parts);
    Py_END_ALLOW_THREADS
    Py_ssize_t length = 0;
    for (Py_ssize_t v = 0; v < CODE_VALUES; v++) {
        int64_t total = 0;
        for (int p = 0; p < parts; p++) total += jobs[p].counts[v];
        jobs[0].counts[v] = total;
        if (total && v < CODE_INDEX(0)) {
            PyErr_SetString(PyExc_ValueError, "a negative code");
            goto done;
        }
        if (total) length = v - CODE_INDEX(0) + 1;
    }
    counts = malloc((size_t)(length ? length : 1) * sizeof(int64_t));
    if (!counts) { PyErr_NoMemory(); goto done; }
    memcpy(counts, jobs[0].counts + CODE_INDEX(0), (size_t)length * sizeof(int64_t));
    result = buffer_from_memory(counts, length * (Py_ssize_t)sizeof(int64_t));  /* owns counts, even on failure */
done:
    for (int p = 0; jobs && p < parts; p++) free(jobs[p].counts);
    free(jobs);
    PyBuffer_Release(&b);
    return result;
}

/* positions(codes, wanted, threads) -> buffer of int64: the rows whose code is one of
 * ``wanted``, ascending (numpy's flatnonzero of the membership). */
PyObject *native_positions(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *obj, *wanted_obj, *result = NULL;
    int threads = 1;
    if (!PyArg_ParseTuple(args, "OO|i", &obj, &wanted_obj, &threads)) return NULL;
    Py_buffer b = {0};
    IntView codes;
    CodesJob *jobs = NULL;
    uint8_t *wanted = NULL;
    int64_t *rows = NULL;
    if (codes_view(obj, &b, &codes)) goto done;
    if (!(wanted = calloc(CODE_VALUES, 1))) { PyErr_NoMemory(); goto done; }
    if (roles_from(wanted_obj, wanted, 1)) goto done;  /* lifetimes.c: codes outside two bytes match nothing */
    int parts = parts_for(codes.n, threads);
    jobs = calloc((size_t)parts, sizeof(CodesJob));
    if (!jobs) { PyErr_NoMemory(); goto done; }
    for (int p = 0; p < parts; p++)
        jobs[p] = (CodesJob){codes, part_start(codes.n, parts, p), part_stop(codes.n, parts, p), NULL, wanted, NULL, 0};
    Py_ssize_t total = 0;
    Py_BEGIN_ALLOW_THREADS
    run_pool(position_part, jobs, sizeof(CodesJob), parts, parts);  /* counted first: each part's place */
    Py_END_ALLOW_THREADS
    for (int p = 0; p < parts; p++) total += jobs[p].found;
    rows = large_malloc((size_t)(total ? total : 1) * sizeof(int64_t));
    if (!rows) { PyErr_NoMemory(); goto done; }
    if (total) {
        Py_ssize_t at = 0;
        for (int p = 0; p < parts; p++) {
            jobs[p].at = rows + at;
            at += jobs[p].found;
        }
        Py_BEGIN_ALLOW_THREADS
        run_pool(position_part, jobs, sizeof(CodesJob), parts, parts);
        Py_END_ALLOW_THREADS
    }
    result = buffer_from_memory(rows, total * (Py_ssize_t)sizeof(int64_t));  /* owns rows, even on failure */
done:
    free(jobs);
    free(wanted);
    PyBuffer_Release(&b);
    return result;
}
#undef CODE_INDEX
#undef CODE_VALUES
#undef MIN_MAX
#undef MERGE_BOUNDS
