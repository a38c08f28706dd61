/* The op frontends of include/txc/ops.h: pack arguments, dispatch. */
#include "env/env_impl.h"
#include "txc/ops.h"

#include <math.h>
#include <string.h>

#define CALL(op, ...)                                                                  \
    do {                                                                               \
        txc_tensor *in_[] = {__VA_ARGS__};                                             \
        return txc_dispatch(op, NULL, in_, (int)(sizeof in_ / sizeof in_[0]), &a);     \
    } while (0)

static txc_op_attrs ints_attrs(int n, const int64_t *v)
{
    txc_op_attrs a = {0};
    a.n_ints = n;
    if (n > 0)
        memcpy(a.ints, v, sizeof(int64_t) * (size_t)n);
    return a;
}

/* ---- creation -------------------------------------------------------------- */

txc_tensor *txc_full(txc_env *env, int ndim, const int64_t *shape, double value, txc_dtype dtype)
{
    if (ndim < 0 || ndim > TXC_MAX_DIMS) {
        txc_error(TXC_ERR_INVALID, "aten::full: %d dims (at most %d)", ndim, TXC_MAX_DIMS);
        return NULL;
    }
    txc_op_attrs a = ints_attrs(ndim, shape);
    a.f[0] = value;
    a.dtype = dtype;
    return txc_dispatch(TXC_OP_FULL, env, NULL, 0, &a);
}

txc_tensor *txc_zeros(txc_env *env, int ndim, const int64_t *shape, txc_dtype dtype)
{
    return txc_full(env, ndim, shape, 0.0, dtype);
}

txc_tensor *txc_ones(txc_env *env, int ndim, const int64_t *shape, txc_dtype dtype)
{
    return txc_full(env, ndim, shape, 1.0, dtype);
}

txc_tensor *txc_arange(txc_env *env, double start, double end, double step, txc_dtype dtype)
{
    txc_op_attrs a = {0};
    a.f[0] = start;
    a.f[1] = end;
    a.f[2] = step;
    a.dtype = dtype;
    return txc_dispatch(TXC_OP_ARANGE, env, NULL, 0, &a);
}

/* ---- views ------------------------------------------------------------------ */

/* Resolve one -1 in a view shape against t's numel. */
static bool resolve_shape(const char *op, const txc_tensor *t, int ndim, const int64_t *shape, int64_t *out)
{
    if (ndim < 0 || ndim > TXC_MAX_DIMS) {
        txc_error(TXC_ERR_INVALID, "%s: %d dims (at most %d)", op, ndim, TXC_MAX_DIMS);
        return false;
    }
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < ndim; i++) {
        out[i] = shape[i];
        if (shape[i] == -1) {
            if (infer >= 0) {
                txc_error(TXC_ERR_INVALID, "%s: only one dimension can be inferred", op);
                return false;
            }
            infer = i;
        } else if (shape[i] < 0) {
            txc_error(TXC_ERR_INVALID, "%s: invalid shape dimension %lld", op, (long long)shape[i]);
            return false;
        } else {
            known *= shape[i];
        }
    }
    if (infer >= 0) {
        if (known == 0 || t->numel % known != 0) {
            txc_error(TXC_ERR_INVALID, "%s: shape is invalid for input of size %lld", op, (long long)t->numel);
            return false;
        }
        out[infer] = t->numel / known;
    }
    return true;
}

txc_tensor *txc_view(txc_tensor *t, int ndim, const int64_t *shape)
{
    int64_t s[TXC_MAX_DIMS];
    if (t && !resolve_shape("aten::view", t, ndim, shape, s))
        return NULL;
    txc_op_attrs a = ints_attrs(t ? ndim : 0, s);
    CALL(TXC_OP_VIEW, t);
}

