/* The jit's graph passes: common subexpressions, constant folding and
 * elementwise fusion (src/jit/passes.c, src/jit/fusion.c).
 *
 * Each case is a small C function of tensors. It runs eagerly for the
 * reference, and is traced into a graph op by op (the env's trace hook, as
 * the jit does) on which a pass runs; the test checks the rewritten graph
 * and runs it with a minimal executor (the eager kernels, and the fused
 * programs) to check the numbers: bit for bit, since every pass keeps the
 * eager kernels' arithmetic. End-to-end cases go through txc_jit_call. */
#include "jit_pass_util.h"

/* ---- CSE --------------------------------------------------------------------------------- */

static int in_xy(txc_tensor **in)
{
    setup_rng();
    in[0] = rand_tensor(2, SHAPE(3, 4));
    in[1] = rand_tensor(2, SHAPE(3, 4));
    return 2;
}

static void fn_cse(txc_tensor *const *in, txc_tensor **out, int *n)
{
    txc_tensor *x = in[0], *y = in[1];
    txc_tensor *s = txc_add(txc_exp(x), txc_exp(x)); /* exp merges */
    out[0] = txc_mul_scalar(s, 2.0);
    out[1] = txc_mul_scalar(s, 3.0);                       /* other scalar: stays */
    txc_tensor *m1 = txc_mul(txc_unsqueeze(x, 0), y);      /* equal views merge... */
    out[2] = txc_mul(txc_unsqueeze(x, 0), y);              /* ...then the muls */
    out[3] = txc_sum(x, 1, (int[]){0}, false);
    out[4] = txc_sum(x, 1, (int[]){1}, false);             /* other dim: stays */
    out[5] = txc_neg(m1);
    *n = 6;
}

static void test_cse_merges_duplicates(void **state)
{
    (void)state;
    int c;
    txc_graph *g = check_passes(fn_cse, in_xy, P_CSE, &c);
    assert_int_equal(c, 3); /* exp, unsqueeze, mul */
    assert_int_equal(count_live(g, TXC_OP_EXP), 1);
    assert_int_equal(count_live(g, TXC_OP_UNSQUEEZE), 1);
    assert_int_equal(count_live(g, TXC_OP_MUL), 3); /* two scalar forms + one */
    assert_int_equal(count_live(g, TXC_OP_SUM), 2);
    /* output 2 now is the first mul's value, which neg reads too */
    const txc_node *neg = producer(g, g->outputs[5]);
    assert_non_null(neg);
    assert_int_equal(neg->in[0], g->outputs[2]);
    const txc_node *add = producer(g, producer(g, g->outputs[0])->in[0]);
    assert_int_equal(add->op, TXC_OP_ADD);
    assert_int_equal(add->in[0], add->in[1]);
    txc_graph_free(g);
}

static int in_cache(txc_tensor **in)
{
    setup_rng();
    in[0] = rand_tensor(2, SHAPE(4, 3));    /* cache */
    in[1] = i64_tensor(1, (int64_t[]){1});  /* index */
    in[2] = rand_tensor(2, SHAPE(1, 3));    /* source */
    in[3] = rand_tensor(2, SHAPE(4, 3));    /* x */
    return 4;
}

static void fn_cse_inplace(txc_tensor *const *in, txc_tensor **out, int *n)
{
    txc_tensor *cache = in[0], *idx = in[1], *src = in[2], *x = in[3];
    txc_tensor *v = txc_narrow(cache, 0, 0, 2);
    txc_tensor *z1 = txc_full(NULL, 2, SHAPE(2, 3), 1.0, TXC_F32);
    out[0] = txc_mul_scalar(v, 2.0);
    out[1] = txc_mul_scalar(x, 2.0);
    assert_int_equal(txc_index_copy_(cache, 0, idx, src), TXC_OK);
    assert_int_equal(txc_index_copy_(z1, 0, idx, src), TXC_OK);
    out[2] = txc_mul_scalar(v, 2.0); /* same value id, new bytes: must not merge */
    out[3] = txc_mul_scalar(x, 2.0); /* x untouched: merges */
    out[4] = z1;
    out[5] = txc_full(NULL, 2, SHAPE(2, 3), 1.0, TXC_F32); /* z1's buffer was written: must not merge */
    *n = 6;
}

