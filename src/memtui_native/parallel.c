/* The scanner over an uncompressed file, on several cores.
 *
 * A pickle is one stream: each trace entry refers to memo slots numbered since the start of
 * the file, and the ids the model gives (stacks, actions) follow the order things first
 * appear. The file is still read in parallel, in four steps:
 *
 * 1. prefix: the main thread reads the start in order (segments, the first entries), so
 *    the entry keys, the common strings and the first frames are known;
 * 2. plan: the rest is cut into ranges, each starting where the bytes of an entry's start
 *    are found (EMPTY_DICT MEMOIZE MARK and the reference to the 'action' key);
 * 3. parse (parallel): a worker per range reads its entries into columns of its own, with a
 *    copy of the tables. It cannot know which memo slot its range starts at, so every
 *    reference past the prefix's slots becomes a deferred code (cached in the slot, so a
 *    frame referred to a million times is looked up once), and the slots it fills are
 *    numbered from 0. It stops at anything but entries and batch MARK/APPENDS;
 * 4. merge (in order, main thread): the ranges before a worker's are merged, so its first
 *    slot is known: each deferred code is resolved (to a slot before the range, or to one
 *    of its own), its strings, frames, stacks and actions enter the tables in the order
 *    it met them, its slots and rows are appended and its batches replayed on the real
 *    stack. What it did not read (a gap: the end of one trace and the start of the next)
 *    is read by the main thread, which must then land exactly on the next range's start:
 *    that proves the start (found by its bytes, which a string could also hold) is a real
 *    entry boundary.
 *
 * The result is, id for id, what the scan in order gives. Anything unexpected (a start
 * that does not chain, a worker that fails, a reference the merge cannot resolve without
 * changing the order) makes the main thread read that range itself, in order.
 */
#include "scanner.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#ifndef _WIN32
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#define HAVE_THREADS 1
#else
#define HAVE_THREADS 0
#endif

static Py_ssize_t MAX_ITEM = (Py_ssize_t)1 << 30;  /* a reader's buffer, at most: one opcode larger is not read here */
/* Tests make these small, so files of a few kilobytes are read by many workers. */
static int64_t PREFIX_ROWS = 4096;             /* entries read in order before the workers start */
/* Bytes of entries per worker, at least: below it a worker's start, its columns and its merge
 * cost more than reading its range in order saves. At 87 MB (1M events) on 2 cores two
 * workers take 0.91-0.96 of one reader's time, for 5 MB more resident (with 4 MiB reads;
 * 16 MiB reads made it 34 MB); at 48 MB a range and more, the file's end and the merge
 * are a small part of each range. */
static int64_t MIN_RANGE = (int64_t)32 << 20;
static int64_t SEARCH_SPAN = (int64_t)4 << 20; /* how far past its nominal start a range's first entry is looked for */
/* A range's merge is cut into pieces of at least this many rows (memo slots), about two a
 * thread for the memo and one a thread for each column, taken by the threads as they come
 * free: a piece a column kept each range's merge as long as its largest column's copy,
 * while most cores waited (merge.c). */
static int64_t PIECE_ROWS = (int64_t)1 << 16;
/* Bytes read at a time by each reader: 16 MiB was no faster at 10M events than 4 MiB, and
 * each worker held its buffer to the end. */
static Py_ssize_t READ_CHUNK = (Py_ssize_t)4 << 20;
/* Tests make the last range's worker wait this long before it reads, so that the ranges
 * before it are merged while it runs (merge_early); 0 otherwise. */
static int64_t LAST_RANGE_DELAY_US = 0;
#define MAX_WORKERS 256

/* ---- deferred references (called by entry.c in a worker) ------------------------------------ */

static int own_chunk(Scanner *s, Py_ssize_t chunk);

int defer_code(Scanner *s, int64_t index, int use, int32_t *code)
{
    if (!s->worker) return scan_fail(s, s->base, "a memo slot no worker filled");
    Py_ssize_t chunk = (Py_ssize_t)(index >> MEMO_CHUNK_BITS);
    uint32_t slot = s->memo[chunk][index & (MEMO_CHUNK - 1)];
    int32_t k;
    if (SLOT_VALUE(slot)) {  /* deferred before: its code is in the slot */
        k = (int32_t)SLOT_VALUE(slot) - 1;
    } else {
        if (s->deferred_index.n >= SLOT_VALUE_MAX - 1) return scan_fail(s, s->base, "too many deferred references");
        k = (int32_t)s->deferred_index.n;
        if (VEC_PUSH(&s->deferred_index, int64_t, index) || VEC_PUSH(&s->deferred_use, uint8_t, 0) ||
            VEC_PUSH(&s->deferred_own, int64_t, s->own_count))
            return ST_ERROR;
        if (own_chunk(s, chunk)) return ST_ERROR;  /* the shared all-deferred chunk: a copy of its own */
        s->memo[chunk][index & (MEMO_CHUNK - 1)] = SLOT(SK_DEFERRED, k + 1);
    }
    VEC_AT(&s->deferred_use, uint8_t, k) |= (uint8_t)use;
    *code = -2 - k;
    return ST_OK;
}

/* Make memo chunk ``chunk`` the worker's own (a copy of what it held), to write into it. */
static int own_chunk(Scanner *s, Py_ssize_t chunk)
{
    if (VEC_AT(&s->memo_own, uint8_t, chunk)) return ST_OK;
    uint32_t *own = memo_chunk();
    if (!own) return ST_ERROR;
    memcpy(own, s->memo[chunk], MEMO_CHUNK * sizeof(uint32_t));
    s->memo[chunk] = own;
    VEC_AT(&s->memo_own, uint8_t, chunk) = 1;
    return ST_OK;
}

static uint32_t own_get(const Scanner *s, int64_t j);

/* A worker's own slot j: in ``own`` until it has a guess of where its slots go, then in the
 * memo at guess + j (where its references will look for it). */
int own_set(Scanner *s, int64_t j, uint32_t slot)
{
    if (j < s->own_count && names_a_string(own_get(s, j))) s->memo_epoch++;  /* see memo_set */
    if (s->guess < 0) {
        if (j == (int64_t)s->own.n) {
            if (VEC_PUSH(&s->own, uint32_t, slot)) return ST_ERROR;
        } else {
            VEC_AT(&s->own, uint32_t, j) = slot;
        }
    } else {
        int64_t i = s->guess + j;
        if (i >= ((int64_t)1 << 32)) return scan_fail(s, s->base, "more memo slots than a pickle can name");
        if (own_chunk(s, (Py_ssize_t)(i >> MEMO_CHUNK_BITS))) return ST_ERROR;
        s->memo[i >> MEMO_CHUNK_BITS][i & (MEMO_CHUNK - 1)] = slot;
    }
    if (j == s->own_count) s->own_count++;
    return ST_OK;
}

