/* nn ops: embedding, rms_norm, layer_norm, cat, stack, index_select,
 * index_copy(_), tril, triu — shape/dtype inference and CPU kernels. See
 * ops/registry.h. Inputs are read with any strides; outputs are contiguous
 * (index_copy_ writes into self, contiguous, touching only the indexed
 * slices). */
#include "ops/kernels.h"
#include "ops/quant_impl.h"
#include "txc/threads.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#define SHAPE(buf, t) txc_kern_shape_str(buf, sizeof buf, (t)->ndim, (t)->shape)

/* ---- helpers ------------------------------------------------------------------ */

/* Shape/strides of t without dim d. */
static int drop_dim(const txc_tensor *t, int d, int64_t *shape, int64_t *strides)
{
    int n = 0;
    for (int i = 0; i < t->ndim; i++)
        if (i != d)
            shape[n] = t->shape[i], strides[n++] = t->strides[i];
    return n;
}

/* Element offset of row r (an index over all dims but the last). */
static int64_t row_offset(const txc_tensor *t, int64_t r)
{
    int64_t off = 0;
    for (int d = t->ndim - 2; d >= 0; d--) {
        int64_t s = t->shape[d];
        off += (r % s) * t->strides[d];
        r /= s;
    }
    return off;
}

/* Read a 0/1-d int32/int64 index tensor into int64s (per-thread scratch:
 * valid until the next read_index on this thread; never freed by callers). */
static int64_t *read_index(const txc_tensor *index, int64_t *n)
{
    *n = index->numel;
    int64_t *v = txc_scratch((size_t)(*n > 0 ? *n : 1) * sizeof(int64_t), TXC_SCRATCH_INDEX);
    if (!v)
        return NULL;
    const char *p = txc_impl_data(index);
    int64_t st = index->ndim ? index->strides[0] : 1;
    for (int64_t i = 0; i < *n; i++)
        v[i] = index->dtype == TXC_I64 ? ((const int64_t *)p)[i * st] : ((const int32_t *)p)[i * st];
    return v;
}

static bool is_index_dtype(txc_dtype dt) { return dt == TXC_I32 || dt == TXC_I64; }

/* ---- embedding ------------------------------------------------------------------- */

static txc_status infer_embedding(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    const txc_tensor *w = in[0], *ids = in[1];
    char s[160];
    if (n_in != 2)
        return txc_error(TXC_ERR_INTERNAL, "aten::embedding: expected 2 inputs, got %d", n_in);
    if (w->ndim != 2)
        return txc_error(TXC_ERR_INVALID, "aten::embedding: weight must be 2-D (num_embeddings, dim), got %s",
                         SHAPE(s, w));
    if (!is_index_dtype(ids->dtype))
        return txc_error(TXC_ERR_INVALID, "aten::embedding: ids must be int32 or int64, got %s",
                         txc_dtype_name(ids->dtype));
    if (ids->ndim + 1 > TXC_MAX_DIMS)
        return txc_error(TXC_ERR_INVALID, "aten::embedding: result would have more than %d dims", TXC_MAX_DIMS);
    /* a quantized table (GGUF): its rows dequantized to float32 (ggml_get_rows) */
    m->dtype = txc_dtype_is_quantized(w->dtype) ? TXC_F32 : w->dtype;
    if (txc_dtype_is_quantized(w->dtype) && (w->strides[1] != 1 || w->strides[0] != w->shape[1]))
        return txc_error(TXC_ERR_UNSUPPORTED, "aten::embedding: a %s table must be contiguous rows",
                         txc_dtype_name(w->dtype));
    m->ndim = ids->ndim + 1;
    memcpy(m->shape, ids->shape, sizeof(int64_t) * (size_t)ids->ndim);
    m->shape[ids->ndim] = w->shape[1];
    return TXC_OK;
}

