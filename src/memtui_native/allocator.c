/* The allocator model's replay loop (memtui/allocator/replay.py and simulator.py), compiled.
 *
 * The same rules, step for step, as the Python model, which stays the reference: tests run
 * both on every recording and compare every output. Blocks live in one growing array and
 * refer to each other by index; a pool keeps its free blocks in an array sorted by
 * (stream, size, address) and its unmapped ranges sorted by (stream, address), as the Python
 * model keeps its lists. All sizes and addresses are int64.
 */
#include "native.h"

#include <stdlib.h>
#include <string.h>

#define A_MIN_BLOCK 512LL
#define A_SMALL_SIZE (1LL << 20)
#define A_SMALL_BUFFER (2LL << 20)
#define A_LARGE_BUFFER (20LL << 20)
#define A_MIN_LARGE_ALLOC (10LL << 20)
#define A_ROUND_LARGE (2LL << 20)
#define A_ALIGN (2LL << 20)
/* MAX_DEVICE_BYTES of memtui/allocator/simulator.py: no request above it is served and the
 * reserved bytes never pass it, so no size or sum of sizes here comes near int64's end. */
#define A_MAX_BYTES (1LL << 44)
#define K_ALLOC 0
#define K_FREE 1
#define K_FREE_PENDING 2
#define K_COMPLETE 3
#define K_EMPTY_CACHE 4
#define K_OOM 5
#define E_SEG_ALLOC 3
#define E_SEG_FREE 4
#define E_SEG_MAP 5
#define E_SEG_UNMAP 6

typedef struct {
    int64_t addr, size, stream, gc_base, slot;
    int32_t prev, next, pool, pending_pos;
    int64_t seg_base, seg_page; /* expandable segment (page 0: none) */
    uint8_t allocated, pending, mapped, live;
} ABlock;

typedef struct { int32_t *v; Py_ssize_t n, cap; } IVec;
typedef struct { int64_t *v; Py_ssize_t n, cap; } LVec;

typedef struct {
    int small;
    IVec keys;     /* free blocks by (stream, size, addr) */
    IVec unmapped; /* by (stream, addr) */
    int64_t calls;
} APool;

typedef struct {
    /* settings */
    int64_t max_split, max_rounding, divisions[16], limit, va_size;
    double gc;
    int expandable, per_process, hints_per_process, has_limit;
    /* state */
    ABlock *b; Py_ssize_t nb, capb; IVec freelist;
    APool *pools; int npools;
    IVec pending;
    IVec freeable;
    int64_t reserved, allocated, active, retries;
    LVec events; /* code, addr, size triples */
    /* address space */
    const int64_t *rec_addr, *rec_size; Py_ssize_t n_rec, next_rec; int in_step; int64_t floor;
    LVec live_addr, live_size; LVec freed_size, freed_addr;
    int failed;  /* out of memory */
    int broken;  /* a block missing from the list that should hold it: the state is inconsistent */
} Sim;

static int ivec_push(IVec *v, int32_t x)
{
    if (v->n == v->cap) {
        Py_ssize_t c = v->cap ? v->cap * 2 : 16;
        int32_t *p = realloc(v->v, c * sizeof(int32_t));
        if (!p) return -1;
        v->v = p; v->cap = c;
    }
    v->v[v->n++] = x;
    return 0;
}
static int ivec_insert(IVec *v, Py_ssize_t at, int32_t x)
{
    if (ivec_push(v, x) < 0) return -1;
    memmove(v->v + at + 1, v->v + at, (v->n - 1 - at) * sizeof(int32_t));
    v->v[at] = x;
    return 0;
}
static void ivec_remove(IVec *v, Py_ssize_t at)
{
    memmove(v->v + at, v->v + at + 1, (v->n - 1 - at) * sizeof(int32_t));
    v->n--;
}
static int lvec_push(LVec *v, int64_t x)
{
    if (v->n == v->cap) {
        Py_ssize_t c = v->cap ? v->cap * 2 : 64;
        int64_t *p = realloc(v->v, c * sizeof(int64_t));
        if (!p) return -1;
        v->v = p; v->cap = c;
    }
    v->v[v->n++] = x;
    return 0;
}

static int32_t new_block(Sim *s, int64_t addr, int64_t size, int64_t stream, int32_t pool, int64_t seg_base,
                         int64_t seg_page)
{
    int32_t i;
    if (s->freelist.n) {
        i = s->freelist.v[--s->freelist.n];
    } else {
        if (s->nb == s->capb) {
            Py_ssize_t c = s->capb ? s->capb * 2 : 1024;
            ABlock *p = realloc(s->b, c * sizeof(ABlock));
            if (!p) { s->failed = 1; return -1; }
            s->b = p; s->capb = c;
        }
        i = (int32_t)s->nb++;
    }
    ABlock *x = &s->b[i];
    memset(x, 0, sizeof(*x));
    x->addr = addr; x->size = size; x->stream = stream; x->pool = pool;
    x->prev = x->next = -1; x->pending_pos = -1; x->mapped = 1; x->live = 1; x->slot = -1;
    x->seg_base = seg_base; x->seg_page = seg_page;
    return i;
}
static void drop_block(Sim *s, int32_t i)
{
    s->b[i].live = 0;
    if (ivec_push(&s->freelist, i) < 0) s->failed = 1;
}

