/* The JIT: tracing, the plan cache and its recompile reasons, weights as
 * inputs, static arguments, in-place state, errors, parity with eager on a
 * real model, and zero heap allocations per compiled call. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txc/jit.h"
#include "txc/model.h"
#include "txc/ops.h"
#include "txc/threads.h"
#include "txc/tree.h"
#include "ops/kernels.h"


static txc_env *env;

static txc_tensor *make(int ndim, const int64_t *shape, float seed)
{
    int64_t n = txc_shape_numel(ndim, shape);
    float *v = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        v[i] = sinf(seed + 0.37f * (float)i);
    txc_tensor *t = txc_tensor_from_data(env, TXC_F32, ndim, shape, v);
    free(v);
    return t;
}

static void assert_close(const txc_tensor *a, const txc_tensor *b, double rtol)
{
    assert_int_equal(txc_tensor_numel(a), txc_tensor_numel(b));
    int64_t n = txc_tensor_numel(a);
    float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
    assert_int_equal(txc_tensor_copy_to_f32(a, x, n), TXC_OK);
    assert_int_equal(txc_tensor_copy_to_f32(b, y, n), TXC_OK);
    for (int64_t i = 0; i < n; i++)
        if (!(fabsf(x[i] - y[i]) <= 1e-6f + rtol * fabsf(y[i])))
            fail_msg("element %lld: %g vs %g", (long long)i, x[i], y[i]);
    free(x);
    free(y);
}

/* f(x, w, b) = silu(linear(x, w, b)) * 2 + linear(x, w, b); static byte 0:
 * whether to add the bias. Counts its traces. */
static int traces;
static txc_status mlp(void *ctx, txc_tensor *const *in, int n, const void *st, size_t len, txc_tensor **out,
                      int max, int *n_out)
{
    (void)ctx;
    (void)n;
    (void)max;
    traces++;
    bool bias = len > 0 && ((const unsigned char *)st)[0];
    txc_tensor *y = txc_linear(in[0], in[1], bias ? in[2] : NULL);
    out[0] = txc_add(txc_mul_scalar(txc_silu(y), 2.0), y);
    *n_out = 1;
    return out[0] ? TXC_OK : txc_last_status();
}

static txc_tensor *mlp_eager(txc_tensor *x, txc_tensor *w, txc_tensor *b)
{
    txc_tensor *y = txc_linear(x, w, b);
    return txc_add(txc_mul_scalar(txc_silu(y), 2.0), y);
}

static void test_trace_and_cache(void **state)
{
    (void)state;
    int mark = txc_env_scope_begin(env);
    txc_tensor *x = make(2, (int64_t[]){2, 4}, 0.1f), *w = make(2, (int64_t[]){3, 4}, 0.2f),
               *b = make(1, (int64_t[]){3}, 0.3f);
    txc_jit *jit = txc_jit_new(env, "mlp", mlp, NULL);
    txc_tensor *in[3] = {x, w, b}, *out[1];
    const char *names[3] = {"x", "weight", "bias"};
    int n_out;
    unsigned char flag = 1;
    traces = 0;
    assert_int_equal(txc_jit_call(jit, in, 3, names, &flag, 1, out, 1, &n_out), TXC_OK);
    assert_int_equal(n_out, 1);
    assert_close(out[0], mlp_eager(x, w, b), 1e-6);
    assert_string_equal(txc_jit_last_recompile_reason(jit), "first call");
    /* same signature: the plan is reused, the function is not traced again */
    assert_int_equal(txc_jit_call(jit, in, 3, names, &flag, 1, out, 1, &n_out), TXC_OK);
    txc_jit_stats st = txc_jit_get_stats(jit);
    assert_int_equal(st.misses, 1);
    assert_int_equal(st.hits, 1);
    assert_int_equal(traces, 1);
    /* weights are inputs: other weights of the same shape reuse the plan */
    txc_tensor *w2 = make(2, (int64_t[]){3, 4}, 1.7f);
    in[1] = w2;
    assert_int_equal(txc_jit_call(jit, in, 3, names, &flag, 1, out, 1, &n_out), TXC_OK);
    assert_close(out[0], mlp_eager(x, w2, b), 1e-6);
    assert_int_equal(txc_jit_get_stats(jit).misses, 1);
    /* a new shape recompiles, and says which input changed */
    txc_tensor *x3 = make(2, (int64_t[]){5, 4}, 0.4f);
    in[0] = x3;
    assert_int_equal(txc_jit_call(jit, in, 3, names, &flag, 1, out, 1, &n_out), TXC_OK);
    assert_close(out[0], mlp_eager(x3, w2, b), 1e-6);
    assert_int_equal(txc_jit_get_stats(jit).misses, 2);
    assert_string_equal(txc_jit_last_recompile_reason(jit), "input 0 'x' shape [2, 4] -> [5, 4]");
    /* a non-contiguous input of the same shape is another signature */
    txc_tensor *xt = txc_transpose(make(2, (int64_t[]){4, 5}, 0.4f), 0, 1);
    in[0] = xt;
    assert_int_equal(txc_jit_call(jit, in, 3, names, &flag, 1, out, 1, &n_out), TXC_OK);
    assert_close(out[0], mlp_eager(xt, w2, b), 1e-6);
    assert_non_null(strstr(txc_jit_last_recompile_reason(jit), "strides"));
    /* a static flag specialises the plan: it is part of the key */
    in[0] = x;
    flag = 0;
    assert_int_equal(txc_jit_call(jit, in, 3, names, &flag, 1, out, 1, &n_out), TXC_OK);
    assert_close(out[0], mlp_eager(x, w2, NULL), 1e-6);
    assert_non_null(strstr(txc_jit_last_recompile_reason(jit), "static argument"));
    flag = 1;
    assert_int_equal(txc_jit_call(jit, in, 3, names, &flag, 1, out, 1, &n_out), TXC_OK);
    assert_close(out[0], mlp_eager(x, w2, b), 1e-6);
    assert_int_equal(txc_jit_get_stats(jit).n_plans, 4);
    txc_jit_free(jit);
    txc_env_scope_end(env, mark);
}

