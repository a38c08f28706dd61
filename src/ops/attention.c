/* attention ops: F.scaled_dot_product_attention (shape/dtype inference and
 * CPU kernel). See ops/registry.h and include/txc/ops.h.
 *
 * Row invariance: every query row's output depends only on its query and
 * the keys and values it sees (its causal / sliding-window prefix, its
 * mask), bit for bit — not on how many rows are in the call or the chunk,
 * the padding of a compiled prefill, the batch, the row's place, decode
 * (one row) versus prefill (many), or the thread count. So a prompt gives
 * the same logits eager and compiled (padded to a power of two), in one
 * prefill or in chunks. The order of every sum is fixed per row:
 *   - keys are cut into blocks of SDPA_KEY_BLOCK at fixed key indices
 *     (0, 128, 256, ...); in each block a row's scores are
 *     txc_kern_attn_scores (each score's arithmetic fixed by its query and
 *     key rows alone), scaled, soft-capped, masked; the block's max m_b,
 *     l_b = sum exp(s - m_b) (txc_kern_exp) and the unnormalised P·V o_b
 *     (the NN GEMM: every element a k-ordered sum, where the keys the row
 *     does not see are exact zeros);
 *   - the blocks are merged in key order with the running rescaling of
 *     flash attention / flash-decoding (Dao et al. 2022, "FlashAttention";
 *     2023, "Flash-Decoding for long-context inference"): with M the max
 *     so far, acc = acc e^(M - m) + o_b when m_b > M, else
 *     acc + e^(m_b - M) o_b, and likewise the sum; out = acc / sum. A row
 *     that sees no key gives zeros, as torch (2.5+) does.
 *
 * For each (batch, kv head) the query rows of the heads that share that kv
 * head (grouped-query attention) are processed together in chunks of up to
 * 32 rows (64 without a causal mask), so K and V rows are read once per
 * chunk, in place with their strides (a static-cache view narrowed to the
 * valid prefix is not copied).
 *
 * Threads: the (batch, kv head) groups are split over the pool, or runs of
 * whole row chunks of a group when there are fewer groups than threads
 * (prefill). Decode (a group's rows in one chunk) over more than one key
 * block is split by (group, block): each task keeps its rows' block
 * pieces, merged afterwards in key order by the same function, so a decode
 * step's few groups still use every thread and the bits are those of the
 * unsplit path. */
#include "ops/kernels.h"
#include "txc/threads.h"

#include <math.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>

#define SHAPE(buf, t) txc_kern_shape_str(buf, sizeof buf, (t)->ndim, (t)->shape)

