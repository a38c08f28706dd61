/*
 * txc quantize DIR OUT.gguf --type q8_0|q4_0|q4_1|q5_0|q5_1|q4_k|q5_k|q6_k|f16|bf16|f32
 *
 * A Hugging Face folder (config.json, model.safetensors in f32/f16/bf16,
 * tokenizer.json, tokenizer_config.json) to one GGUF file, with the
 * metadata llama.cpp's convert_hf_to_gguf.py writes (LlamaModel /
 * Qwen2Model set_gguf_parameters, _set_vocab_gpt2) and the weights
 * quantized by ggml's reference quantizers (txc/quant.h), as
 * `convert_hf_to_gguf.py --outtype f32` then `llama-quantize` would:
 *   - every 2-D weight in the chosen type (token_embd and output too; llama-
 *     quantize's mixes, e.g. Q6_K for output.weight, are not reproduced);
 *     a row length the type's block does not divide falls back as
 *     llama-quantize does: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, and a
 *     row the 32-element blocks do not divide to F16;
 *   - 1-D tensors (norms, biases) in F32;
 *   - model_type llama: the q/k projections' rows permuted for llama.cpp's
 *     rotary layout (LlamaModel.permute), rope_scaling llama3 written as the
 *     rope_freqs.weight tensor (LlamaModel.generate_extra_tensors).
 * Architectures: llama (Llama, SmolLM, Mistral-style configs) and qwen2.
 * Tokenizers (src/tools/quantize_vocab.c): byte-level BPE
 * (tokenizer.ggml.model "gpt2"), the pre-tokenizer named from
 * tokenizer.json's (gpt-2, smollm, llama-bpe, qwen2); SentencePiece-style
 * BPE ("llama": tokens, scores, token types). Exit 2 with one line for
 * anything else.
 */
#include "tools/quantize_cmd.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"
#include "tools/quantize_vocab.h"
#include "txc/dtype.h"
#include "txc/gguf.h"
#include "txc/gguf_write.h"
#include "txc/hf_config.h"
#include "txc/quant.h"
#include "txc/safetensors.h"
#include "txc/threads.h"

#define EXIT_ERROR 2

/* llama.cpp's LlamaFileType (llama.h llama_ftype) for general.file_type */
static const struct {
    const char *name;
    txc_dtype dt;
    uint32_t ftype;
} TYPES[] = {
    {"f32", TXC_F32, 0},   {"f16", TXC_F16, 1},   {"bf16", TXC_BF16, 32}, {"q8_0", TXC_Q8_0, 7},
    {"q4_0", TXC_Q4_0, 2}, {"q4_1", TXC_Q4_1, 3}, {"q5_0", TXC_Q5_0, 8},  {"q5_1", TXC_Q5_1, 9},
    {"q4_k", TXC_Q4_K, 14}, {"q5_k", TXC_Q5_K, 16}, {"q6_k", TXC_Q6_K, 18},
};
#define N_TYPES (sizeof TYPES / sizeof TYPES[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: txc quantize DIR OUT.gguf --type TYPE [--threads N]\n"
               "\n"
               "A Hugging Face model folder (config.json, model.safetensors in f32/f16/bf16,\n"
               "tokenizer.json) to a GGUF file, as llama.cpp's convert_hf_to_gguf.py and\n"
               "llama-quantize write it: 2-D weights in TYPE, 1-D tensors in f32.\n"
               "  --type TYPE   q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, f16, bf16 or f32\n"
               "                (rows that TYPE's block does not divide fall back as llama-quantize:\n"
               "                q4_k -> q5_0, q5_k -> q5_1, q6_k -> q8_0, then f16)\n"
               "  --threads N   threads for the quantization (default: the CPUs)\n"
               "Architectures: llama, qwen2; tokenizers: byte-level BPE (tokenizer.ggml.model gpt2),\n"
               "SentencePiece-style BPE with byte fallback (llama: Llama 2, Mistral, stories260K).\n");
}

/* ---- tensor names (convert_hf_to_gguf's tensor map for llama/qwen2) ----------------------- */

static const struct { const char *hf, *gguf; } LAYER_NAMES[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};

