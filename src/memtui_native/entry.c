/* Trace entries, read straight into columns: no dict is built for an entry, a frame list
 * or a frame. An entry is read whole or not at all: when the buffer ends inside one, every
 * change it made is undone (memo, frame records) and it is read again from its start once
 * more bytes are there. Interning is by content, so reading a piece twice changes nothing.
 *
 * Only what torch writes is recognised: a dict of known keys with plain values (ints,
 * floats, strings, None, a list of frame dicts). Anything else fails with a reason and the
 * file goes to the Python decoder, which builds the same model or gives the same error.
 */
#include "scanner.h"

#include <math.h>

static int read_string(Scanner *s, Cur *c, int allow_none, int32_t *strid);

/* ---- fast paths: the encodings torch writes, tried first; 0 means "take the general path"
 * and nothing was consumed ------------------------------------------------------------ */

/* Whether the n < 16 bytes at a and b are the same (memcmp's call costs more than the
 * compare for the few bytes torch's short strings have). */
static inline __attribute__((always_inline)) int same_short(const char *a, const uint8_t *b, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        if ((uint8_t)a[i] != b[i]) return 0;
    return 1;
}

/* A memoized string (BINGET/LONG_BINGET of a string slot) or a short new one. */
static inline __attribute__((always_inline)) int fast_string(Scanner *s, Cur *c, int32_t *strid)
{
    const uint8_t *p = c->p;
    Py_ssize_t left = c->end - p;
    if (left >= 5 && (p[0] == OP_LONG_BINGET || p[0] == OP_BINGET)) {
        int64_t index = p[0] == OP_BINGET ? p[1] : (int64_t)le32(p + 1);
        if (index >= s->memo_len) return 0;
        uint32_t slot = s->memo[index >> MEMO_CHUNK_BITS][index & (MEMO_CHUNK - 1)];
        if (SLOT_KIND(slot) != SK_STR) {
            if (!deferred_known(s, slot, USE_STR, strid)) return 0;
        } else {
            *strid = (int32_t)SLOT_VALUE(slot);
        }
        c->p = p + (p[0] == OP_BINGET ? 2 : 5);
        return 1;
    }
    if (left >= 2 && p[0] == OP_SHORT_BINUNICODE && p[1] < 16 && left >= 3 + p[1]) {
        Py_ssize_t n = p[1];
        uint32_t h = (uint32_t)n * 0x9E3779B1u;
        for (Py_ssize_t i = 0; i < n; i++) h = (h ^ p[2 + i]) * 0x01000193u;
        h &= 511;
        if (s->short_strings[h].length != n || !same_short(s->short_strings[h].bytes, p + 2, n)) {
            const char *reason = NULL;
            int32_t id = str_intern(&s->strings, (const char *)p + 2, n, &reason);
            if (id < 0) return 0;  /* the general path says why */
            s->short_strings[h].length = (uint8_t)n;
            memcpy(s->short_strings[h].bytes, p + 2, (size_t)n);
            s->short_strings[h].strid = id;
        }
        if (p[2 + n] == OP_MEMOIZE) {
            if (memo_append(s, p, SLOT(SK_STR, s->short_strings[h].strid))) return 0;
            c->p = p + 3 + n;
        } else if (p[2 + n] == OP_BINPUT || p[2 + n] == OP_LONG_BINPUT || p[2 + n] == OP_FRAME) {
            return 0;
        } else {
            c->p = p + 2 + n;
        }
        *strid = s->short_strings[h].strid;
        return 1;
    }
    return 0;
}

static inline __attribute__((always_inline)) int fast_int(Cur *c, int64_t *v)
{
    const uint8_t *p = c->p;
    Py_ssize_t left = c->end - p;
    if (left < 2) return 0;
    switch (p[0]) {
    case OP_BININT1: *v = p[1]; c->p = p + 2; return 1;
    case OP_BININT2: if (left < 3) return 0; *v = le16(p + 1); c->p = p + 3; return 1;
    case OP_BININT: if (left < 5) return 0; *v = (int32_t)le32(p + 1); c->p = p + 5; return 1;
    case OP_LONG1:
        if (p[1] > 8 || left < 2 + p[1]) return 0;
        long_fits_at(p + 2, p[1], left - 2, v);
        c->p = p + 2 + p[1];
        return 1;
    }
    return 0;
}

/* ---- scalar values ---------------------------------------------------------------------- */