static void test_cse_not_across_inplace(void **state)
{
    (void)state;
    int c;
    txc_graph *g = check_passes(fn_cse_inplace, in_cache, P_CSE, &c);
    assert_int_equal(c, 1);
    assert_int_equal(g->outputs[3], g->outputs[1]);
    assert_int_not_equal(g->outputs[2], g->outputs[0]);
    assert_int_equal(count_live(g, TXC_OP_FULL), 2);
    assert_int_equal(count_live(g, TXC_OP_INDEX_COPY), 2);
    txc_graph_free(g);
}

/* ---- constant folding -------------------------------------------------------------------- */

static txc_tensor *captured; /* a module buffer the function reads (RoPE's inv_freq) */

static int in_x28(txc_tensor **in)
{
    setup_rng();
    in[0] = rand_tensor(2, SHAPE(2, 8));
    return 1;
}

static void fn_fold(txc_tensor *const *in, txc_tensor **out, int *n)
{
    txc_tensor *p = txc_mul_scalar(txc_arange(NULL, 0, 8, 1, TXC_F32), 0.5);
    txc_tensor *q = txc_unsqueeze(p, 0);                   /* a view of a constant */
    txc_tensor *k = txc_exp(txc_mul_scalar(captured, 2.0)); /* of a captured constant */
    out[0] = txc_add(txc_add(in[0], q), k);
    *n = 1;
}

static void test_fold_arange_mul(void **state)
{
    (void)state;
    setup_rng();
    captured = rand_tensor(1, SHAPE(8));
    int c;
    txc_graph *g = check_passes(fn_fold, in_x28, P_FOLD, &c);
    assert_int_equal(c, 5); /* arange, mul, unsqueeze, mul, exp */
    assert_int_equal(count_kernels(g), 2);
    assert_int_equal(count_live(g, TXC_OP_ARANGE), 0);
    const txc_node *outer = producer(g, g->outputs[0]);
    const txc_node *inner = producer(g, outer->in[0]);
    assert_non_null(inner);
    const txc_value *q = &g->values[inner->in[1]];
    assert_int_equal(q->producer, -1);
    assert_int_equal(q->ndim, 2);
    const txc_buffer *b = &g->buffers[q->buffer];
    assert_int_equal(b->kind, TXC_BUF_CONST);
    assert_non_null(b->konst);
    float v[8];
    assert_int_equal(txc_tensor_copy_to_f32(b->konst, v, 8), TXC_OK);
    for (int i = 0; i < 8; i++)
        assert_true(v[i] == 0.5f * (float)i);
    assert_int_equal(g->buffers[g->values[outer->in[1]].buffer].kind, TXC_BUF_CONST);
    txc_graph_free(g);
    txc_tensor_release(captured);
    captured = NULL;
}

static int in_fold_skip(txc_tensor **in)
{
    setup_rng();
    in[0] = rand_tensor(2, SHAPE(2, 4));
    in[1] = i64_tensor(1, (int64_t[]){1});
    in[2] = rand_tensor(2, SHAPE(1, 4));
    return 3;
}

static void fn_fold_skip(txc_tensor *const *in, txc_tensor **out, int *n)
{
    txc_tensor *b = txc_mul_scalar(txc_arange(NULL, 0, 4, 1, TXC_F32), 2.0);
    out[0] = b;                  /* an output: stays computed */
    out[1] = txc_add(in[0], b);
    txc_tensor *z = txc_full(NULL, 2, SHAPE(2, 4), 3.0, TXC_F32);
    assert_int_equal(txc_index_copy_(z, 0, in[1], in[2]), TXC_OK); /* written in place: stays */
    out[2] = txc_mul(z, in[0]);
    *n = 3;
}

static void fn_fold_big(txc_tensor *const *in, txc_tensor **out, int *n)
{
    txc_tensor *big = txc_full(NULL, 3, SHAPE(5, 1024, 1024), 1.0, TXC_F32); /* 20 MiB */
    txc_tensor *small = txc_full(NULL, 1, SHAPE(8), 1.0, TXC_F32);
    out[0] = txc_add(txc_sum(big, 0, NULL, false), in[0]);
    out[1] = txc_add(small, in[0]);
    *n = 2;
}

