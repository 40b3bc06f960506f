/* The merge step of the parallel pass (parallel.c): a worker's results become the main
 * scanner's, in the order a scan in order would have made them. With the GIL.
 *
 * Everything that can make a worker unusable is checked before anything is changed (its
 * batches against the real stack, every deferred reference it made); the caller then reads
 * that range in order instead. After the checks, failures are failures of the whole scan. */

#define NOT_RESOLVED (-3)

typedef struct {
    int32_t strid;  /* -1: None */
    int32_t fid;
    int32_t sid;    /* -1: an empty frame list */
    int own_kind;   /* a slot of the worker's own (SK_*), else 0 */
    int32_t own_value;
} Resolved;

/* What each deferred reference of ``w`` stands for, now that every slot before its range is
 * filled: a slot before the range (``base``: the first of its own), or one of its own. A
 * slot of its own holds the worker's ids, mapped when they are used (own_kind/own_value).
 * 0, or -1 when one cannot be used as the worker used it (or only by giving a stack an id
 * out of order). */
static int resolve_deferred(Scanner *s, Worker *w, int64_t base, Resolved *out)
{
    Scanner *ws = &w->s;
    for (Py_ssize_t k = 0; k < w->wm.deferred; k++) {
        int64_t index = VEC_AT(&ws->deferred_index, int64_t, k);
        uint8_t use = VEC_AT(&ws->deferred_use, uint8_t, k);
        Resolved r = {NOT_RESOLVED, NOT_RESOLVED, NOT_RESOLVED, 0, 0};
        if (index < base) {
            uint32_t slot = s->memo[index >> MEMO_CHUNK_BITS][index & (MEMO_CHUNK - 1)];
            uint32_t v = SLOT_VALUE(slot);
            switch (SLOT_KIND(slot)) {
            case SK_STR: r.strid = (int32_t)v; break;
            case SK_STACK: r.sid = (int32_t)v - 1; break;
            case SK_FRAME:
                if (frec_fid(s, (int32_t)v, &r.fid)) return -1;
                break;
            case SK_OBJ: {
                PyObject *obj = VEC_AT(&s->objs, PyObject *, v);
                int32_t conv = VEC_AT(&s->obj_conv, int32_t, v);
                if (obj == Py_None) r.strid = -1;
                else if (PyUnicode_CheckExact(obj)) {
                    if (obj_to_strid(s, s->base, v, &r.strid)) return -1;
                } else if (PyDict_CheckExact(obj) && conv != CONV_UNKNOWN && conv != CONV_BAD) {
                    r.fid = conv;
                } else if (PyList_CheckExact(obj) && conv != CONV_UNKNOWN && conv != CONV_BAD) {
                    r.sid = conv;  /* a list that already has its stack id: no new id out of order */
                }
                break;
            }
            default:
                return -1;
            }
            if ((use & USE_STR) && (r.strid == NOT_RESOLVED || (r.strid == -1 && !(use & USE_NONE)))) return -1;
            if ((use & USE_FRAME) && r.fid < 0) return -1;
            if ((use & USE_LIST) && r.sid == NOT_RESOLVED) return -1;
        } else {  /* one of its own: a slot it filled before it referred to it */
            int64_t j = index - base;
            if (j >= w->wm.own || j >= VEC_AT(&ws->deferred_own, int64_t, k)) return -1;
            uint32_t slot = own_get(ws, j);
            r.own_kind = (int)SLOT_KIND(slot);
            r.own_value = (int32_t)SLOT_VALUE(slot);
            if ((use & USE_STR) && r.own_kind != SK_STR) return -1;
            if ((use & USE_FRAME) && r.own_kind != SK_FRAME) return -1;
            if ((use & USE_LIST) && r.own_kind != SK_STACK) return -1;
        }
        out[k] = r;
    }
    return 0;
}

typedef struct {
    int has_mark;         /* the real stack's top: TRACE, then MARK when set, then entries */
    int64_t entries;
    int64_t appended;     /* entries the worker's batches put in the trace */
} Batches;

