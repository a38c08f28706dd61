/* End-to-end: stories260K (a real trained Llama) against transformers'
 * greedy reference generations, in every cache mode; the model loader's
 * errors on bad folders. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txc/generate.h"
#include "txc/model.h"
#include "txc/ops.h"
#include "txc/tokenizer.h"

static const char *model_dir(void) { return tu_path("%s/models/stories260K", tu_shared_dir()); }

static cJSON *load_reference(void)
{
    char *text = tu_read_file(tu_path("%s/reference.json", model_dir()), NULL);
    assert_non_null(text);
    cJSON *j = cJSON_Parse(text);
    free(text);
    assert_non_null(j);
    return j;
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

static void check_reference(txc_cache_kind kind, bool jit)
{
    txc_model *m = NULL;
    txc_tokenizer *tok = NULL;
    assert_int_equal(txc_model_load(model_dir(), NULL, &m), TXC_OK);
    assert_int_equal(txc_tokenizer_load(model_dir(), &tok), TXC_OK);
    cJSON *ref = load_reference();
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(ref, "cases"))
    {
        const char *prompt = cJSON_GetObjectItem(c, "prompt")->valuestring;
        int64_t n_in, n_new;
        int32_t *want_in = json_ids(cJSON_GetObjectItem(c, "input_ids"), &n_in);
        int32_t *want_new = json_ids(cJSON_GetObjectItem(c, "new_ids"), &n_new);
        /* The tokenizer gives the reference prompt ids (BOS included). */
        int32_t *ids;
        size_t n_ids;
        assert_int_equal(txc_tokenizer_encode(tok, prompt, strlen(prompt), true, &ids, &n_ids), TXC_OK);
        assert_int_equal(n_ids, n_in);
        assert_memory_equal(ids, want_in, sizeof(int32_t) * (size_t)n_in);

        txc_generate_options o = txc_generate_default_options(m, model_dir());
        o.cache = kind;
        o.jit = jit;
        o.max_new_tokens = cJSON_GetObjectItem(ref, "max_new_tokens")->valueint;
        txc_generate_result r;
        txc_status s = txc_generate(m, ids, (int64_t)n_ids, &o, &r);
        if (s != TXC_OK)
            fail_msg("generate(%s, '%s'): %s", txc_cache_kind_name(kind), prompt, txc_last_error());
        if (jit && kind == TXC_CACHE_STATIC) { /* the article's point: one decode plan */
            assert_int_equal(r.prefill_compilations, n_in > 1 ? 1 : 0); /* a 1-token prompt is a decode step */
            assert_int_equal(r.decode_compilations, 1);
        } else if (jit && kind == TXC_CACHE_DYNAMIC) { /* ...versus one per step */
            assert_int_equal(r.prefill_compilations + r.decode_compilations, r.n_new);
        } else if (!jit) {
            assert_int_equal(r.prefill_compilations + r.decode_compilations, 0);
        }
        if (r.n_new != n_new)
            fail_msg("cache %s, prompt '%s': %lld new tokens, reference %lld", txc_cache_kind_name(kind), prompt,
                     (long long)r.n_new, (long long)n_new);
        for (int64_t i = 0; i < n_new; i++)
            if (r.new_ids[i] != want_new[i])
                fail_msg("cache %s, prompt '%s': token %lld is %d, reference %d", txc_cache_kind_name(kind), prompt,
                         (long long)i, r.new_ids[i], want_new[i]);
        char *text;
        assert_int_equal(txc_tokenizer_decode(tok, r.new_ids, (size_t)r.n_new, true, &text, NULL), TXC_OK);
        assert_string_equal(text, cJSON_GetObjectItem(c, "text")->valuestring);
        free(text);
        txc_generate_result_free(&r);
        free(ids);
        free(want_in);
        free(want_new);
    }
    cJSON_Delete(ref);
    txc_tokenizer_free(tok);
    txc_model_free(m);
}

