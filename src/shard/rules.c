/*
 * Sharding propagation for eager ops (GSPMD's rules, Xu et al. 2021; JAX's
 * jit over NamedSharding'd arrays): the env's hook (env/env_impl.h) when an
 * op meets a tensor that carries a NamedSharding outside a shard_map body.
 *
 * A sharded tensor is its local block (txc_device_put); sizes an op takes
 * (a view's shape, a slice's range) are the local ones, as
 * txc_tensor_shape gives them. The rule of the op decides from the inputs'
 * specs how the local op computes the global one and what spec the result
 * has:
 *   - an input that is not split (no sharding, or P()) is replicated: where
 *     the other inputs split a dim it has in full, its local block is taken
 *     (a slice, no communication: GSPMD's reshard from replicated);
 *   - a contraction over a split dim (a row-parallel linear, a matmul over
 *     split K, a sum over a split dim, a vocab-split embedding) leaves
 *     partial sums: the rule adds an all_reduce over that axis (then the
 *     bias, once), and the result is replicated along it;
 *   - anything else a rule cannot do without moving data (two inputs split
 *     one dim over different axes, a softmax over a split dim, a view that
 *     does not keep the split dim the outer factor) has no rule: an error
 *     naming the op and the specs, or — with the implicit all-gather on
 *     (TXC_SHARDING_IMPLICIT_GATHER=1, txc_sharding_set_implicit_gather) —
 *     the inputs gathered whole, the op run replicated, and one line on
 *     stderr saying so.
 * Every local step is an op through txc_dispatch_local, so a tracer
 * records the slices and all_reduces as plan nodes like any other op.
 *
 * The rules are one table keyed by op (rule kind + flags); each kind is
 * one function below.
 */
#include "env/env_impl.h"
#include "ops/registry.h"
#include "shard/shard_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum rule_kind {
    R_NONE = 0,    /* no rule: an error, or the implicit all-gather */
    R_POINTWISE,   /* elementwise with broadcasting: the split dims stay */
    R_PERMUTE,     /* the spec permuted with the dims */
    R_VIEW,        /* a split dim must stay the outer factor of a result dim */
    R_UNSQUEEZE,   /* a new unsplit dim */
    R_SQUEEZE,     /* removed dims must not be split */
    R_SELECT,      /* the selected dim must not be split */
    R_SLICE,       /* a split dim only whole */
    R_EXPAND,      /* expanded dims must not be split */
    R_REDUCE,      /* sum/mean over a split dim: partial sums + all_reduce; max/argmax: not split */
    R_ALONG_DIM,   /* softmax, log_softmax, cumsum: their dim (ints[0]) not split */
    R_NORM,        /* rms_norm, layer_norm: the normalised last dim not split */
    R_LINEAR,      /* column-parallel: no communication; row-parallel: all_reduce, then the bias */
    R_MATMUL,      /* batch dims broadcast, M and N keep, split K: all_reduce */
    R_EMBEDDING,   /* vocab-split: masked lookup + all_reduce; hidden-split: keeps */
    R_ATTENTION,   /* sdpa, causal_attention: per batch / head shard */
    R_CAT,         /* the cat dim not split */
    R_STACK,       /* a new unsplit dim */
    R_INDEX,       /* index_select, index_copy: the indexed dim and the index not split */
    R_MANUAL,      /* collectives: on the local values, as called; the result unsharded */
} rule_kind;

enum {
    F_LAST_WHOLE = 1 << 0,  /* pointwise whose last dim is read whole (rotary's rotate_half) */
    F_LAST2_WHOLE = 1 << 1, /* tril / triu: the last two dims whole */
    F_SUM = 1 << 2,         /* reductions that sum (partials all_reduced) */
    F_MEAN = 1 << 3,        /* ... then divided by the split axes' sizes */
};

typedef struct rule {
    rule_kind kind;
    unsigned flags;
} rule;