/* The real stack's top as Batches: [... TRACE, (MARK), ENTRY x n] of ``trace``. */
static int stack_top(Scanner *s, int32_t trace, Batches *b)
{
    Py_ssize_t i = s->stack.n - 1;
    b->entries = 0;
    b->appended = 0;
    while (i >= 0 && VEC_AT(&s->stack, Item, i).kind == I_ENTRY) {
        if (VEC_AT(&s->stack, Item, i).trace != trace) return -1;
        b->entries++;
        i--;
    }
    b->has_mark = i >= 0 && VEC_AT(&s->stack, Item, i).kind == I_MARK;
    if (b->has_mark) i--;
    return i >= 0 && VEC_AT(&s->stack, Item, i).kind == I_TRACE && VEC_AT(&s->stack, Item, i).trace == trace ? 0 : -1;
}

/* The worker's batches played on the Batches state, as the unpickler would. -1 when they do
 * not fit it (the scan in order would not have read these as entries of one trace). */
static int play_batches(const Worker *w, Batches *b)
{
    int64_t rows = 0;
    for (Py_ssize_t i = 0; i < w->tokens.n; i++) {
        int64_t t = VEC_AT(&w->tokens, int64_t, i);
        if (t > 0) {
            b->entries += t;
            rows += t;
        } else if (t == TOK_MARK) {  /* a dict over entries or over a mark would not be an entry */
            if (b->has_mark || b->entries) return -1;
            b->has_mark = 1;
        } else if (t == TOK_APPENDS) {
            if (!b->has_mark) return -1;
            b->appended += b->entries;
            b->entries = 0;
            b->has_mark = 0;
        } else {  /* TOK_APPEND: one entry straight onto the trace */
            if (b->has_mark || b->entries != 1) return -1;
            b->appended += 1;
            b->entries = 0;
        }
    }
    return rows == w->wm.rows ? 0 : -1;
}

static inline int32_t map_id(int32_t id, Py_ssize_t parents, const int32_t *own)
{
    return id < parents ? id : own[id - parents];
}

/* The maps from the worker's ids to the main scanner's, filled in the order they are needed. */
typedef struct {
    const Worker *w;
    const Resolved *res;
    int32_t *smap, *frmap, *fmap, *stmap, *amap;
    Scanner *s;
} Maps;

static inline int32_t map_str(const Maps *m, int32_t id)
{
    if (id >= 0) return map_id(id, m->w->p_strings, m->smap);
    if (id == -1) return -1;
    const Resolved *r = &m->res[-2 - id];
    return r->own_kind ? map_id(r->own_value, m->w->p_strings, m->smap) : r->strid;
}

static inline int32_t map_fid(const Maps *m, int32_t id)
{
    if (id >= 0) return map_id(id, m->w->p_frames, m->fmap);
    const Resolved *r = &m->res[-2 - id];
    if (!r->own_kind) return r->fid;
    int32_t fid;  /* a frame dict of its own, whose record is merged by now */
    return frec_fid(m->s, map_id(r->own_value, m->w->p_frecs, m->frmap), &fid) ? -1 : fid;
}

static inline int32_t map_sid(const Maps *m, int32_t id)
{
    if (id >= 0) return map_id(id, m->w->p_stacks, m->stmap);
    if (id == -1) return -1;
    const Resolved *r = &m->res[-2 - id];
    if (!r->own_kind) return r->sid;
    int32_t local = r->own_value - 1;  /* SK_STACK holds the stack id + 1 */
    return local < 0 ? -1 : map_id(local, m->w->p_stacks, m->stmap);
}

static int map_local_values(Trace *t, const Maps *m, const Vec *vals, int is_ctx, Vec *out)
{
    for (Py_ssize_t j = 0; j < vals->n; j++) {
        int32_t strid = map_str(m, VEC_AT(vals, int32_t, j));
        int64_t local;
        int r = is_ctx ? local_id(&t->ctx_ids, &t->ctx_vals, strid, &local, &t->last_ctx, &t->last_ctx_local)
                       : local_id(&t->meta_ids, &t->meta_vals, strid, &local, &t->last_meta, &t->last_meta_local);
        if (r || VEC_PUSH(out, int32_t, (int32_t)local)) return -1;
    }
    return 0;
}