static uint32_t own_get(const Scanner *s, int64_t j)
{
    if (s->guess < 0) return VEC_AT(&s->own, uint32_t, j);
    int64_t i = s->guess + j;
    return s->memo[i >> MEMO_CHUNK_BITS][i & (MEMO_CHUNK - 1)];
}

/* A frame list referred to from before the worker knows where its slots go: torch shares a
 * free_requested's list with the free_completed after it, so if the last entry made a list,
 * this is probably it, and its index tells where the worker's slots start. From then on its
 * own slots are written there and read like any other; the merge checks the guess (a worker
 * that guessed wrong is read again in order). 1 when the guess was made. */
int guess_base(Scanner *s, int64_t index)
{
    if (!s->worker || s->guess >= 0 || s->prev_list_own < 0) return 0;
    int64_t guess = index - s->prev_list_own;
    /* Every slot's place within the 2**32 a pickle can name, in a chunk of its own, before any
     * is written: a guess given up half way would leave its slots where the memo is read. */
    if (guess < s->p_memo || guess + (int64_t)s->own.n > ((int64_t)1 << 32)) return 0;
    for (int64_t i = guess; i < guess + (int64_t)s->own.n; i += MEMO_CHUNK - (i & (MEMO_CHUNK - 1)))
        if (own_chunk(s, (Py_ssize_t)(i >> MEMO_CHUNK_BITS))) return 0;
    for (int64_t j = 0; j < (int64_t)s->own.n; j++) {  /* the slots so far, into their places */
        int64_t i = guess + j;
        s->memo[i >> MEMO_CHUNK_BITS][i & (MEMO_CHUNK - 1)] = VEC_AT(&s->own, uint32_t, j);
    }
    s->guess = guess;
    s->memo_epoch++;  /* its slots are where they are read from now */
    vec_free(&s->own);
    return 1;
}

int worker_obj_sid(Scanner *s, const uint8_t *at, Py_ssize_t i, int32_t *sid)
{
    int32_t k = i < s->obj_list.n ? VEC_AT(&s->obj_list, int32_t, i) : -1;
    if (k < 0) return scan_fail(s, at, "a frame list the main thread did not convert");
    int64_t lo = VEC_AT(&s->objlist_offsets, int64_t, k), hi = VEC_AT(&s->objlist_offsets, int64_t, k + 1);
    if (hi == lo) { *sid = -1; return ST_OK; }
    int32_t id = stack_intern(&s->ft, (const int32_t *)s->objlist_fids.data + lo, hi - lo);
    if (id < 0) return ST_ERROR;
    *sid = id;
    return ST_OK;
}

/* ---- reading a file by offset ----------------------------------------------------------------- */

typedef struct {
    int fd;
    int64_t limit;  /* read no further than this file offset */
    uint8_t *buf;
    Py_ssize_t cap, len;
    int64_t pos;    /* file offset of buf[0] */
    int eof, error; /* the file ended before the limit; errno of a failed read */
} Reader;

static int reader_open(Reader *r, int fd, int64_t pos, int64_t limit)
{
    memset(r, 0, sizeof *r);
    r->fd = fd;
    r->pos = pos;
    r->limit = limit;
    r->cap = (Py_ssize_t)large_bytes((size_t)READ_CHUNK);
    r->buf = large_realloc(NULL, (size_t)r->cap);
    return r->buf ? 0 : -1;
}

static void reader_close(Reader *r)
{
    free(r->buf);
    r->buf = NULL;
}

static int reader_final(const Reader *r) { return r->eof || r->pos + r->len >= r->limit; }

/* Drop buf[0:keep], read on after what is left: bytes read (0 at the limit or the end), or
 * -1 on a read error, -2 for an object too large to hold. Without the GIL. */
static Py_ssize_t reader_fill(Reader *r, Py_ssize_t keep)
{
    if (keep > 0) {
        memmove(r->buf, r->buf + keep, (size_t)(r->len - keep));
        r->len -= keep;
        r->pos += keep;
    }
    if (r->len == r->cap) {
        if (r->cap >= MAX_ITEM) return -2;
        size_t bytes = large_bytes((size_t)r->cap * 2);
        if (bytes > (size_t)MAX_ITEM) bytes = (size_t)MAX_ITEM;  /* the limit, not the size rounded past it */
        uint8_t *bigger = large_realloc(r->buf, bytes);
        if (!bigger) return -2;
        r->buf = bigger;
        r->cap = (Py_ssize_t)bytes;
    }
    int64_t left = r->limit - (r->pos + r->len);
    Py_ssize_t want = r->cap - r->len;
    if (want > left) want = (Py_ssize_t)left;
    Py_ssize_t got = 0;
    while (got < want) {
#if HAVE_THREADS
        ssize_t n = pread(r->fd, r->buf + r->len + got, (size_t)(want - got), (off_t)(r->pos + r->len + got));
#else
        ssize_t n = -1;
        errno = ENOSYS;
#endif
        if (n < 0) {
            if (errno == EINTR) continue;
            r->error = errno;
            return -1;
        }
        if (n == 0) { r->eof = 1; break; }
        got += n;
    }
    r->len += got;
    return got;
}

/* Move the window to file offset ``pos`` (nothing kept). */
static void reader_seek(Reader *r, int64_t pos)
{
    r->pos = pos;
    r->len = 0;
    r->eof = 0;
}

/* ---- progress ------------------------------------------------------------------------------ */

typedef struct {
    PyObject *callback;  /* progress(stage, done, total), or None */
    int64_t total;
    int64_t shown;       /* the most reported so far: progress never goes back */
} Progress;

