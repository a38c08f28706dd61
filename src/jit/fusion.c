/* Elementwise fusion: the pass that groups float32 elementwise nodes, and
 * the small register machine that runs a group (numexpr-style). See
 * jit/graph.h.
 *
 * A group is a tree of elementwise nodes with one output shape whose
 * intermediates each have exactly one consumer (inside the group) and are
 * not graph outputs. The group's last node keeps its output value and gets
 * the program; the others die. The program runs over the output in blocks
 * of FUSE_BLK elements: each input is either read in place (contiguous in
 * the output's layout), or gathered into a register (broadcast, strided,
 * transposed), and each instruction is one tight loop over the block, so
 * the compiler vectorises it. Registers live on the stack: no allocation.
 *
 * Numerics: each instruction evaluates the expression of the eager kernel
 * (src/ops/elementwise.c) for float32 inputs, so results are bit for bit
 * those of the unfused graph. */
#include "jit/graph.h"
#include "ops/kernels.h"
#include "jit/persist.h"
#include "txc/threads.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FUSE_BLK 256
#define FUSE_MAX_IN 16
#define FUSE_MAX_NODES 32
#define FUSE_MAX_TEMPS 8

enum {
    /* unary */
    F_MOV, F_NEG, F_ABS, F_EXP, F_LOG, F_SQRT, F_RSQRT, F_SIN, F_COS, F_TANH, F_SIGMOID, F_SILU,
    F_GELU, F_GELU_TANH, F_RELU,
    /* binary, two registers */
    F_ADD, F_SUB, F_RSUB, F_MUL, F_DIV, F_POW, F_MAX, F_MIN,
    /* binary, register and immediate */
    F_ADD_S, F_SUB_S, F_RSUB_S, F_MUL_S, F_DIV_S, F_POW_S, F_MAX_S, F_MIN_S,
};

typedef struct fused_ins {
    uint8_t op;
    int8_t dst; /* register, or -1: the output */
    int8_t a, b; /* registers (b unused by unary / immediate forms) */
    float s;     /* immediate */
} fused_ins;

/* Registers 0..n_in-1 hold the inputs, n_in..n_in+n_temps-1 temporaries.
 * One flat block (graph.c frees it with free()). */
struct txc_fused {
    int n_in, n_temps, n_ins;
    fused_ins ins[FUSE_MAX_NODES];
};

/* ---- the ops, with the eager kernels' expressions ------------------------------------------ */

#define SQRT_1_2 0.70710678118654752440f
#define SQRT_2_PI 0.79788456080286535588f

static inline float gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * SQRT_1_2)); }
static inline float gelu_tanh(float x)
{
    float inner = SQRT_2_PI * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(inner));
}
static inline float fmax_nan(float x, float y) { return x != x ? x : (y != y ? y : (x > y ? x : y)); }
static inline float fmin_nan(float x, float y) { return x != x ? x : (y != y ? y : (x < y ? x : y)); }

#define LOOP1(EXPR)                                                                                \
    for (int64_t i = 0; i < m; i++) {                                                              \
        float x = a[i];                                                                            \
        o[i] = (EXPR);                                                                             \
    }                                                                                              \
    break
#define LOOPI(EXPR)                                                                                \
    for (int64_t i = 0; i < m; i++) {                                                              \
        float x = a[i], y = imm;                                                                   \
        o[i] = (EXPR);                                                                             \
    }                                                                                              \
    break
#define LOOP2(EXPR)                                                                                \
    for (int64_t i = 0; i < m; i++) {                                                              \
        float x = a[i], y = b[i];                                                                  \
        o[i] = (EXPR);                                                                             \
    }                                                                                              \
    break


