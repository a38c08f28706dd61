/* Sampling ops: a counter-based random number generator whose state is a
 * tensor (txc::rng_uniform, txc::rng_advance_) and the draw of the next
 * token from processed logits (txc::sample). See ops/registry.h and
 * include/txc/ops.h.
 *
 * The RNG state is an int64 tensor (2) = [seed, counter]. The numbers are a
 * pure function of (seed, counter + i) — the (counter + i + 1)-th output of
 * splitmix64 seeded with `seed` — so a compiled plan that takes the state as
 * an input and advances it in place (rng_advance_, donated like the static
 * cache) draws exactly what eager code draws from the same state.
 *
 * txc::sample applies transformers' warpers in transformers' order — TopK,
 * TopP, MinP, each on the survivors of the previous one, with
 * min_tokens_to_keep = 1 — then draws by inverse CDF: with u in [0, 1), the
 * first kept token, in vocabulary order, whose cumulative probability
 * exceeds u. The distribution is torch.multinomial's over the warped
 * softmax; torch's own random stream is not reproduced. The kernel allocates
 * nothing per call (per-thread scratch) and does not sort the vocabulary:
 * top-k keeps a heap of k values, top-p sorts only the tokens that can
 * matter (see top_p below). */
#include "ops/registry.h"

#include <math.h>
#include <string.h>

/* A strided row of f32/f16/bf16 as float32. */
static void row_to_f32(txc_dtype dt, const void *src, int64_t stride, float *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = dt == TXC_F32    ? ((const float *)src)[i * stride]
                 : dt == TXC_F16 ? txc_f16_to_f32(((const uint16_t *)src)[i * stride])
                                 : txc_bf16_to_f32(((const uint16_t *)src)[i * stride]);
}

/* ---- the generator ------------------------------------------------------------------------ */

static inline uint64_t splitmix64_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 24 random bits (every value exact in float32). */
static inline float uniform_at(uint64_t seed, uint64_t index)
{
    uint64_t z = splitmix64_mix(seed + (index + 1) * 0x9e3779b97f4a7c15ULL);
    return (float)(z >> 40) * 0x1.0p-24f;
}

static txc_status check_state(const char *op, const txc_tensor *s)
{
    if (s->dtype != TXC_I64 || s->numel != 2)
        return txc_error(TXC_ERR_INVALID, "%s: rng_state must be an int64 tensor of 2 elements [seed, counter], got %s "
                                          "with %lld elements", op, txc_dtype_name(s->dtype), (long long)s->numel);
    return TXC_OK;
}

/* The two elements of a (possibly strided, any-shape) 2-element state. */
static void read_state(const txc_tensor *s, uint64_t *seed, uint64_t *counter)
{
    const int64_t *p = txc_impl_data(s);
    int64_t step = s->ndim ? s->strides[s->ndim - 1] : 1;
    for (int d = 0; d < s->ndim; d++)
        if (s->shape[d] == 2)
            step = s->strides[d];
    *seed = (uint64_t)p[0];
    *counter = (uint64_t)p[step];
}

static txc_status infer_rng_uniform(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    if (n_in != 1)
        return txc_error(TXC_ERR_INTERNAL, "txc::rng_uniform: expected 1 input, got %d", n_in);
    if (check_state("txc::rng_uniform", in[0]) != TXC_OK)
        return TXC_ERR_INVALID;
    if (a->n_ints < 1 || a->ints[0] < 0)
        return txc_error(TXC_ERR_INVALID, "txc::rng_uniform: the count must be >= 0, got %lld",
                         (long long)(a->n_ints ? a->ints[0] : -1));
    m->dtype = TXC_F32;
    m->ndim = 1;
    m->shape[0] = a->ints[0];
    return TXC_OK;
}

static txc_status cpu_rng_uniform(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    uint64_t seed, counter;
    read_state(in[0], &seed, &counter);
    float *o = txc_impl_data(out);
    for (int64_t i = 0; i < out->numel; i++)
        o[i] = uniform_at(seed, counter + (uint64_t)i);
    return TXC_OK;
}