static int report(Progress *p, int64_t done)  /* with the GIL; -1 when the callback (or Ctrl-C) raised */
{
    if (PyErr_CheckSignals() < 0) return -1;
    if (!p->callback || p->callback == Py_None) return 0;
    if (done < p->shown) done = p->shown;
    p->shown = done;
    PyObject *r = PyObject_CallFunction(p->callback, "sLL", "reading", (long long)done, (long long)p->total);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

/* ---- the main thread, in order ---------------------------------------------------------------- */

static inline int64_t stream_at(const Scanner *s, const Cur *c) { return s->offset + (c->p - s->base); }

enum { RUN_END, RUN_LANDED, RUN_PASSED, RUN_PREFIX };

/* The main scanner from file offset ``from`` until: STOP (RUN_END); the top-level step
 * that starts exactly at ``until`` (RUN_LANDED) or after it (RUN_PASSED); with ``prefix``,
 * the first top-level point after PREFIX_ROWS entries where a dict would be an entry
 * (RUN_PREFIX, *where set). With the GIL: it builds Python objects outside the traces. */
static int run_from(Scanner *s, Reader *r, int64_t from, int64_t until, int prefix, Progress *pr, int *how,
                    int64_t *where)
{
    reader_seek(r, from);
    Py_ssize_t got = reader_fill(r, 0);
    for (;;) {
        if (got >= 0 && report(pr, r->pos + r->len) < 0) return ST_ERROR;  /* the bytes read so far */
        if (got == -1) { PyErr_SetFromErrno(PyExc_OSError); return ST_ERROR; }
        if (got == -2) return scan_fail(s, r->buf, "an object larger than the scanner holds");
        Cur c = {r->buf, r->buf + r->len, reader_final(r)};
        s->base = r->buf;
        s->offset = r->pos;
        int st = ST_OK;
        for (;;) {
            if (s->done) { *how = RUN_END; *where = stream_at(s, &c); return ST_OK; }
            uint8_t op = 0;
            if ((st = next_op(s, &c, &op))) break;  /* FRAME headers are steps of their own here */
            int64_t at = stream_at(s, &c);
            if (until >= 0 && at >= until) {
                *how = at == until ? RUN_LANDED : RUN_PASSED;
                *where = at;
                return ST_OK;
            }
            int32_t trace;
            if (prefix && s->rows_total >= PREFIX_ROWS && in_trace(s, &trace)) {
                *how = RUN_PREFIX;
                *where = at;
                return ST_OK;
            }
            const uint8_t *before = c.p;
            if ((st = step(s, &c))) { c.p = before; break; }
        }
        if (st != ST_MORE) return st;
        got = reader_fill(r, c.p - r->buf);
    }
}

/* ---- a worker: one range's entries ------------------------------------------------------------ */

enum { TOK_MARK = -1, TOK_APPENDS = -2, TOK_APPEND = -3 };

typedef struct {
    Scanner s;            /* plain struct (not a Python object), s.worker set */
    Scanner *parent;      /* the main scanner: read by the setup; changed by merges only once every setup is done */
    int fd;
    int64_t start, end;
    /* the parent's sizes: ids below them are the parent's, from them on the worker's own */
    Py_ssize_t p_strings, p_frames, p_stacks, p_frecs, p_extras, p_actions;
    int64_t p_memo;
    int64_t p_rewrites;   /* the parent's memo_rewrites: a slot written again since, its copy may be stale */
    /* out */
    int status;           /* ST_OK, ST_ERROR (out of memory or a read error) */
    int64_t stop_at;      /* where it stopped reading entries: end, or the start of what it left */
    Vec tokens;           /* int64: n > 0 entries, TOK_* */
    struct { Py_ssize_t strings, frames, stacks, frecs, extras, actions, deferred, own; int64_t rows; } wm;
    /* Shared with the main thread while the worker runs: C11 atomics, never plain or volatile
     * (the main thread reads done_bytes for progress and sets *cancel to stop the workers). */
    _Atomic int64_t done_bytes;
    atomic_int *cancel;
    double seconds;       /* how long its thread took, setup included (for benchmarks/phases.py) */
    /* Set (release) when its copy of the parent's tables is made, and when it is done: the
     * main thread merges a range while later ones still run, but only once every worker has
     * its copy, and only a range whose worker is done (see merge_early). */
    atomic_int set_up, finished;
    int last;             /* the last range (see LAST_RANGE_DELAY_US) */
} Worker;

static void watermark(Worker *w)
{
    Scanner *s = &w->s;
    w->wm.strings = s->strings.recs.n;
    w->wm.frames = s->ft.frames.n;
    w->wm.stacks = s->ft.offsets.n - 1;
    w->wm.frecs = s->frecs.n;
    w->wm.extras = s->rec_extras.n;
    w->wm.actions = s->actions.n;
    w->wm.deferred = s->deferred_index.n;
    w->wm.own = s->own_count;
    w->wm.rows = VEC_AT(&s->traces, Trace *, 0)->time.n;  /* (rows staged too: worker_range puts them in) */
}

static int push_token(Worker *w, int64_t *entries, int64_t token)
{
    if (*entries) {
        if (VEC_PUSH(&w->tokens, int64_t, *entries)) return -1;
        *entries = 0;
    }
    return token ? VEC_PUSH(&w->tokens, int64_t, token) : 0;
}

static void worker_range(Worker *w)
{
    Scanner *s = &w->s;
    Reader r;
    w->status = ST_ERROR;
    w->stop_at = w->start;
    if (reader_open(&r, w->fd, w->start, w->end) < 0) return;
    int64_t entries = 0;
    Py_ssize_t got = reader_fill(&r, 0);
    while (got >= 0) {  /* a read error or a huge object: it stops, the main thread reads on */
        Cur c = {r.buf, r.buf + r.len, reader_final(&r)};
        s->base = r.buf;
        s->offset = r.pos;
        for (;;) {
            w->stop_at = stream_at(s, &c);  /* every step before here is read */
            if (atomic_load_explicit(w->cancel, memory_order_acquire)) goto out;
            if (c.p == c.end && c.final) goto out;  /* the range's end */
            uint8_t op = 0;
            int st = next_op(s, &c, &op);
            if (st == ST_MORE) break;
            if (st) goto out;  /* cut inside an opcode at the range's end: not an entry boundary */
            if (op == OP_EMPTY_DICT) {
                const uint8_t *before = c.p;
                st = parse_entry(s, &c, 0);
                if (st == ST_MORE) { c.p = before; break; }
                if (st == ST_ERROR) goto error;
                if (st) { c.p = before; w->stop_at = stream_at(s, &c); goto out; }  /* the main thread reads it */
                entries++;
                watermark(w);
                continue;
            }
            int64_t token = op == OP_MARK ? TOK_MARK : op == OP_APPENDS ? TOK_APPENDS : op == OP_APPEND ? TOK_APPEND : 0;
            if (!token) { w->stop_at = stream_at(s, &c); goto out; }  /* anything else: the trace ends here */
            if (push_token(w, &entries, token)) goto error;
            c.p++;
        }
        got = reader_fill(&r, c.p - r.buf);
        atomic_store_explicit(&w->done_bytes, r.pos - w->start, memory_order_relaxed);
    }
out:
    if (push_token(w, &entries, 0) || stage_flush(s)) goto error;
    w->status = ST_OK;
error:
    reader_close(&r);
}

static int copy_vec(Vec *dst, const Vec *src, size_t item)
{
    memset(dst, 0, sizeof *dst);
    if (vec_reserve(dst, src->n ? src->n : 1, item) < 0) return -1;
    if (src->n) memcpy(dst->data, src->data, (size_t)src->n * item);
    dst->n = src->n;
    return 0;
}

static uint32_t *deferred_chunk;  /* MEMO_CHUNK slots of SK_DEFERRED, shared by every worker */

/* A worker for [start, end): copies of the parent's tables; for reading, the parent's memo up
 * to its length and deferred slots after it (copied when a code is cached in one). With
 * the GIL. */
/* A worker's own copy of the parent's tables and memo, made on the worker's thread (the
 * main thread set parent, fd, start, end and cancel on a zeroed worker): at 16 ranges the
 * copies took 45 ms one after another. The memo is allocated first, so a worker whose setup
 * failed holds nothing or is freed as any other (its memo is what marks it). */
static int worker_setup(Worker *w)
{
    Scanner *s = &w->s, *p = w->parent;
    s->worker = 1;
    s->stream_size = p->stream_size;
    Py_ssize_t chunks = (Py_ssize_t)(((int64_t)1 << 32) >> MEMO_CHUNK_BITS);
    s->memo = calloc((size_t)chunks, sizeof(uint32_t *));
    if (!s->memo) return -1;
    if (copy_vec(&s->strings.recs, &p->strings.recs, sizeof(StrRec)) || copy_vec(&s->strings.arena, &p->strings.arena, 1))
        return -1;
    s->strings.cap = p->strings.cap;
    s->strings.slots = malloc((size_t)(p->strings.cap ? p->strings.cap : 1) * sizeof(int32_t));
    if (!s->strings.slots) return -1;
    if (p->strings.cap) memcpy(s->strings.slots, p->strings.slots, (size_t)p->strings.cap * sizeof(int32_t));
    s->strings.no_python = s->strings.borrowed_objs = 1;
    FrameTables *t = &s->ft, *pt = &p->ft;
    if (copy_vec(&t->frames, &pt->frames, sizeof(FrameKey)) || copy_vec(&t->extras, &pt->extras, sizeof(int32_t)) ||
        copy_vec(&t->flat, &pt->flat, sizeof(int32_t)) || copy_vec(&t->offsets, &pt->offsets, sizeof(int64_t)))
        return -1;
    t->fcap = pt->fcap;
    t->scap = pt->scap;
    t->fslots = malloc((size_t)(pt->fcap ? pt->fcap : 1) * sizeof(int32_t));
    t->sslots = malloc((size_t)(pt->scap ? pt->scap : 1) * sizeof(int32_t));
    if (!t->fslots || !t->sslots) return -1;
    if (pt->fcap) memcpy(t->fslots, pt->fslots, (size_t)pt->fcap * sizeof(int32_t));
    if (pt->scap) memcpy(t->sslots, pt->sslots, (size_t)pt->scap * sizeof(int32_t));
    if (vec_reserve(&t->objs, pt->objs.n ? pt->objs.n : 1, sizeof(PyObject *)) < 0) return -1;
    memset(t->objs.data, 0, (size_t)t->objs.cap * sizeof(PyObject *));  /* a worker makes no lists */
    t->objs.n = pt->objs.n;
    if (copy_vec(&s->frecs, &p->frecs, sizeof(FrameRec)) || copy_vec(&s->rec_extras, &p->rec_extras, sizeof(int32_t)) ||
        copy_vec(&s->actions, &p->actions, sizeof(int32_t)))
        return -1;
    for (Py_ssize_t i = 0; i < s->frecs.n; i++) {  /* the parent's objects are not the worker's */
        VEC_AT(&s->frecs, FrameRec, i).obj = NULL;
        VEC_AT(&s->frecs, FrameRec, i).line_obj = NULL;
    }
    /* shared, read-only: the parent's objects and their conversions */
    s->objs = p->objs;
    s->obj_conv = p->obj_conv;
    s->obj_list = p->obj_list;
    s->objlist_offsets = p->objlist_offsets;
    s->objlist_fids = p->objlist_fids;
    /* memo, for reading: every index a pickle can name (2**32) */
    if (vec_reserve(&s->memo_own, chunks, 1) < 0) return -1;
    memset(s->memo_own.data, 0, (size_t)chunks);
    s->memo_own.n = chunks;
    s->memo_chunks = chunks;
    int64_t m0 = p->memo_len;
    for (Py_ssize_t k = 0; k < chunks; k++) {
        int64_t lo = (int64_t)k << MEMO_CHUNK_BITS, hi = lo + MEMO_CHUNK;
        if (hi <= m0) { s->memo[k] = p->memo[k]; continue; }     /* the parent's, whole */
        if (lo >= m0) { s->memo[k] = deferred_chunk; continue; }  /* copied when a code is cached */
        uint32_t *own = memo_chunk();    /* both: a copy of its own */
        if (!own) return -1;
        for (int64_t i = lo; i < hi; i++) own[i - lo] = i < m0 ? p->memo[k][i - lo] : SLOT(SK_DEFERRED, 0);
        s->memo[k] = own;
        VEC_AT(&s->memo_own, uint8_t, k) = 1;
    }
    s->memo_len = (int64_t)1 << 32;
    s->guess = s->prev_list_own = s->this_list_own = -1;
    s->p_memo = m0;
    s->empty_str = p->empty_str;
    memcpy(s->short_strings, p->short_strings, sizeof s->short_strings);
    Trace *trace = calloc(1, sizeof(Trace));
    if (!trace || VEC_PUSH(&s->traces, Trace *, trace)) { free(trace); return -1; }
    trace->last_ctx = trace->last_meta = INT32_MIN;
    trace->action.width = trace->addr.width = trace->size.width = trace->stream.width = trace->stack.width = 1;
    trace->ctx.width = trace->meta.width = trace->device_free.width = 1;
    w->p_strings = p->strings.recs.n;
    w->p_frames = pt->frames.n;
    w->p_stacks = pt->offsets.n - 1;
    w->p_frecs = p->frecs.n;
    w->p_extras = p->rec_extras.n;
    w->p_actions = p->actions.n;
    w->p_memo = m0;
    w->p_rewrites = p->memo_rewrites;
    watermark(w);
    return 0;
}

static void worker_free(Worker *w)
{
    Scanner *s = &w->s;
    /* the memo: only the worker's own chunks are freed (the others are the parent's or shared) */
    if (s->memo) {
        for (Py_ssize_t k = 0; k < s->memo_chunks; k++)
            if (VEC_AT(&s->memo_own, uint8_t, k)) free(s->memo[k]);
        free(s->memo);
    }
    vec_free(&s->memo_own);
    vec_free(&s->own);
    strtable_free(&s->strings);
    frametables_free(&s->ft);
    vec_free(&s->frecs);
    vec_free(&s->rec_extras);
    vec_free(&s->fids);
    vec_free(&s->actions);
    for (Py_ssize_t i = 0; i < s->traces.n; i++) {
        Trace *t = VEC_AT(&s->traces, Trace *, i);
        intcol_free(&t->action); intcol_free(&t->addr); intcol_free(&t->size); intcol_free(&t->stream);
        intcol_free(&t->stack); intcol_free(&t->ctx); intcol_free(&t->meta); intcol_free(&t->device_free);
        vec_free(&t->time);
        map64_free(&t->ctx_ids); map64_free(&t->meta_ids);
        vec_free(&t->ctx_vals); vec_free(&t->meta_vals);
        free(t);
    }
    vec_free(&s->traces);
    vec_free(&s->deferred_index);
    vec_free(&s->deferred_own);
    vec_free(&s->deferred_use);
    map64_free(&s->deferred_actions);
    vec_free(&w->tokens);
    s->memo = NULL;
}

#if HAVE_THREADS
static void *free_main(void *arg)
{
    worker_free(arg);
    free(arg);
    return NULL;
}
#endif

/* A merged worker's memory freed on a thread of its own, not waited for: the merge of the
 * next range waits for nothing but that range. Giving back a range's columns and memo took
 * 1.5-3 ms of the kernel's time (each mapping undone on every core that runs a thread of
 * the process), and the ranges are merged one after the other: on 16 cores, 25-45 ms of
 * the scan of a 10M-event file. The worker's thread has ended, so nothing else reads what
 * is freed; the Worker itself keeps only its plain numbers (its memo NULL: freed). Where
 * no thread can be had, it is freed here. */
static void worker_free_later(Worker *w)
{
#if HAVE_THREADS
    Worker *gone = malloc(sizeof(Worker));
    pthread_attr_t detached;
    if (gone && pthread_attr_init(&detached) == 0) {
        memcpy(gone, w, sizeof(Worker));
        pthread_t thread;
        int started = pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED) == 0 &&
                      pthread_create(&thread, &detached, free_main, gone) == 0;
        pthread_attr_destroy(&detached);
        if (started) {
            w->s.memo = NULL;
            return;
        }
    }
    free(gone);
#endif
    worker_free(w);
}