static txc_status infer_sdpa(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    static const char op[] = "aten::scaled_dot_product_attention";
    char s0[160], s1[160], s2[160];
    if (n_in != 3 && n_in != 4)
        return txc_error(TXC_ERR_INTERNAL, "%s: expected 3 or 4 inputs, got %d", op, n_in);
    const bool by_pos = (a->flags & TXC_ATTR_POSITIONS) != 0;
    const txc_tensor *q = in[0], *k = in[1], *v = in[2], *mask = n_in > 3 && !by_pos ? in[3] : NULL;
    if (by_pos) {
        const txc_tensor *p = n_in > 3 ? in[3] : NULL;
        if (!p || p->ndim != 1 || (p->dtype != TXC_I64 && p->dtype != TXC_I32) || q->ndim != 4 ||
            p->shape[0] != q->shape[2])
            return txc_error(TXC_ERR_INVALID, "txc::causal_attention: cache_position must be an int64 (q_len) "
                                              "tensor matching q's sequence length");
        if ((a->n_ints > 0 && a->ints[0] < 0) || !(a->f[1] >= 0))
            return txc_error(TXC_ERR_INVALID, "txc::causal_attention: sliding_window (%lld) and softcap (%g) must be "
                                              ">= 0", (long long)(a->n_ints > 0 ? a->ints[0] : 0), a->f[1]);
    }
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4)
        return txc_error(TXC_ERR_INVALID,
                         "%s: q, k, v must be 4-D (batch, heads, seq, head_dim); got %s, %s, %s", op, SHAPE(s0, q),
                         SHAPE(s1, k), SHAPE(s2, v));
    if (!txc_dtype_is_float(q->dtype) || !txc_dtype_is_float(k->dtype) || !txc_dtype_is_float(v->dtype))
        return txc_error(TXC_ERR_INVALID, "%s: q, k, v must be float tensors (got %s, %s, %s)", op,
                         txc_dtype_name(q->dtype), txc_dtype_name(k->dtype), txc_dtype_name(v->dtype));
    int64_t B = q->shape[0], Hq = q->shape[1], E = q->shape[3], Hkv = k->shape[1], S = k->shape[2];
    if (k->shape[0] != B || v->shape[0] != B)
        return txc_error(TXC_ERR_INVALID, "%s: batch sizes differ: q %s, k %s, v %s", op, SHAPE(s0, q), SHAPE(s1, k),
                         SHAPE(s2, v));
    if (v->shape[1] != Hkv || v->shape[2] != S)
        return txc_error(TXC_ERR_INVALID, "%s: k %s and v %s must have the same heads and sequence length", op,
                         SHAPE(s0, k), SHAPE(s1, v));
    if (k->shape[3] != E)
        return txc_error(TXC_ERR_INVALID, "%s: q %s and k %s must have the same head_dim", op, SHAPE(s0, q),
                         SHAPE(s1, k));
    if (Hkv == 0 ? Hq != 0 : Hq % Hkv != 0)
        return txc_error(TXC_ERR_INVALID,
                         "%s: the number of query heads (%lld) must be a multiple of the number of key/value heads "
                         "(%lld): q %s, k %s",
                         op, (long long)Hq, (long long)Hkv, SHAPE(s0, q), SHAPE(s1, k));
    if (mask) {
        if (a->flags & TXC_ATTR_CAUSAL)
            return txc_error(TXC_ERR_INVALID, "%s: an explicit attn_mask should not be set when is_causal=True", op);
        if (mask->dtype != TXC_BOOL && !txc_dtype_is_float(mask->dtype))
            return txc_error(TXC_ERR_INVALID, "%s: attn_mask must be bool or float, got %s", op,
                             txc_dtype_name(mask->dtype));
        int64_t target[4] = {B, Hq, q->shape[2], S};
        bool ok = mask->ndim <= 4;
        for (int i = 0; ok && i < mask->ndim; i++) {
            int64_t s = mask->shape[mask->ndim - 1 - i];
            ok = s == 1 || s == target[3 - i];
        }
        if (!ok)
            return txc_error(TXC_ERR_INVALID, "%s: attn_mask %s cannot be broadcast to %s", op, SHAPE(s0, mask),
                             txc_kern_shape_str(s1, sizeof s1, 4, target));
    }
    m->dtype = txc_promote(q->dtype, txc_promote(k->dtype, v->dtype));
    m->ndim = 4;
    m->shape[0] = B;
    m->shape[1] = Hq;
    m->shape[2] = q->shape[2];
    m->shape[3] = v->shape[3];
    return TXC_OK;
}

/* Below this many multiply-adds (scores and P·V) attention runs on the
 * calling thread: waking the pool costs more, and a decode step's attention
 * over a short cache is a few microseconds, while every parallel call waits
 * for the worker's share (measured on 2 cores beside a busy process,
 * smollm2-135m decode at 192 positions: 26-30 tok/s split, 34-37 serial;
 * the same on an idle machine). Tests lower it (txc_kern_set_attention_par_min). */
#define SDPA_PAR_MIN_MACS (1024.0 * 1024)
static _Atomic double sdpa_par_min = SDPA_PAR_MIN_MACS;

void txc_kern_set_attention_par_min(double macs)
{
    atomic_store_explicit(&sdpa_par_min, macs < 0 ? SDPA_PAR_MIN_MACS : macs, memory_order_relaxed);
}

