/* Graph passes: common subexpressions and constant folding. Elementwise
 * fusion is in jit/fusion.c. See jit/graph.h.
 *
 * Both passes respect the graph's aliasing rules: a value is one version of
 * a buffer; views alias their base's buffer; an in-place node writes a new
 * version of its input's buffer. Identical input value ids therefore do not
 * always mean identical bytes: a view value read before and after an
 * in-place write of its base buffer has the same id but different contents.
 * Both passes check the in-place writes explicitly. */
#include "jit/graph.h"
#include "txc/env.h"

#include <stdlib.h>
#include <string.h>

/* ---- shared helpers ------------------------------------------------------------------------ */

static int clamp_ints(int n) { return n < 0 ? 0 : n > TXC_MAX_DIMS + 2 ? TXC_MAX_DIMS + 2 : n; }

/* Attributes equal as the op sees them: the used ints, the scalars bit for
 * bit (NaN fill values compare equal, 0.0 and -0.0 do not), dtype, flags. */
static bool attrs_equal(const txc_op_attrs *a, const txc_op_attrs *b)
{
    if (a->n_ints != b->n_ints || a->dtype != b->dtype || a->flags != b->flags)
        return false;
    for (int i = 0, n = clamp_ints(a->n_ints); i < n; i++)
        if (a->ints[i] != b->ints[i])
            return false;
    return memcmp(a->f, b->f, sizeof a->f) == 0;
}

