/* Synthetic models (txc/synthetic.h): the configs of the real checkpoints,
 * the parameter count formula, stories260k built in full against the real
 * stories260K, determinism of the weights (same seed, same bits on every
 * machine), bf16, smollm2-135m built for real, errors, and no temporary
 * files left behind. */
#include "testutil.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txc/generate.h"
#include "txc/model.h"
#include "txc/synthetic.h"

static const char *stories_dir(void) { return tu_path("%s/models/stories260K", tu_shared_dir()); }

/* A private folder for the temporary files, checked empty afterwards. */
static char *tmp_root;

static int setup(void **state)
{
    (void)state;
    tmp_root = tu_mkdtemp();
    setenv("TXC_SYNTHETIC_DIR", tmp_root, 1);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unsetenv("TXC_SYNTHETIC_DIR");
    tu_rm_rf(tmp_root);
    return 0;
}

static int dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static void test_names(void **state)
{
    (void)state;
    const char *const *names = txc_synthetic_names();
    const char *want[] = {"smollm2-135m", "qwen2.5-0.5b", "llama-3.2-1b", "stories260k"};
    int n = 0;
    while (names[n])
        n++;
    assert_int_equal(n, 4);
    for (int i = 0; i < 4; i++) {
        assert_string_equal(names[i], want[i]);
        assert_non_null(txc_synthetic_find(want[i]));
        assert_non_null(txc_synthetic_config_json(want[i]));
    }
    assert_string_equal(txc_synthetic_find("Qwen/Qwen2.5-0.5B")->name, "qwen2.5-0.5b");
    assert_string_equal(txc_synthetic_find("SmolLM2-135M")->name, "smollm2-135m");
    assert_string_equal(txc_synthetic_find("HuggingFaceTB/SmolLM2-135M")->checkpoint, "HuggingFaceTB/SmolLM2-135M");
    assert_null(txc_synthetic_find("gpt-5"));
    assert_null(txc_synthetic_find(NULL));
    assert_null(txc_synthetic_find("llama-3.2-1b")->differs); /* its real rope_scaling (llama3) */
    assert_null(txc_synthetic_find("qwen2.5-0.5b")->differs);
}

typedef struct want_config {
    const char *name, *model_type;
    int64_t H, I, layers, heads, kv, head_dim, vocab, max_pos;
    double theta, eps, init;
    bool tied, bias;
    int64_t params; /* the checkpoint's own count (transformers' num_parameters()) */
} want_config;

static void test_configs(void **state)
{
    (void)state;
    const want_config w[] = {
        {"smollm2-135m", "llama", 576, 1536, 30, 9, 3, 64, 49152, 8192, 1e5, 1e-5, 1.0 / 24, true, false, 134515008},
        {"qwen2.5-0.5b", "qwen2", 896, 4864, 24, 14, 2, 64, 151936, 32768, 1e6, 1e-6, 0.02, true, true, 494032768},
        {"llama-3.2-1b", "llama", 2048, 8192, 16, 32, 8, 64, 128256, 131072, 5e5, 1e-5, 0.02, true, false,
         1235814400},
        {"stories260k", "llama", 64, 172, 5, 8, 4, 8, 512, 512, 1e4, 1e-5, 0.02, true, false, 260032},
    };
    for (size_t i = 0; i < sizeof w / sizeof *w; i++) {
        txc_hf_config c;
        assert_int_equal(txc_synthetic_config(w[i].name, &c), TXC_OK);
        assert_string_equal(c.model_type, w[i].model_type);
        assert_int_equal(c.hidden_size, w[i].H);
        assert_int_equal(c.intermediate_size, w[i].I);
        assert_int_equal(c.num_hidden_layers, w[i].layers);
        assert_int_equal(c.num_attention_heads, w[i].heads);
        assert_int_equal(c.num_key_value_heads, w[i].kv);
        assert_int_equal(c.head_dim, w[i].head_dim);
        assert_int_equal(c.vocab_size, w[i].vocab);
        assert_int_equal(c.max_position_embeddings, w[i].max_pos);
        assert_true(c.rope_theta == w[i].theta);
        assert_true(c.rms_norm_eps == w[i].eps);
        assert_true(c.tie_word_embeddings == w[i].tied);
        /* only Llama 3.2 scales its RoPE (llama3, factor 32), as the checkpoint */
        assert_true(c.has_rope_scaling == (strcmp(w[i].name, "llama-3.2-1b") == 0));
        if (c.has_rope_scaling)
            assert_string_equal(c.rope_scaling_type, "llama3");
        assert_string_equal(c.hidden_act, "silu");
        assert_true(fabs(txc_synthetic_find(w[i].name)->initializer_range - w[i].init) < 1e-12);
        assert_true((strcmp(c.model_type, "qwen2") == 0 || c.attention_bias) == w[i].bias);
        assert_int_equal(txc_synthetic_parameter_count(&c), w[i].params);
    }
    /* Untied: lm_head counted. */
    txc_hf_config c;
    assert_int_equal(txc_synthetic_config("stories260k", &c), TXC_OK);
    c.tie_word_embeddings = false;
    assert_int_equal(txc_synthetic_parameter_count(&c), 260032 + 512 * 64);
}