static void exec_ins(const fused_ins *I, int64_t m, float *restrict o, const float *restrict a,
                     const float *restrict b)
{
    const float imm = I->s;
    switch (I->op) {
    case F_MOV: LOOP1(x);
    case F_NEG: LOOP1(-x);
    case F_ABS: LOOP1(fabsf(x));
    case F_EXP: txc_kern_exp(o, a, m, 0.0f); break;
    case F_LOG: LOOP1(logf(x));
    case F_SQRT: LOOP1(sqrtf(x));
    case F_RSQRT: LOOP1(1.0f / sqrtf(x));
    case F_SIN: LOOP1(sinf(x));
    case F_COS: LOOP1(cosf(x));
    case F_TANH: LOOP1(tanhf(x));
    case F_SIGMOID: txc_kern_sigmoid(o, a, m); break;
    case F_SILU: txc_kern_silu(o, a, m); break;
    case F_GELU: LOOP1(gelu_erf(x));
    case F_GELU_TANH: LOOP1(gelu_tanh(x));
    case F_RELU: LOOP1(x < 0.0f ? 0.0f : x);
    case F_ADD: LOOP2(x + y);
    case F_SUB: LOOP2(x - y);
    case F_RSUB: LOOP2(y - x);
    case F_MUL: LOOP2(x * y);
    case F_DIV: LOOP2(x / y);
    case F_POW: LOOP2(powf(x, y));
    case F_MAX: LOOP2(fmax_nan(x, y));
    case F_MIN: LOOP2(fmin_nan(x, y));
    case F_ADD_S: LOOPI(x + y);
    case F_SUB_S: LOOPI(x - y);
    case F_RSUB_S: LOOPI(y - x);
    case F_MUL_S: LOOPI(x * y);
    case F_DIV_S: LOOPI(x / y);
    case F_POW_S: txc_kern_pow_scalar_f32(m, o, a, imm, TXC_F32); break;
    case F_MAX_S: LOOPI(fmax_nan(x, y));
    case F_MIN_S: LOOPI(fmin_nan(x, y));
    default: break;
    }
}

/* The fused opcode of a node, or -1 when the node cannot join a group. */
static int fused_op(const txc_graph *g, const txc_node *n)
{
    if (n->dead || n->is_view || n->inplace || n->fused || n->n_in < 1 || n->n_in > 2)
        return -1;
    if (g->values[n->out].dtype != TXC_F32)
        return -1;
    for (int j = 0; j < n->n_in; j++)
        if (g->values[n->in[j]].dtype != TXC_F32)
            return -1;
    bool scalar = n->attrs.flags & TXC_ATTR_SCALAR_RHS;
    int unary = -1, binary = -1, imm = -1;
    switch (n->op) {
    case TXC_OP_COPY: unary = F_MOV; break;
    case TXC_OP_NEG: unary = F_NEG; break;
    case TXC_OP_ABS: unary = F_ABS; break;
    case TXC_OP_EXP: unary = F_EXP; break;
    case TXC_OP_LOG: unary = F_LOG; break;
    case TXC_OP_SQRT: unary = F_SQRT; break;
    case TXC_OP_RSQRT: unary = F_RSQRT; break;
    case TXC_OP_SIN: unary = F_SIN; break;
    case TXC_OP_COS: unary = F_COS; break;
    case TXC_OP_TANH: unary = F_TANH; break;
    case TXC_OP_SIGMOID: unary = F_SIGMOID; break;
    case TXC_OP_SILU: unary = F_SILU; break;
    case TXC_OP_GELU: unary = (n->attrs.flags & TXC_ATTR_TANH) ? F_GELU_TANH : F_GELU; break;
    case TXC_OP_RELU: unary = F_RELU; break;
    case TXC_OP_ADD: binary = F_ADD; imm = F_ADD_S; break;
    case TXC_OP_SUB: binary = F_SUB; imm = F_SUB_S; break;
    case TXC_OP_RSUB: binary = F_RSUB; imm = F_RSUB_S; break;
    case TXC_OP_MUL: binary = F_MUL; imm = F_MUL_S; break;
    case TXC_OP_DIV: binary = F_DIV; imm = F_DIV_S; break;
    case TXC_OP_POW: binary = F_POW; imm = F_POW_S; break;
    case TXC_OP_MAXIMUM: binary = F_MAX; imm = F_MAX_S; break;
    case TXC_OP_MINIMUM: binary = F_MIN; imm = F_MIN_S; break;
    default: return -1;
    }
    if (unary >= 0)
        return n->n_in == 1 ? unary : -1;
    if (scalar)
        return n->n_in == 1 ? imm : -1;
    return n->n_in == 2 ? binary : -1;
}

/* ---- the pass ------------------------------------------------------------------------------ */

typedef struct group {
    int n_nodes;
    int n_in;
    int in[FUSE_MAX_IN]; /* external input values */
} group;

