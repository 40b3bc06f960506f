/* memtui._native: module setup, the Unsupported exception, and Buffer, a block of memory
 * made here that numpy takes without a copy (np.frombuffer). */
#include "native.h"

#include <stdlib.h>

PyObject *Unsupported = NULL;

typedef struct {
    PyObject_HEAD
    void *data;
    Py_ssize_t nbytes;
} Buffer;

static int Buffer_getbuffer(Buffer *self, Py_buffer *view, int flags)
{
    return PyBuffer_FillInfo(view, (PyObject *)self, self->data, self->nbytes, 0, flags);
}

static void Buffer_dealloc(Buffer *self)
{
    free(self->data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyBufferProcs Buffer_as_buffer = {(getbufferproc)Buffer_getbuffer, NULL};

PyTypeObject BufferType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "memtui._native.Buffer",
    .tp_basicsize = sizeof(Buffer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Memory filled by the scanner, for np.frombuffer.",
    .tp_dealloc = (destructor)Buffer_dealloc,
    .tp_as_buffer = &Buffer_as_buffer,
};

PyObject *buffer_from_memory(void *data, Py_ssize_t nbytes)
{
    /* give back what a growing array reserved beyond its end */
    void *exact = realloc(data, (size_t)(nbytes > 0 ? nbytes : 1));
    if (exact) data = exact;
    Buffer *b = PyObject_New(Buffer, &BufferType);
    if (!b) { free(data); return NULL; }
    b->data = data;
    b->nbytes = nbytes;
    return (PyObject *)b;
}

PyObject *intcol_to_buffer(IntCol *c)
{
    if (!c->data && intcol_grow(c, 0) < 0) return NULL;  /* an empty column still needs memory */
    PyObject *b = buffer_from_memory(c->data, c->n * c->width);
    c->data = NULL;
    c->n = c->cap = 0;
    return b;
}

static PyObject *native_utf8_valid(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer b;
    if (!PyArg_ParseTuple(args, "y*", &b)) return NULL;
    int ok = utf8_surrogatepass_valid(b.buf, b.len);
    PyBuffer_Release(&b);
    return PyBool_FromLong(ok);
}

static PyMethodDef module_methods[] = {
    {"_parallel_limits", native_parallel_limits, METH_VARARGS,
     "_parallel_limits(prefix_rows, min_range, search_span, read_chunk, piece_rows, last_range_delay_us, max_item) "
     "-> the old ones (tests make them small, and the last range slow)"},
    {"_utf8_valid", native_utf8_valid, METH_VARARGS,
     "_utf8_valid(bytes) -> whether a worker thread takes them as a string (tests compare with Python)"},
    {"checksum", native_checksum, METH_VARARGS,
     "checksum(buffer, length) -> the model cache's checksum of a piece (memtui/cache/checksum.py)"},
    {"walk_opcodes", native_walk_opcodes, METH_VARARGS,
     "walk_opcodes(data, pos, base, limit, per_item) -> (status, pos, a, b, containers): the opcode check of "
     "memtui/load/opcode_check.py"},
    {"traces_reached", native_traces_reached, METH_VARARGS,
     "traces_reached(root, traces) -> 0, or 1 where a trace's placeholder and 2 where the root or the list of "
     "traces is reached from the root but through its 'device_traces' (memtui/load/fast's _check_detached)"},
    {"lifetimes", native_lifetimes, METH_VARARGS,
     "lifetimes(action, addr, size, start_codes, request_codes, end_codes, threads=1) -> the arrays of "
     "memtui.model.lifetimes.compute_lifetimes, as buffers"},
    {"_part_rows", native_part_rows, METH_VARARGS,
     "_part_rows(rows) -> the old one: the fewest rows of a part of the column passes and curves (tests make "
     "it small)"},
    {"remap", native_remap, METH_VARARGS,
     "remap(ids, lut, out, threads=1) -> (low, high): out[i] = lut[ids[i]] (a negative id from the end) and the "
     "bounds of out; lut and out None: the bounds of ids; None for no rows (memtui.model.column_passes)"},
    {"finite_times", native_finite_times, METH_VARARGS,
     "finite_times(times, threads=1) -> None: each infinite float64 made NaN, in place"},
    {"time_span", native_time_span, METH_VARARGS,
     "time_span(times, threads=1) -> (least, greatest) of the float64 values that are not NaN (NaN for none)"},
    {"code_counts", native_code_counts, METH_VARARGS,
     "code_counts(codes, threads=1) -> buffer of int64: numpy's bincount of one- or two-byte codes"},
    {"positions", native_positions, METH_VARARGS,
     "positions(codes, wanted, threads=1) -> buffer of int64: the rows whose code is in wanted, ascending"},
    {"allocated_curve", native_allocated_curve, METH_VARARGS,
     "allocated_curve(start, stop_first, stop_then, size, n, base=0, threads=1) -> base plus the allocated bytes "
     "after each event, as a buffer of int64 (memtui.analysis.live.allocated_curve)"},
    {"reserved_curve", native_reserved_curve, METH_VARARGS,
     "reserved_curve(action, size, signs, base=0, threads=1) -> base plus the running sum of signs[action] * "
     "size, as a buffer of int64 (memtui.analysis.live.reserved_curve)"},
    {"allocator_replay", native_allocator_replay, METH_VARARGS,
     "allocator_replay(requests, params, gc, recorded, initial, freeable) -> the replay of "
     "memtui.allocator.replay, packed (memtui/allocator/native_replay.py)"},
    {NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "memtui._native",
    "The optional compiled half of memtui: the snapshot scanner and the lifetime pairing.", -1, module_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void)
{
    optable_init();
    large_init();
    if (PyType_Ready(&BufferType) < 0 || PyType_Ready(&ScannerType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Unsupported = PyErr_NewExceptionWithDoc(
        "memtui._native.Unsupported",
        "The scanner does not handle this file; args: (reason, stream offset, refused). "
        "refused is true for an opcode that names or calls code.",
        NULL, NULL);
    if (!Unsupported || PyModule_AddObject(m, "Unsupported", Unsupported) < 0 ||
        PyModule_AddObject(m, "Scanner", Py_NewRef((PyObject *)&ScannerType)) < 0 ||
        PyModule_AddObject(m, "Buffer", Py_NewRef((PyObject *)&BufferType)) < 0 ||
        PyModule_AddIntConstant(m, "MAX_FRAME", (long)MAX_FRAME) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(Unsupported);
    return m;
}
