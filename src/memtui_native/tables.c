/* Growable arrays, widening integer columns, hash maps, and the interning tables
 * (strings by content, frames by content, stacks by their frames). */
#include "native.h"

#include <stdlib.h>

/* ---- Vec -------------------------------------------------------------------------------- */
int vec_reserve(Vec *v, Py_ssize_t items, size_t item_size)
{
    if (items <= v->cap) return 0;
    Py_ssize_t cap = v->cap ? v->cap : 16;
    while (cap < items) {
        if (cap > PY_SSIZE_T_MAX / 2) return -1;
        cap *= 2;
    }
    if ((size_t)cap > (size_t)PY_SSIZE_T_MAX / item_size) return -1;
    size_t bytes = large_bytes((size_t)cap * item_size);
    void *data = large_realloc(v->data, bytes);
    if (data == NULL) return -1;
    v->data = data;
    v->cap = (Py_ssize_t)(bytes / item_size);
    return 0;
}

void vec_free(Vec *v)
{
    free(v->data);
    v->data = NULL;
    v->n = v->cap = 0;
}

/* ---- IntCol ------------------------------------------------------------------------------ */
static int64_t intcol_get(const IntCol *c, Py_ssize_t i)
{
    switch (c->width) {
    case 1: return ((int8_t *)c->data)[i];
    case 2: return ((int16_t *)c->data)[i];
    case 4: return ((int32_t *)c->data)[i];
    default: return ((int64_t *)c->data)[i];
    }
}

static void intcol_set(uint8_t *data, int width, Py_ssize_t i, int64_t v)
{
    switch (width) {
    case 1: ((int8_t *)data)[i] = (int8_t)v; break;
    case 2: ((int16_t *)data)[i] = (int16_t)v; break;
    case 4: ((int32_t *)data)[i] = (int32_t)v; break;
    default: ((int64_t *)data)[i] = v; break;
    }
}

/* intcol_push's slow path: room for one more value, as wide as ``value`` needs. */
int intcol_grow(IntCol *c, int64_t value)
{
    int width = c->width ? c->width : 1;
    int need = width_of(value);
    return intcol_fit(c, c->n + 1, need > width ? need : width);
}

/* Room for ``items`` values of at least ``width`` bytes (existing values widened). */
int intcol_fit(IntCol *c, Py_ssize_t items, int width)
{
    if (width < c->width) width = c->width;
    Py_ssize_t cap = c->cap > 0 ? c->cap : 4096;
    while (cap < items) cap *= 2;
    if (cap == c->cap && width == c->width) return 0;
    if (cap > PY_SSIZE_T_MAX / 8) return -1;
    size_t bytes = large_bytes((size_t)cap * (size_t)width);
    uint8_t *data = large_realloc(c->data, bytes);
    if (data == NULL) return -1;
    if (width != c->width && c->width) {
        /* Widen in place from the end: item i moves from i*old to i*new >= i*old, and the
         * items still to move all lie below i*old. */
        IntCol old = {data, c->n, cap, c->width};
        for (Py_ssize_t i = c->n - 1; i >= 0; i--) intcol_set(data, width, i, intcol_get(&old, i));
    }
    c->data = data;
    c->cap = (Py_ssize_t)(bytes / (size_t)width);
    c->width = width;
    return 0;
}

/* The values at the column's width, and whether any did not fit (then nothing is kept). */
#define STORE_NARROW(type, bits)                                                          \
    do {                                                                                  \
        type *out = (type *)at;                                                           \
        for (Py_ssize_t i = 0; i < n; i++) {                                              \
            over |= ((uint64_t)values[i] + ((uint64_t)1 << ((bits) - 1))) >> (bits);      \
            out[i] = (type)values[i];                                                     \
        }                                                                                 \
    } while (0)

