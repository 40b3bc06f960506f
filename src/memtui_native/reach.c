/* What the scanner built outside the traces must not reach them (memtui/load/fast's
 * _check_detached): a memo reference to the root dict from inside a segment, say, would show
 * the scanner's placeholders where the reference decoder shows the traces.
 *
 * The walk in Python took 10 ms a snapshot of 16,000 annotations, every open. Here it is
 * the same walk, over exact dicts, lists and tuples (the only containers the scanner builds),
 * keys included, each container once; it calls no Python code, so nothing changes under it. */
#include "native.h"

#include <stdlib.h>

enum { REACH_NONE = 0, REACH_TRACE = 1, REACH_TRACES = 2, REACH_NO_MEMORY = -1 };

typedef struct {
    PyObject **slots;
    size_t cap, n;  /* cap a power of two, at most half full */
} PtrSet;

static size_t ptr_hash(PyObject *p, size_t cap)
{
    return (size_t)(((uintptr_t)p >> 4) * (uintptr_t)0x9E3779B97F4A7C15ull) & (cap - 1);
}

/* 1: added, 0: there before, -1: out of memory. */
static int ptrset_add(PtrSet *set, PyObject *p)
{
    if (2 * (set->n + 1) > set->cap) {
        size_t cap = set->cap ? 2 * set->cap : 1024;
        PyObject **slots = calloc(cap, sizeof(PyObject *));
        if (!slots) return -1;
        for (size_t i = 0; i < set->cap; i++) {
            PyObject *q = set->slots[i];
            if (!q) continue;
            size_t j = ptr_hash(q, cap);
            while (slots[j]) j = (j + 1) & (cap - 1);
            slots[j] = q;
        }
        free(set->slots);
        set->slots = slots;
        set->cap = cap;
    }
    size_t j = ptr_hash(p, set->cap);
    while (set->slots[j]) {
        if (set->slots[j] == p) return 0;
        j = (j + 1) & (set->cap - 1);
    }
    set->slots[j] = p;
    set->n++;
    return 1;
}

typedef struct {
    PyObject **items;
    size_t n, cap;
} PtrStack;

static int ptrstack_push(PtrStack *st, PyObject *p)
{
    if (st->n == st->cap) {
        size_t cap = st->cap ? 2 * st->cap : 1024;
        PyObject **items = realloc(st->items, cap * sizeof(PyObject *));
        if (!items) return -1;
        st->items = items;
        st->cap = cap;
    }
    st->items[st->n++] = p;
    return 0;
}

static int is_container(PyObject *o)
{
    return PyDict_CheckExact(o) || PyList_CheckExact(o) || PyTuple_CheckExact(o);
}

static int traces_reached(PyObject *root, PyObject *traces)
{
    PtrSet seen = {NULL, 0, 0};
    PtrStack todo = {NULL, 0, 0};
    int status = REACH_NONE;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(root, &pos, &key, &value)) {
        if (PyUnicode_CheckExact(key) && PyUnicode_CompareWithASCIIString(key, "device_traces") == 0) continue;
        if (ptrstack_push(&todo, key) || ptrstack_push(&todo, value)) { status = REACH_NO_MEMORY; goto done; }
    }
    while (todo.n) {
        PyObject *obj = todo.items[--todo.n];
        if (!is_container(obj)) {
            if (PyCapsule_CheckExact(obj)) { status = REACH_TRACE; goto done; }
            continue;
        }
        if (obj == root || obj == traces) { status = REACH_TRACES; goto done; }
        int added = ptrset_add(&seen, obj);
        if (added < 0) { status = REACH_NO_MEMORY; goto done; }
        if (!added) continue;
        int failed = 0;
        if (PyDict_CheckExact(obj)) {
            pos = 0;
            while (!failed && PyDict_Next(obj, &pos, &key, &value))
                failed = ptrstack_push(&todo, key) || ptrstack_push(&todo, value);
        } else {
            Py_ssize_t n = PyList_CheckExact(obj) ? PyList_GET_SIZE(obj) : PyTuple_GET_SIZE(obj);
            PyObject **items = PyList_CheckExact(obj) ? ((PyListObject *)obj)->ob_item : ((PyTupleObject *)obj)->ob_item;
            for (Py_ssize_t i = 0; i < n && !failed; i++) failed = ptrstack_push(&todo, items[i]);
        }
        if (failed) { status = REACH_NO_MEMORY; goto done; }
    }
done:
    free(seen.slots);
    free(todo.items);
    return status;
}

static PyObject *native_traces_reached(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *root, *traces;
    if (!PyArg_ParseTuple(args, "O!O", &PyDict_Type, &root, &traces)) return NULL;
    int status = traces_reached(root, traces);
    if (status == REACH_NO_MEMORY) return PyErr_NoMemory();
    return PyLong_FromLong(status);
}
