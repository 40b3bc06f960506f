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
    AddrId *tmp = large_malloc((size_t)(n ? n : 1) * sizeof(AddrId));
    Py_ssize_t *counts = malloc(65536 * sizeof(Py_ssize_t));
    if (!tmp || !counts) { free(tmp); free(counts); return -1; }
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

/* What pair_lives hands back: per life, and per event (each per-event column in the narrowest
 * of 1, 2 or 4 bytes that holds its values with one to spare each way, model/columns.py
 * narrow_type: its width given). */
typedef struct {
    Py_ssize_t lives;
    int64_t *life_addr, *life_size;
    int32_t *version, *start, *request, *end;  /* trace indices: n < 2**31 */
    char *event_version, *event_life;
    int version_width, life_width;
} Lives;

enum { PAIR_OK = 0, PAIR_NO_MEMORY = -1, PAIR_TOO_MANY = -2 };

static void lives_free(Lives *o)
{
    free(o->life_addr); free(o->life_size); free(o->version); free(o->start); free(o->request); free(o->end);
    free(o->event_version); free(o->event_life);
    memset(o, 0, sizeof(*o));
}

/* ---- the pairing, on one thread or several ---------------------------------------------------
 *
 * In event order: each event's address id (dense, from a hash map) and version (the ends
 * before it at its address). An address's versions run 0..V without a gap (each event's is
 * its predecessor's or one more), so its lives are V + 1 and a life's index is its address's
 * first life plus its version, once addresses are in order.
 *
 * On several threads, addresses are cut into ranges, one per thread, at quantiles of a
 * sample; each thread pairs the events of its range (its own hash map, its own sort). Every
 * address of a range sorts before every address of the next, so a life's index is its
 * range's first life plus its index within the range: the numbering of one range of all
 * addresses, array for array.
 *
 * The events are also cut into stripes, one per thread, and every per-event array is
 * written a stripe at a time: a range's events are spread over the whole trace, so a thread
 * writing its range's events in place would share every cache line of those arrays with the
 * others (on 16 threads that made the pairing scale 2.8 times). So each range gets the list
 * of its events, in event order, built by the stripes (counted first, so each stripe knows
 * where its part of each list starts), and keeps its events' versions and lives in arrays
 * of its own; the stripes then read them back into the per-event columns, already narrow.
 * No Python call in here, so it runs without the GIL (the block lives and the segment lives
 * of a trace are also computed at once, on two threads). */

enum { NO_PART = 255, MAX_PARTS = 64, SAMPLE_PER_PART = 1 << 12 };

typedef struct PairJob PairJob;
typedef struct {
    IntView action, addr, size;
    const uint8_t *roles;
    Py_ssize_t n;
    uint8_t *part;            /* per event: its range, or NO_PART */
    Py_ssize_t *at;           /* [stripe * parts + range]: where the stripe's events of the range start in its list */
    int64_t splits[MAX_PARTS];  /* range p holds the addresses a with splits[p-1] <= a < splits[p] */
    int parts;
    Lives *o;
} PairShared;

struct PairJob {
    PairShared *sh;
    int p;                    /* as a range */
    Py_ssize_t lo, hi;        /* as a stripe: its events */
    int32_t *events;          /* the range's events, in event order; NULL with one range (every event that takes part) */
    int32_t *versions;        /* per event of the range: its version */
    int32_t *values;          /* per event of the range: its address id, then its life */
    Py_ssize_t count;         /* the range's events */
    Map64 map;
    Vec ends, lives_at;
    AddrId *distinct;
    int32_t *rank;
    uint8_t *seen;            /* per address id: the roles its current life has had (fill_range) */
    Py_ssize_t u;
    int64_t total, first_life;
    int32_t top_version;
    int err;
};

/* The range of address a: how many splits lie at or below it (they ascend). A comparison per
 * split, none of them a branch: a binary search's were as good as a coin's for the addresses
 * of a trace, and marking ten million events took 67 ms on one thread. */
static inline int part_of(const PairShared *sh, int64_t a)
{
    int p = 0;
    for (int k = 0; k + 1 < sh->parts; k++) p += a >= sh->splits[k];
    return p;
}

