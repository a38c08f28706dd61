/* Pattern rewrites: compositions of small ops that txc has one kernel for,
 * found in the traced graph and replaced by that kernel. See jit/graph.h.
 *
 * A frontend that traces a model's own Python code (python/: transformers'
 * classes through torch's dispatch) records its norms and rotary embeddings
 * op by op, where txc's own model code (src/models/llama.c) calls one
 * kernel. Two patterns, both transformers' (modeling_llama.py, copied by
 * the other decoder families):
 *
 *   LlamaRMSNorm.forward
 *     x = x0.to(float32)                       COPY (absent when x0 is float32)
 *     v = x.pow(2).mean(-1, keepdim=True)      POW scalar 2, MEAN last dim keepdim
 *     h = x * torch.rsqrt(v + eps)             ADD scalar eps, RSQRT, MUL
 *     y = weight * h.to(x0.dtype)              COPY (absent for float32), MUL
 *   -> y = aten::rms_norm(x0, weight, eps)
 *
 *   apply_rotary_pos_emb, for q and for k
 *     y = (x * cos) + (rotate_half(x) * sin),  MUL, MUL, ADD
 *     rotate_half(x) = cat(-x[..., d/2:], x[..., :d/2], -1)   SLICE, SLICE, NEG, CAT
 *   -> y = txc::rotary_embedding(x, cos, sin)
 *
 * The root node (the last one) keeps its output value and becomes the
 * kernel; the pattern's other nodes die (no node or value is added, moved
 * or renumbered: the compile cache's loader checks a plan read from a file
 * against the traced graph by matching the same pattern at the same root,
 * jit/persist.c). A pattern matches only when every intermediate has the
 * pattern as its only reader and is no graph output, the dtypes are the
 * ones the kernel rounds as the composition does, and no in-place write
 * between the pattern's first node and its root touches a buffer the
 * kernel reads there.
 *
 * Numerics. rotary_embedding rounds each product and the sum to the
 * result's dtype as the separate ops do (txc/ops.h): the same bits.
 * rms_norm computes the composition's expression in the same order with the
 * same float32 roundings (x*x, the mean in float32 of a double sum, + eps,
 * 1/sqrtf, x * r rounded to x0's dtype, weight * h rounded to the result's);
 * only the double sum of the squares is accumulated in another order (one
 * sum in rms_norm, eight partial sums in mean), so the mean can differ by
 * one float32 rounding (relative 2^-24) when the double sums round to
 * different floats — far inside rms_norm's tolerance against PyTorch
 * (which sums in float32). */
#include "jit/graph.h"

#include <stdlib.h>
#include <string.h>

#define PAT_MAX_DEAD 8

typedef struct pat_match {
    txc_op_id op;
    int n_in;
    int in[3];
    txc_op_attrs attrs;
    int n_dead;
    int dead[PAT_MAX_DEAD]; /* the pattern's other kernel nodes */
    int first;              /* its first node */
} pat_match;

/* The live, non-view, non-in-place, unfused node of op producing v, or -1. */
static int kernel_of(const txc_graph *g, int v, txc_op_id op)
{
    int p = g->values[v].producer;
    if (p < 0 || p >= g->n_nodes)
        return -1;
    const txc_node *n = &g->nodes[p];
    if (n->dead || n->is_view || n->inplace || n->fused || n->op != op || n->out != v)
        return -1;
    return p;
}

/* The live view node of op producing v, or -1. */
static int view_of(const txc_graph *g, int v, txc_op_id op)
{
    int p = g->values[v].producer;
    if (p < 0 || p >= g->n_nodes)
        return -1;
    const txc_node *n = &g->nodes[p];
    return !n->dead && n->is_view && n->op == op && n->n_in == 1 && n->out == v ? p : -1;
}

static bool is_half(txc_dtype d) { return d == TXC_BF16 || d == TXC_F16; }
static bool is_float(txc_dtype d) { return d == TXC_F32 || is_half(d); }

