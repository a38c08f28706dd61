/* Sampling: the counter-based RNG (eager and inside a compiled plan), the
 * sample op against transformers' warpers (tests/fixtures/
 * sample_processors.json, scripts/gen_sample_fixtures.py) and hand-made
 * logits, the repetition penalty, and generation on stories260K: the same
 * seed gives the same tokens eager and compiled, one decode plan serves
 * every step while the tokens vary, greedy with repetition_penalty equals
 * transformers' generate(), defaults from generation_config.json. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txc/generate.h"
#include "txc/jit.h"
#include "txc/model.h"
#include "txc/ops.h"

/* ---- counting allocations (not under AddressSanitizer, which owns malloc) ---- */

static txc_env *env;

static const char *model_dir(void) { return tu_path("%s/models/stories260K", tu_shared_dir()); }

static txc_tensor *f32(int64_t n, const float *v) { return txc_tensor_from_data(env, TXC_F32, 1, &n, v); }

static int64_t counter_of(const txc_tensor *state) { return ((const int64_t *)txc_tensor_data_ptr(state))[1]; }

/* ---- the RNG ------------------------------------------------------------------------------ */

static void test_rng_uniform(void **unused)
{
    (void)unused;
    int mark = txc_env_scope_begin(env);
    txc_tensor *s = txc_rng_state(env, 1234);
    assert_non_null(s);
    enum { N = 10000 };
    txc_tensor *u = txc_rng_uniform(s, N), *u2 = txc_rng_uniform(s, N);
    assert_non_null(u);
    assert_int_equal(txc_tensor_dtype(u), TXC_F32);
    assert_int_equal(txc_tensor_numel(u), N);
    const float *a = txc_tensor_data_ptr(u), *b = txc_tensor_data_ptr(u2);
    /* a pure function of the state: the same numbers twice, state untouched */
    assert_memory_equal(a, b, sizeof(float) * N);
    assert_int_equal(counter_of(s), 0);
    double sum = 0, sq = 0;
    int bins[10] = {0};
    for (int i = 0; i < N; i++) {
        assert_true(a[i] >= 0.0f && a[i] < 1.0f);
        sum += a[i];
        sq += (double)a[i] * a[i];
        bins[(int)(a[i] * 10)]++;
    }
    double mean = sum / N, var = sq / N - mean * mean;
    assert_true(fabs(mean - 0.5) < 0.01);      /* sd of the mean: 0.0029 */
    assert_true(fabs(var - 1.0 / 12) < 0.005);
    double chi2 = 0;
    for (int i = 0; i < 10; i++)
        chi2 += (bins[i] - N / 10.0) * (bins[i] - N / 10.0) / (N / 10.0);
    assert_true(chi2 < 30); /* 9 degrees of freedom: p < 0.001 beyond 27.9 */
    /* counter-based: advancing by 5 then drawing 5 gives numbers 5..9 */
    assert_int_equal(txc_rng_advance_(s, 5), TXC_OK);
    assert_int_equal(counter_of(s), 5);
    assert_int_equal(((const int64_t *)txc_tensor_data_ptr(s))[0], 1234);
    txc_tensor *u3 = txc_rng_uniform(s, 5);
    assert_memory_equal(txc_tensor_data_ptr(u3), a + 5, sizeof(float) * 5);
    /* another seed, other numbers */
    txc_tensor *t = txc_rng_state(env, 1235);
    const float *c = txc_tensor_data_ptr(txc_rng_uniform(t, 100));
    int same = 0;
    for (int i = 0; i < 100; i++)
        same += c[i] == a[i];
    assert_true(same < 3);
    /* a seed above 2^63 is kept as its bits */
    txc_tensor *big = txc_rng_state(env, UINT64_MAX);
    assert_int_equal((uint64_t)((const int64_t *)txc_tensor_data_ptr(big))[0], UINT64_MAX);
    assert_non_null(txc_rng_uniform(big, 3));
    /* errors */
    int64_t three = 3;
    txc_tensor *bad = txc_zeros(env, 1, &three, TXC_I64);
    assert_null(txc_rng_uniform(bad, 1));
    assert_int_equal(txc_last_status(), TXC_ERR_INVALID);
    assert_null(txc_rng_uniform(txc_to_dtype(s, TXC_I32), 1));
    assert_null(txc_rng_uniform(s, -1));
    assert_int_equal(txc_rng_advance_(bad, 1), TXC_ERR_INVALID);
    assert_int_equal(txc_rng_advance_(s, -2), TXC_ERR_INVALID);
    txc_clear_error();
    txc_env_scope_end(env, mark);
}