/* -- pools ----------------------------------------------------------------------------- */
static inline int key_less(const ABlock *a, int64_t stream, int64_t size, int64_t addr)
{
    if (a->stream != stream) return a->stream < stream;
    if (a->size != size) return a->size < size;
    return a->addr < addr;
}
static Py_ssize_t lower_bound(Sim *s, APool *p, int64_t stream, int64_t size, int64_t addr)
{
    Py_ssize_t lo = 0, hi = p->keys.n;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (key_less(&s->b[p->keys.v[mid]], stream, size, addr)) lo = mid + 1; else hi = mid;
    }
    return lo;
}
static void pool_insert(Sim *s, int32_t i)
{
    ABlock *x = &s->b[i];
    APool *p = &s->pools[x->pool];
    x->gc_base = p->calls;
    if (ivec_insert(&p->keys, lower_bound(s, p, x->stream, x->size, x->addr), i) < 0) s->failed = 1;
}
static void pool_erase(Sim *s, int32_t i)
{
    ABlock *x = &s->b[i];
    APool *p = &s->pools[x->pool];
    Py_ssize_t at = lower_bound(s, p, x->stream, x->size, x->addr);
    if (at < p->keys.n && p->keys.v[at] == i) ivec_remove(&p->keys, at); else s->broken = 1;
}
static Py_ssize_t unmapped_bound(Sim *s, APool *p, int64_t stream, int64_t addr)
{
    Py_ssize_t lo = 0, hi = p->unmapped.n;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        ABlock *a = &s->b[p->unmapped.v[mid]];
        if (a->stream < stream || (a->stream == stream && a->addr < addr)) lo = mid + 1; else hi = mid;
    }
    return lo;
}
static void unmapped_insert(Sim *s, int32_t i)
{
    APool *p = &s->pools[s->b[i].pool];
    if (ivec_insert(&p->unmapped, unmapped_bound(s, p, s->b[i].stream, s->b[i].addr), i) < 0) s->failed = 1;
}
static void unmapped_erase(Sim *s, int32_t i)
{
    APool *p = &s->pools[s->b[i].pool];
    Py_ssize_t at = unmapped_bound(s, p, s->b[i].stream, s->b[i].addr);
    if (at < p->unmapped.n && p->unmapped.v[at] == i) ivec_remove(&p->unmapped, at); else s->broken = 1;
}

/* -- addresses (memtui/allocator/addresses.py) ------------------------------------------ */
static Py_ssize_t live_bound(Sim *s, int64_t addr)
{
    Py_ssize_t lo = 0, hi = s->live_addr.n;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (s->live_addr.v[mid] < addr) lo = mid + 1; else hi = mid;
    }
    return lo;
}
static int64_t take(Sim *s, int64_t addr, int64_t size)
{
    Py_ssize_t at = live_bound(s, addr);
    if (lvec_push(&s->live_addr, 0) < 0 || lvec_push(&s->live_size, 0) < 0) { s->failed = 1; return addr; }
    memmove(s->live_addr.v + at + 1, s->live_addr.v + at, (s->live_addr.n - 1 - at) * sizeof(int64_t));
    memmove(s->live_size.v + at + 1, s->live_size.v + at, (s->live_size.n - 1 - at) * sizeof(int64_t));
    s->live_addr.v[at] = addr; s->live_size.v[at] = size;
    return addr;
}
static int free_range(Sim *s, int64_t addr, int64_t size)
{
    Py_ssize_t i = live_bound(s, addr);
    if (i < s->live_addr.n && s->live_addr.v[i] < addr + size) return 0;
    return !(i > 0 && s->live_addr.v[i - 1] + s->live_size.v[i - 1] > addr);
}
static int64_t addr_malloc(Sim *s, int64_t size)
{
    if (s->in_step && s->next_rec < s->n_rec) {
        int64_t addr = s->rec_addr[s->next_rec];
        if (s->rec_size[s->next_rec] == size && free_range(s, addr, size)) {
            s->next_rec++;
            return take(s, addr, size);
        }
    }
    s->in_step = 0;
    for (;;) { /* the highest freed address of this size, as the Python model's sorted bucket pops */
        Py_ssize_t best = -1;
        for (Py_ssize_t k = 0; k < s->freed_size.n; k++)
            if (s->freed_size.v[k] == size && (best < 0 || s->freed_addr.v[k] >= s->freed_addr.v[best])) best = k;
        if (best < 0) break;
        int64_t addr = s->freed_addr.v[best];
        s->freed_size.v[best] = s->freed_size.v[s->freed_size.n - 1]; s->freed_size.n--;
        s->freed_addr.v[best] = s->freed_addr.v[s->freed_addr.n - 1]; s->freed_addr.n--;
        if (free_range(s, addr, size)) return take(s, addr, size);
    }
    s->floor -= ((size + A_ALIGN - 1) / A_ALIGN) * A_ALIGN;
    return take(s, s->floor, size);
}
static void addr_free(Sim *s, int64_t addr, int64_t size)
{
    Py_ssize_t at = live_bound(s, addr);
    if (at < s->live_addr.n && s->live_addr.v[at] == addr) {
        memmove(s->live_addr.v + at, s->live_addr.v + at + 1, (s->live_addr.n - 1 - at) * sizeof(int64_t));
        memmove(s->live_size.v + at, s->live_size.v + at + 1, (s->live_size.n - 1 - at) * sizeof(int64_t));
        s->live_addr.n--; s->live_size.n--;
    }
    if (addr <= s->floor || !s->in_step) {
        if (lvec_push(&s->freed_size, size) < 0 || lvec_push(&s->freed_addr, addr) < 0) s->failed = 1;
    }
}
static int64_t addr_reserve(Sim *s, int64_t size)
{
    s->floor -= ((size + A_ALIGN - 1) / A_ALIGN) * A_ALIGN;
    return take(s, s->floor, size);
}

