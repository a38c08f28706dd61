/*
 * txc/tensor.h — torch-semantics tensors over backend arrays.
 *
 * A txc_tensor is what torchax's Tensor is to a jax.Array: it wraps an array
 * (`_elem`) and remembers its environment (`_env`). On top it has torch's
 * view machinery: shape, strides (in elements) and an offset, so that
 * view/reshape, permute, transpose, narrow, select, expand, unsqueeze and
 * squeeze never copy. Ops (txc/ops.h) read any strides; txc_contiguous()
 * materialises a dense copy only when needed.
 *
 *   txc_tensor_wrap(env, array)  — (env.h) torchax torch_view: zero copy, the tensor
 *                                  shares the array (pointer identity).
 *   txc_tensor_unwrap(t)         — torchax jax_view: zero copy, returns the
 *                                  very array, only for a tensor that covers
 *                                  its array exactly (not a strided view).
 *
 * Ownership: functions returning txc_tensor* give one reference owned by
 * the caller, unless the tensor's environment has an open scope
 * (txc_env_scope_begin, env.h): then the scope owns it and releases it at
 * txc_env_scope_end — retain what must outlive the scope.
 * All functions taking a NULL tensor return NULL/error without touching the
 * recorded error (see status.h), so chains can be checked once.
 */
#ifndef TXC_TENSOR_H
#define TXC_TENSOR_H

#include <stdbool.h>
#include <stdint.h>
#include "txc/array.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct txc_tensor txc_tensor;
typedef struct txc_env txc_env;

/* The array a tensor wraps, zero copy (borrowed: retain to keep). Fails
 * with TXC_ERR_INVALID for a view that is not exactly its whole array
 * (offset 0, contiguous, same shape); call txc_contiguous() first. */
txc_array *txc_tensor_unwrap(const txc_tensor *t);

txc_tensor *txc_tensor_retain(txc_tensor *t);
void txc_tensor_release(txc_tensor *t);

txc_dtype txc_tensor_dtype(const txc_tensor *t);
int txc_tensor_ndim(const txc_tensor *t);
/* Size of dim `d` (negative d counts from the end, as torch). */
int64_t txc_tensor_size(const txc_tensor *t, int d);
const int64_t *txc_tensor_shape(const txc_tensor *t);
const int64_t *txc_tensor_strides(const txc_tensor *t);
int64_t txc_tensor_offset(const txc_tensor *t);
int64_t txc_tensor_numel(const txc_tensor *t);
bool txc_tensor_is_contiguous(const txc_tensor *t);
txc_env *txc_tensor_env(const txc_tensor *t);
txc_device txc_tensor_device(const txc_tensor *t);
txc_array *txc_tensor_array(const txc_tensor *t); /* borrowed, even for views */
/* True for a tensor recorded by a tracing jit (shape and dtype only, no
 * data): reading its elements is meaningless. */
bool txc_tensor_is_traced(const txc_tensor *t);
/* Address of element [0,...,0] (CPU tensors). */
void *txc_tensor_data_ptr(const txc_tensor *t);

/* Element at a multi-index (ndim entries), as double. For tests and tools. */
double txc_tensor_item_at(const txc_tensor *t, const int64_t *index);
/* The single element of a 1-element tensor, as double. */
double txc_tensor_item(const txc_tensor *t);
/* Copy the elements, in row-major order, converted to float/int64, into
 * `out` (capacity `n` elements). TXC_ERR_INVALID when n < numel. */
txc_status txc_tensor_copy_to_f32(const txc_tensor *t, float *out, int64_t n);
txc_status txc_tensor_copy_to_i64(const txc_tensor *t, int64_t *out, int64_t n);

/* Print shape/dtype and (up to `max_elems`) values to stderr — debugging. */
void txc_tensor_debug_print(const char *label, const txc_tensor *t, int max_elems);

#ifdef __cplusplus
}
#endif
#endif
