/* config.json / generation_config.json: the real stories260K files, each
 * default, each error. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txc/hf_config.h"

static const char *model_dir(void) { return tu_path("%s/models/stories260K", tu_shared_dir()); }

/* A minimal valid llama config with `extra` fields spliced in. */
static txc_status parse_cfg(const char *extra, txc_hf_config *c)
{
    char buf[4096];
    snprintf(buf, sizeof buf,
             "{\"model_type\": \"llama\", \"vocab_size\": 100, \"hidden_size\": 64, "
             "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4%s%s}",
             extra && *extra ? ", " : "", extra ? extra : "");
    txc_clear_error();
    return txc_hf_config_parse(buf, strlen(buf), "cfg.json", c);
}

static void expect_cfg_fail(const char *extra, const char *substr)
{
    txc_hf_config c;
    txc_status s = parse_cfg(extra, &c);
    if (s != TXC_ERR_FORMAT || !strstr(txc_last_error(), substr))
        print_error("extra {%s}: got %s \"%s\", want TXC_ERR_FORMAT containing \"%s\"\n", extra,
                    txc_status_name(s), txc_last_error(), substr);
    assert_int_equal(s, TXC_ERR_FORMAT);
    assert_non_null(strstr(txc_last_error(), "cfg.json"));
    assert_non_null(strstr(txc_last_error(), substr));
}

static void expect_text_fail(const char *text, const char *substr)
{
    txc_hf_config c;
    txc_clear_error();
    txc_status s = txc_hf_config_parse(text, strlen(text), "cfg.json", &c);
    if (s != TXC_ERR_FORMAT || !strstr(txc_last_error(), substr))
        print_error("text %s: got %s \"%s\", want containing \"%s\"\n", text, txc_status_name(s),
                    txc_last_error(), substr);
    assert_int_equal(s, TXC_ERR_FORMAT);
    assert_non_null(strstr(txc_last_error(), substr));
}

static void expect_gen_fail(const char *text, const char *substr);

static void test_real_config(void **state)
{
    (void)state;
    txc_clear_error();
    txc_hf_config c;
    assert_int_equal(txc_hf_config_load(model_dir(), &c), TXC_OK);
    assert_string_equal(c.model_type, "llama");
    assert_string_equal(c.architecture, "LlamaForCausalLM");
    assert_int_equal(c.vocab_size, 512);
    assert_int_equal(c.hidden_size, 64);
    assert_int_equal(c.intermediate_size, 172);
    assert_int_equal(c.num_hidden_layers, 5);
    assert_int_equal(c.num_attention_heads, 8);
    assert_int_equal(c.num_key_value_heads, 4);
    assert_int_equal(c.head_dim, 8);
    assert_int_equal(c.max_position_embeddings, 512);
    assert_true(c.rms_norm_eps == 1e-5);
    assert_true(c.rope_theta == 10000.0);
    assert_true(c.tie_word_embeddings);
    assert_false(c.attention_bias);
    assert_false(c.mlp_bias);
    assert_string_equal(c.hidden_act, "silu");
    assert_string_equal(c.torch_dtype, "float32");
    assert_false(c.has_rope_scaling);
    assert_string_equal(c.rope_scaling_type, "");
    assert_int_equal(c.sliding_window, 0);
    assert_false(c.use_sliding_window);
    assert_int_equal(c.bos_token_id, 1);
    assert_int_equal(c.n_eos, 1);
    assert_int_equal(c.eos_token_id[0], 2);
    assert_int_equal(c.pad_token_id, -1);
}

static void test_real_generation_config(void **state)
{
    (void)state;
    txc_clear_error();
    txc_generation_config g;
    assert_int_equal(txc_generation_config_load(model_dir(), &g), TXC_OK);
    assert_true(g.present);
    assert_int_equal(g.bos_token_id, 1);
    assert_int_equal(g.n_eos, 2);
    assert_int_equal(g.eos_token_id[0], 1);
    assert_int_equal(g.eos_token_id[1], 2);
    assert_int_equal(g.pad_token_id, -1);
    assert_int_equal(g.max_length, -1);
    assert_int_equal(g.max_new_tokens, -1);
    assert_false(g.do_sample);
    assert_true(g.temperature == 1.0);
    assert_true(g.top_p == 1.0);
    assert_true(g.min_p == 0.0);
    assert_true(g.repetition_penalty == 1.0);
    assert_int_equal(g.top_k, 50);
}