/* The plan cache holds at most TXC_JIT_MAX_PLANS plans: a new signature
 * beyond that drops the least recently used one, which then recompiles. */
static void test_plan_limit(void **state)
{
    (void)state;
    int mark = txc_env_scope_begin(env);
    txc_tensor *w = make(2, (int64_t[]){3, 4}, 0.2f), *b = make(1, (int64_t[]){3}, 0.3f);
    txc_jit *jit = txc_jit_new(env, "mlp", mlp, NULL);
    unsigned char flag = 1;
    const int n_shapes = TXC_JIT_MAX_PLANS + 4;
    for (int rep = 0; rep < 2; rep++)
        for (int r = 1; r <= n_shapes; r++) { /* x of r rows: a new signature each */
            txc_tensor *x = make(2, (int64_t[]){r, 4}, 0.1f * (float)r), *in[3] = {x, w, b}, *out[1];
            int n_out;
            assert_int_equal(txc_jit_call(jit, in, 3, NULL, &flag, 1, out, 1, &n_out), TXC_OK);
            assert_close(out[0], mlp_eager(x, w, b), 1e-6);
            txc_jit_stats st = txc_jit_get_stats(jit);
            assert_true(st.n_plans <= TXC_JIT_MAX_PLANS);
        }
    txc_jit_stats st = txc_jit_get_stats(jit);
    assert_int_equal(st.n_plans, TXC_JIT_MAX_PLANS);
    /* the second round finds none of its plans (each was dropped 4 signatures before it came back) */
    assert_int_equal(st.misses, 2 * n_shapes);
    assert_int_equal(st.evictions, 2 * n_shapes - TXC_JIT_MAX_PLANS);
    /* the most recent signature is still held */
    txc_tensor *x = make(2, (int64_t[]){n_shapes, 4}, 0.5f), *in[3] = {x, w, b}, *out[1];
    int n_out;
    assert_int_equal(txc_jit_call(jit, in, 3, NULL, &flag, 1, out, 1, &n_out), TXC_OK);
    assert_int_equal(txc_jit_get_stats(jit).hits, 1);
    txc_jit_free(jit);
    txc_env_scope_end(env, mark);
}

/* The plans held keep their arenas within TXC_JIT_MAX_PLAN_BYTES together:
 * signatures with multi-MB arenas (a DynamicCache step's concatenated
 * cache) do not pile up 16 of them; a plan over the budget alone is held. */