static bool same_shape(const txc_value *a, const txc_value *b)
{
    if (a->ndim != b->ndim)
        return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d])
            return false;
    return true;
}

static int find(const int *a, int n, int x)
{
    for (int i = 0; i < n; i++)
        if (a[i] == x)
            return i;
    return -1;
}

/* Would moving node i's reads to node `root` cross an in-place write of a
 * buffer it reads? (`ip`: the live in-place nodes, in order.) */
static bool moved_read_hazard(const txc_graph *g, const int *ip, int n_ip, int i, int root)
{
    const txc_node *n = &g->nodes[i];
    for (int k = 0; k < n_ip; k++) {
        if (ip[k] <= i)
            continue;
        if (ip[k] >= root)
            break;
        int b = g->values[g->nodes[ip[k]].out].buffer;
        for (int j = 0; j < n->n_in; j++)
            if (g->values[n->in[j]].buffer == b)
                return true;
    }
    return false;
}

/* Node n joins group G: its inputs replace its result among the group's
 * inputs. False (G unchanged) when that makes too many inputs. */
static bool group_absorb(group *G, const txc_node *n)
{
    int ins[FUSE_MAX_IN], k = 0;
    for (int j = 0; j < G->n_in; j++)
        if (G->in[j] != n->out)
            ins[k++] = G->in[j];
    for (int j = 0; j < n->n_in; j++)
        if (find(ins, k, n->in[j]) < 0) {
            if (k == FUSE_MAX_IN)
                return false;
            ins[k++] = n->in[j];
        }
    memcpy(G->in, ins, sizeof(int) * (size_t)k);
    G->n_in = k;
    G->n_nodes++;
    return true;
}

/* The member (index into members[]) producing value v, or -1. */
static int member_of(const txc_graph *g, const int *members, int n_members, int v)
{
    for (int p = 0; p < n_members; p++)
        if (g->nodes[members[p]].out == v)
            return p;
    return -1;
}

typedef struct sched {
    int kids[FUSE_MAX_NODES][2], n_kids[FUSE_MAX_NODES];
    int need[FUSE_MAX_NODES]; /* registers to evaluate the subtree */
    int order[FUSE_MAX_NODES], n_order;
} sched;

static void emit(sched *S, int k)
{
    int a = S->kids[k][0], b = S->kids[k][1];
    if (S->n_kids[k] == 2 && S->need[b] > S->need[a]) { /* the hungrier subtree first */
        int t = a;
        a = b;
        b = t;
    }
    if (S->n_kids[k] >= 1)
        emit(S, a);
    if (S->n_kids[k] == 2)
        emit(S, b);
    S->order[S->n_order++] = k;
}

/* Compile a group (members in node order, root last) into a program.
 * The group is a tree (every intermediate has one consumer), evaluated in
 * post-order from the root, bigger subtrees first (Sethi-Ullman), which
 * keeps the live temporaries to about log2 of the group's size. NULL when
 * it still needs more than FUSE_MAX_TEMPS registers. */
