/* The scanner: one pass over a snapshot pickle's opcodes.
 *
 * Outside the device traces it unpickles like the C unpickler, for the opcodes plain data
 * needs (the segments, settings and annotations are small). The list under the root dict's
 * 'device_traces' key and the lists in it are recognised by their place on the stack; each
 * dict appended to such a list is a trace entry, read by entry.c into columns. Every read is
 * bounds-checked; every opcode that could run code (globals, reduce, build, instances,
 * extensions, persistent ids) and every opcode plain snapshots do not need ends the scan
 * with a reason, and the caller gives the file to the Python decoder, which refuses it or
 * reads it exactly as the reference does. Feeding is incremental: the caller passes the
 * bytes from where the last call stopped, and each opcode (each trace entry) is taken
 * whole or left for the next call.
 */
#include "scanner.h"

#include <stdlib.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#define MAX_STACK (1 << 22)

int scan_fail(Scanner *s, const uint8_t *at, const char *reason)
{
    s->reason = reason;
    s->reason_at = s->offset + (at - s->base);
    return ST_FAIL;
}

static int refuse(Scanner *s, const uint8_t *at, const char *reason)
{
    s->refused = 1;
    return scan_fail(s, at, reason);
}

/* ---- memo ------------------------------------------------------------------------------ */

/* A chunk of MEMO_CHUNK slots: 4 MiB, a size fixed by the slots' arithmetic, so aligned
 * rather than sized for 2 MiB pages (large.c). */
static uint32_t *memo_chunk(void)
{
    return large_aligned(MEMO_CHUNK * sizeof(uint32_t));
}

int memo_set(Scanner *s, const uint8_t *at, int64_t index, uint32_t slot)
{
    if (s->worker) {  /* its own slots, numbered from its range's first */
        if (index > s->own_count || index < 0) return scan_fail(s, at, "a memo slot filled out of order");
        return own_set(s, index, slot);
    }
    if (index > s->memo_len) return scan_fail(s, at, "a memo slot filled out of order");
    if (index < s->memo_len) {
        if (index < s->workers_memo) s->memo_rewrites++;  /* a slot the workers read as it was (parallel.c) */
        if (names_a_string(s->memo[index >> MEMO_CHUNK_BITS][index & (MEMO_CHUNK - 1)]))
            s->memo_epoch++;  /* a string's slot written again (entry.c, read_key) */
    }
    if (index == s->memo_len) {
        if (index >= ((int64_t)1 << 32)) return scan_fail(s, at, "more memo slots than a pickle can name");
        Py_ssize_t chunk = (Py_ssize_t)(index >> MEMO_CHUNK_BITS);
        if (chunk >= s->memo_chunks) {
            uint32_t **chunks = realloc(s->memo, (size_t)(chunk + 1) * sizeof(uint32_t *));
            if (!chunks) return ST_ERROR;
            s->memo = chunks;
            s->memo[chunk] = memo_chunk();
            if (!s->memo[chunk]) return ST_ERROR;
            s->memo_chunks = chunk + 1;
        }
        s->memo_len++;
    }
    s->memo[index >> MEMO_CHUNK_BITS][index & (MEMO_CHUNK - 1)] = slot;
    return ST_OK;
}

/* Chunks for every slot below ``upto`` (the main scanner). */
int memo_reserve(Scanner *s, int64_t upto)
{
    if (upto > ((int64_t)1 << 32)) return ST_ERROR;
    Py_ssize_t need = (Py_ssize_t)((upto + MEMO_CHUNK - 1) >> MEMO_CHUNK_BITS);
    if (need <= s->memo_chunks) return ST_OK;
    uint32_t **chunks = realloc(s->memo, (size_t)need * sizeof(uint32_t *));
    if (!chunks) return ST_ERROR;
    s->memo = chunks;
    for (; s->memo_chunks < need; s->memo_chunks++) {
        s->memo[s->memo_chunks] = memo_chunk();
        if (!s->memo[s->memo_chunks]) return ST_ERROR;
    }
    return ST_OK;
}

int read_get_index(Scanner *s, Cur *c, int64_t *index)
{
    if (*c->p == OP_BINGET) {
        if (!NEED(c, 2)) return SHORT(s, c);
        *index = c->p[1];
        c->p += 2;
    } else {
        if (!NEED(c, 5)) return SHORT(s, c);
        *index = le32(c->p + 1);
        c->p += 5;
    }
    return ST_OK;
}

/* An optional MEMOIZE, BINPUT or LONG_BINPUT after a trace value: it may only add the next
 * slot (so reading the entry again after a short buffer fills the same slots). */
int opt_memo(Scanner *s, Cur *c, uint32_t slot, int64_t *index)
{
    uint8_t op = 0;
    int r = next_op(s, c, &op);
    if (r) return r;
    int64_t at = -1;
    const uint8_t *p = c->p;
    if (op == OP_MEMOIZE) {
        at = memo_count(s);
        c->p += 1;
    } else if (s->worker && (op == OP_BINPUT || op == OP_LONG_BINPUT)) {
        return scan_fail(s, p, "a PUT in a worker's range (a worker numbers slots by MEMOIZE)");
    } else if (op == OP_BINPUT) {
        if (!NEED(c, 2)) return SHORT(s, c);
        at = p[1];
        c->p += 2;
    } else if (op == OP_LONG_BINPUT) {
        if (!NEED(c, 5)) return SHORT(s, c);
        at = le32(p + 1);
        c->p += 5;
    } else {
        if (index) *index = -1;
        return ST_OK;
    }
    if (at != memo_count(s)) return scan_fail(s, p, "a trace value memoized out of order");
    if ((r = memo_append(s, p, slot))) return r;
    if (index) *index = at;
    return ST_OK;
}

/* ---- objects the traces refer to ------------------------------------------------------- */

int freeze(Scanner *s, PyObject *obj)
{
    return map64_put(&s->frozen, (uint64_t)(uintptr_t)obj, 1) < 0 ? -1 : 0;
}

int is_frozen(Scanner *s, PyObject *obj)
{
    return s->frozen.n && map64_get(&s->frozen, (uint64_t)(uintptr_t)obj, 0);
}

static int unicode_strid(Scanner *s, const uint8_t *at, PyObject *obj, int32_t *strid)
{
    if (!PyUnicode_CheckExact(obj)) return scan_fail(s, at, "a trace field refers to something that is not a string");
    PyObject *bytes = PyUnicode_AsEncodedString(obj, "utf-8", "surrogatepass");
    if (!bytes) return ST_ERROR;
    const char *reason = NULL;
    int32_t id = str_intern(&s->strings, PyBytes_AS_STRING(bytes), PyBytes_GET_SIZE(bytes), &reason);
    Py_DECREF(bytes);
    if (id == -2) return ST_ERROR;
    if (id < 0) return scan_fail(s, at, reason);
    *strid = id;
    return ST_OK;
}