/* An int64 (bools count as 0 and 1, as numpy reads them) or, with as_double, a float too,
 * and None as NaN. */
static int read_number(Scanner *s, Cur *c, int64_t *iv, double *dv, int as_double, int allow_bool)
{
    uint8_t op = 0;
    int r = next_op(s, c, &op);
    if (r) return r;
    const uint8_t *p = c->p;
    int64_t v;
    switch (op) {
    case OP_BININT1:
        if (!NEED(c, 2)) return SHORT(s, c);
        v = p[1];
        c->p += 2;
        break;
    case OP_BININT2:
        if (!NEED(c, 3)) return SHORT(s, c);
        v = le16(p + 1);
        c->p += 3;
        break;
    case OP_BININT:
        if (!NEED(c, 5)) return SHORT(s, c);
        v = (int32_t)le32(p + 1);
        c->p += 5;
        break;
    case OP_LONG1: {
        if (!NEED(c, 2)) return SHORT(s, c);
        Py_ssize_t n = p[1];
        if (!NEED(c, 2 + n)) return SHORT(s, c);
        if (!long_fits(p + 2, n, &v)) return scan_fail(s, p, "an integer past 64 bits in a trace entry");
        c->p += 2 + n;
        break;
    }
    case OP_NEWTRUE:
    case OP_NEWFALSE:
        if (!allow_bool) return scan_fail(s, p, "a bool where an integer belongs");
        v = op == OP_NEWTRUE;
        c->p += 1;
        break;
    case OP_BINFLOAT:
        if (!as_double) return scan_fail(s, p, "a float where an integer belongs");
        if (!NEED(c, 9)) return SHORT(s, c);
        {
            uint64_t bits = 0;
            for (int i = 1; i <= 8; i++) bits = (bits << 8) | p[i];  /* big-endian */
            memcpy(dv, &bits, sizeof(double));
        }
        c->p += 9;
        return ST_OK;
    case OP_NONE:
        if (!as_double) return scan_fail(s, p, "None where an integer belongs");
        *dv = NAN;
        c->p += 1;
        return ST_OK;
    default:
        return scan_fail(s, p, "a trace field holds a value that is not a plain number");
    }
    if (as_double) *dv = (double)v;
    else *iv = v;
    return ST_OK;
}

/* A string as a string id, memoized as such; with allow_none, None gives -1. */
static int read_string(Scanner *s, Cur *c, int allow_none, int32_t *strid)
{
    uint8_t op = 0;
    int r = next_op(s, c, &op);
    if (r) return r;
    const uint8_t *p = c->p;
    Py_ssize_t n, head;
    switch (op) {
    case OP_SHORT_BINUNICODE:
        if (!NEED(c, 2)) return SHORT(s, c);
        n = p[1];
        head = 2;
        break;
    case OP_BINUNICODE:
        if (!NEED(c, 5)) return SHORT(s, c);
        n = le32(p + 1);
        head = 5;
        break;
    case OP_BINUNICODE8: {
        if (!NEED(c, 9)) return SHORT(s, c);
        uint64_t n64 = le64(p + 1);
        if (n64 > INT32_MAX) return scan_fail(s, p, "a string of more than 2 GiB in a trace entry");
        n = (Py_ssize_t)n64;
        head = 9;
        break;
    }
    case OP_BINGET:
    case OP_LONG_BINGET: {
        int64_t index;
        uint32_t slot = 0;
        if ((r = read_get_index(s, c, &index)) || (r = memo_get(s, p, index, &slot))) return r;
        if (SLOT_KIND(slot) == SK_STR) { *strid = (int32_t)SLOT_VALUE(slot); return ST_OK; }
        if (SLOT_KIND(slot) == SK_DEFERRED) return defer_code(s, index, allow_none ? USE_STR | USE_NONE : USE_STR, strid);
        if (SLOT_KIND(slot) == SK_OBJ) {
            PyObject *obj = VEC_AT(&s->objs, PyObject *, SLOT_VALUE(slot));
            if (obj == Py_None && allow_none) { *strid = -1; return ST_OK; }
            if ((r = obj_to_strid(s, p, SLOT_VALUE(slot), strid))) return r;
            /* from now on the slot is the interned string (an equal str wherever it is used);
             * a worker shares the slots before its range with the others, so leaves them be */
            if (!s->worker) s->memo[index >> MEMO_CHUNK_BITS][index & (MEMO_CHUNK - 1)] = SLOT(SK_STR, *strid);
            return ST_OK;
        }
        return scan_fail(s, p, "a trace field refers to something that is not a string");
    }
    case OP_NONE:
        if (!allow_none) return scan_fail(s, p, "None where a string belongs");
        c->p += 1;
        *strid = -1;
        return ST_OK;
    default:
        return scan_fail(s, p, "a trace field holds a value that is not a string");
    }
    if (!NEED(c, head + n)) return SHORT(s, c);
    const char *reason = NULL;
    int32_t id = str_intern(&s->strings, (const char *)p + head, n, &reason);
    if (id == -2) return ST_ERROR;
    if (id < 0) return scan_fail(s, p, reason);
    c->p += head + n;
    if ((r = opt_memo(s, c, SLOT(SK_STR, id), NULL))) return r;
    *strid = id;
    return ST_OK;
}