static void test_reference_static(void **state) { (void)state; check_reference(TXC_CACHE_STATIC, false); }
static void test_reference_dynamic(void **state) { (void)state; check_reference(TXC_CACHE_DYNAMIC, false); }
static void test_reference_none(void **state) { (void)state; check_reference(TXC_CACHE_NONE, false); }
static void test_reference_jit_static(void **state) { (void)state; check_reference(TXC_CACHE_STATIC, true); }
static void test_reference_jit_dynamic(void **state) { (void)state; check_reference(TXC_CACHE_DYNAMIC, true); }

static void test_parameters(void **state)
{
    (void)state;
    txc_model *m = NULL;
    assert_int_equal(txc_model_load(model_dir(), NULL, &m), TXC_OK);
    /* 260,032 parameters; the tied lm_head is the embedding, counted once. */
    assert_int_equal(txc_model_parameter_count(m), 260032);
    assert_int_equal(txc_model_num_parameters(m), 47);
    assert_string_equal(txc_model_parameter_name(m, 0), "model.embed_tokens.weight");
    /* f32 weights are used in place: the tensor's data lies in the mmap, or
     * in the anonymous copy of it (the default weights mode). */
    txc_tensor *emb = txc_model_parameter(m, 0);
    txc_storage *st = txc_array_storage(txc_tensor_array(emb));
    assert_int_equal(txc_storage_get_kind(st),
                     TXC_WEIGHTS_DEFAULT_MODE == TXC_WEIGHTS_COPY ? TXC_STORAGE_ANON : TXC_STORAGE_MMAP);
    /* model.to(cpu) keeps the very same tensors (zero copy). */
    assert_int_equal(txc_model_to(m, TXC_CPU), TXC_OK);
    assert_ptr_equal(txc_model_parameter(m, 0), emb);
    assert_int_not_equal(txc_model_to(m, (txc_device){TXC_DEVICE_CUDA, 0}), TXC_OK);
    txc_model_free(m);
}

/* Logits of a cached decode step equal those of a full re-run. */
static void test_cache_logits_match(void **state)
{
    (void)state;
    txc_model *m = NULL;
    assert_int_equal(txc_model_load(model_dir(), NULL, &m), TXC_OK);
    txc_env *env = txc_model_env(m);
    int64_t ids[6] = {1, 403, 407, 261, 378, 432};
    int64_t shape_all[2] = {1, 6}, shape_pre[2] = {1, 5}, shape_one[2] = {1, 1};
    int mark = txc_env_scope_begin(env);
    txc_tensor *all = txc_tensor_from_data(env, TXC_I64, 2, shape_all, ids);
    txc_tensor *full = txc_model_forward(m, all, NULL, NULL, txc_arange(env, 0, 6, 1, TXC_I64), 1);
    assert_non_null(full);
    for (int kind = TXC_CACHE_DYNAMIC; kind <= TXC_CACHE_STATIC; kind++) {
        txc_kv_cache *cache = kind == TXC_CACHE_STATIC ? txc_static_cache_new(env, 5, 1, 4, 16, 8)
                                                       : txc_dynamic_cache_new(env, 5);
        assert_non_null(cache);
        txc_tensor *pre = txc_tensor_from_data(env, TXC_I64, 2, shape_pre, ids);
        assert_non_null(txc_model_forward(m, pre, NULL, cache, txc_arange(env, 0, 5, 1, TXC_I64), 1));
        assert_int_equal(txc_kv_cache_seq_length(cache), 5);
        txc_tensor *one = txc_tensor_from_data(env, TXC_I64, 2, shape_one, ids + 5);
        txc_tensor *step = txc_model_forward(m, one, NULL, cache, txc_arange(env, 5, 6, 1, TXC_I64), 1);
        assert_non_null(step);
        assert_int_equal(txc_kv_cache_seq_length(cache), 6);
        for (int64_t v = 0; v < 512; v++) {
            int64_t idx[3] = {0, 0, v};
            double a = txc_tensor_item_at(full, idx), b = txc_tensor_item_at(step, idx);
            if (fabs(a - b) > 1e-4 + 1e-4 * fabs(a))
                fail_msg("cache %d: logit %lld: %g vs %g", kind, (long long)v, b, a);
        }
        txc_kv_cache_free(cache);
    }
    txc_env_scope_end(env, mark);
    txc_model_free(m);
}