/* What every task of one attention call shares (read only, but nomem). */
typedef struct {
    const txc_tensor *q, *k, *v, *mask;
    txc_tensor *out;
    const int64_t *pos; /* cache_position (by position) or NULL */
    int64_t Hq, L, E, Ev, Hkv, S, G, R, rc, window;
    float softcap, scale;
    bool causal, k_pack, v_pack;
    size_t n_work;             /* scratch bytes of a task */
    int64_t mst[4];            /* the mask's broadcast strides */
    int64_t splits, n_chunks;  /* tasks per group; row chunks per group */
    int64_t n_blocks;          /* split by key blocks: blocks per group (0: not split) */
    float *parts;              /* ...their partial results (part_floats each) */
    size_t part_floats;
    atomic_bool nomem;
} sdpa_ctx;

/* Keys per block: the unit of the softmax's pieces (see the top of this
 * file); blocks start at multiples of it in the key axis. */
#define SDPA_KEY_BLOCK 128
/* Multiply-adds from which a split decode step uses the pool (its tasks,
 * whole key blocks, are balanced). */
#define SDPA_SPLIT_PAR_MIN (64.0 * 1024)

/* Query row i (of the L) sees keys [*st, *lim): all S, or i + 1 (torch's
 * causal), or by position cache_position[i] + 1; with a sliding window
 * from pos[i] + 1 - window. */
static inline void row_keys(const sdpa_ctx *c, int64_t i, int64_t *st, int64_t *lim)
{
    int64_t l = !c->causal ? c->S : c->pos ? c->pos[i] + 1 : i + 1;
    *lim = l < c->S ? l : c->S;
    *st = c->window && c->pos[i] + 1 > c->window ? c->pos[i] + 1 - c->window : 0;
}

/* The keys [*lo, *hi) that some row of r0 .. r0 + nr - 1 sees (the rest
 * of the cache is never read). */
static void chunk_keys(const sdpa_ctx *c, int64_t r0, int64_t nr, int64_t *lo, int64_t *hi)
{
    int64_t a = c->S, e = 0;
    for (int64_t rr = 0; rr < nr; rr++) {
        int64_t st, lim;
        row_keys(c, (r0 + rr) % c->L, &st, &lim);
        a = st < a ? st : a;
        e = lim > e ? lim : e;
    }
    *lo = a, *hi = e;
}

/* One (batch, kv head) group's K and V as the kernels read them: in place,
 * or keys [k_lo, k_hi) packed to float32 rows (an inner stride other than
 * 1) at their own index in kbuf / vbuf. */
typedef struct {
    int64_t b, h;
    const char *K, *V;
    txc_dtype kdt, vdt;
    int64_t ldk, ldv;
} group_kv;

static void group_setup(const sdpa_ctx *c, int64_t g, int64_t k_lo, int64_t k_hi, float *kbuf, float *vbuf,
                        group_kv *o)
{
    const txc_tensor *k = c->k, *v = c->v;
    const size_t ek = txc_dtype_size(k->dtype), ev = txc_dtype_size(v->dtype);
    o->b = g / c->Hkv, o->h = g % c->Hkv;
    const char *kb = (const char *)txc_impl_data(k) + (size_t)(o->b * k->strides[0] + o->h * k->strides[1]) * ek;
    const char *vb = (const char *)txc_impl_data(v) + (size_t)(o->b * v->strides[0] + o->h * v->strides[1]) * ev;
    o->K = kb, o->kdt = k->dtype, o->ldk = k->strides[2];
    o->V = vb, o->vdt = v->dtype, o->ldv = v->strides[2];
    if (c->k_pack) {
        for (int64_t j = k_lo; j < k_hi; j++)
            txc_kern_to_f32(k->dtype, kb + (size_t)(j * k->strides[2]) * ek, k->strides[3], kbuf + j * c->E, c->E);
        o->K = (const char *)kbuf, o->kdt = TXC_F32, o->ldk = c->E;
    }
    if (c->v_pack) {
        for (int64_t j = k_lo; j < k_hi; j++)
            txc_kern_to_f32(v->dtype, vb + (size_t)(j * v->strides[2]) * ev, v->strides[3], vbuf + j * c->Ev, c->Ev);
        o->V = (const char *)vbuf, o->vdt = TXC_F32, o->ldv = c->Ev;
    }
}

/* The query rows r0 .. r0 + nr - 1 of group o (row r: head h*G + r / L,
 * position r % L) as float32 rows of E in qbuf. */