static double now_s(void)
{
#if HAVE_THREADS
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
#else
    return 0.0;
#endif
}

/* Run fn(items[i]) for each of n items on at most ``threads`` threads (64 at most), this one
 * included, each taking the next item no thread has taken: many small items share the cores
 * evenly, however unequal the items are; with ``threads`` = n, each item has a thread of its
 * own. For work that touches no Python object (the GIL, held or not, is left as it is). */
typedef struct {
    void *(*fn)(void *);
    char *items;
    size_t item_size;
    int n;
    atomic_int next;
} Pool;

static void *pool_main(void *arg)
{
    Pool *p = arg;
    for (;;) {
        int i = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (i >= p->n) return NULL;
        p->fn(p->items + (size_t)i * p->item_size);
    }
}

static void run_pool(void *(*fn)(void *), void *items, size_t item_size, int n, int threads)
{
    Pool p = {fn, items, item_size, n, 0};
    int extra = (threads < n ? threads : n) - 1;
    if (extra > 63) extra = 63;
#if HAVE_THREADS
    pthread_t helpers[63];
    int started[63] = {0};
    for (int i = 0; i < extra; i++) started[i] = pthread_create(&helpers[i], NULL, pool_main, &p) == 0;
    pool_main(&p);  /* a helper that could not be started leaves its items to the others */
    for (int i = 0; i < extra; i++)
        if (started[i]) pthread_join(helpers[i], NULL);
#else
    (void)extra;
    pool_main(&p);
#endif
}