/* txc_causal_attention equals SDPA with the explicit mask j <= pos[i], and
 * never reads keys past max(pos) (poisoned with NaN here). */
static void test_causal_attention(void **state)
{
    (void)state;
    txc_env *env = txc_env_default();
    int mark = txc_env_scope_begin(env);
    int64_t qs[4] = {1, 4, 3, 8}, ks[4] = {1, 2, 10, 8};
    float q[96], k[160], v[160];
    for (int i = 0; i < 96; i++)
        q[i] = (float)sin(i * 0.37);
    for (int i = 0; i < 160; i++) {
        k[i] = (float)cos(i * 0.11);
        v[i] = (float)sin(i * 0.23 + 1);
    }
    /* positions 4, 5, 6: keys 7..9 must never be read */
    for (int h = 0; h < 2; h++)
        for (int j = 7; j < 10; j++)
            for (int e = 0; e < 8; e++)
                k[(h * 10 + j) * 8 + e] = v[(h * 10 + j) * 8 + e] = NAN;
    txc_tensor *Q = txc_tensor_from_data(env, TXC_F32, 4, qs, q), *K = txc_tensor_from_data(env, TXC_F32, 4, ks, k),
               *V = txc_tensor_from_data(env, TXC_F32, 4, ks, v);
    txc_tensor *pos = txc_arange(env, 4, 7, 1, TXC_I64);
    txc_tensor *got = txc_causal_attention(Q, K, V, pos, NAN);
    /* reference: explicit bool mask over the 7 valid keys */
    txc_tensor *Kv = txc_narrow(K, 2, 0, 7), *Vv = txc_narrow(V, 2, 0, 7);
    txc_tensor *mask = txc_le(txc_unsqueeze(txc_arange(env, 0, 7, 1, TXC_I64), 0), txc_unsqueeze(pos, 1));
    txc_tensor *want = txc_scaled_dot_product_attention(Q, Kv, Vv, mask, false, NAN);
    assert_non_null(got);
    assert_non_null(want);
    for (int64_t i = 0; i < txc_tensor_numel(got); i++) {
        float a = ((float *)txc_tensor_data_ptr(got))[i], b = ((float *)txc_tensor_data_ptr(want))[i];
        assert_false(isnan(a));
        assert_true(fabsf(a - b) <= 1e-6f + 1e-5f * fabsf(b));
    }
    /* a position past the keys is an error, not a read out of bounds */
    txc_clear_error();
    assert_null(txc_causal_attention(Q, K, V, txc_arange(env, 8, 11, 1, TXC_I64), NAN));
    assert_int_equal(txc_last_status(), TXC_ERR_CAPACITY);
    txc_clear_error();
    txc_env_scope_end(env, mark);
}