static txc_status infer_rng_advance(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    if (n_in != 1)
        return txc_error(TXC_ERR_INTERNAL, "txc::rng_advance_: expected 1 input, got %d", n_in);
    const txc_tensor *s = in[0];
    if (check_state("txc::rng_advance_", s) != TXC_OK)
        return TXC_ERR_INVALID;
    if (!(a->flags & TXC_ATTR_INPLACE))
        return txc_error(TXC_ERR_INTERNAL, "txc::rng_advance_: only the in-place form exists");
    if (a->n_ints < 1 || a->ints[0] < 0)
        return txc_error(TXC_ERR_INVALID, "txc::rng_advance_: the count must be >= 0, got %lld",
                         (long long)(a->n_ints ? a->ints[0] : -1));
    if (txc_storage_is_readonly(s->array->storage))
        return txc_error(TXC_ERR_INVALID, "txc::rng_advance_: the state is read-only; clone it first");
    m->dtype = s->dtype;
    m->ndim = s->ndim;
    memcpy(m->shape, s->shape, sizeof(int64_t) * (size_t)s->ndim);
    return TXC_OK;
}

static txc_status cpu_rng_advance(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    uint64_t seed, counter;
    read_state(in[0], &seed, &counter); /* out is in[0] itself (eager or in a plan): read first */
    int64_t *o = txc_impl_data(out);
    o[0] = (int64_t)seed;
    o[1] = (int64_t)(counter + (uint64_t)a->ints[0]);
    return TXC_OK;
}

/* ---- sample ------------------------------------------------------------------------------- */

static bool is_float(txc_dtype d) { return d == TXC_F32 || d == TXC_F16 || d == TXC_BF16; }

static txc_status infer_sample(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    if (n_in != 2)
        return txc_error(TXC_ERR_INTERNAL, "txc::sample: expected 2 inputs, got %d", n_in);
    const txc_tensor *l = in[0], *u = in[1];
    if (!is_float(l->dtype) || !(l->ndim == 1 || (l->ndim == 2 && l->shape[0] == 1)) ||
        l->shape[l->ndim - 1] < 1)
        return txc_error(TXC_ERR_INVALID, "txc::sample: logits must be a float tensor of shape (V) or (1, V) with "
                                          "V >= 1 (batch 1), got %s with %d dims",
                         txc_dtype_name(l->dtype), l->ndim);
    if (u->dtype != TXC_F32 || u->numel != 1)
        return txc_error(TXC_ERR_INVALID, "txc::sample: u must be a float32 tensor of 1 element (from rng_uniform)");
    if (a->n_ints < 1 || a->ints[0] < 0)
        return txc_error(TXC_ERR_INVALID, "txc::sample: top_k must be >= 0 (0: off), got %lld",
                         (long long)(a->n_ints ? a->ints[0] : -1));
    if (!(a->f[0] >= 0.0 && a->f[0] <= 1.0))
        return txc_error(TXC_ERR_INVALID, "txc::sample: top_p must be in [0, 1] (1: off), got %g", a->f[0]);
    if (!(a->f[1] >= 0.0 && a->f[1] <= 1.0))
        return txc_error(TXC_ERR_INVALID, "txc::sample: min_p must be in [0, 1] (0: off), got %g", a->f[1]);
    m->dtype = TXC_I64;
    m->ndim = 1;
    m->shape[0] = 1;
    return TXC_OK;
}

/* Heap sort of token ids by key: ascending score, ties broken by descending
 * id (so that among equal scores the lowest id sorts last, i.e. counts as the
 * most probable). No allocation. */
static inline bool before(const float *s, int32_t a, int32_t b) { return s[a] < s[b] || (s[a] == s[b] && a > b); }

static void sift(int32_t *ids, int64_t n, int64_t i, const float *s)
{
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n)
            return;
        if (c + 1 < n && before(s, ids[c], ids[c + 1]))
            c++;
        if (!before(s, ids[i], ids[c]))
            return;
        int32_t t = ids[i];
        ids[i] = ids[c];
        ids[c] = t;
        i = c;
    }
}