static uint64_t mix(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

static uint64_t node_key(const txc_node *n)
{
    uint64_t h = 14695981039346656037ull;
    int op = (int)n->op, dt = (int)n->attrs.dtype;
    h = mix(h, &op, sizeof op);
    h = mix(h, &n->n_in, sizeof n->n_in);
    h = mix(h, n->in, sizeof(int) * (size_t)n->n_in);
    h = mix(h, &n->attrs.flags, sizeof n->attrs.flags);
    h = mix(h, &dt, sizeof dt);
    h = mix(h, &n->attrs.n_ints, sizeof n->attrs.n_ints);
    h = mix(h, n->attrs.ints, sizeof(int64_t) * (size_t)clamp_ints(n->attrs.n_ints));
    return mix(h, n->attrs.f, sizeof n->attrs.f);
}

static bool same_computation(const txc_node *a, const txc_node *b)
{
    if (a->op != b->op || a->n_in != b->n_in || a->is_view != b->is_view)
        return false;
    for (int j = 0; j < a->n_in; j++)
        if (a->in[j] != b->in[j])
            return false;
    return attrs_equal(&a->attrs, &b->attrs);
}

static int buffer_of(const txc_graph *g, int v) { return g->values[v].buffer; }

/* ---- common-subexpression elimination ------------------------------------------------------ */

/* Does a live in-place node strictly between nodes `from` and `to` write a
 * buffer that node `n` reads? `ip` lists the in-place nodes in order. */
static bool written_between(const txc_graph *g, const int *ip, int n_ip, int from, int to, const txc_node *n)
{
    for (int k = 0; k < n_ip; k++) {
        if (ip[k] <= from)
            continue;
        if (ip[k] >= to)
            break;
        int b = buffer_of(g, g->nodes[ip[k]].out);
        for (int j = 0; j < n->n_in; j++)
            if (buffer_of(g, n->in[j]) == b)
                return true;
    }
    return false;
}

int txc_pass_cse(txc_graph *g)
{
    int nn = g->n_nodes;
    size_t cap = 16;
    while (cap < 2 * (size_t)nn + 2)
        cap *= 2;
    int *rep = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    bool *written = calloc((size_t)g->n_buffers + 1, sizeof *written);
    int *ip = malloc(sizeof(int) * ((size_t)nn + 1));
    int *slot = malloc(sizeof(int) * cap);
    if (!rep || !written || !ip || !slot) {
        free(rep);
        free(written);
        free(ip);
        free(slot);
        return 0; /* an optimisation: skipping it is correct */
    }
    for (int v = 0; v < g->n_values; v++)
        rep[v] = v;
    int n_ip = 0;
    for (int i = 0; i < nn; i++) {
        const txc_node *n = &g->nodes[i];
        if (!n->dead && n->inplace) {
            written[buffer_of(g, n->out)] = true;
            ip[n_ip++] = i;
        }
    }
    for (size_t s = 0; s < cap; s++)
        slot[s] = -1;

    int removed = 0;
    for (int i = 0; i < nn; i++) {
        txc_node *n = &g->nodes[i];
        if (n->dead)
            continue;
        for (int j = 0; j < n->n_in; j++)
            n->in[j] = rep[n->in[j]];
        /* A view (or in-place) value lives in its input's buffer; when the
         * input was redirected to an equal value, follow it. Equal values
         * have equal geometry (contiguous TEMP results, or equal views). */
        if ((n->is_view || n->inplace) && n->n_in > 0)
            g->values[n->out].buffer = buffer_of(g, n->in[0]);
        if (n->inplace || n->fused)
            continue;
        /* A result whose buffer is later written in place is state, not a
         * pure value: never merge it nor merge into it. Views carry no
         * bytes of their own and always merge. */
        if (!n->is_view && written[buffer_of(g, n->out)])
            continue;
        size_t s = (size_t)node_key(n) & (cap - 1);
        while (slot[s] >= 0 && !same_computation(&g->nodes[slot[s]], n))
            s = (s + 1) & (cap - 1);
        if (slot[s] >= 0) {
            int e = slot[s];
            if (n->is_view || !written_between(g, ip, n_ip, e, i, n)) {
                rep[n->out] = g->nodes[e].out;
                n->dead = true;
                removed++;
                continue;
            }
        }
        /* The latest occurrence is the best candidate for later ones: an
         * in-place write that separates it from them separates the earlier
         * ones too. */
        slot[s] = i;
    }
    for (int k = 0; k < g->n_outputs; k++)
        g->outputs[k] = rep[g->outputs[k]];
    free(rep);
    free(written);
    free(ip);
    free(slot);
    return removed;
}

/* ---- constant folding ---------------------------------------------------------------------- */

#define FOLD_MAX_BYTES ((int64_t)16 << 20)

/* A header over value v's bytes in its CONST buffer (like the plan's). */
static void const_header(const txc_graph *g, int v, txc_env *env, txc_tensor *h)
{
    const txc_value *x = &g->values[v];
    memset(h, 0, sizeof *h);
    h->refcount = 1 << 30;
    h->env = env;
    h->array = g->buffers[x->buffer].konst->array;
    h->dtype = x->dtype;
    h->ndim = x->ndim;
    memcpy(h->shape, x->shape, sizeof h->shape);
    memcpy(h->strides, x->strides, sizeof h->strides);
    h->offset = x->offset;
    h->numel = txc_shape_numel(x->ndim, x->shape);
    h->value = -1;
}

int txc_pass_fold(txc_graph *g, txc_env *env)
{
    if (!env)
        return 0;
    bool *written = calloc((size_t)g->n_buffers + 1, sizeof *written);
    bool *is_out = calloc((size_t)g->n_buffers + 1, sizeof *is_out);
    txc_tensor *hin = malloc(sizeof *hin * TXC_MAX_OP_INPUTS);
    if (!written || !is_out || !hin) {
        free(written);
        free(is_out);
        free(hin);
        return 0;
    }
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead && g->nodes[i].inplace)
            written[buffer_of(g, g->nodes[i].out)] = true;
    /* The caller receives outputs as borrowed tensors; a folded constant
     * would hand it the plan's constant memory. Keep them computed. */
    for (int k = 0; k < g->n_outputs; k++)
        is_out[buffer_of(g, g->outputs[k])] = true;

    int folded = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        txc_node *n = &g->nodes[i];
        if (n->dead || n->inplace || n->fused || n->n_in > TXC_MAX_OP_INPUTS)
            continue;
        bool all_const = true;
        for (int j = 0; j < n->n_in && all_const; j++)
            all_const = g->buffers[buffer_of(g, n->in[j])].kind == TXC_BUF_CONST;
        if (!all_const)
            continue;
        txc_value *v = &g->values[n->out];
        if (n->is_view) {
            if (n->n_in == 0)
                continue;
            /* The view already aliases the constant's bytes: no copy. */
            v->buffer = buffer_of(g, n->in[0]);
            v->producer = -1;
            n->dead = true;
            folded++;
            continue;
        }
        const txc_op_def *def = txc_op_get(n->op);
        txc_buffer *b = &g->buffers[v->buffer];
        if (!def || !def->cpu || b->kind != TXC_BUF_TEMP || written[v->buffer] || is_out[v->buffer])
            continue;
        int64_t numel = txc_shape_numel(v->ndim, v->shape);
        if (numel * (int64_t)txc_dtype_size(v->dtype) > FOLD_MAX_BYTES || numel != b->numel)
            continue;
        txc_tensor *args[TXC_MAX_OP_INPUTS];
        for (int j = 0; j < n->n_in; j++) {
            const_header(g, n->in[j], env, &hin[j]);
            args[j] = &hin[j];
        }
        /* Folding is an optimisation: on any failure (out of memory, or
         * e.g. an index out of range, which the plan then reports when it
         * runs) the node stays, and no error is left behind. */
        txc_status before = txc_last_status();
        txc_array *arr = txc_array_new(txc_env_device(env), v->dtype, v->ndim, v->shape);
        int64_t strides[TXC_MAX_DIMS];
        txc_impl_contiguous_strides(v->ndim, v->shape, strides);
        txc_tensor *t = arr ? txc_impl_tensor_new(env, arr, v->ndim, v->shape, strides, 0) : NULL;
        txc_array_release(arr);
        if (!t || def->cpu(t, args, n->n_in, &n->attrs) != TXC_OK) {
            txc_tensor_release(t);
            if (before == TXC_OK)
                txc_clear_error();
            continue;
        }
        b->kind = TXC_BUF_CONST;
        b->konst = t;
        b->arena_offset = -1;
        v->producer = -1;
        n->dead = true;
        folded++;
    }
    free(written);
    free(is_out);
    free(hin);
    return folded;
}

