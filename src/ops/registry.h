/*
 * ops/registry.h — the op table: one descriptor per op.
 *
 * Adding an op is a checklist (as ggml's): an enum value below, a line in
 * the name table (registry.c, checked by a static assert on TXC_OP_COUNT),
 * a descriptor set by one of the txc_ops_register_* functions (shape/dtype
 * inference + CPU kernel, or a view function), a frontend in
 * include/txc/ops.h (implemented in src/env/frontend.c) and a fixture case
 * in scripts/gen_op_fixtures.py checked by tests/test_ops.c.
 *
 * Names are aten's ("aten::add"). This layer knows no environment: the env
 * (src/env/dispatch.c) looks an op up here, infers, allocates and calls the
 * kernel. Kernels read inputs with any strides and write a contiguous output
 * they did not allocate.
 */
#ifndef TXC_OPS_REGISTRY_H
#define TXC_OPS_REGISTRY_H

#include <stdbool.h>
#include <stdint.h>
#include "core/impl.h"
#include "txc/status.h"

typedef enum txc_op_id {
    /* creation */
    TXC_OP_FULL, TXC_OP_ARANGE,
    /* views (no kernel: a view function) */
    TXC_OP_VIEW, TXC_OP_PERMUTE, TXC_OP_SLICE, TXC_OP_SELECT, TXC_OP_EXPAND,
    TXC_OP_UNSQUEEZE, TXC_OP_SQUEEZE,
    /* copies */
    TXC_OP_COPY, /* contiguous / clone / to(dtype): out = in converted */
    /* binary elementwise (inputs: 2 tensors, or 1 tensor + attrs.f[0] when
     * attrs.flags & TXC_ATTR_SCALAR_RHS) */
    TXC_OP_ADD, TXC_OP_SUB, TXC_OP_MUL, TXC_OP_DIV, TXC_OP_POW, TXC_OP_MAXIMUM,
    TXC_OP_MINIMUM, TXC_OP_RSUB,
    TXC_OP_EQ, TXC_OP_NE, TXC_OP_LT, TXC_OP_LE, TXC_OP_GT, TXC_OP_GE,
    TXC_OP_LOGICAL_AND,
    /* unary elementwise */
    TXC_OP_NEG, TXC_OP_ABS, TXC_OP_EXP, TXC_OP_LOG, TXC_OP_SQRT, TXC_OP_RSQRT,
    TXC_OP_SIN, TXC_OP_COS, TXC_OP_TANH, TXC_OP_SIGMOID, TXC_OP_SILU, TXC_OP_GELU,
    TXC_OP_RELU, TXC_OP_LOGICAL_NOT,
    /* selection */
    TXC_OP_WHERE, TXC_OP_MASKED_FILL,
    /* reductions */
    TXC_OP_SUM, TXC_OP_MEAN, TXC_OP_MAX, TXC_OP_ARGMAX, TXC_OP_SOFTMAX, TXC_OP_LOG_SOFTMAX,
    /* linear algebra and nn */
    TXC_OP_MATMUL, TXC_OP_LINEAR, TXC_OP_EMBEDDING, TXC_OP_RMS_NORM, TXC_OP_LAYER_NORM,
    TXC_OP_CAT, TXC_OP_STACK, TXC_OP_INDEX_SELECT, TXC_OP_INDEX_COPY, TXC_OP_TRIL,
    TXC_OP_TRIU, TXC_OP_SDPA, TXC_OP_CAUSAL_ATTENTION, TXC_OP_ROTARY,
    /* sampling (sample.c) */
    TXC_OP_RNG_UNIFORM, TXC_OP_RNG_ADVANCE, TXC_OP_SAMPLE,
    /* collectives (collective.c; attrs.ints = {group, group size, dim or root}) */
    TXC_OP_ALL_REDUCE, TXC_OP_ALL_GATHER, TXC_OP_REDUCE_SCATTER, TXC_OP_BROADCAST,
    TXC_OP_VOCAB_EMBEDDING,
    /* added later, at the end so that earlier ids keep their numbers */
    TXC_OP_LOGICAL_OR, /* elementwise.c */
    TXC_OP_CUMSUM,     /* scan.c: attrs.ints[0] = dim, attrs.dtype = the result's */
    TXC_OP_BITWISE_AND, TXC_OP_BITWISE_OR, /* elementwise.c: integer and bool tensors */
    TXC_OP_COUNT
} txc_op_id;