/* false: not a tensor of the model (skipped: rotary inv_freq) */
static bool gguf_name(const char *hf, bool tied, char *out, size_t cap, bool *skip)
{
    *skip = false;
    if (strcmp(hf, "model.embed_tokens.weight") == 0)
        return snprintf(out, cap, "token_embd.weight") > 0;
    if (strcmp(hf, "model.norm.weight") == 0)
        return snprintf(out, cap, "output_norm.weight") > 0;
    if (strcmp(hf, "lm_head.weight") == 0) {
        *skip = tied; /* the tied copy is token_embd */
        return snprintf(out, cap, "output.weight") > 0;
    }
    unsigned long layer;
    int pos = 0;
    if (sscanf(hf, "model.layers.%lu.%n", &layer, &pos) == 1 && pos > 0) {
        const char *rest = hf + pos;
        if (strstr(rest, "rotary_emb.inv_freq")) {
            *skip = true;
            return true;
        }
        for (size_t i = 0; i < sizeof LAYER_NAMES / sizeof LAYER_NAMES[0]; i++)
            if (strcmp(rest, LAYER_NAMES[i].hf) == 0)
                return snprintf(out, cap, "blk.%lu.%s", layer, LAYER_NAMES[i].gguf) > 0;
    }
    return false;
}

/* ---- weights ------------------------------------------------------------------------------ */

/* LlamaModel.permute: per head, row 2i+j of the result is row j*d/2+i of the head */
static void permute_rows(const float *src, float *dst, int64_t rows, int64_t cols, int64_t n_head)
{
    int64_t d = rows / n_head, half = d / 2;
    for (int64_t h = 0; h < n_head; h++)
        for (int64_t i = 0; i < half; i++)
            for (int64_t j = 0; j < 2; j++)
                memcpy(dst + (h * d + 2 * i + j) * cols, src + (h * d + j * half + i) * cols, (size_t)cols * 4);
}

/* the type a (rows, K) weight gets: the chosen one, else llama-quantize's fallback */
static txc_dtype weight_type(txc_dtype want, int64_t K)
{
    if (K % txc_dtype_block_size(want) == 0)
        return want;
    txc_dtype fb = want == TXC_Q4_K ? TXC_Q5_0 : want == TXC_Q5_K ? TXC_Q5_1 : want == TXC_Q6_K ? TXC_Q8_0 : TXC_F16;
    return K % txc_dtype_block_size(fb) == 0 ? fb : TXC_F16;
}

typedef struct qtask {
    const float *src;
    void *dst;
    txc_dtype dt;
    int64_t K, rows_per;
    int64_t rows;
} qtask;

static void quant_rows_task(void *ctx, int64_t t)
{
    const qtask *q = ctx;
    int64_t r0 = t * q->rows_per, r1 = r0 + q->rows_per < q->rows ? r0 + q->rows_per : q->rows;
    if (r0 < r1)
        txc_quant_quantize(q->dt, q->src + r0 * q->K, (char *)q->dst + (size_t)r0 * txc_dtype_row_bytes(q->dt, q->K),
                           (r1 - r0) * q->K);
}

/* llama3 rope_freqs (convert_hf_to_gguf LlamaModel.generate_extra_tensors) */
static void llama3_rope_freqs(const txc_hf_config *c, float *out, int64_t n)
{
    double base = c->rope_theta, factor = c->rope_factor > 0 ? c->rope_factor : 8.0;
    double lo = c->low_freq_factor > 0 ? c->low_freq_factor : 1.0, hi = c->high_freq_factor > 0 ? c->high_freq_factor : 4.0;
    double old = c->original_max_position_embeddings > 0 ? (double)c->original_max_position_embeddings : 8192.0;
    double lo_wl = old / lo, hi_wl = old / hi;
    for (int64_t i = 0; i < n; i++) {
        float f = (float)(1.0 / pow(base, (double)(float)(2.0 * (double)i / (double)(2 * n))));
        double wl = 2 * M_PI / f;
        if (wl < hi_wl)
            out[i] = 1.0f;
        else if (wl > lo_wl)
            out[i] = (float)factor;
        else {
            double smooth = (old / wl - lo) / (hi - lo);
            out[i] = (float)(1 / ((1 - smooth) / factor + smooth));
        }
    }
}

typedef struct item {
    const txc_st_tensor *t; /* NULL: rope_freqs */
    char name[128];
    txc_dtype dt;
} item;