txc_tensor *txc_reshape(txc_tensor *t, int ndim, const int64_t *shape)
{
    if (!t)
        return NULL;
    int64_t s[TXC_MAX_DIMS];
    if (!resolve_shape("aten::reshape", t, ndim, shape, s))
        return NULL;
    if (txc_shape_numel(ndim, s) != t->numel) {
        txc_error(TXC_ERR_INVALID, "aten::reshape: shape is invalid for input of size %lld", (long long)t->numel);
        return NULL;
    }
    /* View when the layout allows, else copy then view (torch.reshape). */
    txc_status before = txc_last_status();
    txc_tensor *v = txc_view(t, ndim, s);
    if (v)
        return v;
    if (before == TXC_OK)
        txc_clear_error();
    txc_tensor *c = txc_contiguous(t);
    txc_tensor *r = txc_view(c, ndim, s);
    if (c && c->env->n_scopes == 0)
        txc_tensor_release(c); /* ours (no scope): r keeps the array alive */
    return r;
}

txc_tensor *txc_permute(txc_tensor *t, const int *dims)
{
    txc_op_attrs a = {0};
    if (t) {
        a.n_ints = t->ndim;
        for (int i = 0; i < t->ndim; i++)
            a.ints[i] = dims[i];
    }
    CALL(TXC_OP_PERMUTE, t);
}

txc_tensor *txc_transpose(txc_tensor *t, int dim0, int dim1)
{
    if (!t)
        return NULL;
    int d0, d1;
    if (txc_norm_dim("aten::transpose", dim0, t->ndim, &d0) != TXC_OK ||
        txc_norm_dim("aten::transpose", dim1, t->ndim, &d1) != TXC_OK)
        return NULL;
    int perm[TXC_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++)
        perm[i] = i;
    if (t->ndim > 0) {
        perm[d0] = d1;
        perm[d1] = d0;
    }
    return txc_permute(t, perm);
}

txc_tensor *txc_slice(txc_tensor *t, int dim, int64_t start, int64_t end, int64_t step)
{
    txc_op_attrs a = {0};
    a.n_ints = 4;
    a.ints[0] = dim;
    a.ints[1] = start;
    a.ints[2] = end;
    a.ints[3] = step;
    CALL(TXC_OP_SLICE, t);
}

txc_tensor *txc_narrow(txc_tensor *t, int dim, int64_t start, int64_t length)
{
    if (!t)
        return NULL;
    int d;
    if (txc_norm_dim("aten::narrow", dim, t->ndim, &d) != TXC_OK)
        return NULL;
    int64_t size = t->ndim ? t->shape[d] : 1;
    if (start < 0)
        start += size;
    if (start < 0 || length < 0 || start > size || length > size - start) {
        txc_error(TXC_ERR_INVALID, "aten::narrow: start %lld + length %lld exceeds dimension size %lld",
                  (long long)start, (long long)length, (long long)size);
        return NULL;
    }
    return txc_slice(t, d, start, start + length, 1);
}

txc_tensor *txc_select(txc_tensor *t, int dim, int64_t index)
{
    txc_op_attrs a = {0};
    a.n_ints = 2;
    a.ints[0] = dim;
    a.ints[1] = index;
    CALL(TXC_OP_SELECT, t);
}

txc_tensor *txc_expand(txc_tensor *t, int ndim, const int64_t *shape)
{
    if (ndim < 0 || ndim > TXC_MAX_DIMS) {
        txc_error(TXC_ERR_INVALID, "aten::expand: %d dims (at most %d)", ndim, TXC_MAX_DIMS);
        return NULL;
    }
    txc_op_attrs a = ints_attrs(ndim, shape);
    CALL(TXC_OP_EXPAND, t);
}

txc_tensor *txc_unsqueeze(txc_tensor *t, int dim)
{
    txc_op_attrs a = {0};
    a.n_ints = 1;
    a.ints[0] = dim;
    CALL(TXC_OP_UNSQUEEZE, t);
}

txc_tensor *txc_squeeze(txc_tensor *t, int dim)
{
    txc_op_attrs a = {0};
    a.n_ints = 1;
    a.ints[0] = dim;
    CALL(TXC_OP_SQUEEZE, t);
}