#define TXC_MAX_OP_INPUTS 64

/* Flags in txc_op_attrs.flags. */
enum {
    TXC_ATTR_SCALAR_RHS = 1 << 0, /* binary op with attrs.f[0] as right operand */
    TXC_ATTR_KEEPDIM = 1 << 1,    /* reductions */
    TXC_ATTR_ALL_DIMS = 1 << 2,   /* reductions over every dim */
    TXC_ATTR_CAUSAL = 1 << 3,     /* sdpa is_causal */
    TXC_ATTR_TANH = 1 << 4,       /* gelu approximate="tanh" */
    TXC_ATTR_NO_WEIGHT = 1 << 5,  /* norms/linear: optional inputs absent */
    TXC_ATTR_NO_BIAS = 1 << 6,
    TXC_ATTR_INPLACE = 1 << 7,    /* index_copy_: out is in[0] itself */
    TXC_ATTR_POSITIONS = 1 << 8,  /* causal_attention: in[3] is cache_position */
    TXC_ATTR_RESIDUAL = 1 << 9,   /* linear: the last input (the result's float dtype and shape, contiguous) is added
                                     to the result after the bias (the jit's residual fusion, jit/passes.c) */
};

/* Non-tensor arguments of an op call: plain data, hashable, recordable by
 * a tracer. ints: dims, shapes, offsets; f: scalars (eps, fill value,
 * scale, arange start/end/step); dtype: the result dtype of creation and
 * copy ops. */
typedef struct txc_op_attrs {
    int64_t ints[TXC_MAX_DIMS + 2];
    int n_ints;
    double f[3];
    txc_dtype dtype;
    unsigned flags;
} txc_op_attrs;

/* Result description produced by inference. */
typedef struct txc_meta {
    txc_dtype dtype;
    int ndim;
    int64_t shape[TXC_MAX_DIMS];
} txc_meta;

/* Result view produced by a view op: shape/strides/offset over in[0]'s array. */
typedef struct txc_view_meta {
    int ndim;
    int64_t shape[TXC_MAX_DIMS];
    int64_t strides[TXC_MAX_DIMS];
    int64_t offset;
} txc_view_meta;

typedef struct txc_op_def {
    const char *name; /* aten name, filled by registry.c */
    /* Shape/dtype inference; records an error (naming the op) and returns
     * non-OK on bad inputs. NULL for view ops. */
    txc_status (*infer)(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *out);
    /* CPU kernel: out is allocated, contiguous, of the inferred meta.
     * May fail (e.g. index out of range) with an error. */
    txc_status (*cpu)(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a);
    /* View ops only. */
    txc_status (*view)(const txc_tensor *in, const txc_op_attrs *a, txc_view_meta *out);
} txc_op_def;

/* The table, indexed by txc_op_id. */
const txc_op_def *txc_op_get(txc_op_id id);
/* Linears txc_ops_linear_group runs as one job, at most. */
#define TXC_LINEAR_GROUP_MAX 8
/* Run n aten::linear calls that share their input x (args[i] = {x, w_i[,
 * b_i]}, attrs[i] their attrs; outs[i] preallocated as the op's inference
 * gives) — the compiled plan's sibling projections. A single vector x
 * (M = 1, float32, contiguous) with row-major weights and float32 outputs
 * runs as one grouped GEMV (txc_kern_gemv_group: one meeting of the
 * threads instead of n); anything else runs the n linears one by one.
 * Results are bit-identical to n separate calls. Errors: those of
 * aten::linear (TXC_ERR_NOMEM for a work buffer). */