int intcol_extend(IntCol *c, const int64_t *values, Py_ssize_t n)
{
    if (n <= 0) return 0;
    if (c->n + n > c->cap && intcol_fit(c, c->n + n, c->width) < 0) return -1;
    for (;;) {
        uint8_t *at = c->data + (size_t)c->n * (size_t)c->width;
        uint64_t over = 0;
        switch (c->width) {
        case 1: STORE_NARROW(int8_t, 8); break;
        case 2: STORE_NARROW(int16_t, 16); break;
        case 4: STORE_NARROW(int32_t, 32); break;
        default: memcpy(at, values, (size_t)n * sizeof(int64_t)); break;
        }
        if (!over) break;
        /* a value wider than the column: widen it to the widest value's width, and again */
        int width = c->width;
        for (Py_ssize_t i = 0; i < n; i++) width = width_of(values[i]) > width ? width_of(values[i]) : width;
        if (intcol_fit(c, c->n + n, width) < 0) return -1;
    }
    c->n += n;
    return 0;
}
#undef STORE_NARROW

void intcol_free(IntCol *c)
{
    free(c->data);
    c->data = NULL;
    c->n = c->cap = 0;
    c->width = 1;
}

/* ---- Map64 ------------------------------------------------------------------------------- */
static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

#define MAP_EMPTY INT32_MIN

int32_t map64_get(const Map64 *m, uint64_t key, int32_t missing)
{
    if (!m->cap) return missing;
    size_t mask = (size_t)m->cap - 1, i = (size_t)mix64(key) & mask;
    while (m->values[i] != MAP_EMPTY) {
        if (m->keys[i] == key) return m->values[i];
        i = (i + 1) & mask;
    }
    return missing;
}

static int map64_resize(Map64 *m, Py_ssize_t cap)
{
    uint64_t *keys = large_malloc((size_t)cap * sizeof(uint64_t));
    int32_t *values = large_malloc((size_t)cap * sizeof(int32_t));
    if (!keys || !values) { free(keys); free(values); return -1; }
    for (Py_ssize_t i = 0; i < cap; i++) values[i] = MAP_EMPTY;
    size_t mask = (size_t)cap - 1;
    for (Py_ssize_t j = 0; j < m->cap; j++) {
        if (m->values[j] == MAP_EMPTY) continue;
        size_t i = (size_t)mix64(m->keys[j]) & mask;
        while (values[i] != MAP_EMPTY) i = (i + 1) & mask;
        keys[i] = m->keys[j];
        values[i] = m->values[j];
    }
    free(m->keys);
    free(m->values);
    m->keys = keys;
    m->values = values;
    m->cap = cap;
    return 0;
}

int map64_put(Map64 *m, uint64_t key, int32_t value)
{
    if ((m->n + 1) * 2 > m->cap && map64_resize(m, m->cap ? m->cap * 2 : 64) < 0) return -1;
    size_t mask = (size_t)m->cap - 1, i = (size_t)mix64(key) & mask;
    while (m->values[i] != MAP_EMPTY) {
        if (m->keys[i] == key) { m->values[i] = value; return 0; }
        i = (i + 1) & mask;
    }
    m->keys[i] = key;
    m->values[i] = value;
    m->n++;
    return 0;
}

void map64_free(Map64 *m)
{
    free(m->keys);
    free(m->values);
    m->keys = NULL;
    m->values = NULL;
    m->n = m->cap = 0;
}