txc_tensor *txc_squeeze_all(txc_tensor *t)
{
    txc_op_attrs a = {0};
    a.flags = TXC_ATTR_ALL_DIMS;
    CALL(TXC_OP_SQUEEZE, t);
}

static txc_tensor *copy_as(txc_tensor *t, txc_dtype dtype)
{
    txc_op_attrs a = {0};
    a.dtype = dtype;
    CALL(TXC_OP_COPY, t);
}

txc_tensor *txc_contiguous(txc_tensor *t)
{
    if (t && txc_tensor_is_contiguous(t))
        return txc_env_scope_adopt(t->env, txc_tensor_retain(t));
    return t ? copy_as(t, t->dtype) : NULL;
}

txc_tensor *txc_to_dtype(txc_tensor *t, txc_dtype dtype)
{
    if (t && t->dtype == dtype)
        return txc_env_scope_adopt(t->env, txc_tensor_retain(t));
    return t ? copy_as(t, dtype) : NULL;
}

txc_tensor *txc_clone(txc_tensor *t) { return t ? copy_as(t, t->dtype) : NULL; }

/* ---- elementwise ---------------------------------------------------------- */

#define BINARY(fn, OP)                                                                 \
    txc_tensor *fn(txc_tensor *x, txc_tensor *y)                                       \
    {                                                                                  \
        txc_op_attrs a = {0};                                                          \
        CALL(OP, x, y);                                                                \
    }
#define BINARY_SCALAR(fn, OP)                                                          \
    txc_tensor *fn(txc_tensor *x, double s)                                            \
    {                                                                                  \
        txc_op_attrs a = {0};                                                          \
        a.flags = TXC_ATTR_SCALAR_RHS;                                                 \
        a.f[0] = s;                                                                    \
        CALL(OP, x);                                                                   \
    }
#define UNARY(fn, OP)                                                                  \
    txc_tensor *fn(txc_tensor *x)                                                      \
    {                                                                                  \
        txc_op_attrs a = {0};                                                          \
        CALL(OP, x);                                                                   \
    }

BINARY(txc_add, TXC_OP_ADD)
BINARY(txc_sub, TXC_OP_SUB)
BINARY(txc_mul, TXC_OP_MUL)
BINARY(txc_div, TXC_OP_DIV)
BINARY(txc_pow, TXC_OP_POW)
BINARY(txc_maximum, TXC_OP_MAXIMUM)
BINARY(txc_minimum, TXC_OP_MINIMUM)
BINARY(txc_eq, TXC_OP_EQ)
BINARY(txc_ne, TXC_OP_NE)
BINARY(txc_lt, TXC_OP_LT)
BINARY(txc_le, TXC_OP_LE)
BINARY(txc_gt, TXC_OP_GT)
BINARY(txc_ge, TXC_OP_GE)
BINARY(txc_logical_and, TXC_OP_LOGICAL_AND)
BINARY(txc_logical_or, TXC_OP_LOGICAL_OR)
BINARY(txc_bitwise_and, TXC_OP_BITWISE_AND)
BINARY(txc_bitwise_or, TXC_OP_BITWISE_OR)
BINARY_SCALAR(txc_add_scalar, TXC_OP_ADD)
BINARY_SCALAR(txc_sub_scalar, TXC_OP_SUB)
BINARY_SCALAR(txc_mul_scalar, TXC_OP_MUL)
BINARY_SCALAR(txc_div_scalar, TXC_OP_DIV)
BINARY_SCALAR(txc_pow_scalar, TXC_OP_POW)
BINARY_SCALAR(txc_rsub_scalar, TXC_OP_RSUB)
UNARY(txc_neg, TXC_OP_NEG)
UNARY(txc_abs, TXC_OP_ABS)
UNARY(txc_exp, TXC_OP_EXP)
UNARY(txc_log, TXC_OP_LOG)
UNARY(txc_sqrt, TXC_OP_SQRT)
UNARY(txc_rsqrt, TXC_OP_RSQRT)
UNARY(txc_sin, TXC_OP_SIN)
UNARY(txc_cos, TXC_OP_COS)
UNARY(txc_tanh, TXC_OP_TANH)
UNARY(txc_sigmoid, TXC_OP_SIGMOID)
UNARY(txc_silu, TXC_OP_SILU)
UNARY(txc_relu, TXC_OP_RELU)
UNARY(txc_logical_not, TXC_OP_LOGICAL_NOT)