static void test_fold_skips(void **state)
{
    (void)state;
    int c;
    txc_graph *g = check_passes(fn_fold_skip, in_fold_skip, P_FOLD, &c);
    assert_int_equal(c, 1); /* the arange only */
    assert_int_equal(count_live(g, TXC_OP_ARANGE), 0);
    assert_int_equal(count_live(g, TXC_OP_FULL), 1);
    assert_int_equal(g->buffers[g->values[g->outputs[0]].buffer].kind, TXC_BUF_TEMP);
    txc_graph_free(g);

    /* outputs over 16 MiB are left to the plan (traced only: no 20 MiB run) */
    txc_tensor *in[1];
    in_x28(in);
    g = trace_fn(fn_fold_big, in, 1);
    txc_tensor_release(in[0]);
    assert_int_equal(txc_pass_fold(g, txc_env_active()), 1);
    assert_int_equal(count_live(g, TXC_OP_FULL), 1);
    assert_int_equal(g->values[producer(g, g->outputs[0])->in[0]].ndim, 0);
    txc_graph_free(g);
}

/* ---- fusion ------------------------------------------------------------------------------- */

static int in_xy_big(txc_tensor **in)
{
    setup_rng();
    in[0] = rand_tensor(2, SHAPE(5, 77)); /* 385 elements: a partial second block */
    in[1] = rand_tensor(2, SHAPE(5, 77));
    return 2;
}

static void fn_chain5(txc_tensor *const *in, txc_tensor **out, int *n)
{
    txc_tensor *x = in[0], *y = in[1];
    txc_tensor *t = txc_silu(txc_mul_scalar(txc_add(x, y), 0.5));
    out[0] = txc_sub_scalar(txc_mul(t, y), 1.0);
    *n = 1;
}

static void test_fuse_chain(void **state)
{
    (void)state;
    int c;
    txc_graph *g = check_passes(fn_chain5, in_xy_big, P_FUSE, &c);
    assert_int_equal(c, 4);
    assert_int_equal(count_kernels(g), 1);
    const txc_node *r = producer(g, g->outputs[0]);
    assert_non_null(r->fused);
    assert_int_equal(r->n_in, 2);
    assert_int_equal(r->in[0] + r->in[1], g->inputs[0] + g->inputs[1]);
    txc_graph_free(g);
}

static void fn_shared(txc_tensor *const *in, txc_tensor **out, int *n)
{
    txc_tensor *x = in[0], *y = in[1];
    txc_tensor *t = txc_exp(x); /* two consumers: stays a node */
    out[0] = txc_add(txc_mul(t, y), txc_add(t, x));
    txc_tensor *u = txc_neg(y);
    out[1] = u; /* an output: not fused into its consumer */
    out[2] = txc_tanh(u);
    *n = 3;
}

static void test_fuse_respects_uses(void **state)
{
    (void)state;
    int c;
    txc_graph *g = check_passes(fn_shared, in_xy_big, P_FUSE, &c);
    assert_int_equal(c, 2); /* mul + add + add -> 1 */
    const txc_node *r = producer(g, g->outputs[0]);
    assert_non_null(r->fused);
    assert_int_equal(r->n_in, 3); /* exp(x), y, x */
    assert_int_equal(count_live(g, TXC_OP_EXP), 1);
    assert_null(producer(g, g->outputs[1])->fused);
    assert_null(producer(g, g->outputs[2])->fused);
    txc_graph_free(g);
}

static int in_bcast(txc_tensor **in)
{
    setup_rng();
    in[0] = rand_tensor(4, SHAPE(2, 3, 5, 8));
    in[1] = rand_tensor(4, SHAPE(2, 1, 5, 8));
    in[2] = rand_tensor(1, SHAPE(8));
    in[3] = rand_tensor(0, NULL);
    return 4;
}

static void fn_bcast(txc_tensor *const *in, txc_tensor **out, int *n)
{
    txc_tensor *t = txc_add(txc_mul(in[0], in[1]), in[2]);
    out[0] = txc_mul(txc_tanh(t), in[3]);
    *n = 1;
}