/* ---- strings ------------------------------------------------------------------------------ */
static uint32_t hash_bytes(const char *s, Py_ssize_t n)
{
    uint32_t h = 2166136261u;  /* FNV-1a */
    for (Py_ssize_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static const char *const KEY_NAMES[K_COUNT] = {
    [K_ACTION] = "action", [K_ADDR] = "addr", [K_SIZE] = "size", [K_STREAM] = "stream",
    [K_TIME] = "time_us", [K_CTX] = "compile_context", [K_META] = "user_metadata",
    [K_FRAMES] = "frames", [K_DEVICE_FREE] = "device_free", [K_FILENAME] = "filename",
    [K_LINE] = "line", [K_NAME] = "name", [K_DEVICE_TRACES] = "device_traces", [K_STAGE] = "stage",
    [K_DEVICE] = "device",
};

static int8_t key_of(const char *s, Py_ssize_t n)
{
    for (int k = 1; k < K_COUNT; k++) {
        if ((Py_ssize_t)strlen(KEY_NAMES[k]) == n && memcmp(KEY_NAMES[k], s, (size_t)n) == 0) return (int8_t)k;
    }
    return K_NONE;
}

static int str_resize(StrTable *t, Py_ssize_t cap)
{
    int32_t *slots = large_malloc((size_t)cap * sizeof(int32_t));
    if (!slots) return -1;
    for (Py_ssize_t i = 0; i < cap; i++) slots[i] = -1;
    size_t mask = (size_t)cap - 1;
    for (Py_ssize_t r = 0; r < t->recs.n; r++) {
        size_t i = VEC_AT(&t->recs, StrRec, r).hash & mask;
        while (slots[i] >= 0) i = (i + 1) & mask;
        slots[i] = (int32_t)r;
    }
    free(t->slots);
    t->slots = slots;
    t->cap = cap;
    return 0;
}

int32_t str_intern(StrTable *t, const char *s, Py_ssize_t n, const char **reason)
{
    if (n > INT32_MAX) { *reason = "a string of more than 2 GiB"; return -1; }
    uint32_t h = hash_bytes(s, n);
    if (t->cap) {
        size_t mask = (size_t)t->cap - 1, i = h & mask;
        const char *arena = (const char *)t->arena.data;
        for (int32_t r; (r = t->slots[i]) >= 0; i = (i + 1) & mask) {
            const StrRec *rec = &VEC_AT(&t->recs, StrRec, r);
            if (rec->hash == h && rec->length == (uint32_t)n && memcmp(arena + rec->offset, s, (size_t)n) == 0)
                return r;
        }
    }
    if (t->recs.n >= (1 << 28)) { *reason = "more than 2**28 distinct strings"; return -1; }
    if ((t->recs.n + 1) * 2 > t->cap && str_resize(t, t->cap ? t->cap * 2 : 1024) < 0) return -2;
    /* The same decoding the unpickler applies: a string it would refuse is not handled here.
     * A worker thread (no GIL) checks the bytes itself; the str is made when they are merged. */
    PyObject *obj = NULL;
    if (t->no_python) {
        if (!utf8_surrogatepass_valid((const uint8_t *)s, n)) {
            *reason = "a string that is not UTF-8";
            return -1;
        }
    } else if ((obj = PyUnicode_DecodeUTF8(s, n, "surrogatepass")) == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) return -2;
        PyErr_Clear();
        *reason = "a string that is not UTF-8";
        return -1;
    }
    if (vec_reserve(&t->arena, t->arena.n + n, 1) < 0 || vec_reserve(&t->recs, t->recs.n + 1, sizeof(StrRec)) < 0) {
        Py_XDECREF(obj);
        return -2;
    }
    StrRec rec = {t->arena.n, (uint32_t)n, h, key_of(s, n), -1, obj};
    if (n) memcpy((char *)t->arena.data + t->arena.n, s, (size_t)n);
    t->arena.n += n;
    int32_t id = (int32_t)t->recs.n;
    VEC_AT(&t->recs, StrRec, t->recs.n++) = rec;
    size_t mask = (size_t)t->cap - 1, i = h & mask;
    while (t->slots[i] >= 0) i = (i + 1) & mask;
    t->slots[i] = id;
    return id;
}

/* Whether CPython's UTF-8 decoder with errors="surrogatepass" takes these bytes: well-formed
 * UTF-8, where the encoded surrogates (ED A0 80 to ED BF BF) are allowed too. */
int utf8_surrogatepass_valid(const uint8_t *p, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        uint8_t b = p[i];
        if (b < 0x80) { i++; continue; }
        int more;
        uint8_t lo = 0x80, hi = 0xBF;
        if (b >= 0xC2 && b <= 0xDF) more = 1;
        else if (b == 0xE0) { more = 2; lo = 0xA0; }
        else if (b >= 0xE1 && b <= 0xEF) more = 2;
        else if (b == 0xF0) { more = 3; lo = 0x90; }
        else if (b >= 0xF1 && b <= 0xF3) more = 3;
        else if (b == 0xF4) { more = 3; hi = 0x8F; }
        else return 0;
        if (n - i - 1 < more) return 0;
        if (p[i + 1] < lo || p[i + 1] > hi) return 0;
        for (int k = 2; k <= more; k++)
            if (p[i + k] < 0x80 || p[i + k] > 0xBF) return 0;
        i += 1 + more;
    }
    return 1;
}

