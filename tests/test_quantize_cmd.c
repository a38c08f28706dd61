/* `txc quantize` and the GGUF writer, end to end.
 *
 * A tiny llama folder is written here (config.json, model.safetensors with
 * random float32 weights, a byte-level BPE tokenizer.json of 256 byte
 * tokens and a few merges), converted with $TXC_BIN quantize, and:
 *   - --type f32: the GGUF read back by the GGUF reader (txc_gguf_open) has
 *     convert_hf_to_gguf's metadata, q/k rows permuted, and the model loaded
 *     from it gives logits bit-identical to the folder's (the reader undoes
 *     the permutation);
 *   - --type q8_0 / q4_0 / q4_k (rows of 64: q4_k falls back to q5_0 as
 *     llama-quantize): every 2-D tensor holds txc_quant_quantize's bytes of
 *     the (permuted) float weights, 1-D ones float32; the logits within a
 *     relative L2 error of 3% (q8_0), 25% (4-bit) of the folder's;
 *   - q8_0 / q4_0: repacked at load in the copy (rows interleaved by 8), not under --mmap nor with
 *     TXC_QUANT_REPACK=0 (then bit-identical to the mmap); repacked logits within 1e-5 (relative L2)
 *     of the row layout's;
 *   - the q8_0 file loaded with convert_dtype (--dtype f32, bf16): every 2-D weight
 *     dequantized to that dtype (float32: txc_quant_dequantize's values);
 *   - bad calls exit 2 with one line: unknown --type, a folder without
 *     config.json, an unsupported model_type.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "txc/dtype.h"
#include "txc/env.h"
#include "txc/gguf.h"
#include "txc/model.h"
#include "txc/ops.h"
#include "txc/quant.h"
#include "txc/tensor.h"

#define H 64
#define NH 4
#define NKV 2
#define HD 16
#define FF 128
#define V 260
#define L 2

static const char *dir;

typedef struct tdesc {
    char name[96];
    int ndim;
    int64_t shape[2];
} tdesc;

static int list_tensors(tdesc *t)
{
    int n = 0;
    t[n++] = (tdesc){"model.embed_tokens.weight", 2, {V, H}};
    for (int l = 0; l < L; l++) {
        const char *nm[] = {"input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                            "self_attn.v_proj.weight", "self_attn.o_proj.weight", "post_attention_layernorm.weight",
                            "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"};
        int64_t sh[][2] = {{H, 0}, {NH * HD, H}, {NKV * HD, H}, {NKV * HD, H}, {H, NH * HD}, {H, 0}, {FF, H}, {FF, H}, {H, FF}};
        for (int i = 0; i < 9; i++) {
            snprintf(t[n].name, sizeof t[n].name, "model.layers.%d.%s", l, nm[i]);
            t[n].ndim = sh[i][1] ? 2 : 1;
            t[n].shape[0] = sh[i][0], t[n].shape[1] = sh[i][1];
            n++;
        }
    }
    t[n++] = (tdesc){"model.norm.weight", 1, {H, 0}};
    t[n++] = (tdesc){"lm_head.weight", 2, {V, H}};
    return n;
}

static int64_t numel(const tdesc *t) { return t->ndim == 1 ? t->shape[0] : t->shape[0] * t->shape[1]; }

static float value(int ti, int64_t i, bool norm)
{
    if (norm)
        return 1.0f + 0.01f * (float)((i * 7 + ti) % 5);
    uint64_t x = (uint64_t)(ti + 1) * 0x9E3779B97F4A7C15ull + (uint64_t)i * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29, x *= 0x94D049BB133111EBull, x ^= x >> 32;
    return ((float)(x % 20001) / 10000.0f - 1.0f) * 0.15f;
}

/* GPT-2's bytes_to_unicode as UTF-8 */
static void byte_char(int b, char *out)
{
    int cp = b;
    if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))) {
        int n = 0;
        for (int c = 0; c < b; c++)
            if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255)))
                n++;
        cp = 256 + n;
    }
    if (cp < 0x80)
        out[0] = (char)cp, out[1] = 0;
    else
        out[0] = (char)(0xc0 | (cp >> 6)), out[1] = (char)(0x80 | (cp & 0x3f)), out[2] = 0;
}