/* An object's conversion (obj_conv) means what its type says: a str's string id, a frame
 * dict's frame id, a frame list's stack id. The type is checked first: a file may use one
 * object as a frame and then as a string. A worker has no GIL: it takes only the
 * conversions the main thread made before it started (parallel.c prepare_objects). */
int obj_to_strid(Scanner *s, const uint8_t *at, Py_ssize_t i, int32_t *strid)
{
    int32_t *conv = &VEC_AT(&s->obj_conv, int32_t, i);
    if (!PyUnicode_CheckExact(VEC_AT(&s->objs, PyObject *, i)))
        return scan_fail(s, at, "a trace field refers to something that is not a string");
    if (*conv == CONV_UNKNOWN || *conv == CONV_BAD) {
        if (s->worker) return scan_fail(s, at, "a string the main thread did not convert");
        int r = unicode_strid(s, at, VEC_AT(&s->objs, PyObject *, i), strid);
        if (r) return r;
        conv = &VEC_AT(&s->obj_conv, int32_t, i);
        *conv = *strid;
    }
    *strid = *conv;
    return ST_OK;
}

/* A frame dict built outside the traces (a block's frames), as a frame id. */
int obj_to_fid(Scanner *s, const uint8_t *at, PyObject *obj, int32_t *fid)
{
    if (!PyDict_CheckExact(obj)) return scan_fail(s, at, "a frame list holds something that is not a frame dict");
    int32_t filename = -1, name = -1;
    int64_t line = 0;
    int have_line = 0, r;
    Vec extras = {0};
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(obj, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) { r = scan_fail(s, at, "a frame with a key that is not a string"); goto out; }
        if (PyUnicode_CompareWithASCIIString(key, "line") == 0) {
            int overflow = 0;
            if (!PyLong_CheckExact(value)) { r = scan_fail(s, at, "a frame's line is not an int"); goto out; }
            line = PyLong_AsLongLongAndOverflow(value, &overflow);
            if (overflow) line = -1;  /* out of range: line 0, as the model reads it */
            have_line = 1;
            continue;
        }
        int32_t v;
        if ((r = unicode_strid(s, at, value, &v))) goto out;
        if (PyUnicode_CompareWithASCIIString(key, "filename") == 0) filename = v;
        else if (PyUnicode_CompareWithASCIIString(key, "name") == 0) name = v;
        else {
            int32_t k;
            if ((r = unicode_strid(s, at, key, &k))) goto out;
            if (VEC_PUSH(&extras, int32_t, k) || VEC_PUSH(&extras, int32_t, v)) { r = ST_ERROR; goto out; }
        }
    }
    if (filename < 0 || name < 0 || !have_line) { r = scan_fail(s, at, "a frame without filename, line or name"); goto out; }
    if (line < 0 || line >= ((int64_t)1 << 62)) line = 0;
    *fid = frame_intern(&s->ft, filename, line, name, (const int32_t *)extras.data, (int32_t)(extras.n / 2));
    r = *fid < 0 ? ST_ERROR : (freeze(s, obj) < 0 ? ST_ERROR : ST_OK);
out:
    vec_free(&extras);
    return r;
}

/* A frame list built outside the traces, as a stack id (-1 for an empty one). */
int obj_to_sid(Scanner *s, const uint8_t *at, Py_ssize_t i, int32_t *sid)
{
    int32_t *conv = &VEC_AT(&s->obj_conv, int32_t, i);
    PyObject *list = VEC_AT(&s->objs, PyObject *, i);
    if (!PyList_CheckExact(list)) return scan_fail(s, at, "an entry's frames refer to something that is not a list");
    if (s->worker) return worker_obj_sid(s, at, i, sid);
    if (*conv != CONV_UNKNOWN && *conv != CONV_BAD) { *sid = *conv; return ST_OK; }
    Vec fids = {0};
    int r = ST_OK;
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(list); j++) {
        int32_t fid;
        if ((r = obj_to_fid(s, at, PyList_GET_ITEM(list, j), &fid))) break;
        if (VEC_PUSH(&fids, int32_t, fid)) { r = ST_ERROR; break; }
    }
    int32_t id = -1;
    if (!r && fids.n && (id = stack_intern(&s->ft, (const int32_t *)fids.data, fids.n)) < 0) r = ST_ERROR;
    vec_free(&fids);
    if (r) return r;
    if (freeze(s, list) < 0) return ST_ERROR;
    VEC_AT(&s->obj_conv, int32_t, i) = id;
    *sid = id;
    return ST_OK;
}

/* ---- the stack --------------------------------------------------------------------------- */

int push_item(Scanner *s, Item item)
{
    if (s->stack.n >= MAX_STACK) {
        Py_XDECREF(item.obj);
        s->reason = "a stack deeper than any snapshot's";
        return ST_FAIL;
    }
    if (VEC_PUSH(&s->stack, Item, item)) { Py_XDECREF(item.obj); return ST_ERROR; }
    return ST_OK;
}

static int push_obj(Scanner *s, PyObject *obj)
{
    if (!obj) return ST_ERROR;
    return push_item(s, (Item){I_OBJ, -1, 0, obj});
}

static Item *top(Scanner *s, Py_ssize_t depth)  /* depth 0: the top item */
{
    return s->stack.n > depth ? &VEC_AT(&s->stack, Item, s->stack.n - 1 - depth) : NULL;
}

static Py_ssize_t find_mark(Scanner *s)
{
    for (Py_ssize_t i = s->stack.n - 1; i >= 0; i--)
        if (VEC_AT(&s->stack, Item, i).kind == I_MARK) return i;
    return -1;
}

static void drop_items(Scanner *s, Py_ssize_t from)
{
    for (Py_ssize_t i = from; i < s->stack.n; i++) Py_XDECREF(VEC_AT(&s->stack, Item, i).obj);
    s->stack.n = from;
}

/* Items from..end must all be plain objects (not a trace, an entry or a mark). The list of
 * traces may be one: it is never in two places (it cannot be duplicated or referred to),
 * and finish() checks that it is the root's 'device_traces'. */
