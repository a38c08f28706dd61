/* Architectures against transformers: tiny random models of each supported
 * model_type (tests/fixtures/arch/<name>/, written by
 * scripts/gen_arch_fixtures.py with save_pretrained) with the logits of a
 * fixed 24-token prompt and 16 greedy tokens. Each must match, eager and
 * compiled (f32: logits within 1e-4 relative, tokens exact); RoPE tables
 * equal transformers' inv_freq exactly. Plus: the head picked for tied and
 * untied checkpoints, one clear TXC_ERR_UNSUPPORTED line per unsupported
 * feature, and the config fields the architectures read.
 *
 * Each fixture that passes prints one "ARCH-OK|name|model_type|features"
 * line: scripts/supported_models.sh turns them into README's table. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txc/cache.h"
#include "txc/generate.h"
#include "txc/hf_config.h"
#include "txc/jit.h"
#include "txc/model.h"
#include "txc/ops.h"
#include "txc/safetensors.h"
#include "txc/tree.h"
#include "models/model_impl.h"

#define N_NEW 16
#define RTOL 1e-4
#define ATOL 1e-5

typedef struct fixture {
    const char *name, *model_type, *features;
} fixture;

static const fixture fixtures[] = {
    {"llama_linear", "llama", "rope_scaling linear; tied embeddings (no lm_head.weight in the file)"},
    {"llama_dynamic", "llama", "rope_scaling dynamic (NTK), generation past max_position_embeddings"},
    {"llama_llama3", "llama", "rope_scaling llama3 (Llama 3.1/3.2), positions past original_max_position_embeddings"},
    {"llama_yarn", "llama", "rope_scaling yarn (attention_factor, beta_fast/beta_slow)"},
    {"llama_bias", "llama", "attention_bias (q/k/v/o), mlp_bias"},
    {"qwen2", "qwen2", "q/k/v biases, tied embeddings"},
    {"qwen2_sliding", "qwen2", "use_sliding_window with max_window_layers"},
    {"qwen3", "qwen3", "q_norm/k_norm, explicit head_dim"},
    {"mistral", "mistral", "sliding_window attention"},
    {"gemma", "gemma", "sqrt(hidden) embedding scale, (1 + w) RMSNorm, GeGLU, head_dim, tied"},
    {"gemma2", "gemma2",
     "sandwich norms, attention + final logit soft-capping, alternating sliding window, query_pre_attn_scalar"},
    {"phi3", "phi3", "fused qkv_proj and gate_up_proj, partial_rotary_factor"},
    {"gpt2", "gpt2", "LayerNorm, learned positions, Conv1D weights, fused c_attn, gelu_new, tied"},
    {"phi3_longrope", "phi3", "rope_scaling longrope (short/long factors), partial rotary"},
};

static const char *fixture_dir(const char *name) { return tu_path("%s/tests/fixtures/arch/%s", tu_source_dir(), name); }

static cJSON *load_expected(const char *name)
{
    return tu_load_json(tu_path("tests/fixtures/arch/%s/expected.json", name));
}

static int32_t *json_ids(const cJSON *arr, int64_t *n)
{
    *n = cJSON_GetArraySize(arr);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(*n + 1));
    int64_t i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, arr) ids[i++] = (int32_t)v->valuedouble;
    return ids;
}

static bool close_enough(double got, double want) { return fabs(got - want) <= RTOL * fabs(want) + ATOL; }

/* `logits` (rows, V) float32 against expected rows row0.. of "logits". */
static void check_logits(const char *what, const float *logits, int64_t rows, int64_t V, const cJSON *expected,
                         int64_t row0)
{
    for (int64_t r = 0; r < rows; r++) {
        const cJSON *row = cJSON_GetArrayItem(expected, (int)(row0 + r));
        assert_non_null(row);
        assert_int_equal(cJSON_GetArraySize(row), V);
        for (int64_t j = 0; j < V; j++) {
            double want = cJSON_GetArrayItem(row, (int)j)->valuedouble, got = logits[r * V + j];
            if (!close_enough(got, want))
                fail_msg("%s: logits[%lld][%lld] = %.9g, transformers %.9g", what, (long long)(row0 + r),
                         (long long)j, got, want);
        }
    }
}

/* ---- a greedy loop over the model's forward with a StaticCache, eager or
 * compiled (the prefill padded to a power of two with logits_index, as
 * txc_generate's compiled steps): independent of generate's own limits. */

typedef struct step_statics {
    int32_t n_params, n_cache_leaves, has_logits_index;
    unsigned char aux[TXC_TREE_MAX_AUX];
    size_t aux_len;
} step_statics;

static txc_status step_fn(void *ctx, txc_tensor *const *in, int n_in, const void *statics_p, size_t len,
                          txc_tensor **out, int max_out, int *n_out)
{
    txc_model *m = ctx;
    step_statics st;
    assert_int_equal(len, sizeof st);
    memcpy(&st, statics_p, sizeof st);
    int P = st.n_params, C = st.n_cache_leaves;
    assert_int_equal(n_in, P + C + 2 + st.has_logits_index);
    txc_kv_cache *cache = txc_tree_unflatten("StaticCache", st.aux, st.aux_len, in + P, C, txc_model_env(m));
    if (!cache)
        return txc_last_status();
    txc_tensor *logits = txc_model_forward_with(m, in, in[P + C], NULL, cache, in[P + C + 1], 1,
                                                st.has_logits_index ? in[P + C + 2] : NULL);
    out[0] = txc_argmax(txc_reshape(logits, 1, (int64_t[]){-1}), 0, false);
    out[1] = logits;
    int n = 0;
    unsigned char aux[TXC_TREE_MAX_AUX];
    size_t aux_len;
    txc_status s = out[0] ? txc_tree_flatten("StaticCache", cache, out + 2, max_out - 2, &n, aux, &aux_len)
                          : txc_last_status();
    *n_out = 2 + n;
    txc_tree_free("StaticCache", cache);
    return s;
}

/* One step over ids[from, to); returns the next token and copies the last
 * position's logits into last_logits (V floats). */
