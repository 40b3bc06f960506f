/* The memory curves over every event (memtui/analysis/live.py): allocated bytes from the
 * lives, reserved bytes from the segment events. numpy makes them from several temporaries
 * of every event (0.6 s at 10M events, the explorer's largest step before its first screen
 * when the cache does not keep them); here each is a few passes on the process's cores,
 * without the GIL (run_pool, parallel.c):
 *
 * - the column's pages are first touched in parts of events, each by its own thread: the
 *   first touch of 80 MB at 10M events was 40-50 ms of the kernel's on one thread;
 * - the allocated curve's lives are scattered a slice of lives per thread, each change an
 *   atomic add (two lives of two slices may start or stop at one event);
 * - the running sum is taken in two passes: each part's own sum, then each part written from
 *   the sum of the parts before it.
 *
 * The sums are of int64 in two's complement (unsigned here, so a hostile file's overflow is
 * defined): exact for any real file, whose sizes add up far below 2**63. Unsigned addition
 * is associative, so the parts' order of adding gives the one-thread curve, value for value. */
#include "native.h"

#include <stdlib.h>

/* Atomic adds where the compiler has them; elsewhere the scatter runs on one thread. */
#if defined(__GNUC__) || defined(__clang__)
#define HAVE_ATOMIC_ADD 1
#define ADD_AT(slot, v) __atomic_fetch_add((slot), (v), __ATOMIC_RELAXED)
#else
#define HAVE_ATOMIC_ADD 0
#define ADD_AT(slot, v) (*(slot) += (v))
#endif

/* The same length for every view, else TypeError. */
static int same_length(const IntView *views, int count, Py_ssize_t n)
{
    for (int j = 0; j < count; j++)
        if (views[j].n != n) {
            PyErr_SetString(PyExc_TypeError, "columns of one length are needed");
            return -1;
        }
    return 0;
}

typedef struct {
    const IntView *v;     /* allocated: start, stop_first, stop_then, size; reserved: action, size */
    uint64_t *curve;      /* n values */
    Py_ssize_t n;
    Py_ssize_t lo, hi;    /* events of this part, or (scatter) lives of this slice */
    uint64_t sum;         /* this part's own sum; (scatter) the bytes of its lives begun before the trace */
    uint64_t held;        /* what is held before this part's first event */
    int atomic;           /* (scatter) other slices write the column too */
    const int8_t *sign;   /* reserved: per action code, +1, -1 or 0 */
    Py_ssize_t codes;
} CurveJob;

/* The part's pages touched, one write each: calloc's column is zero already (fresh pages from
 * the system, or cleared by calloc itself), and the kernel zeroes a page as it is first
 * written, so this only has each part's pages made on its own thread. */
static void *touch_part(void *arg)
{
    CurveJob *j = arg;
    for (Py_ssize_t i = j->lo; i < j->hi; i += 4096 / sizeof(uint64_t)) j->curve[i] = 0;
    return NULL;
}

/* Each life of the slice: +size at its start, -size at its stop. */
static void *scatter_lives(void *arg)
{
    CurveJob *j = arg;
    const IntView *v = j->v;
    uint64_t *curve = j->curve, before = 0;
    const Py_ssize_t n = j->n, hi = j->hi;
    for (Py_ssize_t i = j->lo; i < hi; i++) {
        uint64_t bytes = (uint64_t)view_get(&v[3], i);
        int64_t start = view_get(&v[0], i), stop = view_get(&v[1], i);
        if (stop < 0) stop = view_get(&v[2], i);
        if (start < 0) before += bytes;
        else if (start < n) {
            if (j->atomic) ADD_AT(&curve[start], bytes);
            else curve[start] += bytes;
        }
        if (stop >= 0 && stop < n) {
            if (j->atomic) ADD_AT(&curve[stop], -bytes);
            else curve[stop] -= bytes;
        }
    }
    j->sum = before;
    return NULL;
}

static void *sum_part(void *arg)
{
    CurveJob *j = arg;
    uint64_t sum = 0;
    for (Py_ssize_t i = j->lo; i < j->hi; i++) sum += j->curve[i];
    j->sum = sum;
    return NULL;
}

static void *running_part(void *arg)
{
    CurveJob *j = arg;
    uint64_t held = j->held, *curve = j->curve;
    for (Py_ssize_t i = j->lo, hi = j->hi; i < hi; i++) {
        held += curve[i];
        curve[i] = held;
    }
    return NULL;
}

/* The signed size of each event of the part: its own sum (``curve`` NULL), or written as the
 * running value from ``held``. */
static void *reserved_part(void *arg)
{
    CurveJob *j = arg;
    const IntView *v = j->v;
    const int8_t *sign = j->sign;
    const Py_ssize_t codes = j->codes, hi = j->hi;
    uint64_t held = j->held, *curve = j->curve;
    for (Py_ssize_t i = j->lo; i < hi; i++) {
        int64_t code = view_get(&v[0], i);
        if (code >= 0 && code < codes && sign[code])
            held += sign[code] > 0 ? (uint64_t)view_get(&v[1], i) : -(uint64_t)view_get(&v[1], i);
        if (curve) curve[i] = held;
    }
    j->sum = held - j->held;
    return NULL;
}

/* Parts of n events, each job's lo and hi set, the rest zero. NULL (MemoryError) when not had. */
static CurveJob *curve_parts(Py_ssize_t n, int threads, int *parts)
{
    *parts = parts_for(n, threads);
    CurveJob *jobs = calloc((size_t)*parts, sizeof(CurveJob));
    if (!jobs) { PyErr_NoMemory(); return NULL; }
    for (int p = 0; p < *parts; p++) {
        jobs[p].lo = part_start(n, *parts, p);
        jobs[p].hi = part_stop(n, *parts, p);
        jobs[p].n = n;
    }
    return jobs;
}