#include "merge.c"

/* ---- before the workers: what they need of Python objects, converted ------------------------ */

/* Every object outside the traces a worker may meet, as ids: strs as string ids, frame dicts
 * as frame ids, frame lists as runs of frame ids (objlist_*). Lists get no stack id here:
 * stack ids follow first use. With the GIL. */
static int prepare_objects(Scanner *s)
{
    if (vec_reserve(&s->obj_list, s->objs.n ? s->objs.n : 1, sizeof(int32_t)) < 0) return ST_ERROR;
    if (!s->objlist_offsets.n && VEC_PUSH(&s->objlist_offsets, int64_t, 0)) return ST_ERROR;
    const char *reason = s->reason;
    Py_ssize_t first = s->obj_list.n;
    for (Py_ssize_t i = first; i < s->objs.n; i++) {
        VEC_AT(&s->obj_list, int32_t, i) = -1;
        PyObject *obj = VEC_AT(&s->objs, PyObject *, i);
        int32_t *conv = &VEC_AT(&s->obj_conv, int32_t, i), id;
        if (PyUnicode_CheckExact(obj) && *conv == CONV_UNKNOWN) {
            int r = unicode_strid(s, s->base, obj, &id);
            if (r == ST_ERROR) return r;
            *conv = r ? CONV_BAD : id;
        } else if (PyDict_CheckExact(obj) && *conv == CONV_UNKNOWN) {
            int r = obj_to_fid(s, s->base, obj, &id);
            if (r == ST_ERROR) return r;
            *conv = r ? CONV_BAD : id;
        } else if (PyList_CheckExact(obj)) {
            Py_ssize_t at = s->objlist_fids.n;
            int r = ST_OK;
            for (Py_ssize_t j = 0; r == ST_OK && j < PyList_GET_SIZE(obj); j++) {
                r = obj_to_fid(s, s->base, PyList_GET_ITEM(obj, j), &id);
                if (r == ST_OK && VEC_PUSH(&s->objlist_fids, int32_t, id)) r = ST_ERROR;
            }
            if (r == ST_ERROR) return r;
            if (r || freeze(s, obj) < 0) {  /* not a frame list: a worker that meets it stops */
                s->objlist_fids.n = at;
                continue;
            }
            VEC_AT(&s->obj_list, int32_t, i) = (int32_t)(s->objlist_offsets.n - 1);
            if (VEC_PUSH(&s->objlist_offsets, int64_t, s->objlist_fids.n)) return ST_ERROR;
        }
    }
    s->obj_list.n = s->objs.n;
    s->reason = reason;  /* objects that are not frames are no failure of the scan */
    s->refused = 0;
    return ST_OK;
}

