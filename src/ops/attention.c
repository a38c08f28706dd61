/* attention ops: F.scaled_dot_product_attention (shape/dtype inference and
 * CPU kernel). See ops/registry.h and include/txc/ops.h.
 *
 * For each (batch, kv head) the query rows of the heads that share that kv
 * head (grouped-query attention) are processed together in chunks of up to
 * 64 rows: scores = Q·Kᵀ (the NT GEMM of linalg.c, reading K rows in place
 * with their strides, so a static-cache view narrowed to the valid prefix
 * is not copied), scale, mask, softmax in float32, then P·V (the NN GEMM,
 * V rows read in place). A fully masked row gives zeros, as torch (2.5+)
 * does.
 *
 * Threads: the (batch, kv head) groups are split over the pool, or runs of
 * whole row chunks of a group when there are fewer groups than threads
 * (prefill); the chunks do not depend on the thread count, so the result
 * is the bits of one thread.
 *
 * Decode (a group's rows in one chunk) over more than SDPA_KEY_BLOCK
 * valid keys is split by key blocks instead, as flash-decoding (Dao et al.
 * 2023, "Flash-Decoding for long-context inference"): each (group, block)
 * task keeps its rows' max score m, sum of exp(s - m) l and unnormalised
 * P·V, and the blocks are merged in order: out = sum_b e^(m_b - M) PV_b /
 * sum_b e^(m_b - M) l_b with M = max_b m_b. A decode step's few groups
 * then still use every thread, and the blocks do not depend on the thread
 * count: the same bits at any. */
#include "ops/kernels.h"
#include "txc/threads.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>

/* softmax over s[0..n) in place; a row with no finite score (everything
 * masked) becomes zeros, as torch. */
static void softmax_row(float *s, int64_t n)
{
    float mx = txc_kern_max(s, n, NULL);
    if (mx == -INFINITY) {
        memset(s, 0, (size_t)n * sizeof(float));
        return;
    }
    float inv = (float)(1.0 / txc_kern_exp(s, s, n, mx));
    for (int64_t j = 0; j < n; j++)
        s[j] *= inv;
}

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
    bool causal, k_pack, v_pack, k_trans;
    size_t nq, ns, no, nk, nv; /* scratch floats: q, scores, out chunks; packed K, V */
    int64_t mst[4];            /* the mask's broadcast strides */
    int64_t splits, n_chunks;  /* tasks per group; row chunks per group */
    int64_t n_blocks;          /* split by key blocks: blocks per group (0: not split) */
    float *parts;              /* ...their partial results (part_floats each) */
    size_t part_floats;
    atomic_bool nomem;
} sdpa_ctx;

/* Keys per block of a decode step split by key blocks. */
#define SDPA_KEY_BLOCK 128
/* Multiply-adds from which a split decode step uses the pool (its tasks,
 * whole key blocks, are balanced). */
#define SDPA_SPLIT_PAR_MIN (64.0 * 1024)

/* Query row i sees keys [0, lim(i)): i + 1 (torch's causal) or, by
 * position, cache_position[i] + 1; with a sliding window from
 * pos[i] + 1 - window. */
#define ROW_LIMIT(i) (pos ? pos[i] + 1 : (i) + 1)
#define ROW_START(i) (window && pos[i] + 1 > window ? pos[i] + 1 - window : 0)

/* Workers free their kernel scratch when they exit. */
static pthread_once_t exit_hook_once = PTHREAD_ONCE_INIT;
static void set_exit_hook(void) { txc_threads_set_worker_exit(txc_scratch_free_all); }

/* Task t: group t / splits (batch b, kv head h), its row chunks
 * [n_chunks * part / splits, n_chunks * (part + 1) / splits). */