static int32_t local_step(txc_model *m, txc_jit *jit, txc_kv_cache *cache, const int32_t *ids, int64_t from,
                          int64_t to, float *last_logits)
{
    txc_env *env = txc_model_env(m);
    const txc_hf_config *c = txc_model_config(m);
    int mark = txc_env_scope_begin(env);
    int64_t L = to - from, Lp = L;
    if (jit && L > 1)
        while (Lp < L || (Lp & (Lp - 1)))
            Lp++;
    if (from + Lp > txc_kv_cache_max_length(cache))
        Lp = txc_kv_cache_max_length(cache) - from;
    txc_tensor *input_ids = txc_zeros(env, 2, (int64_t[]){1, Lp}, TXC_I64);
    txc_tensor *cache_position = txc_arange(env, (double)from, (double)(from + Lp), 1, TXC_I64);
    assert_non_null(input_ids);
    int64_t *p = txc_tensor_data_ptr(input_ids);
    for (int64_t i = 0; i < L; i++)
        p[i] = ids[from + i];
    txc_tensor *logits = NULL;
    int32_t next = -1;
    if (!jit) {
        logits = txc_model_forward(m, input_ids, NULL, cache, cache_position, 1);
        txc_tensor *tok = txc_argmax(txc_reshape(logits, 1, (int64_t[]){-1}), 0, false);
        if (!tok)
            fail_msg("eager step: %s", txc_last_error());
        next = (int32_t)txc_tensor_item(tok);
    } else {
        int P = txc_model_num_parameters(m);
        txc_tensor *in[1100];
        txc_tensor *outs[1100];
        step_statics st;
        memset(&st, 0, sizeof st);
        st.n_params = P;
        st.has_logits_index = L > 1;
        memcpy(in, txc_model_parameters(m), sizeof *in * (size_t)P);
        int C = 0;
        assert_int_equal(txc_tree_flatten("StaticCache", cache, in + P, 1000 - P, &C, st.aux, &st.aux_len), TXC_OK);
        st.n_cache_leaves = C;
        int n_in = P + C;
        in[n_in++] = input_ids;
        in[n_in++] = cache_position;
        if (L > 1) {
            int64_t last = L - 1, one = 1;
            in[n_in++] = txc_tensor_from_data(env, TXC_I64, 1, &one, &last);
        }
        int n_out;
        if (txc_jit_call(jit, in, n_in, NULL, &st, sizeof st, outs, 1100, &n_out) != TXC_OK)
            fail_msg("compiled step: %s", txc_last_error());
        next = (int32_t)((const int64_t *)txc_tensor_data_ptr(outs[0]))[0];
        logits = outs[1];
    }
    assert_non_null(logits);
    memcpy(last_logits, txc_tensor_data_ptr(logits), sizeof(float) * (size_t)c->vocab_size);
    txc_kv_cache_set_seq_length(cache, to);
    txc_env_scope_end(env, mark);
    return next;
}

static void local_greedy(txc_model *m, bool compiled, const int32_t *prompt, int64_t n_prompt, const int32_t *want,
                         const cJSON *expected_logits, const char *name)
{
    const txc_hf_config *c = txc_model_config(m);
    txc_env *env = txc_model_env(m);
    int64_t total = n_prompt + N_NEW;
    assert_int_equal(txc_cache_register_trees(), TXC_OK);
    txc_kv_cache *cache = txc_static_cache_new(env, (int)c->num_hidden_layers, 1, c->num_key_value_heads, total,
                                               c->head_dim);
    assert_non_null(cache);
    txc_jit *jit[2] = {NULL, NULL};
    if (compiled) {
        jit[0] = txc_jit_new(env, "arch-prefill", step_fn, m);
        jit[1] = txc_jit_new(env, "arch-decode", step_fn, m);
        assert_non_null(jit[0]);
        assert_non_null(jit[1]);
    }
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)total);
    float *last = malloc(sizeof(float) * (size_t)c->vocab_size);
    memcpy(ids, prompt, sizeof(int32_t) * (size_t)n_prompt);
    char what[128];
    for (int64_t i = 0; i < N_NEW; i++) {
        int64_t from = i == 0 ? 0 : n_prompt + i - 1, to = n_prompt + i;
        int32_t next = local_step(m, jit[i > 0], cache, ids, from, to, last);
        if (i == 0) { /* the prefill's last row is the reference's last row */
            snprintf(what, sizeof what, "%s (%s StaticCache prefill)", name, compiled ? "compiled" : "eager");
            check_logits(what, last, 1, c->vocab_size, expected_logits, n_prompt - 1);
        }
        if (next != want[i])
            fail_msg("%s (%s, StaticCache): token %lld is %d, transformers %d", name,
                     compiled ? "compiled" : "eager", (long long)i, next, want[i]);
        ids[n_prompt + i] = next;
    }
    if (compiled) /* one decode plan for every position */
        assert_int_equal(txc_jit_get_stats(jit[1]).n_plans, 1);
    free(ids);
    free(last);
    txc_jit_free(jit[0]);
    txc_jit_free(jit[1]);
    txc_kv_cache_free(cache);
}

/* txc_generate itself; false when it declines the length before any work
 * (generate's own limits: max_position_embeddings, sliding windows in
 * older generate.c) so that the local loop above is what checks it. */
static bool generate_tokens(txc_model *m, const char *name, const int32_t *prompt, int64_t n, const int32_t *want,
                            txc_cache_kind kind, bool jit)
{
    txc_generate_options o = txc_generate_default_options(m, NULL);
    o.max_new_tokens = N_NEW;
    o.cache = kind;
    o.jit = jit;
    o.n_eos = 0; /* the reference ran without eos stopping */
    o.do_sample = false;
    o.repetition_penalty = 1.0;
    txc_generate_result r;
    txc_clear_error();
    txc_status s = txc_generate(m, prompt, n, &o, &r);
    if (s == TXC_ERR_CAPACITY || s == TXC_ERR_UNSUPPORTED) {
        if (strstr(txc_last_error(), "sliding_window") || strstr(txc_last_error(), "max_position_embeddings") ||
            strstr(txc_last_error(), "max_cache_len")) { /* the cache is capped at max_position_embeddings */
            printf("  note: %s: txc_generate declines (%s); checked through the model's forward\n", name,
                   txc_last_error());
            printf("ARCH-GENERATE-DECLINES|%s|%s\n", name, txc_last_error());
            return false;
        }
    }
    if (s != TXC_OK)
        fail_msg("%s: generate(%s, jit %d): %s", name, txc_cache_kind_name(kind), jit, txc_last_error());
    if (r.n_new < N_NEW && r.stop_reason && strcmp(r.stop_reason, "max_position_embeddings") == 0) {
        printf("  note: %s: txc_generate stops at max_position_embeddings; checked through the model's forward\n",
               name);
        printf("ARCH-GENERATE-DECLINES|%s|generate stops at max_position_embeddings\n", name);
        txc_generate_result_free(&r);
        return false;
    }
    assert_int_equal(r.n_new, N_NEW);
    for (int i = 0; i < N_NEW; i++)
        if (r.new_ids[i] != want[i])
            fail_msg("%s (generate, %s, jit %d): token %d is %d, transformers %d", name, txc_cache_kind_name(kind),
                     jit, i, r.new_ids[i], want[i]);
    txc_generate_result_free(&r);
    return true;
}