void strtable_free(StrTable *t)
{
    if (!t->borrowed_objs)
        for (Py_ssize_t r = 0; r < t->recs.n; r++) Py_XDECREF(VEC_AT(&t->recs, StrRec, r).obj);
    vec_free(&t->recs);
    vec_free(&t->arena);
    free(t->slots);
    t->slots = NULL;
    t->cap = 0;
}

/* ---- frames and stacks ------------------------------------------------------------------- */
static uint32_t frame_hash(int32_t filename, int64_t line, int32_t name, const int32_t *extras, int32_t n_extras)
{
    uint64_t h = mix64(((uint64_t)(uint32_t)filename << 32) ^ (uint32_t)name);
    h = mix64(h ^ (uint64_t)line);
    for (int32_t i = 0; i < 2 * n_extras; i++) h = mix64(h ^ (uint32_t)extras[i]);
    return (uint32_t)h;
}

static int frame_equal(const FrameTables *t, const FrameKey *k, int32_t filename, int64_t line, int32_t name,
                       const int32_t *extras, int32_t n_extras)
{
    if (k->filename != filename || k->line != line || k->name != name || k->n_extras != n_extras) return 0;
    if (!n_extras) return 1;
    const int32_t *mine = (const int32_t *)t->extras.data + k->extras_at;
    return memcmp(mine, extras, (size_t)n_extras * 2 * sizeof(int32_t)) == 0;
}

static int slots_resize(int32_t **slots_p, Py_ssize_t *cap_p, Py_ssize_t cap, const Vec *items, int is_frames,
                        const FrameTables *t)
{
    int32_t *slots = large_malloc((size_t)cap * sizeof(int32_t));
    if (!slots) return -1;
    for (Py_ssize_t i = 0; i < cap; i++) slots[i] = -1;
    size_t mask = (size_t)cap - 1;
    Py_ssize_t count = is_frames ? items->n : items->n - 1;
    for (Py_ssize_t r = 0; r < count; r++) {
        uint32_t h;
        if (is_frames) {
            h = VEC_AT(items, FrameKey, r).hash;
        } else {
            int64_t lo = VEC_AT(&t->offsets, int64_t, r), hi = VEC_AT(&t->offsets, int64_t, r + 1);
            uint64_t x = (uint64_t)(hi - lo);
            for (int64_t j = lo; j < hi; j++) x = mix64(x ^ (uint32_t)VEC_AT(&t->flat, int32_t, j));
            h = (uint32_t)x;
        }
        size_t i = h & mask;
        while (slots[i] >= 0) i = (i + 1) & mask;
        slots[i] = (int32_t)r;
    }
    free(*slots_p);
    *slots_p = slots;
    *cap_p = cap;
    return 0;
}

