/* The jit pass tests' harness (tests/test_jit_passes.c, tests/test_jit_patterns.c):
 * a small C function of tensors runs eagerly for the reference and is traced
 * op by op into a graph (the env's trace hook, as the jit does); the passes
 * run on the graph and a minimal executor (the eager kernels and the fused
 * programs) checks its numbers against eager mode: bit for bit, or within
 * `check_tol` (relative) where a rewrite documents a tolerance. */
#ifndef TXC_TESTS_JIT_PASS_UTIL_H
#define TXC_TESTS_JIT_PASS_UTIL_H

#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env/env_impl.h"
#include "jit/graph.h"
#include "jit/trace.h"
#include "txc/jit.h"
#include "txc/ops.h"
#include "txc/threads.h"

#define SHAPE(...) (int64_t[]){__VA_ARGS__}
#define MAX_IO 64

typedef void (*build_fn)(txc_tensor *const *in, txc_tensor **out, int *n_out);
/* Fresh inputs (cases may write them in place); returns their count. */
typedef int (*inputs_fn)(txc_tensor **in);

/* ---- helpers ---------------------------------------------------------------------------- */

static uint32_t rng_state;
static inline float rnd(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)((rng_state >> 8) & 0xffff) / 65536.0f * 4.0f - 2.0f;
}

static inline txc_tensor *rand_tensor(int ndim, const int64_t *shape)
{
    int64_t n = txc_shape_numel(ndim, shape);
    float *d = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    assert_non_null(d);
    for (int64_t i = 0; i < n; i++)
        d[i] = rnd();
    txc_tensor *t = txc_tensor_from_data(NULL, TXC_F32, ndim, shape, d);
    free(d);
    assert_non_null(t);
    return t;
}

static inline txc_tensor *i64_tensor(int64_t n, const int64_t *v)
{
    txc_tensor *t = txc_tensor_from_data(NULL, TXC_I64, 1, &n, v);
    assert_non_null(t);
    return t;
}

static inline void release_all(txc_tensor **t, int n)
{
    for (int i = 0; i < n; i++)
        txc_tensor_release(t[i]);
}

/* Trace fn on inputs shaped as `in` (their dtype, shape and strides). */
static inline txc_graph *trace_fn(build_fn fn, txc_tensor *const *in, int n)
{
    txc_env *env = txc_env_active();
    txc_graph *g = txc_graph_new();
    assert_non_null(g);
    g->inputs = malloc(sizeof(int) * (size_t)(n + 1));
    g->outputs = malloc(sizeof(int) * MAX_IO);
    txc_trace *tr = calloc(1, sizeof *tr);
    assert_true(g->inputs && g->outputs && tr);
    tr->graph = g;
    int mark = txc_env_scope_begin(env);
    txc_tensor *tin[MAX_IO];
    for (int i = 0; i < n; i++) {
        int b = txc_graph_add_buffer(g, TXC_BUF_INPUT, in[i]->dtype, in[i]->array->numel);
        txc_value v = {.dtype = in[i]->dtype, .ndim = in[i]->ndim, .buffer = b, .producer = -1};
        memcpy(v.shape, in[i]->shape, sizeof v.shape);
        memcpy(v.strides, in[i]->strides, sizeof v.strides);
        int id = txc_graph_add_value(g, &v);
        assert_true(b >= 0 && id >= 0);
        g->buffers[b].input = i;
        g->inputs[g->n_inputs++] = id;
        tin[i] = txc_env_scope_adopt(env, txc_trace_tensor(g, env, id));
    }
    env->trace_hook = txc_trace_record;
    env->trace_ctx = tr;
    txc_tensor *outs[MAX_IO];
    int n_out = 0;
    fn(tin, outs, &n_out);
    env->trace_hook = NULL;
    env->trace_ctx = NULL;
    for (int k = 0; k < n_out; k++) {
        if (!outs[k])
            fail_msg("tracing: output %d is NULL: %s", k, txc_last_error());
        assert_true(outs[k]->value >= 0);
        g->outputs[g->n_outputs++] = outs[k]->value;
    }
    txc_env_scope_end(env, mark);
    free(tr);
    return g;
}

typedef struct results {
    int n;
    int64_t numel[MAX_IO];
    float *v[MAX_IO];
} results;

static inline void results_free(results *r)
{
    for (int i = 0; i < r->n; i++)
        free(r->v[i]);
    r->n = 0;
}

static inline void take(results *r, const txc_tensor *t)
{
    int64_t n = txc_tensor_numel(t);
    r->numel[r->n] = n;
    r->v[r->n] = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    assert_non_null(r->v[r->n]);
    assert_int_equal(txc_tensor_copy_to_f32(t, r->v[r->n], n), TXC_OK);
    r->n++;
}

static inline void run_eager(build_fn fn, txc_tensor *const *in, results *r)
{
    txc_env *env = txc_env_active();
    int mark = txc_env_scope_begin(env);
    txc_tensor *outs[MAX_IO];
    int n_out = 0;
    fn(in, outs, &n_out);
    for (int k = 0; k < n_out; k++) {
        if (!outs[k])
            fail_msg("eager: output %d is NULL: %s", k, txc_last_error());
        take(r, outs[k]);
    }
    txc_env_scope_end(env, mark);
}

/* A minimal executor: one array per TEMP buffer, the kernels (or the fused
 * programs) of the live nodes in order. */