static void sort_by_score(int32_t *ids, int64_t n, const float *s)
{
    for (int64_t i = n / 2 - 1; i >= 0; i--)
        sift(ids, n, i, s);
    for (int64_t e = n - 1; e > 0; e--) {
        int32_t t = ids[0];
        ids[0] = ids[e];
        ids[e] = t;
        sift(ids, e, 0, s);
    }
}

static void sort_ids(int32_t *ids, int64_t n)
{
    /* insertion sort for the common short lists, heap sort on ids otherwise */
    if (n <= 64) {
        for (int64_t i = 1; i < n; i++) {
            int32_t v = ids[i];
            int64_t j = i;
            for (; j > 0 && ids[j - 1] > v; j--)
                ids[j] = ids[j - 1];
            ids[j] = v;
        }
        return;
    }
    for (int64_t i = n / 2 - 1; i >= 0; i--)
        for (int64_t r = i;;) {
            int64_t c = 2 * r + 1;
            if (c >= n)
                break;
            if (c + 1 < n && ids[c] < ids[c + 1])
                c++;
            if (ids[r] >= ids[c])
                break;
            int32_t t = ids[r];
            ids[r] = ids[c];
            ids[c] = t;
            r = c;
        }
    for (int64_t e = n - 1; e > 0; e--) {
        int32_t t = ids[0];
        ids[0] = ids[e];
        ids[e] = t;
        for (int64_t r = 0;;) {
            int64_t c = 2 * r + 1;
            if (c >= e)
                break;
            if (c + 1 < e && ids[c] < ids[c + 1])
                c++;
            if (ids[r] >= ids[c])
                break;
            int32_t tt = ids[r];
            ids[r] = ids[c];
            ids[c] = tt;
            r = c;
        }
    }
}

/* exp(s - max) of the candidates into e[] (indexed by token), their sum. */
static double exps(const float *s, const int32_t *cand, int64_t n, float *e)
{
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        mx = s[cand[i]] > mx ? s[cand[i]] : mx;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float v = expf(s[cand[i]] - mx);
        e[cand[i]] = v;
        sum += v;
    }
    return sum;
}

/* TopKLogitsWarper: keep the tokens whose score is >= the k-th largest
 * (ties with it included, as torch's `scores < topk[..., -1]`). The k-th
 * largest comes from a min-heap of k scores. */
static int64_t top_k(const float *s, int32_t *cand, int64_t n, int64_t k, float *heap)
{
    if (k >= n)
        return n;
    int64_t h = 0;
    for (int64_t i = 0; i < n; i++) {
        float v = s[cand[i]];
        if (h < k) { /* push */
            int64_t c = h++;
            while (c > 0 && heap[(c - 1) / 2] > v) {
                heap[c] = heap[(c - 1) / 2];
                c = (c - 1) / 2;
            }
            heap[c] = v;
        } else if (v > heap[0]) { /* replace the root */
            int64_t r = 0;
            for (;;) {
                int64_t c = 2 * r + 1;
                if (c >= h)
                    break;
                if (c + 1 < h && heap[c + 1] < heap[c])
                    c++;
                if (heap[c] >= v)
                    break;
                heap[r] = heap[c];
                r = c;
            }
            heap[r] = v;
        }
    }
    float thr = heap[0];
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (s[cand[i]] >= thr)
            cand[m++] = cand[i];
    return m;
}

/* TopPLogitsWarper: sort ascending, cumulative softmax, remove while the
 * cumulative probability is <= 1 - top_p, always keep the most probable.
 * Tokens with p < (1 - top_p) / n are removed without sorting: together
 * they weigh less than 1 - top_p and they are the smallest, so they form
 * the removed prefix of the ascending order; their mass starts the sum.
 * The cumulative sum runs in double and is compared in float32, as torch's
 * cumsum (double accumulator on CPU) and comparison with a Python float.
 * Returns the survivors, in vocabulary order. */