static txc_status convert(const char *dir, const char *out, txc_dtype want, uint32_t ftype)
{
    txc_hf_config *c = calloc(1, sizeof *c);
    if (!c)
        return txc_error(TXC_ERR_NOMEM, "quantize: out of memory");
    txc_safetensors *st = NULL;
    txc_gguf_writer *w = NULL;
    item *items = NULL;
    float *f32 = NULL, *perm = NULL;
    void *qbuf = NULL;
    quantize_vocab v = {0};
    txc_status s = txc_hf_config_load(dir, c);
    if (s)
        goto done;
    bool llama = strcmp(c->model_type, "llama") == 0, qwen2 = strcmp(c->model_type, "qwen2") == 0;
    if (!llama && !qwen2) {
        s = txc_error(TXC_ERR_UNSUPPORTED, "quantize: model_type '%s' is not converted (supported: llama, qwen2)",
                      c->model_type);
        goto done;
    }
    if (c->has_rope_scaling && strcmp(c->rope_scaling_type, "llama3") != 0) {
        s = txc_error(TXC_ERR_UNSUPPORTED, "quantize: rope_scaling type '%s' is not converted (supported: llama3)",
                      c->rope_scaling_type);
        goto done;
    }
    if ((s = quantize_vocab_load(dir, c, &v)) || (s = txc_safetensors_open(dir, &st)))
        goto done;
    const char *arch = llama ? "llama" : "qwen2";
    if (!(w = txc_gguf_writer_new())) {
        s = txc_last_status();
        goto done;
    }
    char key[128];
#define K(suffix) (snprintf(key, sizeof key, "%s." suffix, arch), key)
    const char *name = strrchr(dir, '/');
    name = name && name[1] ? name + 1 : dir;
    s = txc_gguf_w_str(w, "general.architecture", arch);
    if (!s) s = txc_gguf_w_str(w, "general.name", name);
    if (!s) s = txc_gguf_w_u32(w, K("block_count"), (uint32_t)c->num_hidden_layers);
    if (!s) s = txc_gguf_w_u32(w, K("context_length"), (uint32_t)c->max_position_embeddings);
    if (!s) s = txc_gguf_w_u32(w, K("embedding_length"), (uint32_t)c->hidden_size);
    if (!s) s = txc_gguf_w_u32(w, K("feed_forward_length"), (uint32_t)c->intermediate_size);
    if (!s) s = txc_gguf_w_u32(w, K("attention.head_count"), (uint32_t)c->num_attention_heads);
    if (!s) s = txc_gguf_w_u32(w, K("attention.head_count_kv"), (uint32_t)c->num_key_value_heads);
    if (!s) s = txc_gguf_w_f32(w, K("rope.freq_base"), (float)c->rope_theta);
    if (!s) s = txc_gguf_w_f32(w, K("attention.layer_norm_rms_epsilon"), (float)c->rms_norm_eps);
    if (!s && c->head_dim != c->hidden_size / c->num_attention_heads) {
        s = txc_gguf_w_u32(w, K("attention.key_length"), (uint32_t)c->head_dim);
        if (!s) s = txc_gguf_w_u32(w, K("attention.value_length"), (uint32_t)c->head_dim);
    }
    if (!s && llama) {
        s = txc_gguf_w_u32(w, K("vocab_size"), (uint32_t)c->vocab_size);
        if (!s) s = txc_gguf_w_u32(w, K("rope.dimension_count"), (uint32_t)c->head_dim);
    }
    if (!s) s = txc_gguf_w_u32(w, "general.file_type", ftype);
    if (!s && txc_dtype_is_quantized(want)) s = txc_gguf_w_u32(w, "general.quantization_version", 2);
    if (!s) s = quantize_vocab_write(w, &v, c);
#undef K
    if (s)
        goto done;

    int n = txc_safetensors_count(st);
    if (!(items = calloc((size_t)n + 1, sizeof *items))) {
        s = txc_error(TXC_ERR_NOMEM, "quantize: out of memory");
        goto done;
    }
    int n_items = 0;
    int64_t max_numel = 0;
    for (int i = 0; i < n && !s; i++) {
        const txc_st_tensor *t = txc_safetensors_at(st, i);
        item *it = &items[n_items];
        bool skip;
        if (!gguf_name(t->name, c->tie_word_embeddings, it->name, sizeof it->name, &skip)) {
            s = txc_error(TXC_ERR_UNSUPPORTED, "quantize: tensor '%s' is not one of a %s model's", t->name, arch);
            break;
        }
        if (skip)
            continue;
        if (!txc_dtype_is_float(t->dtype) || t->ndim < 1 || t->ndim > 2) {
            s = txc_error(TXC_ERR_UNSUPPORTED, "quantize: tensor '%s' is %s with %d dims (expected 1-D or 2-D "
                                               "float32/float16/bfloat16)", t->name, txc_dtype_name(t->dtype), t->ndim);
            break;
        }
        it->t = t;
        it->dt = t->ndim == 1 ? TXC_F32 : weight_type(want, t->shape[1]);
        int64_t numel = t->ndim == 1 ? t->shape[0] : t->shape[0] * t->shape[1];
        max_numel = numel > max_numel ? numel : max_numel;
        int64_t ne[2] = {t->shape[t->ndim - 1], t->ndim == 2 ? t->shape[0] : 1};
        s = txc_gguf_w_tensor(w, it->name, (uint32_t)txc_dtype_to_ggml(it->dt), t->ndim, ne);
        n_items++;
    }
    int64_t n_freqs = c->head_dim / 2;
    if (!s && llama && c->has_rope_scaling) {
        item *it = &items[n_items++];
        snprintf(it->name, sizeof it->name, "rope_freqs.weight");
        it->dt = TXC_F32;
        s = txc_gguf_w_tensor(w, it->name, 0, 1, &n_freqs);
        max_numel = n_freqs > max_numel ? n_freqs : max_numel;
    }
    if (s || (s = txc_gguf_writer_open(w, out)))
        goto done;
    f32 = malloc((size_t)max_numel * 4);
    perm = malloc((size_t)max_numel * 4);
    qbuf = malloc((size_t)max_numel * 4);
    if (!f32 || !perm || !qbuf) {
        s = txc_error(TXC_ERR_NOMEM, "quantize: out of memory (%lld-element buffers)", (long long)max_numel);
        goto done;
    }
    for (int i = 0; i < n_items && !s; i++) {
        item *it = &items[i];
        const txc_st_tensor *t = it->t;
        if (!t) {
            llama3_rope_freqs(c, f32, n_freqs);
            s = txc_gguf_writer_data(w, f32, (size_t)n_freqs * 4);
            continue;
        }
        int64_t rows = t->ndim == 2 ? t->shape[0] : 1, K = t->shape[t->ndim - 1];
        txc_dtype_convert(t->dtype, t->data, TXC_F32, f32, (size_t)(rows * K));
        const float *src = f32;
        bool q = strstr(t->name, "self_attn.q_proj.weight") != NULL, k = strstr(t->name, "self_attn.k_proj.weight") != NULL;
        if (llama && (q || k)) {
            int64_t heads = q ? c->num_attention_heads : c->num_key_value_heads;
            if (rows % (2 * heads)) {
                s = txc_error(TXC_ERR_FORMAT, "quantize: '%s' has %lld rows, not a multiple of 2 x %lld heads",
                              t->name, (long long)rows, (long long)heads);
                break;
            }
            permute_rows(f32, perm, rows, K, heads);
            src = perm;
        }
        size_t bytes = txc_gguf_w_tensor_bytes(w, i);
        if (txc_dtype_is_quantized(it->dt)) {
            int threads = txc_threads_get();
            qtask qt = {src, qbuf, it->dt, K, (rows + threads * 4 - 1) / (threads * 4), rows};
            txc_parallel_for((rows + qt.rows_per - 1) / qt.rows_per, quant_rows_task, &qt);
        } else {
            txc_dtype_convert(TXC_F32, src, it->dt, qbuf, (size_t)(rows * K));
        }
        s = txc_gguf_writer_data(w, qbuf, bytes);
    }
    if (!s)
        s = txc_gguf_writer_close(w);
done:
    txc_gguf_writer_free(w);
    txc_safetensors_close(st);
    quantize_vocab_free(&v);
    free(items), free(f32), free(perm), free(qbuf), free(c);
    return s;
}