/* f(state, logits) = (rng_uniform(state, 3), sample(logits / 0.8, u[0])),
 * advancing the state by 3 in place. Static byte: top_k. */
static txc_status draw_fn(void *ctx, txc_tensor *const *in, int n, const void *st, size_t len, txc_tensor **out,
                          int max, int *n_out)
{
    (void)ctx;
    (void)n;
    (void)max;
    (void)len;
    txc_tensor *u = txc_rng_uniform(in[0], 3);
    if (txc_rng_advance_(in[0], 3) != TXC_OK)
        return txc_last_status();
    out[0] = u;
    out[1] = txc_sample(txc_div_scalar(in[1], 0.8), txc_narrow(u, 0, 0, 1), ((const unsigned char *)st)[0], 0.9,
                        0.0);
    *n_out = 2;
    return out[1] ? TXC_OK : txc_last_status();
}

/* The state is an input that the plan advances in place: one plan, and
 * successive calls draw successive numbers — the same as eager code. */
static void test_rng_compiled(void **unused)
{
    (void)unused;
    int mark = txc_env_scope_begin(env);
    float lv[64];
    for (int i = 0; i < 64; i++)
        lv[i] = sinf(0.7f * (float)i) * 3.0f;
    txc_tensor *logits = f32(64, lv);
    txc_tensor *s = txc_rng_state(env, 77), *e = txc_rng_state(env, 77);
    txc_jit *jit = txc_jit_new(env, "draw", draw_fn, NULL);
    txc_tensor *in[2] = {s, logits}, *out[2];
    const char *names[2] = {"rng_state", "logits"};
    unsigned char top_k = 20;
    int n_out, distinct = 0;
    int64_t prev = -1;
    enum { CALLS = 40 };
    long allocs = 0;
    (void)allocs; /* counted only without ASan */
    for (int call = 0; call < CALLS; call++) {
#if TU_HEAP_COUNTED
        long before = tu_heap_calls();
#endif
        assert_int_equal(txc_jit_call(jit, in, 2, names, &top_k, 1, out, 2, &n_out), TXC_OK);
#if TU_HEAP_COUNTED
        if (call > 0)
            allocs += tu_heap_calls() - before;
#endif
        float got[3];
        memcpy(got, txc_tensor_data_ptr(out[0]), sizeof got);
        int64_t tok = ((const int64_t *)txc_tensor_data_ptr(out[1]))[0];
        /* eager, on its own state */
        txc_tensor *ue = txc_rng_uniform(e, 3);
        assert_int_equal(txc_rng_advance_(e, 3), TXC_OK);
        assert_memory_equal(got, txc_tensor_data_ptr(ue), sizeof got);
        txc_tensor *te = txc_sample(txc_div_scalar(logits, 0.8), txc_narrow(ue, 0, 0, 1), top_k, 0.9, 0.0);
        assert_int_equal(tok, (int64_t)txc_tensor_item(te));
        distinct += tok != prev;
        prev = tok;
        assert_int_equal(counter_of(s), 3 * (call + 1));
    }
    txc_jit_stats st = txc_jit_get_stats(jit);
    assert_int_equal(st.misses, 1);
    assert_int_equal(st.hits, CALLS - 1);
    assert_true(distinct > CALLS / 4); /* the draws vary from call to call */
#if TU_HEAP_COUNTED
    printf("heap allocations in %d compiled sampling calls: %ld\n", CALLS - 1, allocs);
    assert_int_equal(allocs, 0);
#else
    (void)allocs;
#endif
    /* top_k is static: another value compiles another plan */
    top_k = 5;
    assert_int_equal(txc_jit_call(jit, in, 2, names, &top_k, 1, out, 2, &n_out), TXC_OK);
    assert_int_equal(txc_jit_get_stats(jit).misses, 2);
    txc_jit_free(jit);
    txc_env_scope_end(env, mark);
}