static bool same_shape(const txc_value *a, const txc_value *b)
{
    return a->ndim == b->ndim && memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

/* A two-tensor binary node (no scalar operand, no flags). */
static bool plain_binary(const txc_node *n) { return n->n_in == 2 && n->attrs.flags == 0; }

/* A node of one tensor and the scalar attrs.f[0]. */
static bool scalar_binary(const txc_node *n) { return n->n_in == 1 && n->attrs.flags == TXC_ATTR_SCALAR_RHS; }

static void kill(pat_match *m, int node)
{
    if (m->n_dead < PAT_MAX_DEAD)
        m->dead[m->n_dead++] = node;
    if (node < m->first)
        m->first = node;
}

/* Is `last` (a normalized dim) the last dim of an ndim-d value, given the
 * recorded dim d (negative from the end)? */
static bool is_last_dim(int64_t d, int ndim) { return ndim > 0 && (d == ndim - 1 || d == -1); }

/* v is a float32 constant of one element (any number of size-1 dims): its value. */
static bool const_scalar_f32(const txc_graph *g, int v, float *out)
{
    const txc_value *x = &g->values[v];
    const txc_buffer *b = &g->buffers[x->buffer];
    if (x->dtype != TXC_F32 || txc_shape_numel(x->ndim, x->shape) != 1 || b->kind != TXC_BUF_CONST || !b->konst ||
        !b->konst->array || b->konst->array->dtype != TXC_F32 || x->offset < 0 || x->offset >= b->konst->array->numel)
        return false;
    *out = ((const float *)b->konst->array->data)[x->offset];
    return true;
}

/* ---- LlamaRMSNorm ---------------------------------------------------------------------------- */

/* h = x * rsqrt(mean(x^2, -1, keepdim) + eps) at node hi: x, the nodes, eps. */
static bool match_rms_core(const txc_graph *g, const int *uses, int hi, int *x_out, double *eps, pat_match *m)
{
    const txc_node *h = &g->nodes[hi];
    if (!plain_binary(h))
        return false;
    for (int side = 0; side < 2; side++) {
        int x = h->in[side], r = h->in[1 - side];
        int ri = kernel_of(g, r, TXC_OP_RSQRT);
        if (ri < 0 || uses[r] != 1 || g->nodes[ri].n_in != 1)
            continue;
        int e = g->nodes[ri].in[0], ei = kernel_of(g, e, TXC_OP_ADD);
        if (ei < 0 || uses[e] != 1)
            continue;
        /* + eps: a scalar operand, or a one-element float32 constant (a Python float through
         * aten::add.Tensor arrives as a wrapped tensor) */
        const txc_node *en = &g->nodes[ei];
        int mv = en->in[0];
        float ec = 0;
        if (scalar_binary(en)) {
            *eps = en->attrs.f[0];
        } else if (plain_binary(en) && (const_scalar_f32(g, en->in[1], &ec) || const_scalar_f32(g, en->in[0], &ec))) {
            mv = const_scalar_f32(g, en->in[1], &ec) ? en->in[0] : en->in[1];
            *eps = (double)ec;
        } else {
            continue;
        }
        int mi = kernel_of(g, mv, TXC_OP_MEAN);
        const txc_value *vx = &g->values[x];
        if (mi < 0 || uses[mv] != 1 || g->nodes[mi].n_in != 1 || g->nodes[mi].attrs.flags != TXC_ATTR_KEEPDIM ||
            g->nodes[mi].attrs.n_ints != 1 || !is_last_dim(g->nodes[mi].attrs.ints[0], vx->ndim))
            continue;
        int p = g->nodes[mi].in[0], pi = kernel_of(g, p, TXC_OP_POW);
        if (pi < 0 || uses[p] != 1 || !scalar_binary(&g->nodes[pi]) || g->nodes[pi].attrs.f[0] != 2.0 ||
            g->nodes[pi].in[0] != x)
            continue;
        /* float32 throughout, h of x's shape (x is read by the pow and this mul) */
        if (vx->dtype != TXC_F32 || g->values[p].dtype != TXC_F32 || g->values[mv].dtype != TXC_F32 ||
            g->values[e].dtype != TXC_F32 || g->values[r].dtype != TXC_F32 || g->values[h->out].dtype != TXC_F32 ||
            !same_shape(&g->values[h->out], vx) || !same_shape(&g->values[p], vx))
            continue;
        *x_out = x;
        kill(m, ri);
        kill(m, ei);
        kill(m, mi);
        kill(m, pi);
        return true;
    }
    return false;
}

static bool match_rms_norm(const txc_graph *g, const int *uses, int root, pat_match *m)
{
    const txc_node *y = &g->nodes[root];
    if (y->op != TXC_OP_MUL || !plain_binary(y))
        return false;
    for (int side = 0; side < 2; side++) {
        int w = y->in[side], hv = y->in[1 - side];
        pat_match t = {.op = TXC_OP_RMS_NORM, .first = root};
        /* h.to(input_dtype): a COPY to x0's dtype, absent for float32 */
        int h = hv, ci = kernel_of(g, hv, TXC_OP_COPY);
        txc_dtype rounded = TXC_F32;
        if (ci >= 0 && uses[hv] == 1 && g->nodes[ci].n_in == 1 && is_half(g->values[hv].dtype)) {
            h = g->nodes[ci].in[0];
            rounded = g->values[hv].dtype;
            kill(&t, ci);
        }
        int hi = kernel_of(g, h, TXC_OP_MUL), x = -1;
        double eps = 0;
        if (hi < 0 || uses[h] != 1 || !match_rms_core(g, uses, hi, &x, &eps, &t))
            continue;
        kill(&t, hi);
        /* x = x0.to(float32) for a half x0 (read by the pow and the mul only) */
        int x0 = x, xi = kernel_of(g, x, TXC_OP_COPY);
        if (xi >= 0 && uses[x] == 2 && g->nodes[xi].n_in == 1 && is_half(g->values[g->nodes[xi].in[0]].dtype)) {
            x0 = g->nodes[xi].in[0];
            kill(&t, xi);
        }
        /* rms_norm rounds x * r to x0's dtype: the composition must round there, and only there */
        const txc_value *vx0 = &g->values[x0], *vw = &g->values[w];
        if (g->values[x0].dtype != rounded || !is_float(vw->dtype) || vw->ndim != 1 || vx0->ndim < 1 ||
            vw->shape[0] != vx0->shape[vx0->ndim - 1] || !same_shape(&g->values[y->out], vx0) || w == hv)
            continue;
        t.n_in = 2;
        t.in[0] = x0;
        t.in[1] = w;
        memset(&t.attrs, 0, sizeof t.attrs);
        t.attrs.f[0] = eps;
        *m = t;
        return true;
    }
    return false;
}

/* ---- apply_rotary_pos_emb -------------------------------------------------------------------- */

/* rh = cat(-x[..., h:], x[..., :h], -1) with h = d/2: x, or -1. */
static int rotate_half_of(const txc_graph *g, const int *uses, int rh, pat_match *m)
{
    int ci = kernel_of(g, rh, TXC_OP_CAT);
    if (ci < 0 || uses[rh] != 1 || g->nodes[ci].n_in != 2 || g->nodes[ci].attrs.n_ints != 1)
        return -1;
    const txc_node *cat = &g->nodes[ci];
    int nv = cat->in[0], x1 = cat->in[1], ni = kernel_of(g, nv, TXC_OP_NEG);
    if (ni < 0 || uses[nv] != 1 || g->nodes[ni].n_in != 1)
        return -1;
    int x2 = g->nodes[ni].in[0];
    int s2 = view_of(g, x2, TXC_OP_SLICE), s1 = view_of(g, x1, TXC_OP_SLICE);
    if (s1 < 0 || s2 < 0)
        return -1;
    int x = g->nodes[s1].in[0];
    const txc_value *vx = &g->values[x];
    if (g->nodes[s2].in[0] != x || vx->ndim < 1 || !is_last_dim(cat->attrs.ints[0], vx->ndim))
        return -1;
    const int64_t d = vx->shape[vx->ndim - 1], half = d / 2;
    const txc_op_attrs *a1 = &g->nodes[s1].attrs, *a2 = &g->nodes[s2].attrs;
    /* slice(x, -1, 0, h) and slice(x, -1, h, >= d), step 1 */
    if (d % 2 != 0 || d == 0 || a1->n_ints != 4 || a2->n_ints != 4 || !is_last_dim(a1->ints[0], vx->ndim) ||
        !is_last_dim(a2->ints[0], vx->ndim) || a1->ints[1] != 0 || a1->ints[2] != half || a1->ints[3] != 1 ||
        a2->ints[1] != half || a2->ints[2] < d || a2->ints[3] != 1)
        return -1;
    if (!same_shape(&g->values[rh], vx))
        return -1;
    kill(m, ci);
    kill(m, ni);
    if (uses[x1] == 1)
        kill(m, s1);
    if (uses[x2] == 1)
        kill(m, s2);
    return x;
}

static bool match_rotary(const txc_graph *g, const int *uses, int root, pat_match *m)
{
    const txc_node *y = &g->nodes[root];
    if (y->op != TXC_OP_ADD || !plain_binary(y) || y->in[0] == y->in[1])
        return false;
    for (int order = 0; order < 2; order++) {
        int a = y->in[order], b = y->in[1 - order];
        int ai = kernel_of(g, a, TXC_OP_MUL), bi = kernel_of(g, b, TXC_OP_MUL);
        if (ai < 0 || bi < 0 || uses[a] != 1 || uses[b] != 1 || !plain_binary(&g->nodes[ai]) ||
            !plain_binary(&g->nodes[bi]))
            continue;
        for (int bs = 0; bs < 2; bs++) {
            pat_match t = {.op = TXC_OP_ROTARY, .first = root};
            int rh = g->nodes[bi].in[bs], s = g->nodes[bi].in[1 - bs];
            int x = rotate_half_of(g, uses, rh, &t);
            if (x < 0)
                continue;
            const txc_node *an = &g->nodes[ai];
            int c = an->in[0] == x ? an->in[1] : an->in[1] == x ? an->in[0] : -1;
            if (c < 0 || c == rh)
                continue;
            /* one float dtype (the kernel rounds each product to the result's dtype, as the ops do),
             * cos and sin broadcast to x's shape */
            const txc_value *vx = &g->values[x];
            txc_dtype dt = vx->dtype;
            if (!is_float(dt) || g->values[c].dtype != dt || g->values[s].dtype != dt ||
                g->values[y->out].dtype != dt || !same_shape(&g->values[y->out], vx) ||
                !same_shape(&g->values[a], vx) || !same_shape(&g->values[b], vx) || g->values[c].ndim > vx->ndim ||
                g->values[s].ndim > vx->ndim)
                continue;
            kill(&t, ai);
            kill(&t, bi);
            t.n_in = 3;
            t.in[0] = x;
            t.in[1] = c;
            t.in[2] = s;
            memset(&t.attrs, 0, sizeof t.attrs);
            *m = t;
            return true;
        }
    }
    return false;
}

/* ---- the pass -------------------------------------------------------------------------------- */

/* Readers of each value among the live nodes, plus one per graph output
 * (caller frees; NULL: out of memory). */
static int *count_uses(const txc_graph *g)
{
    int *uses = calloc((size_t)g->n_values + 1, sizeof *uses);
    if (!uses)
        return NULL;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead)
            for (int j = 0; j < g->nodes[i].n_in; j++)
                uses[g->nodes[i].in[j]]++;
    for (int k = 0; k < g->n_outputs; k++)
        uses[g->outputs[k]]++;
    return uses;
}