/* -- rules -------------------------------------------------------------------------------- */
static int64_t round_size(Sim *s, int64_t size)
{
    if (size < A_MIN_BLOCK) return A_MIN_BLOCK;
    int log_size = 63 - __builtin_clzll((unsigned long long)size);
    int index = log_size - 20;
    if (index < 0) index = 0;
    if (index > 15) index = 15;
    int64_t divisions = s->divisions[index];
    if (divisions > 1 && size > A_MIN_BLOCK * divisions) {
        if ((size & (size - 1)) == 0) return size;
        int64_t floor = 1LL << log_size;
        int64_t step = floor >> (63 - __builtin_clzll((unsigned long long)divisions));
        if (step == 0) return floor << 1;
        int64_t rounded = size & ~(step - 1);
        return rounded == size ? size : rounded + step;
    }
    return ((size + A_MIN_BLOCK - 1) / A_MIN_BLOCK) * A_MIN_BLOCK;
}
static int64_t allocation_size(int64_t size)
{
    if (size <= A_SMALL_SIZE) return A_SMALL_BUFFER;
    if (size < A_MIN_LARGE_ALLOC) return A_LARGE_BUFFER;
    return ((size + A_ROUND_LARGE - 1) / A_ROUND_LARGE) * A_ROUND_LARGE;
}
static void emit(Sim *s, int64_t code, int64_t addr, int64_t size)
{
    if (lvec_push(&s->events, code) < 0 || lvec_push(&s->events, addr) < 0 || lvec_push(&s->events, size) < 0)
        s->failed = 1;
}
static inline int allocatable(Sim *s, int32_t i) { return !s->b[i].allocated && !s->b[i].pending; }
static int64_t expandable_size(Sim *s, int32_t i)
{
    int32_t n = s->b[i].next;
    return s->b[i].size + ((n >= 0 && !s->b[n].mapped) ? s->b[n].size : 0);
}

static void merge(Sim *s, int32_t dst, int32_t src)
{
    if (src < 0) return;
    ABlock *d = &s->b[dst], *r = &s->b[src];
    if (r->allocated || r->pending || d->mapped != r->mapped) return;
    if (r->mapped) pool_erase(s, src); else unmapped_erase(s, src);
    d = &s->b[dst]; r = &s->b[src];
    if (d->prev == src) {
        d->addr = r->addr;
        d->prev = r->prev;
        if (d->prev >= 0) s->b[d->prev].next = dst;
    } else {
        d->next = r->next;
        if (d->next >= 0) s->b[d->next].prev = dst;
    }
    d->size += r->size;
    drop_block(s, src);
}

static int32_t get_free_block(Sim *s, int32_t pool, int64_t stream, int64_t size)
{
    APool *p = &s->pools[pool];
    if (s->per_process && s->gc > 0) p->calls++;
    Py_ssize_t i = lower_bound(s, p, stream, size, 0);
    if (i == p->keys.n || s->b[p->keys.v[i]].stream != stream) return -1;
    int32_t blk = p->keys.v[i];
    if (s->b[blk].seg_page) {
        if (s->expandable) {
            while (s->b[blk].seg_page && i + 1 < p->keys.n && s->b[p->keys.v[i + 1]].stream == stream) {
                int32_t nxt = p->keys.v[i + 1];
                if (expandable_size(s, nxt) >= expandable_size(s, blk)) break;
                i++; blk = nxt;
            }
        } else {
            i++;
            while (i < p->keys.n && s->b[p->keys.v[i]].stream == stream && s->b[p->keys.v[i]].seg_page) i++;
            if (i == p->keys.n || s->b[p->keys.v[i]].stream != stream) return -1;
            blk = p->keys.v[i];
        }
    }
    int64_t limit = s->max_split, bsize = s->b[blk].size;
    if (size < limit && bsize >= limit) return -1;
    if (size >= limit && bsize >= size + s->max_rounding) return -1;
    ivec_remove(&p->keys, i);
    return blk;
}

static int32_t use_block(Sim *s, int32_t blk, int32_t pool, int64_t stream, int64_t size, int64_t orig)
{
    int64_t remaining = s->b[blk].size - size;
    int split = (s->pools[pool].small || s->expandable) ? remaining >= A_MIN_BLOCK
                                                         : (size < s->max_split && remaining > A_SMALL_SIZE);
    if (split) {
        int32_t rem = blk;
        int32_t nb = new_block(s, s->b[rem].addr, size, stream, pool, s->b[rem].seg_base, s->b[rem].seg_page);
        if (nb < 0) return -1;
        s->b[nb].prev = s->b[rem].prev;
        if (s->b[nb].prev >= 0) s->b[s->b[nb].prev].next = nb;
        s->b[nb].next = rem;
        s->b[rem].prev = nb;
        s->b[rem].addr += size;
        s->b[rem].size -= size;
        pool_insert(s, rem);
        blk = nb;
    }
    s->b[blk].allocated = 1;
    (void)orig;
    s->allocated += s->b[blk].size;
    s->active += s->b[blk].size;
    return blk;
}