static bool file_has_tensor(const char *dir, const char *name)
{
    txc_safetensors *st = NULL;
    assert_int_equal(txc_safetensors_open(dir, &st), TXC_OK);
    bool has = txc_safetensors_find(st, name) != NULL;
    txc_safetensors_close(st);
    return has;
}

static void check_fixture(const fixture *f)
{
    char dir[512]; /* tu_path's buffers rotate */
    snprintf(dir, sizeof dir, "%s", fixture_dir(f->name));
    cJSON *exp = load_expected(f->name);
    txc_model *m = NULL;
    txc_clear_error();
    if (txc_model_load(dir, NULL, &m) != TXC_OK)
        fail_msg("%s: load: %s", f->name, txc_last_error());
    const txc_hf_config *c = txc_model_config(m);
    assert_string_equal(c->model_type, f->model_type);
    int64_t V = c->vocab_size;

    /* the head: lm_head.weight when untied (both in the file), else the embedding */
    bool has_head = file_has_tensor(dir, "lm_head.weight");
    assert_true(has_head == !c->tie_word_embeddings);
    const char *head = txc_model_lm_head_name(m);
    if (c->tie_word_embeddings)
        assert_true(strcmp(head, "transformer.wte.weight") == 0 || strcmp(head, "model.embed_tokens.weight") == 0);
    else
        assert_string_equal(txc_model_lm_head_name(m), "lm_head.weight");

    /* RoPE: inv_freq equals transformers' buffer exactly */
    const cJSON *inv = cJSON_GetObjectItem(exp, "inv_freq");
    txc_tensor *mine = txc_model_rope_inv_freq(m);
    if (inv) {
        assert_non_null(mine);
        assert_int_equal(txc_tensor_numel(mine), cJSON_GetArraySize(inv));
        const float *v = txc_tensor_data_ptr(mine);
        for (int i = 0; i < cJSON_GetArraySize(inv); i++) {
            float want = (float)cJSON_GetArrayItem(inv, i)->valuedouble;
            if (v[i] != want)
                fail_msg("%s: inv_freq[%d] = %.9g, transformers %.9g", f->name, i, v[i], want);
        }
        double sc = cJSON_GetObjectItem(exp, "attention_scaling")->valuedouble;
        assert_true(fabs(txc_model_rope_attention_scaling(m) - sc) <= 1e-12 * sc);
    } else {
        assert_null(mine);
    }

    int64_t n;
    int32_t *prompt = json_ids(cJSON_GetObjectItem(exp, "input_ids"), &n);
    int64_t n_new;
    int32_t *want = json_ids(cJSON_GetObjectItem(exp, "new_ids"), &n_new);
    assert_int_equal(n_new, N_NEW);
    const cJSON *logits_ref = cJSON_GetObjectItem(exp, "logits");
    assert_int_equal(cJSON_GetArraySize(logits_ref), n);

    /* the logits of the whole prompt, eager, no cache */
    txc_env *env = txc_model_env(m);
    int mark = txc_env_scope_begin(env);
    txc_tensor *ids = txc_zeros(env, 2, (int64_t[]){1, n}, TXC_I64);
    int64_t *p = txc_tensor_data_ptr(ids);
    for (int64_t i = 0; i < n; i++)
        p[i] = prompt[i];
    txc_tensor *logits = txc_model_forward(m, ids, NULL, NULL, txc_arange(env, 0, (double)n, 1, TXC_I64), 0);
    if (!logits)
        fail_msg("%s: forward: %s", f->name, txc_last_error());
    assert_int_equal(txc_tensor_size(logits, 1), n);
    assert_int_equal(txc_tensor_size(logits, 2), V);
    check_logits(f->name, txc_tensor_data_ptr(logits), n, V, logits_ref, 0);
    /* a prefix alone, short enough for the unscaled table (dynamic NTK, longrope) */
    const cJSON *prefix_ref = cJSON_GetObjectItem(exp, "prefix_logits");
    if (prefix_ref) {
        int64_t np = cJSON_GetArraySize(prefix_ref);
        txc_tensor *pre = txc_model_forward(m, txc_narrow(ids, 1, 0, np), NULL, NULL,
                                            txc_arange(env, 0, (double)np, 1, TXC_I64), 0);
        if (!pre)
            fail_msg("%s: forward: %s", f->name, txc_last_error());
        char what[96];
        snprintf(what, sizeof what, "%s (first %lld tokens)", f->name, (long long)np);
        check_logits(what, txc_tensor_data_ptr(txc_contiguous(pre)), np, V, prefix_ref, 0);
    }
    txc_env_scope_end(env, mark);

    /* 16 greedy tokens: the model's forward with a StaticCache, eager and
     * compiled; then txc_generate (static eager and compiled, dynamic eager) */
    local_greedy(m, false, prompt, n, want, logits_ref, f->name);
    local_greedy(m, true, prompt, n, want, logits_ref, f->name);
    if (generate_tokens(m, f->name, prompt, n, want, TXC_CACHE_STATIC, false)) {
        generate_tokens(m, f->name, prompt, n, want, TXC_CACHE_STATIC, true);
        generate_tokens(m, f->name, prompt, n, want, TXC_CACHE_DYNAMIC, false);
    }
    printf("ARCH-OK|%s|%s|%s\n", f->name, f->model_type, f->features);
    fflush(stdout);
    free(prompt);
    free(want);
    txc_model_free(m);
    cJSON_Delete(exp);
}

#define FIXTURE_TEST(i, fn)                                                                                        \
    static void fn(void **state)                                                                                  \
    {                                                                                                             \
        (void)state;                                                                                              \
        check_fixture(&fixtures[i]);                                                                              \
    }