static const rule rules[TXC_OP_COUNT] = {
    [TXC_OP_COPY] = {R_POINTWISE, 0},
    [TXC_OP_ADD] = {R_POINTWISE, 0}, [TXC_OP_SUB] = {R_POINTWISE, 0}, [TXC_OP_MUL] = {R_POINTWISE, 0},
    [TXC_OP_DIV] = {R_POINTWISE, 0}, [TXC_OP_POW] = {R_POINTWISE, 0}, [TXC_OP_MAXIMUM] = {R_POINTWISE, 0},
    [TXC_OP_MINIMUM] = {R_POINTWISE, 0}, [TXC_OP_RSUB] = {R_POINTWISE, 0}, [TXC_OP_EQ] = {R_POINTWISE, 0},
    [TXC_OP_NE] = {R_POINTWISE, 0}, [TXC_OP_LT] = {R_POINTWISE, 0}, [TXC_OP_LE] = {R_POINTWISE, 0},
    [TXC_OP_GT] = {R_POINTWISE, 0}, [TXC_OP_GE] = {R_POINTWISE, 0}, [TXC_OP_LOGICAL_AND] = {R_POINTWISE, 0},
    [TXC_OP_LOGICAL_OR] = {R_POINTWISE, 0},
    [TXC_OP_NEG] = {R_POINTWISE, 0}, [TXC_OP_ABS] = {R_POINTWISE, 0}, [TXC_OP_EXP] = {R_POINTWISE, 0},
    [TXC_OP_LOG] = {R_POINTWISE, 0}, [TXC_OP_SQRT] = {R_POINTWISE, 0}, [TXC_OP_RSQRT] = {R_POINTWISE, 0},
    [TXC_OP_SIN] = {R_POINTWISE, 0}, [TXC_OP_COS] = {R_POINTWISE, 0}, [TXC_OP_TANH] = {R_POINTWISE, 0},
    [TXC_OP_SIGMOID] = {R_POINTWISE, 0}, [TXC_OP_SILU] = {R_POINTWISE, 0}, [TXC_OP_GELU] = {R_POINTWISE, 0},
    [TXC_OP_RELU] = {R_POINTWISE, 0}, [TXC_OP_LOGICAL_NOT] = {R_POINTWISE, 0},
    [TXC_OP_WHERE] = {R_POINTWISE, 0}, [TXC_OP_MASKED_FILL] = {R_POINTWISE, 0},
    [TXC_OP_ROTARY] = {R_POINTWISE, F_LAST_WHOLE},
    [TXC_OP_TRIL] = {R_POINTWISE, F_LAST2_WHOLE}, [TXC_OP_TRIU] = {R_POINTWISE, F_LAST2_WHOLE},
    [TXC_OP_PERMUTE] = {R_PERMUTE, 0}, [TXC_OP_VIEW] = {R_VIEW, 0}, [TXC_OP_UNSQUEEZE] = {R_UNSQUEEZE, 0},
    [TXC_OP_SQUEEZE] = {R_SQUEEZE, 0}, [TXC_OP_SELECT] = {R_SELECT, 0}, [TXC_OP_SLICE] = {R_SLICE, 0},
    [TXC_OP_EXPAND] = {R_EXPAND, 0},
    [TXC_OP_SUM] = {R_REDUCE, F_SUM}, [TXC_OP_MEAN] = {R_REDUCE, F_SUM | F_MEAN}, [TXC_OP_MAX] = {R_REDUCE, 0},
    [TXC_OP_ARGMAX] = {R_REDUCE, 0},
    [TXC_OP_SOFTMAX] = {R_ALONG_DIM, 0}, [TXC_OP_LOG_SOFTMAX] = {R_ALONG_DIM, 0}, [TXC_OP_CUMSUM] = {R_ALONG_DIM, 0},
    [TXC_OP_RMS_NORM] = {R_NORM, 0}, [TXC_OP_LAYER_NORM] = {R_NORM, 0},
    [TXC_OP_LINEAR] = {R_LINEAR, 0}, [TXC_OP_MATMUL] = {R_MATMUL, 0}, [TXC_OP_EMBEDDING] = {R_EMBEDDING, 0},
    [TXC_OP_SDPA] = {R_ATTENTION, 0}, [TXC_OP_CAUSAL_ATTENTION] = {R_ATTENTION, 0},
    [TXC_OP_CAT] = {R_CAT, 0}, [TXC_OP_STACK] = {R_STACK, 0},
    [TXC_OP_INDEX_SELECT] = {R_INDEX, 0}, [TXC_OP_INDEX_COPY] = {R_INDEX, 0},
    [TXC_OP_ALL_REDUCE] = {R_MANUAL, 0}, [TXC_OP_ALL_GATHER] = {R_MANUAL, 0},
    [TXC_OP_REDUCE_SCATTER] = {R_MANUAL, 0}, [TXC_OP_BROADCAST] = {R_MANUAL, 0},
    [TXC_OP_VOCAB_EMBEDDING] = {R_MANUAL, 0},
};

/* One call under a rule: the inputs as the rule rewrites them (local
 * blocks of replicated operands), their specs (per dim the mesh axis, -1),
 * the attributes, and why no rule applies. */
typedef struct call {
    txc_op_id op;
    const char *name;
    txc_env *env;
    txc_mesh *mesh;
    int n;
    txc_tensor *in[TXC_MAX_OP_INPUTS];
    int8_t ax[TXC_MAX_OP_INPUTS][TXC_MAX_DIMS];
    txc_op_attrs a;
    bool no_rule; /* NULL result for want of a rule (not an error of a step) */
    char why[256];
} call;

static bool implicit_gather_set, implicit_gather_on;
static uint64_t implicit_gathers;
static unsigned char gather_said[TXC_OP_COUNT];

void txc_sharding_set_implicit_gather(bool on)
{
    __atomic_store_n(&implicit_gather_on, on, __ATOMIC_RELAXED);
    __atomic_store_n(&implicit_gather_set, true, __ATOMIC_RELEASE);
}

bool txc_sharding_implicit_gather(void)
{
    if (!__atomic_load_n(&implicit_gather_set, __ATOMIC_ACQUIRE)) {
        const char *e = getenv("TXC_SHARDING_IMPLICIT_GATHER");
        return e && *e && strcmp(e, "0") != 0;
    }
    return __atomic_load_n(&implicit_gather_on, __ATOMIC_RELAXED);
}

uint64_t txc_sharding_implicit_gather_count(void) { return __atomic_load_n(&implicit_gathers, __ATOMIC_RELAXED); }

static txc_tensor *rule_fail(call *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof c->why, fmt, ap);
    va_end(ap);
    c->no_rule = true;
    return NULL;
}