/* ---- the sample op ------------------------------------------------------------------------- */

/* The token drawn with uniform u. */
static int64_t draw(txc_tensor *logits, float u, int64_t top_k, double top_p, double min_p)
{
    int mark = txc_env_scope_begin(env);
    txc_tensor *t = txc_sample(logits, f32(1, &u), top_k, top_p, min_p);
    if (!t)
        fail_msg("sample: %s", txc_last_error());
    int64_t tok = (int64_t)txc_tensor_item(t);
    txc_env_scope_end(env, mark);
    return tok;
}

/* Check the draws against the expected distribution p (V): every token
 * drawn on a fine grid of u has p > 0; u -> token is monotone in
 * vocabulary order (inverse CDF); u at the middle of each kept token's CDF
 * interval draws that token; the share of the grid per token is p. */
static void check_distribution(const char *what, txc_tensor *logits, int64_t V, const double *p, int64_t top_k,
                               double top_p, double min_p)
{
    enum { G = 4096 };
    int *hits = calloc((size_t)V, sizeof *hits);
    int64_t prev = -1;
    for (int g = 0; g < G; g++) {
        float u = ((float)g + 0.5f) / G;
        int64_t tok = draw(logits, u, top_k, top_p, min_p);
        if (tok < 0 || tok >= V || !(p[tok] > 0))
            fail_msg("%s: u %g drew token %lld, which transformers filters out", what, u, (long long)tok);
        if (tok < prev)
            fail_msg("%s: u %g drew token %lld after %lld: not an inverse CDF", what, u, (long long)tok,
                     (long long)prev);
        prev = tok;
        hits[tok]++;
    }
    double cum = 0, total = 0;
    for (int64_t i = 0; i < V; i++)
        total += p[i];
    for (int64_t i = 0; i < V; i++) {
        if (!(p[i] > 0))
            continue;
        double share = (double)hits[i] / G, want = p[i] / total;
        if (fabs(share - want) > 1.5 / G + 1e-4)
            fail_msg("%s: token %lld drawn on %.5f of the grid, transformers' probability %.5f", what, (long long)i,
                     share, want);
        if (want > 1e-4) {
            float mid = (float)(cum + want / 2);
            int64_t tok = draw(logits, mid, top_k, top_p, min_p);
            if (tok != i)
                fail_msg("%s: u %g (middle of token %lld's interval) drew %lld", what, mid, (long long)i,
                         (long long)tok);
        }
        cum += want;
    }
    /* the ends: u = 0 draws the first kept token, u just below 1 the last */
    int64_t first = -1, last = -1;
    for (int64_t i = 0; i < V; i++)
        if (p[i] > 0) {
            first = first < 0 ? i : first;
            last = i;
        }
    assert_int_equal(draw(logits, 0.0f, top_k, top_p, min_p), first);
    assert_int_equal(draw(logits, 1.0f - 0x1.0p-24f, top_k, top_p, min_p), last);
    free(hits);
}