static void write_folder(const char *d)
{
    char path[700];
    snprintf(path, sizeof path, "%s/config.json", d);
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": %d, "
               "\"intermediate_size\": %d, \"num_hidden_layers\": %d, \"num_attention_heads\": %d, "
               "\"num_key_value_heads\": %d, \"vocab_size\": %d, \"max_position_embeddings\": 256, "
               "\"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0, \"tie_word_embeddings\": false, "
               "\"hidden_act\": \"silu\", \"bos_token_id\": 256, \"eos_token_id\": 257, \"torch_dtype\": \"float32\"}",
            H, FF, L, NH, NKV, V);
    fclose(f);
    /* safetensors */
    tdesc t[64];
    int n = list_tensors(t);
    char *hdr = malloc(65536);
    size_t hn = (size_t)sprintf(hdr, "{");
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        size_t b = (size_t)numel(&t[i]) * 4;
        if (t[i].ndim == 1)
            hn += (size_t)sprintf(hdr + hn, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%lld],\"data_offsets\":[%zu,%zu]}",
                                  i ? "," : "", t[i].name, (long long)t[i].shape[0], off, off + b);
        else
            hn += (size_t)sprintf(hdr + hn, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%lld,%lld],\"data_offsets\":[%zu,%zu]}",
                                  i ? "," : "", t[i].name, (long long)t[i].shape[0], (long long)t[i].shape[1], off,
                                  off + b);
        off += b;
    }
    hn += (size_t)sprintf(hdr + hn, "}");
    while ((8 + hn) % 8)
        hdr[hn++] = ' ';
    snprintf(path, sizeof path, "%s/model.safetensors", d);
    f = fopen(path, "wb");
    uint64_t hl = hn;
    fwrite(&hl, 8, 1, f);
    fwrite(hdr, 1, hn, f);
    for (int i = 0; i < n; i++)
        for (int64_t k = 0; k < numel(&t[i]); k++) {
            float v = value(i, k, t[i].ndim == 1);
            fwrite(&v, 4, 1, f);
        }
    fclose(f);
    free(hdr);
    /* tokenizer.json: 256 byte tokens, merges "h e", "l l", "he ll", then 2 specials */
    snprintf(path, sizeof path, "%s/tokenizer.json", d);
    f = fopen(path, "w");
    fprintf(f, "{\"version\": \"1.0\", \"added_tokens\": [{\"id\": 256, \"content\": \"<s>\", \"special\": true}, "
               "{\"id\": 257, \"content\": \"</s>\", \"special\": true}], \"normalizer\": null, "
               "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, "
               "\"use_regex\": true}, \"post_processor\": null, \"decoder\": {\"type\": \"ByteLevel\"}, "
               "\"model\": {\"type\": \"BPE\", \"vocab\": {");
    for (int b = 0; b < 256; b++) {
        char c[4];
        byte_char(b, c);
        if (c[0] == '"' || c[0] == '\\')
            fprintf(f, "\"\\%s\": %d, ", c, b);
        else
            fprintf(f, "\"%s\": %d, ", c, b);
    }
    fprintf(f, "\"he\": 258, \"ll\": 259}, \"merges\": [\"h e\", \"l l\"]}}");
    fclose(f);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", d);
    f = fopen(path, "w");
    fprintf(f, "{\"add_bos_token\": false, \"chat_template\": \"{{ messages }}\"}");
    fclose(f);
}

static int run(const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s quantize %s 2>%s/err.txt", getenv("TXC_BIN") ? getenv("TXC_BIN") : "build/txc",
             args, dir);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* the logits of 6 tokens; weights: where they live (TXC_WEIGHTS_DEFAULT: the copy), *repacked (or NULL): the
 * bytes repacked at load */
static float *logits_in(const char *model, txc_weights_mode weights, size_t *repacked, int64_t *n)
{
    txc_model *m;
    txc_model_options o = {.weights = weights};
    if (txc_model_load(model, &o, &m) != TXC_OK)
        fail_msg("load %s: %s", model, txc_last_error());
    if (repacked)
        *repacked = txc_model_weights_info(m).repacked_bytes;
    txc_env *env = txc_model_env(m);
    int mark = txc_env_scope_begin(env);
    txc_tensor *ids = txc_zeros(env, 2, (int64_t[]){1, 6}, TXC_I64);
    int64_t *p = txc_tensor_data_ptr(ids);
    for (int i = 0; i < 6; i++)
        p[i] = (i * 37 + 11) % V;
    txc_tensor *lg = txc_model_forward(m, ids, NULL, NULL, txc_arange(env, 0, 6, 1, TXC_I64), 0);
    if (!lg)
        fail_msg("forward %s: %s", model, txc_last_error());
    *n = txc_tensor_numel(lg);
    float *out = malloc((size_t)*n * 4);
    assert_int_equal(txc_tensor_copy_to_f32(lg, out, *n), TXC_OK);
    txc_env_scope_end(env, mark);
    txc_model_free(m);
    return out;
}