static void test_fuse_broadcast(void **state)
{
    (void)state;
    int c;
    txc_graph *g = check_passes(fn_bcast, in_bcast, P_FUSE, &c);
    assert_int_equal(c, 3);
    assert_int_equal(count_kernels(g), 1);
    assert_int_equal(producer(g, g->outputs[0])->n_in, 4);
    txc_graph_free(g);
}

static int in_rope(txc_tensor **in)
{
    setup_rng();
    in[0] = rand_tensor(3, SHAPE(2, 13, 3 * 16)); /* (B, L, H*d) */
    in[1] = rand_tensor(4, SHAPE(2, 1, 13, 16));  /* cos */
    in[2] = rand_tensor(4, SHAPE(2, 1, 13, 16));  /* sin */
    txc_tensor *base = rand_tensor(2, SHAPE(40, 7));
    in[3] = txc_transpose(base, 0, 1); /* a non-contiguous input (7, 40) */
    txc_tensor_release(base);
    return 4;
}

static void fn_rope(txc_tensor *const *in, txc_tensor **out, int *n)
{
    txc_tensor *q = txc_transpose(txc_view(in[0], 4, SHAPE(2, 13, 3, 16)), 1, 2); /* (B, H, L, d), strided */
    txc_tensor *halves[2] = {txc_neg(txc_narrow(q, -1, 8, 8)), txc_narrow(q, -1, 0, 8)};
    txc_tensor *rot = txc_cat(halves, 2, -1);
    out[0] = txc_add(txc_mul(q, in[1]), txc_mul(rot, in[2]));
    out[1] = txc_mul_scalar(txc_exp(in[3]), 2.0);
    out[2] = txc_mul(txc_silu(txc_narrow(in[0], 2, 0, 16)), txc_narrow(in[0], 2, 16, 16)); /* SwiGLU-like */
    *n = 3;
}

static void test_fuse_rope_noncontiguous(void **state)
{
    (void)state;
    int c;
    txc_graph *g = check_passes(fn_rope, in_rope, P_FUSE, &c);
    assert_int_equal(c, 2 + 1 + 1);
    assert_int_equal(producer(g, g->outputs[0])->n_in, 4);
    assert_non_null(producer(g, g->outputs[1])->fused);
    assert_non_null(producer(g, g->outputs[2])->fused);
    assert_int_equal(count_live(g, TXC_OP_NEG), 1);
    txc_graph_free(g);
}

/* Fused programs over 156,000 elements (above the threads' bound of
 * fusion.c): the same bits on 1 and 3 threads as eager, with direct,
 * broadcast and gathered (transposed) inputs. */
static int in_big(txc_tensor **in)
{
    setup_rng();
    in[0] = rand_tensor(3, SHAPE(2, 130, 600));
    in[1] = rand_tensor(3, SHAPE(2, 130, 600));
    in[2] = rand_tensor(1, SHAPE(600));
    txc_tensor *base = rand_tensor(3, SHAPE(2, 600, 130));
    in[3] = txc_transpose(base, 1, 2); /* (2, 130, 600), strided */
    txc_tensor_release(base);
    return 4;
}

static void fn_big(txc_tensor *const *in, txc_tensor **out, int *n)
{
    out[0] = txc_mul(txc_silu(in[0]), in[1]);                     /* SwiGLU's silu(gate) * up */
    out[1] = txc_add(txc_mul(in[3], in[2]), txc_exp(in[0]));      /* gathered and broadcast inputs */
    *n = 2;
}

static void test_fuse_threads(void **state)
{
    (void)state;
    int threads = txc_threads_get();
    for (int t = 1; t <= 3; t += 2) {
        assert_int_equal(txc_threads_set(t), TXC_OK);
        int c;
        txc_graph *g = check_passes(fn_big, in_big, P_FUSE, &c);
        assert_non_null(producer(g, g->outputs[0])->fused);
        assert_non_null(producer(g, g->outputs[1])->fused);
        txc_graph_free(g);
    }
    assert_int_equal(txc_threads_set(threads), TXC_OK);
}

