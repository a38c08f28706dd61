/* Collectives as ops (torchax lowers _c10d_functional.all_reduce to
 * jax.lax.psum the same way): all_reduce (sum), all_gather,
 * reduce_scatter (sum), broadcast over a communicator group of
 * backend/comm.h; and txc::vocab_parallel_embedding, the lookup of a table
 * holding rows [offset, offset + rows) of the vocabulary (Megatron-LM's
 * VocabParallelEmbedding: other ids give zero rows, an all_reduce sums).
 *
 * attrs.ints = {group, group_size, dim or root}: the group size is part of
 * the op's attributes, so a traced plan (and its on-disk key) records the
 * mesh it was built for, and a plan run in a group of another size fails.
 *
 * The reduction order is fixed: every rank gathers all partials and sums
 * them in rank order, ((p0 + p1) + p2) + ..., so every rank and every run
 * gets the same bits (an MPI_Allreduce's order is the library's choice).
 * Kernels stage the input in a contiguous buffer first, so an output the
 * jit planned over the input's memory is safe. The transport is the
 * calling thread's (backend/comm.h: MPI between processes, shared memory
 * between in-process devices): the same kernels and the same sums for
 * both, so both give the same bits. */
#include "backend/comm.h"
#include "ops/kernels.h"
#include "ops/registry.h"

#include <stdlib.h>
#include <string.h>

/* The calling thread's staging buffers (an in-process device's own). */
static void *stage(size_t bytes, int which)
{
    return txc_scratch(bytes, which ? TXC_SCRATCH_COLL_RECV : TXC_SCRATCH_COLL_SEND);
}

static txc_status check_group(const char *op, const txc_op_attrs *a)
{
    if (a->n_ints < 3)
        return txc_error(TXC_ERR_INTERNAL, "%s: expected 3 int attributes, got %d", op, a->n_ints);
    int size = txc_comm_group_size((int)a->ints[0]);
    if (size <= 0 || size != a->ints[1])
        return txc_error(TXC_ERR_INVALID, "%s: group %lld has %d ranks but the call was made for %lld", op,
                         (long long)a->ints[0], size, (long long)a->ints[1]);
    return TXC_OK;
}

static txc_status infer_collective(const char *op, txc_tensor *const *in, int n_in, const txc_op_attrs *a,
                                   bool reduce, txc_meta *m)
{
    if (n_in != 1)
        return txc_error(TXC_ERR_INTERNAL, "%s: expected 1 input, got %d", op, n_in);
    txc_status s = check_group(op, a);
    if (s)
        return s;
    const txc_tensor *x = in[0];
    if (reduce && x->dtype != TXC_F32)
        return txc_error(TXC_ERR_UNSUPPORTED, "%s: sums float32 tensors, got %s", op, txc_dtype_name(x->dtype));
    if (txc_dtype_is_quantized(x->dtype))
        return txc_error(TXC_ERR_UNSUPPORTED, "%s: a %s tensor", op, txc_dtype_name(x->dtype));
    m->dtype = x->dtype;
    m->ndim = x->ndim;
    memcpy(m->shape, x->shape, sizeof m->shape);
    return TXC_OK;
}

/* x as contiguous bytes in stage buffer 0. */
static const void *contiguous(const txc_tensor *x, size_t *bytes)
{
    size_t es = txc_dtype_size(x->dtype);
    *bytes = (size_t)x->numel * es;
    void *p = stage(*bytes ? *bytes : 1, 0);
    if (!p)
        return NULL;
    int64_t strides[TXC_MAX_DIMS], st = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        strides[d] = st;
        st *= x->shape[d];
    }
    if (x->numel)
        txc_kern_copy(x->ndim, x->shape, txc_impl_data(x), x->dtype, x->strides, p, x->dtype, strides);
    return p;
}

static txc_status gather_all(const char *op, const txc_tensor *x, const txc_op_attrs *a, const void **parts,
                             size_t *bytes)
{
    const void *send = contiguous(x, bytes);
    void *recv = send ? stage(*bytes * (size_t)a->ints[1] + 1, 1) : NULL;
    if (!recv)
        return txc_error(TXC_ERR_NOMEM, "%s: out of memory (%zu bytes x %lld ranks)", op, *bytes,
                         (long long)a->ints[1]);
    *parts = recv;
    return txc_comm_all_gather((int)a->ints[0], send, recv, *bytes, op);
}

/* ---- all_reduce ---------------------------------------------------------------- */

static txc_status infer_all_reduce(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    return infer_collective("_c10d_functional::all_reduce", in, n_in, a, true, m);
}