static float *logits(const char *model, int64_t *n) { return logits_in(model, TXC_WEIGHTS_DEFAULT, NULL, n); }

static double rel_l2(const float *a, const float *b, int64_t n)
{
    double se = 0, sr = 0;
    for (int64_t i = 0; i < n; i++)
        se += (double)(a[i] - b[i]) * (a[i] - b[i]), sr += (double)a[i] * a[i];
    return sqrt(se / sr);
}

/* Q4_0 / Q8_0 weights of 8 rows or more are repacked at load in the copy (ops/quant_repack.c), not under
 * --mmap nor with TXC_QUANT_REPACK=0 (ggml's layout: the same bits as the mmap); the repacked kernels'
 * float32 order differs from the row layout's only in rounding (relative L2 <= 1e-5). */
static void check_repacked(const char *gg)
{
    int64_t n1, n2, n3;
    size_t r1, r2, r3;
    float *copy = logits_in(gg, TXC_WEIGHTS_COPY, &r1, &n1), *map = logits_in(gg, TXC_WEIGHTS_MMAP, &r2, &n2);
    setenv("TXC_QUANT_REPACK", "0", 1);
    float *plain = logits_in(gg, TXC_WEIGHTS_COPY, &r3, &n3);
    unsetenv("TXC_QUANT_REPACK");
    assert_true(r1 > 0);
    assert_int_equal(r2, 0);
    assert_int_equal(r3, 0);
    assert_int_equal(n1, n2);
    assert_int_equal(n1, n3);
    assert_memory_equal(map, plain, (size_t)n1 * 4);
    double rel = rel_l2(copy, map, n1);
    if (!(rel <= 1e-5))
        fail_msg("%s: repacked logits' relative L2 distance to the row layout's %.3g > 1e-5", gg, rel);
    free(copy), free(map), free(plain);
}

static const txc_gguf_value *kv(const txc_gguf *g, const char *k)
{
    const txc_gguf_value *v = txc_gguf_find(g, k);
    if (!v)
        fail_msg("key %s missing", k);
    return v;
}