static int map_range(Sim *s, int32_t blk, int64_t size, int64_t limit, int has_limit)
{
    int64_t base = s->b[blk].seg_base, page = s->b[blk].seg_page;
    int64_t start = s->b[blk].addr - base, stop = start + size;
    int64_t begin = start / page, end = (stop + page - 1) / page;
    int64_t mapped = (end - begin) * page;
    if (mapped == 0 || (has_limit && s->reserved + mapped > limit) || s->reserved + mapped > A_MAX_BYTES) return 0;
    unmapped_erase(s, blk);
    s->b[blk].mapped = 1;
    if (mapped < s->b[blk].size) {
        int32_t rest = new_block(s, s->b[blk].addr + mapped, s->b[blk].size - mapped, s->b[blk].stream,
                                 s->b[blk].pool, base, page);
        if (rest < 0) return 0;
        s->b[rest].mapped = 0;
        int32_t after = s->b[blk].next;
        s->b[blk].next = rest; s->b[rest].prev = blk;
        s->b[rest].next = after; if (after >= 0) s->b[after].prev = rest;
        unmapped_insert(s, rest);
        s->b[blk].size = mapped;
    }
    int64_t addr = s->b[blk].addr;
    merge(s, blk, s->b[blk].prev);
    merge(s, blk, s->b[blk].next);
    pool_insert(s, blk);
    s->reserved += mapped;
    emit(s, E_SEG_MAP, addr, mapped);
    return 1;
}

static int32_t find_expandable(Sim *s, int32_t pool, int64_t stream, int64_t size)
{
    APool *p = &s->pools[pool];
    for (Py_ssize_t i = unmapped_bound(s, p, stream, 0); i < p->unmapped.n; i++) {
        int32_t c = p->unmapped.v[i];
        if (s->b[c].stream != stream) break;
        if (s->b[c].prev >= 0 && allocatable(s, s->b[c].prev)) c = s->b[c].prev;
        int64_t room = 0;
        int32_t b = c;
        while (room < size && b >= 0 && allocatable(s, b)) { room += s->b[b].size; b = s->b[b].next; }
        if (room >= size) return c;
    }
    int64_t page = p->small ? A_SMALL_BUFFER : A_LARGE_BUFFER;
    int64_t pages = (s->va_size + page - 1) / page;
    int64_t base = addr_reserve(s, pages * page);
    int32_t c = new_block(s, base, pages * page, stream, pool, base, page);
    if (c < 0) return -1;
    s->b[c].mapped = 0;
    unmapped_insert(s, c);
    return c;
}

static int32_t alloc_block(Sim *s, int32_t pool, int64_t stream, int64_t size, int64_t alloc_size, int has_cap,
                           int64_t cap, int has_limit, int64_t limit)
{
    if (has_cap && s->reserved + alloc_size > cap) return -1;
    if (s->reserved + alloc_size > A_MAX_BYTES) return -1;
    if (s->expandable) {
        int32_t c = find_expandable(s, pool, stream, size);
        if (c < 0) return -1;
        if (!s->b[c].mapped) {
            int64_t want = s->b[c].size < size ? s->b[c].size : size;
            if (!map_range(s, c, want, limit, has_limit)) return -1;
        }
        while (s->b[c].size < size) {
            int32_t nxt = s->b[c].next;
            if (nxt < 0) return -1; /* larger than the whole reserved range */
            int64_t want = size - s->b[c].size;
            if (s->b[nxt].size < want) want = s->b[nxt].size;
            if (!map_range(s, nxt, want, limit, has_limit)) return -1;
            c = nxt;
        }
        pool_erase(s, c);
        return c;
    }
    if (has_limit && s->reserved + alloc_size > limit) return -1;
    int64_t addr = addr_malloc(s, alloc_size);
    int32_t blk = new_block(s, addr, alloc_size, stream, pool, 0, 0);
    s->reserved += alloc_size;
    emit(s, E_SEG_ALLOC, addr, alloc_size);
    return blk;
}

static int release_segment(Sim *s, int32_t blk)
{
    ABlock *x = &s->b[blk];
    if (x->seg_page || x->prev >= 0 || x->next >= 0) return 0;
    emit(s, E_SEG_FREE, x->addr, x->size);
    s->reserved -= x->size;
    pool_erase(s, blk);
    addr_free(s, s->b[blk].addr, s->b[blk].size);
    drop_block(s, blk);
    return 1;
}

static void return_block(Sim *s, int32_t blk)
{
    s->b[blk].pending = 0;
    int64_t size = s->b[blk].size;
    merge(s, blk, s->b[blk].prev);
    merge(s, blk, s->b[blk].next);
    pool_insert(s, blk);
    s->active -= size;
}

static void complete(Sim *s, int32_t blk)
{
    int32_t pos = s->b[blk].pending_pos;
    if (pos < 0) return;
    int32_t last = s->pending.v[s->pending.n - 1];
    s->pending.v[pos] = last;
    s->b[last].pending_pos = pos;
    s->pending.n--;
    s->b[blk].pending_pos = -1;
    return_block(s, blk);
}