static void test_defaults(void **state)
{
    (void)state;
    txc_hf_config c;
    assert_int_equal(parse_cfg("", &c), TXC_OK);
    assert_string_equal(c.model_type, "llama");
    assert_string_equal(c.architecture, "");
    assert_int_equal(c.num_key_value_heads, 4); /* = num_attention_heads */
    assert_int_equal(c.head_dim, 16);           /* = 64 / 4 */
    assert_int_equal(c.max_position_embeddings, 2048);
    assert_true(c.rms_norm_eps == 1e-6);
    assert_true(c.rope_theta == 10000.0);
    assert_false(c.tie_word_embeddings);
    assert_false(c.attention_bias);
    assert_false(c.mlp_bias);
    assert_string_equal(c.hidden_act, "silu");
    assert_string_equal(c.torch_dtype, "");
    assert_false(c.has_rope_scaling);
    assert_int_equal(c.sliding_window, 0);
    assert_false(c.use_sliding_window);
    assert_int_equal(c.bos_token_id, -1);
    assert_int_equal(c.n_eos, 0);
    assert_int_equal(c.pad_token_id, -1);

    /* null counts as absent */
    assert_int_equal(parse_cfg("\"num_key_value_heads\": null, \"head_dim\": null, \"rope_scaling\": null, "
                               "\"sliding_window\": null, \"bos_token_id\": null, \"eos_token_id\": null, "
                               "\"torch_dtype\": null, \"architectures\": []",
                               &c),
                     TXC_OK);
    assert_int_equal(c.num_key_value_heads, 4);
    assert_int_equal(c.head_dim, 16);
    assert_false(c.has_rope_scaling);
    assert_int_equal(c.bos_token_id, -1);
    assert_int_equal(c.n_eos, 0);
}