static int64_t axis_size(const call *c, int axis) { return c->mesh->shape[axis]; }
static const char *axis_name(const call *c, int axis) { return c->mesh->axis[axis]; }

/* The global size of input i's dim d. */
static int64_t gsize(const call *c, int i, int d)
{
    return c->in[i]->shape[d] * (c->ax[i][d] >= 0 ? axis_size(c, c->ax[i][d]) : 1);
}

static int norm_dim(int64_t d, int ndim) { return (int)(d < 0 ? d + ndim : d); }

static bool dim_ok(int d, int ndim) { return d >= 0 && d < (ndim > 0 ? ndim : 1); }

static txc_tensor *local(call *c, txc_op_id op, txc_tensor *const *in, int n, const txc_op_attrs *a)
{
    return txc_dispatch_local(op, c->env, in, n, a);
}

/* Arguments the op itself refuses (a bad dim, rank): its error. */
static txc_tensor *own_error(call *c)
{
    if (local(c, c->op, c->in, c->n, &c->a))
        return rule_fail(c, "arguments the rule does not read");
    return NULL;
}

/* Replicated input i's dim d becomes its block along `axis` (a slice of
 * the local copy: no communication). */
static bool localize(call *c, int i, int d, int axis)
{
    txc_tensor *t = c->in[i];
    const int64_t n = t->shape[d], k = axis_size(c, axis), r = c->mesh->coord[axis];
    if (n % k) {
        rule_fail(c, "dim %d of input %d (size %lld) does not divide by axis '%s' of size %lld", d, i, (long long)n,
                  axis_name(c, axis), (long long)k);
        return false;
    }
    txc_op_attrs at = {.n_ints = 4, .ints = {d, r * (n / k), (r + 1) * (n / k), 1}};
    c->in[i] = local(c, TXC_OP_SLICE, &t, 1, &at);
    c->ax[i][d] = (int8_t)axis;
    return c->in[i] != NULL;
}

/* Sum x's partial sums over each axis in `mask` (float32 on the wire). */
static txc_tensor *all_reduce(call *c, txc_tensor *x, unsigned mask)
{
    const txc_dtype dt = x ? x->dtype : TXC_F32;
    for (int axis = 0; x && axis < c->mesh->ndim; axis++) {
        if (!(mask & (1u << axis)))
            continue;
        if (x->dtype != TXC_F32) {
            txc_op_attrs cv = {.dtype = TXC_F32};
            x = local(c, TXC_OP_COPY, &x, 1, &cv);
        }
        txc_op_attrs at = {.n_ints = 3, .ints = {c->mesh->group[axis], c->mesh->shape[axis], 0}};
        x = x ? local(c, TXC_OP_ALL_REDUCE, &x, 1, &at) : NULL;
    }
    if (x && x->dtype != dt) {
        txc_op_attrs cv = {.dtype = dt};
        x = local(c, TXC_OP_COPY, &x, 1, &cv);
    }
    return x;
}

/* No mesh axis split two dims of the result. */
static bool distinct(call *c, int ndim, const int8_t *ax)
{
    for (int d = 0; d < ndim; d++)
        for (int e = d + 1; ax[d] >= 0 && e < ndim; e++)
            if (ax[e] == ax[d]) {
                rule_fail(c, "axis '%s' would split dims %d and %d of the result", axis_name(c, ax[d]), d, e);
                return false;
            }
    return true;
}

/* Broadcast inputs idx[0..n) over their leading nd[j] dims, aligned right
 * into `on` result dims (numpy's rules on the global sizes): a result dim
 * is split over the one axis its inputs split it over; replicated inputs
 * that have it in full take their block. */
static bool broadcast(call *c, const int *idx, const int *nd, int n, int on, int8_t *out)
{
    for (int o = 0; o < on; o++) {
        int axis = -1, from = -1;
        int64_t g = 1;
        for (int j = 0; j < n; j++) {
            int d = o - (on - nd[j]), i = idx[j];
            if (d < 0)
                continue;
            int a = c->ax[i][d];
            if (a >= 0 && axis >= 0 && a != axis) {
                rule_fail(c, "inputs %d and %d split dim %d over different axes ('%s', '%s')", from, i, o,
                          axis_name(c, axis), axis_name(c, a));
                return false;
            }
            if (a >= 0)
                axis = a, from = i;
            if (gsize(c, i, d) != 1)
                g = gsize(c, i, d);
        }
        out[o] = (int8_t)axis;
        for (int j = 0; j < n; j++) {
            int d = o - (on - nd[j]), i = idx[j];
            if (d < 0 || c->ax[i][d] >= 0 || c->in[i]->shape[d] == 1)
                continue;
            if (c->in[i]->shape[d] != g) {
                rule_fail(c, "dim %d: global sizes %lld and %lld do not broadcast", o, (long long)g,
                          (long long)c->in[i]->shape[d]);
                return false;
            }
            if (axis >= 0 && !localize(c, i, d, axis))
                return false;
        }
    }
    return distinct(c, on, out);
}

/* ---- the rules, one function per kind ------------------------------------------- */