/* Writing past max_cache_len is TXC_ERR_CAPACITY, and nothing is written. */
static void test_static_cache_overflow(void **state)
{
    (void)state;
    txc_model *m = NULL;
    assert_int_equal(txc_model_load(model_dir(), NULL, &m), TXC_OK);
    txc_env *env = txc_model_env(m);
    int mark = txc_env_scope_begin(env);
    txc_kv_cache *cache = txc_static_cache_new(env, 5, 1, 4, 4, 8);
    int64_t ids[2] = {1, 403}, shape[2] = {1, 2};
    txc_tensor *in = txc_tensor_from_data(env, TXC_I64, 2, shape, ids);
    assert_non_null(txc_model_forward(m, in, NULL, cache, txc_arange(env, 0, 2, 1, TXC_I64), 1));
    assert_int_equal(txc_kv_cache_seq_length(cache), 2);
    txc_clear_error();
    assert_null(txc_model_forward(m, in, NULL, cache, txc_arange(env, 3, 5, 1, TXC_I64), 1));
    assert_int_equal(txc_last_status(), TXC_ERR_CAPACITY);
    assert_non_null(strstr(txc_last_error(), "max_cache_len 4"));
    assert_int_equal(txc_kv_cache_seq_length(cache), 2);
    txc_clear_error();
    /* a missing argument is an error with its own message, not a silent NULL */
    assert_null(txc_model_forward(m, in, NULL, cache, NULL, 1));
    assert_int_equal(txc_last_status(), TXC_ERR_INVALID);
    assert_non_null(strstr(txc_last_error(), "cache_position"));
    txc_clear_error();
    assert_null(txc_model_forward(m, NULL, NULL, cache, txc_arange(env, 2, 3, 1, TXC_I64), 1));
    assert_int_equal(txc_last_status(), TXC_ERR_INVALID);
    txc_clear_error();
    txc_kv_cache_free(cache);
    txc_env_scope_end(env, mark);
    txc_model_free(m);
}

/* A session of many prompts: prompts are padded to power-of-two buckets,
 * so prefill compiles at most log2(max_cache_len) + 1 plans, and decode
 * once for the cache shape; tokens equal eager generation. */
static void test_prefill_buckets(void **state)
{
    (void)state;
    txc_model *m = NULL;
    assert_int_equal(txc_model_load(model_dir(), NULL, &m), TXC_OK);
    txc_generator *gen = txc_generator_new(m);
    assert_non_null(gen);
    int32_t ids[40];
    for (int i = 0; i < 40; i++)
        ids[i] = i == 0 ? 1 : 300 + (i * 37) % 200;
    txc_generate_options o = txc_generate_default_options(m, model_dir());
    o.max_new_tokens = 6;
    o.max_cache_len = 64;
    o.n_eos = 0;
    for (int n = 2; n <= 40; n += 3) {
        txc_generate_result rj, re;
        o.jit = true;
        assert_int_equal(txc_generator_run(gen, ids, n, &o, &rj), TXC_OK);
        o.jit = false;
        assert_int_equal(txc_generate(m, ids, n, &o, &re), TXC_OK);
        assert_int_equal(rj.n_new, re.n_new);
        assert_memory_equal(rj.new_ids, re.new_ids, sizeof(int32_t) * (size_t)re.n_new);
        txc_generate_result_free(&rj);
        txc_generate_result_free(&re);
    }
    txc_jit_stats pre = txc_generator_jit_stats(gen, 0), dec = txc_generator_jit_stats(gen, 1);
    /* 13 prompts of 2, 5, ..., 38 tokens: buckets 2, 8, 16, 32, 64 */
    assert_true(pre.misses <= 7);
    assert_int_equal(pre.misses, 5);
    assert_int_equal(dec.misses, 1);
    txc_generator_free(gen);
    txc_model_free(m);
}

/* ---- bad folders ------------------------------------------------------------ */

static char *copy_model(void)
{
    char *dir = tu_mkdtemp();
    assert_non_null(dir);
    const char *files[] = {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        size_t n;
        char *data = tu_read_file(tu_path("%s/%s", model_dir(), files[i]), &n);
        assert_non_null(data);
        assert_int_equal(tu_write_file(tu_path("%s/%s", dir, files[i]), data, n), 0);
        free(data);
    }
    return dir;
}

static void replace_in_file(const char *path, const char *from, const char *to)
{
    size_t n;
    char *data = tu_read_file(path, &n);
    assert_non_null(data);
    char *at = strstr(data, from);
    assert_non_null(at);
    size_t out_n = n - strlen(from) + strlen(to);
    char *out = malloc(out_n + 1);
    size_t pre = (size_t)(at - data);
    memcpy(out, data, pre);
    memcpy(out + pre, to, strlen(to));
    memcpy(out + pre + strlen(to), at + strlen(from), n - pre - strlen(from));
    assert_int_equal(tu_write_file(path, out, out_n), 0);
    free(out);
    free(data);
}