FIXTURE_TEST(0, test_llama_linear)
FIXTURE_TEST(1, test_llama_dynamic)
FIXTURE_TEST(2, test_llama_llama3)
FIXTURE_TEST(3, test_llama_yarn)
FIXTURE_TEST(4, test_llama_bias)
FIXTURE_TEST(5, test_qwen2)
FIXTURE_TEST(6, test_qwen2_sliding)
FIXTURE_TEST(7, test_qwen3)
FIXTURE_TEST(8, test_mistral)
FIXTURE_TEST(9, test_gemma)
FIXTURE_TEST(10, test_gemma2)
FIXTURE_TEST(11, test_phi3)
FIXTURE_TEST(12, test_gpt2)
FIXTURE_TEST(13, test_phi3_longrope)

/* ---- a fixture copied with its config.json edited ------------------------------- */

static char *copy_fixture(const char *name, const char *edit_key, const char *edit_json)
{
    char *dir = tu_mkdtemp();
    assert_non_null(dir);
    size_t n;
    char *st = tu_read_file(tu_path("%s/model.safetensors", fixture_dir(name)), &n);
    assert_non_null(st);
    assert_int_equal(tu_write_file(tu_path("%s/model.safetensors", dir), st, n), 0);
    free(st);
    char *text = tu_read_file(tu_path("%s/config.json", fixture_dir(name)), NULL);
    cJSON *cfg = cJSON_Parse(text);
    free(text);
    assert_non_null(cfg);
    if (edit_key) {
        cJSON_DeleteItemFromObjectCaseSensitive(cfg, edit_key);
        if (edit_json) {
            cJSON *v = cJSON_Parse(edit_json);
            assert_non_null(v);
            cJSON_AddItemToObject(cfg, edit_key, v);
        }
    }
    char *out = cJSON_Print(cfg);
    assert_int_equal(tu_write_file(tu_path("%s/config.json", dir), out, strlen(out)), 0);
    free(out);
    cJSON_Delete(cfg);
    return dir;
}

static void expect_load_error(const char *name, const char *key, const char *json, txc_status want,
                              const char *substr)
{
    char *dir = copy_fixture(name, key, json);
    txc_model *m = NULL;
    txc_clear_error();
    txc_status s = txc_model_load(dir, NULL, &m);
    if (s != want || !strstr(txc_last_error(), substr))
        fail_msg("%s with %s = %s: got %s \"%s\", want %s containing \"%s\"", name, key, json ? json : "(absent)",
                 txc_status_name(s), txc_last_error(), txc_status_name(want), substr);
    assert_null(m);
    assert_null(strchr(txc_last_error(), '\n')); /* one line */
    tu_rm_rf(dir);
}

static void test_unsupported(void **state)
{
    (void)state;
    expect_load_error("llama_llama3", "rope_parameters", "{\"rope_type\": \"mrope\", \"factor\": 2.0}",
                      TXC_ERR_UNSUPPORTED, "rope_scaling of type 'mrope' is not supported");
    expect_load_error("phi3_longrope", "rope_parameters",
                      "{\"rope_type\": \"longrope\", \"short_factor\": [1, 1], \"long_factor\": [1, 1]}",
                      TXC_ERR_FORMAT, "'short_factor' and 'long_factor' of 6 numbers");
    expect_load_error("llama_llama3", "rope_parameters", "{\"rope_type\": \"proportional\", \"factor\": 2.0}",
                      TXC_ERR_UNSUPPORTED, "rope_scaling of type 'proportional'");
    expect_load_error("llama_linear", "model_type", "\"falcon\"", TXC_ERR_UNSUPPORTED,
                      "model_type 'falcon' is not supported");
    expect_load_error("qwen3", "model_type", "\"qwen3_moe\"", TXC_ERR_UNSUPPORTED, "model_type 'qwen3_moe'");
    expect_load_error("llama_linear", "hidden_act", "\"gelu_fast\"", TXC_ERR_UNSUPPORTED,
                      "hidden_act 'gelu_fast' is not supported");
    expect_load_error("gemma2", "layer_types", "[\"sliding_attention\", \"chunked_attention\"]", TXC_ERR_UNSUPPORTED,
                      "layer_types entry 'chunked_attention' is not supported");
    expect_load_error("gemma", "use_bidirectional_attention", "true", TXC_ERR_UNSUPPORTED,
                      "use_bidirectional_attention");
    expect_load_error("gpt2", "add_cross_attention", "true", TXC_ERR_UNSUPPORTED, "add_cross_attention");
    /* llama's RoPE cannot rotate part of a head (transformers' neither) */
    expect_load_error("llama_yarn", "partial_rotary_factor", "0.5", TXC_ERR_UNSUPPORTED, "partial_rotary_factor");
    /* a rope type without its parameters is malformed, not guessed */
    expect_load_error("llama_llama3", "rope_parameters", "{\"rope_type\": \"llama3\", \"factor\": 8.0}",
                      TXC_ERR_FORMAT, "'llama3' needs");
}

/* tie_word_embeddings false but no lm_head.weight in the file: an error
 * naming it (transformers would initialise a random head); true with the
 * embedding only: the embedding is the head (the fixtures above). */
static void test_heads(void **state)
{
    (void)state;
    expect_load_error("llama_linear", "tie_word_embeddings", "false", TXC_ERR_FORMAT,
                      "tensor 'lm_head.weight' is missing");
    /* untied checkpoint read as tied: the stored lm_head.weight is ignored,
     * the embedding is the head, and the parameter set does not list it */
    char *dir = copy_fixture("qwen3", "tie_word_embeddings", "true");
    txc_model *m = NULL;
    assert_int_equal(txc_model_load(dir, NULL, &m), TXC_OK);
    assert_string_equal(txc_model_lm_head_name(m), "model.embed_tokens.weight");
    for (int i = 0; i < txc_model_num_parameters(m); i++)
        assert_string_not_equal(txc_model_parameter_name(m, i), "lm_head.weight");
    txc_model_free(m);
    tu_rm_rf(dir);
    /* untied: lm_head.weight is a parameter of its own */
    assert_int_equal(txc_model_load(fixture_dir("qwen3"), NULL, &m), TXC_OK);
    assert_string_equal(txc_model_parameter_name(m, txc_model_num_parameters(m) - 1), "lm_head.weight");
    txc_model_free(m);
}

static txc_status parse(const char *json, txc_hf_config *c)
{
    txc_clear_error();
    return txc_hf_config_parse(json, strlen(json), "cfg.json", c);
}