static int all_objects(Scanner *s, const uint8_t *at, Py_ssize_t from)
{
    for (Py_ssize_t i = from; i < s->stack.n; i++) {
        Item *it = &VEC_AT(&s->stack, Item, i);
        if (it->kind != I_OBJ) return scan_fail(s, at, "a trace or entry used where plain data belongs");
    }
    return ST_OK;
}

/* ---- where the traces are ---------------------------------------------------------------- */

/* A new container here is the value of the root dict's key ``name``. */
static int is_root_value_position(Scanner *s, const char *name)
{
    Py_ssize_t n = s->stack.n;
    if (n < 2) return 0;
    Item *key = top(s, 0), *root = &VEC_AT(&s->stack, Item, 0);
    if (key->kind != I_OBJ || !PyUnicode_CheckExact(key->obj) || PyUnicode_CompareWithASCIIString(key->obj, name) != 0)
        return 0;
    if (root->kind != I_OBJ || !PyDict_CheckExact(root->obj)) return 0;
    if (n == 2) return 1;  /* key value SETITEM */
    if (VEC_AT(&s->stack, Item, 1).kind != I_MARK) return 0;
    for (Py_ssize_t i = 2; i < n; i++)
        if (VEC_AT(&s->stack, Item, i).kind != I_OBJ) return 0;
    return (n - 1 - 2) % 2 == 0;  /* a key's place among MARK k v k v ... */
}

/* A new list here is the value of the root dict's 'device_traces' key. */
static int is_traces_position(Scanner *s)
{
    return !s->dtlist && is_root_value_position(s, "device_traces");
}

/* A new list here is a device trace; a new dict here is a trace entry (of *trace). */
static int in_traces(Scanner *s)
{
    Item *t = top(s, 0);
    if (!t || !s->dtlist) return 0;
    if (t->kind == I_OBJ) return t->obj == s->dtlist;
    if (t->kind == I_MARK) {
        Item *below = top(s, 1);
        return below && below->kind == I_OBJ && below->obj == s->dtlist;
    }
    return t->kind == I_TRACE;
}

static int in_trace(Scanner *s, int32_t *trace)
{
    Item *t = top(s, 0);
    if (!t) return 0;
    if (t->kind == I_TRACE || t->kind == I_ENTRY) { *trace = t->trace; return 1; }
    if (t->kind == I_MARK) {
        Item *below = top(s, 1);
        if (below && below->kind == I_TRACE) { *trace = below->trace; return 1; }
    }
    return 0;
}

static int new_trace(Scanner *s, const uint8_t *at)
{
    if (s->traces.n >= 4096) return scan_fail(s, at, "more device traces than a snapshot has");
    Trace *t = calloc(1, sizeof(Trace));
    if (!t) { PyErr_NoMemory(); return ST_ERROR; }
    t->last_ctx = t->last_meta = INT32_MIN;
    t->action.width = t->addr.width = t->size.width = t->stream.width = t->stack.width = 1;
    t->ctx.width = t->meta.width = t->device_free.width = 1;
    t->placeholder = PyCapsule_New(t, "memtui._native.trace", NULL);
    if (!t->placeholder || VEC_PUSH(&s->traces, Trace *, t)) {
        Py_XDECREF(t->placeholder);
        free(t);
        return ST_ERROR;
    }
    return push_item(s, (Item){I_TRACE, (int32_t)(s->traces.n - 1), 0, NULL});
}

/* ---- appending and setting ---------------------------------------------------------------- */

/* Items from..end appended to the item at ``to`` (just below them, or below their mark). */
static int do_append(Scanner *s, const uint8_t *at, Py_ssize_t to, Py_ssize_t from)
{
    if (to < 0) return scan_fail(s, at, "stack underflow");
    Item *target = &VEC_AT(&s->stack, Item, to);
    Py_ssize_t n = s->stack.n - from;
    if (n == 0) {  /* the unpickler appends nothing, whatever the target */
        if (target->kind == I_MARK) return scan_fail(s, at, "stack underflow");
        return ST_OK;
    }
    if (target->kind == I_TRACE) {
        Trace *t = VEC_AT(&s->traces, Trace *, target->trace);
        for (Py_ssize_t i = from; i < s->stack.n; i++) {
            Item *it = &VEC_AT(&s->stack, Item, i);
            if (it->kind != I_ENTRY || it->trace != target->trace || it->row != t->appended)
                return scan_fail(s, at, "a device trace holds something other than its entries, in order");
            t->appended++;
        }
        s->stack.n = from;
        return ST_OK;
    }
    if (target->kind != I_OBJ) return scan_fail(s, at, "appending to something that is not a list");
    if (target->obj == s->annlist && !s->ann_plain) {
        int taken = append_annotations(s, from);
        if (taken != 1) return taken;  /* else made plain: appended below, as any list's items */
    }
    if (target->obj == s->dtlist) {
        for (Py_ssize_t i = from; i < s->stack.n; i++) {
            Item *it = &VEC_AT(&s->stack, Item, i);
            if (it->kind != I_TRACE) return scan_fail(s, at, "the list of device traces holds something else");
            if (PyList_Append(s->dtlist, VEC_AT(&s->traces, Trace *, it->trace)->placeholder) < 0) return ST_ERROR;
        }
        s->stack.n = from;
        return ST_OK;
    }
    if (!PyList_CheckExact(target->obj) || is_frozen(s, target->obj))
        return scan_fail(s, at, "appending to something that is not a plain list");
    int r = all_objects(s, at, from);
    if (r) return r;
    for (Py_ssize_t i = from; i < s->stack.n; i++)
        if (PyList_Append(target->obj, VEC_AT(&s->stack, Item, i).obj) < 0) return ST_ERROR;
    drop_items(s, from);
    return ST_OK;
}

static int do_setitems(Scanner *s, const uint8_t *at, Py_ssize_t to, Py_ssize_t from)
{
    if (to < 0) return scan_fail(s, at, "stack underflow");
    Item *target = &VEC_AT(&s->stack, Item, to);
    Py_ssize_t n = s->stack.n - from;
    if (n == 0) {
        if (target->kind == I_MARK) return scan_fail(s, at, "stack underflow");
        return ST_OK;
    }
    if (n % 2) return scan_fail(s, at, "odd number of items for SETITEMS");
    if (target->kind != I_OBJ || !PyDict_CheckExact(target->obj) || is_frozen(s, target->obj))
        return scan_fail(s, at, "setting items of something that is not a plain dict");
    int r = all_objects(s, at, from);
    if (r) return r;
    for (Py_ssize_t i = from; i < s->stack.n; i += 2) {
        if (PyDict_SetItem(target->obj, VEC_AT(&s->stack, Item, i).obj, VEC_AT(&s->stack, Item, i + 1).obj) < 0) {
            if (!PyErr_ExceptionMatches(PyExc_TypeError)) return ST_ERROR;
            PyErr_Clear();
            return scan_fail(s, at, "an unhashable dict key");
        }
    }
    drop_items(s, from);
    return ST_OK;
}

