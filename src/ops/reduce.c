/* Reductions (sum, mean, max, argmax) and softmax / log_softmax: shape/dtype
 * inference and CPU kernels. See ops/registry.h.
 *
 * One reduction driver: the input's index space is walked by txc_ops_loop
 * (elementwise.c) with three operands — the input (bytes), the output
 * element (contiguous over the kept dims, 0 over the reduced ones) and the
 * position inside the reduced sub-space (the reverse) — kept dims outside,
 * reduced dims inside, except that a kept dim with unit input stride moves
 * innermost when the reduced dims are strided (sum over dim 0 of a row-major
 * matrix then reads rows, not columns). Each row is loaded as float32 or
 * int64 in chunks and folded into per-output accumulators; a row is either
 * "horizontal" (one output, many reduced positions) or "vertical" (many
 * outputs, one reduced position each). Reduced positions of one output are
 * always visited in increasing order, so argmax keeps the first maximum.
 */
#include "ops/kernels.h"

#include <math.h>
#include <string.h>

#define RED_CHUNK 1024

/* ==== reduced dims and result shape ========================================= */

typedef struct red_dims {
    bool reduced[TXC_MAX_DIMS];
    int64_t nred; /* elements per output */
} red_dims;

static txc_status red_dims_make(txc_op_id op, const txc_tensor *t, const txc_op_attrs *a, red_dims *r,
                                txc_meta *m)
{
    const char *name = txc_op_name(op);
    memset(r->reduced, 0, sizeof r->reduced);
    bool all = a->flags & TXC_ATTR_ALL_DIMS;
    if (all) {
        for (int d = 0; d < t->ndim; d++)
            r->reduced[d] = true;
    } else {
        if (a->n_ints > TXC_MAX_DIMS || a->n_ints < 1)
            return txc_error(TXC_ERR_INVALID, "%s: %d dims given", name, a->n_ints);
        bool seen[TXC_MAX_DIMS] = {false};
        for (int i = 0; i < a->n_ints; i++) {
            int d;
            if (txc_norm_dim(name, a->ints[i], t->ndim, &d) != TXC_OK)
                return TXC_ERR_INVALID;
            if (seen[d])
                return txc_error(TXC_ERR_INVALID, "%s: dim %d appears multiple times in the list of dims", name, d);
            seen[d] = true;
            if (t->ndim > 0)
                r->reduced[d] = true;
        }
    }
    r->nred = 1;
    m->ndim = 0;
    bool keep = a->flags & TXC_ATTR_KEEPDIM;
    for (int d = 0; d < t->ndim; d++) {
        if (r->reduced[d]) {
            r->nred *= t->shape[d];
            if (keep)
                m->shape[m->ndim++] = 1;
        } else {
            m->shape[m->ndim++] = t->shape[d];
        }
    }
    if ((op == TXC_OP_MAX || op == TXC_OP_ARGMAX) && r->nred == 0) {
        if (all)
            return txc_error(TXC_ERR_INVALID, "%s: cannot reduce an empty tensor (%lld elements) over all dims; "
                                              "specify the reduction dim", name, (long long)t->numel);
        return txc_error(TXC_ERR_INVALID, "%s: expected reduction dim %lld to have non-zero size", name,
                         (long long)a->ints[0]);
    }
    return TXC_OK;
}

static txc_status infer_reduce(txc_op_id op, txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    const char *name = txc_op_name(op);
    if (n_in != 1)
        return txc_error(TXC_ERR_INTERNAL, "%s: expected 1 input, got %d", name, n_in);
    txc_dtype d = in[0]->dtype;
    bool fl = txc_dtype_is_float(d);
    switch (op) {
    case TXC_OP_SUM: m->dtype = fl ? d : TXC_I64; break;
    case TXC_OP_MEAN:
        if (!fl)
            return txc_error(TXC_ERR_INVALID,
                             "%s: could not infer output dtype: the input must be a floating point dtype, got %s "
                             "(convert it with txc_to_dtype first, as torch)", name, txc_dtype_name(d));
        m->dtype = d;
        break;
    case TXC_OP_MAX: m->dtype = d; break;
    case TXC_OP_ARGMAX:
        if (d == TXC_BOOL)
            return txc_error(TXC_ERR_INVALID, "%s: does not support bool input (as torch)", name);
        m->dtype = TXC_I64;
        break;
    default: return txc_error(TXC_ERR_INTERNAL, "%s: not a reduction", name);
    }
    red_dims r;
    return red_dims_make(op, in[0], a, &r, m);
}