/* out[i] = sum over ranks r = 0, 1, ... of part_r[i], left to right. */
static void sum_in_rank_order(float *out, const float *parts, int64_t n, int64_t ranks, int64_t stride)
{
    memcpy(out, parts, sizeof(float) * (size_t)n);
    for (int64_t r = 1; r < ranks; r++) {
        const float *p = parts + r * stride;
        for (int64_t i = 0; i < n; i++)
            out[i] += p[i];
    }
}

static txc_status cpu_all_reduce(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    const void *parts = NULL;
    size_t bytes;
    txc_status s = gather_all("_c10d_functional::all_reduce", in[0], a, &parts, &bytes);
    if (s)
        return s;
    sum_in_rank_order(txc_impl_data(out), parts, in[0]->numel, a->ints[1], in[0]->numel);
    return TXC_OK;
}

/* ---- all_gather / reduce_scatter along a dim ------------------------------------- */

static txc_status infer_along(const char *op, txc_tensor *const *in, int n_in, const txc_op_attrs *a, bool gather,
                              txc_meta *m)
{
    txc_status s = infer_collective(op, in, n_in, a, !gather, m);
    if (s)
        return s;
    int d;
    if ((s = txc_norm_dim(op, a->ints[2], in[0]->ndim, &d)))
        return s;
    if (in[0]->ndim == 0)
        return txc_error(TXC_ERR_INVALID, "%s: a 0-d tensor has no dim to %s", op, gather ? "gather" : "scatter");
    int64_t n = a->ints[1];
    if (gather) {
        m->shape[d] = in[0]->shape[d] * n;
    } else {
        if (in[0]->shape[d] % n)
            return txc_error(TXC_ERR_INVALID, "%s: dim %d of size %lld does not divide by the group's %lld ranks", op,
                             d, (long long)in[0]->shape[d], (long long)n);
        m->shape[d] = in[0]->shape[d] / n;
    }
    return TXC_OK;
}

static txc_status infer_all_gather(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    return infer_along("_c10d_functional::all_gather_into_tensor", in, n_in, a, true, m);
}

static txc_status infer_reduce_scatter(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    return infer_along("_c10d_functional::reduce_scatter_tensor", in, n_in, a, false, m);
}

/* outer = prod(shape[:d]), inner = prod(shape[d:]) of the local tensor. */
static void split_at(const txc_tensor *x, int d, int64_t *outer, int64_t *inner)
{
    *outer = *inner = 1;
    for (int i = 0; i < x->ndim; i++)
        *(i < d ? outer : inner) *= x->shape[i];
}

static txc_status cpu_all_gather(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    const void *parts = NULL;
    size_t bytes;
    const txc_tensor *x = in[0];
    txc_status s = gather_all("_c10d_functional::all_gather_into_tensor", x, a, &parts, &bytes);
    if (s)
        return s;
    int d = (int)(a->ints[2] < 0 ? a->ints[2] + x->ndim : a->ints[2]);
    int64_t outer, inner, n = a->ints[1];
    split_at(x, d, &outer, &inner);
    size_t es = txc_dtype_size(x->dtype), row = (size_t)inner * es;
    char *o = txc_impl_data(out);
    const char *p = parts;
    /* out (outer, n, inner) from parts (n, outer, inner) */
    for (int64_t i = 0; i < outer; i++)
        for (int64_t r = 0; r < n; r++)
            memcpy(o + ((size_t)i * (size_t)n + (size_t)r) * row, p + (size_t)r * bytes + (size_t)i * row, row);
    return TXC_OK;
}

static txc_status cpu_reduce_scatter(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    const void *parts = NULL;
    size_t bytes;
    const txc_tensor *x = in[0];
    txc_status s = gather_all("_c10d_functional::reduce_scatter_tensor", x, a, &parts, &bytes);
    if (s)
        return s;
    int d = (int)(a->ints[2] < 0 ? a->ints[2] + x->ndim : a->ints[2]);
    int64_t outer, inner, n = a->ints[1];
    split_at(x, d, &outer, &inner);
    int64_t chunk = inner / n, me = txc_comm_group_rank((int)a->ints[0]), stride = x->numel;
    float *o = txc_impl_data(out);
    const float *p = parts;
    /* rank me keeps block me of dim d: per outer index, elements [me*chunk, (me+1)*chunk) of inner */
    for (int64_t i = 0; i < outer; i++)
        sum_in_rank_order(o + i * chunk, p + i * inner + me * chunk, chunk, n, stride);
    return TXC_OK;
}