/* One column's rows of a worker copied into the trace's: planned (the column made wide and
 * long enough) with the GIL, copied on a thread of its own. */
typedef struct {
    uint8_t *dst;          /* the trace column's data */
    int dst_width;
    int64_t at;            /* the first row the worker's rows go to */
    const uint8_t *src;
    int src_width;         /* 0: plain bytes (the times: 8 bytes a row, copied as they are) */
    int64_t n;
    const int32_t *lut;    /* each value v becomes lut[v + offset], when given */
    int64_t offset;
    /* Taken over (plan_adopt): dst is the worker's own buffer, its rows still at the start;
     * they move up by ``at`` rows and the trace's ``at`` earlier rows, ``front`` (``front_width``
     * bytes each, 0: doubles), are written before them, then ``front`` is freed. */
    int adopted;
    uint8_t *front;
    int front_width;
} ColumnCopy;

/* Plan: dst grows by n rows, wide enough for src's values (or the lut's). */
static int plan_copy(ColumnCopy *c, IntCol *dst, const IntCol *src, int64_t n, const int32_t *lut, int64_t offset,
                     int64_t lut_n)
{
    int width = dst->width;
    if (!lut) {
        if (src->width > width) width = src->width;
    } else {
        for (int64_t i = 0; i < lut_n; i++)
            if (width_of(lut[i]) > width) width = width_of(lut[i]);
    }
    if (intcol_fit(dst, dst->n + n, width)) return -1;
    *c = (ColumnCopy){dst->data, dst->width, dst->n, src->data, src->width, n, lut, offset, 0, NULL, 0};
    dst->n += n;
    return 0;
}

/* Plan the worker's column taken over instead of copied, where that copies less: the trace
 * holds fewer rows than the worker brings (the first range after the few rows read in order)
 * and nothing would widen the worker's values. Its buffer grows (realloc remaps a large
 * block rather than copying it), so the copy is of the trace's rows, not the worker's
 * millions, and no new memory is written for them. The same bytes as plan_copy's. */
static int plan_adopt(ColumnCopy *c, IntCol *dst, IntCol *src, int64_t n)
{
    if (src->n != n || dst->n >= n || src->width < dst->width) return plan_copy(c, dst, src, n, NULL, 0, 0);
    IntCol front = *dst;
    if (intcol_fit(src, front.n + n, src->width)) return -1;
    *c = (ColumnCopy){src->data, src->width, front.n, src->data, src->width, n, NULL, 0, 1, front.data, front.width};
    *dst = (IntCol){src->data, front.n + n, src->cap, src->width};
    *src = (IntCol){NULL, 0, 0, src->width};  /* the trace's now: the worker frees nothing of it */
    return 0;
}

/* plan_adopt for the times (doubles). */
static int plan_adopt_times(ColumnCopy *c, Vec *dst, Vec *src, int64_t n)
{
    if (src->n != n || dst->n >= n) {
        if (vec_reserve(dst, dst->n + n, sizeof(double))) return -1;
        *c = (ColumnCopy){(uint8_t *)dst->data, 8, dst->n, (const uint8_t *)src->data, 0, n, NULL, 0, 0, NULL, 0};
        dst->n += n;
        return 0;
    }
    Vec front = *dst;
    if (vec_reserve(src, front.n + n, sizeof(double))) return -1;
    *c = (ColumnCopy){src->data, 8, front.n, src->data, 0, n, NULL, 0, 1, front.data, 0};
    *dst = (Vec){src->data, front.n + n, src->cap};
    *src = (Vec){NULL, 0, 0};
    return 0;
}