static txc_tensor *r_pointwise(call *c, unsigned flags, int *on, int8_t *out)
{
    int idx[TXC_MAX_OP_INPUTS], nd[TXC_MAX_OP_INPUTS];
    *on = 0;
    for (int i = 0; i < c->n; i++) {
        idx[i] = i;
        nd[i] = c->in[i]->ndim;
        *on = nd[i] > *on ? nd[i] : *on;
    }
    if (!broadcast(c, idx, nd, c->n, *on, out))
        return NULL;
    int whole = flags & F_LAST2_WHOLE ? 2 : flags & F_LAST_WHOLE ? 1 : 0;
    for (int d = *on - whole; d < *on; d++)
        if (d >= 0 && out[d] >= 0)
            return rule_fail(c, "it reads dim %d whole, which is split over '%s'", d, axis_name(c, out[d]));
    return local(c, c->op, c->in, c->n, &c->a);
}

static txc_tensor *r_view(call *c, rule_kind kind, int *on, int8_t *out)
{
    txc_tensor *x = c->in[0];
    const int n = x->ndim;
    const int8_t *ax = c->ax[0];
    const txc_op_attrs *a = &c->a;
    if (n > TXC_MAX_DIMS || a->n_ints > TXC_MAX_DIMS || (kind == R_UNSQUEEZE && n == TXC_MAX_DIMS))
        return own_error(c);
    switch (kind) {
    case R_PERMUTE:
        *on = n;
        for (int i = 0; i < n; i++) {
            int d = norm_dim(a->ints[i], n);
            if (!dim_ok(d, n))
                return own_error(c);
            out[i] = ax[d];
        }
        break;
    case R_VIEW: { /* a split dim d must start a result dim j with the same elements before it */
        *on = a->n_ints;
        for (int j = 0; j < *on; j++)
            out[j] = -1;
        for (int d = 0; d < n; d++) {
            if (ax[d] < 0)
                continue;
            int64_t before = 1, p = 1;
            for (int e = 0; e < d; e++)
                before *= x->shape[e];
            int found = -1, first = -1;
            for (int j = 0; j < *on; p *= a->ints[j], j++)
                if (p == before) {
                    if (first < 0)
                        first = j;
                    if (a->ints[j] > 1 && found < 0)
                        found = j;
                }
            found = found >= 0 ? found : first;
            if (found < 0 || out[found] >= 0)
                return rule_fail(c, "the view does not keep split dim %d the outer factor of a dim", d);
            out[found] = ax[d];
        }
        break;
    }
    case R_UNSQUEEZE: {
        int d = norm_dim(a->ints[0], n + 1);
        if (!dim_ok(d, n + 1))
            return own_error(c);
        *on = n + 1;
        for (int i = 0, j = 0; i < *on && i < TXC_MAX_DIMS; i++)
            out[i] = i == d ? -1 : ax[j++];
        break;
    }
    case R_SQUEEZE:
    case R_SELECT: {
        int d = (a->flags & TXC_ATTR_ALL_DIMS) ? -1 : norm_dim(a->ints[0], n);
        *on = 0;
        for (int i = 0; i < n; i++) {
            bool gone = kind == R_SELECT ? i == d : x->shape[i] == 1 && (d < 0 || i == d);
            if (gone && ax[i] >= 0)
                return rule_fail(c, "it removes dim %d, which is split over '%s'", i, axis_name(c, ax[i]));
            if (!gone)
                out[(*on)++] = ax[i];
        }
        break;
    }
    case R_SLICE: {
        int d = norm_dim(a->ints[0], n);
        *on = n;
        memcpy(out, ax, (size_t)n);
        if (dim_ok(d, n) && n > 0 && ax[d] >= 0) {
            int64_t s = a->ints[1] < 0 ? a->ints[1] + x->shape[d] : a->ints[1], e = a->ints[2];
            if (s != 0 || e < x->shape[d] || a->ints[3] != 1)
                return rule_fail(c, "it slices dim %d, which is split over '%s'", d, axis_name(c, ax[d]));
        }
        break;
    }
    default: /* R_EXPAND */
        *on = a->n_ints;
        if (*on < n)
            return own_error(c);
        for (int j = 0; j < *on; j++) {
            int d = j - (*on - n);
            out[j] = d < 0 ? -1 : ax[d];
            if (d >= 0 && ax[d] >= 0 && a->ints[j] != -1 && a->ints[j] != x->shape[d])
                return rule_fail(c, "it expands dim %d, which is split over '%s'", d, axis_name(c, ax[d]));
        }
    }
    return local(c, c->op, c->in, c->n, a);
}

static txc_tensor *r_reduce(call *c, unsigned flags, int *on, int8_t *out)
{
    txc_tensor *x = c->in[0];
    const int n = x->ndim;
    bool red[TXC_MAX_DIMS] = {false};
    if ((c->a.flags & TXC_ATTR_ALL_DIMS) || c->a.n_ints == 0)
        for (int d = 0; d < n; d++)
            red[d] = true;
    else
        for (int i = 0; i < c->a.n_ints; i++) {
            int d = norm_dim(c->a.ints[i], n);
            if (dim_ok(d, n) && n > 0)
                red[d] = true;
        }
    const bool keep = c->a.flags & TXC_ATTR_KEEPDIM;
    unsigned partial = 0;
    int64_t k = 1;
    *on = 0;
    for (int d = 0; d < n; d++) {
        if (red[d] && c->ax[0][d] >= 0) {
            if (!(flags & F_SUM))
                return rule_fail(c, "it reduces dim %d, which is split over '%s'", d, axis_name(c, c->ax[0][d]));
            partial |= 1u << c->ax[0][d];
            k *= axis_size(c, c->ax[0][d]);
        }
        if (!red[d] || keep)
            out[(*on)++] = red[d] ? -1 : c->ax[0][d];
    }
    txc_tensor *r = local(c, c->op, c->in, c->n, &c->a);
    if (r && partial && !txc_dtype_is_float(r->dtype))
        return rule_fail(c, "a split sum of %s values", txc_dtype_name(r->dtype));
    if (r && partial)
        r = all_reduce(c, r, partial);
    if (r && partial && (flags & F_MEAN)) {
        txc_op_attrs dv = {.flags = TXC_ATTR_SCALAR_RHS, .f = {(double)k}};
        r = local(c, TXC_OP_DIV, &r, 1, &dv);
    }
    return r;
}