/* ---- values ------------------------------------------------------------------------------- */

PyObject *long_from_bytes(const uint8_t *p, Py_ssize_t n)
{
    int64_t v;
    if (long_fits(p, n, &v)) return PyLong_FromLongLong(v);
    PyObject *bytes = PyBytes_FromStringAndSize((const char *)p, n);
    if (!bytes) return NULL;
    PyObject *result = PyObject_CallMethod((PyObject *)&PyLong_Type, "from_bytes", "Os", bytes, "little");
    Py_DECREF(bytes);
    if (!result) return NULL;
    /* from_bytes above is unsigned; a set top bit means a negative number */
    if (p[n - 1] & 0x80) {
        PyObject *shift = PyLong_FromSsize_t(n * 8);
        PyObject *one = PyLong_FromLong(1);
        PyObject *power = (shift && one) ? PyNumber_Lshift(one, shift) : NULL;
        PyObject *negative = power ? PyNumber_Subtract(result, power) : NULL;
        Py_XDECREF(shift);
        Py_XDECREF(one);
        Py_XDECREF(power);
        Py_DECREF(result);
        result = negative;
    }
    return result;
}

static int push_string(Scanner *s, Cur *c, Py_ssize_t head, uint64_t n, int bytes, int bytearray)
{
    if (n > (uint64_t)PY_SSIZE_T_MAX - 16) return scan_fail(s, c->p, "an object longer than any file");
    if (!NEED(c, (Py_ssize_t)head + (Py_ssize_t)n)) return SHORT(s, c);
    const char *data = (const char *)c->p + head;
    PyObject *obj;
    if (bytearray) obj = PyByteArray_FromStringAndSize(data, (Py_ssize_t)n);
    else if (bytes) obj = PyBytes_FromStringAndSize(data, (Py_ssize_t)n);
    else {
        obj = PyUnicode_DecodeUTF8(data, (Py_ssize_t)n, "surrogatepass");
        if (!obj) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) return ST_ERROR;
            PyErr_Clear();
            return scan_fail(s, c->p, "a string that is not UTF-8");
        }
    }
    if (!obj) return ST_ERROR;
    c->p += head + (Py_ssize_t)n;
    return push_obj(s, obj);
}

static int memo_put_top(Scanner *s, const uint8_t *at, int64_t index)
{
    Item *t = top(s, 0);
    if (!t || t->kind == I_MARK) return scan_fail(s, at, "memoizing with nothing on the stack");
    uint32_t slot = 0;
    if (t->kind == I_TRACE) slot = SLOT(SK_OPAQUE, 0);
    else if (t->kind == I_ENTRY || t->kind == I_ANNOT) slot = SLOT(SK_ENTRY, 0);
    else if (t->obj == s->dtlist) slot = SLOT(SK_OPAQUE, 0);
    else {
        if (s->objs.n > SLOT_VALUE_MAX) return scan_fail(s, at, "too many objects");
        if (VEC_PUSH(&s->objs, PyObject *, t->obj) || VEC_PUSH(&s->obj_conv, int32_t, CONV_UNKNOWN)) return ST_ERROR;
        Py_INCREF(t->obj);
        slot = SLOT(SK_OBJ, s->objs.n - 1);
    }
    return memo_set(s, at, index, slot);
}

/* Whether obj is the object at the bottom of the stack: the snapshot's top-level dict. */
static int is_bottom(Scanner *s, PyObject *obj)
{
    return s->stack.n > 0 && VEC_AT(&s->stack, Item, 0).kind == I_OBJ && VEC_AT(&s->stack, Item, 0).obj == obj;
}

static int push_memo(Scanner *s, const uint8_t *at, int64_t index)
{
    /* The shape check's rules (memtui/load/shape.py), which runs only when this scanner hands a
     * file over: a trace holds entries written afresh, never a reference (two bytes a row,
     * even dropped again), and nothing refers to the top-level dict (a duplicate of it would
     * make lists of references the traces' place, built without bound). */
    int32_t trace;
    if (in_trace(s, &trace)) return scan_fail(s, at, "a memo reference among the device traces");
    uint32_t slot = 0;
    int r = memo_get(s, at, index, &slot);
    if (r) return r;
    uint32_t v = SLOT_VALUE(slot);
    switch (SLOT_KIND(slot)) {
    case SK_OBJ: {
        PyObject *obj = VEC_AT(&s->objs, PyObject *, v);
        if (is_bottom(s, obj)) return scan_fail(s, at, "a reference to the top-level dict");
        if (obj == s->annlist && (r = annotations_plain(s))) return r;  /* the list is shared: it holds its items */
        return push_obj(s, Py_NewRef(obj));
    }
    case SK_STR: return push_obj(s, Py_NewRef(VEC_AT(&s->strings.recs, StrRec, v).obj));
    case SK_FRAME: return push_obj(s, frame_object(s, (int32_t)v));
    case SK_STACK: return push_obj(s, stack_object(s, (int32_t)v - 1));
    default: return scan_fail(s, at, "a reference to a trace, an entry or a container being read");
    }
}

/* ---- one opcode ------------------------------------------------------------------------------ */

/* The rule of memtui/load/opcode_check.py: past a million containers, a file spends 16 bytes
 * on each, or it is built to expand in memory (a byte of ']' is 80 bytes of list). The reference
 * decoder refuses such a file in one line; the scanner hands it over before building more. */
#define CONTAINER_FLOOR 1000000
#define BYTES_PER_CONTAINER 16

static inline int is_container_op(uint8_t op)
{
    return op == OP_EMPTY_LIST || op == OP_EMPTY_DICT || op == OP_LIST || op == OP_DICT || op == OP_TUPLE ||
           op == OP_TUPLE1 || op == OP_TUPLE2 || op == OP_TUPLE3 || op == 0x8f /* EMPTY_SET */ ||
           op == 0x91 /* FROZENSET */;
}