static void run_copy(const ColumnCopy *c)
{
    if (c->adopted) {
        int width = c->dst_width;  /* 8 for the times */
        memmove(c->dst + c->at * width, c->dst, (size_t)c->n * (size_t)width);
        if (!c->front_width) {
            memcpy(c->dst, c->front, (size_t)c->at * 8);
        } else {
            IntCol front = {c->front, c->at, c->at, c->front_width};
            for (int64_t i = 0; i < c->at; i++) intcol_set(c->dst, width, i, intcol_get(&front, i));
        }
        free(c->front);
        return;
    }
    if (!c->src_width) {
        if (c->n) memcpy(c->dst + c->at * 8, c->src, (size_t)c->n * 8);  /* (a worker of no rows has no buffer) */
        return;
    }
    const int64_t n = c->n, offset = c->offset;
    const int32_t *lut = c->lut;
#define COPY(DT, ST)                                                                                  \
    do {                                                                                              \
        const ST *sp = (const ST *)c->src;                                                            \
        DT *dp = (DT *)c->dst + c->at;                                                                \
        if (lut) for (int64_t i = 0; i < n; i++) dp[i] = (DT)lut[(int64_t)sp[i] + offset];            \
        else for (int64_t i = 0; i < n; i++) dp[i] = (DT)sp[i];                                        \
    } while (0)
#define BY_SRC(DT)                                                                                    \
    switch (c->src_width) {                                                                           \
    case 1: COPY(DT, int8_t); break;                                                                  \
    case 2: COPY(DT, int16_t); break;                                                                 \
    case 4: COPY(DT, int32_t); break;                                                                 \
    default: COPY(DT, int64_t); break;                                                                \
    }
    switch (c->dst_width) {
    case 1: BY_SRC(int8_t); break;
    case 2: BY_SRC(int16_t); break;
    case 4: BY_SRC(int32_t); break;
    default: BY_SRC(int64_t); break;
    }
#undef BY_SRC
#undef COPY
}

/* The worker's rows after the trace's, its ids mapped: planned here (the columns grown),
 * copied by the caller, each column on a thread of its own. */
static int plan_rows(Trace *t, Trace *wt, int64_t rows, const Maps *m, const Vec *ctx, const Vec *meta,
                     ColumnCopy copies[9], int32_t **luts)
{
    const Worker *w = m->w;
    Py_ssize_t n_actions = w->wm.actions, n_deferred = w->wm.deferred, n_stacks = w->wm.stacks;
    int64_t stack_off = 1 + n_deferred;  /* stack values: deferred codes (-2 - k), -1, stack ids */
    int32_t *actions = malloc((size_t)(n_actions + 1) * sizeof(int32_t));
    int32_t *stacks = malloc((size_t)(n_stacks + stack_off + 1) * sizeof(int32_t));
    int r = -1;
    if (!actions || !stacks) goto out;
    for (Py_ssize_t a = 0; a < n_actions; a++) actions[a] = map_id((int32_t)a, w->p_actions, m->amap);
    const uint8_t *use = (const uint8_t *)w->s.deferred_use.data;
    for (int64_t v = -stack_off; v < n_stacks; v++)  /* deferred codes used as lists only: the others are no stacks */
        stacks[v + stack_off] = v <= -2 && !(use[-2 - v] & USE_LIST) ? -1 : map_sid(m, (int32_t)v);
    /* The columns whose values are not ids (no lut) can be taken over rather than copied. */
    if (plan_copy(&copies[0], &t->action, &wt->action, rows, actions, 0, n_actions) ||
        plan_adopt(&copies[1], &t->addr, &wt->addr, rows) ||
        plan_adopt(&copies[2], &t->size, &wt->size, rows) ||
        plan_adopt(&copies[3], &t->stream, &wt->stream, rows) ||
        plan_copy(&copies[4], &t->stack, &wt->stack, rows, stacks, stack_off, n_stacks + stack_off) ||
        plan_copy(&copies[5], &t->ctx, &wt->ctx, rows, (const int32_t *)ctx->data, 0, ctx->n) ||
        plan_copy(&copies[6], &t->meta, &wt->meta, rows, (const int32_t *)meta->data, 0, meta->n) ||
        plan_adopt(&copies[7], &t->device_free, &wt->device_free, rows) ||
        plan_adopt_times(&copies[8], &t->time, &wt->time, rows))
        goto out;
    r = 0;
out:
    luts[0] = actions;  /* the caller frees them once the copies are made */
    luts[1] = stacks;
    return r;
}

/* The worker's memo slots j0..j1, its ids mapped, into the main scanner's memo. */
typedef struct {
    const Maps *m;
    Scanner *s;
    const Scanner *ws;
    int64_t base, j0, j1;
    int unexpected;  /* a slot of a kind a worker never makes */
} MemoCopy;