static int in_special(txc_tensor **in)
{
    setup_rng();
    float d[300];
    for (int i = 0; i < 300; i++)
        d[i] = rnd() * 3.0f;
    d[3] = NAN;
    d[7] = INFINITY;
    d[11] = -INFINITY;
    d[13] = 0.0f;
    d[17] = -0.0f;
    in[0] = txc_tensor_from_data(NULL, TXC_F32, 2, SHAPE(3, 100), d);
    for (int i = 0; i < 300; i++)
        d[i] = rnd();
    d[5] = NAN;
    d[7] = NAN;
    in[1] = txc_tensor_from_data(NULL, TXC_F32, 2, SHAPE(3, 100), d);
    return 2;
}

/* Every op the fusion knows, each in a small chain (its own group). */
static void fn_all_ops(txc_tensor *const *in, txc_tensor **out, int *n)
{
    txc_tensor *x = in[0], *y = in[1];
    txc_tensor *(*unary[])(txc_tensor *) = {txc_neg, txc_abs, txc_exp, txc_log, txc_sqrt, txc_rsqrt,
                                            txc_sin, txc_cos, txc_tanh, txc_sigmoid, txc_silu, txc_relu,
                                            txc_contiguous};
    int k = 0;
    for (size_t i = 0; i < sizeof unary / sizeof unary[0]; i++)
        out[k++] = txc_add_scalar(unary[i](txc_mul_scalar(x, 0.7)), 0.25);
    out[k++] = txc_mul_scalar(txc_gelu(txc_add(x, y), false), 1.5);
    out[k++] = txc_mul_scalar(txc_gelu(txc_add(x, y), true), 1.5);
    txc_tensor *(*binary[])(txc_tensor *, txc_tensor *) = {txc_add, txc_sub, txc_mul, txc_div, txc_pow,
                                                           txc_maximum, txc_minimum};
    for (size_t i = 0; i < sizeof binary / sizeof binary[0]; i++)
        out[k++] = txc_neg(binary[i](txc_abs(x), y));
    txc_tensor *(*scalar[])(txc_tensor *, double) = {txc_add_scalar, txc_sub_scalar, txc_mul_scalar,
                                                     txc_div_scalar, txc_rsub_scalar};
    for (size_t i = 0; i < sizeof scalar / sizeof scalar[0]; i++)
        out[k++] = txc_exp(scalar[i](txc_neg(x), 0.3));
    const double exps[] = {2.0, 3.0, 0.5, -0.5, -1.0, -2.0, 1.7, 0.0};
    for (size_t i = 0; i < sizeof exps / sizeof exps[0]; i++)
        out[k++] = txc_add(txc_pow_scalar(txc_abs(x), exps[i]), y);
    out[k++] = txc_neg(op_scalar(TXC_OP_MAXIMUM, txc_neg(x), 0.5));
    out[k++] = txc_neg(op_scalar(TXC_OP_MINIMUM, txc_neg(x), NAN));
    out[k++] = txc_mul(txc_exp(x), txc_exp(x)); /* a node reading one register twice */
    txc_tensor *e = txc_exp(y);
    out[k++] = txc_mul(e, e);
    *n = k;
}

static void test_fuse_all_ops_bitwise(void **state)
{
    (void)state;
    int c;
    txc_graph *g = check_passes(fn_all_ops, in_special, P_FUSE, &c);
    int fused = 0;
    for (int k = 0; k < g->n_outputs; k++)
        fused += producer(g, g->outputs[k])->fused != NULL;
    assert_int_equal(fused, g->n_outputs);
    txc_graph_free(g);
}

static void fn_fuse_inplace(txc_tensor *const *in, txc_tensor **out, int *n)
{
    txc_tensor *cache = in[0], *idx = in[1], *src = in[2];
    txc_tensor *a = txc_exp(txc_narrow(cache, 0, 0, 2)); /* reads row 1 before the write */
    assert_int_equal(txc_index_copy_(cache, 0, idx, src), TXC_OK);
    out[0] = txc_add(a, txc_narrow(in[3], 0, 0, 2));
    out[1] = cache;
    *n = 2;
}

static void test_fuse_not_across_inplace(void **state)
{
    (void)state;
    int c;
    txc_graph *g = check_passes(fn_fuse_inplace, in_cache, P_FUSE, &c);
    assert_int_equal(c, 0);
    txc_graph_free(g);
}