static void test_sample_transformers(void **unused)
{
    (void)unused;
    cJSON *root = tu_load_json("tests/fixtures/sample_processors.json");
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "warpers"))
    {
        const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
        double T = cJSON_GetObjectItem(c, "temperature")->valuedouble;
        int64_t top_k = (int64_t)cJSON_GetObjectItem(c, "top_k")->valuedouble;
        double top_p = cJSON_GetObjectItem(c, "top_p")->valuedouble, min_p = cJSON_GetObjectItem(c, "min_p")->valuedouble;
        const cJSON *jl = cJSON_GetObjectItem(c, "logits"), *jp = cJSON_GetObjectItem(c, "probs");
        int64_t V = cJSON_GetArraySize(jl);
        assert_int_equal(cJSON_GetArraySize(jp), V);
        float *lv = malloc(sizeof(float) * (size_t)V);
        double *p = malloc(sizeof(double) * (size_t)V);
        for (int64_t i = 0; i < V; i++) {
            lv[i] = (float)cJSON_GetArrayItem(jl, (int)i)->valuedouble;
            p[i] = cJSON_GetArrayItem(jp, (int)i)->valuedouble;
        }
        int mark = txc_env_scope_begin(env);
        txc_tensor *logits = f32(V, lv);
        if (T != 1.0)
            logits = txc_div_scalar(logits, T); /* TemperatureLogitsWarper */
        check_distribution(name, logits, V, p, top_k, top_p, min_p);
        /* the same as a (1, V) row */
        int64_t shape[2] = {1, V};
        check_distribution(name, txc_reshape(logits, 2, shape), V, p, top_k, top_p, min_p);
        txc_env_scope_end(env, mark);
        free(lv);
        free(p);
        n++;
    }
    assert_true(n >= 10);
    cJSON_Delete(root);
}