static txc_fused *compile_group(const txc_graph *g, const group *G, const int *members, int n_members,
                                const int *opcode)
{
    sched S = {.n_order = 0};
    for (int k = 0; k < n_members; k++) {
        const txc_node *n = &g->nodes[members[k]];
        S.n_kids[k] = 0;
        for (int j = 0; j < n->n_in; j++) {
            int p = member_of(g, members, k, n->in[j]);
            if (p >= 0 && !(S.n_kids[k] == 1 && S.kids[k][0] == p))
                S.kids[k][S.n_kids[k]++] = p;
        }
        int na = S.n_kids[k] >= 1 ? S.need[S.kids[k][0]] : 0;
        int nb = S.n_kids[k] == 2 ? S.need[S.kids[k][1]] : 0;
        int hi = na > nb ? na : nb, lo = na > nb ? nb : na;
        int need = S.n_kids[k] + 1; /* the operands and the result */
        if (hi > need)
            need = hi;
        if (lo + 1 > need)
            need = lo + 1;
        S.need[k] = need;
    }
    emit(&S, n_members - 1);
    if (S.n_order != n_members)
        return NULL; /* not a tree: cannot happen */

    txc_fused *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->n_in = G->n_in;
    int reg_of[FUSE_MAX_NODES]; /* the temporary holding member k's result */
    bool busy[FUSE_MAX_TEMPS] = {false};
    for (int o = 0; o < n_members; o++) {
        int k = S.order[o];
        const txc_node *n = &g->nodes[members[k]];
        fused_ins *I = &f->ins[o];
        I->op = (uint8_t)opcode[members[k]];
        I->s = (n->attrs.flags & TXC_ATTR_SCALAR_RHS) ? (float)n->attrs.f[0] : 0.0f;
        int src[2] = {0, 0}, tmp[2] = {-1, -1};
        for (int j = 0; j < n->n_in; j++) {
            int p = member_of(g, members, k, n->in[j]);
            if (p >= 0) {
                tmp[j] = reg_of[p];
                src[j] = f->n_in + reg_of[p];
            } else {
                src[j] = find(G->in, G->n_in, n->in[j]);
            }
        }
        I->a = (int8_t)src[0];
        I->b = (int8_t)(n->n_in == 2 ? src[1] : src[0]);
        if (o == n_members - 1) {
            I->dst = -1;
        } else {
            int r = 0;
            while (r < FUSE_MAX_TEMPS && busy[r])
                r++;
            if (r == FUSE_MAX_TEMPS) {
                free(f);
                return NULL;
            }
            busy[r] = true;
            reg_of[k] = r;
            if (r + 1 > f->n_temps)
                f->n_temps = r + 1;
            I->dst = (int8_t)(f->n_in + r);
        }
        /* Each intermediate has this node as its only consumer: its
         * register is free once read (after dst was chosen: no aliasing). */
        for (int j = 0; j < 2; j++)
            if (tmp[j] >= 0)
                busy[tmp[j]] = false;
    }
    f->n_ins = n_members;
    return f;
}

int txc_pass_fuse(txc_graph *g)
{
    int nn = g->n_nodes, nv = g->n_values;
    int *opcode = malloc(sizeof(int) * ((size_t)nn + 1));
    int *consumer = malloc(sizeof(int) * ((size_t)nv + 1)); /* -1 none, -2 several / output */
    int *root = malloc(sizeof(int) * ((size_t)nn + 1));
    int *ip = malloc(sizeof(int) * ((size_t)nn + 1));
    int *gid = malloc(sizeof(int) * ((size_t)nn + 1)); /* root -> index in groups */
    group *groups = malloc(sizeof(group) * ((size_t)nn + 1));
    int *next = malloc(sizeof(int) * ((size_t)nn + 1));
    int *head = malloc(sizeof(int) * ((size_t)nn + 1)), *tail = malloc(sizeof(int) * ((size_t)nn + 1));
    int members[FUSE_MAX_NODES];
    int removed = 0;
    if (!opcode || !consumer || !root || !ip || !gid || !groups || !next || !head || !tail)
        goto done;

    int n_ip = 0;
    for (int v = 0; v < nv; v++)
        consumer[v] = -1;
    for (int i = 0; i < nn; i++) {
        const txc_node *n = &g->nodes[i];
        opcode[i] = fused_op(g, n);
        root[i] = -1;
        if (n->dead)
            continue;
        if (n->inplace)
            ip[n_ip++] = i;
        for (int j = 0; j < n->n_in; j++) {
            int *c = &consumer[n->in[j]];
            *c = (*c == -1 || *c == i) ? i : -2;
        }
    }
    for (int k = 0; k < g->n_outputs; k++)
        consumer[g->outputs[k]] = -2;

    /* Consumers come after producers: walk backwards, growing each group
     * from its root towards its inputs. */
    int n_groups = 0;
    for (int i = nn - 1; i >= 0; i--) {
        if (opcode[i] < 0)
            continue;
        const txc_node *n = &g->nodes[i];
        int c = consumer[n->out];
        if (c >= 0 && root[c] >= 0) {
            int r = root[c];
            group *G = &groups[gid[r]];
            if (G->n_nodes < FUSE_MAX_NODES && same_shape(&g->values[n->out], &g->values[g->nodes[r].out]) &&
                !moved_read_hazard(g, ip, n_ip, i, r) && group_absorb(G, n)) {
                root[i] = r;
                continue;
            }
        }
        root[i] = i;
        gid[i] = n_groups;
        group *G = &groups[n_groups++];
        G->n_nodes = 1;
        G->n_in = 0;
        for (int j = 0; j < n->n_in; j++)
            if (find(G->in, G->n_in, n->in[j]) < 0)
                G->in[G->n_in++] = n->in[j];
    }

    /* Members of each group in node order: lists through next[], built
     * walking forwards (head/tail per group). */
    for (int k = 0; k < n_groups; k++)
        head[k] = tail[k] = -1;
    for (int i = 0; i < nn; i++) {
        if (opcode[i] < 0 || root[i] < 0)
            continue;
        int k = gid[root[i]];
        next[i] = -1;
        if (tail[k] < 0)
            head[k] = i;
        else
            next[tail[k]] = i;
        tail[k] = i;
    }
    for (int k = 0; k < n_groups; k++) {
        const group *G = &groups[k];
        if (G->n_nodes < 2)
            continue;
        int n_members = 0;
        for (int i = head[k]; i >= 0 && n_members < FUSE_MAX_NODES; i = next[i])
            members[n_members++] = i;
        txc_fused *f = n_members == G->n_nodes ? compile_group(g, G, members, n_members, opcode) : NULL;
        if (!f)
            continue; /* too many registers: the nodes stay as they are */
        txc_node *r = &g->nodes[members[n_members - 1]];
        int *in = realloc(r->in, sizeof(int) * (size_t)G->n_in);
        if (!in) {
            free(f);
            continue;
        }
        memcpy(in, G->in, sizeof(int) * (size_t)G->n_in);
        r->in = in;
        r->n_in = G->n_in;
        r->fused = f;
        for (int m = 0; m < n_members - 1; m++)
            g->nodes[members[m]].dead = true;
        removed += n_members - 1;
    }
done:
    free(opcode);
    free(consumer);
    free(root);
    free(ip);
    free(gid);
    free(groups);
    free(next);
    free(head);
    free(tail);
    return removed;
}

