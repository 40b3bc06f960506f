/* The external annotations (the root dict's 'external_annotations': the spans a recording
 * marked, {'stage', 'name', 'device', 'time_us'} each), read into columns as the trace
 * entries are. A long recording has tens of thousands, and built as dicts they were read
 * after the parallel pass, in order and holding the GIL: 16,000 at a million events took
 * 15-20 ms, longer than the unpickler takes for them.
 *
 * Only what torch writes goes into the columns: a dict of those keys, with a string, a string,
 * an int and a number (or None) for them. The first annotation of any other shape, or a
 * reference to the list (a memo reference, a DUP), turns the rows read so far into the
 * dicts they stand for (annotations_plain) and the rest of the list is read as plain data,
 * so the model sees what the unpickler gives. The model reads the columns as it would have
 * read the dicts (memtui/model/snapshot.py, ExternalAnnotations). */
#include "scanner.h"

#include <math.h>

/* Whether a new list here is the root dict's 'external_annotations' (the columns' list). */
int is_annotations_position(Scanner *s)
{
    return !s->annlist && is_root_value_position(s, "external_annotations");
}

/* Whether a new dict here is the next annotation of the columns' list. */
int in_annotations(Scanner *s)
{
    if (!s->annlist || s->ann_plain) return 0;
    Item *t = top(s, 0);
    if (!t) return 0;
    if (t->kind == I_ANNOT) return 1;
    if (t->kind == I_OBJ) return t->obj == s->annlist;
    if (t->kind == I_MARK) {
        Item *below = top(s, 1);
        return below && below->kind == I_OBJ && below->obj == s->annlist;
    }
    return 0;
}

/* One annotation into the columns, whole or not at all. ST_FAIL (with a reason) for a dict
 * the columns do not hold; then, as for ST_MORE, nothing it read is kept (its memo slots are
 * filled again by whatever reads it next) and ``c`` is back at its start. */
int parse_annotation(Scanner *s, Cur *c)
{
    const uint8_t *start = c->p;
    int64_t memo_len = s->memo_len;
    int64_t device = 0;
    double time = NAN;  /* as the model reads a missing time_us (None) */
    int32_t stage = s->empty_str, name = s->empty_str;
    uint8_t op = 0;
    int r;
    c->p++;  /* EMPTY_DICT */
    if ((r = opt_memoize(s, c, SLOT(SK_ENTRY, 0), NULL))) goto out;
    if ((r = next_op(s, c, &op))) goto out;
    int batch = op == OP_MARK;
    if (batch) c->p++;
    for (;;) {
        if ((r = next_op(s, c, &op))) goto out;
        if (batch && op == OP_SETITEMS) {
            c->p++;
            break;
        }
        const uint8_t *at = c->p;
        int32_t key;
        if ((r = read_string(s, c, 0, &key))) goto out;
        switch (VEC_AT(&s->strings.recs, StrRec, key).key) {  /* a key given twice: the last value, as a dict keeps */
        case K_STAGE: r = read_string(s, c, 0, &stage); break;
        case K_NAME: r = read_string(s, c, 0, &name); break;
        case K_DEVICE: r = read_number(s, c, &device, NULL, 0, 0); break;
        case K_TIME: r = read_number(s, c, NULL, &time, 1, 0); break;
        default: r = scan_fail(s, at, "an annotation key the columns do not hold");
        }
        if (r) goto out;
        if (!batch) {
            if ((r = next_op(s, c, &op))) goto out;
            if (op != OP_SETITEM) {
                r = scan_fail(s, c->p, "an annotation built in an unexpected way");
                goto out;
            }
            c->p++;
            break;
        }
    }
    int64_t row = s->ann_device.n;
    if (VEC_PUSH(&s->ann_device, int64_t, device) || VEC_PUSH(&s->ann_time, double, time) ||
        VEC_PUSH(&s->ann_stage, int32_t, stage) || VEC_PUSH(&s->ann_name, int32_t, name)) {
        r = ST_ERROR;
        goto out;
    }
    r = push_item(s, (Item){I_ANNOT, -1, row, NULL});
out:
    if (r == ST_MORE || r == ST_FAIL) {
        s->memo_epoch++;  /* the slots it filled are filled again */
        s->memo_len = memo_len;
        c->p = start;
    }
    return r;
}

/* The dict an annotation of the columns stands for: what the model reads of the one the file
 * holds (its keys' defaults filled in, time_us a float). */