static void sdpa_task(void *ctx, int64_t t)
{
    sdpa_ctx *c = ctx;
    const txc_tensor *q = c->q, *k = c->k, *v = c->v, *mask = c->mask;
    txc_tensor *out = c->out;
    const int64_t *pos = c->pos;
    const int64_t Hq = c->Hq, L = c->L, E = c->E, Ev = c->Ev, S = c->S, G = c->G, R = c->R, rc = c->rc;
    const int64_t window = c->window;
    const float softcap = c->softcap, scale = c->scale;
    const bool causal = c->causal, k_pack = c->k_pack, v_pack = c->v_pack, k_trans = c->k_trans;
    const int64_t *mst = c->mst;
    const int64_t nb = c->n_blocks; /* split by key blocks: task t = (group, block) */
    const int64_t g = nb ? t / nb : t / c->splits, part = nb ? 0 : t % c->splits, b = g / c->Hkv, h = g % c->Hkv;
    const int64_t c0 = nb ? 0 : c->n_chunks * part / c->splits, c1 = nb ? 1 : c->n_chunks * (part + 1) / c->splits;
    const int64_t blk = nb ? t % nb : 0;
    if (c0 >= c1)
        return;
    float *work = txc_scratch((c->nq + c->ns + c->no + c->nk + c->nv + 1) * sizeof(float), TXC_SCRATCH_ATTENTION);
    if (!work) {
        atomic_store(&c->nomem, true);
        return;
    }
    float *qbuf = work, *sbuf = qbuf + c->nq, *obuf = sbuf + c->ns, *kbuf = obuf + c->no, *vbuf = kbuf + c->nk;
    const char *qp = txc_impl_data(q), *kp = txc_impl_data(k), *vp = txc_impl_data(v);
    const char *mp = mask ? txc_impl_data(mask) : NULL;
    size_t eq = txc_dtype_size(q->dtype), ek = txc_dtype_size(k->dtype), ev = txc_dtype_size(v->dtype);
    char *op = txc_impl_data(out);
    size_t eo = txc_dtype_size(out->dtype);
    {
            const char *kb = kp + (size_t)(b * k->strides[0] + h * k->strides[1]) * ek;
            const char *vb = vp + (size_t)(b * v->strides[0] + h * v->strides[1]) * ev;
            const void *K = kb, *V = vb;
            txc_dtype kdt = k->dtype, vdt = v->dtype;
            int64_t ldk = k->strides[2], ldv = v->strides[2];
            if (k_pack) {
                for (int64_t j = 0; j < S; j++)
                    txc_kern_to_f32(k->dtype, kb + (size_t)(j * k->strides[2]) * ek, k->strides[3], kbuf + j * E, E);
                K = kbuf, kdt = TXC_F32, ldk = E;
            }
            if (k_trans) {
                for (int64_t j = 0; j < S; j++) {
                    const char *kr = kb + (size_t)(j * k->strides[2]) * ek;
                    if (k->dtype == TXC_F32)
                        for (int64_t e = 0; e < E; e++)
                            kbuf[e * S + j] = ((const float *)kr)[e * k->strides[3]];
                    else
                        for (int64_t e = 0; e < E; e++)
                            kbuf[e * S + j] = (float)txc_dtype_load(k->dtype, kr, (size_t)(e * k->strides[3]));
                }
            }
            if (v_pack) {
                for (int64_t j = 0; j < S; j++)
                    txc_kern_to_f32(v->dtype, vb + (size_t)(j * v->strides[2]) * ev, v->strides[3], vbuf + j * Ev,
                                    Ev);
                V = vbuf, vdt = TXC_F32, ldv = Ev;
            }
            /* output rows of this group are contiguous: heads h*G .. h*G+G-1 */
            int64_t out_row0 = (b * Hq + h * G) * L;
            for (int64_t r0 = c0 * rc; r0 < R && r0 < c1 * rc; r0 += rc) {
                int64_t nr = r0 + rc <= R ? rc : R - r0, Sc = S;
                for (int64_t rr = 0; rr < nr; rr++) {
                    int64_t r = r0 + rr, hq = h * G + r / L, i = r % L;
                    txc_kern_to_f32(q->dtype, qp + (size_t)(b * q->strides[0] + hq * q->strides[1] + i * q->strides[2]) * eq,
                                    q->strides[3], qbuf + rr * E, E);
                }
                if (causal) { /* keys past the last row's limit are never used */
                    int64_t lmax = 0;
                    for (int64_t rr = 0; rr < nr; rr++) {
                        int64_t i = (r0 + rr) % L, lim = ROW_LIMIT(i);
                        lmax = lim > lmax ? lim : lmax;
                    }
                    Sc = lmax < S ? lmax : S;
                }
                int64_t k0 = window ? S : 0; /* keys before the earliest window start are never used */
                for (int64_t rr = 0; window && rr < nr; rr++) {
                    int64_t i = (r0 + rr) % L, st = ROW_START(i);
                    k0 = st < k0 ? st : k0;
                }
                if (nb) { /* this block's keys only */
                    int64_t kb0 = blk * SDPA_KEY_BLOCK, kb1 = kb0 + SDPA_KEY_BLOCK;
                    k0 = kb0 > k0 ? kb0 : k0;
                    Sc = kb1 < Sc ? kb1 : Sc;
                    if (Sc <= k0) { /* no key of the block is seen by these rows */
                        float *pm = c->parts + (size_t)t * c->part_floats;
                        for (int64_t rr = 0; rr < nr; rr++)
                            pm[rr] = -INFINITY;
                        continue;
                    }
                }
                const int64_t nsc = Sc - k0; /* scores of keys [k0, Sc) */
                if (k_trans)
                    txc_kern_gemm_nn(nr, nsc, E, qbuf, E, kbuf + k0, TXC_F32, S, sbuf, nsc);
                else
                    txc_kern_gemm_nt(nr, nsc, E, qbuf, E, (const char *)K + (size_t)(k0 * ldk) * txc_dtype_size(kdt),
                                     kdt, ldk, sbuf, nsc);
                for (int64_t rr = 0; rr < nr; rr++) {
                    int64_t r = r0 + rr, hq = h * G + r / L, i = r % L;
                    float *s = sbuf + rr * nsc;
                    int64_t valid = (causal ? (ROW_LIMIT(i) < Sc ? ROW_LIMIT(i) : Sc) : Sc) - k0;
                    if (window) { /* keys before this row's window: weight 0 */
                        int64_t st = ROW_START(i) - k0;
                        st = st < 0 ? 0 : st > nsc ? nsc : st;
                        memset(s, 0, (size_t)st * sizeof(float));
                        s += st, valid -= st;
                    }
                    valid = valid < 0 ? 0 : valid;
                    for (int64_t j = 0; j < valid; j++)
                        s[j] *= scale;
                    if (softcap > 0)
                        for (int64_t j = 0; j < valid; j++)
                            s[j] = tanhf(s[j] / softcap) * softcap;
                    if (mask) {
                        int64_t mo = b * mst[0] + hq * mst[1] + i * mst[2];
                        if (mask->dtype == TXC_BOOL) {
                            const uint8_t *mb = (const uint8_t *)mp;
                            for (int64_t j = 0; j < Sc; j++)
                                if (!mb[mo + j * mst[3]])
                                    s[j] = -INFINITY;
                        } else if (mask->dtype == TXC_F32) {
                            const float *mf = (const float *)mp;
                            for (int64_t j = 0; j < Sc; j++)
                                s[j] += mf[mo + j * mst[3]];
                        } else {
                            for (int64_t j = 0; j < Sc; j++)
                                s[j] += (float)txc_dtype_load(mask->dtype, mp, (size_t)(mo + j * mst[3]));
                        }
                    }
                    if (nb) { /* the block's max and sum; P·V below stays unnormalised */
                        float *pm = c->parts + (size_t)t * c->part_floats;
                        float mx = valid > 0 ? txc_kern_max(s, valid, NULL) : -INFINITY;
                        pm[rr] = mx;
                        if (mx == -INFINITY)
                            memset(s, 0, (size_t)valid * sizeof(float));
                        else
                            pm[c->R + rr] = (float)txc_kern_exp(s, s, valid, mx);
                    } else {
                        softmax_row(s, valid);
                    }
                    float *row_end = sbuf + (rr + 1) * nsc;
                    if (s + valid < row_end)
                        memset(s + valid, 0, (size_t)(row_end - (s + valid)) * sizeof(float));
                }
                float *o = nb ? c->parts + (size_t)t * c->part_floats + 2 * c->R
                           : out->dtype == TXC_F32 ? (float *)op + (out_row0 + r0) * Ev : obuf;
                txc_kern_gemm_nn(nr, Ev, nsc, sbuf, nsc, (const char *)V + (size_t)(k0 * ldv) * txc_dtype_size(vdt), vdt,
                                 ldv, o, Ev);
                if (!nb && o == obuf)
                    txc_kern_from_f32(out->dtype, obuf, op + (size_t)((out_row0 + r0) * Ev) * eo, nr * Ev);
            }
        }
}