/* Hand-made distributions: p = {0.05, 0.5, 0.1, 0.2, 0.15} at ids 0..4. */
static void test_sample_hand(void **unused)
{
    (void)unused;
    int mark = txc_env_scope_begin(env);
    const double pr[5] = {0.05, 0.5, 0.1, 0.2, 0.15};
    float lv[5];
    for (int i = 0; i < 5; i++)
        lv[i] = logf((float)pr[i]) + 3.0f;
    txc_tensor *l = f32(5, lv);
    /* no warper: all five */
    check_distribution("plain", l, 5, pr, 0, 1.0, 0.0);
    /* top_k 2: {0.5, 0.2} */
    check_distribution("top_k 2", l, 5, (double[]){0, 0.5, 0, 0.2, 0}, 2, 1.0, 0.0);
    /* top_k >= V: no-op */
    check_distribution("top_k 9", l, 5, pr, 9, 1.0, 0.0);
    /* top_p 0.6: ascending cumulative 0.05 0.15 0.3 0.5 1.0; removed where
     * <= 0.4 -> {0.5, 0.2} */
    check_distribution("top_p 0.6", l, 5, (double[]){0, 0.5, 0, 0.2, 0}, 0, 0.6, 0.0);
    /* top_p 0.8: removed where <= 0.2 -> {0.5, 0.2, 0.15} */
    check_distribution("top_p 0.8", l, 5, (double[]){0, 0.5, 0, 0.2, 0.15}, 0, 0.8, 0.0);
    /* top_p 0: the most probable only (min_tokens_to_keep) */
    check_distribution("top_p 0", l, 5, (double[]){0, 1, 0, 0, 0}, 0, 0.0, 0.0);
    /* min_p 0.25: keep p >= 0.125 -> {0.5, 0.2, 0.15} */
    check_distribution("min_p 0.25", l, 5, (double[]){0, 0.5, 0, 0.2, 0.15}, 0, 1.0, 0.25);
    /* min_p 1: the most probable */
    check_distribution("min_p 1", l, 5, (double[]){0, 1, 0, 0, 0}, 0, 1.0, 1.0);
    /* in order: top_k 4 drops 0.05; top_p 0.7 on the renormalised rest
     * (0.1 0.15 0.2 0.5)/0.95 removes cumulative <= 0.3: 0.105, 0.263 ->
     * {0.2, 0.5}; min_p 0.5 then drops 0.2 (< 0.5 * 0.5/0.7) */
    check_distribution("top_k 4 + top_p 0.7", l, 5, (double[]){0, 0.5, 0, 0.2, 0}, 4, 0.7, 0.0);
    check_distribution("top_k 4 + top_p 0.7 + min_p 0.5", l, 5, (double[]){0, 1, 0, 0, 0}, 4, 0.7, 0.5);
    /* -inf logits are never drawn; a lone finite one always is */
    float inf[4] = {-INFINITY, 1.0f, -INFINITY, 2.0f};
    check_distribution("-inf", f32(4, inf), 4, (double[]){0, 0.2689414, 0, 0.7310586}, 0, 1.0, 0.0);
    float one[3] = {-INFINITY, -INFINITY, 0.0f};
    assert_int_equal(draw(f32(3, one), 0.999f, 0, 1.0, 0.0), 2);
    /* top_k ties: every score equal to the k-th largest stays */
    float ties[5] = {1.0f, 3.0f, 2.0f, 2.0f, 0.0f};
    double e2 = exp(2.0), e3 = exp(3.0);
    check_distribution("top_k 2 ties", f32(5, ties), 5, (double[]){0, e3, e2, e2, 0}, 2, 1.0, 0.0);
    /* bfloat16 and float16 logits (the distribution of the rounded logits) */
    for (int h = 0; h < 2; h++) {
        txc_tensor *lh = txc_to_dtype(l, h ? TXC_F16 : TXC_BF16);
        float r[5];
        assert_int_equal(txc_tensor_copy_to_f32(lh, r, 5), TXC_OK);
        check_distribution(h ? "f16" : "bf16", lh, 5, (double[]){0, exp(r[1]), 0, exp(r[3]), 0}, 2, 1.0, 0.0);
    }
    /* a strided row */
    float wide[10];
    for (int i = 0; i < 10; i++)
        wide[i] = i % 2 ? -50.0f : lv[i / 2];
    txc_tensor *strided = txc_slice(f32(10, wide), 0, 0, 10, 2);
    check_distribution("strided", strided, 5, pr, 0, 1.0, 0.0);

    /* errors: bad arguments at the call, nothing to sample at run time */
    float u = 0.5f;
    txc_tensor *tu = f32(1, &u);
    assert_null(txc_sample(l, tu, -1, 1.0, 0.0));
    assert_int_equal(txc_last_status(), TXC_ERR_INVALID);
    assert_null(txc_sample(l, tu, 0, 1.5, 0.0));
    assert_null(txc_sample(l, tu, 0, NAN, 0.0));
    assert_null(txc_sample(l, tu, 0, 1.0, -0.1));
    assert_null(txc_sample(l, f32(5, lv), 0, 1.0, 0.0)); /* u of 5 */
    int64_t two[2] = {2, 5};
    assert_null(txc_sample(txc_zeros(env, 2, two, TXC_F32), tu, 0, 1.0, 0.0)); /* batch 2 */
    int64_t five = 5;
    assert_null(txc_sample(txc_zeros(env, 1, &five, TXC_I64), tu, 0, 1.0, 0.0));
    float none[2] = {-INFINITY, NAN};
    assert_null(txc_sample(f32(2, none), tu, 0, 1.0, 0.0));
    assert_int_equal(txc_last_status(), TXC_ERR_INVALID);
    txc_clear_error();
    txc_env_scope_end(env, mark);
}

static void test_repetition_penalty(void **unused)
{
    (void)unused;
    cJSON *root = tu_load_json("tests/fixtures/sample_processors.json");
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "repetition_penalty"))
    {
        int mark = txc_env_scope_begin(env);
        const cJSON *jl = cJSON_GetObjectItem(c, "logits"), *je = cJSON_GetObjectItem(c, "expected"), *id;
        int64_t V = cJSON_GetArraySize(jl);
        float lv[256];
        assert_true(V <= 256);
        for (int64_t i = 0; i < V; i++)
            lv[i] = (float)cJSON_GetArrayItem(jl, (int)i)->valuedouble;
        txc_tensor *seen = txc_zeros(env, 1, &V, TXC_BOOL);
        cJSON_ArrayForEach(id, cJSON_GetObjectItem(c, "input_ids"))((unsigned char *)txc_tensor_data_ptr(seen))[id->valueint] = 1;
        double pen = cJSON_GetObjectItem(c, "penalty")->valuedouble;
        txc_tensor *r = txc_repetition_penalty(f32(V, lv), seen, pen);
        assert_non_null(r);
        assert_int_equal(txc_tensor_dtype(r), TXC_F32);
        const float *got = txc_tensor_data_ptr(r);
        for (int64_t i = 0; i < V; i++) {
            float want = (float)cJSON_GetArrayItem(je, (int)i)->valuedouble;
            if (got[i] != want)
                fail_msg("penalty %g, token %lld: %.9g, transformers %.9g", pen, (long long)i, got[i], want);
        }
        txc_env_scope_end(env, mark);
    }
    cJSON_Delete(root);
}