static void unmap_block(Sim *s, int32_t blk)
{
    int64_t base = s->b[blk].seg_base, page = s->b[blk].seg_page;
    int64_t start_off = s->b[blk].addr - base, stop_off = start_off + s->b[blk].size;
    int64_t begin = (start_off + page - 1) / page, end = stop_off / page;
    if (begin >= end) return;
    pool_erase(s, blk);
    int64_t start = base + begin * page, size = (end - begin) * page;
    int64_t before = start - s->b[blk].addr;
    int32_t pool = s->b[blk].pool;
    int64_t stream = s->b[blk].stream;
    if (before > 0) {
        int32_t head = new_block(s, s->b[blk].addr, before, stream, pool, base, page);
        if (head < 0) return;
        int32_t prev = s->b[blk].prev;
        if (prev >= 0) s->b[prev].next = head;
        s->b[head].prev = prev; s->b[head].next = blk; s->b[blk].prev = head;
        pool_insert(s, head);
    }
    int64_t after = s->b[blk].size - before - size;
    if (after > 0) {
        int32_t tail = new_block(s, start + size, after, stream, pool, base, page);
        if (tail < 0) return;
        int32_t next = s->b[blk].next;
        s->b[tail].prev = blk; s->b[tail].next = next; if (next >= 0) s->b[next].prev = tail;
        s->b[blk].next = tail;
        pool_insert(s, tail);
    }
    s->b[blk].addr = start; s->b[blk].size = size; s->b[blk].mapped = 0;
    merge(s, blk, s->b[blk].prev);
    merge(s, blk, s->b[blk].next);
    unmapped_insert(s, blk);
    s->reserved -= size;
    emit(s, E_SEG_UNMAP, start, size);
}

static void release_pool(Sim *s, int32_t pool)
{
    APool *p = &s->pools[pool];
    Py_ssize_t n = p->keys.n;
    if (!n) return;
    int32_t *copy = malloc(n * sizeof(int32_t));
    IVec to_unmap = {0};
    if (!copy) { s->failed = 1; return; }
    memcpy(copy, p->keys.v, n * sizeof(int32_t));
    for (Py_ssize_t k = 0; k < n; k++) {
        int32_t blk = copy[k];
        if (s->b[blk].seg_page) { if (ivec_push(&to_unmap, blk) < 0) s->failed = 1; }
        else if (s->b[blk].prev < 0 && s->b[blk].next < 0) release_segment(s, blk);
    }
    for (Py_ssize_t k = 0; k < to_unmap.n; k++) {
        int32_t blk = to_unmap.v[k];
        if (!s->b[blk].live) continue;
        unmap_block(s, blk);
        if (s->b[blk].prev < 0 && s->b[blk].next < 0 && !s->b[blk].mapped) {
            unmapped_erase(s, blk);
            drop_block(s, blk);
        }
    }
    free(copy);
    free(to_unmap.v);
}

static void release_cached(Sim *s)
{
    while (s->pending.n) complete(s, s->pending.v[s->pending.n - 1]);
    release_pool(s, 0); /* default large */
    release_pool(s, 1); /* default small */
    for (Py_ssize_t k = 0; k < s->freeable.n; k++) {
        int32_t base = 2 * (s->freeable.v[k] + 1);
        release_pool(s, base + 1);
        release_pool(s, base);
    }
}

static int release_available(Sim *s, int32_t pool, int64_t stream, int64_t size)
{
    int64_t limit = s->max_split;
    if (limit == INT64_MAX) return 0;
    int64_t key = size > limit ? size : limit;
    APool *p = &s->pools[pool];
    Py_ssize_t i = lower_bound(s, p, stream, key, 0);
    if (i < p->keys.n && s->b[p->keys.v[i]].stream == stream) return release_segment(s, p->keys.v[i]);
    if (i == 0) return 0;
    int64_t released = 0;
    i--;
    while (released < key && i >= 0 && s->b[p->keys.v[i]].stream == stream) {
        int32_t blk = p->keys.v[i];
        if (s->b[blk].size < limit) break;
        int64_t bsize = s->b[blk].size;
        if (release_segment(s, blk)) released += bsize;
        i--;
    }
    return released >= key;
}

static void garbage_collect(Sim *s)
{
    int64_t threshold = (int64_t)(s->gc * (double)s->limit);
    if (s->reserved <= threshold) return;
    int64_t target = s->reserved - threshold;
    APool *p = &s->pools[0];
    int64_t total_age = 0, count = 0;
    for (Py_ssize_t k = 0; k < p->keys.n; k++) {
        ABlock *x = &s->b[p->keys.v[k]];
        if (x->prev < 0 && x->next < 0 && !x->seg_page) { total_age += p->calls - x->gc_base; count++; }
    }
    int64_t reclaimed = 0;
    int freed = 1;
    while (reclaimed < target && freed && count > 0) {
        double threshold_age = (double)total_age / (double)count;
        freed = 0;
        Py_ssize_t n = p->keys.n;
        int32_t *copy = malloc((n ? n : 1) * sizeof(int32_t));
        if (!copy) { s->failed = 1; return; }
        memcpy(copy, p->keys.v, n * sizeof(int32_t));
        for (Py_ssize_t k = 0; k < n; k++) {
            int32_t blk = copy[k];
            ABlock *x = &s->b[blk];
            if (!x->live || x->prev >= 0 || x->next >= 0 || x->seg_page) continue;
            int64_t age = p->calls - x->gc_base;
            if ((double)age >= threshold_age) {
                freed = 1;
                reclaimed += x->size;
                total_age -= age;
                count--;
                release_segment(s, blk);
            }
        }
        free(copy);
    }
}