static void test_config_fields(void **state)
{
    (void)state;
    txc_hf_config c;
    /* GPT-2's names (attribute_map), n_inner null = 4 * n_embd, its defaults */
    assert_int_equal(parse("{\"model_type\": \"gpt2\", \"vocab_size\": 50257, \"n_embd\": 768, \"n_layer\": 12, "
                           "\"n_head\": 12, \"n_positions\": 1024, \"n_inner\": null}",
                           &c),
                     TXC_OK);
    assert_int_equal(c.hidden_size, 768);
    assert_int_equal(c.num_hidden_layers, 12);
    assert_int_equal(c.num_attention_heads, 12);
    assert_int_equal(c.max_position_embeddings, 1024);
    assert_int_equal(c.intermediate_size, 3072);
    assert_int_equal(c.head_dim, 64);
    assert_true(c.tie_word_embeddings);
    assert_string_equal(c.hidden_act, "gelu_new");
    assert_true(c.layer_norm_epsilon == 1e-5);
    assert_true(c.scale_attn_weights);
    /* Gemma2's defaults when save_pretrained left them out; null = none */
    const char *g2 = "{\"model_type\": \"gemma2\", \"vocab_size\": 256, \"hidden_size\": 64, "
                     "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4%s}";
    char buf[512];
    snprintf(buf, sizeof buf, g2, "");
    assert_int_equal(parse(buf, &c), TXC_OK);
    assert_int_equal(c.head_dim, 256);
    assert_int_equal(c.sliding_window, 4096);
    assert_true(c.final_logit_softcapping == 30.0);
    assert_true(c.attn_logit_softcapping == 50.0);
    assert_true(c.query_pre_attn_scalar == 256);
    assert_true(c.tie_word_embeddings);
    assert_string_equal(c.hidden_act, "gelu_pytorch_tanh");
    snprintf(buf, sizeof buf, g2,
             ", \"final_logit_softcapping\": null, \"attn_logit_softcapping\": null, \"sliding_window\": null, "
             "\"hidden_activation\": \"gelu\", \"layer_types\": [\"full_attention\", \"sliding_attention\"]");
    assert_int_equal(parse(buf, &c), TXC_OK);
    assert_true(c.final_logit_softcapping == 0 && c.attn_logit_softcapping == 0);
    assert_int_equal(c.sliding_window, 0);
    assert_string_equal(c.hidden_act, "gelu");
    assert_int_equal(c.n_layer_types, 2);
    assert_int_equal(c.layer_types[0], TXC_LAYER_FULL);
    assert_int_equal(c.layer_types[1], TXC_LAYER_SLIDING);
    snprintf(buf, sizeof buf, g2, ", \"layer_types\": [\"full_attention\"]");
    assert_int_equal(parse(buf, &c), TXC_ERR_FORMAT);
    assert_non_null(strstr(txc_last_error(), "'layer_types' has 1 entries but num_hidden_layers is 2"));
    snprintf(buf, sizeof buf, g2, ", \"final_logit_softcapping\": 0");
    assert_int_equal(parse(buf, &c), TXC_ERR_FORMAT);
    /* Gemma's legacy "gelu" means the tanh approximation */
    assert_int_equal(parse("{\"model_type\": \"gemma\", \"vocab_size\": 256, \"hidden_size\": 64, "
                           "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                           "\"hidden_act\": \"gelu\"}",
                           &c),
                     TXC_OK);
    assert_string_equal(c.hidden_act, "gelu_pytorch_tanh");
    /* Mistral slides over 4096 keys unless told otherwise; Qwen3's head_dim */
    assert_int_equal(parse("{\"model_type\": \"mistral\", \"vocab_size\": 256, \"hidden_size\": 64, "
                           "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4}",
                           &c),
                     TXC_OK);
    assert_int_equal(c.sliding_window, 4096);
    assert_int_equal(c.max_position_embeddings, 131072);
    assert_int_equal(parse("{\"model_type\": \"qwen3\", \"vocab_size\": 256, \"hidden_size\": 64, "
                           "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4}",
                           &c),
                     TXC_OK);
    assert_int_equal(c.head_dim, 128);
    assert_int_equal(c.max_window_layers, 28);
    /* rope parameters from rope_scaling (older) or rope_parameters; a top-level
     * original_max_position_embeddings wins (Phi-3) */
    assert_int_equal(parse("{\"model_type\": \"llama\", \"vocab_size\": 256, \"hidden_size\": 64, "
                           "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                           "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 32.0, \"low_freq_factor\": 1.0, "
                           "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}}",
                           &c),
                     TXC_OK);
    assert_string_equal(c.rope_scaling_type, "llama3");
    assert_true(c.rope_factor == 32.0 && c.low_freq_factor == 1.0 && c.high_freq_factor == 4.0);
    assert_int_equal(c.original_max_position_embeddings, 8192);
    assert_int_equal(parse("{\"model_type\": \"phi3\", \"vocab_size\": 256, \"hidden_size\": 64, "
                           "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                           "\"original_max_position_embeddings\": 4096, \"partial_rotary_factor\": 0.75, "
                           "\"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 4, \"beta_fast\": 16, "
                           "\"beta_slow\": 2, \"attention_factor\": 1.5, \"mscale\": 1, \"mscale_all_dim\": 0.5, "
                           "\"truncate\": false, \"original_max_position_embeddings\": 2048}}",
                           &c),
                     TXC_OK);
    assert_int_equal(c.original_max_position_embeddings, 4096);
    assert_true(c.partial_rotary_factor == 0.75);
    assert_true(c.beta_fast == 16 && c.beta_slow == 2 && c.attention_factor == 1.5);
    assert_true(c.mscale == 1 && c.mscale_all_dim == 0.5 && !c.rope_truncate);
    assert_true(c.rms_norm_eps == 1e-5);
    assert_int_equal(parse("{\"model_type\": \"llama\", \"vocab_size\": 256, \"hidden_size\": 64, "
                           "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                           "\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": \"2\"}}",
                           &c),
                     TXC_ERR_FORMAT);
    assert_non_null(strstr(txc_last_error(), "field 'rope_scaling.factor' is a string"));
    assert_int_equal(parse("{\"model_type\": \"llama\", \"vocab_size\": 256, \"hidden_size\": 64, "
                           "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                           "\"partial_rotary_factor\": 1.5}",
                           &c),
                     TXC_ERR_FORMAT);
}