static void check_type(const char *type, txc_dtype want, double max_rel)
{
    char gg[700], args[1600];
    snprintf(gg, sizeof gg, "%s/m.%s.gguf", dir, type);
    snprintf(args, sizeof args, "%s/hf %s --type %s", dir, gg, type);
    assert_int_equal(run(args), 0);
    txc_gguf *g;
    if (txc_gguf_open(gg, &g) != TXC_OK)
        fail_msg("open %s: %s", gg, txc_last_error());
    assert_int_equal(kv(g, "llama.block_count")->type, TXC_GGUF_UINT32);
    assert_int_equal(kv(g, "llama.block_count")->v.u, L);
    assert_int_equal(kv(g, "llama.attention.head_count_kv")->v.u, NKV);
    assert_int_equal(kv(g, "tokenizer.ggml.tokens")->v.arr.n, V);
    assert_int_equal(kv(g, "tokenizer.ggml.merges")->v.arr.n, 2);
    assert_int_equal(kv(g, "tokenizer.ggml.bos_token_id")->v.u, 256);
    assert_false(kv(g, "tokenizer.ggml.add_bos_token")->v.b);
    /* every tensor: the expected bytes */
    tdesc t[64];
    int n = list_tensors(t);
    assert_int_equal(txc_gguf_tensor_count(g), n);
    float *w = malloc(V * H * 4), *perm = malloc(V * H * 4);
    void *q = malloc(V * H * 4);
    for (int i = 0; i < n; i++) {
        int64_t ne = numel(&t[i]);
        for (int64_t k = 0; k < ne; k++)
            w[k] = value(i, k, t[i].ndim == 1);
        const char *nm = t[i].name;
        bool isq = strstr(nm, "q_proj"), isk = strstr(nm, "k_proj");
        const float *src = w;
        if (isq || isk) { /* convert_hf_to_gguf's LlamaModel.permute */
            int64_t heads = isq ? NH : NKV, rows = t[i].shape[0], d = rows / heads;
            for (int64_t h = 0; h < heads; h++)
                for (int64_t r = 0; r < d / 2; r++)
                    for (int j = 0; j < 2; j++)
                        memcpy(perm + (h * d + 2 * r + j) * H, w + (h * d + j * (d / 2) + r) * H, H * 4);
            src = perm;
        }
        char gn[128];
        int layer = -1, pos = 0;
        if (strcmp(nm, "model.embed_tokens.weight") == 0)
            snprintf(gn, sizeof gn, "token_embd.weight");
        else if (strcmp(nm, "model.norm.weight") == 0)
            snprintf(gn, sizeof gn, "output_norm.weight");
        else if (strcmp(nm, "lm_head.weight") == 0)
            snprintf(gn, sizeof gn, "output.weight");
        else if (sscanf(nm, "model.layers.%d.%n", &layer, &pos) == 1) {
            static const char *const map[][2] = {
                {"input_layernorm.weight", "attn_norm.weight"}, {"self_attn.q_proj.weight", "attn_q.weight"},
                {"self_attn.k_proj.weight", "attn_k.weight"},   {"self_attn.v_proj.weight", "attn_v.weight"},
                {"self_attn.o_proj.weight", "attn_output.weight"}, {"post_attention_layernorm.weight", "ffn_norm.weight"},
                {"mlp.gate_proj.weight", "ffn_gate.weight"},    {"mlp.up_proj.weight", "ffn_up.weight"},
                {"mlp.down_proj.weight", "ffn_down.weight"}};
            for (int k = 0; k < 9; k++)
                if (strcmp(nm + pos, map[k][0]) == 0)
                    snprintf(gn, sizeof gn, "blk.%d.%s", layer, map[k][1]);
        }
        const txc_gguf_tensor *gt = txc_gguf_find_tensor(g, gn);
        assert_non_null(gt);
        txc_dtype dt = t[i].ndim == 1 ? TXC_F32 : want;
        if (dt == TXC_Q4_K && t[i].shape[1] % 256)
            dt = TXC_Q5_0; /* llama-quantize's fallback */
        assert_int_equal(gt->ggml_type, txc_dtype_to_ggml(dt));
        size_t nb;
        assert_true(txc_dtype_nbytes(dt, ne, &nb));
        assert_int_equal(gt->nbytes, nb);
        assert_int_equal(txc_quant_quantize(dt, src, q, ne), TXC_OK);
        if (memcmp(q, gt->data, nb) != 0) {
            for (size_t z = 0; z < nb; z++) if (((unsigned char *)q)[z] != ((const unsigned char *)gt->data)[z]) { fprintf(stderr, "byte %zu of %zu (%s %s)\n", z, nb, gt->name, nm); break; }
            fail_msg("%s: tensor %s differs from txc_quant_quantize's bytes", type, gt->name);
        }
    }
    free(w), free(perm), free(q);
    txc_gguf_close(g);
    /* the logits */
    char hf[700];
    snprintf(hf, sizeof hf, "%s/hf", dir);
    int64_t n1, n2;
    float *a = logits(hf, &n1), *b = logits(gg, &n2);
    assert_int_equal(n1, n2);
    double se = 0, sr = 0;
    for (int64_t i = 0; i < n1; i++)
        se += (double)(a[i] - b[i]) * (a[i] - b[i]), sr += (double)a[i] * a[i];
    double rel = sqrt(se / sr);
    if (want == TXC_Q4_0 || want == TXC_Q8_0)
        check_repacked(gg);
    if (max_rel == 0)
        assert_memory_equal(a, b, (size_t)n1 * 4);
    else if (!(rel <= max_rel))
        fail_msg("%s: logits' relative L2 error %.4f > %.2f", type, rel, max_rel);
    free(a), free(b);
}

static void test_types(void **state)
{
    (void)state;
    check_type("f32", TXC_F32, 0);
    check_type("q8_0", TXC_Q8_0, 0.03);
    check_type("q4_0", TXC_Q4_0, 0.25);
    check_type("q4_k", TXC_Q4_K, 0.25);
}