/* Does a live in-place node strictly between the pattern's first node and
 * its root write a buffer the rewritten root reads? */
static bool write_hazard(const txc_graph *g, const pat_match *m, int root)
{
    for (int k = m->first + 1; k < root; k++) {
        const txc_node *n = &g->nodes[k];
        if (n->dead || !n->inplace)
            continue;
        int b = g->values[n->out].buffer;
        for (int j = 0; j < m->n_in; j++)
            if (g->values[m->in[j]].buffer == b)
                return true;
    }
    return false;
}

static bool match_at(const txc_graph *g, const int *uses, int root, pat_match *m)
{
    const txc_node *n = &g->nodes[root];
    if (n->dead || n->is_view || n->inplace || n->fused)
        return false;
    if (!match_rms_norm(g, uses, root, m) && !match_rotary(g, uses, root, m))
        return false;
    return m->n_dead < PAT_MAX_DEAD && !write_hazard(g, m, root);
}

int txc_pass_patterns(txc_graph *g)
{
    int *uses = count_uses(g);
    if (!uses)
        return 0; /* an optimisation: skipping it is correct */
    int changed = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        pat_match m;
        if (!match_at(g, uses, i, &m))
            continue;
        txc_node *r = &g->nodes[i];
        int *in = malloc(sizeof(int) * (size_t)m.n_in);
        if (!in)
            continue;
        /* the readers move from the dead nodes to the root */
        for (int k = 0; k < m.n_dead; k++) {
            const txc_node *d = &g->nodes[m.dead[k]];
            for (int j = 0; j < d->n_in; j++)
                uses[d->in[j]]--;
        }
        for (int j = 0; j < r->n_in; j++)
            uses[r->in[j]]--;
        memcpy(in, m.in, sizeof(int) * (size_t)m.n_in);
        for (int j = 0; j < m.n_in; j++)
            uses[in[j]]++;
        free(r->in);
        r->in = in;
        r->n_in = m.n_in;
        r->op = m.op;
        r->attrs = m.attrs;
        for (int k = 0; k < m.n_dead; k++)
            g->nodes[m.dead[k]].dead = true;
        changed += m.n_dead;
    }
    free(uses);
    return changed;
}

bool txc_pattern_check(const txc_graph *traced, int root, const txc_node *n)
{
    if (root < 0 || root >= traced->n_nodes)
        return false;
    int *uses = count_uses(traced);
    pat_match m;
    /* The inputs are not compared: CSE may have replaced one by an equal value (a view of cos
     * made once instead of for q and for k), as it does any node's; check_graph's inference
     * checks what the kernel reads. */
    bool ok = uses && match_at(traced, uses, root, &m) && m.op == n->op && m.n_in == n->n_in && n->attrs.n_ints == 0 &&
              n->attrs.flags == 0 && n->attrs.dtype == m.attrs.dtype &&
              memcmp(n->attrs.f, m.attrs.f, sizeof m.attrs.f) == 0;
    free(uses);
    return ok;
}