static void load_q(const sdpa_ctx *c, const group_kv *o, int64_t r0, int64_t nr, float *qbuf)
{
    const txc_tensor *q = c->q;
    const char *qp = txc_impl_data(q);
    const size_t eq = txc_dtype_size(q->dtype);
    for (int64_t rr = 0; rr < nr; rr++) {
        int64_t r = r0 + rr, hq = o->h * c->G + r / c->L, i = r % c->L;
        txc_kern_to_f32(q->dtype, qp + (size_t)(o->b * q->strides[0] + hq * q->strides[1] + i * q->strides[2]) * eq,
                        q->strides[3], qbuf + rr * c->E, c->E);
    }
}

/* The piece of key block blk (keys [blk * SDPA_KEY_BLOCK, ...)) of the
 * rows r0 .. r0 + nr - 1 (their queries in qbuf; keys [lo, hi) of the
 * chunk): pm[rr] the largest scaled score of the keys the row sees in the
 * block (-inf: none), pl[rr] the sum of exp(s - pm[rr]) over them, po (nr x
 * Ev) the unnormalised P·V. Every row's numbers depend only on its query,
 * its keys and the block (scores: txc_kern_attn_scores; P·V: the NN
 * kernel's k-ordered sums, whose terms for keys the row does not see are
 * exact zeros), not on the other rows of the chunk. sbuf: nr x
 * SDPA_KEY_BLOCK floats. */
static void block_piece(const sdpa_ctx *c, const group_kv *o, int64_t r0, int64_t nr, int64_t lo, int64_t hi,
                        int64_t blk, const float *qbuf, float *sbuf, float *pm, float *pl, float *po)
{
    const int64_t kb0 = blk * SDPA_KEY_BLOCK, kb1 = kb0 + SDPA_KEY_BLOCK;
    const int64_t a = kb0 > lo ? kb0 : lo, e = kb1 < hi ? kb1 : hi;
    if (a >= e) {
        for (int64_t rr = 0; rr < nr; rr++)
            pm[rr] = -INFINITY;
        return;
    }
    const int64_t n = e - a;
    const txc_tensor *mask = c->mask;
    const char *mp = mask ? txc_impl_data(mask) : NULL;
    const int64_t *mst = c->mst;
    txc_kern_attn_scores(nr, n, c->E, qbuf, c->E, o->K + (size_t)(a * o->ldk) * txc_dtype_size(o->kdt), o->kdt,
                         o->ldk, sbuf, SDPA_KEY_BLOCK);
    bool any = false;
    for (int64_t rr = 0; rr < nr; rr++) {
        int64_t r = r0 + rr, hq = o->h * c->G + r / c->L, i = r % c->L, st, lim;
        row_keys(c, i, &st, &lim);
        float *s = sbuf + rr * SDPA_KEY_BLOCK;
        int64_t j0 = (st > a ? st : a) - a, j1 = (lim < e ? lim : e) - a;
        float mx = -INFINITY;
        if (j1 > j0) {
            for (int64_t j = j0; j < j1; j++)
                s[j] *= c->scale;
            if (c->softcap > 0)
                for (int64_t j = j0; j < j1; j++)
                    s[j] = tanhf(s[j] / c->softcap) * c->softcap;
            if (mask) {
                int64_t mo = o->b * mst[0] + hq * mst[1] + i * mst[2];
                if (mask->dtype == TXC_BOOL) {
                    const uint8_t *mb = (const uint8_t *)mp;
                    for (int64_t j = j0; j < j1; j++)
                        if (!mb[mo + (a + j) * mst[3]])
                            s[j] = -INFINITY;
                } else if (mask->dtype == TXC_F32) {
                    const float *mf = (const float *)mp;
                    for (int64_t j = j0; j < j1; j++)
                        s[j] += mf[mo + (a + j) * mst[3]];
                } else {
                    for (int64_t j = j0; j < j1; j++)
                        s[j] += (float)txc_dtype_load(mask->dtype, mp, (size_t)(mo + (a + j) * mst[3]));
                }
            }
            mx = txc_kern_max(s + j0, j1 - j0, NULL);
        }
        pm[rr] = mx;
        if (mx == -INFINITY) { /* nothing seen in this block: the row's P is zero */
            memset(s, 0, (size_t)n * sizeof(float));
            pl[rr] = 0.0f;
            continue;
        }
        pl[rr] = (float)txc_kern_exp(s + j0, s + j0, j1 - j0, mx);
        memset(s, 0, (size_t)j0 * sizeof(float));
        memset(s + j1, 0, (size_t)(n - j1) * sizeof(float));
        any = true;
    }
    if (any)
        txc_kern_gemm_nn(nr, c->Ev, n, sbuf, SDPA_KEY_BLOCK, o->V + (size_t)(a * o->ldv) * txc_dtype_size(o->vdt),
                         o->vdt, o->ldv, po, c->Ev);
}