static PyObject *annotation_dict(Scanner *s, int64_t row)
{
    const StrRec *recs = (const StrRec *)s->strings.recs.data;
    PyObject *device = PyLong_FromLongLong(VEC_AT(&s->ann_device, int64_t, row));
    PyObject *time = PyFloat_FromDouble(VEC_AT(&s->ann_time, double, row));
    PyObject *d = device && time ? Py_BuildValue("{s:O,s:O,s:O,s:O}", "stage",
                                                 recs[VEC_AT(&s->ann_stage, int32_t, row)].obj, "name",
                                                 recs[VEC_AT(&s->ann_name, int32_t, row)].obj, "device", device,
                                                 "time_us", time)
                                 : NULL;
    Py_XDECREF(device);
    Py_XDECREF(time);
    return d;
}

void free_annotation_columns(Scanner *s)
{
    vec_free(&s->ann_device);
    vec_free(&s->ann_time);
    vec_free(&s->ann_stage);
    vec_free(&s->ann_name);
}

/* From now on the annotations are plain data: those already in the list are appended to it as
 * dicts, those still on the stack (before their APPENDS) become dicts there. */
int annotations_plain(Scanner *s)
{
    if (!s->annlist || s->ann_plain) return ST_OK;
    s->ann_plain = 1;
    for (int64_t row = 0; row < s->ann_appended; row++) {
        PyObject *d = annotation_dict(s, row);
        if (!d || PyList_Append(s->annlist, d) < 0) {
            Py_XDECREF(d);
            return ST_ERROR;
        }
        Py_DECREF(d);
    }
    for (Py_ssize_t i = 0; i < s->stack.n; i++) {
        Item *it = &VEC_AT(&s->stack, Item, i);
        if (it->kind != I_ANNOT) continue;
        PyObject *d = annotation_dict(s, it->row);
        if (!d) return ST_ERROR;
        *it = (Item){I_OBJ, -1, 0, d};
    }
    free_annotation_columns(s);
    return ST_OK;
}

/* APPEND(S) to the columns' list: ST_OK when every item is the next annotation of the columns
 * (then they are taken off the stack); 1 when the append is left to the plain path (the
 * annotations made plain first). */
int append_annotations(Scanner *s, Py_ssize_t from)
{
    int64_t next = s->ann_appended;
    int ours = 1;
    for (Py_ssize_t i = from; i < s->stack.n && ours; i++) {
        const Item *it = &VEC_AT(&s->stack, Item, i);
        ours = it->kind == I_ANNOT && it->row == next++;
    }
    if (!ours) return annotations_plain(s) == ST_OK ? 1 : ST_ERROR;
    s->ann_appended = next;
    s->stack.n = from;
    return ST_OK;
}

/* The columns for finish(): a dict of them, or None where the list holds its items itself
 * (made plain, or replaced in the root by another value, whose items are what count). */
PyObject *annotation_columns(Scanner *s)
{
    int64_t n = s->ann_device.n;
    if (!s->annlist || s->ann_plain || !n || PyDict_GetItemString(s->root, "external_annotations") != s->annlist)
        Py_RETURN_NONE;
    PyObject *stages = PyList_New((Py_ssize_t)n), *names = PyList_New((Py_ssize_t)n);
    if (!stages || !names) {
        Py_XDECREF(stages);
        Py_XDECREF(names);
        return NULL;
    }
    const StrRec *recs = (const StrRec *)s->strings.recs.data;
    for (int64_t i = 0; i < n; i++) {
        PyList_SET_ITEM(stages, i, Py_NewRef(recs[VEC_AT(&s->ann_stage, int32_t, i)].obj));
        PyList_SET_ITEM(names, i, Py_NewRef(recs[VEC_AT(&s->ann_name, int32_t, i)].obj));
    }
    PyObject *device = buffer_from_memory(s->ann_device.data, (Py_ssize_t)n * (Py_ssize_t)sizeof(int64_t));
    s->ann_device = (Vec){0};
    PyObject *time = buffer_from_memory(s->ann_time.data, (Py_ssize_t)n * (Py_ssize_t)sizeof(double));
    s->ann_time = (Vec){0};
    if (!device || !time) {
        Py_XDECREF(device);
        Py_XDECREF(time);
        Py_DECREF(stages);
        Py_DECREF(names);
        return NULL;
    }
    return Py_BuildValue("{s:N,s:N,s:N,s:N}", "device", device, "time_us", time, "stage", stages, "name", names);
}