static int32_t sim_malloc(Sim *s, int64_t orig, int64_t stream, int32_t private_index, int has_hint, int64_t hint)
{
    if (orig > A_MAX_BYTES) return -1; /* no device serves it; rounding it could pass INT64_MAX */
    int64_t size = round_size(s, orig);
    int32_t pool = 2 * (private_index + 1) + (size <= A_SMALL_SIZE ? 1 : 0);
    int64_t alloc_size = allocation_size(size);
    int32_t blk = get_free_block(s, pool, stream, size);
    if (blk < 0) {
        int has_cap = s->per_process, has_limit = !s->per_process && s->has_limit;
        int64_t cap = s->limit, limit = s->limit;
        if (has_hint) {
            if (s->hints_per_process) { has_cap = 1; cap = hint; }
            else { has_limit = 1; limit = hint; }
        }
        if (s->per_process && s->gc > 0) garbage_collect(s);
        blk = alloc_block(s, pool, stream, size, alloc_size, has_cap, cap, has_limit, limit);
        if (blk < 0 && release_available(s, pool, stream, size))
            blk = alloc_block(s, pool, stream, size, alloc_size, has_cap, cap, has_limit, limit);
        if (blk < 0 && private_index < 0) {
            release_cached(s);
            s->retries++;
            blk = alloc_block(s, pool, stream, size, alloc_size, has_cap, cap, has_limit, limit);
        }
        if (blk < 0) return -1;
    }
    return use_block(s, blk, pool, stream, size, orig);
}

static void sim_free(Sim *s, int32_t blk, int pending)
{
    s->b[blk].allocated = 0;
    s->allocated -= s->b[blk].size;
    if (pending) {
        s->b[blk].pending = 1;
        s->b[blk].pending_pos = (int32_t)s->pending.n;
        if (ivec_push(&s->pending, blk) < 0) s->failed = 1;
    } else {
        return_block(s, blk);
    }
}

/* -- the replay loop --------------------------------------------------------------------- */
static int get_i64(PyObject *o, Py_buffer *b, const char *what)
{
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    if (b->itemsize != 8 || !b->format || !strchr("lq", b->format[strlen(b->format) - 1])) {
        PyBuffer_Release(b);
        PyErr_Format(PyExc_TypeError, "%s: an int64 array is needed", what);
        return -1;
    }
    return 0;
}

static PyObject *bytes_of(const int64_t *v, Py_ssize_t n)
{
    return PyBytes_FromStringAndSize((const char *)v, n * (Py_ssize_t)sizeof(int64_t));
}

/* allocator_replay(requests, params, gc, recorded, initial, freeable) -> results; see replay_native in
 * memtui/allocator/native_replay.py for the packing. */