/* One row's running softmax state (*M the largest max so far, -inf: none;
 * *Ls the sum; acc[0..ne) the unnormalised output) merged with a block's
 * piece (m, l, o[0..ne)), blocks taken in key order: rescaled to the
 * larger max, as flash-decoding. The same function for every path, so the
 * bits are those of the row alone. */
static void merge_piece(float m, float l, const float *o, int64_t ne, float *M, double *Ls, float *acc)
{
    if (m == -INFINITY)
        return;
    if (*M == -INFINITY) {
        *M = m;
        *Ls = l;
        memcpy(acc, o, (size_t)ne * sizeof(float));
    } else if (m > *M) {
        const float w = expf(*M - m);
        for (int64_t e = 0; e < ne; e++)
            acc[e] = acc[e] * w + o[e];
        *Ls = *Ls * (double)w + (double)l;
        *M = m;
    } else {
        const float w = expf(m - *M);
        for (int64_t e = 0; e < ne; e++)
            acc[e] += w * o[e];
        *Ls += (double)w * (double)l;
    }
}

/* acc = acc / Ls; a row that saw no key gives zeros, as torch (2.5+). */
static void finish_row(float M, double Ls, float *acc, int64_t ne)
{
    if (M == -INFINITY) {
        memset(acc, 0, (size_t)ne * sizeof(float));
        return;
    }
    const float inv = (float)(1.0 / Ls);
    for (int64_t e = 0; e < ne; e++)
        acc[e] *= inv;
}

/* Split by key blocks, task t = (group t / n_blocks, block t % n_blocks):
 * the group's rows (one chunk) over the block, into parts[t]. */
static void split_task(sdpa_ctx *c, int64_t t)
{
    const int64_t g = t / c->n_blocks, blk = t % c->n_blocks, R = c->R;
    float *pm = c->parts + (size_t)t * c->part_floats;
    int64_t lo, hi;
    chunk_keys(c, 0, R, &lo, &hi);
    const int64_t kb0 = blk * SDPA_KEY_BLOCK, kb1 = kb0 + SDPA_KEY_BLOCK;
    const int64_t a = kb0 > lo ? kb0 : lo, e = kb1 < hi ? kb1 : hi;
    float *work = txc_scratch(c->n_work, TXC_SCRATCH_ATTENTION); /* (first: sized at the first call) */
    if (!work) {
        atomic_store(&c->nomem, true);
        return;
    }
    if (a >= e) {
        for (int64_t rr = 0; rr < R; rr++)
            pm[rr] = -INFINITY;
        return;
    }
    float *qbuf = work, *sbuf = qbuf + c->rc * c->E, *kbuf = sbuf + c->rc * SDPA_KEY_BLOCK;
    float *vbuf = kbuf + (c->k_pack ? c->S * c->E : 0);
    group_kv o;
    group_setup(c, g, a, e, kbuf, vbuf, &o);
    load_q(c, &o, 0, R, qbuf);
    block_piece(c, &o, 0, R, lo, hi, blk, qbuf, sbuf, pm, pm + R, pm + 2 * R);
}

/* Task t: group t / splits (batch b, kv head h), its row chunks
 * [n_chunks * part / splits, n_chunks * (part + 1) / splits), each over
 * its key blocks in order. */