/* The synthetic stories260k has the real stories260K's config and
 * parameters: same names, same shapes, in the same order. */
static void test_stories_matches_real(void **state)
{
    (void)state;
    txc_hf_config real_c, syn_c;
    assert_int_equal(txc_hf_config_load(stories_dir(), &real_c), TXC_OK);
    assert_int_equal(txc_synthetic_config("stories260k", &syn_c), TXC_OK);
    syn_c.torch_dtype[0] = real_c.torch_dtype[0] = 0;
    assert_memory_equal(&real_c, &syn_c, sizeof real_c);

    txc_model *real = NULL, *syn = NULL;
    assert_int_equal(txc_model_load(stories_dir(), NULL, &real), TXC_OK);
    assert_int_equal(txc_model_synthetic("stories260k", TXC_F32, 0, NULL, &syn), TXC_OK);
    assert_int_equal(dir_entries(tmp_root), 0); /* the temporary folder is gone at once */
    assert_int_equal(txc_model_num_parameters(syn), txc_model_num_parameters(real));
    assert_int_equal(txc_model_parameter_count(syn), txc_model_parameter_count(real));
    assert_int_equal(txc_model_parameter_count(syn), txc_synthetic_parameter_count(&syn_c));
    for (int i = 0; i < txc_model_num_parameters(real); i++) {
        txc_tensor *a = txc_model_parameter(real, i), *b = txc_model_parameter(syn, i);
        assert_string_equal(txc_model_parameter_name(real, i), txc_model_parameter_name(syn, i));
        assert_int_equal(txc_tensor_ndim(a), txc_tensor_ndim(b));
        for (int d = 0; d < txc_tensor_ndim(a); d++)
            assert_int_equal(txc_tensor_size(a, d), txc_tensor_size(b, d));
    }
    /* Norms are ones; matrices have mean ~0 and std ~initializer_range. */
    for (int i = 0; i < txc_model_num_parameters(syn); i++) {
        const char *name = txc_model_parameter_name(syn, i);
        txc_tensor *t = txc_model_parameter(syn, i);
        assert_int_equal(txc_tensor_dtype(t), TXC_F32);
        const float *v = txc_tensor_data_ptr(t);
        int64_t n = txc_tensor_numel(t);
        if (strstr(name, "norm")) {
            for (int64_t k = 0; k < n; k++)
                assert_true(v[k] == 1.0f);
        } else if (n >= 4096) {
            double s = 0, q = 0;
            for (int64_t k = 0; k < n; k++) {
                s += v[k];
                q += (double)v[k] * v[k];
                assert_true(fabsf(v[k]) < 0.02f * 3.47f);
            }
            double mean = s / (double)n, sd = sqrt(q / (double)n - mean * mean);
            assert_true(fabs(mean) < 0.002);
            assert_true(fabs(sd - 0.02) < 0.002);
        }
    }
    txc_model_free(real);
    txc_model_free(syn);
}