static void translate_memo(MemoCopy *c)
{
    const Maps *m = c->m;
    const Worker *w = m->w;
    for (int64_t j = c->j0; j < c->j1; j++) {
        uint32_t slot = own_get(c->ws, j), v = SLOT_VALUE(slot);
        switch (SLOT_KIND(slot)) {
        case SK_STR: slot = SLOT(SK_STR, map_str(m, (int32_t)v)); break;
        case SK_FRAME: slot = SLOT(SK_FRAME, map_id((int32_t)v, w->p_frecs, m->frmap)); break;
        case SK_STACK: slot = SLOT(SK_STACK, map_sid(m, (int32_t)v - 1) + 1); break;
        case SK_ENTRY: case SK_OPAQUE: break;
        default: c->unexpected = 1; return;
        }
        int64_t i = c->base + j;
        c->s->memo[i >> MEMO_CHUNK_BITS][i & (MEMO_CHUNK - 1)] = slot;
    }
}

/* One piece of a merge that touches nothing another piece touches: a run of a column's
 * rows, or a run of memo slots (cut as PIECE_ROWS says, parallel.c). */
typedef struct {
    int is_memo;
    ColumnCopy copy;
    MemoCopy memo;
} MergePiece;

static void *run_piece(void *arg)
{
    MergePiece *p = arg;
    if (p->is_memo) translate_memo(&p->memo);
    else run_copy(&p->copy);
    return NULL;
}

/* How many pieces of at least PIECE_ROWS, at most ``most``, ``n`` rows are cut into. */
static int64_t pieces_of(int64_t n, int64_t most)
{
    int64_t k = n / PIECE_ROWS;
    if (k > most) k = most;
    return k < 1 ? 1 : k;
}

/* Rows i0..i1 of copy ``c``; 0..n is ``c`` itself (a taken-over column is only taken so,
 * whole: it moves as it is). */
static ColumnCopy copy_part(const ColumnCopy *c, int64_t i0, int64_t i1)
{
    ColumnCopy part = *c;
    part.src = c->src + i0 * (c->src_width ? c->src_width : 8);
    part.at = c->at + i0;
    part.n = i1 - i0;
    return part;
}

/* Merge worker ``w`` into ``s`` (which stands at w->start), its copies on ``threads``
 * threads. *discard: the worker cannot be used, nothing was changed; read its range in
 * order. */