/* ---- frames ----------------------------------------------------------------------------- */

static inline int64_t clamp_line(int64_t line) { return line >= 0 && line < ((int64_t)1 << 62) ? line : 0; }

/* The content id of frame record ``r``, interning it on first use. */
static int frec_fid(Scanner *s, int32_t r, int32_t *fid)
{
    FrameRec *rec = &VEC_AT(&s->frecs, FrameRec, r);
    if (rec->fid < 0) {
        const int32_t *extras = rec->n_extras ? (const int32_t *)s->rec_extras.data + rec->extras_at : NULL;
        int32_t id = frame_intern(&s->ft, rec->filename, clamp_line(rec->line), rec->name, extras, rec->n_extras);
        if (id < 0) return ST_ERROR;
        rec = &VEC_AT(&s->frecs, FrameRec, r);
        rec->fid = id;
    }
    *fid = rec->fid;
    return ST_OK;
}

/* The body of a frame dict (after EMPTY_DICT and its memo): MARK pairs SETITEMS, or one
 * pair and SETITEM. filename, line and name must all be there; other keys are the frame's
 * extras (fx_* of torch.compile), kept in order, string values only. */
static int read_frame_body(Scanner *s, Cur *c, FrameRec *rec)
{
    uint8_t op = 0;
    int r = next_op(s, c, &op);
    if (r) return r;
    int batch = op == OP_MARK;
    if (batch) c->p++;
    uint32_t seen = 0;
    rec->extras_at = (int32_t)s->rec_extras.n;
    rec->n_extras = 0;
    for (;;) {
        if ((r = next_op(s, c, &op))) return r;
        if (batch && op == OP_SETITEMS) { c->p++; break; }
        const uint8_t *at = c->p;
        int32_t key, value;
        if ((r = read_string(s, c, 0, &key))) return r;
        if (key < 0) return scan_fail(s, at, "a frame key from another worker's range");
        int8_t k = VEC_AT(&s->strings.recs, StrRec, key).key;
        if (k == K_FILENAME || k == K_NAME || k == K_LINE) {
            if (seen & (1u << k)) return scan_fail(s, at, "a frame names a key twice");
            seen |= 1u << k;
            if (k == K_LINE) {
                /* an int only (the model refuses a bool); past 64 bits it reads as line 0 */
                if ((r = next_op(s, c, &op))) return r;
                if (op == OP_LONG1 && NEED(c, 2) && NEED(c, 2 + c->p[1]) && !long_fits(c->p + 2, c->p[1], &rec->line)) {
                    if (s->worker) return scan_fail(s, at, "a line number past 64 bits (read by the main thread)");
                    Py_CLEAR(rec->line_obj);
                    if (!(rec->line_obj = long_from_bytes(c->p + 2, c->p[1]))) return ST_ERROR;
                    rec->line = -1;
                    c->p += 2 + c->p[1];
                } else if ((r = read_number(s, c, &rec->line, NULL, 0, 0))) {
                    return r;
                }
            } else {
                if ((r = read_string(s, c, 0, &value))) return r;
                if (k == K_FILENAME) rec->filename = value;
                else rec->name = value;
            }
        } else {
            for (int32_t i = 0; i < rec->n_extras; i++)
                if (VEC_AT(&s->rec_extras, int32_t, rec->extras_at + 2 * i) == key)
                    return scan_fail(s, at, "a frame names a key twice");
            if ((r = read_string(s, c, 0, &value))) return r;
            if (VEC_PUSH(&s->rec_extras, int32_t, key) || VEC_PUSH(&s->rec_extras, int32_t, value)) return ST_ERROR;
            rec->n_extras++;
        }
        if (!batch) {
            if ((r = next_op(s, c, &op))) return r;
            if (op != OP_SETITEM) return scan_fail(s, c->p, "a frame dict built in an unexpected way");
            c->p++;
            break;
        }
    }
    if (seen != ((1u << K_FILENAME) | (1u << K_LINE) | (1u << K_NAME)))
        return scan_fail(s, c->p, "a frame without filename, line or name");
    return ST_OK;
}