/* txc::causal_attention with a sliding window and soft-capping against
 * transformers' eager_attention_forward written with ops (repeat_kv,
 * scores, tanh capping, the sliding-window causal mask, softmax, P.V):
 * grouped heads, prefill (many rows: the transposed-K path, chunks) and
 * decode rows over a longer cache, windows shorter and longer than the
 * prefix. */
static txc_tensor *reference_attention(txc_tensor *q, txc_tensor *k, txc_tensor *v, txc_tensor *pos, double scale,
                                       int64_t window, double softcap)
{
    int64_t B = txc_tensor_size(k, 0), Hkv = txc_tensor_size(k, 1), S = txc_tensor_size(k, 2);
    int64_t Hq = txc_tensor_size(q, 1), E = txc_tensor_size(k, 3), G = Hq / Hkv;
    k = txc_reshape(txc_expand(txc_unsqueeze(k, 2), 5, (int64_t[]){B, Hkv, G, S, E}), 4, (int64_t[]){B, Hq, S, E});
    v = txc_reshape(txc_expand(txc_unsqueeze(v, 2), 5, (int64_t[]){B, Hkv, G, S, E}), 4, (int64_t[]){B, Hq, S, E});
    txc_tensor *s = txc_mul_scalar(txc_matmul(q, txc_transpose(k, 2, 3)), (float)scale);
    if (softcap > 0)
        s = txc_mul_scalar(txc_tanh(txc_div_scalar(s, (float)softcap)), (float)softcap);
    txc_tensor *kpos = txc_arange(txc_tensor_env(q), 0, (double)S, 1, TXC_I64), *qpos = txc_unsqueeze(pos, 1);
    txc_tensor *visible = txc_le(kpos, qpos);
    if (window)
        visible = txc_logical_and(visible, txc_gt(kpos, txc_sub_scalar(qpos, (double)window)));
    s = txc_masked_fill(s, txc_logical_not(visible), -INFINITY);
    return txc_matmul(txc_softmax(s, -1), v);
}

static txc_tensor *random_tensor(txc_env *env, int64_t b, int64_t h, int64_t l, int64_t e, unsigned *seed)
{
    txc_tensor *t = txc_zeros(env, 4, (int64_t[]){b, h, l, e}, TXC_F32);
    float *p = txc_tensor_data_ptr(t);
    for (int64_t i = 0; i < txc_tensor_numel(t); i++) {
        *seed = *seed * 1103515245u + 12345u;
        p[i] = (float)((*seed >> 8) & 0xffff) / 65536.0f * 4.0f - 2.0f;
    }
    return t;
}

static void test_attention_window_softcap(void **state)
{
    (void)state;
    txc_env *env = txc_env_active();
    unsigned seed = 7;
    struct { int64_t Hq, Hkv, L, S, from, window; double softcap; } cases[] = {
        {4, 2, 24, 24, 0, 7, 0},   {4, 2, 24, 24, 0, 0, 2.5},  {4, 2, 24, 40, 0, 6, 3.0}, /* prefill */
        {8, 2, 70, 70, 0, 16, 0},  {2, 2, 5, 40, 11, 3, 0},    {4, 1, 1, 40, 30, 8, 1.5}, /* chunks, decode */
        {4, 2, 1, 40, 3, 8, 0},    {4, 4, 3, 40, 37, 40, 4.0}, {4, 2, 1, 64, 63, 1, 0},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        int mark = txc_env_scope_begin(env);
        int64_t Hq = cases[ci].Hq, Hkv = cases[ci].Hkv, L = cases[ci].L, S = cases[ci].S, E = 16;
        txc_tensor *q = random_tensor(env, 1, Hq, L, E, &seed);
        txc_tensor *k = random_tensor(env, 1, Hkv, S, E, &seed), *v = random_tensor(env, 1, Hkv, S, E, &seed);
        txc_tensor *pos = txc_arange(env, (double)cases[ci].from, (double)(cases[ci].from + L), 1, TXC_I64);
        double scale = 0.3;
        txc_tensor *got = txc_causal_attention_ext(q, k, v, pos, scale, cases[ci].window, cases[ci].softcap);
        txc_tensor *want = reference_attention(q, k, v, pos, scale, cases[ci].window, cases[ci].softcap);
        if (!got || !want)
            fail_msg("case %zu: %s", ci, txc_last_error());
        const float *g = txc_tensor_data_ptr(got), *w = txc_tensor_data_ptr(txc_contiguous(want));
        for (int64_t i = 0; i < txc_tensor_numel(got); i++)
            if (fabs(g[i] - w[i]) > 1e-5 + 1e-5 * fabs(w[i]))
                fail_msg("case %zu: element %lld is %.9g, reference %.9g", ci, (long long)i, g[i], w[i]);
        txc_env_scope_end(env, mark);
    }
    /* both 0: plain causal attention; negative values are refused */
    int mark = txc_env_scope_begin(env);
    txc_tensor *q = random_tensor(env, 1, 2, 4, 8, &seed), *k = random_tensor(env, 1, 2, 4, 8, &seed);
    txc_tensor *pos = txc_arange(env, 0, 4, 1, TXC_I64);
    txc_tensor *a = txc_causal_attention_ext(q, k, k, pos, NAN, 0, 0), *b = txc_causal_attention(q, k, k, pos, NAN);
    assert_memory_equal(txc_tensor_data_ptr(a), txc_tensor_data_ptr(b), sizeof(float) * 64);
    txc_clear_error();
    assert_null(txc_causal_attention_ext(q, k, k, pos, NAN, -1, 0));
    assert_int_equal(txc_last_status(), TXC_ERR_INVALID);
    txc_clear_error();
    assert_null(txc_causal_attention_ext(q, k, k, pos, NAN, 0, -2.0));
    txc_clear_error();
    txc_env_scope_end(env, mark);
}

/* RoPE tables of real checkpoints' configs (Llama 3.1/3.2 llama3, Qwen2.5
 * yarn, yarn with mscale, linear, default, Phi-3 longrope) against
 * transformers' inv_freq buffers (tests/fixtures/arch/rope_tables.json).
 * Every step but pow is IEEE float32 as torch's; torch's pow is SLEEF's
 * (within 1 ulp), txc's powf is correctly rounded: entries equal, or one
 * ulp apart where SLEEF rounds the other way. */
static int64_t ulp_diff(float a, float b)
{
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    return ia > ib ? (int64_t)ia - ib : (int64_t)ib - ia;
}