/* convert_dtype (--dtype) on a GGUF of block-quantized weights: every 2-D weight is dequantized
 * once to that dtype (float32: txc_quant_dequantize's values of the file's blocks, q/k rows put
 * back), not left quantized; the model runs. */
static void test_convert_dtype(void **state)
{
    (void)state;
    char gg[700];
    snprintf(gg, sizeof gg, "%s/m.q8_0.gguf", dir); /* written by test_types */
    txc_gguf *g;
    if (txc_gguf_open(gg, &g) != TXC_OK)
        fail_msg("open %s: %s", gg, txc_last_error());
    txc_dtype want[] = {TXC_F32, TXC_BF16};
    for (int k = 0; k < 2; k++) {
        txc_model_options o = {.convert_dtype = true, .dtype = want[k]};
        txc_model *m;
        if (txc_model_load(gg, &o, &m) != TXC_OK)
            fail_msg("load %s: %s", gg, txc_last_error());
        int n2d = 0;
        for (int i = 0; i < txc_model_num_parameters(m); i++) {
            txc_tensor *t = txc_model_parameter(m, i);
            if (txc_tensor_ndim(t) != 2)
                continue;
            n2d++;
            if (txc_tensor_dtype(t) != want[k])
                fail_msg("%s is %s, not %s", txc_model_parameter_name(m, i), txc_dtype_name(txc_tensor_dtype(t)),
                         txc_dtype_name(want[k]));
        }
        assert_int_equal(n2d, 2 + 7 * L);
        if (want[k] == TXC_F32) { /* the values: the blocks dequantized (the embedding, the down projection) */
            static const char *const names[][2] = {{"model.embed_tokens.weight", "token_embd.weight"},
                                                   {"model.layers.1.mlp.down_proj.weight", "blk.1.ffn_down.weight"}};
            for (int j = 0; j < 2; j++) {
                const txc_gguf_tensor *gt = txc_gguf_find_tensor(g, names[j][1]);
                assert_non_null(gt);
                float *d = malloc((size_t)gt->numel * 4);
                assert_int_equal(txc_quant_dequantize(TXC_Q8_0, gt->data, d, gt->numel), TXC_OK);
                txc_tensor *p = NULL;
                for (int i = 0; i < txc_model_num_parameters(m); i++)
                    if (strcmp(txc_model_parameter_name(m, i), names[j][0]) == 0)
                        p = txc_model_parameter(m, i);
                assert_non_null(p);
                assert_memory_equal(txc_tensor_data_ptr(p), d, (size_t)gt->numel * 4);
                free(d);
            }
        }
        txc_model_free(m);
    }
    txc_gguf_close(g);
}

static void test_bad_calls(void **state)
{
    (void)state;
    char args[1200], path[600];
    snprintf(args, sizeof args, "%s/hf %s/x.gguf --type q3_k", dir, dir);
    assert_int_equal(run(args), 2);
    snprintf(args, sizeof args, "%s/nothing %s/x.gguf --type q8_0", dir, dir);
    assert_int_equal(run(args), 2);
    snprintf(path, sizeof path, "%s/err.txt", dir);
    char *err = tu_read_file(path, NULL);
    assert_non_null(strstr(err, "txc: "));
    assert_null(strchr(strchr(err, '\n') + 1, '\n')); /* one line */
    free(err);
    /* an unsupported model_type */
    snprintf(path, sizeof path, "%s/hf/config.json", dir);
    char *cfg = tu_read_file(path, NULL);
    char *p = strstr(cfg, "\"llama\"");
    memcpy(p, "\"gpt2\" ", 7);
    tu_write_file(path, cfg, strlen(cfg));
    snprintf(args, sizeof args, "%s/hf %s/x.gguf --type q8_0", dir, dir);
    assert_int_equal(run(args), 2);
    snprintf(path, sizeof path, "%s/err.txt", dir);
    char *e2 = tu_read_file(path, NULL);
    assert_non_null(strstr(e2, "model_type"));
    free(e2), free(cfg);
}

int main(void)
{
    dir = tu_mkdtemp();
    char hf[600];
    snprintf(hf, sizeof hf, "%s/hf", dir);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", hf);
    if (system(cmd) != 0)
        return 1;
    write_folder(hf);
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_types), cmocka_unit_test(test_convert_dtype),
                                       cmocka_unit_test(test_bad_calls)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tu_rm_rf(dir);
    return rc;
}