/* ---- residual adds into the linear before them ---------------------------------------------
 * add(y, r) or add(r, y) with y = linear(x, w[, b]) read by nothing else,
 * r computed before the linear runs and not written in between, and y, r
 * and the sum of one float dtype (float32, bfloat16 or float16) and one
 * shape with r contiguous: the linear adds r to its result after its bias
 * (TXC_ATTR_RESIDUAL: torch.addmm's input + mat1 @ mat2) and writes the
 * sum's value itself; the add dies. For a reduced dtype the linear first
 * rounds its float32 result to that dtype (y's value, as the unfused
 * linear stores it), then adds r in float32 and rounds the sum, as the
 * add's reduced-dtype kernel does; one float addition per element either
 * way: the bits do not change. */

static bool residual_dtype(txc_dtype d) { return d == TXC_F32 || d == TXC_BF16 || d == TXC_F16; }

int txc_pass_residual(txc_graph *g)
{
    int *uses = calloc((size_t)g->n_values + 1, sizeof *uses);
    if (!uses)
        return 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead)
            for (int j = 0; j < g->nodes[i].n_in; j++)
                uses[g->nodes[i].in[j]]++;
    for (int i = 0; i < g->n_outputs; i++)
        uses[g->outputs[i]]++;
    int fused = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        txc_node *add = &g->nodes[i];
        if (add->dead || add->op != TXC_OP_ADD || add->fused || add->is_view || add->inplace || add->n_in != 2 ||
            add->attrs.flags != 0)
            continue;
        for (int side = 0; side < 2; side++) {
            int y = add->in[side], r = add->in[1 - side], li = g->values[y].producer;
            if (y == r || li < 0 || uses[y] != 1)
                continue;
            txc_node *lin = &g->nodes[li];
            const txc_value *vy = &g->values[y], *vr = &g->values[r], *vs = &g->values[add->out];
            if (lin->dead || lin->op != TXC_OP_LINEAR || lin->fused || (lin->attrs.flags & TXC_ATTR_RESIDUAL) ||
                !residual_dtype(vy->dtype) || vr->dtype != vy->dtype || vs->dtype != vy->dtype || vr->ndim != vy->ndim ||
                vs->ndim != vy->ndim || memcmp(vr->shape, vy->shape, sizeof(int64_t) * (size_t)vy->ndim) != 0 ||
                memcmp(vs->shape, vy->shape, sizeof(int64_t) * (size_t)vy->ndim) != 0 || !txc_value_is_contiguous(vr) ||
                !txc_value_is_contiguous(vs) || vr->producer >= li)
                continue;
            /* r's bytes must be the same when the linear reads them as when the add would have */
            bool written = false;
            for (int k = li + 1; k < i && !written; k++)
                written = !g->nodes[k].dead && g->nodes[k].inplace &&
                          g->values[g->nodes[k].out].buffer == vr->buffer;
            int *in = written ? NULL : realloc(lin->in, sizeof(int) * (size_t)(lin->n_in + 1));
            if (!in)
                continue;
            lin->in = in;
            lin->in[lin->n_in++] = r;
            lin->attrs.flags |= TXC_ATTR_RESIDUAL;
            lin->out = add->out;
            g->values[add->out].producer = li;
            g->values[y].producer = -1;
            uses[y] = 0;
            add->dead = true;
            fused++;
            break;
        }
    }
    free(uses);
    return fused;
}