/* ---- broadcast -------------------------------------------------------------------- */

static txc_status infer_broadcast(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    static const char op[] = "_c10d_functional::broadcast";
    txc_status s = infer_collective(op, in, n_in, a, false, m);
    if (s == TXC_OK && (a->ints[2] < 0 || a->ints[2] >= a->ints[1]))
        return txc_error(TXC_ERR_INVALID, "%s: root %lld is not a rank of a group of %lld", op,
                         (long long)a->ints[2], (long long)a->ints[1]);
    return s;
}

static txc_status cpu_broadcast(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    size_t bytes;
    const void *send = contiguous(in[0], &bytes);
    if (!send)
        return txc_error(TXC_ERR_NOMEM, "_c10d_functional::broadcast: out of memory (%zu bytes)", bytes);
    memcpy(txc_impl_data(out), send, bytes);
    return txc_comm_broadcast((int)a->ints[0], txc_impl_data(out), bytes, (int)a->ints[2],
                              "_c10d_functional::broadcast");
}

/* ---- vocab_parallel_embedding ------------------------------------------------------ */

static txc_status infer_vocab_embedding(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    static const char op[] = "txc::vocab_parallel_embedding";
    if (n_in != 2 || a->n_ints < 1)
        return txc_error(TXC_ERR_INTERNAL, "%s: expected 2 inputs and an offset", op);
    const txc_tensor *w = in[0], *ids = in[1];
    if (w->ndim != 2 || !txc_dtype_is_float(w->dtype) || w->strides[1] != 1)
        return txc_error(TXC_ERR_INVALID, "%s: weight must be a 2-D float table with contiguous rows", op);
    if (ids->dtype != TXC_I64 && ids->dtype != TXC_I32)
        return txc_error(TXC_ERR_INVALID, "%s: ids must be int32 or int64, got %s", op, txc_dtype_name(ids->dtype));
    if (ids->ndim + 1 > TXC_MAX_DIMS || a->ints[0] < 0)
        return txc_error(TXC_ERR_INVALID, "%s: bad ids rank or offset", op);
    m->dtype = TXC_F32;
    m->ndim = ids->ndim + 1;
    memcpy(m->shape, ids->shape, sizeof(int64_t) * (size_t)ids->ndim);
    m->shape[ids->ndim] = w->shape[1];
    return TXC_OK;
}

static txc_status cpu_vocab_embedding(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    const txc_tensor *w = in[0], *ids = in[1];
    int64_t rows = w->shape[0], D = w->shape[1], off0 = a->ints[0], idx[TXC_MAX_DIMS] = {0};
    size_t es = txc_dtype_size(w->dtype);
    const char *wp = txc_impl_data(w), *ip = txc_impl_data(ids);
    float *op = txc_impl_data(out);
    for (int64_t i = 0; i < ids->numel; i++) {
        int64_t off = 0;
        for (int d = 0; d < ids->ndim; d++)
            off += idx[d] * ids->strides[d];
        int64_t id = ids->dtype == TXC_I64 ? ((const int64_t *)ip)[off] : ((const int32_t *)ip)[off];
        if (id < 0)
            return txc_error(TXC_ERR_INVALID, "txc::vocab_parallel_embedding: id %lld is negative", (long long)id);
        id -= off0;
        if (id >= 0 && id < rows)
            txc_ops_convert(w->dtype, wp + (size_t)(id * w->strides[0]) * es, (int64_t)es, TXC_F32, op + i * D, 4, D);
        else
            memset(op + i * D, 0, sizeof(float) * (size_t)D);
        txc_kern_next_index(idx, ids->ndim, ids->shape);
    }
    return TXC_OK;
}

void txc_ops_register_collective(txc_op_def *t)
{
    t[TXC_OP_ALL_REDUCE] = (txc_op_def){.infer = infer_all_reduce, .cpu = cpu_all_reduce};
    t[TXC_OP_ALL_GATHER] = (txc_op_def){.infer = infer_all_gather, .cpu = cpu_all_gather};
    t[TXC_OP_REDUCE_SCATTER] = (txc_op_def){.infer = infer_reduce_scatter, .cpu = cpu_reduce_scatter};
    t[TXC_OP_BROADCAST] = (txc_op_def){.infer = infer_broadcast, .cpu = cpu_broadcast};
    t[TXC_OP_VOCAB_EMBEDDING] = (txc_op_def){.infer = infer_vocab_embedding, .cpu = cpu_vocab_embedding};
}