static void expect_load_error(const char *dir, txc_status want, const char *needle)
{
    txc_model *m = (txc_model *)1;
    txc_clear_error();
    txc_status s = txc_model_load(dir, NULL, &m);
    if (s != want)
        fail_msg("load %s: status %s, expected %s (%s)", dir, txc_status_name(s), txc_status_name(want),
                 txc_last_error());
    assert_null(m);
    if (!strstr(txc_last_error(), needle))
        fail_msg("message '%s' does not mention '%s'", txc_last_error(), needle);
}

static void test_bad_folders(void **state)
{
    (void)state;
    expect_load_error("/nonexistent/txc-model", TXC_ERR_IO, "config.json");

    char *dir = copy_model();
    replace_in_file(tu_path("%s/config.json", dir), "\"intermediate_size\": 172", "\"intermediate_size\": 170");
    expect_load_error(dir, TXC_ERR_FORMAT, "intermediate_size");
    tu_rm_rf(dir);

    dir = copy_model();
    replace_in_file(tu_path("%s/config.json", dir), "\"model_type\": \"llama\"", "\"model_type\": \"mamba\"");
    expect_load_error(dir, TXC_ERR_UNSUPPORTED, "mamba");
    tu_rm_rf(dir);

    dir = copy_model();
    replace_in_file(tu_path("%s/config.json", dir), "\"num_hidden_layers\": 5", "\"num_hidden_layers\": 4");
    expect_load_error(dir, TXC_ERR_FORMAT, "num_hidden_layers");
    tu_rm_rf(dir);

    dir = copy_model();
    size_t n;
    char *data = tu_read_file(tu_path("%s/model.safetensors", dir), &n);
    assert_int_equal(tu_write_file(tu_path("%s/model.safetensors", dir), data, n / 2), 0);
    free(data);
    expect_load_error(dir, TXC_ERR_FORMAT, "model.safetensors");
    assert_int_equal(remove(tu_path("%s/model.safetensors", dir)), 0);
    expect_load_error(dir, TXC_ERR_IO, "model.safetensors");
    tu_rm_rf(dir);
}

/* A safetensors header not padded to the dtype's alignment (legal; some
 * writers do it) misaligns every tensor: the loader copies them and the
 * model generates the reference tokens all the same. */
static void test_unaligned_weights(void **state)
{
    (void)state;
    char *dir = copy_model();
    size_t n;
    char *data = tu_read_file(tu_path("%s/model.safetensors", dir), &n);
    uint64_t hlen;
    memcpy(&hlen, data, 8);
    char *out = malloc(n + 1);
    uint64_t hlen1 = hlen + 1;
    memcpy(out, &hlen1, 8);
    memcpy(out + 8, data + 8, (size_t)hlen);
    out[8 + hlen] = ' '; /* one more byte of header: data at an odd offset */
    memcpy(out + 9 + hlen, data + 8 + hlen, n - 8 - (size_t)hlen);
    assert_int_equal(tu_write_file(tu_path("%s/model.safetensors", dir), out, n + 1), 0);
    free(out);
    free(data);
    txc_model *m = NULL;
    assert_int_equal(txc_model_load(dir, NULL, &m), TXC_OK);
    assert_int_equal(txc_storage_get_kind(txc_array_storage(txc_tensor_array(txc_model_parameter(m, 0)))),
                     TXC_STORAGE_OWNED);
    cJSON *ref = load_reference();
    const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(ref, "cases"), 1);
    int64_t n_in, n_new;
    int32_t *in = json_ids(cJSON_GetObjectItem(c, "input_ids"), &n_in);
    int32_t *want = json_ids(cJSON_GetObjectItem(c, "new_ids"), &n_new);
    txc_generate_options o = txc_generate_default_options(m, dir);
    o.max_new_tokens = 32;
    txc_generate_result r;
    assert_int_equal(txc_generate(m, in, n_in, &o, &r), TXC_OK);
    assert_memory_equal(r.new_ids, want, sizeof(int32_t) * 32);
    txc_generate_result_free(&r);
    free(in);
    free(want);
    cJSON_Delete(ref);
    txc_model_free(m);
    tu_rm_rf(dir);
}