/* ---- the executor -------------------------------------------------------------------------- */

enum { SRC_DIRECT, SRC_SCALAR, SRC_GATHER };

/* An input's strides over the output's index space, with size-1 dims
 * dropped and dims that chain merged. */
typedef struct fused_src {
    int mode;
    const float *base;
    int nd;
    int64_t shape[TXC_MAX_DIMS];
    int64_t stride[TXC_MAX_DIMS];
} fused_src;

static void src_setup(fused_src *s, const txc_tensor *t, const txc_tensor *out)
{
    int64_t st[TXC_MAX_DIMS];
    txc_broadcast_strides(t, out->ndim, out->shape, st);
    s->base = txc_impl_data(t);
    s->nd = 0;
    for (int d = 0; d < out->ndim; d++) {
        if (out->shape[d] == 1)
            continue;
        if (s->nd > 0 && s->stride[s->nd - 1] == st[d] * out->shape[d]) {
            s->shape[s->nd - 1] *= out->shape[d];
            s->stride[s->nd - 1] = st[d];
        } else {
            s->shape[s->nd] = out->shape[d];
            s->stride[s->nd] = st[d];
            s->nd++;
        }
    }
    if (s->nd == 0 || (s->nd == 1 && s->stride[0] == 0))
        s->mode = SRC_SCALAR;
    else if (s->nd == 1 && s->stride[0] == 1)
        s->mode = SRC_DIRECT;
    else
        s->mode = SRC_GATHER;
}

/* Elements [e0, e0 + m) of the output's index space, read from s. */
static void gather(const fused_src *s, int64_t e0, int64_t m, float *restrict dst)
{
    int nd = s->nd, last = nd - 1;
    int64_t idx[TXC_MAX_DIMS], off = 0, rem = e0;
    for (int d = last; d >= 0; d--) {
        idx[d] = rem % s->shape[d];
        rem /= s->shape[d];
        off += idx[d] * s->stride[d];
    }
    const int64_t inner = s->stride[last], len = s->shape[last];
    int64_t done = 0;
    for (;;) {
        int64_t run = len - idx[last];
        if (run > m - done)
            run = m - done;
        const float *p = s->base + off;
        float *q = dst + done;
        if (inner == 1) {
            memcpy(q, p, sizeof(float) * (size_t)run);
        } else if (inner == 0) {
            float v = *p;
            for (int64_t k = 0; k < run; k++)
                q[k] = v;
        } else {
            for (int64_t k = 0; k < run; k++)
                q[k] = p[k * inner];
        }
        done += run;
        if (done == m)
            return;
        /* the row is finished: carry into the outer dims */
        off -= idx[last] * inner;
        idx[last] = 0;
        for (int d = last - 1; d >= 0; d--) {
            off += s->stride[d];
            if (++idx[d] < s->shape[d])
                break;
            off -= s->stride[d] * s->shape[d];
            idx[d] = 0;
        }
    }
}