static void test_explicit_values(void **state)
{
    (void)state;
    txc_hf_config c;
    /* Qwen2-style */
    assert_int_equal(parse_cfg("\"architectures\": [\"Qwen2ForCausalLM\"], \"num_key_value_heads\": 2, "
                               "\"head_dim\": 32, \"max_position_embeddings\": 32768, "
                               "\"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, "
                               "\"tie_word_embeddings\": true, \"attention_bias\": true, "
                               "\"mlp_bias\": false, \"hidden_act\": \"gelu\", \"dtype\": \"bfloat16\", "
                               "\"sliding_window\": 131072, \"use_sliding_window\": false, "
                               "\"bos_token_id\": 151643, \"eos_token_id\": [151645, 151643], "
                               "\"pad_token_id\": 0",
                               &c),
                     TXC_OK);
    assert_string_equal(c.architecture, "Qwen2ForCausalLM");
    assert_int_equal(c.num_key_value_heads, 2);
    assert_int_equal(c.head_dim, 32); /* explicit, need not be hidden/heads */
    assert_int_equal(c.max_position_embeddings, 32768);
    assert_true(c.rope_theta == 1e6);
    assert_true(c.tie_word_embeddings);
    assert_true(c.attention_bias);
    assert_string_equal(c.hidden_act, "gelu");
    assert_string_equal(c.torch_dtype, "bfloat16"); /* newer "dtype" key */
    assert_int_equal(c.sliding_window, 131072);
    assert_false(c.use_sliding_window);
    assert_int_equal(c.bos_token_id, 151643);
    assert_int_equal(c.n_eos, 2);
    assert_int_equal(c.eos_token_id[0], 151645);
    assert_int_equal(c.eos_token_id[1], 151643);
    assert_int_equal(c.pad_token_id, 0);

    /* torch_dtype wins over dtype when both are present */
    assert_int_equal(parse_cfg("\"torch_dtype\": \"float16\", \"dtype\": \"bfloat16\"", &c), TXC_OK);
    assert_string_equal(c.torch_dtype, "float16");

    /* rope_scaling: llama3 with "rope_type"; older "type" */
    assert_int_equal(parse_cfg("\"rope_scaling\": {\"factor\": 32.0, \"rope_type\": \"llama3\", "
                               "\"original_max_position_embeddings\": 8192}",
                               &c),
                     TXC_OK);
    assert_true(c.has_rope_scaling);
    assert_string_equal(c.rope_scaling_type, "llama3");
    assert_int_equal(parse_cfg("\"rope_scaling\": {\"factor\": 2.0, \"type\": \"linear\"}", &c), TXC_OK);
    assert_true(c.has_rope_scaling);
    assert_string_equal(c.rope_scaling_type, "linear");
    assert_int_equal(parse_cfg("\"rope_scaling\": {\"factor\": 2.0}", &c), TXC_OK);
    assert_true(c.has_rope_scaling);
    assert_string_equal(c.rope_scaling_type, "");

    /* transformers v5: rope_parameters */
    assert_int_equal(parse_cfg("\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 500000.0}", &c),
                     TXC_OK);
    assert_true(c.rope_theta == 500000.0);
    assert_false(c.has_rope_scaling);
    assert_int_equal(parse_cfg("\"rope_parameters\": {\"rope_type\": \"yarn\", \"rope_theta\": 1e6, \"factor\": 4}",
                               &c),
                     TXC_OK);
    assert_true(c.rope_theta == 1e6);
    assert_true(c.has_rope_scaling);
    assert_string_equal(c.rope_scaling_type, "yarn");

    /* Mistral: sliding_window as an int, use_sliding_window absent */
    assert_int_equal(parse_cfg("\"sliding_window\": 4096", &c), TXC_OK);
    assert_int_equal(c.sliding_window, 4096);
    assert_false(c.use_sliding_window);

    /* eos as a single int, integers written as 2.0 are whole */
    assert_int_equal(parse_cfg("\"eos_token_id\": 2.0, \"pad_token_id\": -1", &c), TXC_OK);
    assert_int_equal(c.n_eos, 1);
    assert_int_equal(c.eos_token_id[0], 2);
    assert_int_equal(c.pad_token_id, -1);
    /* eight eos ids is the limit */
    assert_int_equal(parse_cfg("\"eos_token_id\": [1,2,3,4,5,6,7,8]", &c), TXC_OK);
    assert_int_equal(c.n_eos, 8);
    assert_int_equal(c.eos_token_id[7], 8);
}