txc_tensor *txc_gelu(txc_tensor *x, bool tanh_approximate)
{
    txc_op_attrs a = {0};
    a.flags = tanh_approximate ? TXC_ATTR_TANH : 0;
    CALL(TXC_OP_GELU, x);
}

txc_tensor *txc_where(txc_tensor *cond, txc_tensor *x, txc_tensor *y)
{
    txc_op_attrs a = {0};
    CALL(TXC_OP_WHERE, cond, x, y);
}

txc_tensor *txc_masked_fill(txc_tensor *t, txc_tensor *mask, double value)
{
    txc_op_attrs a = {0};
    a.f[0] = value;
    CALL(TXC_OP_MASKED_FILL, t, mask);
}

/* ---- reductions --------------------------------------------------------------- */

static txc_op_attrs reduce_attrs(int n_dims, const int *dims, bool keepdim)
{
    txc_op_attrs a = {0};
    a.n_ints = n_dims > TXC_MAX_DIMS + 2 ? TXC_MAX_DIMS + 2 : n_dims;
    for (int i = 0; i < a.n_ints; i++)
        a.ints[i] = dims[i];
    a.flags = (keepdim ? TXC_ATTR_KEEPDIM : 0) | (n_dims == 0 ? TXC_ATTR_ALL_DIMS : 0);
    return a;
}

txc_tensor *txc_sum(txc_tensor *t, int n_dims, const int *dims, bool keepdim)
{
    txc_op_attrs a = reduce_attrs(n_dims, dims, keepdim);
    CALL(TXC_OP_SUM, t);
}

txc_tensor *txc_mean(txc_tensor *t, int n_dims, const int *dims, bool keepdim)
{
    txc_op_attrs a = reduce_attrs(n_dims, dims, keepdim);
    CALL(TXC_OP_MEAN, t);
}

txc_tensor *txc_max(txc_tensor *t, int dim, bool keepdim)
{
    txc_op_attrs a = reduce_attrs(1, &dim, keepdim);
    CALL(TXC_OP_MAX, t);
}

txc_tensor *txc_argmax(txc_tensor *t, int dim, bool keepdim)
{
    txc_op_attrs a = reduce_attrs(1, &dim, keepdim);
    CALL(TXC_OP_ARGMAX, t);
}

txc_tensor *txc_max_all(txc_tensor *t)
{
    txc_op_attrs a = reduce_attrs(0, NULL, false);
    CALL(TXC_OP_MAX, t);
}

txc_tensor *txc_argmax_all(txc_tensor *t)
{
    txc_op_attrs a = reduce_attrs(0, NULL, false);
    CALL(TXC_OP_ARGMAX, t);
}

txc_tensor *txc_softmax(txc_tensor *t, int dim)
{
    txc_op_attrs a = reduce_attrs(1, &dim, false);
    CALL(TXC_OP_SOFTMAX, t);
}

txc_tensor *txc_log_softmax(txc_tensor *t, int dim)
{
    txc_op_attrs a = reduce_attrs(1, &dim, false);
    CALL(TXC_OP_LOG_SOFTMAX, t);
}

txc_tensor *txc_cumsum(txc_tensor *t, int dim, txc_dtype dtype)
{
    txc_op_attrs a = {0};
    a.n_ints = 1;
    a.ints[0] = dim;
    a.dtype = dtype;
    CALL(TXC_OP_CUMSUM, t);
}

/* ---- linear algebra and nn ------------------------------------------------------ */

txc_tensor *txc_matmul(txc_tensor *x, txc_tensor *y)
{
    txc_op_attrs a = {0};
    CALL(TXC_OP_MATMUL, x, y);
}