static void test_prompt_too_long(void **state)
{
    (void)state;
    txc_model *m = NULL;
    assert_int_equal(txc_model_load(model_dir(), NULL, &m), TXC_OK);
    int32_t ids[20];
    for (int i = 0; i < 20; i++)
        ids[i] = 300 + i;
    txc_generate_options o = txc_generate_default_options(m, model_dir());
    o.max_new_tokens = 4;
    o.max_cache_len = 16;
    txc_generate_result r;
    txc_clear_error();
    assert_int_equal(txc_generate(m, ids, 20, &o, &r), TXC_ERR_CAPACITY);
    assert_non_null(strstr(txc_last_error(), "max_cache_len 16"));
    /* Ids outside the vocabulary are refused, not read out of bounds. */
    ids[3] = 512;
    o.max_cache_len = 0;
    txc_clear_error();
    assert_int_equal(txc_generate(m, ids, 20, &o, &r), TXC_ERR_INVALID);
    txc_model_free(m);
}

/* A prompt of exactly max_position_embeddings ids gets the same answer in
 * every cache kind (no room for a new token), and a max_new_tokens of
 * INT64_MAX is cut at the positions without overflowing (UBSan). */
static void test_sequence_limits(void **state)
{
    (void)state;
    txc_model *m = NULL;
    assert_int_equal(txc_model_load(model_dir(), NULL, &m), TXC_OK);
    int32_t ids[512];
    for (int i = 0; i < 512; i++)
        ids[i] = 300 + i % 100;
    const txc_cache_kind kinds[] = {TXC_CACHE_STATIC, TXC_CACHE_DYNAMIC, TXC_CACHE_NONE};
    txc_generate_result r;
    for (int k = 0; k < 3; k++) {
        txc_generate_options o = txc_generate_default_options(m, model_dir());
        o.cache = kinds[k];
        o.jit = false;
        o.max_new_tokens = 4;
        txc_clear_error();
        assert_int_equal(txc_generate(m, ids, 512, &o, &r), TXC_ERR_CAPACITY);
        assert_non_null(strstr(txc_last_error(), "the prompt has 512 tokens, as many as max_position_embeddings 512"));
        o.max_new_tokens = INT64_MAX;
        o.n_eos = 0;
        assert_int_equal(txc_generate(m, ids, 508, &o, &r), TXC_OK);
        assert_int_equal(r.n_new, 4);
        /* (the StaticCache is cut to the positions: its end is where it stops) */
        assert_string_equal(r.stop_reason, kinds[k] == TXC_CACHE_STATIC ? "max_cache_len" : "max_position_embeddings");
        txc_generate_result_free(&r);
    }
    txc_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parameters),      cmocka_unit_test(test_cache_logits_match),
        cmocka_unit_test(test_reference_static), cmocka_unit_test(test_reference_dynamic),
        cmocka_unit_test(test_reference_none),  cmocka_unit_test(test_reference_jit_static),
        cmocka_unit_test(test_reference_jit_dynamic),  cmocka_unit_test(test_bad_folders),
        cmocka_unit_test(test_prompt_too_long), cmocka_unit_test(test_causal_attention),
        cmocka_unit_test(test_static_cache_overflow), cmocka_unit_test(test_prefill_buckets),
        cmocka_unit_test(test_unaligned_weights), cmocka_unit_test(test_sequence_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