static void test_config_errors(void **state)
{
    (void)state;
    /* not JSON, not an object */
    expect_text_fail("", "not valid JSON");
    expect_text_fail("{\"model_type\": ", "not valid JSON");
    expect_text_fail("{} {}", "not valid JSON");
    expect_text_fail("[1, 2]", "is an array, expected a JSON object");
    expect_text_fail("\"llama\"", "is a string, expected a JSON object");
    /* required */
    expect_text_fail("{\"vocab_size\": 1}", "required field 'model_type' is missing");
    expect_text_fail("{\"model_type\": \"llama\", \"hidden_size\": 64}", "required field 'vocab_size' is missing");
    expect_cfg_fail("\"model_type\": 3", "field 'model_type' is a number, expected a string");
    /* wrong types */
    expect_text_fail("{\"model_type\": \"llama\", \"vocab_size\": \"512\"}",
                     "field 'vocab_size' is a string, expected an integer");
    expect_cfg_fail("\"num_key_value_heads\": \"2\"", "field 'num_key_value_heads' is a string");
    expect_cfg_fail("\"head_dim\": 1.5", "field 'head_dim' is 1.5, expected an integer");
    expect_cfg_fail("\"max_position_embeddings\": 1e30", "field 'max_position_embeddings'");
    expect_cfg_fail("\"rms_norm_eps\": \"1e-5\"", "field 'rms_norm_eps' is a string, expected a number");
    expect_cfg_fail("\"rope_theta\": true", "field 'rope_theta' is a boolean");
    expect_cfg_fail("\"tie_word_embeddings\": 1", "field 'tie_word_embeddings' is a number, expected true or false");
    expect_cfg_fail("\"attention_bias\": \"false\"", "field 'attention_bias'");
    expect_cfg_fail("\"mlp_bias\": []", "field 'mlp_bias'");
    expect_cfg_fail("\"hidden_act\": 7", "field 'hidden_act'");
    expect_cfg_fail("\"torch_dtype\": \"a-very-long-dtype-name\"", "field 'torch_dtype'");
    expect_cfg_fail("\"architectures\": \"LlamaForCausalLM\"", "field 'architectures' is a string");
    expect_cfg_fail("\"architectures\": [1]", "field 'architectures[0]' is a number");
    expect_cfg_fail("\"rope_scaling\": \"linear\"", "field 'rope_scaling' is a string");
    expect_cfg_fail("\"rope_scaling\": {\"rope_type\": 3}", "field 'rope_scaling.rope_type'");
    expect_cfg_fail("\"rope_parameters\": 1", "field 'rope_parameters'");
    expect_cfg_fail("\"sliding_window\": \"4096\"", "field 'sliding_window'");
    expect_cfg_fail("\"sliding_window\": -1", "field 'sliding_window' is -1");
    expect_cfg_fail("\"use_sliding_window\": 0", "field 'use_sliding_window'");
    expect_cfg_fail("\"bos_token_id\": \"<s>\"", "field 'bos_token_id' is a string");
    expect_cfg_fail("\"bos_token_id\": -2", "field 'bos_token_id' is -2");
    expect_cfg_fail("\"eos_token_id\": \"</s>\"", "field 'eos_token_id' is a string");
    expect_cfg_fail("\"eos_token_id\": [1, \"2\"]", "field 'eos_token_id' is a string");
    expect_cfg_fail("\"eos_token_id\": [1, -3]", "field 'eos_token_id' holds -3");
    expect_cfg_fail("\"eos_token_id\": [1.5]", "field 'eos_token_id' is 1.5");
    expect_cfg_fail("\"eos_token_id\": [1,2,3,4,5,6,7,8,9]", "field 'eos_token_id' has 9 ids (at most 8");
    expect_cfg_fail("\"pad_token_id\": 0.5", "field 'pad_token_id' is 0.5");
    /* non-positive sizes */
    expect_text_fail("{\"model_type\": \"llama\", \"vocab_size\": 0, \"hidden_size\": 64, "
                     "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4}",
                     "field 'vocab_size' is 0, expected a positive integer");
    expect_text_fail("{\"model_type\": \"llama\", \"vocab_size\": 10, \"hidden_size\": -64, "
                     "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4}",
                     "field 'hidden_size' is -64");
    expect_cfg_fail("\"num_key_value_heads\": 0", "field 'num_key_value_heads' is 0");
    expect_cfg_fail("\"head_dim\": 0", "field 'head_dim' is 0");
    expect_cfg_fail("\"max_position_embeddings\": -5", "field 'max_position_embeddings' is -5");
    expect_cfg_fail("\"rms_norm_eps\": 0", "field 'rms_norm_eps' is 0");
    expect_cfg_fail("\"rope_theta\": -1", "field 'rope_theta' is -1");
    /* head arithmetic */
    expect_cfg_fail("\"num_key_value_heads\": 3",
                    "field 'num_attention_heads' (4) is not a multiple of 'num_key_value_heads' (3)");
    expect_text_fail("{\"model_type\": \"llama\", \"vocab_size\": 10, \"hidden_size\": 66, "
                     "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4}",
                     "field 'hidden_size' (66) is not divisible by 'num_attention_heads' (4)");
    /* ... but fine with an explicit head_dim */
    txc_hf_config c;
    const char *ok = "{\"model_type\": \"llama\", \"vocab_size\": 10, \"hidden_size\": 66, "
                     "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                     "\"head_dim\": 16}";
    txc_clear_error();
    assert_int_equal(txc_hf_config_parse(ok, strlen(ok), NULL, &c), TXC_OK);
    assert_int_equal(c.head_dim, 16);
    /* origin defaults to config.json in messages; text need not be NUL-terminated */
    txc_clear_error();
    assert_int_equal(txc_hf_config_parse("{\"x\": 1}garbage", 8, NULL, &c), TXC_ERR_FORMAT);
    assert_non_null(strstr(txc_last_error(), "config.json: required field 'model_type'"));
    txc_clear_error();
    assert_int_equal(txc_hf_config_parse(NULL, 0, NULL, &c), TXC_ERR_INVALID);
    txc_clear_error();
    assert_int_equal(txc_hf_config_parse("{}", 2, NULL, NULL), TXC_ERR_INVALID);
    txc_clear_error();
    /* A NUL inside a string ("llama\u0000qwen" would read as "llama") is refused, naming the field. */
    expect_text_fail("{\"model_type\": \"llama\\u0000qwen\", \"vocab_size\": 100, \"hidden_size\": 64, "
                     "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4}",
                     "cfg.json: field 'model_type' holds a NUL character");
    expect_cfg_fail("\"rope_scaling\": {\"rope_type\": \"linear\\u0000\", \"factor\": 2.0}",
                    "field 'rope_scaling' holds a NUL character");
    expect_cfg_fail("\"architectures\": [\"A\", \"B\\u0000\"]", "field 'architectures' holds a NUL character");
    expect_gen_fail("{\"eos_token_id\": 2, \"x\\u0000\": 1}", "field 'x' holds a NUL character");
    /* an escaped backslash before "u0000" is no NUL */
    assert_int_equal(parse_cfg("\"architectures\": [\"A\\\\u0000\"]", &c), TXC_OK);
    assert_string_equal(c.architecture, "A\\u0000");
}