txc_tensor *txc_linear(txc_tensor *x, txc_tensor *weight, txc_tensor *bias)
{
    txc_op_attrs a = {0};
    if (bias)
        CALL(TXC_OP_LINEAR, x, weight, bias);
    a.flags = TXC_ATTR_NO_BIAS;
    CALL(TXC_OP_LINEAR, x, weight);
}

txc_tensor *txc_embedding(txc_tensor *weight, txc_tensor *ids)
{
    txc_op_attrs a = {0};
    CALL(TXC_OP_EMBEDDING, weight, ids);
}

txc_tensor *txc_rms_norm(txc_tensor *x, txc_tensor *weight, double eps)
{
    txc_op_attrs a = {0};
    a.f[0] = eps;
    if (weight)
        CALL(TXC_OP_RMS_NORM, x, weight);
    a.flags = TXC_ATTR_NO_WEIGHT;
    CALL(TXC_OP_RMS_NORM, x);
}

txc_tensor *txc_layer_norm(txc_tensor *x, txc_tensor *weight, txc_tensor *bias, double eps)
{
    txc_op_attrs a = {0};
    a.f[0] = eps;
    a.flags = (weight ? 0 : TXC_ATTR_NO_WEIGHT) | (bias ? 0 : TXC_ATTR_NO_BIAS);
    txc_tensor *in[3] = {x, NULL, NULL};
    int n = 1;
    if (weight)
        in[n++] = weight;
    if (bias)
        in[n++] = bias;
    return txc_dispatch(TXC_OP_LAYER_NORM, NULL, in, n, &a);
}

static txc_tensor *concat(txc_op_id op, txc_tensor *const *tensors, int n, int dim)
{
    if (n < 1 || n > TXC_MAX_OP_INPUTS) {
        txc_error(TXC_ERR_INVALID, "%s: expected 1 to %d tensors, got %d", txc_op_name(op), TXC_MAX_OP_INPUTS, n);
        return NULL;
    }
    txc_op_attrs a = {0};
    a.n_ints = 1;
    a.ints[0] = dim;
    return txc_dispatch(op, NULL, tensors, n, &a);
}

txc_tensor *txc_cat(txc_tensor *const *tensors, int n, int dim) { return concat(TXC_OP_CAT, tensors, n, dim); }
txc_tensor *txc_stack(txc_tensor *const *tensors, int n, int dim) { return concat(TXC_OP_STACK, tensors, n, dim); }

txc_tensor *txc_index_select(txc_tensor *t, int dim, txc_tensor *index)
{
    txc_op_attrs a = {0};
    a.n_ints = 1;
    a.ints[0] = dim;
    CALL(TXC_OP_INDEX_SELECT, t, index);
}

txc_tensor *txc_index_copy(txc_tensor *self, int dim, txc_tensor *index, txc_tensor *source)
{
    txc_op_attrs a = {0};
    a.n_ints = 1;
    a.ints[0] = dim;
    CALL(TXC_OP_INDEX_COPY, self, index, source);
}

txc_status txc_index_copy_(txc_tensor *self, int dim, txc_tensor *index, txc_tensor *source)
{
    txc_op_attrs a = {0};
    a.n_ints = 1;
    a.ints[0] = dim;
    a.flags = TXC_ATTR_INPLACE;
    txc_tensor *in[] = {self, index, source};
    if (!self || !index || !source)
        return txc_error(TXC_ERR_INVALID, "aten::index_copy_: NULL argument");
    txc_env *env = self->env;
    txc_tensor *r = txc_dispatch(TXC_OP_INDEX_COPY, NULL, in, 3, &a);
    if (!r)
        return txc_last_status() != TXC_OK ? txc_last_status() : TXC_ERR_INTERNAL;
    /* r is self retained: drop that reference unless a scope owns it. */
    if (env->n_scopes == 0)
        txc_tensor_release(r);
    return TXC_OK;
}