/* step 1, by stripe: each event's range, and how many of the stripe's events each range has */
static void *mark_parts(void *arg)
{
    PairJob *j = arg;
    PairShared *sh = j->sh;
    Py_ssize_t counts[MAX_PARTS] = {0};
    for (Py_ssize_t i = j->lo; i < j->hi; i++) {
        int64_t code = view_get(&sh->action, i);
        uint8_t p = (code < -32768 || code >= 32768 || !sh->roles[code + 32768])
                        ? NO_PART : (uint8_t)part_of(sh, view_get(&sh->addr, i));
        sh->part[i] = p;
        if (p != NO_PART) counts[p]++;
    }
    memcpy(sh->at + (Py_ssize_t)j->p * sh->parts, counts, (size_t)sh->parts * sizeof(Py_ssize_t));
    return NULL;
}

/* step 2, by stripe: the stripe's events into their ranges' lists, each at its place */
static void *list_events(void *arg)
{
    PairJob *j = arg, *jobs = j - j->p;
    PairShared *sh = j->sh;
    Py_ssize_t at[MAX_PARTS];
    memcpy(at, sh->at + (Py_ssize_t)j->p * sh->parts, (size_t)sh->parts * sizeof(Py_ssize_t));
    for (Py_ssize_t i = j->lo; i < j->hi; i++) {
        uint8_t p = sh->part[i];
        if (p != NO_PART) jobs[p].events[at[p]++] = (int32_t)i;
    }
    return NULL;
}

/* The range's event after event i (-1 for its first): from its list, or with one range, the
 * next event that takes part (a list of them all would only cost its writing and reading). */
static inline Py_ssize_t next_event(const PairJob *j, Py_ssize_t k, Py_ssize_t i)
{
    if (j->events) return j->events[k];
    do i++; while (j->sh->part[i] == NO_PART);
    return i;
}

/* step 3, by range: versions, ids and the range's lives in address order */
static void *number_range(void *arg)
{
    PairJob *j = arg;
    PairShared *sh = j->sh;
    j->err = PAIR_NO_MEMORY;
    for (Py_ssize_t k = 0, i = -1; k < j->count; k++) {
        i = next_event(j, k, i);
        uint64_t key = (uint64_t)view_get(&sh->addr, i);
        int32_t id = map64_get(&j->map, key, -1);
        if (id < 0) {
            id = (int32_t)j->u++;
            if (map64_put(&j->map, key, id) < 0 || VEC_PUSH(&j->ends, int32_t, 0) || VEC_PUSH(&j->lives_at, int32_t, 0))
                return NULL;
        }
        int32_t v = VEC_AT(&j->ends, int32_t, id);
        j->versions[k] = v;
        /* The first event of life (id, v): an address's versions rise by one at a time, so
         * this is where its lives reach v + 1. Marked (the id's complement) for fill_range,
         * which then writes the life's first fields without reading them first. */
        int first = v >= VEC_AT(&j->lives_at, int32_t, id);
        if (first) VEC_AT(&j->lives_at, int32_t, id) = v + 1;
        j->values[k] = first ? ~id : id;
        if (sh->roles[view_get(&sh->action, i) + 32768] & 4) VEC_AT(&j->ends, int32_t, id)++;
    }
    vec_free(&j->ends);
    j->distinct = malloc((size_t)(j->u ? j->u : 1) * sizeof(AddrId));
    j->rank = malloc((size_t)(j->u ? j->u : 1) * sizeof(int32_t));
    j->seen = malloc((size_t)(j->u ? j->u : 1));
    if (!j->distinct || !j->rank || !j->seen) return NULL;
    for (Py_ssize_t k = 0; k < j->map.cap; k++) {
        if (j->map.values[k] == INT32_MIN) continue;
        j->distinct[j->map.values[k]] = (AddrId){(int64_t)j->map.keys[k], j->map.values[k]};
    }
    map64_free(&j->map);
    if (radix_sort(j->distinct, j->u) < 0) return NULL;
    int64_t total = 0;
    int32_t top = -1;  /* an address's last version is its lives - 1; every event has one of them */
    for (Py_ssize_t r = 0; r < j->u; r++) {
        int32_t lives_here = VEC_AT(&j->lives_at, int32_t, j->distinct[r].id);
        j->rank[j->distinct[r].id] = (int32_t)(total < INT32_MAX ? total : INT32_MAX);
        total += lives_here;
        if (lives_here - 1 > top) top = lives_here - 1;
    }
    vec_free(&j->lives_at);
    j->total = total;
    j->top_version = top;
    j->err = PAIR_OK;
    return NULL;
}