static txc_tensor *r_along_dim(call *c, int *on, int8_t *out)
{
    const int n = c->in[0]->ndim, d = norm_dim(c->a.ints[0], n);
    if (dim_ok(d, n) && n > 0 && c->ax[0][d] >= 0)
        return rule_fail(c, "it runs along dim %d, which is split over '%s'", d, axis_name(c, c->ax[0][d]));
    *on = n;
    memcpy(out, c->ax[0], (size_t)n);
    return local(c, c->op, c->in, c->n, &c->a);
}

static txc_tensor *r_norm(call *c, int *on, int8_t *out)
{
    const int n = c->in[0]->ndim;
    if (n > 0 && c->ax[0][n - 1] >= 0)
        return rule_fail(c, "it normalises the last dim, which is split over '%s'", axis_name(c, c->ax[0][n - 1]));
    for (int i = 1; i < c->n; i++)
        if (c->in[i]->ndim > 0 && c->ax[i][0] >= 0)
            return rule_fail(c, "its weight or bias (input %d) is split", i);
    *on = n;
    memcpy(out, c->ax[0], (size_t)n);
    return local(c, c->op, c->in, c->n, &c->a);
}

/* The contraction axis of two inputs' K dims: one split, the other takes
 * its block; -1: neither split. -2: no rule. */
static int contraction(call *c, int i, int di, int j, int dj)
{
    int a = c->ax[i][di], b = c->ax[j][dj];
    if (a >= 0 && b >= 0 && a != b) {
        rule_fail(c, "the contracted dim is split over '%s' in input %d and '%s' in input %d", axis_name(c, a), i,
                  axis_name(c, b), j);
        return -2;
    }
    return a >= 0 ? a : b;
}

static bool uses(const int8_t *ax, int n, int axis)
{
    for (int d = 0; d < n; d++)
        if (ax[d] == axis)
            return true;
    return false;
}

static txc_tensor *r_linear(call *c, int *on, int8_t *out)
{
    txc_tensor *x = c->in[0];
    const int n = x->ndim;
    const bool bias = !(c->a.flags & TXC_ATTR_NO_BIAS) && c->n > 2;
    if (n < 1 || c->in[1]->ndim != 2 || (c->a.flags & TXC_ATTR_RESIDUAL))
        return c->a.flags & TXC_ATTR_RESIDUAL ? rule_fail(c, "a fused residual") : own_error(c);
    int ka = contraction(c, 0, n - 1, 1, 1);
    if (ka == -2)
        return NULL;
    int na = c->ax[1][0];
    if (bias && c->in[2]->ndim == 1 && c->ax[2][0] >= 0) {
        if (na >= 0 && c->ax[2][0] != na)
            return rule_fail(c, "the weight's rows and the bias are split over different axes");
        na = c->ax[2][0];
    }
    if (ka >= 0 && (uses(c->ax[0], n - 1, ka) || ka == na))
        return rule_fail(c, "the contracted dim's axis '%s' also splits a dim of the result", axis_name(c, ka));
    if (na >= 0 && uses(c->ax[0], n - 1, na))
        return rule_fail(c, "axis '%s' splits both the rows of the input and of the weight", axis_name(c, na));
    if (ka >= 0 && ((c->ax[0][n - 1] < 0 && !localize(c, 0, n - 1, ka)) ||
                    (c->ax[1][1] < 0 && !localize(c, 1, 1, ka))))
        return NULL;
    if (na >= 0 && ((c->ax[1][0] < 0 && !localize(c, 1, 0, na)) ||
                    (bias && c->in[2]->ndim == 1 && c->ax[2][0] < 0 && !localize(c, 2, 0, na))))
        return NULL;
    *on = n;
    memcpy(out, c->ax[0], (size_t)(n - 1));
    out[n - 1] = (int8_t)na;
    if (ka < 0) /* column-parallel (or replicated): no communication */
        return local(c, TXC_OP_LINEAR, c->in, c->n, &c->a);
    /* row-parallel: partial sums, summed over the axis, then the bias once */
    txc_op_attrs at = c->a;
    at.flags |= TXC_ATTR_NO_BIAS;
    txc_tensor *r = all_reduce(c, local(c, TXC_OP_LINEAR, c->in, 2, &at), 1u << ka);
    if (r && bias) {
        txc_tensor *ab[] = {r, c->in[2]};
        txc_op_attrs z = {0};
        r = local(c, TXC_OP_ADD, ab, 2, &z);
    }
    return r;
}