/* Same seed, same bits — here and on any machine (golden values). */
static void test_determinism(void **state)
{
    (void)state;
    const uint32_t gold0[4] = {0x3c387f80, 0x3c7a6fee, 0xbd089b5a, 0xbac931ed};
    const uint32_t gold42[4] = {0xbc7dc9eb, 0x3c872a38, 0x3b5906a6, 0x3b73df6d};
    float v[4];
    txc_synthetic_fill(0, "model.embed_tokens.weight", 0.02, 0, v, 4);
    assert_memory_equal(v, gold0, sizeof v);
    txc_synthetic_fill(42, "model.layers.3.mlp.down_proj.weight", 0.02, 1000, v, 4);
    assert_memory_equal(v, gold42, sizeof v);
    /* A window equals the same elements of a longer run. */
    float longer[1008];
    txc_synthetic_fill(42, "model.layers.3.mlp.down_proj.weight", 0.02, 0, longer, 1008);
    assert_memory_equal(v, longer + 1000, sizeof v);

    txc_model *a = NULL, *b = NULL, *c = NULL;
    assert_int_equal(txc_model_synthetic("stories260k", TXC_F32, 7, NULL, &a), TXC_OK);
    assert_int_equal(txc_model_synthetic("stories260k", TXC_F32, 7, NULL, &b), TXC_OK);
    assert_int_equal(txc_model_synthetic("stories260k", TXC_F32, 8, NULL, &c), TXC_OK);
    for (int i = 0; i < txc_model_num_parameters(a); i++) {
        txc_tensor *ta = txc_model_parameter(a, i), *tb = txc_model_parameter(b, i);
        assert_memory_equal(txc_tensor_data_ptr(ta), txc_tensor_data_ptr(tb),
                            sizeof(float) * (size_t)txc_tensor_numel(ta));
    }
    /* The embedding starts with txc_synthetic_fill's values. */
    float first[4];
    txc_synthetic_fill(7, "model.embed_tokens.weight", 0.02, 0, first, 4);
    assert_memory_equal(txc_tensor_data_ptr(txc_model_parameter(a, 0)), first, sizeof first);
    assert_memory_not_equal(txc_tensor_data_ptr(txc_model_parameter(a, 0)),
                            txc_tensor_data_ptr(txc_model_parameter(c, 0)), sizeof first);
    txc_model_free(a);
    txc_model_free(b);
    txc_model_free(c);
}

/* bf16: the f32 values rounded to bf16 (whatever dtype the loader keeps). */
static void test_bf16(void **state)
{
    (void)state;
    txc_model *f = NULL, *h = NULL;
    assert_int_equal(txc_model_synthetic("stories260k", TXC_F32, 3, NULL, &f), TXC_OK);
    assert_int_equal(txc_model_synthetic("stories260k", TXC_BF16, 3, NULL, &h), TXC_OK);
    for (int i = 0; i < txc_model_num_parameters(f); i++) {
        txc_tensor *tf = txc_model_parameter(f, i), *th = txc_model_parameter(h, i);
        const float *vf = txc_tensor_data_ptr(tf);
        const void *vh = txc_tensor_data_ptr(th);
        for (int64_t k = 0; k < txc_tensor_numel(tf); k++)
            assert_true((float)txc_dtype_load(txc_tensor_dtype(th), vh, (size_t)k) ==
                        txc_bf16_to_f32(txc_f32_to_bf16(vf[k])));
    }
    txc_model_free(f);
    txc_model_free(h);
}