txc_tensor *txc_tril(txc_tensor *t, int64_t diagonal)
{
    txc_op_attrs a = {0};
    a.n_ints = 1;
    a.ints[0] = diagonal;
    CALL(TXC_OP_TRIL, t);
}

txc_tensor *txc_triu(txc_tensor *t, int64_t diagonal)
{
    txc_op_attrs a = {0};
    a.n_ints = 1;
    a.ints[0] = diagonal;
    CALL(TXC_OP_TRIU, t);
}

txc_tensor *txc_scaled_dot_product_attention(txc_tensor *q, txc_tensor *k, txc_tensor *v, txc_tensor *attn_mask,
                                             bool is_causal, double scale)
{
    txc_op_attrs a = {0};
    a.f[0] = scale;
    a.flags = is_causal ? TXC_ATTR_CAUSAL : 0;
    if (attn_mask)
        CALL(TXC_OP_SDPA, q, k, v, attn_mask);
    CALL(TXC_OP_SDPA, q, k, v);
}

txc_tensor *txc_rotary_embedding(txc_tensor *x, txc_tensor *cos, txc_tensor *sin)
{
    txc_op_attrs a = {0};
    CALL(TXC_OP_ROTARY, x, cos, sin);
}

txc_tensor *txc_causal_attention(txc_tensor *q, txc_tensor *k, txc_tensor *v, txc_tensor *cache_position,
                                 double scale)
{
    txc_op_attrs a = {0};
    a.f[0] = scale;
    a.flags = TXC_ATTR_POSITIONS;
    CALL(TXC_OP_CAUSAL_ATTENTION, q, k, v, cache_position);
}

/* ---- sampling ------------------------------------------------------------------ */

txc_tensor *txc_rng_state(txc_env *env, uint64_t seed)
{
    int64_t shape = 2, v[2] = {(int64_t)seed, 0};
    return txc_tensor_from_data(env ? env : txc_env_active(), TXC_I64, 1, &shape, v);
}

txc_tensor *txc_rng_uniform(txc_tensor *rng_state, int64_t n)
{
    txc_op_attrs a = {0};
    a.n_ints = 1;
    a.ints[0] = n;
    CALL(TXC_OP_RNG_UNIFORM, rng_state);
}

txc_status txc_rng_advance_(txc_tensor *rng_state, int64_t n)
{
    txc_op_attrs a = {0};
    a.n_ints = 1;
    a.ints[0] = n;
    a.flags = TXC_ATTR_INPLACE;
    if (!rng_state)
        return txc_error(TXC_ERR_INVALID, "txc::rng_advance_: NULL state");
    txc_env *env = rng_state->env;
    txc_tensor *r = txc_dispatch(TXC_OP_RNG_ADVANCE, NULL, &rng_state, 1, &a);
    if (!r)
        return txc_last_status() != TXC_OK ? txc_last_status() : TXC_ERR_INTERNAL;
    /* r is the state retained: drop that reference unless a scope owns it. */
    if (env->n_scopes == 0)
        txc_tensor_release(r);
    return TXC_OK;
}

txc_tensor *txc_sample(txc_tensor *logits, txc_tensor *u, int64_t top_k, double top_p, double min_p)
{
    txc_op_attrs a = {0};
    a.n_ints = 1;
    a.ints[0] = top_k;
    a.f[0] = top_p;
    a.f[1] = min_p;
    CALL(TXC_OP_SAMPLE, logits, u);
}

txc_tensor *txc_causal_attention_ext(txc_tensor *q, txc_tensor *k, txc_tensor *v, txc_tensor *cache_position,
                                     double scale, int64_t sliding_window, double softcap)
{
    txc_op_attrs a = {0};
    a.f[0] = scale;
    a.f[1] = softcap;
    a.flags = TXC_ATTR_POSITIONS;
    if (sliding_window != 0) {
        a.n_ints = 1;
        a.ints[0] = sliding_window;
    }
    CALL(TXC_OP_CAUSAL_ATTENTION, q, k, v, cache_position);
}
