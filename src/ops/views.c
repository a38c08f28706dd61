/* View ops (no copy: new shape/strides/offset over the same array), the
 * copy op, and creation ops. See ops/registry.h. */
#include "ops/kernels.h"

#include <math.h>
#include <string.h>

/* torch's computeStride (aten/src/ATen/TensorUtils.cpp): strides for viewing
 * `t` as `shape`, or false when the memory layout does not allow it. */
static bool compute_view_strides(const txc_tensor *t, int ndim, const int64_t *shape, int64_t *strides)
{
    if (t->numel == 0) {
        txc_impl_contiguous_strides(ndim, shape, strides);
        return true;
    }
    if (t->ndim == 0) { /* one element: any shape of numel 1 (computeStride: oldshape.empty()) */
        for (int d = 0; d < ndim; d++)
            strides[d] = 1;
        return true;
    }
    int view_d = ndim - 1;
    int64_t chunk_base_stride = t->ndim ? t->strides[t->ndim - 1] : 1;
    int64_t tensor_numel = 1, view_numel = 1;
    for (int tensor_d = t->ndim - 1; tensor_d >= 0; tensor_d--) {
        tensor_numel *= t->shape[tensor_d];
        if (tensor_d == 0 ||
            (t->shape[tensor_d - 1] != 1 && t->strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
            while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
                strides[view_d] = view_numel * chunk_base_stride;
                view_numel *= shape[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel)
                return false;
            if (tensor_d > 0) {
                chunk_base_stride = t->strides[tensor_d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

static txc_status view_view(const txc_tensor *t, const txc_op_attrs *a, txc_view_meta *o)
{
    o->ndim = a->n_ints;
    memcpy(o->shape, a->ints, sizeof(int64_t) * (size_t)a->n_ints);
    int64_t n = txc_shape_numel(o->ndim, o->shape);
    if (n != t->numel)
        return txc_error(TXC_ERR_INVALID, "aten::view: shape has %lld elements, the tensor %lld",
                         (long long)n, (long long)t->numel);
    if (!compute_view_strides(t, o->ndim, o->shape, o->strides))
        return txc_error(TXC_ERR_INVALID, "aten::view: view size is not compatible with input tensor's size "
                                          "and stride; use txc_reshape() (which copies) instead");
    o->offset = t->offset;
    return TXC_OK;
}

static txc_status view_permute(const txc_tensor *t, const txc_op_attrs *a, txc_view_meta *o)
{
    if (a->n_ints != t->ndim)
        return txc_error(TXC_ERR_INVALID, "aten::permute: %d dims given for a %d-d tensor", a->n_ints, t->ndim);
    bool seen[TXC_MAX_DIMS] = {false};
    o->ndim = t->ndim;
    for (int i = 0; i < t->ndim; i++) {
        int d;
        if (txc_norm_dim("aten::permute", a->ints[i], t->ndim, &d) != TXC_OK)
            return TXC_ERR_INVALID;
        if (seen[d])
            return txc_error(TXC_ERR_INVALID, "aten::permute: dim %d repeated", d);
        seen[d] = true;
        o->shape[i] = t->shape[d];
        o->strides[i] = t->strides[d];
    }
    o->offset = t->offset;
    return TXC_OK;
}

static void copy_meta(const txc_tensor *t, txc_view_meta *o)
{
    o->ndim = t->ndim;
    memcpy(o->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    memcpy(o->strides, t->strides, sizeof(int64_t) * (size_t)t->ndim);
    o->offset = t->offset;
}

/* ints: dim, start, end, step (Python slice semantics, clamped here). */
static txc_status view_slice(const txc_tensor *t, const txc_op_attrs *a, txc_view_meta *o)
{
    int d;
    if (t->ndim == 0)
        return txc_error(TXC_ERR_INVALID, "aten::slice: cannot slice a 0-d tensor");
    if (txc_norm_dim("aten::slice", a->ints[0], t->ndim, &d) != TXC_OK)
        return TXC_ERR_INVALID;
    int64_t size = t->shape[d], start = a->ints[1], end = a->ints[2], step = a->ints[3];
    if (step < 1)
        return txc_error(TXC_ERR_INVALID, "aten::slice: step must be positive (got %lld)", (long long)step);
    if (start < 0)
        start += size;
    if (end < 0)
        end += size;
    start = start < 0 ? 0 : start > size ? size : start;
    end = end < start ? start : end > size ? size : end;
    copy_meta(t, o);
    o->shape[d] = (end - start + step - 1) / step;
    o->strides[d] = t->strides[d] * step;
    o->offset = t->offset + start * t->strides[d];
    return TXC_OK;
}

static txc_status view_select(const txc_tensor *t, const txc_op_attrs *a, txc_view_meta *o)
{
    int d;
    if (t->ndim == 0)
        return txc_error(TXC_ERR_INVALID, "aten::select: cannot select on a 0-d tensor");
    if (txc_norm_dim("aten::select", a->ints[0], t->ndim, &d) != TXC_OK)
        return TXC_ERR_INVALID;
    int64_t idx = a->ints[1], size = t->shape[d];
    if (idx < -size || idx >= size)
        return txc_error(TXC_ERR_INVALID, "aten::select: index %lld out of range for dim %d of size %lld",
                         (long long)idx, d, (long long)size);
    if (idx < 0)
        idx += size;
    o->ndim = 0;
    for (int i = 0; i < t->ndim; i++)
        if (i != d) {
            o->shape[o->ndim] = t->shape[i];
            o->strides[o->ndim++] = t->strides[i];
        }
    o->offset = t->offset + idx * t->strides[d];
    return TXC_OK;
}

static txc_status view_expand(const txc_tensor *t, const txc_op_attrs *a, txc_view_meta *o)
{
    int n = a->n_ints;
    if (n < t->ndim)
        return txc_error(TXC_ERR_INVALID, "aten::expand: %d sizes given for a %d-d tensor", n, t->ndim);
    o->ndim = n;
    for (int i = n - 1; i >= 0; i--) {
        int it = t->ndim - n + i;
        int64_t want = a->ints[i];
        if (it < 0) {
            if (want < 0)
                return txc_error(TXC_ERR_INVALID, "aten::expand: -1 not allowed for a new leading dim %d", i);
            o->shape[i] = want;
            o->strides[i] = 0;
            continue;
        }
        int64_t have = t->shape[it];
        if (want == -1 || want == have) {
            o->shape[i] = have;
            o->strides[i] = t->strides[it];
        } else if (have == 1 && want >= 0) {
            o->shape[i] = want;
            o->strides[i] = 0;
        } else {
            return txc_error(TXC_ERR_INVALID,
                             "aten::expand: the expanded size %lld must match the existing size %lld at dim %d",
                             (long long)want, (long long)have, i);
        }
    }
    o->offset = t->offset;
    return TXC_OK;
}

static txc_status view_unsqueeze(const txc_tensor *t, const txc_op_attrs *a, txc_view_meta *o)
{
    int d;
    if (txc_norm_dim("aten::unsqueeze", a->ints[0], t->ndim + 1, &d) != TXC_OK)
        return TXC_ERR_INVALID;
    if (t->ndim >= TXC_MAX_DIMS)
        return txc_error(TXC_ERR_INVALID, "aten::unsqueeze: more than %d dims", TXC_MAX_DIMS);
    o->ndim = t->ndim + 1;
    for (int i = 0, j = 0; i < o->ndim; i++) {
        if (i == d) {
            o->shape[i] = 1;
            o->strides[i] = j < t->ndim ? t->strides[j] * t->shape[j] : 1;
        } else {
            o->shape[i] = t->shape[j];
            o->strides[i] = t->strides[j];
            j++;
        }
    }
    o->offset = t->offset;
    return TXC_OK;
}

static txc_status view_squeeze(const txc_tensor *t, const txc_op_attrs *a, txc_view_meta *o)
{
    int d = -1;
    if (!(a->flags & TXC_ATTR_ALL_DIMS) && txc_norm_dim("aten::squeeze", a->ints[0], t->ndim, &d) != TXC_OK)
        return TXC_ERR_INVALID;
    o->ndim = 0;
    for (int i = 0; i < t->ndim; i++) {
        bool drop = t->shape[i] == 1 && ((a->flags & TXC_ATTR_ALL_DIMS) || i == d);
        if (!drop) {
            o->shape[o->ndim] = t->shape[i];
            o->strides[o->ndim++] = t->strides[i];
        }
    }
    o->offset = t->offset;
    return TXC_OK;
}

/* ---- copy (contiguous / clone / to(dtype)) ------------------------------- */

static txc_status infer_copy(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    m->dtype = a->dtype;
    m->ndim = in[0]->ndim;
    memcpy(m->shape, in[0]->shape, sizeof(int64_t) * (size_t)in[0]->ndim);
    return TXC_OK;
}

static txc_status cpu_copy(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    const txc_tensor *t = in[0];
    if (t->numel == 0)
        return TXC_OK;
    /* dims contiguous in both merge: a dense input is one converted run, a
     * strided one a row (converted whole) per run of its inner dims */
    int64_t cs[TXC_MAX_DIMS];
    txc_impl_contiguous_strides(out->ndim, out->shape, cs);
    txc_kern_copy(t->ndim, t->shape, txc_impl_data(t), t->dtype, t->strides, txc_impl_data(out), out->dtype, cs);
    return TXC_OK;
}

/* ---- creation ------------------------------------------------------------- */

/* full: ints = shape, f[0] = value, dtype. */
static txc_status infer_full(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    if (a->n_ints > TXC_MAX_DIMS || txc_shape_numel(a->n_ints, a->ints) < 0)
        return txc_error(TXC_ERR_INVALID, "aten::full: bad shape");
    m->dtype = a->dtype;
    m->ndim = a->n_ints;
    memcpy(m->shape, a->ints, sizeof(int64_t) * (size_t)a->n_ints);
    return TXC_OK;
}

static txc_status cpu_full(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    void *d = txc_impl_data(out);
    txc_dtype_store(out->dtype, d, 0, a->f[0]);
    size_t es = txc_dtype_size(out->dtype);
    for (int64_t i = 1; i < out->numel; i++)
        memcpy((char *)d + (size_t)i * es, d, es);
    return TXC_OK;
}

/* arange: f = start, end, step. */
static txc_status infer_arange(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    double start = a->f[0], end = a->f[1], step = a->f[2];
    if (step == 0 || !isfinite(start) || !isfinite(end) || !isfinite(step))
        return txc_error(TXC_ERR_INVALID, "aten::arange: step must be nonzero and bounds finite");
    double n = ceil((end - start) / step);
    if ((end - start) / step < 0)
        return txc_error(TXC_ERR_INVALID, "aten::arange: upper bound and larger bound inconsistent with step sign");
    if (n > 1e12)
        return txc_error(TXC_ERR_INVALID, "aten::arange: too many elements");
    m->dtype = a->dtype;
    m->ndim = 1;
    m->shape[0] = (int64_t)n;
    return TXC_OK;
}

static txc_status cpu_arange(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    void *d = txc_impl_data(out);
    for (int64_t i = 0; i < out->numel; i++)
        txc_dtype_store(out->dtype, d, (size_t)i, a->f[0] + (double)i * a->f[2]);
    return TXC_OK;
}

void txc_ops_register_views(txc_op_def *t)
{
    t[TXC_OP_VIEW].view = view_view;
    t[TXC_OP_PERMUTE].view = view_permute;
    t[TXC_OP_SLICE].view = view_slice;
    t[TXC_OP_SELECT].view = view_select;
    t[TXC_OP_EXPAND].view = view_expand;
    t[TXC_OP_UNSQUEEZE].view = view_unsqueeze;
    t[TXC_OP_SQUEEZE].view = view_squeeze;
    t[TXC_OP_COPY] = (txc_op_def){.infer = infer_copy, .cpu = cpu_copy};
    t[TXC_OP_FULL] = (txc_op_def){.infer = infer_full, .cpu = cpu_full};
    t[TXC_OP_ARANGE] = (txc_op_def){.infer = infer_arange, .cpu = cpu_arange};
}