/* One item of a frame list: a new frame dict, or a reference to one. */
static int read_frame_item(Scanner *s, Cur *c, int32_t *fid)
{
    uint8_t op = 0;
    int r = next_op(s, c, &op);
    if (r) return r;
    const uint8_t *at = c->p;
    if (op == OP_EMPTY_DICT) {
        c->p++;
        int64_t index = -1;
        if ((r = opt_memoize(s, c, SLOT(SK_OPAQUE, 0), &index))) return r;
        FrameRec rec = {-1, -1, 0, -1, 0, -1, NULL, NULL};
        if ((r = read_frame_body(s, c, &rec))) { Py_XDECREF(rec.line_obj); return r; }
        if (s->frecs.n > SLOT_VALUE_MAX) return scan_fail(s, at, "too many frames");
        int32_t id = (int32_t)s->frecs.n;
        if (VEC_PUSH(&s->frecs, FrameRec, rec)) { Py_XDECREF(rec.line_obj); return ST_ERROR; }
        if (index >= 0 && (r = memo_set(s, at, index, SLOT(SK_FRAME, id)))) return r;
        return frec_fid(s, id, fid);
    }
    if (op == OP_BINGET || op == OP_LONG_BINGET) {
        int64_t index;
        uint32_t slot = 0;
        if ((r = read_get_index(s, c, &index)) || (r = memo_get(s, at, index, &slot))) return r;
        if (SLOT_KIND(slot) == SK_FRAME) return frec_fid(s, (int32_t)SLOT_VALUE(slot), fid);
        if (SLOT_KIND(slot) == SK_DEFERRED) return defer_code(s, index, USE_FRAME, fid);
        if (SLOT_KIND(slot) == SK_OBJ) {  /* a frame dict built outside the traces (a block's frames) */
            PyObject *obj = VEC_AT(&s->objs, PyObject *, SLOT_VALUE(slot));
            int32_t *conv = &VEC_AT(&s->obj_conv, int32_t, SLOT_VALUE(slot));
            if (!PyDict_CheckExact(obj)) return scan_fail(s, at, "a frame list holds something that is not a frame dict");
            if (*conv == CONV_UNKNOWN || *conv == CONV_BAD) {
                if (s->worker) return scan_fail(s, at, "a frame the main thread did not convert");
                if ((r = obj_to_fid(s, at, obj, fid))) return r;
                VEC_AT(&s->obj_conv, int32_t, SLOT_VALUE(slot)) = *fid;
            }
            *fid = VEC_AT(&s->obj_conv, int32_t, SLOT_VALUE(slot));
            return ST_OK;
        }
        return scan_fail(s, at, "a frame list refers to something that is not a frame");
    }
    return scan_fail(s, at, "a frame list holds something that is not a frame dict");
}

/* A frame dict built outside the traces (a block's frames, in the segments torch writes
 * first) whose frame is known: most entries' lists refer to a few of them. 0 leaves it to
 * read_frame_item, which converts it the first time and says what is wrong. */
static inline int converted_frame(const Scanner *s, uint32_t slot, int32_t *fid)
{
    int32_t conv = VEC_AT(&s->obj_conv, int32_t, SLOT_VALUE(slot));
    if (conv < 0 || !PyDict_CheckExact(VEC_AT(&s->objs, PyObject *, SLOT_VALUE(slot)))) return 0;
    *fid = conv;
    return 1;
}