static txc_status cpu_embedding(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    const txc_tensor *w = in[0], *ids = in[1];
    int64_t rows = w->shape[0], D = w->shape[1], idx[TXC_MAX_DIMS] = {0};
    size_t es = txc_dtype_size(w->dtype);
    const char *wp = txc_impl_data(w), *ip = txc_impl_data(ids);
    char *op = txc_impl_data(out);
    for (int64_t i = 0; i < ids->numel; i++) {
        int64_t off = 0;
        for (int d = 0; d < ids->ndim; d++)
            off += idx[d] * ids->strides[d];
        int64_t id = ids->dtype == TXC_I64 ? ((const int64_t *)ip)[off] : ((const int32_t *)ip)[off];
        if (id < 0 || id >= rows)
            return txc_error(TXC_ERR_INVALID, "aten::embedding: id %lld out of range for a table of %lld rows",
                             (long long)id, (long long)rows);
        if (txc_dtype_is_quantized(w->dtype) && txc_quant_weight_il(w) < 0)
            return txc_error(TXC_ERR_UNSUPPORTED, "aten::embedding: a view of part of a repacked %s table",
                             txc_dtype_name(w->dtype));
        if (txc_dtype_is_quantized(w->dtype))
            txc_quant_rows_il(w->dtype, wp, rows, txc_quant_weight_il(w), D, id, (float *)op + i * D);
        else
            txc_ops_convert(w->dtype, wp + (size_t)(id * w->strides[0]) * es, w->strides[1] * (int64_t)es, w->dtype,
                            op + (size_t)(i * D) * es, (int64_t)es, D);
        txc_kern_next_index(idx, ids->ndim, ids->shape);
    }
    return TXC_OK;
}

/* ---- rms_norm / layer_norm ---------------------------------------------------------- */

static txc_status check_norm_param(const char *op, const char *what, const txc_tensor *x, const txc_tensor *p)
{
    char sx[160], sp[160];
    if (!txc_dtype_is_float(p->dtype))
        return txc_error(TXC_ERR_INVALID, "%s: %s must be a float tensor, got %s", op, what, txc_dtype_name(p->dtype));
    if (p->ndim != 1 || p->shape[0] != x->shape[x->ndim - 1])
        return txc_error(TXC_ERR_INVALID, "%s: %s %s does not match the last dim of the input %s", op, what,
                         SHAPE(sp, p), SHAPE(sx, x));
    return TXC_OK;
}