static int step(Scanner *s, Cur *c)
{
    uint8_t op = 0;
    int r = next_op(s, c, &op);
    if (r) return r;
    const uint8_t *p = c->p;
    Item *t;
    Py_ssize_t mark;
    /* The rule of memtui/load/shape.py for the top-level object, stricter: a snapshot is a
     * dict (torch < 2.1 wrote a list of segments, which finish() would refuse anyway). Refused
     * before it is built, as a list of a billion integers would be: the shape check runs only
     * when this scanner hands the file over (memtui/open.py). */
    if (s->stack.n == 0 && op != OP_PROTO && op != OP_EMPTY_DICT)
        return scan_fail(s, p, "the pickle does not start with a dict");
    if (is_container_op(op) && ++s->containers > CONTAINER_FLOOR &&
        s->containers * BYTES_PER_CONTAINER > s->offset + (p - s->base))
        return scan_fail(s, p, "a file packed with containers");
    switch (op) {
    case OP_PROTO:
        if (!NEED(c, 2)) return SHORT(s, c);
        if (s->offset + (p - s->base) != 0 || p[1] < 2 || p[1] > 5)
            return scan_fail(s, p, "not a protocol 2 to 5 pickle");
        c->p += 2;
        return ST_OK;
    case OP_STOP:
        t = top(s, 0);
        if (!t || t->kind != I_OBJ) return scan_fail(s, p, "STOP without an object");
        s->root = Py_NewRef(t->obj);
        s->done = 1;
        c->p += 1;
        s->stop_offset = s->offset + (c->p - s->base);
        return ST_OK;
    case OP_MARK:
        c->p += 1;
        return push_item(s, (Item){I_MARK, -1, 0, NULL});
    case OP_POP:
        t = top(s, 0);
        if (!t) return scan_fail(s, p, "stack underflow");
        if (t->kind == I_TRACE || t->kind == I_ENTRY || t->kind == I_ANNOT)
            return scan_fail(s, p, "a trace or entry dropped");
        drop_items(s, s->stack.n - 1);
        c->p += 1;
        return ST_OK;
    case OP_POP_MARK:
        if ((mark = find_mark(s)) < 0) return scan_fail(s, p, "a MARK is missing");
        for (Py_ssize_t i = mark; i < s->stack.n; i++) {
            uint8_t kind = VEC_AT(&s->stack, Item, i).kind;
            if (kind == I_TRACE || kind == I_ENTRY || kind == I_ANNOT) return scan_fail(s, p, "a trace or entry dropped");
        }
        drop_items(s, mark);
        c->p += 1;
        return ST_OK;
    case OP_DUP:
        t = top(s, 0);
        if (!t || t->kind != I_OBJ || t->obj == s->dtlist || is_bottom(s, t->obj))
            return scan_fail(s, p, "DUP of something other than data");
        if (t->obj == s->annlist && (r = annotations_plain(s))) return r;
        c->p += 1;
        return push_obj(s, Py_NewRef(t->obj));
    case OP_NONE: c->p += 1; return push_obj(s, Py_NewRef(Py_None));
    case OP_NEWTRUE: c->p += 1; return push_obj(s, Py_NewRef(Py_True));
    case OP_NEWFALSE: c->p += 1; return push_obj(s, Py_NewRef(Py_False));
    case OP_BININT1:
        if (!NEED(c, 2)) return SHORT(s, c);
        c->p += 2;
        return push_obj(s, PyLong_FromLong(p[1]));
    case OP_BININT2:
        if (!NEED(c, 3)) return SHORT(s, c);
        c->p += 3;
        return push_obj(s, PyLong_FromLong(le16(p + 1)));
    case OP_BININT:
        if (!NEED(c, 5)) return SHORT(s, c);
        c->p += 5;
        return push_obj(s, PyLong_FromLong((int32_t)le32(p + 1)));
    case OP_LONG1:
    case OP_LONG4: {
        Py_ssize_t head = op == OP_LONG1 ? 2 : 5;
        if (!NEED(c, head)) return SHORT(s, c);
        int64_t n = op == OP_LONG1 ? p[1] : (int32_t)le32(p + 1);
        if (n < 0) return scan_fail(s, p, "LONG pickle has negative byte count");
        if (!NEED(c, head + n)) return SHORT(s, c);
        c->p += head + n;
        return push_obj(s, long_from_bytes(p + head, (Py_ssize_t)n));
    }
    case OP_BINFLOAT: {
        if (!NEED(c, 9)) return SHORT(s, c);
        uint64_t bits = 0;
        for (int i = 1; i <= 8; i++) bits = (bits << 8) | p[i];
        double d;
        memcpy(&d, &bits, sizeof d);
        c->p += 9;
        return push_obj(s, PyFloat_FromDouble(d));
    }
    case OP_SHORT_BINUNICODE:
    case OP_SHORT_BINBYTES:
        if (!NEED(c, 2)) return SHORT(s, c);
        return push_string(s, c, 2, p[1], op == OP_SHORT_BINBYTES, 0);
    case OP_BINUNICODE:
    case OP_BINBYTES:
        if (!NEED(c, 5)) return SHORT(s, c);
        return push_string(s, c, 5, le32(p + 1), op == OP_BINBYTES, 0);
    case OP_BINUNICODE8:
    case OP_BINBYTES8:
    case OP_BYTEARRAY8:
        if (!NEED(c, 9)) return SHORT(s, c);
        return push_string(s, c, 9, le64(p + 1), op != OP_BINUNICODE8, op == OP_BYTEARRAY8);
    case OP_EMPTY_TUPLE: c->p += 1; return push_obj(s, PyTuple_New(0));
    case OP_TUPLE1:
    case OP_TUPLE2:
    case OP_TUPLE3: {
        Py_ssize_t n = op - OP_TUPLE1 + 1;
        if (s->stack.n < n || (r = all_objects(s, p, s->stack.n - n))) return r ? r : scan_fail(s, p, "stack underflow");
        PyObject *tuple = PyTuple_New(n);
        if (!tuple) return ST_ERROR;
        for (Py_ssize_t i = 0; i < n; i++) {
            Item *it = &VEC_AT(&s->stack, Item, s->stack.n - n + i);
            PyTuple_SET_ITEM(tuple, i, it->obj);
            it->obj = NULL;
        }
        s->stack.n -= n;
        c->p += 1;
        return push_obj(s, tuple);
    }
    case OP_TUPLE:
    case OP_LIST:
    case OP_DICT: {
        if ((mark = find_mark(s)) < 0) return scan_fail(s, p, "a MARK is missing");
        if ((r = all_objects(s, p, mark + 1))) return r;
        Py_ssize_t n = s->stack.n - mark - 1;
        PyObject *obj;
        if (op == OP_DICT) {
            if (n % 2) return scan_fail(s, p, "odd number of items for DICT");
            obj = PyDict_New();
            for (Py_ssize_t i = mark + 1; obj && i < s->stack.n; i += 2) {
                if (PyDict_SetItem(obj, VEC_AT(&s->stack, Item, i).obj, VEC_AT(&s->stack, Item, i + 1).obj) < 0) {
                    Py_CLEAR(obj);
                    if (!PyErr_ExceptionMatches(PyExc_TypeError)) return ST_ERROR;
                    PyErr_Clear();
                    return scan_fail(s, p, "an unhashable dict key");
                }
            }
        } else {
            obj = op == OP_TUPLE ? PyTuple_New(n) : PyList_New(n);
            for (Py_ssize_t i = 0; obj && i < n; i++) {
                Item *it = &VEC_AT(&s->stack, Item, mark + 1 + i);
                if (op == OP_TUPLE) PyTuple_SET_ITEM(obj, i, it->obj);
                else PyList_SET_ITEM(obj, i, it->obj);
                it->obj = NULL;
            }
        }
        if (!obj) return ST_ERROR;
        drop_items(s, mark);
        c->p += 1;
        return push_obj(s, obj);
    }
    case OP_EMPTY_LIST:
        if (in_traces(s)) {
            c->p += 1;
            return new_trace(s, p);
        }
        if (is_traces_position(s)) {
            PyObject *list = PyList_New(0);
            if (!list) return ST_ERROR;
            c->p += 1;
            s->dtlist = list;
            return push_obj(s, list);
        }
        if (is_annotations_position(s)) {
            PyObject *list = PyList_New(0);
            if (!list) return ST_ERROR;
            c->p += 1;
            s->annlist = Py_NewRef(list);  /* held: a list that took its place must not be taken for it */
            return push_obj(s, list);
        }
        c->p += 1;
        return push_obj(s, PyList_New(0));
    case OP_EMPTY_DICT: {
        int32_t trace;
        if (in_trace(s, &trace)) return parse_entry(s, c, trace);
        if (in_annotations(s)) {
            if ((r = parse_annotation(s, c)) != ST_FAIL) return r;
            s->reason = NULL;  /* not one the columns hold: read as plain data, the others made plain too */
            s->refused = 0;
            if ((r = annotations_plain(s))) return r;
        }
        c->p += 1;
        return push_obj(s, PyDict_New());
    }
    case OP_APPEND:
        if (s->stack.n < 1 || top(s, 0)->kind == I_MARK) return scan_fail(s, p, "stack underflow");
        if ((r = do_append(s, p, s->stack.n - 2, s->stack.n - 1))) return r;
        c->p += 1;
        return ST_OK;
    case OP_APPENDS:
        if ((mark = find_mark(s)) < 0) return scan_fail(s, p, "a MARK is missing");
        if ((r = do_append(s, p, mark - 1, mark + 1))) return r;
        s->stack.n--;  /* the mark, now on top */
        c->p += 1;
        return ST_OK;
    case OP_SETITEM:
        if (s->stack.n < 2 || top(s, 0)->kind == I_MARK || top(s, 1)->kind == I_MARK)
            return scan_fail(s, p, "stack underflow");
        if ((r = do_setitems(s, p, s->stack.n - 3, s->stack.n - 2))) return r;
        c->p += 1;
        return ST_OK;
    case OP_SETITEMS:
        if ((mark = find_mark(s)) < 0) return scan_fail(s, p, "a MARK is missing");
        if ((r = do_setitems(s, p, mark - 1, mark + 1))) return r;
        s->stack.n--;
        c->p += 1;
        return ST_OK;
    case OP_BINGET:
    case OP_LONG_BINGET: {
        int64_t index;
        if ((r = read_get_index(s, c, &index))) return r;
        return push_memo(s, p, index);
    }
    case OP_MEMOIZE:
        if ((r = memo_put_top(s, p, s->memo_len))) return r;
        c->p += 1;
        return ST_OK;
    case OP_BINPUT:
    case OP_LONG_BINPUT: {
        Py_ssize_t head = op == OP_BINPUT ? 2 : 5;
        if (!NEED(c, head)) return SHORT(s, c);
        int64_t index = op == OP_BINPUT ? p[1] : le32(p + 1);
        if ((r = memo_put_top(s, p, index))) return r;
        c->p += head;
        return ST_OK;
    }
    /* opcodes that name or call code: the plain path refuses them by name */
    case 'c': return refuse(s, p, "GLOBAL");
    case 0x93: return refuse(s, p, "STACK_GLOBAL");
    case 'R': return refuse(s, p, "REDUCE");
    case 'b': return refuse(s, p, "BUILD");
    case 'i': return refuse(s, p, "INST");
    case 'o': return refuse(s, p, "OBJ");
    case 0x81: return refuse(s, p, "NEWOBJ");
    case 0x92: return refuse(s, p, "NEWOBJ_EX");
    case 0x82: case 0x83: case 0x84: return refuse(s, p, "EXT");
    case 'P': case 'Q': return refuse(s, p, "persistent id");
    default:
        return scan_fail(s, p, "an opcode the fast path does not read");
    }
}