static void test_plan_bytes_limit(void **state)
{
    (void)state;
    int mark = txc_env_scope_begin(env);
    txc_tensor *w = make(2, (int64_t[]){3, 4}, 0.2f), *b = make(1, (int64_t[]){3}, 0.3f);
    txc_jit *jit = txc_jit_new(env, "mlp", mlp, NULL);
    unsigned char flag = 1;
    txc_tensor *in[3] = {NULL, w, b}, *out[1];
    int n_out;
    int64_t arena = 0;
    for (int r = 0; r < 8; r++) { /* ~100k rows: arenas of a few MB, a new signature each */
        int mark2 = txc_env_scope_begin(env);
        in[0] = make(2, (int64_t[]){100000 + r, 4}, 0.1f);
        assert_int_equal(txc_jit_call(jit, in, 3, NULL, &flag, 1, out, 1, &n_out), TXC_OK);
        txc_jit_stats st = txc_jit_get_stats(jit);
        arena = st.arena_bytes;
        assert_true(arena > (1 << 20));
        assert_true(st.n_plans == 1 || (int64_t)st.n_plans * (arena - 4096) <= TXC_JIT_MAX_PLAN_BYTES);
        txc_env_scope_end(env, mark2);
    }
    txc_jit_stats st = txc_jit_get_stats(jit);
    print_message("arena %.1f MB per plan: %d plans held, %llu dropped\n", (double)arena / 1e6, st.n_plans,
                  (unsigned long long)st.evictions);
    assert_true(st.n_plans < 8);
    assert_true(st.evictions > 0);
    /* one plan whose arena alone is over the budget stays, and is reused */
    int64_t rows = TXC_JIT_MAX_PLAN_BYTES / 8;
    in[0] = make(2, (int64_t[]){rows, 4}, 0.1f);
    assert_int_equal(txc_jit_call(jit, in, 3, NULL, &flag, 1, out, 1, &n_out), TXC_OK);
    assert_close(out[0], mlp_eager(in[0], w, b), 1e-6);
    assert_true(txc_jit_get_stats(jit).arena_bytes > TXC_JIT_MAX_PLAN_BYTES);
    assert_int_equal(txc_jit_get_stats(jit).n_plans, 1);
    uint64_t hits = txc_jit_get_stats(jit).hits;
    assert_int_equal(txc_jit_call(jit, in, 3, NULL, &flag, 1, out, 1, &n_out), TXC_OK);
    assert_int_equal(txc_jit_get_stats(jit).hits, hits + 1);
    txc_jit_free(jit);
    txc_env_scope_end(env, mark);
}

/* State written inside the call reaches the caller: index_copy_ into an
 * input (a cache) writes the caller's buffer; a counter is an output. */
static txc_status write_state(void *ctx, txc_tensor *const *in, int n, const void *st, size_t len, txc_tensor **out,
                              int max, int *n_out)
{
    (void)ctx, (void)n, (void)st, (void)len, (void)max;
    txc_status s = txc_index_copy_(in[0], 0, in[1], in[2]);
    if (s != TXC_OK)
        return s;
    out[0] = txc_sum(in[0], 0, NULL, false);
    out[1] = txc_add_scalar(in[3], 1); /* counter + 1 */
    *n_out = 2;
    return TXC_OK;
}

static void test_inplace_state(void **state)
{
    (void)state;
    int mark = txc_env_scope_begin(env);
    txc_tensor *cache = txc_zeros(env, 2, (int64_t[]){4, 3}, TXC_F32);
    txc_tensor *row = make(2, (int64_t[]){1, 3}, 0.5f);
    int64_t p = 2, one = 1, c0 = 7;
    txc_tensor *pos = txc_tensor_from_data(env, TXC_I64, 1, &one, &p);
    txc_tensor *counter = txc_tensor_from_data(env, TXC_I64, 0, NULL, &c0);
    void *before = txc_tensor_data_ptr(cache);
    txc_jit *jit = txc_jit_new(env, "write", write_state, NULL);
    txc_tensor *in[4] = {cache, pos, row, counter}, *out[2];
    int n_out;
    assert_int_equal(txc_jit_call(jit, in, 4, NULL, NULL, 0, out, 2, &n_out), TXC_OK);
    assert_ptr_equal(txc_tensor_data_ptr(cache), before); /* donated: written in place */
    assert_true(fabs(txc_tensor_item_at(cache, (int64_t[]){2, 1}) - sin(0.5 + 0.37)) < 1e-6);
    assert_true(txc_tensor_item_at(cache, (int64_t[]){1, 1}) == 0.0);
    assert_int_equal((int64_t)txc_tensor_item(out[1]), 8);
    /* second call at another position: same plan, both rows now set */
    p = 0;
    memcpy(txc_tensor_data_ptr(pos), &p, sizeof p);
    assert_int_equal(txc_jit_call(jit, in, 4, NULL, NULL, 0, out, 2, &n_out), TXC_OK);
    assert_true(fabs(txc_tensor_item_at(cache, (int64_t[]){0, 2}) - sin(0.5 + 0.74)) < 1e-6);
    assert_true(fabs(txc_tensor_item_at(cache, (int64_t[]){2, 2}) - sin(0.5 + 0.74)) < 1e-6);
    assert_int_equal(txc_jit_get_stats(jit).misses, 1);
    /* a position past the cache is an error at run time, nothing written */
    p = 4;
    memcpy(txc_tensor_data_ptr(pos), &p, sizeof p);
    txc_clear_error();
    assert_int_equal(txc_jit_call(jit, in, 4, NULL, NULL, 0, out, 2, &n_out), TXC_ERR_INVALID);
    assert_non_null(strstr(txc_last_error(), "out of range"));
    txc_clear_error();
    txc_jit_free(jit);
    txc_env_scope_end(env, mark);
}