static txc_tensor *r_matmul(call *c, int *on, int8_t *out)
{
    const int n = c->in[0]->ndim, m = c->in[1]->ndim;
    if (n < 2 || m < 2)
        return rule_fail(c, "a 1-D operand");
    int idx[2] = {0, 1}, nd[2] = {n - 2, m - 2};
    int nb = n > m ? n - 2 : m - 2;
    int ka = contraction(c, 0, n - 1, 1, m - 2);
    if (ka == -2)
        return NULL;
    const int ma = c->ax[0][n - 2], na = c->ax[1][m - 1];
    if (ka >= 0 && (uses(c->ax[0], n - 1, ka) || uses(c->ax[1], m - 2, ka) || c->ax[1][m - 1] == ka))
        return rule_fail(c, "the contracted dim's axis '%s' also splits a dim of the result", axis_name(c, ka));
    if (!broadcast(c, idx, nd, 2, nb, out))
        return NULL;
    if (ka >= 0 && ((c->ax[0][n - 1] < 0 && !localize(c, 0, n - 1, ka)) ||
                    (c->ax[1][m - 2] < 0 && !localize(c, 1, m - 2, ka))))
        return NULL;
    *on = nb + 2;
    out[nb] = (int8_t)ma;
    out[nb + 1] = (int8_t)na;
    if (!distinct(c, *on, out))
        return NULL;
    txc_tensor *r = local(c, TXC_OP_MATMUL, c->in, 2, &c->a);
    return ka >= 0 ? all_reduce(c, r, 1u << ka) : r;
}

static txc_tensor *r_embedding(call *c, int *on, int8_t *out)
{
    txc_tensor *w = c->in[0], *ids = c->in[1];
    if (w->ndim != 2)
        return own_error(c);
    const int va = c->ax[0][0], da = c->ax[0][1], q = ids->ndim;
    if ((va >= 0 && uses(c->ax[1], q, va)) || (da >= 0 && uses(c->ax[1], q, da)))
        return rule_fail(c, "an axis splits both the table and the ids");
    *on = q + 1;
    memcpy(out, c->ax[1], (size_t)q);
    out[q] = (int8_t)da;
    if (va < 0)
        return local(c, c->op, c->in, c->n, &c->a);
    /* vocab-parallel (Megatron-LM's VocabParallelEmbedding): this block's
     * rows looked up, the other ids zero, summed over the axis */
    if (txc_dtype_is_quantized(w->dtype))
        return rule_fail(c, "a vocab-split %s table", txc_dtype_name(w->dtype));
    const int64_t rows = w->shape[0], vocab = rows * axis_size(c, va);
    if (ids->value < 0 && (ids->dtype == TXC_I64 || ids->dtype == TXC_I32)) { /* concrete ids: range-checked */
        int64_t idx[TXC_MAX_DIMS] = {0};
        const char *p = txc_impl_data(ids);
        for (int64_t i = 0; i < ids->numel; i++) {
            int64_t off = 0;
            for (int d = 0; d < q; d++)
                off += idx[d] * ids->strides[d];
            int64_t id = ids->dtype == TXC_I64 ? ((const int64_t *)(const void *)p)[off]
                                               : ((const int32_t *)(const void *)p)[off];
            if (id < 0 || id >= vocab) {
                txc_error(TXC_ERR_INVALID, "%s: index %lld is out of range for a table of %lld rows", c->name,
                          (long long)id, (long long)vocab);
                return NULL;
            }
            for (int d = q - 1; d >= 0 && ++idx[d] == ids->shape[d]; d--)
                idx[d] = 0;
        }
    }
    txc_op_attrs at = {.n_ints = 1, .ints = {c->mesh->coord[va] * rows}};
    txc_tensor *r = all_reduce(c, local(c, TXC_OP_VOCAB_EMBEDDING, c->in, 2, &at), 1u << va);
    if (r && r->dtype != w->dtype) {
        txc_op_attrs cv = {.dtype = w->dtype};
        r = local(c, TXC_OP_COPY, &r, 1, &cv);
    }
    return r;
}

static txc_tensor *r_attention(call *c, int *on, int8_t *out)
{
    if (c->n < 3 || c->in[0]->ndim != 4 || c->in[1]->ndim != 4 || c->in[2]->ndim != 4)
        return rule_fail(c, "q, k, v of other than 4 dims");
    int8_t bh[2];
    for (int d = 0; d < 4; d++) {
        int axis = -1;
        for (int i = 0; i < 3; i++) {
            int a = c->ax[i][d];
            if (a >= 0 && d >= 2)
                return rule_fail(c, "input %d's dim %d (a sequence or feature dim) is split", i, d);
            if (a >= 0 && axis >= 0 && a != axis)
                return rule_fail(c, "q, k and v split dim %d over different axes", d);
            if (a >= 0)
                axis = a;
        }
        if (d < 2)
            bh[d] = (int8_t)axis;
    }
    if (bh[0] >= 0 && bh[0] == bh[1])
        return rule_fail(c, "axis '%s' splits the batch and the heads", axis_name(c, bh[0]));
    for (int i = 0; i < 3; i++) /* the block of each head (kv heads: the blocks of the query heads they serve) */
        for (int d = 0; d < 2; d++)
            if (bh[d] >= 0 && c->ax[i][d] < 0 && c->in[i]->shape[d] != 1 && !localize(c, i, d, bh[d]))
                return NULL;
    if (c->n > 3) {
        const int mn = c->in[3]->ndim;
        if (c->op == TXC_OP_CAUSAL_ATTENTION) {
            for (int d = 0; d < mn; d++)
                if (c->ax[3][d] >= 0)
                    return rule_fail(c, "cache_position is split");
        } else {
            for (int d = 0; d < mn; d++) { /* the mask, aligned right to (B, H, L, S) */
                int o = d + 4 - mn, a = c->ax[3][d];
                if (o < 0 || (a >= 0 && (o >= 2 || a != bh[o])))
                    return rule_fail(c, "the mask's dim %d is split otherwise than q", d);
                if (o < 2 && a < 0 && bh[o] >= 0 && c->in[3]->shape[d] != 1 && !localize(c, 3, d, bh[o]))
                    return NULL;
            }
        }
    }
    *on = 4;
    out[0] = bh[0];
    out[1] = bh[1];
    out[2] = out[3] = -1;
    return local(c, c->op, c->in, c->n, &c->a);
}

