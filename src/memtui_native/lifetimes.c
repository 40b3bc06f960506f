/* The pairing of allocations with their frees (memtui/model/lifetimes.py), without a sort
 * of every event: two passes in event order around a sort of the distinct addresses only
 * (a hash map gives them dense ids). The result is the one compute_lifetimes computes with
 * numpy, array for array (tests compare them).
 */
#include "native.h"

#include <stdlib.h>

typedef struct {
    const char *data;
    Py_ssize_t n;
    int width;  /* bytes */
    int is_signed;
} IntView;

static int int_view(Py_buffer *b, IntView *v, const char *what)
{
    const char *f = b->format ? b->format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    int is_signed = strchr("bhilq", *f) != NULL, is_unsigned = strchr("BHILQ", *f) != NULL;
    if (b->ndim != 1 || (!is_signed && !is_unsigned) || f[1] != '\0' ||
        (b->strides && b->strides[0] != b->itemsize)) {
        PyErr_Format(PyExc_TypeError, "%s: a contiguous 1-D integer array is needed", what);
        return -1;
    }
    v->data = b->buf;
    v->n = b->shape ? b->shape[0] : b->len / b->itemsize;
    v->width = (int)b->itemsize;
    v->is_signed = is_signed;
    return 0;
}

static inline int64_t view_get(const IntView *v, Py_ssize_t i)
{
    const char *p = v->data + i * v->width;
    switch (v->width) {
    case 1: return v->is_signed ? (int64_t) * (const int8_t *)p : (int64_t) * (const uint8_t *)p;
    case 2: return v->is_signed ? (int64_t) * (const int16_t *)p : (int64_t) * (const uint16_t *)p;
    case 4: return v->is_signed ? (int64_t) * (const int32_t *)p : (int64_t) * (const uint32_t *)p;
    default: return *(const int64_t *)p;
    }
}

typedef struct {
    int64_t addr;
    int32_t id;
} AddrId;

/* Sort by address (signed), least significant 16 bits first; passes whose digit is the
 * same for every address (the high bits, mostly) are skipped. */
static int radix_sort(AddrId *items, Py_ssize_t n)
{
    AddrId *tmp = malloc((size_t)(n ? n : 1) * sizeof(AddrId));
    Py_ssize_t *counts = malloc(65536 * sizeof(Py_ssize_t));
    if (!tmp || !counts) { free(tmp); free(counts); PyErr_NoMemory(); return -1; }
    AddrId *src = items, *dst = tmp;
    for (int shift = 0; shift < 64; shift += 16) {
        memset(counts, 0, 65536 * sizeof(Py_ssize_t));
        for (Py_ssize_t i = 0; i < n; i++)
            counts[(((uint64_t)src[i].addr ^ ((uint64_t)1 << 63)) >> shift) & 0xFFFF]++;
        if (n && counts[(((uint64_t)src[0].addr ^ ((uint64_t)1 << 63)) >> shift) & 0xFFFF] == n) continue;
        Py_ssize_t total = 0;
        for (int d = 0; d < 65536; d++) {
            Py_ssize_t c = counts[d];
            counts[d] = total;
            total += c;
        }
        for (Py_ssize_t i = 0; i < n; i++)
            dst[counts[(((uint64_t)src[i].addr ^ ((uint64_t)1 << 63)) >> shift) & 0xFFFF]++] = src[i];
        AddrId *swap = src;
        src = dst;
        dst = swap;
    }
    if (src != items) memcpy(items, src, (size_t)n * sizeof(AddrId));
    free(tmp);
    free(counts);
    return 0;
}

/* Which role an action code plays: 0 none, bit 1 start, bit 2 request, bit 4 end. */
static int roles_from(PyObject *codes, uint8_t *roles, int bit)
{
    PyObject *seq = PySequence_Fast(codes, "codes must be a sequence");
    if (!seq) return -1;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        long code = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if (code == -1 && PyErr_Occurred()) { Py_DECREF(seq); return -1; }
        if (code >= -32768 && code < 32768) roles[code + 32768] |= (uint8_t)bit;
    }
    Py_DECREF(seq);
    return 0;
}