static txc_tensor *outside; /* a concrete tensor, not an input */

static txc_status bad_fn(void *ctx, txc_tensor *const *in, int n, const void *st, size_t len, txc_tensor **out,
                         int max, int *n_out)
{
    (void)n, (void)st, (void)len, (void)max;
    int which = *(int *)ctx;
    if (which == 0) { /* an output that is not computed in the call */
        out[0] = outside;
    } else { /* a shape error while tracing */
        out[0] = txc_matmul(in[0], in[0]);
    }
    *n_out = 1;
    return out[0] ? TXC_OK : txc_last_status();
}

static void test_errors(void **state)
{
    (void)state;
    int mark = txc_env_scope_begin(env);
    txc_tensor *x = make(2, (int64_t[]){2, 3}, 0.1f), *out[1];
    outside = make(1, (int64_t[]){3}, 0.2f);
    int n_out, which = 0;
    txc_jit *jit = txc_jit_new(env, "bad", bad_fn, &which);
    txc_clear_error();
    assert_int_not_equal(txc_jit_call(jit, &x, 1, NULL, NULL, 0, out, 1, &n_out), TXC_OK);
    assert_non_null(strstr(txc_last_error(), "does not depend on the inputs"));
    which = 1;
    txc_clear_error();
    assert_int_equal(txc_jit_call(jit, &x, 1, NULL, NULL, 0, out, 1, &n_out), TXC_ERR_INVALID);
    assert_non_null(strstr(txc_last_error(), "matmul"));
    txc_clear_error();
    /* an input of another environment */
    txc_env *other = txc_env_new(NULL);
    txc_tensor *y = txc_tensor_to_env(x, other);
    assert_int_equal(txc_jit_call(jit, &y, 1, NULL, NULL, 0, out, 1, &n_out), TXC_ERR_ENV);
    txc_clear_error();
    txc_tensor_release(y);
    txc_env_free(other);
    txc_jit_free(jit);
    txc_env_scope_end(env, mark);
}

/* ---- the real model: a decode step with a StaticCache ------------------------ */

typedef struct step_ctx {
    txc_model *model;
    int n_params;
    unsigned char aux[TXC_TREE_MAX_AUX];
    size_t aux_len;
} step_ctx;

static txc_status decode_step(void *ctx, txc_tensor *const *in, int n, const void *st, size_t len, txc_tensor **out,
                              int max, int *n_out)
{
    (void)st, (void)len, (void)max;
    step_ctx *c = ctx;
    int P = c->n_params, C = n - P - 2;
    txc_kv_cache *cache = txc_tree_unflatten("StaticCache", c->aux, c->aux_len, in + P, C, env);
    out[0] = txc_model_forward_with(c->model, in, in[P + C], NULL, cache, in[P + C + 1], 1, NULL);
    *n_out = 1;
    txc_tree_free("StaticCache", cache);
    return out[0] ? TXC_OK : txc_last_status();
}