static int run(Scanner *s, Cur *c)
{
    while (!s->done) {
        const uint8_t *before = c->p;
        int r = step(s, c);
        if (r == ST_MORE) { c->p = before; return ST_MORE; }
        if (r) return r;
    }
    return ST_OK;
}

/* ---- the Python type -------------------------------------------------------------------------- */

/* glibc serves blocks of up to 32 MB from its arenas, and a block freed there (a worker's
 * memo chunk or column, once merged) stays resident until the arena's top is free. Blocks
 * from 1 MiB are mapped of their own instead, so freeing them gives the memory back at
 * once: at 10M events on 2 cores the peak fell from 698 to 577 MB and the open took less
 * time (fewer pages touched twice). Process-wide and once: memtui is the program. */
static void map_large_blocks(void)
{
#if defined(__GLIBC__)
    static int done = 0;
    if (!done) {
        mallopt(M_MMAP_THRESHOLD, 1 << 20);
        done = 1;
    }
#endif
}

static int Scanner_init(Scanner *s, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "", kwlist)) return -1;
    map_large_blocks();
    if (frametables_init(&s->ft) < 0) return -1;
    const char *reason = NULL;
    s->empty_str = str_intern(&s->strings, "", 0, &reason);
    return s->empty_str < 0 ? -1 : 0;
}