static PyObject *native_allocator_replay(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *ro, *po, *rec_o, *init_o, *free_o;
    double gc;
    if (!PyArg_ParseTuple(args, "OOdOOO", &ro, &po, &gc, &rec_o, &init_o, &free_o)) return NULL;
    Py_buffer rb = {0}, pb = {0}, recb = {0}, ib = {0}, fb = {0};
    if (get_i64(ro, &rb, "requests") < 0) return NULL;
    if (get_i64(po, &pb, "params") < 0) { PyBuffer_Release(&rb); return NULL; }
    if (get_i64(rec_o, &recb, "recorded") < 0) { PyBuffer_Release(&rb); PyBuffer_Release(&pb); return NULL; }
    if (get_i64(init_o, &ib, "initial") < 0) {
        PyBuffer_Release(&rb); PyBuffer_Release(&pb); PyBuffer_Release(&recb); return NULL;
    }
    if (get_i64(free_o, &fb, "freeable") < 0) {
        PyBuffer_Release(&rb); PyBuffer_Release(&pb); PyBuffer_Release(&recb); PyBuffer_Release(&ib); return NULL;
    }
    const int64_t *P = pb.buf, *R = rb.buf, *REC = recb.buf, *INI = ib.buf, *FRE = fb.buf;
    Py_ssize_t n = rb.len / 8 / 7, n_rec = recb.len / 8 / 2, n_ini = ib.len / 8, n_fre = fb.len / 8;
    const int64_t *kind = R, *slot = R + n, *size_c = R + 2 * n, *stream_c = R + 3 * n, *pool_c = R + 4 * n,
                  *event_c = R + 5 * n, *hint_c = R + 6 * n;

    Sim s;
    memset(&s, 0, sizeof(s));
    s.max_split = P[0]; s.max_rounding = P[1];
    for (int k = 0; k < 16; k++) s.divisions[k] = P[2 + k];
    s.expandable = (int)P[18]; s.has_limit = P[19] >= 0; s.limit = P[19];
    s.per_process = (int)P[20] && s.has_limit;
    int use_hints = (int)P[21];
    s.hints_per_process = (int)P[22];
    int64_t until = P[23];
    int series = (int)P[24];
    s.va_size = P[25];
    int n_private = (int)P[26];
    int64_t lowest = P[27];
    int64_t max_slot = P[28];
    int dump_state = (int)P[29];
    s.gc = gc;
    s.npools = 2 * (n_private + 1);
    s.pools = calloc(s.npools, sizeof(APool));
    for (int k = 0; k < s.npools; k++) s.pools[k].small = k & 1;
    s.rec_addr = REC; s.rec_size = REC + n_rec; s.n_rec = n_rec; s.in_step = 1;
    {
        int64_t low = lowest;
        /* As AddressSpace: the lowest of all, 0 included (a segment at address 0 is one). */
        for (Py_ssize_t k = 0; k < n_rec; k++) if (REC[k] < low) low = REC[k];
        if (!n_rec && !lowest) low = 1LL << 46;
        s.floor = (low / A_ALIGN) * A_ALIGN - A_ALIGN * 512;
    }
    int32_t *slots = malloc((max_slot + 1) * sizeof(int32_t));
    int64_t *ser_r = series ? calloc(n ? n : 1, sizeof(int64_t)) : NULL;
    int64_t *ser_a = series ? calloc(n ? n : 1, sizeof(int64_t)) : NULL;
    LVec out_events = {0}, ooms = {0};
    int64_t peak = 0, peak_event = -1, active_at_peak = 0, allocated_at_peak = 0;
    int64_t oom_event = -1, oom_size = 0, stopped_at = -1;
    Py_ssize_t emitted = 0, k = 0, done_n = 0;
    if (!s.pools || !slots || (series && (!ser_r || !ser_a))) { s.failed = 1; goto done; }
    for (int64_t k = 0; k <= max_slot; k++) slots[k] = -1;

    /* the state at the first event: addr, size, stream, pool, small, expandable, nblocks, then
     * (addr, size, slot, pending) per block */
    for (Py_ssize_t at = 0; at < n_ini;) {
        int64_t saddr = INI[at], ssize = INI[at + 1], sstream = INI[at + 2], spool = INI[at + 3], small = INI[at + 4];
        int64_t expand = INI[at + 5], nblk = INI[at + 6];
        const int64_t *blks = INI + at + 7;
        at += 7 + 4 * nblk;
        int32_t pool = (int32_t)(2 * (spool + 1) + (small ? 1 : 0));
        int64_t base = 0, page = 0, vsize = ssize, tail_size = 0;
        if (expand) {
            page = small ? A_SMALL_BUFFER : A_LARGE_BUFFER;
            int64_t pages = (s.va_size + page - 1) / page, need = (ssize + page - 1) / page + 1;
            if (need > pages) pages = need;
            if (at < n_ini) { /* the range ends before the next segment (replay.py says why) */
                int64_t room = INI[at] > saddr ? (INI[at] - saddr) / page : 0;
                if (room < pages) pages = room;
            }
            tail_size = pages * page - ssize;
            if (pages < (ssize + page - 1) / page) pages = (ssize + page - 1) / page;
            base = saddr; vsize = pages * page;
        }
        int32_t prev = -1;
        int64_t cursor = saddr;
        IVec chain = {0};
        for (int64_t k = 0; k < nblk; k++) {
            int64_t baddr = blks[4 * k], bsize = blks[4 * k + 1], bslot = blks[4 * k + 2], bpend = blks[4 * k + 3];
            if (baddr > cursor) ivec_push(&chain, new_block(&s, cursor, baddr - cursor, sstream, pool, base, page));
            int32_t x = new_block(&s, baddr, bsize, sstream, pool, base, page);
            s.b[x].allocated = !bpend;
            if (bpend) {
                s.b[x].pending = 1;
                s.b[x].pending_pos = (int32_t)s.pending.n;
                if (ivec_push(&s.pending, x) < 0) s.failed = 1;
            }
            s.b[x].slot = bslot;
            if (bslot >= 0 && bslot <= max_slot) slots[bslot] = x;
            ivec_push(&chain, x);
            cursor = baddr + bsize;
        }
        if (cursor < saddr + ssize)
            ivec_push(&chain, new_block(&s, cursor, saddr + ssize - cursor, sstream, pool, base, page));
        if (tail_size > 0) {
            int32_t tail = new_block(&s, saddr + ssize, tail_size, sstream, pool, base, page);
            s.b[tail].mapped = 0;
            ivec_push(&chain, tail);
        }
        for (Py_ssize_t k = 0; k < chain.n; k++) {
            int32_t x = chain.v[k];
            s.b[x].prev = prev;
            if (prev >= 0) s.b[prev].next = x;
            prev = x;
        }
        for (Py_ssize_t k = 0; k < chain.n; k++) {
            int32_t x = chain.v[k];
            if (!s.b[x].mapped) unmapped_insert(&s, x);
            else if (!s.b[x].allocated && !s.b[x].pending) pool_insert(&s, x);
            else { if (s.b[x].allocated) s.allocated += s.b[x].size; s.active += s.b[x].size; }
        }
        free(chain.v);
        s.reserved += ssize;
        take(&s, saddr, vsize);
    }

    peak = s.reserved; active_at_peak = s.active; allocated_at_peak = s.allocated;
    for (k = 0; k < n && !s.failed && !s.broken; k++) {
        int64_t kd = kind[k], event = event_c[k];
        if (until >= 0 && event > until) break;
        done_n = k + 1;
        if (kd == K_ALLOC || kd == K_OOM) {
            int has_hint = use_hints && hint_c[k] >= 0;
            int32_t blk = sim_malloc(&s, size_c[k], stream_c[k], (int32_t)pool_c[k], has_hint, hint_c[k]);
            if (kd == K_OOM) {
                lvec_push(&ooms, event); lvec_push(&ooms, blk >= 0);
                if (blk < 0 && oom_event < 0) { oom_event = event; oom_size = size_c[k]; }
                else if (blk >= 0) {
                    if (s.reserved > peak) {
                        peak = s.reserved; peak_event = event; active_at_peak = s.active; allocated_at_peak = s.allocated;
                    }
                    sim_free(&s, blk, 0);
                }
            } else if (blk < 0) {
                if (oom_event < 0) { oom_event = event; oom_size = size_c[k]; }
                stopped_at = event;
            } else {
                s.b[blk].slot = slot[k];
                if (slot[k] >= 0 && slot[k] <= max_slot) slots[slot[k]] = blk;
                if (s.reserved > peak) {
                    peak = s.reserved; peak_event = event; active_at_peak = s.active; allocated_at_peak = s.allocated;
                }
            }
        } else if (kd == K_FREE || kd == K_FREE_PENDING) {
            int64_t sl = slot[k];
            /* Only while the block is still this allocation's (replay.py says why). */
            if (sl >= 0 && sl <= max_slot && slots[sl] >= 0 && s.b[slots[sl]].live && s.b[slots[sl]].allocated
                && s.b[slots[sl]].slot == sl) {
                sim_free(&s, slots[sl], kd == K_FREE_PENDING);
                if (kd == K_FREE) slots[sl] = -1;
            }
        } else if (kd == K_COMPLETE) {
            int64_t sl = slot[k];
            if (sl >= 0 && sl <= max_slot && slots[sl] >= 0) {
                int32_t blk = slots[sl];
                slots[sl] = -1;
                if (s.b[blk].live && s.b[blk].slot == sl) complete(&s, blk);
            }
        } else if (kd == K_EMPTY_CACHE) {
            for (Py_ssize_t at = 0; at < n_fre;) {
                int64_t row = FRE[at], cnt = FRE[at + 1];
                if (row == k) {
                    for (int64_t j = 0; j < cnt; j++) {
                        int32_t pidx = (int32_t)FRE[at + 2 + j], seen = 0;
                        for (Py_ssize_t q = 0; q < s.freeable.n; q++) seen |= s.freeable.v[q] == pidx;
                        if (!seen) ivec_push(&s.freeable, pidx);
                    }
                }
                at += 2 + cnt;
            }
            release_cached(&s);
        }
        for (; emitted < s.events.n; emitted += 3) {
            lvec_push(&out_events, s.events.v[emitted]);
            lvec_push(&out_events, s.events.v[emitted + 1]);
            lvec_push(&out_events, s.events.v[emitted + 2]);
            lvec_push(&out_events, event);
        }
        if (series) { ser_r[k] = s.reserved; ser_a[k] = s.allocated; }
        if (stopped_at >= 0) break;
    }

done:;
    /* The state where the replay stopped: every block, by index (prev/next name indices). */
    LVec table = {0};
    if (dump_state && !s.failed && !s.broken) {
        for (Py_ssize_t q = 0; q < s.nb; q++) {
            ABlock *x = &s.b[q];
            int64_t row[10] = {q, x->live, x->addr, x->size, x->stream, (int64_t)x->allocated | ((int64_t)x->pending << 1),
                               x->mapped, x->seg_page != 0, x->slot, x->prev};
            for (int c = 0; c < 10; c++) if (lvec_push(&table, row[c]) < 0) s.failed = 1;
        }
    }
    PyObject *result = NULL;
    if (s.failed) {
        PyErr_NoMemory();
    } else if (s.broken) {
        /* Not memory: the request stream or the state at the first event broke the model's
         * invariants (memtui/allocator/replay.py consistent_initial keeps them). */
        PyErr_SetString(PyExc_RuntimeError, "allocator replay: the allocator's state became inconsistent");
    } else {
        result = Py_BuildValue("(NN(LLLLLLLLL)NNN)", bytes_of(out_events.v, out_events.n), bytes_of(ooms.v, ooms.n),
                               (long long)peak, (long long)peak_event, (long long)active_at_peak,
                               (long long)allocated_at_peak, (long long)oom_event, (long long)oom_size,
                               (long long)stopped_at, (long long)s.retries, (long long)done_n,
                               series ? bytes_of(ser_r, done_n) : (Py_INCREF(Py_None), Py_None),
                               series ? bytes_of(ser_a, done_n) : (Py_INCREF(Py_None), Py_None),
                               dump_state ? bytes_of(table.v, table.n) : (Py_INCREF(Py_None), Py_None));
    }
    free(table.v);
    for (int q = 0; s.pools && q < s.npools; q++) { free(s.pools[q].keys.v); free(s.pools[q].unmapped.v); }
    free(s.pools); free(s.b); free(s.freelist.v); free(s.pending.v); free(s.freeable.v); free(s.events.v);
    free(s.live_addr.v); free(s.live_size.v); free(s.freed_size.v); free(s.freed_addr.v);
    free(slots); free(ser_r); free(ser_a); free(out_events.v); free(ooms.v);
    PyBuffer_Release(&rb); PyBuffer_Release(&pb); PyBuffer_Release(&recb); PyBuffer_Release(&ib);
    PyBuffer_Release(&fb);
    return result;
}