static void test_model_step(void **state)
{
    (void)state;
    txc_model *m = NULL;
    assert_int_equal(txc_model_load(tu_path("%s/models/stories260K", tu_shared_dir()), NULL, &m), TXC_OK);
    assert_int_equal(txc_cache_register_trees(), TXC_OK);
    int P = txc_model_num_parameters(m);
    assert_int_equal(P, 47); /* tied lm_head: one buffer, passed once */
    txc_kv_cache *jc = txc_static_cache_new(env, 5, 1, 4, 64, 8), *ec = txc_static_cache_new(env, 5, 1, 4, 64, 8);
    step_ctx ctx = {.model = m, .n_params = P};
    txc_tensor *in[47 + 10 + 2], *out[1];
    memcpy(in, txc_model_parameters(m), sizeof(txc_tensor *) * (size_t)P);
    int C;
    assert_int_equal(txc_tree_flatten("StaticCache", jc, in + P, 10, &C, ctx.aux, &ctx.aux_len), TXC_OK);
    assert_int_equal(C, 10);
    int64_t one = 1, shape[2] = {1, 1}, tok = 1, pos = 0;
    txc_tensor *ids = txc_tensor_from_data(env, TXC_I64, 2, shape, &tok);
    txc_tensor *cp = txc_tensor_from_data(env, TXC_I64, 1, &one, &pos);
    in[P + C] = ids;
    in[P + C + 1] = cp;
    txc_jit *jit = txc_jit_new(env, "decode", decode_step, &ctx);
    int n_out;
    long allocs = 0;
    (void)allocs; /* counted only without ASan */
    for (int step = 0; step < 24; step++) {
        ((int64_t *)txc_tensor_data_ptr(ids))[0] = tok;
        ((int64_t *)txc_tensor_data_ptr(cp))[0] = step;
#if TU_HEAP_COUNTED
        long before = tu_heap_calls();
#endif
        assert_int_equal(txc_jit_call(jit, in, P + C + 2, NULL, NULL, 0, out, 1, &n_out), TXC_OK);
#if TU_HEAP_COUNTED
        if (step >= 2) /* after compiling and warming the kernels' scratch */
            allocs += tu_heap_calls() - before;
#endif
        /* eager on its own cache: the same logits within 1e-5 relative */
        int mark = txc_env_scope_begin(env);
        txc_tensor *e = txc_model_forward(m, ids, NULL, ec, cp, 1);
        assert_non_null(e);
        assert_close(out[0], e, 1e-5);
        txc_tensor *am = txc_argmax(txc_view(out[0], 1, (int64_t[]){512}), 0, false);
        tok = (int64_t)txc_tensor_item(am);
        txc_env_scope_end(env, mark);
    }
    assert_int_equal(txc_jit_get_stats(jit).misses, 1);
#if TU_HEAP_COUNTED
    printf("heap calls in 22 compiled decode calls: %ld\n", allocs);
    assert_int_equal(allocs, 0);
#else
    printf("allocation count skipped under AddressSanitizer\n");
#endif
    txc_jit_free(jit);
    txc_kv_cache_free(jc);
    txc_kv_cache_free(ec);
    txc_tensor_release(ids);
    txc_tensor_release(cp);
    txc_model_free(m);
}

/* Sibling linears: q/k/v on one input run as one group in the plan (one
 * row: the grouped GEMV; 40 rows at SIMD level 1: the packed GEMM with A
 * packed once), bit-identical to eager. in: x (1, L, K), wq f32, wk bf16 + bias, wbig
 * bf16 (v is a narrow of it, as Phi-3's fused qkv_proj), wu, wg, wh. */
static txc_tensor *siblings_eager(txc_tensor *const *in, txc_tensor **out)
{
    out[0] = txc_linear(in[0], in[1], NULL);
    out[1] = txc_linear(in[0], in[2], in[3]);
    out[2] = txc_linear(in[0], txc_narrow(in[4], 0, 50, 90), NULL);
    out[3] = txc_linear(txc_mul_scalar(in[0], 2.0), in[5], NULL); /* another input: not a sibling */
    out[4] = txc_mul(txc_linear(in[0], in[6], NULL), txc_linear(in[0], in[7], NULL)); /* (an add: a residual) */
    return out[4];
}

static txc_status siblings(void *ctx, txc_tensor *const *in, int n, const void *st, size_t len, txc_tensor **out,
                           int max, int *n_out)
{
    (void)ctx, (void)n, (void)st, (void)len, (void)max;
    *n_out = 5;
    return siblings_eager(in, out) ? TXC_OK : txc_last_status();
}

static void assert_same_bits(const txc_tensor *a, const txc_tensor *b)
{
    int64_t n = txc_tensor_numel(a);
    assert_int_equal(n, txc_tensor_numel(b));
    float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
    assert_int_equal(txc_tensor_copy_to_f32(a, x, n), TXC_OK);
    assert_int_equal(txc_tensor_copy_to_f32(b, y, n), TXC_OK);
    assert_memory_equal(x, y, sizeof(float) * (size_t)n);
    free(x);
    free(y);
}