static int in_many(txc_tensor **in)
{
    setup_rng();
    for (int i = 0; i < 20; i++)
        in[i] = rand_tensor(2, SHAPE(3, 5));
    return 20;
}

static void fn_limits(txc_tensor *const *in, txc_tensor **out, int *n)
{
    txc_tensor *t = in[0];
    for (int i = 0; i < 40; i++) /* a 40-node chain: groups of at most 32 nodes */
        t = (i & 1) ? txc_mul_scalar(t, 1.01) : txc_tanh(t);
    out[0] = t;
    txc_tensor *s = in[0];
    for (int i = 1; i < 20; i++) /* 20 inputs: groups of at most 16 inputs */
        s = txc_add(s, in[i]);
    out[1] = s;
    txc_tensor *parts[20];
    for (int i = 0; i < 20; i++) /* 20 intermediates computed first: scheduled as a tree */
        parts[i] = txc_mul_scalar(in[0], i + 1);
    txc_tensor *u = parts[0];
    for (int i = 1; i < 20; i++)
        u = txc_add(u, parts[i]);
    out[2] = u;
    *n = 3;
}

static void test_fuse_limits(void **state)
{
    (void)state;
    int c;
    txc_graph *g = check_passes(fn_limits, in_many, P_FUSE, &c);
    /* 40-chain: 32 + 8 nodes (38 removed); 19 adds of inputs: 15 + 4 (17);
     * 20 muls + 19 adds: the adds' inputs fill the root group at add 5 (15
     * adds + their 15 muls) and the rest form a second group (9): 37 */
    assert_int_equal(c, 38 + 17 + 37);
    int fused = 0;
    for (int i = 0; i < g->n_nodes; i++)
        fused += !g->nodes[i].dead && g->nodes[i].fused;
    assert_int_equal(fused, 6);
    txc_graph_free(g);
}

static void test_fused_run_checks(void **state)
{
    (void)state;
    txc_tensor *in[2];
    in_xy_big(in);
    txc_graph *g = trace_fn(fn_chain5, in, 2);
    assert_int_equal(txc_pass_fuse(g), 4);
    const txc_node *r = producer(g, g->outputs[0]);
    txc_tensor *out = txc_zeros(NULL, 2, SHAPE(5, 77), TXC_F32);
    assert_int_equal(txc_fused_run(r->fused, out, in, 1), TXC_ERR_INTERNAL);
    txc_clear_error();
    txc_tensor *i64 = txc_zeros(NULL, 2, SHAPE(5, 77), TXC_I64);
    txc_tensor *bad[2] = {in[0], i64};
    assert_int_equal(txc_fused_run(r->fused, out, bad, 2), TXC_ERR_INTERNAL);
    txc_clear_error();
    assert_int_equal(txc_fused_run(r->fused, out, in, 2), TXC_OK);
    txc_tensor_release(i64);
    txc_tensor_release(out);
    release_all(in, 2);
    txc_graph_free(g);
}

/* ---- end to end through the jit ----------------------------------------------------------- */

static txc_tensor *inv_freq;

/* A small attention-free Llama-like block: RoPE on q, SwiGLU MLP with a
 * residual, a repeated subexpression and position constants. */
static txc_status block_fn(void *ctx, txc_tensor *const *in, int n_in, const void *st, size_t len, txc_tensor **out,
                           int max_out, int *n_out)
{
    (void)ctx, (void)n_in, (void)st, (void)len, (void)max_out;
    txc_tensor *x = in[0], *wq = in[1], *wg = in[2], *wu = in[3], *wd = in[4];
    int64_t B = 1, L = 6, H = 2, d = 8;
    txc_tensor *pos = txc_unsqueeze(txc_arange(NULL, 0, (double)L, 1, TXC_F32), -1); /* (L, 1) */
    txc_tensor *freqs = txc_mul(pos, inv_freq);                                     /* (L, d/2) */
    txc_tensor *emb = txc_cat((txc_tensor *[]){freqs, freqs}, 2, -1);
    txc_tensor *cos = txc_cos(emb), *sin = txc_sin(emb);
    txc_tensor *q = txc_transpose(txc_view(txc_linear(x, wq, NULL), 4, SHAPE(B, L, H, d)), 1, 2);
    txc_tensor *halves[2] = {txc_neg(txc_narrow(q, -1, d / 2, d / 2)), txc_narrow(q, -1, 0, d / 2)};
    txc_tensor *rq = txc_add(txc_mul(q, cos), txc_mul(txc_cat(halves, 2, -1), sin));
    txc_tensor *gate = txc_silu(txc_linear(x, wg, NULL));
    txc_tensor *up = txc_linear(x, wg, NULL); /* the same linear again: CSE */
    txc_tensor *mlp = txc_linear(txc_mul(gate, txc_add(up, txc_linear(x, wu, NULL))), wd, NULL);
    out[0] = txc_add(x, mlp);
    out[1] = rq;
    *n_out = 2;
    return out[0] && out[1] ? TXC_OK : txc_last_status();
}