/* Whether the next op starts a frame item (rather than the entry's next key). */
static int frame_item_next(Scanner *s, Cur *c, uint8_t op, int *yes)
{
    if (op == OP_EMPTY_DICT) { *yes = 1; return ST_OK; }
    if (op != OP_BINGET && op != OP_LONG_BINGET) { *yes = 0; return ST_OK; }
    Cur look = *c;
    int64_t index;
    uint32_t slot = 0;
    int r = read_get_index(s, &look, &index);
    if (r) return r;
    if ((r = memo_get(s, c->p, index, &slot))) return r;
    if (SLOT_KIND(slot) == SK_DEFERRED) {  /* a frame if APPEND follows (a key is followed by its value) */
        uint8_t after = 0;
        if ((r = next_op(s, &look, &after))) return r;
        *yes = after == OP_APPEND;
        return ST_OK;
    }
    *yes = SLOT_KIND(slot) == SK_FRAME ||
           (SLOT_KIND(slot) == SK_OBJ && PyDict_CheckExact(VEC_AT(&s->objs, PyObject *, SLOT_VALUE(slot))));
    return ST_OK;
}

/* An entry's frames: None, a new list of frames (EMPTY_LIST, its memo, then batches of
 * MARK items APPENDS or single items with APPEND), or a reference to a list seen before. */
static int read_frames(Scanner *s, Cur *c, int32_t *sid)
{
    uint8_t op = 0;
    int r = next_op(s, c, &op);
    if (r) return r;
    const uint8_t *at = c->p;
    if (op == OP_NONE) { c->p++; *sid = -1; return ST_OK; }
    if (op == OP_BINGET || op == OP_LONG_BINGET) {
        int64_t index;
        uint32_t slot = 0;
        if ((r = read_get_index(s, c, &index)) || (r = memo_get(s, at, index, &slot))) return r;
        if (SLOT_KIND(slot) == SK_STACK) { *sid = (int32_t)SLOT_VALUE(slot) - 1; return ST_OK; }
        if (SLOT_KIND(slot) == SK_DEFERRED) {
            if (s->guess < 0 && guess_base(s, index) && (r = memo_get(s, at, index, &slot))) return r;
            if (SLOT_KIND(slot) == SK_STACK) { *sid = (int32_t)SLOT_VALUE(slot) - 1; return ST_OK; }
            return defer_code(s, index, USE_LIST, sid);
        }
        if (SLOT_KIND(slot) == SK_OBJ) return obj_to_sid(s, at, SLOT_VALUE(slot), sid);
        return scan_fail(s, at, "an entry's frames refer to something that is not a frame list");
    }
    if (op != OP_EMPTY_LIST) return scan_fail(s, at, "an entry's frames are not a list");
    c->p++;
    int64_t index = -1;
    if ((r = opt_memoize(s, c, SLOT(SK_OPAQUE, 0), &index))) return r;
    s->fids.n = 0;
    for (;;) {
        int32_t fid;
        if ((r = next_op(s, c, &op))) return r;
        if (op == OP_MARK) {
            c->p++;
            for (;;) {
                const uint8_t *q = c->p;
                if (c->end - q >= 5 && (q[0] == OP_BINGET || q[0] == OP_LONG_BINGET)) {
                    /* a frame seen before, already interned: the common case */
                    int64_t i = q[0] == OP_BINGET ? q[1] : (int64_t)le32(q + 1);
                    if (i < s->memo_len) {
                        uint32_t slot = s->memo[i >> MEMO_CHUNK_BITS][i & (MEMO_CHUNK - 1)];
                        if ((SLOT_KIND(slot) == SK_FRAME && (fid = VEC_AT(&s->frecs, FrameRec, SLOT_VALUE(slot)).fid) >= 0) ||
                            (SLOT_KIND(slot) == SK_OBJ && converted_frame(s, slot, &fid)) ||
                            deferred_known(s, slot, USE_FRAME, &fid)) {
                            if (VEC_PUSH(&s->fids, int32_t, fid)) return ST_ERROR;
                            c->p = q + (q[0] == OP_BINGET ? 2 : 5);
                            continue;
                        }
                    }
                }
                if ((r = next_op(s, c, &op))) return r;
                if (op == OP_APPENDS) { c->p++; break; }
                if ((r = read_frame_item(s, c, &fid))) return r;
                if (VEC_PUSH(&s->fids, int32_t, fid)) return ST_ERROR;
            }
            continue;
        }
        int item;
        if ((r = frame_item_next(s, c, op, &item))) return r;
        if (!item) break;
        if ((r = read_frame_item(s, c, &fid))) return r;
        if ((r = next_op(s, c, &op))) return r;
        if (op != OP_APPEND) return scan_fail(s, c->p, "a frame list built in an unexpected way");
        c->p++;
        if (VEC_PUSH(&s->fids, int32_t, fid)) return ST_ERROR;
    }
    int32_t id = -1;
    if (s->fids.n) {
        id = stack_intern(&s->ft, (const int32_t *)s->fids.data, s->fids.n);
        if (id < 0) return ST_ERROR;
    }
    if (index >= 0 && (r = memo_fill(s, at, index, SLOT(SK_STACK, id + 1)))) return r;
    if (index >= 0) s->this_list_own = index;
    *sid = id;
    return ST_OK;
}