static txc_tensor *r_concat(call *c, bool stack, int *on, int8_t *out)
{
    const int n = c->in[0]->ndim;
    for (int i = 1; i < c->n; i++)
        if (c->in[i]->ndim != n)
            return own_error(c);
    if (stack && n >= TXC_MAX_DIMS)
        return own_error(c);
    const int d = norm_dim(c->a.ints[0], stack ? n + 1 : n);
    for (int e = 0; e < n; e++) {
        int axis = -1;
        for (int i = 0; i < c->n; i++) {
            int a = c->ax[i][e];
            if (a >= 0 && !stack && e == d)
                return rule_fail(c, "it concatenates along dim %d, which is split", d);
            if (a >= 0 && axis >= 0 && a != axis)
                return rule_fail(c, "inputs split dim %d over different axes", e);
            if (a >= 0)
                axis = a;
        }
        for (int i = 0; axis >= 0 && i < c->n; i++)
            if (c->ax[i][e] < 0 && !localize(c, i, e, axis))
                return NULL;
        out[e] = (int8_t)axis;
    }
    *on = n;
    if (stack && dim_ok(d, n + 1)) {
        memmove(out + d + 1, out + d, (size_t)(n - d));
        out[d] = -1;
        *on = n + 1;
    }
    return local(c, c->op, c->in, c->n, &c->a);
}

static txc_tensor *r_index(call *c, int *on, int8_t *out)
{
    const int n = c->in[0]->ndim, d = norm_dim(c->a.ints[0], n);
    if (c->n < 2 || !dim_ok(d, n))
        return own_error(c);
    for (int e = 0; e < c->in[1]->ndim; e++)
        if (c->ax[1][e] >= 0)
            return rule_fail(c, "the index is split");
    for (int i = 0; i < c->n; i += 2)
        if (c->in[i]->ndim == n && c->ax[i][d] >= 0)
            return rule_fail(c, "it indexes dim %d, which is split", d);
    *on = n;
    memcpy(out, c->ax[0], (size_t)n);
    if (c->op == TXC_OP_INDEX_COPY && c->n == 3 && c->in[2]->ndim == n) { /* self and source agree */
        for (int e = 0; e < n; e++) {
            int a = c->ax[0][e], b = c->ax[2][e];
            if (a >= 0 && b >= 0 && a != b)
                return rule_fail(c, "self and source split dim %d over different axes", e);
            if (a >= 0 && b < 0 && !localize(c, 2, e, a))
                return NULL;
            if (b >= 0 && a < 0) {
                if (c->a.flags & TXC_ATTR_INPLACE)
                    return rule_fail(c, "the source is split where self (written in place) is not");
                if (!localize(c, 0, e, b))
                    return NULL;
                out[e] = (int8_t)b;
            }
        }
    }
    return local(c, c->op, c->in, c->n, &c->a);
}

/* ---- the hook ------------------------------------------------------------------------ */

static void spec_str(const call *c, int i, char *buf, size_t cap)
{
    const txc_tensor *t = c->in[i];
    bool split = false;
    for (int d = 0; d < t->ndim; d++)
        split |= c->ax[i][d] >= 0;
    size_t o = (size_t)snprintf(buf, cap, "P(");
    for (int d = 0; split && d < t->ndim && o < cap; d++)
        o += (size_t)snprintf(buf + o, cap - o, c->ax[i][d] >= 0 ? "%s'%s'" : "%sNone%.0s", d ? ", " : "",
                              c->ax[i][d] >= 0 ? c->mesh->axis[c->ax[i][d]] : "");
    if (o < cap)
        snprintf(buf + o, cap - o, ")");
}

static void specs_str(const call *c, char *buf, size_t cap)
{
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < c->n && o < cap; i++) {
        char s[128];
        spec_str(c, i, s, sizeof s);
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? " x " : "", s);
    }
}

/* Whether an op of this kind may gather its inputs instead: not the views
 * and index ops, whose sizes and indices are the local shard's (on the
 * gathered value they would mean something else), nor an in-place op. */
static bool gathers(rule_kind k)
{
    switch (k) {
    case R_PERMUTE: case R_VIEW: case R_UNSQUEEZE: case R_SQUEEZE: case R_SELECT: case R_SLICE: case R_EXPAND:
    case R_INDEX:
        return false;
    default:
        return true;
    }
}