PyObject *native_lifetimes(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer ab = {0}, rb = {0}, sb = {0};
    PyObject *ao, *ro, *so, *start_codes, *request_codes, *end_codes, *result = NULL;
    if (!PyArg_ParseTuple(args, "OOOOOO", &ao, &ro, &so, &start_codes, &request_codes, &end_codes)) return NULL;
    int flags = PyBUF_FORMAT | PyBUF_C_CONTIGUOUS;
    if (PyObject_GetBuffer(ao, &ab, flags) < 0) return NULL;
    if (PyObject_GetBuffer(ro, &rb, flags) < 0) { PyBuffer_Release(&ab); return NULL; }
    if (PyObject_GetBuffer(so, &sb, flags) < 0) { PyBuffer_Release(&ab); PyBuffer_Release(&rb); return NULL; }
    IntView action, addr, size;
    uint8_t *roles = NULL;
    int32_t *ids = NULL, *rank = NULL, *event_version = NULL, *event_life = NULL;
    int32_t *version = NULL;
    int64_t *life_addr = NULL, *life_size = NULL;
    int32_t *start = NULL, *request = NULL, *end = NULL;  /* trace indices: n < 2**31 */
    AddrId *distinct = NULL;
    Map64 map = {0};
    if (int_view(&ab, &action, "action") || int_view(&rb, &addr, "addr") || int_view(&sb, &size, "size")) goto done;
    if (addr.width != 8 || !addr.is_signed || addr.n != action.n || size.n != action.n) {
        PyErr_SetString(PyExc_TypeError, "int64 addresses, and columns of one length, are needed");
        goto done;
    }
    Py_ssize_t n = action.n;
    if (n >= INT32_MAX) { PyErr_SetString(PyExc_OverflowError, "too many events"); goto done; }
    roles = calloc(65536, 1);
    if (!roles) { PyErr_NoMemory(); goto done; }
    if (roles_from(start_codes, roles, 1) || roles_from(request_codes, roles, 2) || roles_from(end_codes, roles, 4))
        goto done;

    /* In event order: each event's address id (dense, from a hash map) and version (the
     * ends before it at its address). An address's versions run 0..V without a gap (each
     * event's is its predecessor's or one more), so its lives are V + 1 and a life's index
     * is its address's first life plus its version, once addresses are in order. */
    event_version = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    event_life = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    ids = malloc((size_t)(n ? n : 1) * sizeof(int32_t));  /* address id per event, -1 when not a life event */
    if (!event_version || !event_life || !ids) { PyErr_NoMemory(); goto done; }
    Vec ends = {0}, lives_at = {0};  /* int32 per address id */
    Py_ssize_t u = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        event_version[i] = event_life[i] = -1;
        int64_t code = view_get(&action, i);
        if (code < -32768 || code >= 32768 || !roles[code + 32768]) { ids[i] = -1; continue; }
        uint64_t key = (uint64_t)view_get(&addr, i);
        int32_t id = map64_get(&map, key, -1);
        if (id < 0) {
            id = (int32_t)u++;
            if (map64_put(&map, key, id) < 0 || VEC_PUSH(&ends, int32_t, 0) || VEC_PUSH(&lives_at, int32_t, 0)) {
                vec_free(&ends);
                vec_free(&lives_at);
                goto done;
            }
        }
        ids[i] = id;
        int32_t v = VEC_AT(&ends, int32_t, id);
        event_version[i] = v;
        if (v >= VEC_AT(&lives_at, int32_t, id)) VEC_AT(&lives_at, int32_t, id) = v + 1;
        if (roles[code + 32768] & 4) VEC_AT(&ends, int32_t, id)++;
    }
    vec_free(&ends);
    /* addresses in order; the first life of each */
    distinct = malloc((size_t)(u ? u : 1) * sizeof(AddrId));
    rank = malloc((size_t)(u ? u : 1) * sizeof(int32_t));  /* then: first life of each address id */
    if (!distinct || !rank) { vec_free(&lives_at); PyErr_NoMemory(); goto done; }
    for (Py_ssize_t j = 0; j < map.cap; j++) {
        if (map.values[j] == INT32_MIN) continue;
        distinct[map.values[j]] = (AddrId){(int64_t)map.keys[j], map.values[j]};
    }
    map64_free(&map);
    if (radix_sort(distinct, u) < 0) { vec_free(&lives_at); goto done; }
    int64_t total = 0;
    for (Py_ssize_t r = 0; r < u; r++) {
        rank[distinct[r].id] = (int32_t)total;
        total += VEC_AT(&lives_at, int32_t, distinct[r].id);
    }
    vec_free(&lives_at);
    if (total >= INT32_MAX) { PyErr_SetString(PyExc_OverflowError, "too many lives"); goto done; }
    Py_ssize_t lives = (Py_ssize_t)total, cap = lives ? lives : 1;
    life_addr = malloc((size_t)cap * sizeof(int64_t));
    version = malloc((size_t)cap * sizeof(int32_t));
    start = malloc((size_t)cap * sizeof(int32_t));
    request = malloc((size_t)cap * sizeof(int32_t));
    end = malloc((size_t)cap * sizeof(int32_t));
    life_size = malloc((size_t)cap * sizeof(int64_t));
    if (!life_addr || !version || !start || !request || !end || !life_size) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t l = 0; l < lives; l++) version[l] = start[l] = request[l] = end[l] = -1;
    /* In event order again: the first event of a life gives its address and size (a start's
     * size wins), and the first event of each role its start, request and end. */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (ids[i] < 0) continue;
        int32_t v = event_version[i], l = rank[ids[i]] + v;
        uint8_t role = roles[view_get(&action, i) + 32768];
        event_life[i] = l;
        if (version[l] < 0) {
            version[l] = v;
            life_addr[l] = view_get(&addr, i);
            life_size[l] = view_get(&size, i);
        }
        if ((role & 1) && start[l] < 0) { start[l] = (int32_t)i; life_size[l] = view_get(&size, i); }
        if ((role & 2) && request[l] < 0) request[l] = (int32_t)i;
        if ((role & 4) && end[l] < 0) end[l] = (int32_t)i;
    }
    Py_ssize_t L = lives;
    PyObject *parts[8] = {
        buffer_from_memory(life_addr, L * 8), buffer_from_memory(version, L * 4),
        buffer_from_memory(start, L * 4), buffer_from_memory(request, L * 4), buffer_from_memory(end, L * 4),
        buffer_from_memory(life_size, L * 8), buffer_from_memory(event_version, n * 4),
        buffer_from_memory(event_life, n * 4),
    };
    life_addr = life_size = NULL;
    start = request = end = version = event_version = event_life = NULL;
    int ok = 1;
    for (int j = 0; j < 8; j++) ok = ok && parts[j];
    if (ok) result = PyTuple_Pack(8, parts[0], parts[1], parts[2], parts[3], parts[4], parts[5], parts[6], parts[7]);
    for (int j = 0; j < 8; j++) Py_XDECREF(parts[j]);
done:
    if (!result && !PyErr_Occurred()) PyErr_NoMemory();  /* the helpers report running out of memory by -1 */
    PyBuffer_Release(&ab);
    PyBuffer_Release(&rb);
    PyBuffer_Release(&sb);
    map64_free(&map);
    free(roles); free(ids); free(rank); free(distinct);
    free(event_version); free(event_life); free(version);
    free(life_addr); free(start); free(request); free(end); free(life_size);
    return result;
}