static void test_sibling_linears(void **state)
{
    (void)state;
    int threads = txc_threads_get();
    const int64_t K = 200; /* not a multiple of 32: the GEMV's tail */
    const int levels = txc_kern_simd_level() + 1;
    for (int c = 0; c < 6 * levels; c++) {
        /* every SIMD level (their row tiles differ) at 1-3 threads, one row and 40 */
        int t = 1 + c % 3;
        const int64_t L = (c / 3) % 2 ? 40 : 1;
        txc_kern_set_simd_level(c / 6);
        assert_int_equal(txc_threads_set(t), TXC_OK);
        int mark = txc_env_scope_begin(env);
        txc_tensor *in[8] = {
            make(3, (int64_t[]){1, L, K}, 0.1f),
            make(2, (int64_t[]){301, K}, 0.2f),
            txc_to_dtype(make(2, (int64_t[]){70, K}, 0.3f), TXC_BF16),
            make(1, (int64_t[]){70}, 0.4f),
            txc_to_dtype(make(2, (int64_t[]){200, K}, 0.5f), TXC_BF16),
            make(2, (int64_t[]){64, K}, 0.6f),
            txc_to_dtype(make(2, (int64_t[]){513, K}, 0.7f), TXC_BF16),
            txc_to_dtype(make(2, (int64_t[]){513, K}, 0.8f), TXC_BF16),
        };
        txc_jit *jit = txc_jit_new(env, "siblings", siblings, NULL);
        txc_tensor *out[5], *ref[5];
        int n_out;
        assert_int_equal(txc_jit_call(jit, in, 8, NULL, NULL, 0, out, 5, &n_out), TXC_OK);
        assert_int_equal(n_out, 5);
        /* {q, k, v} and the two linears multiplied together, moved up past the 2x and its linear
         * (which commute with them): one group; not the linear of 2x */
        assert_int_equal(txc_jit_get_stats(jit).linear_groups, 1);
        assert_non_null(siblings_eager(in, ref));
        for (int i = 0; i < 5; i++)
            assert_same_bits(out[i], ref[i]);
        txc_jit_free(jit);
        txc_env_scope_end(env, mark);
    }
    txc_kern_set_simd_level(-1);
    assert_int_equal(txc_threads_set(threads), TXC_OK);
}

/* LlamaMLP at bfloat16: silu(gate_proj(x)) runs between gate_proj and up_proj (no elementwise
 * fusion there); up_proj moves up past it into gate_proj's group. */
static txc_tensor *swiglu_eager(txc_tensor *const *in, txc_tensor **out)
{
    txc_tensor *act = txc_silu(txc_linear(in[0], in[1], NULL)); /* traced in this order */
    out[0] = txc_mul(act, txc_linear(in[0], in[2], NULL));
    return out[0];
}

static txc_status swiglu(void *ctx, txc_tensor *const *in, int n, const void *st, size_t len, txc_tensor **out, int max,
                      int *n_out)
{
    (void)ctx, (void)n, (void)st, (void)len, (void)max;
    *n_out = 1;
    return swiglu_eager(in, out) ? TXC_OK : txc_last_status();
}

static void test_sibling_linears_past_activation(void **state)
{
    (void)state;
    const int64_t K = 96;
    int mark = txc_env_scope_begin(env);
    txc_tensor *in[3] = {
        txc_to_dtype(make(3, (int64_t[]){1, 1, K}, 0.1f), TXC_BF16),
        txc_to_dtype(make(2, (int64_t[]){160, K}, 0.2f), TXC_BF16),
        txc_to_dtype(make(2, (int64_t[]){160, K}, 0.3f), TXC_BF16),
    };
    txc_jit *jit = txc_jit_new(env, "swiglu", swiglu, NULL);
    txc_tensor *out[1], *ref[1];
    int n_out;
    assert_int_equal(txc_jit_call(jit, in, 3, NULL, NULL, 0, out, 1, &n_out), TXC_OK);
    assert_int_equal(txc_jit_get_stats(jit).linear_groups, 1);
    assert_non_null(swiglu_eager(in, ref));
    assert_same_bits(out[0], ref[0]);
    txc_jit_free(jit);
    txc_env_scope_end(env, mark);
}

int main(void)
{
    env = txc_env_default();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_and_cache),
        cmocka_unit_test(test_inplace_state),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_model_step),
        cmocka_unit_test(test_sibling_linears),
        cmocka_unit_test(test_sibling_linears_past_activation),
        cmocka_unit_test(test_plan_limit), cmocka_unit_test(test_plan_bytes_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