int32_t frame_intern(FrameTables *t, int32_t filename, int64_t line, int32_t name, const int32_t *extras,
                     int32_t n_extras)
{
    uint32_t h = frame_hash(filename, line, name, extras, n_extras);
    if (t->fcap) {
        size_t mask = (size_t)t->fcap - 1, i = h & mask;
        for (int32_t r; (r = t->fslots[i]) >= 0; i = (i + 1) & mask) {
            const FrameKey *k = &VEC_AT(&t->frames, FrameKey, r);
            if (k->hash == h && frame_equal(t, k, filename, line, name, extras, n_extras)) return r;
        }
    }
    if (t->frames.n >= INT32_MAX / 2) return -1;
    if ((t->frames.n + 1) * 2 > t->fcap &&
        slots_resize(&t->fslots, &t->fcap, t->fcap ? t->fcap * 2 : 1024, &t->frames, 1, t) < 0)
        return -1;
    FrameKey key = {filename, name, line, -1, n_extras, h};
    if (n_extras) {  /* extras never point into t->extras: callers keep their own */
        Py_ssize_t at = t->extras.n;
        if (vec_reserve(&t->extras, at + 2 * n_extras, sizeof(int32_t)) < 0) return -1;
        memcpy((int32_t *)t->extras.data + at, extras, (size_t)n_extras * 2 * sizeof(int32_t));
        t->extras.n += 2 * n_extras;
        key.extras_at = (int32_t)at;
    }
    if (vec_reserve(&t->frames, t->frames.n + 1, sizeof(FrameKey)) < 0) return -1;
    int32_t fid = (int32_t)t->frames.n;
    VEC_AT(&t->frames, FrameKey, t->frames.n++) = key;
    size_t mask = (size_t)t->fcap - 1, i = h & mask;
    while (t->fslots[i] >= 0) i = (i + 1) & mask;
    t->fslots[i] = fid;
    return fid;
}

int32_t stack_intern(FrameTables *t, const int32_t *fids, Py_ssize_t n)
{
    uint64_t x = (uint64_t)n;
    for (Py_ssize_t j = 0; j < n; j++) x = mix64(x ^ (uint32_t)fids[j]);
    uint32_t h = (uint32_t)x;
    Py_ssize_t count = t->offsets.n - 1;
    if (t->scap) {
        size_t mask = (size_t)t->scap - 1, i = h & mask;
        for (int32_t r; (r = t->sslots[i]) >= 0; i = (i + 1) & mask) {
            int64_t lo = VEC_AT(&t->offsets, int64_t, r), hi = VEC_AT(&t->offsets, int64_t, r + 1);
            if (hi - lo == n && memcmp((int32_t *)t->flat.data + lo, fids, (size_t)n * sizeof(int32_t)) == 0)
                return r;
        }
    }
    if (count >= INT32_MAX / 2) return -1;
    if ((count + 1) * 2 > t->scap &&
        slots_resize(&t->sslots, &t->scap, t->scap ? t->scap * 2 : 1024, &t->offsets, 0, t) < 0)
        return -1;
    if (vec_reserve(&t->flat, t->flat.n + n, sizeof(int32_t)) < 0 ||
        vec_reserve(&t->offsets, t->offsets.n + 1, sizeof(int64_t)) < 0 ||
        vec_reserve(&t->objs, count + 1, sizeof(PyObject *)) < 0)
        return -1;
    memcpy((int32_t *)t->flat.data + t->flat.n, fids, (size_t)n * sizeof(int32_t));
    t->flat.n += n;
    VEC_AT(&t->offsets, int64_t, t->offsets.n++) = t->flat.n;
    VEC_AT(&t->objs, PyObject *, count) = NULL;
    t->objs.n = count + 1;
    size_t mask = (size_t)t->scap - 1, i = h & mask;
    while (t->sslots[i] >= 0) i = (i + 1) & mask;
    t->sslots[i] = (int32_t)count;
    return (int32_t)count;
}

int frametables_init(FrameTables *t)
{
    memset(t, 0, sizeof(*t));
    if (vec_reserve(&t->offsets, 16, sizeof(int64_t)) < 0) return -1;
    VEC_AT(&t->offsets, int64_t, 0) = 0;
    t->offsets.n = 1;
    return 0;
}

void frametables_free(FrameTables *t)
{
    for (Py_ssize_t i = 0; i < t->objs.n; i++) Py_XDECREF(VEC_AT(&t->objs, PyObject *, i));  /* NULL in a worker's copy */
    vec_free(&t->frames);
    vec_free(&t->extras);
    vec_free(&t->flat);
    vec_free(&t->offsets);
    vec_free(&t->objs);
    free(t->fslots);
    free(t->sslots);
    t->fslots = t->sslots = NULL;
    t->fcap = t->scap = 0;
}