static void free_trace(Trace *t)
{
    intcol_free(&t->action); intcol_free(&t->addr); intcol_free(&t->size); intcol_free(&t->stream);
    intcol_free(&t->stack); intcol_free(&t->ctx); intcol_free(&t->meta); intcol_free(&t->device_free);
    vec_free(&t->time);
    map64_free(&t->ctx_ids); map64_free(&t->meta_ids);
    vec_free(&t->ctx_vals); vec_free(&t->meta_vals);
    Py_XDECREF(t->placeholder);
    free(t);
}

static void free_memo(Scanner *s)
{
    for (Py_ssize_t i = 0; i < s->memo_chunks; i++) free(s->memo[i]);
    free(s->memo);
    s->memo = NULL;
    s->memo_chunks = 0;
}

static void Scanner_dealloc(Scanner *s)
{
    free_memo(s);
    Py_CLEAR(s->annlist);
    free_annotation_columns(s);
    free(s->par_range_s);
    for (Py_ssize_t i = 0; i < s->objs.n; i++) Py_DECREF(VEC_AT(&s->objs, PyObject *, i));
    vec_free(&s->objs);
    vec_free(&s->obj_conv);
    drop_items(s, 0);
    vec_free(&s->stack);
    for (Py_ssize_t i = 0; i < s->frecs.n; i++) {
        Py_XDECREF(VEC_AT(&s->frecs, FrameRec, i).obj);
        Py_XDECREF(VEC_AT(&s->frecs, FrameRec, i).line_obj);
    }
    vec_free(&s->frecs);
    vec_free(&s->rec_extras);
    vec_free(&s->fids);
    vec_free(&s->actions);
    for (Py_ssize_t i = 0; i < s->traces.n; i++) free_trace(VEC_AT(&s->traces, Trace *, i));
    vec_free(&s->traces);
    map64_free(&s->frozen);
    vec_free(&s->memo_own);
    vec_free(&s->own);
    vec_free(&s->deferred_index);
    vec_free(&s->deferred_own);
    vec_free(&s->deferred_use);
    map64_free(&s->deferred_actions);
    vec_free(&s->obj_list);
    vec_free(&s->objlist_offsets);
    vec_free(&s->objlist_fids);
    strtable_free(&s->strings);
    frametables_free(&s->ft);
    Py_XDECREF(s->root);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyObject *Scanner_feed(Scanner *s, PyObject *args)
{
    Py_buffer view;
    int final;
    if (!PyArg_ParseTuple(args, "y*p", &view, &final)) return NULL;
    if (s->done) { PyBuffer_Release(&view); return PyLong_FromLong(0); }
    if (s->reason) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_RuntimeError, "the scanner already failed");
        return NULL;
    }
    s->base = view.buf;
    Cur c = {view.buf, (const uint8_t *)view.buf + view.len, final};
    int r = run(s, &c);
    Py_ssize_t consumed = c.p - (const uint8_t *)view.buf;
    s->offset += consumed;
    s->base = NULL;
    PyBuffer_Release(&view);
    if (r == ST_ERROR) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        return NULL;
    }
    if (r == ST_FAIL) {
        PyObject *exc = Py_BuildValue("(sLO)", s->reason ? s->reason : "?", (long long)s->reason_at,
                                      s->refused ? Py_True : Py_False);
        if (exc) { PyErr_SetObject(Unsupported, exc); Py_DECREF(exc); }
        return NULL;
    }
    return PyLong_FromSsize_t(consumed);
}

static PyObject *int_column(IntCol *c)
{
    int width = c->width;
    PyObject *buffer = intcol_to_buffer(c);
    if (!buffer) return NULL;
    return Py_BuildValue("(Ni)", buffer, width);
}

static PyObject *values_of(Scanner *s, Vec *vals)
{
    PyObject *list = PyList_New(vals->n);
    for (Py_ssize_t i = 0; list && i < vals->n; i++) {
        int32_t id = VEC_AT(vals, int32_t, i);
        PyList_SET_ITEM(list, i, Py_NewRef(id < 0 ? Py_None : VEC_AT(&s->strings.recs, StrRec, id).obj));
    }
    return list;
}

static PyObject *trace_result(Scanner *s, Trace *t)
{
    Py_ssize_t rows = t->action.n;
    PyObject *time = buffer_from_memory(t->time.data, rows * (Py_ssize_t)sizeof(double));
    t->time.data = NULL;
    t->time.n = t->time.cap = 0;
    if (!time) return NULL;
    return Py_BuildValue("{s:n,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N}", "rows", rows,
                         "action", int_column(&t->action), "addr", int_column(&t->addr),
                         "size", int_column(&t->size), "stream", int_column(&t->stream),
                         "stack", int_column(&t->stack), "ctx", int_column(&t->ctx), "meta", int_column(&t->meta),
                         "device_free", int_column(&t->device_free), "time_us", time,
                         "ctx_values", values_of(s, &t->ctx_vals), "meta_values", values_of(s, &t->meta_vals));
}

static PyObject *finish_fail(Scanner *s, const char *reason)
{
    PyObject *exc = Py_BuildValue("(sLO)", reason, (long long)s->offset, Py_False);
    if (exc) { PyErr_SetObject(Unsupported, exc); Py_DECREF(exc); }
    return NULL;
}

/* After STOP: check the traces are exactly the root's device traces, then hand everything
 * over. ``total`` is the length of the stream, which every FRAME must lie within. */