/* ---- entries -------------------------------------------------------------------------- */

static inline uint64_t load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The key of an entry's pair at ``place`` (0-based; KEY_SHAPES and past: not remembered). */
static inline __attribute__((always_inline)) int read_key(Scanner *s, Cur *c, int place, int8_t *k)
{
    const uint8_t *at = c->p;
    int enough = c->end - at >= 8;
    if (place < KEY_SHAPES && enough) {
        const KeyShape *shape = &s->key_shapes[place];
        if (shape->epoch == s->memo_epoch + 1 && (load64(at) & shape->mask) == shape->bytes) {
            *k = shape->key;
            c->p = at + shape->length;
            return ST_OK;
        }
    }
    int32_t key;
    int r;
    if (!fast_string(s, c, &key) && (r = read_string(s, c, 0, &key))) return r;
    if (key < 0) return scan_fail(s, at, "a trace entry key from another worker's range");
    *k = VEC_AT(&s->strings.recs, StrRec, key).key;
    if (*k < K_ACTION || *k >= ENTRY_KEYS_END) return scan_fail(s, at, "a trace entry key the fast path does not read");
    if (place < KEY_SHAPES && enough && (at[0] == OP_BINGET || at[0] == OP_LONG_BINGET) && c->p - at <= 5) {
        /* a memo reference: the same bytes name the same slot, and so this key, until a slot is
         * written again */
        int length = (int)(c->p - at);
        uint64_t mask = length == 2 ? 0xFFFFu : 0xFFFFFFFFFFull;
        s->key_shapes[place].bytes = load64(at) & mask;
        s->key_shapes[place].mask = mask;
        s->key_shapes[place].length = (uint8_t)length;
        s->key_shapes[place].key = *k;
        s->key_shapes[place].epoch = s->memo_epoch + 1;
    }
    return ST_OK;
}

static inline __attribute__((always_inline)) int read_pair(Scanner *s, Cur *c, Row *row, int place)
{
    const uint8_t *at = c->p;
    int8_t k;
    int r;
    if ((r = read_key(s, c, place, &k))) return r;
    if (row->seen & (1u << k)) return scan_fail(s, at, "a trace entry names a key twice");
    row->seen |= 1u << k;
    int64_t v;
    switch (k) {
    case K_ACTION: return fast_string(s, c, &row->action) ? ST_OK : read_string(s, c, 0, &row->action);
    case K_ADDR: return fast_int(c, &row->addr) ? ST_OK : read_number(s, c, &row->addr, NULL, 0, 1);
    case K_SIZE: return fast_int(c, &row->size) ? ST_OK : read_number(s, c, &row->size, NULL, 0, 1);
    case K_STREAM: return fast_int(c, &row->stream) ? ST_OK : read_number(s, c, &row->stream, NULL, 0, 1);
    case K_DEVICE_FREE:
        return fast_int(c, &row->device_free) ? ST_OK : read_number(s, c, &row->device_free, NULL, 0, 1);
    case K_TIME:
        if (fast_int(c, &v)) { row->time = (double)v; return ST_OK; }
        return read_number(s, c, NULL, &row->time, 1, 1);
    case K_CTX: return fast_string(s, c, &row->ctx) ? ST_OK : read_string(s, c, 1, &row->ctx);
    case K_META: return fast_string(s, c, &row->meta) ? ST_OK : read_string(s, c, 1, &row->meta);
    case K_FRAMES: return read_frames(s, c, &row->stack);
    }
    return scan_fail(s, at, "unreachable");
}

static int local_id_slow(Map64 *ids, Vec *vals, int32_t strid, int64_t *local);

static inline int local_id(Map64 *ids, Vec *vals, int32_t strid, int64_t *local, int32_t *last, int32_t *last_local)
{
    if (strid == *last) { *local = *last_local; return ST_OK; }
    int r = local_id_slow(ids, vals, strid, local);
    *last = strid;
    *last_local = (int32_t)*local;
    return r;
}