/* ---- generation on stories260K -------------------------------------------------------------- */

static txc_generate_options sampled(txc_model *m, uint64_t seed)
{
    txc_generate_options o = txc_generate_default_options(m, model_dir());
    o.do_sample = true;
    o.temperature = 0.8;
    o.top_k = 40;
    o.top_p = 0.9;
    o.seed = seed;
    o.max_new_tokens = 60;
    o.n_eos = 0; /* 60 tokens whatever comes */
    return o;
}

static void run(txc_generator *gen, txc_model *m, const int32_t *ids, int64_t n, const txc_generate_options *o,
                txc_generate_result *r)
{
    txc_status s = gen ? txc_generator_run(gen, ids, n, o, r) : txc_generate(m, ids, n, o, r);
    if (s != TXC_OK)
        fail_msg("generate: %s", txc_last_error());
}

static void test_generate_sampled(void **unused)
{
    (void)unused;
    txc_model *m;
    assert_int_equal(txc_model_load(model_dir(), NULL, &m), TXC_OK);
    const int32_t ids[] = {1, 403, 407, 261, 378}; /* "Once upon a time" */
    txc_generator *gen = txc_generator_new(m);
    txc_generate_options o = sampled(m, 1);
    txc_generate_result rj, re, r2, rd, rs;
    run(gen, m, ids, 5, &o, &rj); /* compiled */
    o.jit = false;
    run(NULL, m, ids, 5, &o, &re); /* eager */
    assert_int_equal(rj.n_new, 60);
    assert_int_equal(re.n_new, 60);
    assert_memory_equal(rj.new_ids, re.new_ids, sizeof(int32_t) * 60);
    /* the state advanced once per token, inside the plans; one decode plan */
    assert_int_equal(rj.rng_counter, 60);
    assert_int_equal(re.rng_counter, 60);
    assert_int_equal(rj.decode_compilations, 1);
    assert_int_equal(txc_generator_jit_stats(gen, 1).misses, 1);
    int distinct = 0;
    for (int i = 0; i < 60; i++) {
        bool seen = false;
        for (int j = 0; j < i; j++)
            seen |= rj.new_ids[j] == rj.new_ids[i];
        distinct += !seen;
    }
    assert_true(distinct > 15);
    /* the same seed again on the same generator: the same tokens, no compilation */
    o.jit = true;
    run(gen, m, ids, 5, &o, &r2);
    assert_memory_equal(rj.new_ids, r2.new_ids, sizeof(int32_t) * 60);
    assert_int_equal(r2.prefill_compilations + r2.decode_compilations, 0);
    /* another seed, another text (same plans) */
    o = sampled(m, 2);
    run(gen, m, ids, 5, &o, &rs);
    int differ = 0;
    for (int i = 0; i < 60; i++)
        differ += rs.new_ids[i] != rj.new_ids[i];
    assert_true(differ > 0);
    assert_int_equal(txc_generator_jit_stats(gen, 1).misses, 1);
    /* a DynamicCache draws the same */
    o = sampled(m, 1);
    o.cache = TXC_CACHE_DYNAMIC;
    run(gen, m, ids, 5, &o, &rd);
    assert_memory_equal(rj.new_ids, rd.new_ids, sizeof(int32_t) * 60);
    /* sampling differs from greedy */
    txc_generate_options g = txc_generate_default_options(m, model_dir());
    g.max_new_tokens = 60;
    g.n_eos = 0;
    txc_generate_result rg;
    run(gen, m, ids, 5, &g, &rg);
    assert_int_equal(rg.rng_counter, 0);
    assert_true(memcmp(rg.new_ids, rj.new_ids, sizeof(int32_t) * 60) != 0);
    /* sampling with a repetition penalty and min_p: eager = compiled */
    txc_generate_result a, b;
    o = sampled(m, 7);
    o.repetition_penalty = 1.2;
    o.min_p = 0.05;
    run(gen, m, ids, 5, &o, &a);
    o.jit = false;
    run(NULL, m, ids, 5, &o, &b);
    assert_memory_equal(a.new_ids, b.new_ids, sizeof(int32_t) * 60);
    txc_generate_result_free(&a);
    txc_generate_result_free(&b);
    txc_generate_result_free(&rg);
    txc_generate_result_free(&rs);
    txc_generate_result_free(&rd);
    txc_generate_result_free(&r2);
    txc_generate_result_free(&re);
    txc_generate_result_free(&rj);
    txc_generator_free(gen);
    txc_model_free(m);
}