static void sdpa_task(void *ctx, int64_t t)
{
    sdpa_ctx *c = ctx;
    if (c->n_blocks) {
        split_task(c, t);
        return;
    }
    const int64_t R = c->R, rc = c->rc, E = c->E, Ev = c->Ev;
    const int64_t g = t / c->splits, part = t % c->splits;
    const int64_t c0 = c->n_chunks * part / c->splits, c1 = c->n_chunks * (part + 1) / c->splits;
    if (c0 >= c1)
        return;
    double *Ls = txc_scratch(c->n_work, TXC_SCRATCH_ATTENTION);
    if (!Ls) {
        atomic_store(&c->nomem, true);
        return;
    }
    float *qbuf = (float *)(Ls + rc), *sbuf = qbuf + rc * E, *kbuf = sbuf + rc * SDPA_KEY_BLOCK;
    float *vbuf = kbuf + (c->k_pack ? c->S * E : 0), *M = vbuf + (c->v_pack ? c->S * Ev : 0);
    float *pm = M + rc, *acc = pm + rc * (2 + Ev);
    group_kv o;
    int64_t glo, ghi;
    chunk_keys(c, c0 * rc, (c1 * rc < R ? c1 * rc : R) - c0 * rc, &glo, &ghi);
    group_setup(c, g, glo, ghi, kbuf, vbuf, &o);
    char *op = txc_impl_data(c->out);
    const size_t eo = txc_dtype_size(c->out->dtype);
    const int64_t out_row0 = (o.b * c->Hq + o.h * c->G) * c->L; /* the group's output rows are contiguous */
    for (int64_t r0 = c0 * rc; r0 < R && r0 < c1 * rc; r0 += rc) {
        const int64_t nr = r0 + rc <= R ? rc : R - r0;
        int64_t lo, hi;
        load_q(c, &o, r0, nr, qbuf);
        chunk_keys(c, r0, nr, &lo, &hi);
        for (int64_t rr = 0; rr < nr; rr++)
            M[rr] = -INFINITY, Ls[rr] = 0;
        for (int64_t blk = lo / SDPA_KEY_BLOCK; blk * SDPA_KEY_BLOCK < hi; blk++) {
            block_piece(c, &o, r0, nr, lo, hi, blk, qbuf, sbuf, pm, pm + nr, pm + 2 * nr);
            for (int64_t rr = 0; rr < nr; rr++)
                merge_piece(pm[rr], pm[nr + rr], pm + 2 * nr + rr * Ev, Ev, &M[rr], &Ls[rr], acc + rr * Ev);
        }
        for (int64_t rr = 0; rr < nr; rr++)
            finish_row(M[rr], Ls[rr], acc + rr * Ev, Ev);
        txc_kern_from_f32(c->out->dtype, acc, op + (size_t)((out_row0 + r0) * Ev) * eo, nr * Ev);
    }
}

/* The output rows of a decode step split by key blocks: each group's
 * pieces merged in key order, as the unsplit path merges them. */
static void merge_blocks(const sdpa_ctx *c, int64_t n_groups)
{
    const int64_t R = c->R, Ev = c->Ev, nb = c->n_blocks;
    txc_tensor *out = c->out;
    char *op = txc_impl_data(out);
    const size_t eo = txc_dtype_size(out->dtype);
    float acc[1024];
    for (int64_t g = 0; g < n_groups; g++) {
        const int64_t b = g / c->Hkv, h = g % c->Hkv, out_row0 = (b * c->Hq + h * c->G) * c->L;
        const float *pg = c->parts + (size_t)(g * nb) * c->part_floats;
        for (int64_t r = 0; r < R; r++)
            for (int64_t e0 = 0; e0 < Ev; e0 += 1024) { /* (head_dim is at most a few hundred) */
                const int64_t ne = Ev - e0 < 1024 ? Ev - e0 : 1024;
                float M = -INFINITY;
                double Ls = 0;
                for (int64_t k = 0; k < nb; k++) {
                    const float *pk = pg + (size_t)k * c->part_floats;
                    merge_piece(pk[r], pk[R + r], pk + 2 * R + r * Ev + e0, ne, &M, &Ls, acc);
                }
                finish_row(M, Ls, acc, ne);
                txc_kern_from_f32(out->dtype, acc, op + (size_t)((out_row0 + r) * Ev + e0) * eo, ne);
            }
    }
}