static void test_files(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    assert_non_null(dir);
    txc_hf_config c;
    txc_generation_config g;

    /* missing config.json: IO naming the path; missing generation config: fine */
    txc_clear_error();
    assert_int_equal(txc_hf_config_load(dir, &c), TXC_ERR_IO);
    assert_non_null(strstr(txc_last_error(), dir));
    assert_non_null(strstr(txc_last_error(), "config.json"));
    txc_clear_error();
    assert_int_equal(txc_generation_config_load(dir, &g), TXC_OK);
    assert_false(g.present);
    assert_int_equal(g.top_k, 50);
    assert_int_equal(g.n_eos, 0);
    assert_int_equal(txc_last_status(), TXC_OK);

    /* corrupt files name the file */
    const char *bad = "{\"model_type\": \"llama\",";
    assert_int_equal(tu_write_file(tu_path("%s/config.json", dir), bad, strlen(bad)), 0);
    assert_int_equal(tu_write_file(tu_path("%s/generation_config.json", dir), bad, strlen(bad)), 0);
    txc_clear_error();
    assert_int_equal(txc_hf_config_load(dir, &c), TXC_ERR_FORMAT);
    assert_non_null(strstr(txc_last_error(), "config.json: not valid JSON"));
    txc_clear_error();
    assert_int_equal(txc_generation_config_load(dir, &g), TXC_ERR_FORMAT);
    assert_non_null(strstr(txc_last_error(), "generation_config.json: not valid JSON"));

    /* a directory where the file should be: IO */
    char sub[512];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/config.json' '%s/generation_config.json'", sub, sub);
    assert_int_equal(system(cmd), 0);
    txc_clear_error();
    assert_int_equal(txc_hf_config_load(sub, &c), TXC_ERR_IO);
    txc_clear_error();
    assert_int_equal(txc_generation_config_load(sub, &g), TXC_ERR_IO);
    txc_clear_error();
    assert_int_equal(txc_hf_config_load(NULL, &c), TXC_ERR_INVALID);
    txc_clear_error();
    assert_int_equal(txc_generation_config_load(dir, NULL), TXC_ERR_INVALID);
    txc_clear_error();

    /* the real files copied into a directory with a trailing slash */
    size_t n = 0;
    char *text = tu_read_file(tu_path("%s/config.json", model_dir()), &n);
    assert_non_null(text);
    assert_int_equal(tu_write_file(tu_path("%s/config.json", dir), text, n), 0);
    free(text);
    assert_int_equal(txc_hf_config_load(tu_path("%s/", dir), &c), TXC_OK);
    assert_int_equal(c.vocab_size, 512);
    tu_rm_rf(dir);
}