/* The bytes every trace entry of this file starts with: EMPTY_DICT MEMOIZE MARK and the
 * reference to the 'action' key (as the pickler writes it: BINGET below 256). */
static int action_pattern(Scanner *s, uint8_t *pattern, int *length)
{
    for (int64_t i = 0; i < s->memo_len; i++) {
        uint32_t slot = s->memo[i >> MEMO_CHUNK_BITS][i & (MEMO_CHUNK - 1)];
        if (SLOT_KIND(slot) != SK_STR || VEC_AT(&s->strings.recs, StrRec, SLOT_VALUE(slot)).key != K_ACTION) continue;
        pattern[0] = OP_EMPTY_DICT;
        pattern[1] = OP_MEMOIZE;
        pattern[2] = OP_MARK;
        if (i < 256) {
            pattern[3] = OP_BINGET;
            pattern[4] = (uint8_t)i;
            *length = 5;
        } else {
            pattern[3] = OP_LONG_BINGET;
            for (int k = 0; k < 4; k++) pattern[4 + k] = (uint8_t)(i >> (8 * k));
            *length = 8;
        }
        return 1;
    }
    return 0;
}

/* The first offset in [from, to) where ``pattern`` starts, or -1. */
static int64_t find_pattern(int fd, int64_t from, int64_t to, const uint8_t *pattern, int length)
{
    /* A window at a time: an entry's bytes recur every hundred bytes or so, so the first
     * window nearly always holds them (reading the whole span took milliseconds a range). */
    enum { WINDOW = 64 << 10 };
    uint8_t *buf = malloc(WINDOW);
    int64_t found = -1, pos = from;
    while (buf && pos < to) {
        size_t want = (size_t)(to - pos < WINDOW ? to - pos : WINDOW);
        ssize_t got = pread(fd, buf, want, (off_t)pos);
        if (got < 0 && errno == EINTR) continue;
        if (got < length) break;  /* an error, or the end of the file */
        for (ssize_t i = 0; i + length <= got; i++) {
            if (buf[i] == pattern[0] && memcmp(buf + i, pattern, (size_t)length) == 0) {
                found = pos + i;
                goto out;
            }
        }
        pos += got - (length - 1);  /* the last length-1 bytes may start it */
    }
out:
    free(buf);
    return found;
}

/* ---- threads ------------------------------------------------------------------------------------- */

#if HAVE_THREADS
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;  /* signalled as each job finishes: the waiter wakes at the last one */
    int finished;
} JobsDone;

typedef struct {
    void (*fn)(void *, JobsDone *);
    void *arg;
    JobsDone *done;
} Job;

/* Wake the thread that waits in run_jobs: a job reached a step it may act on (``ended``: 0),
 * or ended (1). */
static void jobs_poke(JobsDone *done, int ended)
{
    pthread_mutex_lock(&done->lock);
    done->finished += ended;
    pthread_cond_signal(&done->changed);
    pthread_mutex_unlock(&done->lock);
}

static void *job_main(void *arg)
{
    Job *job = arg;
    job->fn(job->arg, job->done);
    jobs_poke(job->done, 1);
    return NULL;
}

/* Run fn(items[i]) for each item on a thread of its own; meanwhile report progress (the GIL
 * is given up between reports). -1 when the progress callback raised (the jobs are told to
 * stop, and waited for). The wait between reports ends as soon as the last job does (a
 * plain sleep between polls cost up to a whole pause after it). ``advance(ctx)``, when
 * given, is called after each wait while jobs still run, with the GIL (the merge of the
 * ranges done so far); -1 from it stops the jobs, as a progress callback that raised does.
 *
 * What the jobs share with this thread (``done``, and the caller's ``items`` and ``cancel``)
 * is on the heap and outlives this call when this thread does not come back from a wait: a
 * daemon thread that wants the GIL back while the interpreter ends is stopped there by
 * Python (pthread_exit), and the jobs go on until the process ends. Then it is never freed. */
static int run_jobs(void (*fn)(void *, JobsDone *), void *items, size_t item_size, int n, int64_t (*done_of)(void *),
                    int64_t done_base, Progress *pr, atomic_int *cancel, int (*advance)(void *), void *ctx)
{
    Job *jobs = calloc((size_t)n, sizeof(Job));
    pthread_t *threads = calloc((size_t)n, sizeof(pthread_t));
    JobsDone *done = calloc(1, sizeof(JobsDone));
    pthread_condattr_t monotonic;
    int raised = 0;
    if (!jobs || !threads || !done) { free(jobs); free(threads); free(done); return -2; }
    /* timed waits on the monotonic clock: a wall clock set back would stall them */
    if (pthread_condattr_init(&monotonic) != 0) { free(jobs); free(threads); free(done); return -2; }
    pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
    int ready = pthread_mutex_init(&done->lock, NULL) == 0;
    if (ready && pthread_cond_init(&done->changed, &monotonic) != 0) {
        pthread_mutex_destroy(&done->lock);
        ready = 0;
    }
    pthread_condattr_destroy(&monotonic);
    if (!ready) { free(jobs); free(threads); free(done); return -2; }
    for (int i = 0; i < n; i++) {
        jobs[i].fn = fn;
        jobs[i].arg = (char *)items + (size_t)i * item_size;
        jobs[i].done = done;
        if (pthread_create(&threads[i], NULL, job_main, &jobs[i]) != 0) {
            threads[i] = 0;
            fn(jobs[i].arg, done);  /* no thread to be had: run it here */
            jobs_poke(done, 1);
        }
    }
    for (;;) {
        int all;
        Py_BEGIN_ALLOW_THREADS
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += 20 * 1000 * 1000;
        if (until.tv_nsec >= 1000 * 1000 * 1000) { until.tv_sec++; until.tv_nsec -= 1000 * 1000 * 1000; }
        pthread_mutex_lock(&done->lock);
        if (done->finished < n) pthread_cond_timedwait(&done->changed, &done->lock, &until);
        all = done->finished == n;
        pthread_mutex_unlock(&done->lock);
        Py_END_ALLOW_THREADS
        if (all) break;
        if (!raised && advance && advance(ctx) < 0) {  /* with the GIL, between waits */
            raised = 1;  /* the merge failed: the jobs stop, and nothing more is reported */
            atomic_store_explicit(cancel, 1, memory_order_release);
        }
        if (!raised && !done_of && PyErr_CheckSignals() < 0) {  /* Ctrl-C: the jobs stop */
            raised = 1;
            atomic_store_explicit(cancel, 1, memory_order_release);
        }
        if (!raised && done_of) {
            int64_t bytes = done_base;
            for (int i = 0; i < n; i++) bytes += done_of((char *)items + (size_t)i * item_size);
            if (report(pr, bytes) < 0) {
                raised = 1;
                atomic_store_explicit(cancel, 1, memory_order_release);
            }
        }
    }
    Py_BEGIN_ALLOW_THREADS
    for (int i = 0; i < n; i++)
        if (threads[i]) pthread_join(threads[i], NULL);
    Py_END_ALLOW_THREADS
    pthread_cond_destroy(&done->changed);
    pthread_mutex_destroy(&done->lock);
    free(done);
    free(jobs);
    free(threads);
    return raised ? -1 : 0;
}

