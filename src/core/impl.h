/*
 * core/impl.h — struct layouts of arrays and tensors, for the layers that
 * compute on them (ops kernels, env dispatch). Not a public header: users
 * go through the accessors in include/txc/array.h and tensor.h.
 */
#ifndef TXC_CORE_IMPL_H
#define TXC_CORE_IMPL_H

#include "txc/array.h"
#include "txc/tensor.h"

struct txc_array {
    int refcount;
    txc_storage *storage;
    void *data; /* storage base + byte offset */
    txc_dtype dtype;
    int ndim;
    int64_t shape[TXC_MAX_DIMS];
    int64_t numel;
    size_t nbytes;
    /* A block-quantized (rows, K) weight: 0 in ggml's row layout, 8 when
     * its rows are interleaved in groups of 8 (ops/quant_repack.c,
     * txc_quant_repack; set once at load, the bytes then read-only). */
    int interleave;
};

struct txc_tensor {
    int refcount;
    txc_env *env;
    txc_array *array; /* the array this tensor views (one reference) */
    txc_dtype dtype;
    int ndim;
    int64_t shape[TXC_MAX_DIMS];
    int64_t strides[TXC_MAX_DIMS]; /* in elements */
    int64_t offset;                /* in elements, from array->data */
    int64_t numel;
    int32_t value; /* while tracing: the value id in the graph; -1 for a concrete tensor */
    /* shard/ (txc/shard.h): the NamedSharding this tensor is one
     * addressable shard of (owned by its mesh); NULL: not sharded */
    const struct txc_sharding *sharding;
};

/* Address of the first element of a tensor (for a block-quantized dtype,
 * of its first block: the offset is then a whole number of blocks, rows of
 * a (rows, K) weight). */
static inline void *txc_impl_data(const txc_tensor *t)
{
    size_t es = txc_dtype_size(t->dtype);
    if (es)
        return (char *)t->array->data + (size_t)t->offset * es;
    return (char *)t->array->data +
           (size_t)(t->offset / txc_dtype_block_size(t->dtype)) * txc_dtype_block_bytes(t->dtype);
}

/* C-contiguous strides for a shape. */
static inline void txc_impl_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides)
{
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= shape[i] > 0 ? shape[i] : 1;
    }
}

/* A new tensor header over `array` (takes a new reference to it). */
txc_tensor *txc_impl_tensor_new(txc_env *env, txc_array *array, int ndim, const int64_t *shape,
                                const int64_t *strides, int64_t offset);

/* Tests: make the next txc_storage_new_anon calls see madvise(MADV_HUGEPAGE)
 * fail (as a kernel without transparent huge pages does), to check that the
 * copy still works. Not for product code. */
void txc_impl_test_fail_madvise(bool fail);

#endif