/* The output rows of a decode step split by key blocks: each group's
 * blocks merged in order (their max scores rescaled to the largest). */
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
        for (int64_t r = 0; r < R; r++) {
            float M = -INFINITY;
            for (int64_t k = 0; k < nb; k++)
                M = fmaxf(M, pg[(size_t)k * c->part_floats + (size_t)r]);
            for (int64_t e0 = 0; e0 < Ev; e0 += 1024) { /* (head_dim is at most a few hundred) */
                const int64_t ne = Ev - e0 < 1024 ? Ev - e0 : 1024;
                double l = 0;
                memset(acc, 0, sizeof(float) * (size_t)ne);
                for (int64_t k = 0; M != -INFINITY && k < nb; k++) {
                    const float *pk = pg + (size_t)k * c->part_floats;
                    if (pk[r] == -INFINITY)
                        continue;
                    const float w = expf(pk[r] - M), *o = pk + 2 * R + r * Ev + e0;
                    l += (double)w * (double)pk[R + r];
                    for (int64_t e = 0; e < ne; e++)
                        acc[e] += w * o[e];
                }
                const float inv = l > 0 ? (float)(1.0 / l) : 0.0f; /* no key seen: zeros, as torch */
                for (int64_t e = 0; e < ne; e++)
                    acc[e] *= inv;
                txc_kern_from_f32(out->dtype, acc, op + (size_t)((out_row0 + r) * Ev + e0) * eo, ne);
            }
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

    /* K and V are read in place when their rows have unit inner stride. */
    bool k_pack = E > 1 && k->strides[3] != 1, v_pack = Ev > 1 && v->strides[3] != 1;
    /* Many query rows per kv head (prefill): transpose K once to (E, S) f32
     * so the scores run on the NN kernel (no horizontal sums for short
     * head_dim); few rows (decode): read K in place with the NT kernel. */
    bool k_trans = G * L >= 16 && S > 0;
    if (k_trans)
        k_pack = false;
    /* Scratch is sized by the full key length, not the valid prefix, so a
     * compiled decode step asks for the same bytes at every position (no
     * reallocation as the prefix grows); every thread asks for the same
     * size, so its buffer is sized by the first call. */
    const int64_t S_alloc = k->shape[2] > S ? k->shape[2] : S;
    int64_t rc = S_alloc > 0 ? 262144 / S_alloc : 64;
    rc = rc < 1 ? 1 : rc > (causal ? 32 : 64) ? (causal ? 32 : 64) : rc;
    if (rc > R)
        rc = R;
    size_t nq = (size_t)(rc * E), ns = (size_t)(rc * (S_alloc > 0 ? S_alloc : 1)), no = (size_t)(rc * Ev);
    size_t nk = k_pack || k_trans ? (size_t)(S_alloc * E) : 0, nv = v_pack ? (size_t)(S_alloc * Ev) : 0;

    sdpa_ctx c = {.q = q, .k = k, .v = v, .mask = mask, .out = out, .pos = pos, .Hq = Hq, .L = L, .E = E,
                  .Ev = Ev, .Hkv = Hkv, .S = S, .G = G, .R = R, .rc = rc, .window = window, .softcap = softcap,
                  .scale = scale, .causal = causal, .k_pack = k_pack, .v_pack = v_pack, .k_trans = k_trans,
                  .nq = nq, .ns = ns, .no = no, .nk = nk, .nv = nv};
    if (mask) {
        int64_t target[4] = {B, Hq, L, S};
        txc_broadcast_strides(mask, 4, target, c.mst);
    }
    /* The split: tasks are (batch, kv head) groups, each cut into runs of
     * whole row chunks when there are fewer groups than threads (prefill).
     * The chunks are the serial code's (rc does not depend on the thread
     * count), so every output row is computed by one thread exactly as with
     * one thread: the same bits. Small problems stay on this thread. */
    const int64_t n_groups = B * Hkv, n_chunks = R > 0 ? (R + rc - 1) / rc : 0;
    const int threads = txc_threads_get();
    const double macs = (double)B * (double)Hq * (double)L * (double)S * (double)(E + Ev);
    if (n_chunks == 1 && !k_trans && !mask && S > SDPA_KEY_BLOCK) {
        /* decode: split by key blocks (see the top of this file); the parts
         * are sized by the full cache, so every step asks the same bytes */
        const int64_t nb = (S + SDPA_KEY_BLOCK - 1) / SDPA_KEY_BLOCK;
        const int64_t nb_alloc = (S_alloc + SDPA_KEY_BLOCK - 1) / SDPA_KEY_BLOCK;
        c.n_blocks = nb;
        c.n_chunks = 1;
        c.splits = 1;
        c.part_floats = (size_t)(R * (2 + Ev));
        c.parts = txc_scratch((size_t)(n_groups * nb_alloc) * c.part_floats * sizeof(float), TXC_SCRATCH_ATTN_PARTS);
        if (!c.parts)
            return txc_error(TXC_ERR_NOMEM, "aten::scaled_dot_product_attention: out of memory");
        if (threads > 1 && macs >= SDPA_SPLIT_PAR_MIN) {
            pthread_once(&exit_hook_once, set_exit_hook);
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
        pthread_once(&exit_hook_once, set_exit_hook);
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