static txc_status cpu_sdpa(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    const bool by_pos = (a->flags & TXC_ATTR_POSITIONS) != 0;
    const txc_tensor *q = in[0], *k = in[1], *v = in[2], *mask = n_in > 3 && !by_pos ? in[3] : NULL;
    const int64_t B = q->shape[0], Hq = q->shape[1], L = q->shape[2], E = q->shape[3];
    int64_t Hkv = k->shape[1], S = k->shape[2], Ev = v->shape[3];
    const bool causal = (a->flags & TXC_ATTR_CAUSAL) != 0 || by_pos;
    if (out->numel == 0)
        return TXC_OK;
    /* Query row i sees keys [0, lim(i)): i + 1 (torch's causal) or, by
     * position, cache_position[i] + 1. Keys past the largest limit are never
     * read, so a static cache costs what its valid prefix costs. */
    int64_t pos_buf[64], *pos = NULL;
    if (by_pos) {
        const txc_tensor *p = in[3];
        pos = L <= 64 ? pos_buf : txc_scratch(sizeof(int64_t) * (size_t)L, TXC_SCRATCH_POSITIONS);
        if (!pos)
            return txc_error(TXC_ERR_NOMEM, "txc::causal_attention: out of memory");
        for (int64_t i = 0; i < L; i++) {
            int64_t v0 = (int64_t)txc_dtype_load(p->dtype, txc_impl_data(p), (size_t)(i * p->strides[0]));
            if (v0 < 0 || v0 >= S)
                return txc_error(TXC_ERR_CAPACITY, "txc::causal_attention: cache_position %lld is outside the %lld "
                                                   "cached keys", (long long)v0, (long long)S);
            pos[i] = v0;
        }
        int64_t smax = 0;
        for (int64_t i = 0; i < L; i++)
            smax = pos[i] + 1 > smax ? pos[i] + 1 : smax;
        S = smax; /* no row reads further: the rest of the cache is never touched */
    }
    /* causal_attention's sliding window (ints[0] > 0): row i sees keys
     * (pos[i] - window, pos[i]], so keys before the chunk's first window
     * are never read either; tanh soft-capping of the scaled scores with
     * f[1] > 0 (Gemma 2's attn_logit_softcapping). */
    const int64_t window = by_pos && a->n_ints > 0 && a->ints[0] > 0 ? a->ints[0] : 0;
    const float softcap = by_pos && a->f[1] > 0 ? (float)a->f[1] : 0.0f;
    const int64_t G = Hq / Hkv, R = G * L;
    const float scale = isnan(a->f[0]) ? (float)(1.0 / sqrt((double)E)) : (float)a->f[0];

    /* K and V are read in place when their rows have unit inner stride
     * (and K is one of the scores kernel's dtypes, as V the NN kernel's). */
    const bool k_pack = (E > 1 && k->strides[3] != 1) ||
                        (k->dtype != TXC_F32 && k->dtype != TXC_BF16 && k->dtype != TXC_F16);
    const bool v_pack = (Ev > 1 && v->strides[3] != 1) ||
                        (v->dtype != TXC_F32 && v->dtype != TXC_BF16 && v->dtype != TXC_F16);
    /* Scratch is sized by the full key length, not the valid prefix, so a
     * compiled decode step asks for the same bytes at every position (no
     * reallocation as the prefix grows); every thread asks for the same
     * size, so its buffer is sized by the first call. Rows per chunk do
     * not change any row's bits (block_piece), only the reuse of K and V. */
    const int64_t S_alloc = k->shape[2] > S ? k->shape[2] : S;
    int64_t rc = causal ? 32 : 64;
    if (rc > R)
        rc = R;
    const size_t n_floats = (size_t)(rc * 2) /* Ls (doubles) */ + (size_t)(rc * E) + (size_t)(rc * SDPA_KEY_BLOCK) +
                            (size_t)(k_pack ? S_alloc * E : 0) + (size_t)(v_pack ? S_alloc * Ev : 0) + (size_t)rc +
                            (size_t)(rc * (2 + Ev)) + (size_t)(rc * Ev);

    sdpa_ctx c = {.q = q, .k = k, .v = v, .mask = mask, .out = out, .pos = pos, .Hq = Hq, .L = L, .E = E,
                  .Ev = Ev, .Hkv = Hkv, .S = S, .G = G, .R = R, .rc = rc, .window = window, .softcap = softcap,
                  .scale = scale, .causal = causal, .k_pack = k_pack, .v_pack = v_pack,
                  .n_work = n_floats * sizeof(float)};
    if (mask) {
        int64_t target[4] = {B, Hq, L, k->shape[2]};
        txc_broadcast_strides(mask, 4, target, c.mst);
    }
    /* The split: tasks are (batch, kv head) groups, each cut into runs of
     * whole row chunks when there are fewer groups than threads (prefill),
     * or, when a group's rows are one chunk (decode) over more than one key
     * block, (group, key block) pieces merged afterwards. Every output row
     * is computed as the row alone would be: the same bits at any thread
     * count. Small problems stay on this thread. */
    const int64_t n_groups = B * Hkv, n_chunks = R > 0 ? (R + rc - 1) / rc : 0;
    const int threads = txc_threads_get();
    const double macs = (double)B * (double)Hq * (double)L * (double)S * (double)(E + Ev);
    const int64_t nb = (S + SDPA_KEY_BLOCK - 1) / SDPA_KEY_BLOCK;
    if (n_chunks == 1 && nb > 1) {
        /* decode: split by key blocks (see the top of this file); the parts
         * are sized by the full cache, so every step asks the same bytes */
        const int64_t nb_alloc = (S_alloc + SDPA_KEY_BLOCK - 1) / SDPA_KEY_BLOCK;
        c.n_blocks = nb;
        c.n_chunks = 1;
        c.splits = 1;
        c.part_floats = (size_t)(R * (2 + Ev));
        c.parts = txc_scratch((size_t)(n_groups * nb_alloc) * c.part_floats * sizeof(float), TXC_SCRATCH_ATTN_PARTS);
        if (!c.parts)
            return txc_error(TXC_ERR_NOMEM, "aten::scaled_dot_product_attention: out of memory");
        if (threads > 1 && macs >= SDPA_SPLIT_PAR_MIN) {
            /* (static shares: every thread runs a task at every call, so
             * its scratch is sized at the first and nothing is allocated
             * later; the blocks are equal work) */
            txc_parallel_for(n_groups * nb, sdpa_task, &c);
        } else {
            for (int64_t t = 0; t < n_groups * nb; t++)
                sdpa_task(&c, t);
        }
        if (atomic_load(&c.nomem))
            return txc_error(TXC_ERR_NOMEM, "aten::scaled_dot_product_attention: out of memory");
        merge_blocks(&c, n_groups);
        return TXC_OK;
    }
    if (threads > 1 && macs > atomic_load_explicit(&sdpa_par_min, memory_order_relaxed) && n_groups * n_chunks > 1) {
        int64_t splits = n_groups >= threads ? 1 : (threads + n_groups - 1) / n_groups;
        c.splits = splits < n_chunks ? splits : n_chunks;
        c.n_chunks = n_chunks;
        txc_parallel_for(n_groups * c.splits, sdpa_task, &c);
    } else {
        c.splits = 1;
        c.n_chunks = n_chunks;
        for (int64_t t = 0; t < n_groups; t++)
            sdpa_task(&c, t);
    }
    if (atomic_load(&c.nomem))
        return txc_error(TXC_ERR_NOMEM, "aten::scaled_dot_product_attention: out of memory");
    return TXC_OK;
}

void txc_ops_register_attention(txc_op_def *t)
{
    t[TXC_OP_SDPA] = (txc_op_def){.infer = infer_sdpa, .cpu = cpu_sdpa};
    t[TXC_OP_CAUSAL_ATTENTION] = (txc_op_def){.infer = infer_sdpa, .cpu = cpu_sdpa};
}