/* Greedy search with repetition_penalty: transformers' generate() ids. */
static void test_generate_penalty_transformers(void **unused)
{
    (void)unused;
    txc_model *m;
    assert_int_equal(txc_model_load(model_dir(), NULL, &m), TXC_OK);
    txc_generator *gen = txc_generator_new(m);
    cJSON *root = tu_load_json("tests/fixtures/sample_processors.json");
    const cJSON *c;
    int changed = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "generate"))
    {
        const cJSON *ji = cJSON_GetObjectItem(c, "input_ids"), *jn = cJSON_GetObjectItem(c, "new_ids");
        int n = cJSON_GetArraySize(ji), nn = cJSON_GetArraySize(jn);
        int32_t ids[64], want[64];
        assert_true(n <= 64 && nn <= 64);
        for (int i = 0; i < n; i++)
            ids[i] = cJSON_GetArrayItem(ji, i)->valueint;
        for (int i = 0; i < nn; i++)
            want[i] = cJSON_GetArrayItem(jn, i)->valueint;
        txc_generate_options o = txc_generate_default_options(m, model_dir());
        o.repetition_penalty = cJSON_GetObjectItem(c, "repetition_penalty")->valuedouble;
        o.max_new_tokens = nn;
        for (int jit = 0; jit < 2; jit++) {
            o.jit = jit;
            txc_generate_result r;
            run(jit ? gen : NULL, m, ids, n, &o, &r);
            assert_int_equal(r.n_new, nn);
            for (int i = 0; i < nn; i++)
                if (r.new_ids[i] != want[i])
                    fail_msg("'%s' repetition_penalty %g %s: token %d is %d, transformers %d",
                             cJSON_GetObjectItem(c, "prompt")->valuestring, o.repetition_penalty,
                             jit ? "compiled" : "eager", i, r.new_ids[i], want[i]);
            txc_generate_result_free(&r);
        }
        if (o.repetition_penalty != 1.0) {
            /* the penalty changes the repetitive prompt's continuation */
            txc_generate_options p = o;
            p.repetition_penalty = 1.0;
            txc_generate_result r;
            run(gen, m, ids, n, &p, &r);
            changed += memcmp(r.new_ids, want, sizeof(int32_t) * (size_t)nn) != 0;
            txc_generate_result_free(&r);
        }
    }
    assert_true(changed >= 1);
    cJSON_Delete(root);
    txc_generator_free(gen);
    txc_model_free(m);
}