int txc_cmd_quantize(int argc, char **argv)
{
    static const struct option opts[] = {
        {"type", required_argument, 0, 't'}, {"threads", required_argument, 0, 'j'}, {"help", no_argument, 0, 'h'}, {0}};
    const char *type = NULL;
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 't': type = optarg; break;
        case 'j': {
            int64_t th;
            if (!txc_cli_parse_threads(optarg, &th))
                return EXIT_ERROR;
            if (txc_threads_set((int)th) != TXC_OK)
                return txc_cli_fail("--threads");
            break;
        }
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return EXIT_ERROR;
        }
    }
    if (argc - optind != 2 || !type) {
        fprintf(stderr, "txc quantize: give DIR, OUT.gguf and --type (see txc quantize --help)\n");
        return EXIT_ERROR;
    }
    size_t ti = 0;
    for (; ti < N_TYPES; ti++) {
        const char *a = TYPES[ti].name, *b = type;
        while (*a && (*b == *a || (*b >= 'A' && *b <= 'Z' && *b + 32 == *a)))
            a++, b++;
        if (!*a && !*b)
            break;
    }
    if (ti == N_TYPES) {
        fprintf(stderr, "txc quantize: --type '%s' is not one of q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, "
                        "f16, bf16, f32\n", type);
        return EXIT_ERROR;
    }
    double t0 = txc_cli_now_ms();
    if (convert(argv[optind], argv[optind + 1], TYPES[ti].dt, TYPES[ti].ftype) != TXC_OK)
        return txc_cli_fail("quantize");
    fprintf(stderr, "txc quantize: wrote %s (%s) in %.1f s\n", argv[optind + 1], TYPES[ti].name,
            (txc_cli_now_ms() - t0) / 1000.0);
    return 0;
}