/* ---- residual adds into linears ------------------------------------------------------------ */

static int in_residual(txc_tensor **in)
{
    setup_rng();
    in[0] = rand_tensor(3, SHAPE(1, 3, 16)); /* x */
    in[1] = rand_tensor(2, SHAPE(8, 16));    /* w */
    in[2] = rand_tensor(1, SHAPE(8));        /* b */
    in[3] = rand_tensor(3, SHAPE(1, 3, 8));  /* h */
    in[4] = rand_tensor(2, SHAPE(8, 16));    /* w2 */
    in[5] = rand_tensor(3, SHAPE(1, 8, 3));  /* a residual read transposed */
    return 6;
}

static void fn_residual(txc_tensor *const *in, txc_tensor **out, int *n)
{
    txc_tensor *x = in[0], *w = in[1], *b = in[2], *h = in[3];
    out[0] = txc_add(h, txc_linear(x, w, b));                  /* fused: h is an input */
    out[1] = txc_add(txc_linear(x, in[4], NULL), out[0]);      /* fused: out[0] is ready before */
    txc_tensor *y3 = txc_linear(x, w, NULL);
    out[2] = y3;                                               /* y3 read twice: not fused */
    out[3] = txc_add(y3, h);
    txc_tensor *y4 = txc_linear(x, w, NULL), *r4 = txc_mul_scalar(h, 2.0);
    out[4] = txc_add(y4, r4);                                  /* r4 made after the linear: not fused */
    out[5] = txc_add(txc_linear(x, w, NULL), b);               /* broadcast: not fused */
    out[6] = txc_add(txc_linear(x, w, NULL), txc_transpose(in[5], 1, 2)); /* not contiguous: not fused */
    *n = 7;
}

static void test_residual_into_linear(void **state)
{
    (void)state;
    int c;
    txc_graph *g = check_passes(fn_residual, in_residual, P_RESIDUAL, &c);
    assert_int_equal(c, 2);
    int flagged = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead && g->nodes[i].op == TXC_OP_LINEAR && (g->nodes[i].attrs.flags & TXC_ATTR_RESIDUAL))
            flagged++;
    assert_int_equal(flagged, 2);
    assert_int_equal(count_live(g, TXC_OP_ADD), 4);
    txc_graph_free(g);
}

/* bfloat16 and float16: the fused linear rounds its result before adding, as the separate ops do */
static void fn_residual_half(txc_tensor *const *in, txc_tensor **out, int *n)
{
    txc_tensor *xb = txc_to_dtype(in[0], TXC_BF16), *wb = txc_to_dtype(in[1], TXC_BF16);
    txc_tensor *bb = txc_to_dtype(in[2], TXC_BF16), *hb = txc_to_dtype(in[3], TXC_BF16);
    txc_tensor *xh = txc_to_dtype(in[0], TXC_F16), *wh = txc_to_dtype(in[1], TXC_F16);
    txc_tensor *hh = txc_to_dtype(in[3], TXC_F16);
    out[0] = txc_add(hb, txc_linear(xb, wb, bb));                 /* fused, bf16 */
    out[1] = txc_add(txc_linear(xb, in[4], NULL), in[3]);         /* bf16 x f32 weight: f32 result, fused */
    out[2] = txc_add(txc_linear(xb, wb, NULL), in[3]);            /* bf16 linear + f32 residual: not fused */
    out[3] = txc_add(txc_linear(xh, wh, NULL), hh);               /* fused, f16 */
    out[4] = txc_add(txc_linear(xh, wh, NULL), hb);               /* f16 + bf16 (f32 sum): not fused */
    *n = 5;
}