/* step 4, by range: each event's life, and each life's fields (the range's lives are its
 * own slice of every per-life array).
 *
 * A life's fields are only stored, never read back: a trace's lives are spread over these
 * arrays at random, and reading whether a life had its start yet (a load the next step
 * waited for) was most of this step. An address's lives come one after the other in event
 * order (its version rises at each end), so the roles the current life has had are kept per
 * address, in ``seen``, which is small and stays in the cache. */
static void *fill_range(void *arg)
{
    PairJob *j = arg;
    PairShared *sh = j->sh;
    Lives *o = sh->o;
    uint8_t *seen = j->seen;
    for (Py_ssize_t k = 0, i = -1; k < j->count; k++) {
        i = next_event(j, k, i);
        int32_t id = j->values[k], first = id < 0;
        if (first) id = ~id;
        int32_t v = j->versions[k], l = (int32_t)(j->first_life + j->rank[id] + v);
        uint8_t role = sh->roles[view_get(&sh->action, i) + 32768] & 7;
        j->values[k] = l;
        if (first) {  /* every life has one: -1 where no event of it gives a value */
            o->version[l] = v;
            o->life_addr[l] = view_get(&sh->addr, i);
            o->life_size[l] = view_get(&sh->size, i);
            o->start[l] = o->request[l] = o->end[l] = -1;
            seen[id] = 0;
        }
        uint8_t fresh = role & (uint8_t)~seen[id];  /* the life's first event of each role */
        seen[id] |= role;
        if (fresh & 1) { o->start[l] = (int32_t)i; o->life_size[l] = view_get(&sh->size, i); }
        if (fresh & 2) o->request[l] = (int32_t)i;
        if (fresh & 4) o->end[l] = (int32_t)i;
    }
    return NULL;
}

static inline void store_narrow(char *column, int width, Py_ssize_t i, int32_t value)
{
    if (width == 1) { int8_t v = (int8_t)value; memcpy(column + i, &v, 1); }
    else if (width == 2) { int16_t v = (int16_t)value; memcpy(column + 2 * i, &v, 2); }
    else memcpy(column + 4 * i, &value, 4);
}

/* step 5, by stripe: each event's version and life from its range's arrays (-1 for an event
 * that takes no part), in the columns' narrow widths */
static void *write_events(void *arg)
{
    PairJob *j = arg, *jobs = j - j->p;
    PairShared *sh = j->sh;
    Lives *o = sh->o;
    Py_ssize_t at[MAX_PARTS];
    memcpy(at, sh->at + (Py_ssize_t)j->p * sh->parts, (size_t)sh->parts * sizeof(Py_ssize_t));
    for (Py_ssize_t i = j->lo; i < j->hi; i++) {
        uint8_t p = sh->part[i];
        int32_t version = -1, life = -1;
        if (p != NO_PART) {
            Py_ssize_t k = at[p]++;
            version = jobs[p].versions[k];
            life = jobs[p].values[k];
        }
        store_narrow(o->event_version, o->version_width, i, version);
        store_narrow(o->event_life, o->life_width, i, life);
    }
    return NULL;
}

/* Quantiles of the life events' addresses, from at most SAMPLE_PER_PART a range of them taken
 * evenly (sorted by radix_sort: qsort's call per comparison was 8 ms of 65,536 addresses, the
 * pairing's longest step on one thread before its threads start). 4,096 a range put each split
 * within about a percent of the events of its place (the sample's error); 65,536 for two
 * ranges took 4.5 ms of a million events' pairing, while the model waited for it. */