static txc_status parse_gen(const char *text, txc_generation_config *g)
{
    txc_clear_error();
    return txc_generation_config_parse(text, strlen(text), "gen.json", g);
}

static void expect_gen_fail(const char *text, const char *substr)
{
    txc_generation_config g;
    txc_status s = parse_gen(text, &g);
    if (s != TXC_ERR_FORMAT || !strstr(txc_last_error(), substr))
        print_error("%s: got %s \"%s\", want containing \"%s\"\n", text, txc_status_name(s),
                    txc_last_error(), substr);
    assert_int_equal(s, TXC_ERR_FORMAT);
    assert_non_null(strstr(txc_last_error(), "gen.json"));
    assert_non_null(strstr(txc_last_error(), substr));
}

static void test_generation_config(void **state)
{
    (void)state;
    txc_generation_config g;
    /* defaults (GenerationConfig) */
    assert_int_equal(parse_gen("{}", &g), TXC_OK);
    assert_true(g.present);
    assert_int_equal(g.bos_token_id, -1);
    assert_int_equal(g.n_eos, 0);
    assert_int_equal(g.pad_token_id, -1);
    assert_int_equal(g.max_length, -1);
    assert_int_equal(g.max_new_tokens, -1);
    assert_false(g.do_sample);
    assert_true(g.temperature == 1.0);
    assert_true(g.top_p == 1.0);
    assert_true(g.min_p == 0.0);
    assert_true(g.repetition_penalty == 1.0);
    assert_int_equal(g.top_k, 50);
    txc_generation_config d;
    txc_generation_config_defaults(&d);
    assert_false(d.present);
    assert_int_equal(d.top_k, 50);

    /* explicit values (a Llama-3-Instruct-like file) */
    assert_int_equal(parse_gen("{\"bos_token_id\": 128000, \"eos_token_id\": [128001, 128008, 128009], "
                               "\"do_sample\": true, \"temperature\": 0.6, \"top_p\": 0.9, \"top_k\": 0, "
                               "\"min_p\": 0.05, \"repetition_penalty\": 1.1, \"max_length\": 4096, "
                               "\"max_new_tokens\": 256, \"pad_token_id\": 128004}",
                               &g),
                     TXC_OK);
    assert_int_equal(g.bos_token_id, 128000);
    assert_int_equal(g.n_eos, 3);
    assert_int_equal(g.eos_token_id[2], 128009);
    assert_true(g.do_sample);
    assert_true(g.temperature == 0.6);
    assert_true(g.top_p == 0.9);
    assert_int_equal(g.top_k, 0);
    assert_true(g.min_p == 0.05);
    assert_true(g.repetition_penalty == 1.1);
    assert_int_equal(g.max_length, 4096);
    assert_int_equal(g.max_new_tokens, 256);
    assert_int_equal(g.pad_token_id, 128004);
    /* null = absent; temperature may be written as an int */
    assert_int_equal(parse_gen("{\"temperature\": null, \"top_p\": null, \"min_p\": null, \"eos_token_id\": 2, "
                               "\"top_k\": null}",
                               &g),
                     TXC_OK);
    assert_true(g.temperature == 1.0);
    assert_int_equal(g.top_k, 50);
    assert_int_equal(g.n_eos, 1);
    assert_int_equal(parse_gen("{\"temperature\": 0}", &g), TXC_OK);
    assert_true(g.temperature == 0.0);

    /* errors */
    expect_gen_fail("not json", "not valid JSON");
    expect_gen_fail("[]", "expected a JSON object");
    expect_gen_fail("{\"do_sample\": \"yes\"}", "field 'do_sample'");
    expect_gen_fail("{\"temperature\": \"0.7\"}", "field 'temperature' is a string");
    expect_gen_fail("{\"temperature\": -0.5}", "field 'temperature' is -0.5");
    expect_gen_fail("{\"top_p\": 1.5}", "field 'top_p' is 1.5");
    expect_gen_fail("{\"min_p\": -0.1}", "field 'min_p'");
    expect_gen_fail("{\"repetition_penalty\": 0}", "field 'repetition_penalty' is 0");
    expect_gen_fail("{\"top_k\": 2.5}", "field 'top_k' is 2.5");
    expect_gen_fail("{\"top_k\": -1}", "field 'top_k' is -1");
    expect_gen_fail("{\"max_length\": \"20\"}", "field 'max_length' is a string");
    expect_gen_fail("{\"max_new_tokens\": -1}", "field 'max_new_tokens' is -1");
    /* 0: GenerationConfig.validate() raises "`max_new_tokens` must be greater than 0" */
    expect_gen_fail("{\"max_new_tokens\": 0}", "field 'max_new_tokens' is 0, expected > 0");
    expect_gen_fail("{\"eos_token_id\": [1,2,3,4,5,6,7,8,9]}", "field 'eos_token_id' has 9 ids");
    expect_gen_fail("{\"bos_token_id\": [1]}", "field 'bos_token_id' is an array");
}