/* A synthetic model generates, and eager and compiled decoding agree. */
static void test_generate(void **state)
{
    (void)state;
    txc_model *m = NULL;
    assert_int_equal(txc_model_synthetic("stories260k", TXC_F32, 0, NULL, &m), TXC_OK);
    int32_t prompt[5] = {1, 100, 200, 300, 400};
    int32_t *first = NULL;
    const txc_cache_kind kinds[] = {TXC_CACHE_STATIC, TXC_CACHE_DYNAMIC, TXC_CACHE_NONE, TXC_CACHE_STATIC};
    for (int r = 0; r < 4; r++) {
        txc_generate_options o = txc_generate_default_options(m, NULL);
        o.n_eos = 0;
        o.max_new_tokens = 16;
        o.cache = kinds[r];
        o.jit = r == 3;
        txc_generate_result res;
        assert_int_equal(txc_generate(m, prompt, 5, &o, &res), TXC_OK);
        assert_int_equal(res.n_new, 16);
        if (!first) {
            first = malloc(sizeof(int32_t) * 16);
            memcpy(first, res.new_ids, sizeof(int32_t) * 16);
        } else {
            assert_memory_equal(first, res.new_ids, sizeof(int32_t) * 16);
        }
        txc_generate_result_free(&res);
    }
    free(first);
    txc_model_free(m);
}

/* The real size: smollm2-135m (0.5 GB in f32) builds with the right count. */
static void test_smollm2(void **state)
{
    (void)state;
    txc_model *m = NULL;
    assert_int_equal(txc_model_synthetic("smollm2-135m", TXC_F32, 0, NULL, &m), TXC_OK);
    assert_int_equal(dir_entries(tmp_root), 0);
    assert_int_equal(txc_model_parameter_count(m), 134515008);
    assert_int_equal(txc_model_num_parameters(m), 1 + 30 * 9 + 1);
    assert_string_equal(txc_model_parameter_name(m, 1), "model.layers.0.input_layernorm.weight");
    txc_tensor *q = txc_model_parameter(m, 2);
    assert_int_equal(txc_tensor_size(q, 0), 576);
    assert_int_equal(txc_tensor_size(q, 1), 576);
    txc_tensor *k = txc_model_parameter(m, 3);
    assert_int_equal(txc_tensor_size(k, 0), 192);
    assert_int_equal(txc_model_config(m)->num_hidden_layers, 30);
    /* Filled in pieces of 2^20 elements by several threads: the values are
     * still txc_synthetic_fill's, across piece boundaries and at the end. */
    const float *emb = txc_tensor_data_ptr(txc_model_parameter(m, 0));
    int64_t n_emb = txc_tensor_numel(txc_model_parameter(m, 0));
    const uint64_t at[] = {0, (1u << 20) - 2, 5 * (1u << 20) - 3, (uint64_t)n_emb - 4};
    for (size_t i = 0; i < sizeof at / sizeof *at; i++) {
        float want[4];
        txc_synthetic_fill(0, "model.embed_tokens.weight", 1.0 / 24, at[i], want, 4);
        assert_memory_equal(emb + at[i], want, sizeof want);
    }
    txc_model_free(m);
}

static void test_errors(void **state)
{
    (void)state;
    txc_model *m = (txc_model *)1;
    txc_clear_error();
    assert_int_equal(txc_model_synthetic("gpt-5", TXC_F32, 0, NULL, &m), TXC_ERR_INVALID);
    assert_null(m);
    assert_non_null(strstr(txc_last_error(), "unknown synthetic model 'gpt-5'"));
    assert_non_null(strstr(txc_last_error(), "smollm2-135m, qwen2.5-0.5b, llama-3.2-1b, stories260k"));
    txc_hf_config c;
    assert_int_equal(txc_synthetic_config("nope", &c), TXC_ERR_INVALID);
    txc_clear_error();
    assert_int_equal(txc_model_synthetic("stories260k", TXC_I32, 0, NULL, &m), TXC_ERR_INVALID);
    assert_non_null(strstr(txc_last_error(), "int32"));
    /* No room: a folder that does not exist. */
    setenv("TXC_SYNTHETIC_DIR", "/nonexistent/txc", 1);
    txc_clear_error();
    assert_int_equal(txc_model_synthetic("stories260k", TXC_F32, 0, NULL, &m), TXC_ERR_IO);
    assert_null(m);
    assert_non_null(strstr(txc_last_error(), "no temporary folder"));
    txc_clear_error();
    setenv("TXC_SYNTHETIC_DIR", tmp_root, 1);
    assert_int_equal(dir_entries(tmp_root), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_configs),
        cmocka_unit_test(test_stories_matches_real),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_generate),
        cmocka_unit_test(test_smollm2),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