static void test_residual_half(void **state)
{
    (void)state;
    int c;
    txc_graph *g = check_passes(fn_residual_half, in_residual, P_RESIDUAL, &c);
    assert_int_equal(c, 3);
    assert_int_equal(count_live(g, TXC_OP_ADD), 2);
    txc_graph_free(g);
}

static void test_jit_end_to_end(void **state)
{
    (void)state;
    setup_rng();
    inv_freq = rand_tensor(1, SHAPE(4));
    txc_tensor *in[5] = {rand_tensor(3, SHAPE(1, 6, 16)), rand_tensor(2, SHAPE(16, 16)),
                         rand_tensor(2, SHAPE(24, 16)), rand_tensor(2, SHAPE(24, 16)),
                         rand_tensor(2, SHAPE(16, 24))};
    results want = {0};
    txc_env *env = txc_env_active();
    int mark = txc_env_scope_begin(env);
    txc_tensor *eo[2];
    int n = 0;
    assert_int_equal(block_fn(NULL, in, 5, NULL, 0, eo, 2, &n), TXC_OK);
    take(&want, eo[0]);
    take(&want, eo[1]);
    txc_env_scope_end(env, mark);

    txc_jit *jit = txc_jit_new(NULL, "block", block_fn, NULL);
    assert_non_null(jit);
    for (int call = 0; call < 2; call++) {
        txc_tensor *jo[2];
        int nj = 0;
        if (txc_jit_call(jit, in, 5, NULL, NULL, 0, jo, 2, &nj) != TXC_OK)
            fail_msg("jit: %s", txc_last_error());
        assert_int_equal(nj, 2);
        results got = {0};
        take(&got, jo[0]);
        take(&got, jo[1]);
        for (int k = 0; k < 2; k++)
            for (int64_t i = 0; i < want.numel[k]; i++) {
                float a = got.v[k][i], b = want.v[k][i];
                if (!(fabsf(a - b) <= 1e-6f * fabsf(b) + 1e-7f))
                    fail_msg("output %d element %lld: %.9g vs eager %.9g", k, (long long)i, a, b);
            }
        results_free(&got);
    }
    txc_jit_stats st = txc_jit_get_stats(jit);
    if (getenv("TXC_TEST_VERBOSE")) {
        fprintf(stderr, "traced %d nodes, compiled %d\n", st.nodes_traced, st.nodes_compiled);
        txc_jit_dump_last_graph(jit, stderr);
    }
    /* kernels traced: arange mul cat cos sin | linear neg cat mul mul add | linear silu linear linear add mul
     * linear add = 19. CSE: linear; fold: arange mul cat cos sin; patterns: neg cat mul mul add ->
     * rotary_embedding; fuse: silu add mul -> 1; residual: the last linear absorbs the add after it. */
    assert_int_equal(st.misses, 1);
    assert_int_equal(st.hits, 1);
    assert_int_equal(st.nodes_compiled, 19 - 1 - 5 - 4 - 2 - 1);
    txc_jit_free(jit);
    results_free(&want);
    release_all(in, 5);
    txc_tensor_release(inv_freq);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cse_merges_duplicates),
        cmocka_unit_test(test_cse_not_across_inplace),
        cmocka_unit_test(test_fold_arange_mul),
        cmocka_unit_test(test_fold_skips),
        cmocka_unit_test(test_fuse_chain),
        cmocka_unit_test(test_fuse_respects_uses),
        cmocka_unit_test(test_fuse_broadcast),
        cmocka_unit_test(test_fuse_rope_noncontiguous),
        cmocka_unit_test(test_fuse_threads),
        cmocka_unit_test(test_fuse_all_ops_bitwise),
        cmocka_unit_test(test_fuse_not_across_inplace),
        cmocka_unit_test(test_fuse_limits),
        cmocka_unit_test(test_fused_run_checks),
        cmocka_unit_test(test_residual_into_linear),
        cmocka_unit_test(test_residual_half),
        cmocka_unit_test(test_jit_end_to_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