static void test_rope_tables(void **state)
{
    (void)state;
    cJSON *all = tu_load_json("tests/fixtures/arch/rope_tables.json");
    const cJSON *e;
    int total = 0, off_by_one = 0;
    cJSON_ArrayForEach(e, all)
    {
        char *text = cJSON_PrintUnformatted(cJSON_GetObjectItem(e, "config"));
        txc_hf_config c;
        txc_clear_error();
        if (txc_hf_config_parse(text, strlen(text), e->string, &c) != TXC_OK)
            fail_msg("%s: %s", e->string, txc_last_error());
        free(text);
        txc_rope r;
        if (txc_rope_init(&r, &c, txc_env_active(), strcmp(c.model_type, "phi3") == 0) != TXC_OK)
            fail_msg("%s: %s", e->string, txc_last_error());
        const cJSON *want = cJSON_GetObjectItem(e, "inv_freq");
        assert_int_equal(txc_tensor_numel(r.inv_freq), cJSON_GetArraySize(want));
        const float *got = txc_tensor_data_ptr(r.inv_freq);
        for (int i = 0; i < cJSON_GetArraySize(want); i++) {
            float w = (float)cJSON_GetArrayItem(want, i)->valuedouble;
            int64_t d = ulp_diff(got[i], w);
            /* the llama3 tables of Llama 3.1 / 3.2 (and plain RoPE) are exact */
            bool exact = strncmp(e->string, "Llama-3", 7) == 0 || strncmp(e->string, "SmolLM", 6) == 0;
            if (d > (exact ? 0 : 1))
                fail_msg("%s: inv_freq[%d] = %.9g, transformers %.9g", e->string, i, got[i], w);
            total++;
            off_by_one += d == 1;
            if (d == 1)
                printf("  rope table %s: inv_freq[%d] one ulp from transformers' (SLEEF pow)\n", e->string, i);
        }
        double sc = cJSON_GetObjectItem(e, "attention_scaling")->valuedouble;
        if (fabs(r.attention_scaling - sc) > 1e-12 * sc)
            fail_msg("%s: attention scaling %.17g, transformers %.17g", e->string, r.attention_scaling, sc);
        txc_rope_free(&r);
    }
    printf("  rope tables: %d entries, %d equal, %d one ulp apart\n", total, total - off_by_one, off_by_one);
    cJSON_Delete(all);
}

/* GPT-2 checkpoints on the Hub are GPT2Model's: "h.0.attn.c_attn.weight",
 * "wte.weight" (no "transformer." prefix). The fixture's tensors renamed
 * so must load to the same model (same logits). */