txc_status txc_ops_linear_group(int n, txc_tensor *const *outs, txc_tensor *const *const *args,
                                const txc_op_attrs *const *attrs);
const char *txc_op_name(txc_op_id id);

/* Registration, one function per kernel file (each fills its entries). */
void txc_ops_register_views(txc_op_def *table);
void txc_ops_register_elementwise(txc_op_def *table);
void txc_ops_register_reduce(txc_op_def *table);
void txc_ops_register_linalg(txc_op_def *table);
void txc_ops_register_nn(txc_op_def *table);
void txc_ops_register_attention(txc_op_def *table);
void txc_ops_register_sample(txc_op_def *table);
void txc_ops_register_collective(txc_op_def *table);
void txc_ops_register_scan(txc_op_def *table);

/* ---- helpers for inference and kernels (ops/util.c) --------------------- */

/* torch.result_type of two dtypes (bool < i32 < i64 < bf16,f16 < f32;
 * bf16 with f16 gives f32). */
txc_dtype txc_promote(txc_dtype a, txc_dtype b);
/* torch's result dtype for tensor <op> python scalar. */
txc_dtype txc_promote_scalar(txc_dtype t, double s);
/* Broadcast two shapes (numpy rules). Error names `op`. */
txc_status txc_broadcast_shapes(const char *op, int na, const int64_t *sa, int nb,
                                const int64_t *sb, int *nout, int64_t *out);
/* Normalise dim (negative from the end) for a tensor of `ndim` dims
 * (ndim 0 accepts -1 and 0, as torch). Error names `op`. */
txc_status txc_norm_dim(const char *op, int64_t dim, int ndim, int *out);
/* Strides of `t` broadcast to `ndim`/`shape` (0 for stretched dims). */
void txc_broadcast_strides(const txc_tensor *t, int ndim, const int64_t *shape, int64_t *strides);

/* Per-thread scratch memory for kernels: a buffer per slot that grows to
 * the largest size asked and is kept, so a kernel run again on the same
 * shapes (a compiled plan's steady state) allocates nothing. The buffer is
 * valid until the next call for the same slot on this thread; contents are
 * not preserved. A pool worker's buffers are freed when it exits (the first
 * allocation installs txc_scratch_free_all as txc_threads_set_worker_exit's
 * hook). NULL on out-of-memory (no error recorded). */
enum {
    TXC_SCRATCH_ATTENTION, /* sdpa: q/score/out chunks, packed K/V */
    TXC_SCRATCH_ATTN_PARTS, /* sdpa split by key blocks: each block's max, sum and P·V */
    TXC_SCRATCH_POSITIONS, /* causal_attention: cache_position as int64 */
    TXC_SCRATCH_GEMM_A,    /* matmul/linear: left operand packed to f32 */
    TXC_SCRATCH_GEMM_B,    /* matmul/linear: right operand packed to f32 */
    TXC_SCRATCH_GEMM_C,    /* matmul/linear: f32 result before conversion */
    TXC_SCRATCH_ROW,       /* inside txc_kern_gemm_nt/nn; linear's bias after it */
    TXC_SCRATCH_GEMM_PACK, /* inside txc_kern_gemm_nt: A packed to bf16 tiles (AMX), to 6-row f32 panels (AVX2);
                              the multi-row GEMV's k-blocked accumulators */
    TXC_SCRATCH_INDEX,     /* index tensors read as int64 */
    TXC_SCRATCH_NORM,      /* rms_norm/layer_norm rows and parameters */
    TXC_SCRATCH_REDUCE,    /* reductions' accumulators; softmax rows */
    TXC_SCRATCH_COLL_SEND, /* collectives: the input made contiguous */
    TXC_SCRATCH_COLL_RECV, /* collectives: every device's part */
    TXC_SCRATCH_SLOTS
};
void *txc_scratch(size_t bytes, int slot);
/* Free this thread's scratch buffers. */
void txc_scratch_free_all(void);

#endif