static PyObject *Scanner_finish(Scanner *s, PyObject *args)
{
    long long total;
    if (!PyArg_ParseTuple(args, "L", &total)) return NULL;
    if (!s->done) return finish_fail(s, "the pickle ends before STOP");
    if (stage_flush(s)) return PyErr_NoMemory();
    if (s->max_frame_end > total) return finish_fail(s, "a frame runs past the end of the file");
    if (!PyDict_CheckExact(s->root)) return finish_fail(s, "the pickle does not hold a dict");
    if (!s->dtlist) return finish_fail(s, "no device traces");
    PyObject *traces = PyDict_GetItemString(s->root, "device_traces");
    if (traces != s->dtlist) return finish_fail(s, "the device traces were replaced");
    if (PyList_GET_SIZE(traces) != s->traces.n) return finish_fail(s, "a device trace is not in the list of traces");
    for (Py_ssize_t i = 0; i < s->traces.n; i++) {
        Trace *t = VEC_AT(&s->traces, Trace *, i);
        if (PyList_GET_ITEM(traces, i) != t->placeholder) return finish_fail(s, "the device traces are out of order");
        if (t->appended != t->action.n) return finish_fail(s, "a trace entry is not in its trace");
    }
    if (s->annlist && !s->ann_plain && s->ann_appended != s->ann_device.n)
        return finish_fail(s, "an annotation is not in its list");
    free_memo(s);
    PyObject *out = PyDict_New(), *list = NULL;
    if (!out) return NULL;
    /* the traces, each a dict of columns (buffer, width) */
    if (!(list = PyList_New(s->traces.n))) goto error;
    for (Py_ssize_t i = 0; i < s->traces.n; i++) {
        PyObject *one = trace_result(s, VEC_AT(&s->traces, Trace *, i));
        if (!one) goto error;
        PyList_SET_ITEM(list, i, one);
    }
    if (PyDict_SetItemString(out, "traces", list) < 0) goto error;
    Py_CLEAR(list);
    /* action names, in the order first seen */
    if (!(list = values_of(s, &s->actions)) || PyDict_SetItemString(out, "actions", list) < 0) goto error;
    Py_CLEAR(list);
    /* the external annotations read into columns, or None (annotations.c) */
    if (!(list = annotation_columns(s)) || PyDict_SetItemString(out, "annotations", list) < 0) goto error;
    Py_CLEAR(list);
    /* frames by content: (filename, line, name, ((key, value), ...)) */
    if (!(list = PyList_New(s->ft.frames.n))) goto error;
    StrRec *recs = (StrRec *)s->strings.recs.data;
    for (Py_ssize_t i = 0; i < s->ft.frames.n; i++) {
        const FrameKey *k = &VEC_AT(&s->ft.frames, FrameKey, i);
        PyObject *extras = PyTuple_New(k->n_extras);
        for (int32_t j = 0; extras && j < k->n_extras; j++) {
            const int32_t *kv = (const int32_t *)s->ft.extras.data + k->extras_at + 2 * j;
            PyObject *pair = PyTuple_Pack(2, recs[kv[0]].obj, recs[kv[1]].obj);
            if (!pair) Py_CLEAR(extras);
            else PyTuple_SET_ITEM(extras, j, pair);
        }
        PyObject *frame = extras ? Py_BuildValue("(OLON)", recs[k->filename].obj, (long long)k->line,
                                                 recs[k->name].obj, extras) : NULL;
        if (!frame) goto error;
        PyList_SET_ITEM(list, i, frame);
    }
    if (PyDict_SetItemString(out, "frames", list) < 0) goto error;
    Py_CLEAR(list);
    /* stacks: flat frame ids and offsets */
    PyObject *flat = buffer_from_memory(s->ft.flat.data, s->ft.flat.n * (Py_ssize_t)sizeof(int32_t));
    s->ft.flat.data = NULL;
    s->ft.flat.n = s->ft.flat.cap = 0;
    if (!flat) goto error;
    if (PyDict_SetItemString(out, "stack_flat", flat) < 0) { Py_DECREF(flat); goto error; }
    Py_DECREF(flat);
    PyObject *offsets = buffer_from_memory(s->ft.offsets.data, s->ft.offsets.n * (Py_ssize_t)sizeof(int64_t));
    s->ft.offsets.data = NULL;
    s->ft.offsets.n = s->ft.offsets.cap = 0;
    if (!offsets) goto error;
    if (PyDict_SetItemString(out, "stack_offsets", offsets) < 0) { Py_DECREF(offsets); goto error; }
    Py_DECREF(offsets);
    if (PyDict_SetItemString(out, "root", s->root) < 0) goto error;
    return out;
error:
    Py_XDECREF(list);
    Py_DECREF(out);
    return NULL;
}

static PyObject *Scanner_get_done(Scanner *s, void *closure)
{
    (void)closure;
    return PyBool_FromLong(s->done);
}
static PyObject *Scanner_get_offset(Scanner *s, void *closure)
{
    (void)closure;
    return PyLong_FromLongLong(s->offset);
}
static PyObject *Scanner_get_max_frame_end(Scanner *s, void *closure)
{
    (void)closure;
    return PyLong_FromLongLong(s->max_frame_end);
}

static PyObject *Scanner_scan_file(Scanner *s, PyObject *args);  /* parallel.c */

static PyMethodDef Scanner_methods[] = {
    {"scan_file", (PyCFunction)Scanner_scan_file, METH_VARARGS,
     "scan_file(fd, size, threads, progress) -> stream offset after STOP: the whole of an uncompressed "
     "file, read by offset, on ``threads`` cores where it can"},
    {"feed", (PyCFunction)Scanner_feed, METH_VARARGS,
     "feed(data, final) -> bytes consumed; the next call starts with the bytes after them"},
    {"finish", (PyCFunction)Scanner_finish, METH_VARARGS,
     "finish(stream_length) -> dict of the root object, columns and tables"},
    {NULL},
};

static PyObject *Scanner_get_parallel(Scanner *s, void *closure)
{
    (void)closure;
    PyObject *ranges = PyList_New(0);
    for (int64_t i = 0; ranges && s->par_range_s && i < s->par_ranges; i++) {
        PyObject *seconds = PyFloat_FromDouble(s->par_range_s[i]);
        if (!seconds || PyList_Append(ranges, seconds) < 0) Py_CLEAR(ranges);
        Py_XDECREF(seconds);
    }
    if (!ranges) return NULL;
    return Py_BuildValue("{s:L,s:L,s:L,s:L,s:d,s:d,s:d,s:N}", "ranges", (long long)s->par_ranges, "merged",
                         (long long)s->par_merged, "read_in_order", (long long)s->par_discarded,
                         "merged_while_workers_ran", (long long)s->par_merged_early,
                         "prefix_s", s->par_prefix_s, "workers_s", s->par_workers_s, "merge_s", s->par_merge_s,
                         "range_s", ranges);
}

static PyGetSetDef Scanner_getset[] = {
    {"parallel", (getter)Scanner_get_parallel, NULL, "ranges of the parallel pass: planned, merged, read in order; the seconds its steps and each range's thread took", NULL},
    {"done", (getter)Scanner_get_done, NULL, "STOP was read", NULL},
    {"offset", (getter)Scanner_get_offset, NULL, "bytes of the stream consumed", NULL},
    {"max_frame_end", (getter)Scanner_get_max_frame_end, NULL, "where the last FRAME ends", NULL},
    {NULL},
};

PyTypeObject ScannerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "memtui._native.Scanner",
    .tp_basicsize = sizeof(Scanner),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One pass over a snapshot pickle: the traces as columns, the rest as objects.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Scanner_init,
    .tp_dealloc = (destructor)Scanner_dealloc,
    .tp_methods = Scanner_methods,
    .tp_getset = Scanner_getset,
};