/* Keys txc does not implement are listed (once each, in file order) where
 * they would change transformers' output, not where they are off. */
static void test_generation_config_ignored(void **state)
{
    (void)state;
    txc_generation_config g;
    assert_int_equal(parse_gen("{\"num_beams\": 1, \"no_repeat_ngram_size\": 0, \"typical_p\": 0.5, "
                               "\"bad_words_ids\": null, \"suppress_tokens\": [], \"renormalize_logits\": false, "
                               "\"transformers_version\": \"4.46.3\", \"use_cache\": true, \"custom_key\": 3}",
                               &g),
                     TXC_OK);
    assert_int_equal(g.n_ignored, 0); /* all off (typical_p: greedy, where transformers skips it) */
    assert_int_equal(parse_gen("{\"num_beams\": 4, \"do_sample\": true, \"typical_p\": 0.5, \"num_beams\": 3, "
                               "\"no_repeat_ngram_size\": 3, \"bad_words_ids\": [[5, 6]], \"min_new_tokens\": 2, "
                               "\"renormalize_logits\": true, \"temperature\": 0.7}",
                               &g),
                     TXC_OK);
    assert_int_equal(g.n_ignored, 6);
    assert_string_equal(g.ignored[0], "typical_p 0.5");
    assert_string_equal(g.ignored[1], "num_beams 3"); /* the last value, once */
    assert_string_equal(g.ignored[2], "no_repeat_ngram_size 3");
    assert_string_equal(g.ignored[3], "bad_words_ids [[5,6]]");
    assert_string_equal(g.ignored[4], "min_new_tokens 2");
    assert_string_equal(g.ignored[5], "renormalize_logits true");
    /* a long value is cut */
    char big[600] = "{\"suppress_tokens\": [";
    for (int i = 0; i < 100; i++)
        strcat(big, i ? ",1000" : "1000");
    strcat(big, "]}");
    assert_int_equal(parse_gen(big, &g), TXC_OK);
    assert_int_equal(g.n_ignored, 1);
    assert_int_equal(strlen(g.ignored[0]), sizeof g.ignored[0] - 1);
    assert_non_null(strstr(g.ignored[0], "suppress_tokens [1000,"));
    assert_non_null(strstr(g.ignored[0], "..."));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_config),
        cmocka_unit_test(test_real_generation_config),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_explicit_values),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_files),
        cmocka_unit_test(test_generation_config),
        cmocka_unit_test(test_generation_config_ignored),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