/* allocated_curve(start, stop_first, stop_then, size, n, base=0, threads=1) -> buffer of n int64:
 * each life holds ``size`` bytes from its start event to its stop (``stop_first`` where that
 * is not negative, else ``stop_then``); a negative start is before the first event (its
 * bytes are in the curve throughout), a stop outside 0..n-1 never comes. The curve is
 * ``base`` plus the bytes held after each event. */
PyObject *native_allocated_curve(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *objs[4];
    Py_ssize_t n;
    long long base = 0;
    int threads = 1;
    if (!PyArg_ParseTuple(args, "OOOOn|Li", &objs[0], &objs[1], &objs[2], &objs[3], &n, &base, &threads)) return NULL;
    if (n < 0) { PyErr_SetString(PyExc_ValueError, "n must not be negative"); return NULL; }
    Py_buffer bufs[4] = {{0}};
    IntView v[4];
    static const char *names[4] = {"start", "stop_first", "stop_then", "size"};
    PyObject *result = NULL;
    uint64_t *curve = NULL;
    CurveJob *parts = NULL, *slices = NULL;
    int n_parts = 0, n_slices = 0, got = 0;
    for (; got < 4; got++) {
        if (PyObject_GetBuffer(objs[got], &bufs[got], PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) goto done;
        if (int_view(&bufs[got], &v[got], names[got])) { got++; goto done; }
    }
    if (same_length(v, 4, v[0].n)) goto done;
    if (!(curve = large_calloc((size_t)(n > 0 ? n : 1), sizeof(uint64_t)))) { PyErr_NoMemory(); goto done; }
    if (!(parts = curve_parts(n, threads, &n_parts)) || !(slices = curve_parts(v[0].n, HAVE_ATOMIC_ADD ? threads : 1, &n_slices)))
        goto done;
    for (int p = 0; p < n_parts; p++) parts[p].curve = curve;
    for (int p = 0; p < n_slices; p++) {
        slices[p].curve = curve;
        slices[p].n = n;
        slices[p].v = v;
        slices[p].atomic = n_slices > 1;
    }
    Py_BEGIN_ALLOW_THREADS  /* the buffers stay exported, so the arrays cannot change meanwhile */
    if (n_parts > 1) run_pool(touch_part, parts, sizeof(CurveJob), n_parts, n_parts);
    run_pool(scatter_lives, slices, sizeof(CurveJob), n_slices, n_slices);
    uint64_t held = (uint64_t)base;
    for (int p = 0; p < n_slices; p++) held += slices[p].sum;  /* the lives begun before the trace */
    if (n_parts > 1) run_pool(sum_part, parts, sizeof(CurveJob), n_parts, n_parts);
    for (int p = 0; p < n_parts; p++) {
        parts[p].held = held;
        held += parts[p].sum;
    }
    run_pool(running_part, parts, sizeof(CurveJob), n_parts, n_parts);
    Py_END_ALLOW_THREADS
    result = buffer_from_memory(curve, n * (Py_ssize_t)sizeof(int64_t));
    curve = NULL;  /* the buffer owns it, or freed it */
done:
    free(curve);
    free(parts);
    free(slices);
    for (int j = 0; j < got; j++) PyBuffer_Release(&bufs[j]);
    return result;
}

/* reserved_curve(action, size, signs, base=0, threads=1) -> buffer of len(action) int64:
 * ``base`` plus the running sum of signs[action] * size over the events (signs: one signed
 * byte per action code, +1 where the action maps memory, -1 where it releases it; a code
 * past its end counts 0). */
PyObject *native_reserved_curve(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *ao, *so;
    Py_buffer ab = {0}, sb = {0}, signs = {0};
    PyObject *result = NULL;
    uint64_t *curve = NULL;
    CurveJob *parts = NULL;
    long long base = 0;
    int threads = 1, n_parts = 0;
    if (!PyArg_ParseTuple(args, "OOy*|Li", &ao, &so, &signs, &base, &threads)) return NULL;
    IntView v[2];
    if (PyObject_GetBuffer(ao, &ab, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) goto done;
    if (PyObject_GetBuffer(so, &sb, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) goto done;
    if (int_view(&ab, &v[0], "action") || int_view(&sb, &v[1], "size") || same_length(&v[1], 1, v[0].n)) goto done;
    Py_ssize_t n = v[0].n;
    if (!(curve = large_malloc((size_t)(n > 0 ? n : 1) * sizeof(uint64_t)))) { PyErr_NoMemory(); goto done; }
    if (!(parts = curve_parts(n, threads, &n_parts))) goto done;
    for (int p = 0; p < n_parts; p++) {
        parts[p].v = v;
        parts[p].sign = signs.buf;
        parts[p].codes = signs.len;
    }
    Py_BEGIN_ALLOW_THREADS
    if (n_parts > 1) run_pool(reserved_part, parts, sizeof(CurveJob), n_parts, n_parts);  /* each part's sum */
    uint64_t held = (uint64_t)base;
    for (int p = 0; p < n_parts; p++) {
        parts[p].held = held;
        parts[p].curve = curve;
        held += parts[p].sum;
    }
    run_pool(reserved_part, parts, sizeof(CurveJob), n_parts, n_parts);  /* each part written */
    Py_END_ALLOW_THREADS
    result = buffer_from_memory(curve, n * (Py_ssize_t)sizeof(int64_t));
    curve = NULL;
done:
    free(curve);
    free(parts);
    if (ab.obj) PyBuffer_Release(&ab);
    if (sb.obj) PyBuffer_Release(&sb);
    PyBuffer_Release(&signs);
    return result;
}
#undef ADD_AT
#undef HAVE_ATOMIC_ADD