static int merge_worker(Scanner *s, Worker *w, int threads, int *discard)
{
    MergePiece *pieces = NULL;
    Scanner *ws = &w->s;
    *discard = 1;
    int32_t trace;
    Batches b;
    int64_t base = s->memo_len;  /* the range's first slot: every range before it is merged */
    if (stage_flush(s)) return ST_ERROR;  /* the rows read in order before the range's, in their columns */
    if (s->memo_rewrites != w->p_rewrites) return ST_OK;  /* it read a slot written again since: read in order */
    if (w->status != ST_OK || (ws->guess >= 0 && ws->guess != base) || !in_trace(s, &trace) || stack_top(s, trace, &b))
        return ST_OK;
    Batches start = b;
    if (play_batches(w, &b)) return ST_OK;
    Resolved *res = malloc((size_t)(w->wm.deferred ? w->wm.deferred : 1) * sizeof(Resolved));
    if (!res) return ST_ERROR;
    if (resolve_deferred(s, w, base, res)) {
        free(res);
        s->reason = NULL;  /* a conversion that failed here is not the scan's failure */
        s->refused = 0;
        return ST_OK;
    }
    *discard = 0;
    int st = ST_ERROR;
    Py_ssize_t n_str = w->wm.strings - w->p_strings, n_frec = w->wm.frecs - w->p_frecs;
    Py_ssize_t n_fr = w->wm.frames - w->p_frames, n_st = w->wm.stacks - w->p_stacks, n_act = w->wm.actions - w->p_actions;
    Maps m = {w, res, malloc((size_t)(n_str + 1) * sizeof(int32_t)), malloc((size_t)(n_frec + 1) * sizeof(int32_t)),
              malloc((size_t)(n_fr + 1) * sizeof(int32_t)), malloc((size_t)(n_st + 1) * sizeof(int32_t)),
              malloc((size_t)(n_act + 1) * sizeof(int32_t)), s};
    Vec extras = {0}, ctx = {0}, meta = {0};
    if (!m.smap || !m.frmap || !m.fmap || !m.stmap || !m.amap) goto out;
    /* strings, by content (the str is made here: a worker has no GIL) */
    for (Py_ssize_t j = 0; j < n_str; j++) {
        const StrRec *rec = &VEC_AT(&ws->strings.recs, StrRec, w->p_strings + j);
        const char *reason = NULL;
        int32_t id = str_intern(&s->strings, (const char *)ws->strings.arena.data + rec->offset, rec->length, &reason);
        if (id == -2) goto out;
        if (id < 0) { st = scan_fail(s, s->base, reason); goto out; }
        m.smap[j] = id;
    }
    /* frame records: the dicts the worker read; their frame ids are given when first used */
    for (Py_ssize_t j = 0; j < n_frec; j++) {
        FrameRec rec = VEC_AT(&ws->frecs, FrameRec, w->p_frecs + j);
        Py_ssize_t at = s->rec_extras.n;
        for (int32_t e = 0; e < 2 * rec.n_extras; e++)
            if (VEC_PUSH(&s->rec_extras, int32_t, map_str(&m, VEC_AT(&ws->rec_extras, int32_t, rec.extras_at + e))))
                goto out;
        rec.filename = map_str(&m, rec.filename);
        rec.name = map_str(&m, rec.name);
        rec.extras_at = (int32_t)at;
        rec.fid = -1;
        rec.obj = rec.line_obj = NULL;
        m.frmap[j] = (int32_t)s->frecs.n;
        if (VEC_PUSH(&s->frecs, FrameRec, rec)) goto out;
    }
    /* frames and stacks by content, stacks in the order the worker met them */
    for (Py_ssize_t j = 0; j < n_fr; j++) {
        const FrameKey *k = &VEC_AT(&ws->ft.frames, FrameKey, w->p_frames + j);
        extras.n = 0;
        for (int32_t e = 0; e < 2 * k->n_extras; e++)
            if (VEC_PUSH(&extras, int32_t, map_str(&m, VEC_AT(&ws->ft.extras, int32_t, k->extras_at + e)))) goto out;
        int32_t id = frame_intern(&s->ft, map_str(&m, k->filename), k->line, map_str(&m, k->name),
                                  (const int32_t *)extras.data, k->n_extras);
        if (id < 0) goto out;
        m.fmap[j] = id;
    }
    for (Py_ssize_t j = 0; j < n_st; j++) {
        int64_t lo = VEC_AT(&ws->ft.offsets, int64_t, w->p_stacks + j), hi = VEC_AT(&ws->ft.offsets, int64_t, w->p_stacks + j + 1);
        extras.n = 0;
        for (int64_t e = lo; e < hi; e++) {
            int32_t fid = map_fid(&m, VEC_AT(&ws->ft.flat, int32_t, e));
            if (fid < 0 || VEC_PUSH(&extras, int32_t, fid)) goto out;
        }
        int32_t id = stack_intern(&s->ft, (const int32_t *)extras.data, extras.n);
        if (id < 0) goto out;
        m.stmap[j] = id;
    }
    /* action names, in the order the worker met them */
    for (Py_ssize_t j = 0; j < n_act; j++) {
        int32_t strid = map_str(&m, VEC_AT(&ws->actions, int32_t, w->p_actions + j));
        StrRec *rec = &VEC_AT(&s->strings.recs, StrRec, strid);
        if (rec->action < 0) {
            rec->action = (int32_t)s->actions.n;
            if (VEC_PUSH(&s->actions, int32_t, strid)) goto out;
        }
        m.amap[j] = VEC_AT(&s->strings.recs, StrRec, strid).action;
    }
    /* the worker's memo slots, after the ones before its range, and its rows: planned here,
     * then copied at once, each piece on a thread */
    if (w->wm.own && memo_reserve(s, base + w->wm.own)) goto out;
    /* A chunk of the memo that holds the worker's own slots only is taken over as it is (its
     * slots are mapped in place below) rather than copied: at 10M events the slots are
     * about 100 MB, which would otherwise be held twice while the ranges are merged. The
     * main memo's chunk there was reserved just now and never written. */
    if (ws->guess >= 0) {
        int64_t whole_from = (base + MEMO_CHUNK - 1) >> MEMO_CHUNK_BITS, whole_to = (base + w->wm.own) >> MEMO_CHUNK_BITS;
        for (int64_t k = whole_from; k < whole_to; k++) {
            if (!VEC_AT(&ws->memo_own, uint8_t, k)) continue;
            free(s->memo[k]);
            s->memo[k] = ws->memo[k];
            VEC_AT(&ws->memo_own, uint8_t, k) = 0;  /* the main scanner's now: worker_free leaves it */
        }
    }
    if (threads < 1) threads = 1;
    int64_t memo_parts = pieces_of(w->wm.own, 2 * (int64_t)threads), column_parts = pieces_of(w->wm.rows, threads);
    pieces = malloc((size_t)(memo_parts + 9 * column_parts) * sizeof(MergePiece));
    if (!pieces) goto out;
    int n_pieces = 0;
    for (int64_t k = 0; k < memo_parts; k++) {
        int64_t j0 = w->wm.own * k / memo_parts, j1 = w->wm.own * (k + 1) / memo_parts;
        if (j1 > j0) pieces[n_pieces++] = (MergePiece){.is_memo = 1, .memo = {&m, s, ws, base, j0, j1, 0}};
    }
    Trace *t = VEC_AT(&s->traces, Trace *, trace), *wt = VEC_AT(&ws->traces, Trace *, 0);
    ColumnCopy copies[9] = {{0}};
    if (map_local_values(t, &m, &wt->ctx_vals, 1, &ctx) || map_local_values(t, &m, &wt->meta_vals, 0, &meta)) goto out;
    int32_t *luts[2] = {NULL, NULL};
    int planned = plan_rows(t, wt, w->wm.rows, &m, &ctx, &meta, copies, luts);
    if (planned == 0) {
        for (int k = 0; k < 9; k++) {
            int64_t parts = copies[k].adopted ? 1 : pieces_of(copies[k].n, column_parts);
            for (int64_t p = 0; p < parts; p++)
                pieces[n_pieces++] = (MergePiece){
                    .is_memo = 0, .copy = copy_part(&copies[k], copies[k].n * p / parts, copies[k].n * (p + 1) / parts)};
        }
        /* The copies touch no Python object: the GIL is let go meanwhile, so that the
         * command's imports, which the scan runs beside (memtui/load/ahead.py), go on. */
        Py_BEGIN_ALLOW_THREADS
        run_pool(run_piece, pieces, sizeof(MergePiece), n_pieces, threads);
        Py_END_ALLOW_THREADS
    }
    free(luts[0]);
    free(luts[1]);
    if (planned) {  /* out of memory: the scan fails; the trace's rows taken over are let go */
        for (int k = 0; k < 9; k++)
            if (copies[k].adopted) free(copies[k].front);
        goto out;
    }
    for (int k = 0; k < n_pieces; k++)
        if (pieces[k].is_memo && pieces[k].memo.unexpected) {
            st = scan_fail(s, s->base, "a worker's memo slot of an unexpected kind");
            goto out;
        }
    s->memo_len = base + w->wm.own;
    s->rows_total += w->wm.rows;
    if (ws->max_frame_end > s->max_frame_end) s->max_frame_end = ws->max_frame_end;
    /* the batches on the real stack: the entries left open, over their mark */
    s->stack.n -= start.entries + start.has_mark;
    t->appended += b.appended;
    if (b.has_mark && push_item(s, (Item){I_MARK, -1, 0, NULL})) goto out;
    for (int64_t e = b.entries; e > 0; e--)
        if (push_item(s, (Item){I_ENTRY, trace, t->action.n - e, NULL})) goto out;
    st = ST_OK;
out:
    free(pieces);
    free(res); free(m.smap); free(m.frmap); free(m.fmap); free(m.stmap); free(m.amap);
    vec_free(&extras); vec_free(&ctx); vec_free(&meta);
    return st;
}