static int local_id_slow(Map64 *ids, Vec *vals, int32_t strid, int64_t *local)
{
    uint64_t key = (uint64_t)(int64_t)strid + 1;
    int32_t found = map64_get(ids, key, -1);
    if (found < 0) {
        found = (int32_t)vals->n;
        if (map64_put(ids, key, found) || VEC_PUSH(vals, int32_t, strid)) return ST_ERROR;
    }
    *local = found;
    return ST_OK;
}

static int commit(Scanner *s, Trace *t, const Row *row)
{
    int32_t action_id;
    if (IS_DEFERRED(row->action)) {  /* a worker: an action string from before its range */
        action_id = map64_get(&s->deferred_actions, (uint64_t)(int64_t)row->action, -1);
        if (action_id < 0) {
            action_id = (int32_t)s->actions.n;
            if (map64_put(&s->deferred_actions, (uint64_t)(int64_t)row->action, action_id) ||
                VEC_PUSH(&s->actions, int32_t, row->action))
                return ST_ERROR;
        }
    } else {
        StrRec *action = &VEC_AT(&s->strings.recs, StrRec, row->action);
        if (action->action < 0) {
            action->action = (int32_t)s->actions.n;
            if (VEC_PUSH(&s->actions, int32_t, row->action)) return ST_ERROR;
        }
        action_id = action->action;
    }
    int64_t ctx, meta;
    if (local_id(&t->ctx_ids, &t->ctx_vals, row->ctx, &ctx, &t->last_ctx, &t->last_ctx_local) ||
        local_id(&t->meta_ids, &t->meta_vals, row->meta, &meta, &t->last_meta, &t->last_meta_local))
        return ST_ERROR;
    if (s->staged.trace != t) {
        if (stage_flush(s)) return ST_ERROR;
        s->staged.trace = t;
    }
    if (VEC_PUSH(&t->time, double, row->time)) return ST_ERROR;
    int64_t (*v)[STAGED_ROWS] = s->staged.values;
    int n = s->staged.n;
    v[0][n] = action_id; v[1][n] = row->addr; v[2][n] = row->size; v[3][n] = row->stream;
    v[4][n] = row->stack; v[5][n] = ctx; v[6][n] = meta; v[7][n] = row->device_free;
    if (++s->staged.n == STAGED_ROWS && stage_flush(s)) return ST_ERROR;  /* out of memory: the scan fails */
    return ST_OK;
}

int stage_flush(Scanner *s)
{
    Trace *t = s->staged.trace;
    int n = s->staged.n;
    if (!t || !n) return ST_OK;
    IntCol *columns[STAGED_COLUMNS] = {&t->action, &t->addr, &t->size, &t->stream, &t->stack, &t->ctx, &t->meta,
                                       &t->device_free};
    for (int k = 0; k < STAGED_COLUMNS; k++)
        if (intcol_extend(columns[k], s->staged.values[k], n) < 0) return ST_ERROR;
    s->staged.n = 0;
    return ST_OK;
}

int parse_entry(Scanner *s, Cur *c, int32_t trace)
{
    const uint8_t *start = c->p;
    int64_t memo_len = memo_count(s);
    Py_ssize_t frecs = s->frecs.n, extras = s->rec_extras.n;
    Trace *t = VEC_AT(&s->traces, Trace *, trace);
    Row row = {0, -1, s->empty_str, s->empty_str, -1, 0, 0, 0, -1, NAN};
    uint8_t op = 0;
    int r;
    c->p++;  /* EMPTY_DICT */
    s->this_list_own = -1;
    if ((r = opt_memoize(s, c, SLOT(SK_ENTRY, 0), NULL))) goto out;
    if ((r = next_op(s, c, &op))) goto out;
    if (op == OP_MARK) {
        c->p++;
        /* Written out nine times (an entry's keys): each copy's branches learn one key's
         * value type, where one loop would jump to a different case every time. */
#define PAIR(place)                                              \
        if ((r = next_op(s, c, &op))) goto out;                  \
        if (op == OP_SETITEMS) { c->p++; goto pairs_done; }      \
        if ((r = read_pair(s, c, &row, place))) goto out;
        PAIR(0) PAIR(1) PAIR(2) PAIR(3) PAIR(4) PAIR(5) PAIR(6) PAIR(7) PAIR(8)
        for (;;) { PAIR(KEY_SHAPES) }
#undef PAIR
    pairs_done:;
    } else {
        if ((r = read_pair(s, c, &row, KEY_SHAPES))) goto out;
        if ((r = next_op(s, c, &op))) goto out;
        if (op != OP_SETITEM) { r = scan_fail(s, c->p, "a trace entry built in an unexpected way"); goto out; }
        c->p++;
    }
    if (!(row.seen & (1u << K_ACTION))) { r = scan_fail(s, start, "a trace entry without an action"); goto out; }
    int64_t rows = t->time.n;  /* (its other columns may have rows staged) */
    if ((r = commit(s, t, &row))) goto out;
    s->rows_total++;
    s->prev_list_own = s->this_list_own;
    if (!s->worker) r = push_item(s, (Item){I_ENTRY, trace, rows, NULL});  /* a worker records its structure itself */
out:
    if (r == ST_MORE) {
        s->memo_epoch++;  /* the slots it filled are filled again */
        if (s->worker) {
            s->own_count = memo_len;
            if (s->guess < 0) s->own.n = (Py_ssize_t)memo_len;
        } else {
            s->memo_len = memo_len;
        }
        while (s->frecs.n > frecs) Py_XDECREF(VEC_AT(&s->frecs, FrameRec, --s->frecs.n).line_obj);
        s->rec_extras.n = extras;
        c->p = start;
    }
    return r;
}