static int choose_splits(PairShared *sh, int parts)
{
    sh->splits[parts - 1] = INT64_MAX;  /* never compared: part_of stops at the last range */
    sh->parts = parts;
    if (parts == 1) return 0;
    Py_ssize_t most = (Py_ssize_t)SAMPLE_PER_PART * parts;
    AddrId *sample = malloc((size_t)most * sizeof(AddrId));
    if (!sample) return -1;
    Py_ssize_t k = 0, step = sh->n / most + 1;
    for (Py_ssize_t i = 0; i < sh->n && k < most; i += step) {
        int64_t code = view_get(&sh->action, i);
        if (code >= -32768 && code < 32768 && sh->roles[code + 32768]) sample[k++] = (AddrId){view_get(&sh->addr, i), 0};
    }
    if (radix_sort(sample, k) < 0) {
        free(sample);
        return -1;
    }
    for (int p = 0; p + 1 < parts; p++) sh->splits[p] = k ? sample[(Py_ssize_t)(p + 1) * k / parts].addr : 0;
    free(sample);
    return 0;
}

/* The narrowest of 1, 2 or 4 bytes that holds values from -1 to top with one to spare each
 * way (model/columns.py narrow_type). */
static int narrow_width(int64_t top)
{
    return top < INT8_MAX ? 1 : top < INT16_MAX ? 2 : 4;
}

static int pair_lives(const IntView *action, const IntView *addr, const IntView *size, const uint8_t *roles,
                      int parts, Lives *o)
{
    Py_ssize_t n = action->n;
    PairShared sh = {*action, *addr, *size, roles, n, NULL, NULL, {0}, 0, o};
    PairJob *jobs = calloc((size_t)parts, sizeof(PairJob));
    int32_t *events = NULL, *versions = NULL, *values = NULL;
    int err = PAIR_NO_MEMORY;
    sh.part = malloc((size_t)(n ? n : 1));
    sh.at = malloc((size_t)parts * (size_t)parts * sizeof(Py_ssize_t));
    if (!jobs || !sh.part || !sh.at || choose_splits(&sh, parts) < 0) goto done;
    for (int p = 0; p < parts; p++)
        jobs[p] = (PairJob){.sh = &sh, .p = p, .lo = n / parts * p, .hi = p + 1 < parts ? n / parts * (p + 1) : n};
    run_pool(mark_parts, jobs, sizeof(PairJob), parts, parts);
    /* each range's list: its events of stripe 0, then of stripe 1, ...; in sh.at, where each starts */
    Py_ssize_t taking_part = 0;
    for (int p = 0; p < parts; p++) {
        Py_ssize_t first = taking_part;
        for (int s = 0; s < parts; s++) {
            Py_ssize_t c = sh.at[(Py_ssize_t)s * parts + p];
            sh.at[(Py_ssize_t)s * parts + p] = taking_part - first;
            taking_part += c;
        }
        jobs[p].count = taking_part - first;
    }
    size_t cap = (size_t)(taking_part ? taking_part : 1) * sizeof(int32_t);
    events = parts > 1 ? large_malloc(cap) : NULL;
    versions = large_malloc(cap);
    values = large_malloc(cap);
    if ((parts > 1 && !events) || !versions || !values) goto done;
    for (Py_ssize_t p = 0, first = 0; p < parts; first += jobs[p].count, p++) {
        jobs[p].events = events ? events + first : NULL;
        jobs[p].versions = versions + first;
        jobs[p].values = values + first;
    }
    if (parts > 1) run_pool(list_events, jobs, sizeof(PairJob), parts, parts);
    run_pool(number_range, jobs, sizeof(PairJob), parts, parts);
    int64_t total = 0, top_version = -1;
    for (int p = 0; p < parts; p++) {
        if (jobs[p].err != PAIR_OK) goto done;
        jobs[p].first_life = total;
        total += jobs[p].total;
        if (jobs[p].top_version > top_version) top_version = jobs[p].top_version;
    }
    if (total >= INT32_MAX) { err = PAIR_TOO_MANY; goto done; }
    Py_ssize_t lives = (Py_ssize_t)total, lives_cap = lives ? lives : 1;
    o->life_addr = large_malloc((size_t)lives_cap * sizeof(int64_t));
    o->version = large_malloc((size_t)lives_cap * sizeof(int32_t));
    o->start = large_malloc((size_t)lives_cap * sizeof(int32_t));
    o->request = large_malloc((size_t)lives_cap * sizeof(int32_t));
    o->end = large_malloc((size_t)lives_cap * sizeof(int32_t));
    o->life_size = large_malloc((size_t)lives_cap * sizeof(int64_t));
    if (!o->life_addr || !o->version || !o->start || !o->request || !o->end || !o->life_size) goto done;
    run_pool(fill_range, jobs, sizeof(PairJob), parts, parts);
    free(events);  /* the stripes find their events' places from sh.at */
    events = NULL;
    o->version_width = narrow_width(top_version);
    o->life_width = narrow_width(total - 1);
    o->event_version = large_malloc((size_t)(n ? n : 1) * (size_t)o->version_width);
    o->event_life = large_malloc((size_t)(n ? n : 1) * (size_t)o->life_width);
    if (!o->event_version || !o->event_life) goto done;
    run_pool(write_events, jobs, sizeof(PairJob), parts, parts);
    o->lives = lives;
    err = PAIR_OK;
done:
    if (jobs)
        for (int p = 0; p < parts; p++) {
            map64_free(&jobs[p].map);
            vec_free(&jobs[p].ends);
            vec_free(&jobs[p].lives_at);
            free(jobs[p].distinct);
            free(jobs[p].rank);
            free(jobs[p].seen);
        }
    free(jobs);
    free(events);
    free(versions);
    free(values);
    free(sh.part);
    free(sh.at);
    if (err != PAIR_OK) lives_free(o);
    return err;
}