/* The inputs gathered whole, the op replicated (JAX's implicit all-gather). */
static txc_tensor *gather_and_run(call *c, txc_tensor *const *orig)
{
    txc_tensor *g[TXC_MAX_OP_INPUTS];
    for (int i = 0; i < c->n; i++) {
        g[i] = orig[i];
        const txc_sharding *s = orig[i]->sharding;
        for (int d = 0; s && d < orig[i]->ndim && g[i]; d++)
            if (s->axis[d] >= 0) {
                const int a = s->axis[d];
                txc_op_attrs at = {.n_ints = 3, .ints = {c->mesh->group[a], c->mesh->shape[a], d}};
                g[i] = local(c, TXC_OP_ALL_GATHER, &g[i], 1, &at);
            }
        if (!g[i])
            return NULL;
    }
    return local(c, c->op, g, c->n, &c->a);
}

static txc_tensor *propagate(txc_op_id op, txc_env *env, txc_tensor *const *in, int n_in, const txc_op_attrs *attrs)
{
    call *c = calloc(1, sizeof *c);
    if (!c) {
        txc_error(TXC_ERR_NOMEM, "out of memory (sharding rule)");
        return NULL;
    }
    c->op = op;
    c->name = txc_op_name(op);
    c->env = env;
    c->n = n_in;
    c->a = *attrs;
    int first = -1;
    for (int i = 0; i < n_in; i++) {
        c->in[i] = in[i];
        const txc_sharding *s = in[i]->sharding;
        for (int d = 0; d < TXC_MAX_DIMS; d++)
            c->ax[i][d] = s && d < in[i]->ndim ? s->axis[d] : -1;
        if (!s)
            continue;
        if (first < 0) {
            first = i;
            c->mesh = s->mesh;
        } else if (s->mesh != c->mesh) {
            txc_error(TXC_ERR_INVALID, "%s: inputs %d and %d are sharded over two different meshes", c->name, first, i);
            free(c);
            return NULL;
        }
    }
    const rule r = rules[op];
    int mark = txc_env_scope_begin(env);
    if (mark < 0) {
        free(c);
        return NULL;
    }
    int on = 0;
    int8_t out[TXC_MAX_DIMS];
    bool sharded_result = true;
    txc_tensor *res = NULL;
    switch (r.kind) {
    case R_POINTWISE: res = r_pointwise(c, r.flags, &on, out); break;
    case R_PERMUTE: case R_VIEW: case R_UNSQUEEZE: case R_SQUEEZE: case R_SELECT: case R_SLICE: case R_EXPAND:
        res = r_view(c, r.kind, &on, out);
        break;
    case R_REDUCE: res = r_reduce(c, r.flags, &on, out); break;
    case R_ALONG_DIM: res = r_along_dim(c, &on, out); break;
    case R_NORM: res = r_norm(c, &on, out); break;
    case R_LINEAR: res = r_linear(c, &on, out); break;
    case R_MATMUL: res = r_matmul(c, &on, out); break;
    case R_EMBEDDING: res = r_embedding(c, &on, out); break;
    case R_ATTENTION: res = r_attention(c, &on, out); break;
    case R_CAT: case R_STACK: res = r_concat(c, r.kind == R_STACK, &on, out); break;
    case R_INDEX: res = r_index(c, &on, out); break;
    case R_MANUAL:
        res = local(c, op, in, n_in, attrs);
        sharded_result = false;
        break;
    default: res = rule_fail(c, "the op has no sharding rule"); break;
    }
    if (!res && c->no_rule) {
        /* reset the inputs' specs to the caller's for the message */
        for (int i = 0; i < n_in; i++) {
            c->in[i] = in[i];
            for (int d = 0; d < TXC_MAX_DIMS; d++)
                c->ax[i][d] = in[i]->sharding && d < in[i]->ndim ? in[i]->sharding->axis[d] : -1;
        }
        char specs[512];
        specs_str(c, specs, sizeof specs);
        if (txc_sharding_implicit_gather() && gathers(r.kind) && !(attrs->flags & TXC_ATTR_INPLACE)) {
            if (!__atomic_exchange_n(&gather_said[op], 1, __ATOMIC_RELAXED))
                fprintf(stderr, "txc: implicit all-gather: no sharding rule for %s with %s (%s): the inputs are "
                                "gathered whole and the op runs replicated\n", c->name, specs, c->why);
            __atomic_add_fetch(&implicit_gathers, 1, __ATOMIC_RELAXED);
            txc_clear_error();
            res = gather_and_run(c, in);
            on = res ? res->ndim : 0;
            memset(out, -1, sizeof out);
        } else {
            txc_error(TXC_ERR_UNSUPPORTED, "no sharding rule for %s with %s (%s); gather the inputs first "
                                           "(txc_gather), or allow an implicit all-gather "
                                           "(TXC_SHARDING_IMPLICIT_GATHER=1)", c->name, specs, c->why);
        }
    }
    const txc_sharding *sh = NULL;
    if (res && sharded_result && !(sh = txc_shard_intern(c->mesh, on, out)))
        res = NULL;
    txc_tensor *keep = res ? txc_tensor_retain(res) : NULL;
    txc_env_scope_end(env, mark);
    free(c);
    if (!keep)
        return NULL;
    keep->sharding = sh;
    return txc_env_scope_adopt(env, keep);
}

void txc_shard_rules_install(void) { txc_env_set_shard_hook(propagate); }