/* Blocks [b0, b1) of FUSE_BLK elements of the program over numel elements
 * into o (registers on this thread's stack). */
static void run_blocks(const txc_fused *f, float *o, const fused_src *src, int64_t numel, int64_t b0, int64_t b1)
{
    const int n_in = f->n_in;
    _Alignas(64) float regs[FUSE_MAX_IN + FUSE_MAX_TEMPS][FUSE_BLK];
    const float *reg[FUSE_MAX_IN + FUSE_MAX_TEMPS];
    for (int k = 0; k < n_in; k++)
        if (src[k].mode == SRC_SCALAR) { /* filled once: no instruction writes input registers */
            float v = *src[k].base;
            for (int i = 0; i < FUSE_BLK; i++)
                regs[k][i] = v;
            reg[k] = regs[k];
        }
    for (int r = 0; r < f->n_temps; r++)
        reg[n_in + r] = regs[n_in + r];
    for (int64_t e0 = b0 * FUSE_BLK; e0 < numel && e0 < b1 * FUSE_BLK; e0 += FUSE_BLK) {
        int64_t m = numel - e0 < FUSE_BLK ? numel - e0 : FUSE_BLK;
        for (int k = 0; k < n_in; k++) {
            if (src[k].mode == SRC_DIRECT) {
                reg[k] = src[k].base + e0;
            } else if (src[k].mode == SRC_GATHER) {
                gather(&src[k], e0, m, regs[k]);
                reg[k] = regs[k];
            }
        }
        for (int i = 0; i < f->n_ins; i++) {
            const fused_ins *I = &f->ins[i];
            float *dst = I->dst < 0 ? o + e0 : regs[I->dst];
            exec_ins(I, m, dst, reg[I->a], reg[I->b]);
        }
    }
}

typedef struct fused_job {
    const txc_fused *f;
    float *o;
    const fused_src *src;
    int64_t numel, blocks_per_task;
} fused_job;

static void fused_task(void *ctx, int64_t t)
{
    const fused_job *j = ctx;
    run_blocks(j->f, j->o, j->src, j->numel, t * j->blocks_per_task, (t + 1) * j->blocks_per_task);
}

/* Outputs of at least this many elements run on the threads (chunks of
 * blocks; the elements' values do not depend on the split). */
#define FUSE_PAR_MIN (64 * 1024)

txc_status txc_fused_run(const txc_fused *f, txc_tensor *out, txc_tensor *const *in, int n_in)
{
    if (!f || n_in != f->n_in || n_in > FUSE_MAX_IN || out->dtype != TXC_F32)
        return txc_error(TXC_ERR_INTERNAL, "fused elementwise kernel: bad call (%d inputs, program for %d)", n_in,
                         f ? f->n_in : -1);
    fused_src src[FUSE_MAX_IN];
    int64_t numel = txc_shape_numel(out->ndim, out->shape);
    float *o = txc_impl_data(out);
    /* In parallel only when no gathered input shares bytes with the output
     * (in order, a block reads only its own elements of an input it writes). */
    bool par = numel >= FUSE_PAR_MIN && txc_threads_get() > 1;
    for (int k = 0; k < n_in; k++) {
        if (in[k]->dtype != TXC_F32)
            return txc_error(TXC_ERR_INTERNAL, "fused elementwise kernel: input %d is %s, not float32", k,
                             txc_dtype_name(in[k]->dtype));
        src_setup(&src[k], in[k], out);
        if (src[k].mode == SRC_GATHER) {
            int64_t lo = 0, hi = 1; /* the input's element span around its first element */
            for (int d = 0; d < in[k]->ndim; d++) {
                const int64_t reach = (in[k]->shape[d] - 1) * in[k]->strides[d];
                if (reach < 0)
                    lo += reach;
                else
                    hi += reach;
            }
            const uintptr_t b = (uintptr_t)txc_impl_data(in[k]), ob = (uintptr_t)o;
            const uintptr_t ilo = b + (uintptr_t)lo * sizeof(float), ihi = b + (uintptr_t)hi * sizeof(float);
            if (ilo < ob + (uintptr_t)numel * sizeof(float) && ob < ihi)
                par = false;
        }
    }
    if (!par) {
        run_blocks(f, o, src, numel, 0, (numel + FUSE_BLK - 1) / FUSE_BLK);
        return TXC_OK;
    }
    const int64_t blocks = (numel + FUSE_BLK - 1) / FUSE_BLK;
    const int64_t tasks = 4 * (int64_t)txc_threads_get();
    fused_job j = {f, o, src, numel, (blocks + tasks - 1) / tasks};
    txc_parallel_for_dynamic((blocks + j.blocks_per_task - 1) / j.blocks_per_task, fused_task, &j);
    return TXC_OK;
}

