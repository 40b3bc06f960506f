/* The memory curves over every event (memtui/analysis/live.py): allocated bytes from the
 * lives, reserved bytes from the segment events. numpy makes them from several temporaries
 * of every event (0.6 s at 10M events, the explorer's largest step before its first screen
 * when the cache does not keep them); here each is one zeroed column and one pass.
 *
 * The sums are of int64 in two's complement (unsigned here, so a hostile file's overflow is
 * defined): exact for any real file, whose sizes add up far below 2**63. */
#include "native.h"

#include <stdlib.h>

/* One int64 result column of n values, zeroed; NULL (and MemoryError) when it cannot be had. */
static int64_t *zeroed_column(Py_ssize_t n)
{
    int64_t *out = calloc((size_t)(n > 0 ? n : 1), sizeof(int64_t));
    if (!out) PyErr_NoMemory();
    return out;
}

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

/* allocated_curve(start, stop_first, stop_then, size, n) -> buffer of n int64:
 * each life holds ``size`` bytes from its start event to its stop (``stop_first`` where that
 * is not negative, else ``stop_then``); a negative start is before the first event (its
 * bytes are in the curve throughout), a stop outside 0..n-1 never comes. The curve is the bytes
 * held after each event. */
PyObject *native_allocated_curve(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *objs[4];
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OOOOn", &objs[0], &objs[1], &objs[2], &objs[3], &n)) return NULL;
    if (n < 0) { PyErr_SetString(PyExc_ValueError, "n must not be negative"); return NULL; }
    Py_buffer bufs[4] = {{0}};
    IntView v[4];
    static const char *names[4] = {"start", "stop_first", "stop_then", "size"};
    PyObject *result = NULL;
    int64_t *curve = NULL;
    int got = 0;
    for (; got < 4; got++) {
        if (PyObject_GetBuffer(objs[got], &bufs[got], PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) goto done;
        if (int_view(&bufs[got], &v[got], names[got])) { got++; goto done; }
    }
    if (same_length(v, 4, v[0].n) || !(curve = zeroed_column(n))) goto done;
    uint64_t before = 0;
    Py_BEGIN_ALLOW_THREADS  /* the buffers stay exported, so the arrays cannot change meanwhile */
    for (Py_ssize_t i = 0; i < v[0].n; i++) {
        uint64_t bytes = (uint64_t)view_get(&v[3], i);
        int64_t start = view_get(&v[0], i), stop = view_get(&v[1], i);
        if (stop < 0) stop = view_get(&v[2], i);
        if (start < 0) before += bytes;
        else if (start < n) curve[start] = (int64_t)((uint64_t)curve[start] + bytes);
        if (stop >= 0 && stop < n) curve[stop] = (int64_t)((uint64_t)curve[stop] - bytes);
    }
    uint64_t held = before;
    for (Py_ssize_t i = 0; i < n; i++) {
        held += (uint64_t)curve[i];
        curve[i] = (int64_t)held;
    }
    Py_END_ALLOW_THREADS
    result = buffer_from_memory(curve, n * (Py_ssize_t)sizeof(int64_t));
    curve = NULL;  /* the buffer owns it, or freed it */
done:
    free(curve);
    for (int j = 0; j < got; j++) PyBuffer_Release(&bufs[j]);
    return result;
}

/* reserved_curve(action, size, signs) -> buffer of len(action) int64: the running sum of
 * signs[action] * size over the events (signs: one signed byte per action code, +1 where
 * the action maps memory, -1 where it releases it; a code past its end counts 0). */
PyObject *native_reserved_curve(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *ao, *so;
    Py_buffer ab = {0}, sb = {0}, signs = {0};
    PyObject *result = NULL;
    int64_t *curve = NULL;
    if (!PyArg_ParseTuple(args, "OOy*", &ao, &so, &signs)) return NULL;
    IntView action, size;
    if (PyObject_GetBuffer(ao, &ab, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) goto done;
    if (PyObject_GetBuffer(so, &sb, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) goto done;
    if (int_view(&ab, &action, "action") || int_view(&sb, &size, "size") || same_length(&size, 1, action.n)) goto done;
    Py_ssize_t n = action.n;
    if (!(curve = zeroed_column(n))) goto done;
    const int8_t *sign = signs.buf;
    Py_ssize_t codes = signs.len;
    Py_BEGIN_ALLOW_THREADS
    uint64_t held = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t code = view_get(&action, i);
        if (code >= 0 && code < codes && sign[code])
            held += sign[code] > 0 ? (uint64_t)view_get(&size, i) : -(uint64_t)view_get(&size, i);
        curve[i] = (int64_t)held;
    }
    Py_END_ALLOW_THREADS
    result = buffer_from_memory(curve, n * (Py_ssize_t)sizeof(int64_t));
    curve = NULL;
done:
    free(curve);
    if (ab.obj) PyBuffer_Release(&ab);
    if (sb.obj) PyBuffer_Release(&sb);
    PyBuffer_Release(&signs);
    return result;
}