static void worker_job(void *arg, JobsDone *done)
{
    Worker *w = arg;
    double began = now_s();
    int ready = worker_setup(w) == 0;
    atomic_store_explicit(&w->set_up, 1, memory_order_release);
    jobs_poke(done, 0);  /* the last setup done, the merge of the ranges done may begin */
    if (!ready) {
        w->status = ST_ERROR;  /* out of memory: the merge fails the scan */
        w->stop_at = w->start;
    } else {
        if (w->last && LAST_RANGE_DELAY_US > 0) {
            struct timespec pause = {(time_t)(LAST_RANGE_DELAY_US / 1000000), (long)(LAST_RANGE_DELAY_US % 1000000) * 1000};
            nanosleep(&pause, NULL);
        }
        worker_range(w);
    }
    w->seconds = now_s() - began;
    atomic_store_explicit(&w->finished, 1, memory_order_release);
}
static int64_t worker_done(void *arg)
{
    return atomic_load_explicit(&((Worker *)arg)->done_bytes, memory_order_relaxed);
}

/* ---- the rest of the file after the prefix ------------------------------------------------------- */

/* The merge of the ranges, in order, as a state: the main thread advances it while the
 * workers run (merge_early) and to the end after them (scan_rest). */
typedef struct {
    Scanner *s;
    Reader *r;
    Worker *workers;
    int n, threads;
    Progress *pr;
    int next;          /* the range to merge next */
    int64_t pos;       /* where the stream in order stands: the next range's start, or -1 at STOP */
    int in_order;      /* a range did not chain: everything from pos is read in order */
    int taken;         /* workers[next] is merged (or discarded) but its end not yet read */
    int64_t from;      /* then: where reading it in order starts */
    int st;
    int early;         /* ranges merged while later ones still ran */
} Merge;

enum { MERGED, WAIT, ENDED };

/* One step of the merge: workers[next] merged, then what its worker did not read read in
 * order. While workers still run (``early``) it stops (WAIT) before anything is read in
 * order: reading in order builds Python objects and fills memo slots the running workers
 * share (parallel.c's worker_setup), where merging a worker's results changes only what the
 * main scanner holds (merge.c). ENDED: the loop ends (an error, a range that did not chain,
 * STOP). The merge's copies run on ``threads`` threads. */
static int merge_one(Merge *m, int early, int threads)
{
    Scanner *s = m->s;
    Worker *w = &m->workers[m->next];
    if (m->in_order || m->pos != w->start) return ENDED;
    if (!m->taken) {
        if (w->status == ST_ERROR) { m->st = ST_ERROR; return ENDED; }
        int discard = 1;
        if ((m->st = merge_worker(s, w, threads, &discard))) return ENDED;
        s->par_merged += !discard;
        s->par_discarded += discard;
        m->from = discard ? w->start : w->stop_at;
        m->taken = 1;
        worker_free_later(w);
    }
    if (m->from < w->end) {
        if (early) return WAIT;  /* reading in order waits for the workers (see above) */
        int how;
        int64_t where;
        if ((m->st = run_from(s, m->r, m->from, w->end, 0, m->pr, &how, &where))) return ENDED;
        if (how == RUN_END) { m->pos = -1; return ENDED; }
        if (how != RUN_LANDED) { m->in_order = 1; m->pos = where; return ENDED; }
    }
    m->pos = w->end;
    m->next++;
    m->taken = 0;
    if (!early && report(m->pr, m->pos) < 0) { m->st = ST_ERROR; return ENDED; }
    return MERGED;
}

/* run_jobs' hook: merge the ranges done so far, in order, while the later ones run (the
 * slowest range decides when the workers end; the merge of the others need not wait for
 * it). Only once every worker has its copy of the main scanner's tables, which the merge
 * changes; its copies on as many threads as there are cores no worker uses. */
static int merge_early(void *arg)
{
    Merge *m = arg;
    for (int i = 0; i < m->n; i++)
        if (!atomic_load_explicit(&m->workers[i].set_up, memory_order_acquire)) return 0;
    while (m->st == ST_OK && m->next < m->n &&
           atomic_load_explicit(&m->workers[m->next].finished, memory_order_acquire)) {
        int busy = 0;  /* counted before each range: workers end while one is merged */
        for (int i = m->next + 1; i < m->n; i++)
            busy += !atomic_load_explicit(&m->workers[i].finished, memory_order_acquire);
        int step = merge_one(m, 1, m->threads - busy > 1 ? m->threads - busy : 1);
        if (step != MERGED) return m->st == ST_OK ? 0 : -1;
        m->early++;
    }
    return m->st == ST_OK ? 0 : -1;
}

#endif