/* ---- persistence (jit/persist.c) ----------------------------------------------------------- */

/* The encoding: i32 n_in, n_temps, n_ins, then per instruction the bytes
 * op, dst, a, b and the immediate as a float32 (8 bytes). */
#define FUSED_HEADER 12
#define FUSED_INS 8

uint32_t txc_fused_format(void)
{
    /* The opcode set and the limits: a program written by a build with
     * other opcodes or limits must not be read. */
    return (uint32_t)(F_MIN_S + 1) | (uint32_t)FUSE_MAX_IN << 8 | (uint32_t)FUSE_MAX_NODES << 16 |
           (uint32_t)FUSE_MAX_TEMPS << 24;
}

size_t txc_fused_serialize(const txc_fused *f, unsigned char *buf, size_t cap)
{
    size_t need = FUSED_HEADER + FUSED_INS * (size_t)f->n_ins;
    if (!buf || cap < need)
        return need;
    int32_t h[3] = {f->n_in, f->n_temps, f->n_ins};
    memcpy(buf, h, sizeof h);
    unsigned char *p = buf + FUSED_HEADER;
    for (int i = 0; i < f->n_ins; i++, p += FUSED_INS) {
        const fused_ins *I = &f->ins[i];
        p[0] = I->op;
        p[1] = (unsigned char)I->dst;
        p[2] = (unsigned char)I->a;
        p[3] = (unsigned char)I->b;
        memcpy(p + 4, &I->s, sizeof(float));
    }
    return need;
}

txc_fused *txc_fused_deserialize(const unsigned char *buf, size_t len, int n_in)
{
    int32_t h[3];
    if (!buf || len < FUSED_HEADER)
        return NULL;
    memcpy(h, buf, sizeof h);
    int ni = h[0], nt = h[1], n_ins = h[2];
    if (ni != n_in || ni < 1 || ni > FUSE_MAX_IN || nt < 0 || nt > FUSE_MAX_TEMPS || n_ins < 1 ||
        n_ins > FUSE_MAX_NODES || len != FUSED_HEADER + FUSED_INS * (size_t)n_ins)
        return NULL;
    int n_regs = ni + nt;
    txc_fused *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->n_in = ni;
    f->n_temps = nt;
    f->n_ins = n_ins;
    const unsigned char *p = buf + FUSED_HEADER;
    for (int i = 0; i < n_ins; i++, p += FUSED_INS) {
        fused_ins *I = &f->ins[i];
        I->op = p[0];
        I->dst = (int8_t)p[1];
        I->a = (int8_t)p[2];
        I->b = (int8_t)p[3];
        memcpy(&I->s, p + 4, sizeof(float));
        bool last = i == n_ins - 1;
        /* Temporaries only are written (input registers may hold a
         * broadcast scalar filled once); the last instruction writes the
         * output, and only it. */
        bool dst_ok = last ? I->dst == -1 : (I->dst >= ni && I->dst < n_regs);
        if (I->op > F_MIN_S || !dst_ok || I->a < 0 || I->a >= n_regs || I->b < 0 || I->b >= n_regs) {
            free(f);
            return NULL;
        }
    }
    return f;
}