static inline void run_graph(const txc_graph *g, txc_tensor *const *in, results *r)
{
    txc_array **arr = calloc((size_t)g->n_buffers + 1, sizeof *arr);
    txc_tensor *hdr = calloc((size_t)g->n_values + 1, sizeof *hdr);
    assert_true(arr && hdr);
    for (int b = 0; b < g->n_buffers; b++) {
        const txc_buffer *buf = &g->buffers[b];
        if (buf->kind == TXC_BUF_INPUT)
            arr[b] = in[buf->input]->array;
        else if (buf->kind == TXC_BUF_CONST)
            arr[b] = buf->konst->array;
        else
            arr[b] = txc_array_new(TXC_CPU, buf->dtype, 1, &buf->numel);
        assert_non_null(arr[b]);
    }
    for (int v = 0; v < g->n_values; v++) {
        const txc_value *x = &g->values[v];
        txc_tensor *h = &hdr[v];
        h->refcount = 1 << 30;
        h->env = txc_env_active();
        h->array = arr[x->buffer];
        h->dtype = x->dtype;
        h->ndim = x->ndim;
        memcpy(h->shape, x->shape, sizeof h->shape);
        memcpy(h->strides, x->strides, sizeof h->strides);
        h->offset = x->offset;
        if (g->buffers[x->buffer].kind == TXC_BUF_INPUT)
            h->offset += in[g->buffers[x->buffer].input]->offset;
        h->numel = txc_shape_numel(x->ndim, x->shape);
        h->value = -1;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const txc_node *n = &g->nodes[i];
        if (n->dead || n->is_view)
            continue;
        txc_tensor *args[TXC_MAX_OP_INPUTS];
        for (int j = 0; j < n->n_in; j++)
            args[j] = &hdr[n->in[j]];
        txc_status s = n->fused ? txc_fused_run(n->fused, &hdr[n->out], args, n->n_in)
                                : txc_op_get(n->op)->cpu(&hdr[n->out], args, n->n_in, &n->attrs);
        if (s != TXC_OK)
            fail_msg("node %d (%s): %s", i, txc_op_name(n->op), txc_last_error());
    }
    for (int k = 0; k < g->n_outputs; k++)
        take(r, &hdr[g->outputs[k]]);
    for (int b = 0; b < g->n_buffers; b++)
        if (g->buffers[b].kind == TXC_BUF_TEMP)
            txc_array_release(arr[b]);
    free(arr);
    free(hdr);
}

/* 0: results must agree bit for bit; else relative tolerance (plus check_tol * 1e-3 absolute). */
static float check_tol;

static inline void assert_same_results(const results *a, const results *b)
{
    assert_int_equal(a->n, b->n);
    for (int k = 0; k < a->n; k++) {
        assert_int_equal(a->numel[k], b->numel[k]);
        for (int64_t i = 0; i < a->numel[k]; i++)
            if (check_tol > 0 ? !(fabsf(a->v[k][i] - b->v[k][i]) <= check_tol * (fabsf(b->v[k][i]) + 1e-3f))
                              : memcmp(&a->v[k][i], &b->v[k][i], sizeof(float)) != 0)
                fail_msg("output %d element %lld: %.9g vs %.9g (not bit for bit)", k, (long long)i, a->v[k][i],
                         b->v[k][i]);
    }
}

enum { P_CSE = 1, P_FOLD = 2, P_FUSE = 4, P_RESIDUAL = 8, P_PATTERNS = 16 };

/* Trace `fn` on fresh inputs, check the unpassed graph against eager, run
 * the passes (each preceded by DCE, as compile() does) and check again.
 * Returns the graph (caller frees); *changed the passes' total count. */
static inline txc_graph *check_passes(build_fn fn, inputs_fn mk, int passes, int *changed)
{
    txc_tensor *in[MAX_IO];
    results want = {0}, raw = {0}, got = {0};
    int n = mk(in);
    run_eager(fn, in, &want);
    release_all(in, n);

    mk(in);
    txc_graph *g = trace_fn(fn, in, n);
    release_all(in, n);
    mk(in);
    run_graph(g, in, &raw);
    release_all(in, n);
    assert_same_results(&want, &raw);

    int c = 0;
    txc_pass_dce(g);
    if (passes & P_CSE)
        c += txc_pass_cse(g);
    if (passes & P_FOLD)
        c += txc_pass_fold(g, txc_env_active());
    if (passes & P_PATTERNS)
        c += txc_pass_patterns(g);
    if (passes & P_FUSE)
        c += txc_pass_fuse(g);
    if (passes & P_RESIDUAL)
        c += txc_pass_residual(g);
    txc_pass_dce(g);
    assert_int_equal(txc_last_status(), TXC_OK);
    mk(in);
    run_graph(g, in, &got);
    release_all(in, n);
    assert_same_results(&want, &got);
    results_free(&want);
    results_free(&raw);
    results_free(&got);
    *changed = c;
    return g;
}

static inline int count_live(const txc_graph *g, txc_op_id op)
{
    int c = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead && g->nodes[i].op == op)
            c++;
    return c;
}

static inline int count_kernels(const txc_graph *g)
{
    int c = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead && !g->nodes[i].is_view)
            c++;
    return c;
}

static inline const txc_node *producer(const txc_graph *g, int v)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead && g->nodes[i].out == v)
            return &g->nodes[i];
    return NULL;
}

static inline txc_tensor *op_scalar(txc_op_id op, txc_tensor *x, double s)
{
    txc_op_attrs a = {.flags = TXC_ATTR_SCALAR_RHS};
    a.f[0] = s;
    return txc_dispatch(op, NULL, &x, 1, &a);
}

static inline void setup_rng(void)
{
    rng_state = 12345u;
    txc_clear_error();
}

#endif