/* ---- frames and stacks asked for outside the traces --------------------------------------- */

PyObject *frame_object(Scanner *s, int32_t r)
{
    FrameRec *rec = &VEC_AT(&s->frecs, FrameRec, r);
    if (rec->obj) return Py_NewRef(rec->obj);
    StrRec *recs = (StrRec *)s->strings.recs.data;
    PyObject *d = PyDict_New();
    PyObject *line = rec->line_obj ? Py_NewRef(rec->line_obj) : PyLong_FromLongLong(rec->line);
    if (!d || !line || PyDict_SetItemString(d, "filename", recs[rec->filename].obj) < 0 ||
        PyDict_SetItemString(d, "line", line) < 0 || PyDict_SetItemString(d, "name", recs[rec->name].obj) < 0)
        goto error;
    for (int32_t i = 0; i < rec->n_extras; i++) {
        const int32_t *kv = (const int32_t *)s->rec_extras.data + rec->extras_at + 2 * i;
        if (PyDict_SetItem(d, recs[kv[0]].obj, recs[kv[1]].obj) < 0) goto error;
    }
    Py_DECREF(line);
    if (freeze(s, d) < 0) { Py_DECREF(d); return NULL; }
    rec->obj = Py_NewRef(d);
    return d;
error:
    Py_XDECREF(d);
    Py_XDECREF(line);
    return NULL;
}

PyObject *stack_object(Scanner *s, int32_t sid)
{
    if (sid < 0) return PyList_New(0);
    PyObject **cached = &VEC_AT(&s->ft.objs, PyObject *, sid);
    if (*cached) return Py_NewRef(*cached);
    int64_t lo = VEC_AT(&s->ft.offsets, int64_t, sid), hi = VEC_AT(&s->ft.offsets, int64_t, sid + 1);
    PyObject *list = PyList_New(hi - lo);
    if (!list) return NULL;
    StrRec *recs = (StrRec *)s->strings.recs.data;
    for (int64_t j = lo; j < hi; j++) {
        const FrameKey *k = &VEC_AT(&s->ft.frames, FrameKey, VEC_AT(&s->ft.flat, int32_t, j));
        PyObject *d = PyDict_New();
        PyObject *line = PyLong_FromLongLong(k->line);
        if (!d || !line || PyDict_SetItemString(d, "filename", recs[k->filename].obj) < 0 ||
            PyDict_SetItemString(d, "line", line) < 0 || PyDict_SetItemString(d, "name", recs[k->name].obj) < 0) {
            Py_XDECREF(d);
            Py_XDECREF(line);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(line);
        for (int32_t i = 0; i < k->n_extras; i++) {
            const int32_t *kv = (const int32_t *)s->ft.extras.data + k->extras_at + 2 * i;
            if (PyDict_SetItem(d, recs[kv[0]].obj, recs[kv[1]].obj) < 0) {
                Py_DECREF(d);
                Py_DECREF(list);
                return NULL;
            }
        }
        if (freeze(s, d) < 0) { Py_DECREF(d); Py_DECREF(list); return NULL; }
        PyList_SET_ITEM(list, j - lo, d);
    }
    if (freeze(s, list) < 0) { Py_DECREF(list); return NULL; }
    *cached = Py_NewRef(list);
    return list;
}