/* ==== accumulation ============================================================ */

typedef struct red_ctx {
    txc_op_id op;
    const char *base;
    txc_dtype dt;    /* input dtype */
    txc_dtype ct;    /* TXC_F32 or TXC_I64: what rows are loaded as */
    double *accd;    /* sum / mean of floats */
    int64_t *acci;   /* sum of ints (wrapping), max of ints */
    float *bestf;    /* max of floats */
    int64_t *idx;    /* argmax */
} red_ctx;

/* Sum of n floats in double with independent partial sums. */
static double sum_f32(const float *x, int64_t n)
{
    double s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            s[k] += x[i + k];
    for (; i < n; i++)
        s[0] += x[i];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

/* Fold m contiguous values (float or int64 by c->ct) into the outputs:
 * value i goes to output o0 + i*os at reduced position r0 + i*rs. */
static void red_fold(red_ctx *c, const void *vals, int64_t m, int64_t o0, int64_t os, int64_t r0, int64_t rs)
{
    const float *vf = vals;
    const int64_t *vi = vals;
    bool fl = c->ct == TXC_F32;
    switch (c->op) {
    case TXC_OP_SUM:
    case TXC_OP_MEAN:
        if (fl && os == 0)
            c->accd[o0] += sum_f32(vf, m);
        else if (fl)
            for (int64_t i = 0; i < m; i++)
                c->accd[o0 + i * os] += vf[i];
        else if (os == 0) {
            uint64_t s = (uint64_t)c->acci[o0];
            for (int64_t i = 0; i < m; i++)
                s += (uint64_t)vi[i];
            c->acci[o0] = (int64_t)s;
        } else
            for (int64_t i = 0; i < m; i++)
                c->acci[o0 + i * os] = (int64_t)((uint64_t)c->acci[o0 + i * os] + (uint64_t)vi[i]);
        break;
    case TXC_OP_MAX:
    case TXC_OP_ARGMAX: {
        bool want_idx = c->op == TXC_OP_ARGMAX;
        if (fl && os == 0) { /* one output: a vectorisable max, then the index */
            float b = c->bestf[o0];
            if (b != b)
                break;
            bool nan;
            float mx = txc_kern_max(vf, m, &nan);
            int64_t at = -1;
            if (nan) {
                for (at = 0; vf[at] == vf[at]; at++)
                    ;
                c->bestf[o0] = vf[at];
            } else if (mx > b) {
                for (at = 0; vf[at] != mx; at++)
                    ;
                c->bestf[o0] = mx;
            }
            if (at >= 0 && want_idx)
                c->idx[o0] = r0 + at * rs;
            break;
        }
        for (int64_t i = 0; i < m; i++) {
            int64_t o = o0 + i * os;
            bool better;
            if (fl) {
                float b = c->bestf[o], v = vf[i];
                better = b == b && (v != v || v > b); /* NaN is the maximum; first one wins */
                if (better)
                    c->bestf[o] = v;
            } else {
                better = vi[i] > c->acci[o];
                if (better)
                    c->acci[o] = vi[i];
            }
            if (better && want_idx)
                c->idx[o] = r0 + i * rs;
        }
        break;
    }
    default: break;
    }
}

/* Row callback: off/stride: [0] input bytes, [1] output index, [2] reduced index. */
static void red_row(void *vc, const int64_t *off, const int64_t *st, int64_t n)
{
    red_ctx *c = vc;
    _Alignas(64) unsigned char buf[RED_CHUNK * 8];
    bool direct = c->dt == c->ct && st[0] == (int64_t)txc_dtype_size(c->dt);
    for (int64_t i0 = 0; i0 < n; i0 += RED_CHUNK) {
        int64_t m = n - i0 < RED_CHUNK ? n - i0 : RED_CHUNK;
        const char *p = c->base + off[0] + i0 * st[0];
        const void *vals = p;
        if (!direct) {
            txc_ops_convert(c->dt, p, st[0], c->ct, buf, (int64_t)txc_dtype_size(c->ct), m);
            vals = buf;
        }
        red_fold(c, vals, m, off[1] + i0 * st[1], st[1], off[2] + i0 * st[2], st[2]);
    }
}

static txc_status cpu_reduce(txc_op_id op, txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    const txc_tensor *t = in[0];
    red_dims r;
    txc_meta m;
    if (red_dims_make(op, t, a, &r, &m) != TXC_OK)
        return TXC_ERR_INVALID;
    int64_t nout = out->numel;
    if (nout == 0)
        return TXC_OK;
    red_ctx c = {.op = op, .base = txc_impl_data(t), .dt = t->dtype,
                 .ct = txc_dtype_is_float(t->dtype) ? TXC_F32 : TXC_I64};
    bool fl = c.ct == TXC_F32;
    size_t n = (size_t)nout;
    /* accumulators, one per output, in this thread's scratch: doubles
     * (float sums) or int64s, then floats (float max, and the float result
     * of sums), then int64 indices (argmax) */
    bool sums = op == TXC_OP_SUM || op == TXC_OP_MEAN, argmax = op == TXC_OP_ARGMAX;
    size_t n8 = (fl && !sums) ? 0 : n, nf = fl ? (n + 1) & ~(size_t)1 : 0, ni = argmax ? n : 0;
    char *work = txc_scratch(8 * n8 + 4 * nf + 8 * ni, TXC_SCRATCH_REDUCE);
    if (!work)
        return txc_error(TXC_ERR_NOMEM, "%s: out of memory", txc_op_name(op));
    if (fl && sums)
        c.accd = (double *)work;
    else if (!fl)
        c.acci = (int64_t *)work;
    c.bestf = fl ? (float *)(work + 8 * n8) : NULL;
    c.idx = argmax ? (int64_t *)(work + 8 * n8 + 4 * nf) : NULL;
    for (size_t i = 0; i < n; i++) {
        if (c.accd)
            c.accd[i] = 0.0;
        if (fl)
            c.bestf[i] = -INFINITY;
        else
            c.acci[i] = (op == TXC_OP_SUM) ? 0 : INT64_MIN;
        if (c.idx)
            c.idx[i] = 0;
    }

    /* Loop order: kept dims, then reduced dims; a unit-stride kept dim goes
     * innermost when the innermost reduced dim is strided. */
    int nd = t->ndim, order[TXC_MAX_DIMS], k = 0;
    for (int d = 0; d < nd; d++)
        if (!r.reduced[d])
            order[k++] = d;
    for (int d = 0; d < nd; d++)
        if (r.reduced[d])
            order[k++] = d;
    int last_red = -1, unit_kept = -1;
    for (int d = 0; d < nd; d++) {
        if (t->shape[d] <= 1)
            continue;
        if (r.reduced[d])
            last_red = d;
        else if (t->strides[d] == 1)
            unit_kept = d;
    }
    if (unit_kept >= 0 && (last_red < 0 || t->strides[last_red] != 1)) {
        int j = 0;
        for (int i = 0; i < nd; i++)
            if (order[i] != unit_kept)
                order[j++] = order[i];
        order[nd - 1] = unit_kept;
    }
    int64_t ostride[TXC_MAX_DIMS] = {0}, rstride[TXC_MAX_DIMS] = {0}, so = 1, sr = 1;
    for (int d = nd - 1; d >= 0; d--) {
        if (r.reduced[d]) {
            rstride[d] = sr;
            sr *= t->shape[d];
        } else {
            ostride[d] = so;
            so *= t->shape[d];
        }
    }
    int64_t shape[TXC_MAX_DIMS], strides[3][TXC_MAX_DIMS];
    size_t es = txc_dtype_size(t->dtype);
    for (int i = 0; i < nd; i++) {
        int d = order[i];
        shape[i] = t->shape[d];
        strides[0][i] = t->strides[d] * (int64_t)es;
        strides[1][i] = ostride[d];
        strides[2][i] = rstride[d];
    }
    txc_ops_loop(3, nd, shape, (const int64_t(*)[TXC_MAX_DIMS])strides, red_row, &c);

    void *o = txc_impl_data(out);
    switch (op) {
    case TXC_OP_SUM:
    case TXC_OP_MEAN:
        if (fl) {
            double div = op == TXC_OP_MEAN ? (double)r.nred : 1.0;
            for (size_t i = 0; i < n; i++)
                c.bestf[i] = (float)(c.accd[i] / div);
            txc_ops_convert(TXC_F32, c.bestf, 4, out->dtype, o, (int64_t)txc_dtype_size(out->dtype), nout);
        } else {
            txc_ops_convert(TXC_I64, c.acci, 8, out->dtype, o, 8, nout);
        }
        break;
    case TXC_OP_MAX:
        if (fl)
            txc_ops_convert(TXC_F32, c.bestf, 4, out->dtype, o, (int64_t)es, nout);
        else
            txc_ops_convert(TXC_I64, c.acci, 8, out->dtype, o, (int64_t)es, nout);
        break;
    case TXC_OP_ARGMAX: memcpy(o, c.idx, n * sizeof(int64_t)); break;
    default: break;
    }
    return TXC_OK;
}

/* ==== softmax / log_softmax ==================================================== */

typedef struct sm_ctx {
    bool log;
    bool reduced_last; /* f16/bf16 input, dim is the last dim (torch's lastdim kernel) */
    bool reduced_inner; /* f16/bf16 input, another dim */
    const char *in;
    char *out;
    txc_dtype idt, odt;
    int64_t len, in_stride, out_stride; /* along dim; strides in bytes */
    float *row;
} sm_ctx;

/* One row, computed in float32. For f16/bf16 inputs torch's CPU kernels
 * round a few intermediates to the input dtype, and so do we: the last-dim
 * log_softmax rounds the sum of exponentials and its log, the other-dim
 * softmax rounds the exponentials before normalising. */
static void sm_one(const sm_ctx *c, const char *src, char *dst)
{
    float *x = c->row;
    int64_t n = c->len;
    txc_ops_convert(c->idt, src, c->in_stride, TXC_F32, x, 4, n);
    bool nan;
    float mx = txc_kern_max(x, n, &nan);
    if (nan) /* NaN is the maximum: every result is NaN */
        mx = NAN;
    if (c->log) {
        double sum = txc_kern_exp(NULL, x, n, mx);
        float lse = (float)log(sum);
        if (c->reduced_last)
            lse = txc_kern_round_to(c->idt, logf(txc_kern_round_to(c->idt, (float)sum)));
        for (int64_t i = 0; i < n; i++)
            x[i] = x[i] - mx - lse;
    } else {
        double sum = txc_kern_exp(x, x, n, mx);
        float inv = (float)(1.0 / sum);
        if (c->reduced_inner)
            txc_kern_round_through(c->idt, x, n);
        for (int64_t i = 0; i < n; i++)
            x[i] *= inv;
    }
    txc_ops_convert(TXC_F32, x, 4, c->odt, dst, c->out_stride, n);
}

static void sm_row(void *vc, const int64_t *off, const int64_t *st, int64_t n)
{
    const sm_ctx *c = vc;
    for (int64_t i = 0; i < n; i++)
        sm_one(c, c->in + off[0] + i * st[0], c->out + off[1] + i * st[1]);
}

static txc_status infer_softmax_common(txc_op_id op, txc_tensor *const *in, int n_in, const txc_op_attrs *a,
                                       txc_meta *m, int *dim)
{
    const char *name = txc_op_name(op);
    if (n_in != 1)
        return txc_error(TXC_ERR_INTERNAL, "%s: expected 1 input, got %d", name, n_in);
    const txc_tensor *t = in[0];
    if (!txc_dtype_is_float(t->dtype))
        return txc_error(TXC_ERR_INVALID, "%s: not implemented for %s (float inputs only, as torch)", name,
                         txc_dtype_name(t->dtype));
    if (a->n_ints < 1 || (a->flags & TXC_ATTR_ALL_DIMS))
        return txc_error(TXC_ERR_INVALID, "%s: a dim is required", name);
    if (txc_norm_dim(name, a->ints[0], t->ndim, dim) != TXC_OK)
        return TXC_ERR_INVALID;
    m->dtype = t->dtype;
    m->ndim = t->ndim;
    memcpy(m->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    return TXC_OK;
}

static txc_status cpu_softmax_common(txc_op_id op, txc_tensor *out, txc_tensor *const *in, int n_in,
                                     const txc_op_attrs *a)
{
    const txc_tensor *t = in[0];
    txc_meta m;
    int dim;
    if (infer_softmax_common(op, in, n_in, a, &m, &dim) != TXC_OK)
        return TXC_ERR_INVALID;
    if (t->numel == 0)
        return TXC_OK;
    size_t ies = txc_dtype_size(t->dtype), oes = txc_dtype_size(out->dtype);
    int64_t cs[TXC_MAX_DIMS];
    txc_impl_contiguous_strides(out->ndim, out->shape, cs);
    sm_ctx c = {.log = op == TXC_OP_LOG_SOFTMAX, .in = txc_impl_data(t), .out = txc_impl_data(out),
                .idt = t->dtype, .odt = out->dtype, .len = t->ndim ? t->shape[dim] : 1,
                .in_stride = t->ndim ? t->strides[dim] * (int64_t)ies : 0,
                .out_stride = t->ndim ? cs[dim] * (int64_t)oes : 0};
    bool reduced = t->dtype == TXC_F16 || t->dtype == TXC_BF16;
    c.reduced_last = reduced && t->ndim > 0 && dim == t->ndim - 1;
    c.reduced_inner = reduced && t->ndim > 0 && dim != t->ndim - 1;
    c.row = txc_scratch((size_t)c.len * sizeof(float), TXC_SCRATCH_REDUCE);
    if (!c.row)
        return txc_error(TXC_ERR_NOMEM, "%s: out of memory", txc_op_name(op));
    /* Loop over the other dims; each call handles whole rows along dim. */
    txc_ops_loop_rows(t->ndim, t->shape, dim, t->strides, ies, cs, oes, sm_row, &c);
    return TXC_OK;
}

/* ==== registration ================================================================ */

#define RED_DEF(OP)                                                                                    \
    static txc_status infer_##OP(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)   \
    {                                                                                                  \
        return infer_reduce(TXC_OP_##OP, in, n_in, a, m);                                              \
    }                                                                                                  \
    static txc_status cpu_##OP(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a) \
    {                                                                                                  \
        return cpu_reduce(TXC_OP_##OP, out, in, n_in, a);                                              \
    }
#define SM_DEF(OP)                                                                                     \
    static txc_status infer_##OP(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)   \
    {                                                                                                  \
        int dim;                                                                                       \
        return infer_softmax_common(TXC_OP_##OP, in, n_in, a, m, &dim);                                \
    }                                                                                                  \
    static txc_status cpu_##OP(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a) \
    {                                                                                                  \
        return cpu_softmax_common(TXC_OP_##OP, out, in, n_in, a);                                      \
    }

RED_DEF(SUM)
RED_DEF(MEAN)
RED_DEF(MAX)
RED_DEF(ARGMAX)
SM_DEF(SOFTMAX)
SM_DEF(LOG_SOFTMAX)

#define REG(OP) t[TXC_OP_##OP] = (txc_op_def){.infer = infer_##OP, .cpu = cpu_##OP}

void txc_ops_register_reduce(txc_op_def *t)
{
    REG(SUM);
    REG(MEAN);
    REG(MAX);
    REG(ARGMAX);
    REG(SOFTMAX);
    REG(LOG_SOFTMAX);
}