static txc_status infer_rms_norm(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    bool has_w = !(a->flags & TXC_ATTR_NO_WEIGHT);
    const txc_tensor *x = in[0];
    if (n_in != (has_w ? 2 : 1))
        return txc_error(TXC_ERR_INTERNAL, "aten::rms_norm: expected %d inputs, got %d", has_w ? 2 : 1, n_in);
    if (!txc_dtype_is_float(x->dtype) || x->ndim < 1)
        return txc_error(TXC_ERR_INVALID, "aten::rms_norm: input must be a float tensor with at least 1 dim (got %s, %d-d)",
                         txc_dtype_name(x->dtype), x->ndim);
    m->dtype = x->dtype;
    if (has_w) {
        if (check_norm_param("aten::rms_norm", "weight", x, in[1]) != TXC_OK)
            return TXC_ERR_INVALID;
        m->dtype = txc_promote(x->dtype, in[1]->dtype);
    }
    m->ndim = x->ndim;
    memcpy(m->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    return TXC_OK;
}

/* Rows [r0, r1) of rms_norm: x's rows through buf (D floats), wv the
 * weight as float32 or NULL. */
static void rms_norm_rows(const txc_tensor *x, txc_tensor *out, const float *wv, float eps, int64_t D, float *buf,
                          int64_t r0, int64_t r1)
{
    const char *xp = txc_impl_data(x);
    size_t es = txc_dtype_size(x->dtype), eo = txc_dtype_size(out->dtype);
    for (int64_t r = r0; r < r1; r++) {
        txc_kern_to_f32(x->dtype, xp + (size_t)row_offset(x, r) * es, x->strides[x->ndim - 1], buf, D);
        double ss = 0.0;
        for (int64_t i = 0; i < D; i++) {
            float sq = buf[i] * buf[i];
            ss += sq;
        }
        float var = (float)(ss / (double)D);
        float rs = 1.0f / sqrtf(var + eps);
        for (int64_t i = 0; i < D; i++) {
            float h = txc_kern_round_to(x->dtype, buf[i] * rs); /* hidden.to(input_dtype) */
            buf[i] = wv ? wv[i] * h : h;
        }
        txc_kern_from_f32(out->dtype, buf, (char *)txc_impl_data(out) + (size_t)(r * D) * eo, D);
    }
}

typedef struct rms_job {
    const txc_tensor *x;
    txc_tensor *out;
    const float *wv;
    float eps;
    int64_t D, rows, chunk;
    _Atomic int failed;
} rms_job;

static void rms_task(void *ctx, int64_t t)
{
    rms_job *j = ctx;
    /* this thread's NORM slot: D floats of row (on the calling thread the
     * slot's first half: the weight is in its second) */
    float *buf = txc_scratch((size_t)j->D * 2 * sizeof(float), TXC_SCRATCH_NORM);
    if (!buf) {
        atomic_store(&j->failed, 1);
        return;
    }
    int64_t r0 = t * j->chunk, r1 = r0 + j->chunk < j->rows ? r0 + j->chunk : j->rows;
    rms_norm_rows(j->x, j->out, j->wv, j->eps, j->D, buf, r0, r1);
}

/* Elements from which rms_norm's rows are split over the threads (each row
 * as alone: the split does not change a value). */
#define RMS_PAR_MIN (64 * 1024)

static txc_status cpu_rms_norm(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    const txc_tensor *x = in[0], *w = n_in > 1 ? in[1] : NULL;
    int64_t D = x->shape[x->ndim - 1];
    if (out->numel == 0)
        return TXC_OK;
    int64_t rows = x->numel / D;
    float *buf = txc_scratch((size_t)D * 2 * sizeof(float), TXC_SCRATCH_NORM);
    if (!buf)
        return txc_error(TXC_ERR_NOMEM, "aten::rms_norm: out of memory");
    float *wv = buf + D;
    if (w)
        txc_kern_to_f32(w->dtype, txc_impl_data(w), w->strides[0], wv, D);
    float eps = (float)a->f[0];
    const int threads = txc_threads_get();
    if (threads < 2 || rows < 2 || x->numel < RMS_PAR_MIN) {
        rms_norm_rows(x, out, w ? wv : NULL, eps, D, buf, 0, rows);
        return TXC_OK;
    }
    rms_job j = {x, out, w ? wv : NULL, eps, D, rows, 0, 0};
    const int64_t tasks = 4 * (int64_t)threads;
    j.chunk = (rows + tasks - 1) / tasks;
    txc_parallel_for_dynamic((rows + j.chunk - 1) / j.chunk, rms_task, &j);
    if (atomic_load(&j.failed))
        return txc_error(TXC_ERR_NOMEM, "aten::rms_norm: out of memory");
    return TXC_OK;
}

static txc_status layer_norm_params(txc_tensor *const *in, int n_in, const txc_op_attrs *a, const txc_tensor **w,
                                    const txc_tensor **b)
{
    int k = 1;
    *w = (a->flags & TXC_ATTR_NO_WEIGHT) ? NULL : (k < n_in ? in[k++] : NULL);
    *b = (a->flags & TXC_ATTR_NO_BIAS) ? NULL : (k < n_in ? in[k++] : NULL);
    int want = 1 + !(a->flags & TXC_ATTR_NO_WEIGHT) + !(a->flags & TXC_ATTR_NO_BIAS);
    if (n_in != want)
        return txc_error(TXC_ERR_INTERNAL, "aten::layer_norm: expected %d inputs, got %d", want, n_in);
    return TXC_OK;
}

static txc_status infer_layer_norm(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    const txc_tensor *x = in[0], *w, *b;
    if (layer_norm_params(in, n_in, a, &w, &b) != TXC_OK)
        return TXC_ERR_INTERNAL;
    if (!txc_dtype_is_float(x->dtype) || x->ndim < 1)
        return txc_error(TXC_ERR_INVALID,
                         "aten::layer_norm: input must be a float tensor with at least 1 dim (got %s, %d-d)",
                         txc_dtype_name(x->dtype), x->ndim);
    if (w && check_norm_param("aten::layer_norm", "weight", x, w) != TXC_OK)
        return TXC_ERR_INVALID;
    if (b && check_norm_param("aten::layer_norm", "bias", x, b) != TXC_OK)
        return TXC_ERR_INVALID;
    m->dtype = x->dtype;
    m->ndim = x->ndim;
    memcpy(m->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    return TXC_OK;
}

static txc_status cpu_layer_norm(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    const txc_tensor *x = in[0], *w, *b;
    layer_norm_params(in, n_in, a, &w, &b);
    int64_t D = x->shape[x->ndim - 1];
    if (out->numel == 0)
        return TXC_OK;
    int64_t rows = x->numel / D;
    float *buf = txc_scratch((size_t)D * 3 * sizeof(float), TXC_SCRATCH_NORM);
    if (!buf)
        return txc_error(TXC_ERR_NOMEM, "aten::layer_norm: out of memory");
    float *wv = buf + D, *bv = buf + 2 * D;
    if (w)
        txc_kern_to_f32(w->dtype, txc_impl_data(w), w->strides[0], wv, D);
    if (b)
        txc_kern_to_f32(b->dtype, txc_impl_data(b), b->strides[0], bv, D);
    const char *xp = txc_impl_data(x);
    size_t es = txc_dtype_size(x->dtype), eo = txc_dtype_size(out->dtype);
    for (int64_t r = 0; r < rows; r++) {
        txc_kern_to_f32(x->dtype, xp + (size_t)row_offset(x, r) * es, x->strides[x->ndim - 1], buf, D);
        double s = 0.0, sq = 0.0;
        for (int64_t i = 0; i < D; i++)
            s += buf[i];
        double mean = s / (double)D;
        for (int64_t i = 0; i < D; i++) {
            double d = buf[i] - mean;
            sq += d * d;
        }
        double rstd = 1.0 / sqrt(sq / (double)D + a->f[0]);
        for (int64_t i = 0; i < D; i++) {
            double y = (buf[i] - mean) * rstd;
            if (w)
                y *= wv[i];
            if (b)
                y += bv[i];
            buf[i] = (float)y;
        }
        txc_kern_from_f32(out->dtype, buf, (char *)txc_impl_data(out) + (size_t)(r * D) * eo, D);
    }
    return TXC_OK;
}

/* ---- cat / stack ------------------------------------------------------------------------ */

static bool cat_skipped(const txc_tensor *t) { return t->ndim == 1 && t->shape[0] == 0; }

static txc_status infer_cat(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    char s0[160], s1[160];
    if (n_in < 1)
        return txc_error(TXC_ERR_INVALID, "aten::cat: expected a non-empty list of tensors");
    txc_dtype dt = in[0]->dtype;
    for (int i = 1; i < n_in; i++)
        dt = txc_promote(dt, in[i]->dtype);
    int ref = -1;
    for (int i = 0; i < n_in; i++) {
        if (in[i]->ndim == 0)
            return txc_error(TXC_ERR_INVALID, "aten::cat: zero-dimensional tensor (at position %d) cannot be concatenated",
                             i);
        if (ref < 0 && !cat_skipped(in[i]))
            ref = i;
    }
    m->dtype = dt;
    if (ref < 0) { /* only 1-D empty tensors */
        int d;
        if (txc_norm_dim("aten::cat", a->ints[0], 1, &d) != TXC_OK)
            return TXC_ERR_INVALID;
        m->ndim = 1;
        m->shape[0] = 0;
        return TXC_OK;
    }
    const txc_tensor *r = in[ref];
    int d;
    if (txc_norm_dim("aten::cat", a->ints[0], r->ndim, &d) != TXC_OK)
        return TXC_ERR_INVALID;
    m->ndim = r->ndim;
    memcpy(m->shape, r->shape, sizeof(int64_t) * (size_t)r->ndim);
    m->shape[d] = 0;
    for (int i = 0; i < n_in; i++) {
        const txc_tensor *t = in[i];
        if (cat_skipped(t))
            continue;
        if (t->ndim != r->ndim)
            return txc_error(TXC_ERR_INVALID,
                             "aten::cat: tensors must have the same number of dims: tensor %d is %s, tensor %d is %s",
                             ref, SHAPE(s0, r), i, SHAPE(s1, t));
        for (int j = 0; j < r->ndim; j++)
            if (j != d && t->shape[j] != r->shape[j])
                return txc_error(TXC_ERR_INVALID,
                                 "aten::cat: sizes of tensors must match except in dimension %d: tensor %d is %s, "
                                 "tensor %d is %s",
                                 d, ref, SHAPE(s0, r), i, SHAPE(s1, t));
        m->shape[d] += t->shape[d];
    }
    return TXC_OK;
}

static txc_status cpu_cat(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    if (out->numel == 0)
        return TXC_OK;
    int d;
    txc_norm_dim("aten::cat", a->ints[0], out->ndim, &d);
    char *op = txc_impl_data(out);
    size_t eo = txc_dtype_size(out->dtype);
    int64_t pos = 0;
    for (int i = 0; i < n_in; i++) {
        const txc_tensor *t = in[i];
        if (cat_skipped(t))
            continue;
        txc_kern_copy(t->ndim, t->shape, txc_impl_data(t), t->dtype, t->strides,
                      op + (size_t)(pos * out->strides[d]) * eo, out->dtype, out->strides);
        pos += t->shape[d];
    }
    return TXC_OK;
}

static txc_status infer_stack(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    char s0[160], s1[160];
    if (n_in < 1)
        return txc_error(TXC_ERR_INVALID, "aten::stack: expected a non-empty list of tensors");
    const txc_tensor *r = in[0];
    if (r->ndim + 1 > TXC_MAX_DIMS)
        return txc_error(TXC_ERR_INVALID, "aten::stack: result would have more than %d dims", TXC_MAX_DIMS);
    int d;
    if (txc_norm_dim("aten::stack", a->ints[0], r->ndim + 1, &d) != TXC_OK)
        return TXC_ERR_INVALID;
    txc_dtype dt = r->dtype;
    for (int i = 1; i < n_in; i++) {
        const txc_tensor *t = in[i];
        bool same = t->ndim == r->ndim;
        for (int j = 0; same && j < r->ndim; j++)
            same = t->shape[j] == r->shape[j];
        if (!same)
            return txc_error(TXC_ERR_INVALID, "aten::stack: stack expects each tensor to be equal size, but got %s at "
                                              "entry 0 and %s at entry %d",
                             SHAPE(s0, r), SHAPE(s1, t), i);
        dt = txc_promote(dt, t->dtype);
    }
    m->dtype = dt;
    m->ndim = r->ndim + 1;
    for (int j = 0, k = 0; j < m->ndim; j++)
        m->shape[j] = j == d ? n_in : r->shape[k++];
    return TXC_OK;
}

static txc_status cpu_stack(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    if (out->numel == 0)
        return TXC_OK;
    int d;
    txc_norm_dim("aten::stack", a->ints[0], out->ndim, &d);
    int64_t dshape[TXC_MAX_DIMS], dstr[TXC_MAX_DIMS];
    drop_dim(out, d, dshape, dstr);
    char *op = txc_impl_data(out);
    size_t eo = txc_dtype_size(out->dtype);
    for (int i = 0; i < n_in; i++) {
        const txc_tensor *t = in[i];
        txc_kern_copy(t->ndim, t->shape, txc_impl_data(t), t->dtype, t->strides,
                      op + (size_t)(i * out->strides[d]) * eo, out->dtype, dstr);
    }
    return TXC_OK;
}

/* ---- index_select / index_copy ------------------------------------------------------------ */

static txc_status check_index(const char *op, const txc_tensor *index)
{
    if (!is_index_dtype(index->dtype))
        return txc_error(TXC_ERR_INVALID, "%s: index must be int32 or int64, got %s", op, txc_dtype_name(index->dtype));
    if (index->ndim > 1)
        return txc_error(TXC_ERR_INVALID, "%s: index must be 0-D or 1-D, got %d-D", op, index->ndim);
    return TXC_OK;
}

static txc_status infer_index_select(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    const txc_tensor *t = in[0], *index = in[1];
    int d;
    if (n_in != 2)
        return txc_error(TXC_ERR_INTERNAL, "aten::index_select: expected 2 inputs, got %d", n_in);
    if (check_index("aten::index_select", index) != TXC_OK ||
        txc_norm_dim("aten::index_select", a->ints[0], t->ndim, &d) != TXC_OK)
        return TXC_ERR_INVALID;
    m->dtype = t->dtype;
    m->ndim = t->ndim;
    memcpy(m->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    if (t->ndim == 0) {
        if (index->numel != 1)
            return txc_error(TXC_ERR_INVALID, "aten::index_select: a 0-d tensor takes exactly one index, got %lld",
                             (long long)index->numel);
    } else {
        m->shape[d] = index->numel;
    }
    return TXC_OK;
}

/* Validate indices against a dim size (no negative wrap, as torch). */
static txc_status check_range(const char *op, const int64_t *idx, int64_t n, int d, int64_t size)
{
    for (int64_t i = 0; i < n; i++)
        if (idx[i] < 0 || idx[i] >= size)
            return txc_error(TXC_ERR_INVALID, "%s: index %lld out of range for dim %d of size %lld", op,
                             (long long)idx[i], d, (long long)size);
    return TXC_OK;
}

static txc_status cpu_index_select(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    const txc_tensor *t = in[0];
    int d;
    txc_norm_dim("aten::index_select", a->ints[0], t->ndim, &d);
    int64_t n, *idx = read_index(in[1], &n);
    if (!idx)
        return txc_error(TXC_ERR_NOMEM, "aten::index_select: out of memory");
    int64_t size = t->ndim ? t->shape[d] : 1;
    if (check_range("aten::index_select", idx, n, d, size) != TXC_OK) {
        return TXC_ERR_INVALID;
    }
    const char *tp = txc_impl_data(t);
    char *op = txc_impl_data(out);
    size_t es = txc_dtype_size(t->dtype);
    if (t->ndim == 0) {
        memcpy(op, tp, es);
        return TXC_OK;
    }
    int64_t sshape[TXC_MAX_DIMS], sstr[TXC_MAX_DIMS], oshape[TXC_MAX_DIMS], ostr[TXC_MAX_DIMS];
    int nd = drop_dim(t, d, sshape, sstr);
    drop_dim(out, d, oshape, ostr);
    for (int64_t i = 0; i < n; i++)
        txc_kern_copy(nd, sshape, tp + (size_t)(idx[i] * t->strides[d]) * es, t->dtype, sstr,
                      op + (size_t)(i * out->strides[d]) * es, out->dtype, ostr);
    return TXC_OK;
}

static txc_status infer_index_copy(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    const char *op = (a->flags & TXC_ATTR_INPLACE) ? "aten::index_copy_" : "aten::index_copy";
    char s0[160], s1[160];
    if (n_in != 3)
        return txc_error(TXC_ERR_INTERNAL, "%s: expected 3 inputs, got %d", op, n_in);
    const txc_tensor *self = in[0], *index = in[1], *src = in[2];
    int d;
    if (check_index(op, index) != TXC_OK || txc_norm_dim(op, a->ints[0], self->ndim, &d) != TXC_OK)
        return TXC_ERR_INVALID;
    bool ok = src->ndim == self->ndim || (self->ndim == 0 && src->ndim <= 1);
    for (int i = 0; ok && i < self->ndim; i++)
        ok = src->shape[i] == (i == d ? index->numel : self->shape[i]);
    if (self->ndim == 0)
        ok = ok && index->numel == 1 && src->numel == 1;
    if (!ok)
        return txc_error(TXC_ERR_INVALID,
                         "%s: source %s does not match self %s with dim %d of size %lld (the number of indices)", op,
                         SHAPE(s0, src), SHAPE(s1, self), d, (long long)index->numel);
    if (a->flags & TXC_ATTR_INPLACE) {
        if (txc_storage_is_readonly(self->array->storage))
            return txc_error(TXC_ERR_INVALID, "%s: self is read-only (a memory-mapped tensor); clone it first", op);
    }
    m->dtype = self->dtype;
    m->ndim = self->ndim;
    memcpy(m->shape, self->shape, sizeof(int64_t) * (size_t)self->ndim);
    return TXC_OK;
}

static txc_status cpu_index_copy(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    const char *opn = (a->flags & TXC_ATTR_INPLACE) ? "aten::index_copy_" : "aten::index_copy";
    const txc_tensor *self = in[0], *src = in[2];
    int d;
    txc_norm_dim(opn, a->ints[0], self->ndim, &d);
    int64_t n, *idx = read_index(in[1], &n);
    if (!idx)
        return txc_error(TXC_ERR_NOMEM, "%s: out of memory", opn);
    /* every index is checked before anything is written */
    if (check_range(opn, idx, n, d, self->ndim ? self->shape[d] : 1) != TXC_OK) {
        return TXC_ERR_INVALID;
    }
    char *op = txc_impl_data(out);
    size_t eo = txc_dtype_size(out->dtype), es = txc_dtype_size(src->dtype);
    if (txc_impl_data(out) != txc_impl_data(self)) /* in place (eager or a compiled plan): rows only */
        txc_kern_copy(self->ndim, self->shape, txc_impl_data(self), self->dtype, self->strides, op, out->dtype,
                      out->strides);
    const char *sp = txc_impl_data(src);
    if (self->ndim == 0) {
        if (n == 1)
            txc_ops_convert(src->dtype, sp, 0, out->dtype, op, 0, 1);
        return TXC_OK;
    }
    int64_t sshape[TXC_MAX_DIMS], sstr[TXC_MAX_DIMS], oshape[TXC_MAX_DIMS], ostr[TXC_MAX_DIMS];
    int nd = drop_dim(src, d, sshape, sstr);
    drop_dim(out, d, oshape, ostr);
    for (int64_t i = 0; i < n; i++)
        txc_kern_copy(nd, sshape, sp + (size_t)(i * src->strides[d]) * es, src->dtype, sstr,
                      op + (size_t)(idx[i] * out->strides[d]) * eo, out->dtype, ostr);
    return TXC_OK;
}

/* ---- tril / triu ------------------------------------------------------------------------------ */

static txc_status infer_tri(const char *op, txc_tensor *const *in, int n_in, txc_meta *m)
{
    const txc_tensor *t = in[0];
    if (n_in != 1)
        return txc_error(TXC_ERR_INTERNAL, "%s: expected 1 input, got %d", op, n_in);
    if (t->ndim < 2)
        return txc_error(TXC_ERR_INVALID, "%s: input tensor must have at least 2 dimensions, got %d", op, t->ndim);
    m->dtype = t->dtype;
    m->ndim = t->ndim;
    memcpy(m->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    return TXC_OK;
}

static txc_status infer_tril(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    return infer_tri("aten::tril", in, n_in, m);
}

static txc_status infer_triu(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    return infer_tri("aten::triu", in, n_in, m);
}

static txc_status cpu_tri(txc_tensor *out, const txc_tensor *t, int64_t diag, bool lower)
{
    if (out->numel == 0)
        return TXC_OK;
    char *op = txc_impl_data(out);
    txc_kern_copy(t->ndim, t->shape, txc_impl_data(t), t->dtype, t->strides, op, out->dtype, out->strides);
    int64_t R = t->shape[t->ndim - 2], C = t->shape[t->ndim - 1], mats = out->numel / (R * C);
    int64_t lim = R + C + 1;
    diag = diag > lim ? lim : diag < -lim ? -lim : diag;
    size_t es = txc_dtype_size(out->dtype);
    for (int64_t mi = 0; mi < mats; mi++)
        for (int64_t i = 0; i < R; i++) {
            char *row = op + (size_t)((mi * R + i) * C) * es;
            int64_t z0, z1; /* zero the columns [z0, z1) */
            if (lower) {
                z0 = i + diag + 1, z1 = C;
                if (z0 < 0)
                    z0 = 0;
            } else {
                z0 = 0, z1 = i + diag;
                if (z1 > C)
                    z1 = C;
            }
            if (z1 > z0)
                memset(row + (size_t)z0 * es, 0, (size_t)(z1 - z0) * es);
        }
    return TXC_OK;
}

static txc_status cpu_tril(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    return cpu_tri(out, in[0], a->ints[0], true);
}

static txc_status cpu_triu(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    return cpu_tri(out, in[0], a->ints[0], false);
}

/* ---- rotary_embedding ---------------------------------------------------------------
 * transformers' apply_rotary_pos_emb for one tensor: x * cos + rotate_half(x)
 * * sin, rotate_half(x) = cat(-x[..., d/2:], x[..., :d/2]), in one pass
 * (the composition is four kernels: neg, cat, and the fused mul/add). Every
 * product and the sum are rounded to the result's dtype as the separate ops
 * round them (float32; bfloat16/float16 when every input is half; ISO C: no
 * contraction into FMA), so the bits are the composition's. */

/* v rounded to dt (float32: unchanged). */
static float round_to_dtype(txc_dtype dt, float v)
{
    if (dt == TXC_F32)
        return v;
    unsigned char b[8];
    txc_dtype_store(dt, b, 0, (double)v);
    return (float)txc_dtype_load(dt, b, 0);
}

static txc_status infer_rotary(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    static const char op[] = "txc::rotary_embedding";
    (void)a;
    if (n_in != 3)
        return txc_error(TXC_ERR_INTERNAL, "%s: expected 3 inputs, got %d", op, n_in);
    const txc_tensor *x = in[0], *c = in[1], *s = in[2];
    if (!txc_dtype_is_float(x->dtype) || !txc_dtype_is_float(c->dtype) || !txc_dtype_is_float(s->dtype))
        return txc_error(TXC_ERR_INVALID, "%s: x, cos and sin must be float tensors", op);
    const int64_t d = x->ndim > 0 ? x->shape[x->ndim - 1] : 0;
    if (x->ndim == 0 || d % 2 != 0)
        return txc_error(TXC_ERR_INVALID, "%s: the last dim of x (%lld) must be even", op, (long long)d);
    for (int k = 1; k < 3; k++) {
        int nout;
        int64_t shape[TXC_MAX_DIMS];
        txc_status st = txc_broadcast_shapes(op, x->ndim, x->shape, in[k]->ndim, in[k]->shape, &nout, shape);
        if (st != TXC_OK)
            return st;
        if (nout != x->ndim || memcmp(shape, x->shape, sizeof(int64_t) * (size_t)nout) != 0)
            return txc_error(TXC_ERR_INVALID, "%s: %s must broadcast to x's shape", op, k == 1 ? "cos" : "sin");
    }
    m->dtype = txc_promote(x->dtype, txc_promote(c->dtype, s->dtype));
    m->ndim = x->ndim;
    memcpy(m->shape, x->shape, sizeof m->shape);
    return TXC_OK;
}

static txc_status cpu_rotary(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    (void)n_in, (void)a;
    const txc_tensor *x = in[0];
    const int nd = x->ndim;
    const int64_t d = x->shape[nd - 1], h = d / 2, rows = d > 0 ? x->numel / d : 0;
    int64_t cs[TXC_MAX_DIMS], ss[TXC_MAX_DIMS];
    txc_broadcast_strides(in[1], nd, x->shape, cs);
    txc_broadcast_strides(in[2], nd, x->shape, ss);
    const char *xp = txc_impl_data(x), *cp = txc_impl_data(in[1]), *sp = txc_impl_data(in[2]);
    char *op = txc_impl_data(out);
    const bool f32 = x->dtype == TXC_F32 && in[1]->dtype == TXC_F32 && in[2]->dtype == TXC_F32 &&
                     out->dtype == TXC_F32 && x->strides[nd - 1] == 1 && cs[nd - 1] == 1 && ss[nd - 1] == 1;
    for (int64_t r = 0; r < rows; r++) {
        int64_t xo = 0, co = 0, so = 0, rem = r;
        for (int k = nd - 2; k >= 0; k--) { /* the row's index, last dims fastest */
            int64_t i = rem % x->shape[k];
            rem /= x->shape[k];
            xo += i * x->strides[k], co += i * cs[k], so += i * ss[k];
        }
        if (f32) {
            const float *xv = (const float *)xp + xo, *c = (const float *)cp + co, *s = (const float *)sp + so;
            float *o = (float *)op + r * d;
            for (int64_t i = 0; i < h; i++) { /* (-x2) * s rounds as -(x2 * s) */
                float p = xv[i] * c[i], q = xv[i + h] * s[i];
                o[i] = p - q;
            }
            for (int64_t i = h; i < d; i++) {
                float p = xv[i] * c[i], q = xv[i - h] * s[i];
                o[i] = p + q;
            }
            continue;
        }
        const int64_t xs = x->strides[nd - 1], ct = cs[nd - 1], st = ss[nd - 1];
        for (int64_t i = 0; i < d; i++) {
            float xi = (float)txc_dtype_load(x->dtype, xp, (size_t)(xo + i * xs));
            float xr = (float)txc_dtype_load(x->dtype, xp, (size_t)(xo + (i < h ? i + h : i - h) * xs));
            float c = (float)txc_dtype_load(in[1]->dtype, cp, (size_t)(co + i * ct));
            float s = (float)txc_dtype_load(in[2]->dtype, sp, (size_t)(so + i * st));
            float p = round_to_dtype(out->dtype, xi * c), q = round_to_dtype(out->dtype, xr * s);
            txc_dtype_store(out->dtype, op, (size_t)(r * d + i), (double)(i < h ? p - q : p + q));
        }
    }
    return TXC_OK;
}

void txc_ops_register_nn(txc_op_def *t)
{
    t[TXC_OP_ROTARY] = (txc_op_def){.infer = infer_rotary, .cpu = cpu_rotary};
    t[TXC_OP_EMBEDDING] = (txc_op_def){.infer = infer_embedding, .cpu = cpu_embedding};
    t[TXC_OP_RMS_NORM] = (txc_op_def){.infer = infer_rms_norm, .cpu = cpu_rms_norm};
    t[TXC_OP_LAYER_NORM] = (txc_op_def){.infer = infer_layer_norm, .cpu = cpu_layer_norm};
    t[TXC_OP_CAT] = (txc_op_def){.infer = infer_cat, .cpu = cpu_cat};
    t[TXC_OP_STACK] = (txc_op_def){.infer = infer_stack, .cpu = cpu_stack};
    t[TXC_OP_INDEX_SELECT] = (txc_op_def){.infer = infer_index_select, .cpu = cpu_index_select};
    t[TXC_OP_INDEX_COPY] = (txc_op_def){.infer = infer_index_copy, .cpu = cpu_index_copy};
    t[TXC_OP_TRIL] = (txc_op_def){.infer = infer_tril, .cpu = cpu_tril};
    t[TXC_OP_TRIU] = (txc_op_def){.infer = infer_triu, .cpu = cpu_triu};
}