/* From ``begin`` (after the prefix) to STOP: in parallel where it can, in order where not. */
static int scan_rest(Scanner *s, Reader *r, int fd, int64_t begin, int64_t size, int threads, Progress *pr)
{
    int how;
    int64_t where;
    int n = threads < MAX_WORKERS ? threads : MAX_WORKERS;
    if ((size - begin) / MIN_RANGE < n) n = (int)((size - begin) / MIN_RANGE);
    uint8_t pattern[8];
    int plen = 0;
    if (!HAVE_THREADS || n < 2 || !action_pattern(s, pattern, &plen))
        return run_from(s, r, begin, -1, 0, pr, &how, &where);
#if HAVE_THREADS
    /* plan: a start per range where an entry's bytes are found */
    int64_t starts[MAX_WORKERS];
    int n_starts = 0;
    starts[n_starts++] = begin;
    for (int i = 1; i < n; i++) {
        int64_t nominal = begin + (size - begin) / n * i;
        if (nominal <= starts[n_starts - 1]) continue;
        int64_t found = find_pattern(fd, nominal, nominal + SEARCH_SPAN < size ? nominal + SEARCH_SPAN : size, pattern, plen);
        if (found > starts[n_starts - 1]) starts[n_starts++] = found;
    }
    if (n_starts < 2) return run_from(s, r, begin, -1, 0, pr, &how, &where);
    /* parse: a worker per range */
    int st = prepare_objects(s);
    if (st) return st;
    if (!deferred_chunk) {
        deferred_chunk = malloc(MEMO_CHUNK * sizeof(uint32_t));
        if (!deferred_chunk) return ST_ERROR;
        for (int i = 0; i < MEMO_CHUNK; i++) deferred_chunk[i] = SLOT(SK_DEFERRED, 0);
    }
    int n_chain = n_starts;
    /* on the heap, as the workers are: they may outlive this thread (see run_jobs) */
    atomic_int *cancel = malloc(sizeof *cancel);
    Worker *workers = calloc((size_t)n_chain, sizeof(Worker));
    if (!workers || !cancel) { free(workers); free(cancel); return ST_ERROR; }
    atomic_init(cancel, 0);
    for (int i = 0; i < n_chain; i++)  /* the rest of each setup on the worker's own thread */
        workers[i] = (Worker){.parent = s, .fd = fd, .start = starts[i],
                              .end = i + 1 < n_chain ? starts[i + 1] : size, .cancel = cancel, .last = i + 1 == n_chain};
    s->par_ranges = n_chain;
    s->workers_memo = s->memo_len;  /* the slots every worker reads as the setup finds them */
    double started = now_s();
    Merge m = {s, r, workers, n_chain, threads, pr, 0, begin, 0, 0, 0, ST_OK, 0};
    int jobs = run_jobs(worker_job, workers, sizeof(Worker), n_chain, worker_done, begin, pr, cancel, merge_early, &m);
    double merging = now_s();
    s->par_workers_s = merging - started;
    free(s->par_range_s);
    s->par_range_s = malloc((size_t)n_chain * sizeof(double));
    for (int i = 0; s->par_range_s && i < n_chain; i++) s->par_range_s[i] = workers[i].seconds;
    /* merge, in order, what was not merged while the workers ran; what no worker read is
     * read here, in order */
    if (jobs < 0 && m.st == ST_OK) m.st = ST_ERROR;  /* (a merge's own failure is kept as it was) */
    while (m.st == ST_OK && m.next < n_chain && merge_one(&m, 0, threads) == MERGED) {}
    s->par_merge_s = now_s() - merging;
    for (int i = 0; i < n_chain; i++)
        if (workers[i].s.memo) worker_free(&workers[i]);
    free(workers);
    free(cancel);
    s->par_merged_early = m.early;
    if (m.st || m.pos < 0) return m.st;
    /* the rest (the last range's tail, or everything after a range that did not chain) */
    return run_from(s, r, m.pos, -1, 0, pr, &how, &where);
#endif
}

static PyObject *Scanner_scan_file(Scanner *s, PyObject *args)
{
    int fd, threads;
    long long size;
    PyObject *progress;
    if (!PyArg_ParseTuple(args, "iLiO", &fd, &size, &threads, &progress)) return NULL;
    if (s->done || s->reason || s->offset != 0) {
        PyErr_SetString(PyExc_RuntimeError, "scan_file reads a whole file with a fresh scanner");
        return NULL;
    }
    s->stream_size = size;
    Progress pr = {progress, size, 0};
    Reader r;
    if (reader_open(&r, fd, 0, size) < 0) return PyErr_NoMemory();
    int how = RUN_END;
    int64_t where = 0;
    double started = now_s();
    int st = run_from(s, &r, 0, -1, threads > 1, &pr, &how, &where);
    s->par_prefix_s = now_s() - started;
    if (st == ST_OK && how == RUN_PREFIX) st = scan_rest(s, &r, fd, where, size, threads, &pr);
    reader_close(&r);
    if (st == ST_ERROR) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        return NULL;
    }
    if (st == ST_FAIL || (st == ST_OK && !s->done)) {
        PyObject *exc = Py_BuildValue("(sLO)", s->reason ? s->reason : "the pickle ends before STOP",
                                      (long long)s->reason_at, s->refused ? Py_True : Py_False);
        if (exc) { PyErr_SetObject(Unsupported, exc); Py_DECREF(exc); }
        return NULL;
    }
    /* the stream position after STOP, as feed() leaves it */
    s->offset = s->stop_offset;
    return PyLong_FromLongLong(s->offset);
}

static PyObject *native_parallel_limits(PyObject *self, PyObject *args)
{
    (void)self;
    long long prefix_rows = PREFIX_ROWS, min_range = MIN_RANGE, search_span = SEARCH_SPAN, read_chunk = READ_CHUNK,
              piece_rows = PIECE_ROWS, last_range_delay_us = LAST_RANGE_DELAY_US, max_item = MAX_ITEM;
    if (!PyArg_ParseTuple(args, "|LLLLLLL", &prefix_rows, &min_range, &search_span, &read_chunk, &piece_rows,
                          &last_range_delay_us, &max_item))
        return NULL;
    PyObject *old = Py_BuildValue("(LLLLLLL)", (long long)PREFIX_ROWS, (long long)MIN_RANGE, (long long)SEARCH_SPAN,
                                  (long long)READ_CHUNK, (long long)PIECE_ROWS, (long long)LAST_RANGE_DELAY_US,
                                  (long long)MAX_ITEM);
    PREFIX_ROWS = prefix_rows > 0 ? prefix_rows : 1;
    MIN_RANGE = min_range > 0 ? min_range : 1;
    SEARCH_SPAN = search_span > 0 ? search_span : 1;
    READ_CHUNK = read_chunk > 0 ? (Py_ssize_t)read_chunk : 1;
    PIECE_ROWS = piece_rows > 0 ? piece_rows : 1;
    LAST_RANGE_DELAY_US = last_range_delay_us > 0 && last_range_delay_us < 10 * 1000 * 1000 ? last_range_delay_us : 0;
    MAX_ITEM = max_item > 0 && max_item <= PY_SSIZE_T_MAX / 4 ? (Py_ssize_t)max_item : MAX_ITEM;
    return old;
}