static int64_t top_p(const float *s, int32_t *cand, int64_t n, double p_keep, float *e)
{
    double sum = exps(s, cand, n, e);
    double cut = (1.0 - p_keep) / (double)n * 0.5;
    double base = 0.0;
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        double p = e[cand[i]] / sum;
        if (p < cut)
            base += (float)(e[cand[i]] / sum);
        else
            cand[m++] = cand[i];
    }
    float thr = (float)(1.0 - p_keep);
    /* rank the rest by score (ascending; equal scores: higher id first) */
    sort_by_score(cand, m, s);
    double cum = base;
    int64_t first = m - 1; /* the most probable always stays */
    for (int64_t i = 0; i < m - 1; i++) {
        cum += (float)(e[cand[i]] / sum);
        if ((float)cum > thr) {
            first = i;
            break;
        }
    }
    int64_t k = m - first;
    memmove(cand, cand + first, sizeof(int32_t) * (size_t)k);
    sort_ids(cand, k);
    return k;
}

/* MinPLogitsWarper: keep tokens with prob >= min_p * max prob (the most
 * probable always passes). */
static int64_t min_p(const float *s, int32_t *cand, int64_t n, double mp, float *e)
{
    double sum = exps(s, cand, n, e);
    float pmax = (float)(1.0 / sum); /* exp(max - max) = 1 */
    float thr = (float)mp * pmax;
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (!((float)(e[cand[i]] / sum) < thr))
            cand[m++] = cand[i];
    return m;
}

static txc_status cpu_sample(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    const txc_tensor *l = in[0];
    int64_t V = l->shape[l->ndim - 1];
    float u = *(const float *)txc_impl_data(in[1]);
    if (V > INT32_MAX)
        return txc_error(TXC_ERR_UNSUPPORTED, "txc::sample: vocabulary of %lld tokens", (long long)V);
    int64_t k = a->ints[0] > 0 && a->ints[0] < V ? a->ints[0] : 0;
    float *s = txc_scratch(sizeof(float) * (size_t)(2 * V + k + 1), TXC_SCRATCH_ROW);
    int32_t *cand = txc_scratch(sizeof(int32_t) * (size_t)V, TXC_SCRATCH_INDEX);
    if (!s || !cand)
        return txc_error(TXC_ERR_NOMEM, "txc::sample: out of memory (%lld tokens)", (long long)V);
    float *e = s + V, *heap = e + V;
    row_to_f32(l->dtype, txc_impl_data(l), l->strides[l->ndim - 1], s, V);

    /* candidates: tokens with a finite (or +inf) score, in vocabulary order */
    int64_t n = 0;
    for (int64_t i = 0; i < V; i++)
        if (s[i] > -INFINITY)
            cand[n++] = (int32_t)i;
    if (n == 0)
        return txc_error(TXC_ERR_INVALID, "txc::sample: every logit is -inf or NaN (nothing to sample)");
    for (int64_t i = 0; i < n; i++)
        if (s[cand[i]] == INFINITY) { /* softmax gives NaN in torch; here the +inf tokens share the mass */
            int64_t m = 0;
            for (int64_t j = 0; j < n; j++)
                if (s[cand[j]] == INFINITY)
                    cand[m++] = cand[j];
            for (int64_t j = 0; j < m; j++)
                s[cand[j]] = 0.0f;
            n = m;
            break;
        }
    if (k > 0)
        n = top_k(s, cand, n, k, heap);
    if (a->f[0] < 1.0 && n > 1)
        n = top_p(s, cand, n, a->f[0], e);
    if (a->f[1] > 0.0 && n > 1)
        n = min_p(s, cand, n, a->f[1], e);

    /* inverse CDF over the survivors, in vocabulary order */
    double total = exps(s, cand, n, e), target = (double)u * total, cum = 0.0;
    int32_t tok = cand[n - 1];
    for (int64_t i = 0; i < n; i++) {
        cum += e[cand[i]];
        if (cum > target) {
            tok = cand[i];
            break;
        }
    }
    *(int64_t *)txc_impl_data(out) = tok;
    return TXC_OK;
}

void txc_ops_register_sample(txc_op_def *t)
{
    t[TXC_OP_RNG_UNIFORM] = (txc_op_def){.infer = infer_rng_uniform, .cpu = cpu_rng_uniform};
    t[TXC_OP_RNG_ADVANCE] = (txc_op_def){.infer = infer_rng_advance, .cpu = cpu_rng_advance};
    t[TXC_OP_SAMPLE] = (txc_op_def){.infer = infer_sample, .cpu = cpu_sample};
}
