/* Tensor headers and accessors; see include/txc/tensor.h. */
#include "core/impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

txc_tensor *txc_impl_tensor_new(txc_env *env, txc_array *array, int ndim, const int64_t *shape,
                                const int64_t *strides, int64_t offset)
{
    txc_tensor *t = calloc(1, sizeof *t);
    if (!t) {
        txc_error(TXC_ERR_NOMEM, "out of memory (tensor)");
        return NULL;
    }
    t->refcount = 1;
    t->env = env;
    t->array = txc_array_retain(array);
    t->dtype = array->dtype;
    t->ndim = ndim;
    memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    memcpy(t->strides, strides, sizeof(int64_t) * (size_t)ndim);
    t->offset = offset;
    t->numel = txc_shape_numel(ndim, shape);
    t->value = -1;
    return t;
}

txc_array *txc_tensor_unwrap(const txc_tensor *t)
{
    if (!t)
        return NULL;
    const txc_array *a = t->array;
    bool same = t->offset == 0 && t->ndim == a->ndim && txc_tensor_is_contiguous(t);
    for (int i = 0; same && i < t->ndim; i++)
        same = t->shape[i] == a->shape[i];
    if (!same) {
        txc_error(TXC_ERR_INVALID, "unwrap: the tensor is a strided view of its array, not the array "
                                   "itself; call txc_contiguous() first");
        return NULL;
    }
    return t->array;
}

txc_tensor *txc_tensor_retain(txc_tensor *t)
{
    if (t)
        t->refcount++;
    return t;
}

void txc_tensor_release(txc_tensor *t)
{
    if (!t || --t->refcount > 0)
        return;
    txc_array_release(t->array);
    free(t);
}

txc_dtype txc_tensor_dtype(const txc_tensor *t) { return t->dtype; }
int txc_tensor_ndim(const txc_tensor *t) { return t->ndim; }
const int64_t *txc_tensor_shape(const txc_tensor *t) { return t->shape; }
const int64_t *txc_tensor_strides(const txc_tensor *t) { return t->strides; }
int64_t txc_tensor_offset(const txc_tensor *t) { return t->offset; }
int64_t txc_tensor_numel(const txc_tensor *t) { return t->numel; }
txc_env *txc_tensor_env(const txc_tensor *t) { return t->env; }
txc_device txc_tensor_device(const txc_tensor *t) { return txc_array_device(t->array); }
txc_array *txc_tensor_array(const txc_tensor *t) { return t->array; }
void *txc_tensor_data_ptr(const txc_tensor *t) { return txc_impl_data(t); }
bool txc_tensor_is_traced(const txc_tensor *t) { return t->value >= 0; }

int64_t txc_tensor_size(const txc_tensor *t, int d)
{
    if (d < 0)
        d += t->ndim;
    return (d >= 0 && d < t->ndim) ? t->shape[d] : -1;
}

bool txc_tensor_is_contiguous(const txc_tensor *t)
{
    int64_t expected = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] == 1)
            continue;
        if (t->shape[i] == 0)
            return true;
        if (t->strides[i] != expected)
            return false;
        expected *= t->shape[i];
    }
    return true;
}

double txc_tensor_item_at(const txc_tensor *t, const int64_t *index)
{
    int64_t off = 0;
    for (int i = 0; i < t->ndim; i++)
        off += index[i] * t->strides[i];
    return txc_dtype_load(t->dtype, txc_impl_data(t), (size_t)off);
}

double txc_tensor_item(const txc_tensor *t)
{
    int64_t zero[TXC_MAX_DIMS] = {0};
    return txc_tensor_item_at(t, zero);
}

/* Visit every element in row-major order: calls f(i, value). */
static txc_status copy_out(const txc_tensor *t, void *out, int64_t n, bool as_i64)
{
    if (n < t->numel)
        return txc_error(TXC_ERR_INVALID, "copy: buffer of %lld elements for a tensor of %lld",
                         (long long)n, (long long)t->numel);
    int64_t idx[TXC_MAX_DIMS] = {0};
    const void *base = txc_impl_data(t);
    for (int64_t i = 0; i < t->numel; i++) {
        int64_t off = 0;
        for (int d = 0; d < t->ndim; d++)
            off += idx[d] * t->strides[d];
        if (as_i64 && t->dtype == TXC_I64)
            ((int64_t *)out)[i] = ((const int64_t *)base)[off];
        else if (as_i64)
            ((int64_t *)out)[i] = (int64_t)txc_dtype_load(t->dtype, base, (size_t)off);
        else
            ((float *)out)[i] = (float)txc_dtype_load(t->dtype, base, (size_t)off);
        for (int d = t->ndim - 1; d >= 0; d--) {
            if (++idx[d] < t->shape[d])
                break;
            idx[d] = 0;
        }
    }
    return TXC_OK;
}

txc_status txc_tensor_copy_to_f32(const txc_tensor *t, float *out, int64_t n) { return copy_out(t, out, n, false); }
txc_status txc_tensor_copy_to_i64(const txc_tensor *t, int64_t *out, int64_t n) { return copy_out(t, out, n, true); }

void txc_tensor_debug_print(const char *label, const txc_tensor *t, int max_elems)
{
    if (!t) {
        fprintf(stderr, "%s: NULL\n", label);
        return;
    }
    fprintf(stderr, "%s: %s [", label, txc_dtype_name(t->dtype));
    for (int i = 0; i < t->ndim; i++)
        fprintf(stderr, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    fprintf(stderr, "]");
    int64_t n = t->numel < max_elems ? t->numel : max_elems;
    float *v = malloc(sizeof(float) * (size_t)(t->numel > 0 ? t->numel : 1));
    if (v && copy_out(t, v, t->numel, false) == TXC_OK)
        for (int64_t i = 0; i < n; i++)
            fprintf(stderr, "%s%g", i ? " " : " ", v[i]);
    free(v);
    fprintf(stderr, "%s\n", n < t->numel ? " ..." : "");
}