PyObject *native_lifetimes(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer ab = {0}, rb = {0}, sb = {0};
    PyObject *ao, *ro, *so, *start_codes, *request_codes, *end_codes, *result = NULL;
    int threads = 1;
    if (!PyArg_ParseTuple(args, "OOOOOO|i", &ao, &ro, &so, &start_codes, &request_codes, &end_codes, &threads))
        return NULL;
    int flags = PyBUF_FORMAT | PyBUF_C_CONTIGUOUS;
    if (PyObject_GetBuffer(ao, &ab, flags) < 0) return NULL;
    if (PyObject_GetBuffer(ro, &rb, flags) < 0) { PyBuffer_Release(&ab); return NULL; }
    if (PyObject_GetBuffer(so, &sb, flags) < 0) { PyBuffer_Release(&ab); PyBuffer_Release(&rb); return NULL; }
    IntView action, addr, size;
    uint8_t *roles = NULL;
    Lives o = {0};
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
    int err;
    Py_BEGIN_ALLOW_THREADS  /* the buffers stay exported, so the arrays cannot change meanwhile */
    err = pair_lives(&action, &addr, &size, roles, threads < 1 ? 1 : threads < MAX_PARTS ? threads : MAX_PARTS, &o);
    Py_END_ALLOW_THREADS
    if (err == PAIR_TOO_MANY) { PyErr_SetString(PyExc_OverflowError, "too many lives"); goto done; }
    if (err != PAIR_OK) { PyErr_NoMemory(); goto done; }
    Py_ssize_t L = o.lives;
    int version_width = o.version_width, life_width = o.life_width;
    PyObject *parts[8] = {
        buffer_from_memory(o.life_addr, L * 8), buffer_from_memory(o.version, L * 4),
        buffer_from_memory(o.start, L * 4), buffer_from_memory(o.request, L * 4), buffer_from_memory(o.end, L * 4),
        buffer_from_memory(o.life_size, L * 8), buffer_from_memory(o.event_version, n * version_width),
        buffer_from_memory(o.event_life, n * life_width),
    };
    memset(&o, 0, sizeof(o));  /* the buffers own the memory now */
    int ok = 1;
    for (int j = 0; j < 8; j++) ok = ok && parts[j];
    if (ok)
        result = Py_BuildValue("(OOOOOOOOii)", parts[0], parts[1], parts[2], parts[3], parts[4], parts[5], parts[6],
                               parts[7], version_width, life_width);
    for (int j = 0; j < 8; j++) Py_XDECREF(parts[j]);
done:
    if (!result && !PyErr_Occurred()) PyErr_NoMemory();
    PyBuffer_Release(&ab);
    PyBuffer_Release(&rb);
    PyBuffer_Release(&sb);
    lives_free(&o);
    free(roles);
    return result;
}