static void test_base_model_names(void **state)
{
    (void)state;
    char src[512]; /* tu_path's buffers rotate */
    snprintf(src, sizeof src, "%s", fixture_dir("gpt2"));
    size_t n;
    unsigned char *st = (unsigned char *)tu_read_file(tu_path("%s/model.safetensors", src), &n);
    assert_non_null(st);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | st[i];
    char *htext = malloc(hlen + 1);
    memcpy(htext, st + 8, hlen);
    htext[hlen] = 0;
    cJSON *h = cJSON_Parse(htext);
    free(htext);
    assert_non_null(h);
    for (cJSON *e = h->child; e; e = e->next)
        if (strncmp(e->string, "transformer.", 12) == 0)
            memmove(e->string, e->string + 12, strlen(e->string + 12) + 1);
    char *nh = cJSON_PrintUnformatted(h);
    cJSON_Delete(h);
    size_t nlen = strlen(nh), padded = (nlen + 7) / 8 * 8, data = n - 8 - hlen;
    unsigned char *out = malloc(8 + padded + data);
    for (int i = 0; i < 8; i++)
        out[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    memcpy(out + 8, nh, nlen);
    memset(out + 8 + nlen, ' ', padded - nlen);
    memcpy(out + 8 + padded, st + 8 + hlen, data);
    free(nh);
    char *dir = copy_fixture("gpt2", NULL, NULL);
    assert_int_equal(tu_write_file(tu_path("%s/model.safetensors", dir), out, 8 + padded + data), 0);
    free(out);
    free(st);
    txc_model *a = NULL, *b = NULL;
    assert_int_equal(txc_model_load(src, NULL, &a), TXC_OK);
    txc_clear_error();
    if (txc_model_load(dir, NULL, &b) != TXC_OK)
        fail_msg("GPT2Model names: %s", txc_last_error());
    assert_true(file_has_tensor(dir, "h.0.attn.c_attn.weight"));
    assert_int_equal(txc_model_num_parameters(a), txc_model_num_parameters(b));
    txc_env *env = txc_model_env(a);
    int mark = txc_env_scope_begin(env);
    txc_tensor *ids = txc_arange(env, 3, 11, 1, TXC_I64);
    ids = txc_unsqueeze(ids, 0);
    txc_tensor *pos = txc_arange(env, 0, 8, 1, TXC_I64);
    txc_tensor *la = txc_model_forward(a, ids, NULL, NULL, pos, 0), *lb = txc_model_forward(b, ids, NULL, NULL, pos, 0);
    assert_non_null(la);
    assert_non_null(lb);
    assert_memory_equal(txc_tensor_data_ptr(la), txc_tensor_data_ptr(lb), sizeof(float) * (size_t)txc_tensor_numel(la));
    txc_env_scope_end(env, mark);
    txc_model_free(a);
    txc_model_free(b);
    tu_rm_rf(dir);
}

/* Every architecture with its 2-d weights converted to bfloat16 at load
 * (txc_model_options.convert_dtype): the fused-weight row blocks (phi3),
 * transposed Conv1D views (gpt2), scaled embeddings (gemma) read half
 * weights; the logits stay near the float32 reference (bf16 keeps 8 bits),
 * eager and compiled agree on the next token. */
static void test_bf16_weights(void **state)
{
    (void)state;
    for (size_t fi = 0; fi < sizeof fixtures / sizeof *fixtures; fi++) {
        const fixture *f = &fixtures[fi];
        cJSON *exp = load_expected(f->name);
        txc_model_options opts = {.env = NULL, .convert_dtype = true, .dtype = TXC_BF16};
        txc_model *m = NULL;
        txc_clear_error();
        if (txc_model_load(fixture_dir(f->name), &opts, &m) != TXC_OK)
            fail_msg("%s (bf16): load: %s", f->name, txc_last_error());
        int64_t n;
        int32_t *prompt = json_ids(cJSON_GetObjectItem(exp, "input_ids"), &n);
        const cJSON *ref = cJSON_GetObjectItem(exp, "logits");
        txc_env *env = txc_model_env(m);
        int mark = txc_env_scope_begin(env);
        txc_tensor *ids = txc_zeros(env, 2, (int64_t[]){1, n}, TXC_I64);
        int64_t *p = txc_tensor_data_ptr(ids);
        for (int64_t i = 0; i < n; i++)
            p[i] = prompt[i];
        txc_tensor *logits = txc_model_forward(m, ids, NULL, NULL, txc_arange(env, 0, (double)n, 1, TXC_I64), 0);
        if (!logits)
            fail_msg("%s (bf16): forward: %s", f->name, txc_last_error());
        assert_int_equal(txc_tensor_dtype(logits), TXC_F32);
        const float *g = txc_tensor_data_ptr(logits);
        int64_t V = txc_model_config(m)->vocab_size;
        double max_ref = 0, max_err = 0;
        for (int64_t r = 0; r < n; r++)
            for (int64_t j = 0; j < V; j++) {
                double w = cJSON_GetArrayItem(cJSON_GetArrayItem(ref, (int)r), (int)j)->valuedouble;
                max_ref = fabs(w) > max_ref ? fabs(w) : max_ref;
                max_err = fabs(g[r * V + j] - w) > max_err ? fabs(g[r * V + j] - w) : max_err;
            }
        if (!(max_err <= 0.05 * max_ref))
            fail_msg("%s (bf16): logits off by %g (largest logit %g)", f->name, max_err, max_ref);
        txc_env_scope_end(env, mark);
        int32_t tok[2] = {-1, -1};
        for (int jit = 0; jit < 2; jit++) {
            txc_generate_options o = txc_generate_default_options(m, NULL);
            o.max_new_tokens = 1;
            o.jit = jit;
            o.n_eos = 0;
            txc_generate_result res;
            txc_status s = txc_generate(m, prompt, n, &o, &res);
            if (s == TXC_ERR_CAPACITY || s == TXC_ERR_UNSUPPORTED)
                break; /* generate's own length limits (see generate_tokens) */
            if (s != TXC_OK)
                fail_msg("%s (bf16): generate: %s", f->name, txc_last_error());
            tok[jit] = res.new_ids[0];
            txc_generate_result_free(&res);
        }
        assert_int_equal(tok[0], tok[1]);
        free(prompt);
        txc_model_free(m);
        cJSON_Delete(exp);
    }
}

/* What the models report: windows per layer, positions. */
static void test_model_facts(void **state)
{
    (void)state;
    txc_model *m = NULL;
    assert_int_equal(txc_model_load(fixture_dir("gemma2"), NULL, &m), TXC_OK);
    assert_int_equal(txc_model_sliding_window(m, 0), 6); /* sliding, full, sliding, ... */
    assert_int_equal(txc_model_sliding_window(m, 1), 0);
    assert_int_equal(txc_model_max_positions(m), 64);
    txc_model_free(m);
    assert_int_equal(txc_model_load(fixture_dir("qwen2_sliding"), NULL, &m), TXC_OK);
    assert_int_equal(txc_model_sliding_window(m, 0), 0); /* below max_window_layers */
    assert_int_equal(txc_model_sliding_window(m, 1), 6);
    txc_model_free(m);
    assert_int_equal(txc_model_load(fixture_dir("mistral"), NULL, &m), TXC_OK);
    assert_int_equal(txc_model_sliding_window(m, 0), 7);
    assert_int_equal(txc_model_sliding_window(m, 1), 7);
    txc_model_free(m);
    assert_int_equal(txc_model_load(fixture_dir("llama_dynamic"), NULL, &m), TXC_OK);
    assert_true(txc_model_max_positions(m) == INT64_MAX); /* dynamic NTK runs past max_position_embeddings */
    txc_model_free(m);
    /* Phi3Config reads rope type "su" (and "yarn") as longrope */
    char *dir = copy_fixture("phi3_longrope", "rope_parameters",
                             "{\"type\": \"su\", \"short_factor\": [1.0, 1.1, 1.3, 1.6, 2.0, 2.5], "
                             "\"long_factor\": [1.0, 1.5, 2.5, 4.0, 6.0, 9.0]}");
    txc_model *lr = NULL;
    assert_int_equal(txc_model_load(dir, NULL, &m), TXC_OK);
    assert_int_equal(txc_model_load(fixture_dir("phi3_longrope"), NULL, &lr), TXC_OK);
    assert_memory_equal(txc_tensor_data_ptr(txc_model_rope_inv_freq(m)), txc_tensor_data_ptr(txc_model_rope_inv_freq(lr)),
                        6 * sizeof(float));
    assert_true(txc_model_rope_attention_scaling(m) == txc_model_rope_attention_scaling(lr));
    assert_true(fabs(txc_model_rope_attention_scaling(m) - sqrt(1.5)) < 1e-12); /* sqrt(1 + ln 4 / ln 16) */
    txc_model_free(m);
    txc_model_free(lr);
    tu_rm_rf(dir);
    assert_int_equal(txc_model_load(fixture_dir("gpt2"), NULL, &m), TXC_OK);
    assert_null(txc_model_rope_inv_freq(m));
    assert_string_equal(txc_model_parameter_name(m, 0), "transformer.wte.weight");
    txc_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_linear), cmocka_unit_test(test_llama_dynamic),
        cmocka_unit_test(test_llama_llama3), cmocka_unit_test(test_llama_yarn),
        cmocka_unit_test(test_llama_bias),   cmocka_unit_test(test_qwen2),
        cmocka_unit_test(test_qwen2_sliding), cmocka_unit_test(test_qwen3),
        cmocka_unit_test(test_mistral),      cmocka_unit_test(test_gemma),
        cmocka_unit_test(test_gemma2),       cmocka_unit_test(test_phi3),
        cmocka_unit_test(test_gpt2),         cmocka_unit_test(test_phi3_longrope),
        cmocka_unit_test(test_unsupported),
        cmocka_unit_test(test_heads),        cmocka_unit_test(test_config_fields),
        cmocka_unit_test(test_attention_window_softcap), cmocka_unit_test(test_rope_tables),
        cmocka_unit_test(test_base_model_names),      cmocka_unit_test(test_bf16_weights),
        cmocka_unit_test(test_model_facts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