static void test_options(void **unused)
{
    (void)unused;
    txc_model *m;
    assert_int_equal(txc_model_load(model_dir(), NULL, &m), TXC_OK);
    /* stories260K's generation_config.json says nothing: greedy, GenerationConfig's defaults */
    txc_generate_options o = txc_generate_default_options(m, model_dir());
    assert_false(o.do_sample);
    assert_true(o.temperature == 1.0 && o.top_p == 1.0 && o.min_p == 0.0 && o.repetition_penalty == 1.0);
    assert_int_equal(o.top_k, 50);
    assert_int_equal(o.n_eos, 2);
    /* a generation_config.json that samples (Llama 3 Instruct's style) */
    char *dir = tu_mkdtemp();
    const char *gc = "{\"do_sample\": true, \"temperature\": 0.6, \"top_p\": 0.9, \"top_k\": 20, \"min_p\": 0.05,"
                     " \"repetition_penalty\": 1.1, \"eos_token_id\": [2, 7], \"max_new_tokens\": 33}";
    assert_int_equal(tu_write_file(tu_path("%s/generation_config.json", dir), gc, strlen(gc)), 0);
    o = txc_generate_default_options(m, dir);
    assert_true(o.do_sample);
    assert_true(o.temperature == 0.6 && o.top_p == 0.9 && o.min_p == 0.05 && o.repetition_penalty == 1.1);
    assert_int_equal(o.top_k, 20);
    assert_int_equal(o.max_new_tokens, 33);
    assert_int_equal(o.n_eos, 2);
    assert_int_equal(o.eos_token_id[1], 7);
    /* no eos in the file: config.json's; sampling fields still read */
    const char *gc2 = "{\"do_sample\": true, \"temperature\": 0.5, \"max_new_tokens\": 9}";
    assert_int_equal(tu_write_file(tu_path("%s/generation_config.json", dir), gc2, strlen(gc2)), 0);
    o = txc_generate_default_options(m, dir);
    assert_true(o.do_sample && o.temperature == 0.5);
    assert_int_equal(o.max_new_tokens, 9);
    assert_int_equal(o.n_eos, 1);
    assert_int_equal(o.eos_token_id[0], 2);
    tu_rm_rf(dir);

    /* bad values are TXC_ERR_INVALID before any work */
    const int32_t ids[] = {1};
    txc_generate_result r;
    o = txc_generate_default_options(m, model_dir());
    o.max_new_tokens = 4;
    o.do_sample = true;
    o.temperature = 0.0;
    assert_int_equal(txc_generate(m, ids, 1, &o, &r), TXC_ERR_INVALID);
    o.temperature = -1.0;
    assert_int_equal(txc_generate(m, ids, 1, &o, &r), TXC_ERR_INVALID);
    o.temperature = 1.0;
    o.top_p = 1.5;
    assert_int_equal(txc_generate(m, ids, 1, &o, &r), TXC_ERR_INVALID);
    o.top_p = 1.0;
    o.top_k = -3;
    assert_int_equal(txc_generate(m, ids, 1, &o, &r), TXC_ERR_INVALID);
    o.top_k = 0;
    o.min_p = 2;
    assert_int_equal(txc_generate(m, ids, 1, &o, &r), TXC_ERR_INVALID);
    o.min_p = 0;
    o.repetition_penalty = 0;
    assert_int_equal(txc_generate(m, ids, 1, &o, &r), TXC_ERR_INVALID);
    /* greedy ignores the sampling fields (temperature 0 included), not the penalty */
    o.repetition_penalty = 1;
    o.do_sample = false;
    o.temperature = 0;
    assert_int_equal(txc_generate(m, ids, 1, &o, &r), TXC_OK);
    txc_generate_result_free(&r);
    txc_clear_error();
    txc_model_free(m);
}

int main(void)
{
    env = txc_env_default();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rng_uniform),
        cmocka_unit_test(test_rng_compiled),
        cmocka_unit_test(test_sample_transformers),
        cmocka_unit_test(test_sample_hand),
        cmocka_unit_test(test_repetition_penalty),
        cmocka_unit_test(test_generate_sampled),
        cmocka_unit_test(test_generate_penalty_transformers),
        cmocka_unit_test(test_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
