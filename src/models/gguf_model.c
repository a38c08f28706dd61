/*
 * A model from a GGUF file: the metadata as the config.json transformers
 * would have (the keys of llama.cpp's llama-arch.cpp LLM_KV_*, as
 * convert_hf_to_gguf.py writes them from config.json) and the tensors under
 * their Hugging Face names (llama-arch.cpp's LLM_TENSOR_NAMES, reversed),
 * with what the converter changed undone:
 *   - llama: the rows of q_proj and k_proj (weights and biases) were
 *     permuted by LlamaModel.permute for ggml's rotary layout (adjacent
 *     pairs; transformers rotates the two halves of each head): the rows
 *     are put back, whole rows at a time, which holds for a quantized type
 *     too (its blocks run along a row);
 *   - gemma, gemma2: every *norm.weight was stored + 1 (GemmaModel's
 *     modify_tensors; llama.cpp multiplies by it): 1 is subtracted in
 *     float32;
 *   - gpt2: the Conv1D weights were transposed to (out, in): the model uses
 *     them as linear weights (txc_model.linear_layout).
 * See txc_model_load (include/txc/model.h).
 */
#include "models/model_impl.h"
#include "txc/gguf.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUPPORTED_ARCHS "llama, qwen2, qwen3, gemma, gemma2, phi3, gpt2"

typedef struct gguf_arch {
    const char *arch, *model_type;
    bool permute_qk, norm_plus_one;
} gguf_arch;

static const gguf_arch ARCHS[] = {
    {"llama", "llama", true, false},   {"qwen2", "qwen2", false, false}, {"qwen3", "qwen3", false, false},
    {"gemma", "gemma", false, true},   {"gemma2", "gemma2", false, true}, {"phi3", "phi3", false, false},
    {"gpt2", "gpt2", false, false},
};

static const gguf_arch *arch_of(const txc_gguf *g, char *name, size_t cap)
{
    txc_gguf_str s;
    bool bad = false;
    if (!txc_gguf_get_str(g, "general.architecture", &s, &bad)) {
        if (!bad)
            txc_error(TXC_ERR_FORMAT, "%s: no general.architecture in the metadata", txc_gguf_path(g));
        return NULL;
    }
    snprintf(name, cap, "%.*s", (int)(s.len < cap ? s.len : cap - 1), s.data);
    for (size_t i = 0; i < sizeof ARCHS / sizeof *ARCHS; i++)
        if (s.len == strlen(ARCHS[i].arch) && memcmp(s.data, ARCHS[i].arch, s.len) == 0)
            return &ARCHS[i];
    txc_error(TXC_ERR_UNSUPPORTED, "%s: general.architecture '%s' is not supported (supported: " SUPPORTED_ARCHS ")",
              txc_gguf_path(g), name);
    return NULL;
}

/* ---- the config -------------------------------------------------------------------- */

typedef struct cfg_ctx {
    const txc_gguf *g;
    const char *arch;
    cJSON *root;
    bool bad;
} cfg_ctx;

static bool get_i(cfg_ctx *c, const char *suffix, int64_t *v)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", c->arch, suffix);
    return txc_gguf_get_i64(c->g, key, v, &c->bad);
}

/* A number of the metadata; NaN or an infinity is an error (cJSON would write it as null, which
 * the config would read as absent: the default in place of the file's value). */
static bool get_f(cfg_ctx *c, const char *suffix, double *v)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", c->arch, suffix);
    if (!txc_gguf_get_f64(c->g, key, v, &c->bad))
        return false;
    if (!isfinite(*v)) {
        if (!c->bad)
            txc_error(TXC_ERR_FORMAT, "%s: key '%s' is %g, expected a finite number", txc_gguf_path(c->g), key, *v);
        c->bad = true;
        return false;
    }
    return true;
}

/* `json` = the metadata's `suffix` (an integer), if present. */
static void put_i(cfg_ctx *c, const char *json, const char *suffix)
{
    int64_t v;
    if (get_i(c, suffix, &v))
        cJSON_AddNumberToObject(c->root, json, (double)v);
}

static void put_f(cfg_ctx *c, const char *json, const char *suffix)
{
    double v;
    if (get_f(c, suffix, &v))
        cJSON_AddNumberToObject(c->root, json, v);
}

static bool has_tensor(const txc_gguf *g, const char *name) { return txc_gguf_find_tensor(g, name) != NULL; }

static txc_status missing(const txc_gguf *g, const char *key)
{
    return txc_error(TXC_ERR_FORMAT, "%s: the metadata has no %s", txc_gguf_path(g), key);
}

/* A float32 tensor of per-dimension RoPE factors as a JSON list (NULL + error otherwise). */
static cJSON *factor_list(cfg_ctx *c, const txc_gguf_tensor *t)
{
    if (t->ggml_type != 0 || t->n_dims != 1 || t->numel > TXC_MAX_ROPE_FACTORS) {
        txc_error(TXC_ERR_UNSUPPORTED, "%s: tensor '%s' (RoPE factors) is %s with %lld elements (float32, at most %d, "
                                       "is supported)", txc_gguf_path(c->g), t->name, txc_ggml_type_name(t->ggml_type),
                  (long long)t->numel, TXC_MAX_ROPE_FACTORS);
        return NULL;
    }
    cJSON *l = cJSON_CreateArray();
    for (int64_t i = 0; l && i < t->numel; i++) {
        float f;
        memcpy(&f, (const char *)t->data + 4 * i, 4);
        cJSON_AddItemToArray(l, cJSON_CreateNumber(f));
    }
    return l;
}

/* RoPE factors stored as tensors: llama3's rope_freqs.weight (convert_hf_to_gguf.py's
 * LlamaModel.generate_extra_tensors; llama.cpp divides the frequencies by them) and phi3's
 * rope_factors_short/long.weight (longrope). Both become a longrope rope_scaling, whose
 * inv_freq is 1 / (factor * base^(2i/d)): for llama3 the same frequencies as transformers'
 * _compute_llama3_parameters up to float rounding (inv_freq / factor per dimension), with
 * one list for every length and attention_factor 1. */
static txc_status rope_factors(cfg_ctx *c, const gguf_arch *a)
{
    const txc_gguf_tensor *freqs = txc_gguf_find_tensor(c->g, "rope_freqs.weight");
    const txc_gguf_tensor *lo = txc_gguf_find_tensor(c->g, "rope_factors_short.weight");
    const txc_gguf_tensor *hi = txc_gguf_find_tensor(c->g, "rope_factors_long.weight");
    if (!freqs && !lo && !hi)
        return TXC_OK;
    const char *path = txc_gguf_path(c->g);
    if (cJSON_GetObjectItem(c->root, "rope_scaling"))
        return txc_error(TXC_ERR_UNSUPPORTED, "%s: RoPE factor tensors together with %s.rope.scaling.type are not "
                                              "supported", path, a->arch);
    if (!freqs && (!lo || !hi))
        return txc_error(TXC_ERR_FORMAT, "%s: tensor '%s' without '%s'", path, lo ? lo->name : hi->name,
                         lo ? "rope_factors_long.weight" : "rope_factors_short.weight");
    cJSON *short_f = factor_list(c, freqs ? freqs : lo);
    cJSON *long_f = short_f ? factor_list(c, freqs ? freqs : hi) : NULL;
    if (!short_f || !long_f) {
        cJSON_Delete(short_f);
        return txc_last_status() ? txc_last_status() : txc_error(TXC_ERR_NOMEM, "out of memory (GGUF config)");
    }
    cJSON *rs = cJSON_AddObjectToObject(c->root, "rope_scaling");
    cJSON_AddStringToObject(rs, "rope_type", "longrope");
    cJSON_AddItemToObject(rs, "short_factor", short_f);
    cJSON_AddItemToObject(rs, "long_factor", long_f);
    int64_t orig = 0;
    double af = 1.0;
    if (freqs) {
        get_i(c, "context_length", &orig);
    } else {
        if (!get_i(c, "rope.scaling.original_context_length", &orig))
            get_i(c, "context_length", &orig);
        if (!get_f(c, "rope.scaling.attn_factor", &af))
            af = 0; /* longrope's own default from the factor */
    }
    if (orig > 0)
        cJSON_AddNumberToObject(rs, "original_max_position_embeddings", (double)orig);
    if (af > 0)
        cJSON_AddNumberToObject(rs, "attention_factor", af);
    return c->bad ? txc_last_status() : TXC_OK;
}

txc_status txc_gguf_model_config(const txc_gguf *g, txc_hf_config *out)
{
    char arch_name[64];
    const gguf_arch *a = arch_of(g, arch_name, sizeof arch_name);
    if (!a)
        return txc_last_status();
    const char *path = txc_gguf_path(g);
    cfg_ctx c = {g, a->arch, cJSON_CreateObject(), false};
    if (!c.root)
        return txc_error(TXC_ERR_NOMEM, "out of memory (GGUF config)");
    cJSON *r = c.root;
    cJSON_AddStringToObject(r, "model_type", a->model_type);
    static const char *const required[][2] = {
        {"hidden_size", "embedding_length"}, {"num_hidden_layers", "block_count"},
        {"num_attention_heads", "attention.head_count"}, {"intermediate_size", "feed_forward_length"},
    };
    txc_status s = TXC_OK;
    for (size_t i = 0; i < 4 && !s; i++) {
        int64_t v;
        char key[128];
        snprintf(key, sizeof key, "%s.%s", a->arch, required[i][1]);
        if (get_i(&c, required[i][1], &v))
            cJSON_AddNumberToObject(r, required[i][0], (double)v);
        else if (!c.bad)
            s = missing(g, key);
    }
    /* vocab_size: <arch>.vocab_size, else the tokenizer's token count, else the embedding's rows */
    int64_t vocab = 0;
    const txc_gguf_value *toks = txc_gguf_find(g, "tokenizer.ggml.tokens");
    const txc_gguf_tensor *emb = txc_gguf_find_tensor(g, "token_embd.weight");
    if (!get_i(&c, "vocab_size", &vocab) && !c.bad) {
        if (emb && emb->n_dims == 2)
            vocab = emb->shape[0];
        else if (toks && toks->type == TXC_GGUF_ARRAY)
            vocab = (int64_t)toks->v.arr.n;
    }
    if (vocab > 0)
        cJSON_AddNumberToObject(r, "vocab_size", (double)vocab);
    put_i(&c, "num_key_value_heads", "attention.head_count_kv");
    /* head_dim: attention.key_length, else n_embd / n_head as llama.cpp (llama_hparams n_embd_head_k;
     * not the config class's default, e.g. GemmaConfig's 256) */
    int64_t key_len = 0, n_embd = 0, nh = 0;
    if (get_i(&c, "attention.key_length", &key_len))
        cJSON_AddNumberToObject(r, "head_dim", (double)key_len);
    else if (!c.bad && get_i(&c, "embedding_length", &n_embd) && get_i(&c, "attention.head_count", &nh) && nh > 0 &&
             n_embd > 0 && n_embd % nh == 0)
        cJSON_AddNumberToObject(r, "head_dim", (double)(n_embd / nh));
    put_i(&c, "max_position_embeddings", "context_length");
    put_f(&c, "rope_theta", "rope.freq_base");
    put_f(&c, "sliding_window", "attention.sliding_window");
    if (strcmp(a->arch, "gpt2") == 0) {
        put_f(&c, "layer_norm_epsilon", "attention.layer_norm_epsilon");
        cJSON_AddStringToObject(r, "activation_function", "gelu_new");
    } else {
        put_f(&c, "rms_norm_eps", "attention.layer_norm_rms_epsilon");
    }
    cJSON_AddBoolToObject(r, "tie_word_embeddings", !has_tensor(g, "output.weight"));
    if (strcmp(a->arch, "llama") == 0) {
        cJSON_AddBoolToObject(r, "attention_bias", has_tensor(g, "blk.0.attn_q.bias"));
        cJSON_AddBoolToObject(r, "mlp_bias", has_tensor(g, "blk.0.ffn_up.bias"));
    } else if (strcmp(a->arch, "qwen3") == 0) {
        cJSON_AddBoolToObject(r, "attention_bias", has_tensor(g, "blk.0.attn_q.bias"));
    } else if (strcmp(a->arch, "gemma2") == 0) {
        put_f(&c, "attn_logit_softcapping", "attn_logit_softcapping");
        put_f(&c, "final_logit_softcapping", "final_logit_softcapping");
        /* llama.cpp scales by head_dim^-0.5 (Gemma2 2B/9B's query_pre_attn_scalar) */
        int64_t kl;
        if (get_i(&c, "attention.key_length", &kl))
            cJSON_AddNumberToObject(r, "query_pre_attn_scalar", (double)kl);
    }
    int64_t rope_dims, head_dim = 0, hidden = 0, heads = 0;
    get_i(&c, "embedding_length", &hidden);
    get_i(&c, "attention.head_count", &heads);
    if (!get_i(&c, "attention.key_length", &head_dim) && heads > 0)
        head_dim = hidden / heads;
    if (!s && get_i(&c, "rope.dimension_count", &rope_dims) && head_dim > 0 && rope_dims != head_dim) {
        if (strcmp(a->arch, "phi3") == 0)
            cJSON_AddNumberToObject(r, "partial_rotary_factor", (double)rope_dims / (double)head_dim);
        else
            s = txc_error(TXC_ERR_UNSUPPORTED, "%s: %s.rope.dimension_count %" PRId64 " is not the head size %" PRId64
                                               " (partial rotary is supported for phi3 only)", path, a->arch,
                          rope_dims, head_dim);
    }
    /* rope scaling (LLM_KV_ROPE_SCALING_*) */
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", a->arch);
    txc_gguf_str st;
    if (!s && txc_gguf_get_str(g, key, &st, &c.bad) && !(st.len == 4 && memcmp(st.data, "none", 4) == 0)) {
        cJSON *rs = cJSON_AddObjectToObject(r, "rope_scaling");
        double f;
        if (st.len == 6 && memcmp(st.data, "linear", 6) == 0) {
            cJSON_AddStringToObject(rs, "rope_type", "linear");
        } else if (st.len == 4 && memcmp(st.data, "yarn", 4) == 0) {
            cJSON_AddStringToObject(rs, "rope_type", "yarn");
            int64_t orig;
            if (get_i(&c, "rope.scaling.original_context_length", &orig))
                cJSON_AddNumberToObject(rs, "original_max_position_embeddings", (double)orig);
            if (get_f(&c, "rope.scaling.yarn_beta_fast", &f))
                cJSON_AddNumberToObject(rs, "beta_fast", f);
            if (get_f(&c, "rope.scaling.yarn_beta_slow", &f))
                cJSON_AddNumberToObject(rs, "beta_slow", f);
        } else {
            s = txc_error(TXC_ERR_UNSUPPORTED, "%s: %s '%.*s' is not supported (supported: none, linear, yarn)", path,
                          key, (int)(st.len > 32 ? 32 : st.len), st.data);
        }
        if (!s && get_f(&c, "rope.scaling.factor", &f))
            cJSON_AddNumberToObject(rs, "factor", f);
    }
    if (!s)
        s = rope_factors(&c, a);
    /* the special ids must name a token (the tokenizer checks bos and unk the same way) */
    int64_t n_tok = toks && toks->type == TXC_GGUF_ARRAY ? (int64_t)toks->v.arr.n : vocab;
    static const char *const special_ids[] = {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                                              "tokenizer.ggml.padding_token_id"};
    for (size_t i = 0; !s && !c.bad && n_tok > 0 && i < sizeof special_ids / sizeof *special_ids; i++) {
        int64_t v;
        if (txc_gguf_get_i64(g, special_ids[i], &v, &c.bad) && v >= n_tok)
            s = txc_error(TXC_ERR_FORMAT, "%s: %s %" PRId64 " is not a token id (%" PRId64 " tokens)", path,
                          special_ids[i], v, n_tok);
    }
    int64_t id;
    if (txc_gguf_get_i64(g, "tokenizer.ggml.bos_token_id", &id, &c.bad))
        cJSON_AddNumberToObject(r, "bos_token_id", (double)id);
    /* eos_token_id: eos, and the end-of-turn token where it differs (llama.cpp stops at either) */
    int64_t eot;
    bool has_eos = txc_gguf_get_i64(g, "tokenizer.ggml.eos_token_id", &id, &c.bad);
    bool has_eot = txc_gguf_get_i64(g, "tokenizer.ggml.eot_token_id", &eot, &c.bad);
    if (has_eos || has_eot) {
        cJSON *e = cJSON_AddArrayToObject(r, "eos_token_id");
        if (has_eos)
            cJSON_AddItemToArray(e, cJSON_CreateNumber((double)id));
        if (has_eot && !(has_eos && eot == id))
            cJSON_AddItemToArray(e, cJSON_CreateNumber((double)eot));
    }
    if (txc_gguf_get_i64(g, "tokenizer.ggml.padding_token_id", &id, &c.bad))
        cJSON_AddNumberToObject(r, "pad_token_id", (double)id);
    if (!s && c.bad)
        s = txc_last_status();
    if (!s) {
        char *text = cJSON_PrintUnformatted(r);
        char origin[512];
        snprintf(origin, sizeof origin, "%s (metadata)", path);
        s = text ? txc_hf_config_parse(text, strlen(text), origin, out)
                 : txc_error(TXC_ERR_NOMEM, "out of memory (GGUF config)");
        cJSON_free(text);
    }
    cJSON_Delete(r);
    return s;
}

/* ---- the tensors ----------------------------------------------------------------------- */

typedef struct name_map {
    const char *gguf, *hf;
} name_map;

static const name_map LAYER_NAMES[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},  {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.weight", "self_attn.k_proj.weight"},  {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.weight", "self_attn.v_proj.weight"},  {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.weight", "self_attn.o_proj.weight"}, {"attn_output.bias", "self_attn.o_proj.bias"},
    {"attn_qkv.weight", "self_attn.qkv_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"}, {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"attn_post_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_post_norm.weight", "post_feedforward_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},   {"ffn_gate.bias", "mlp.gate_proj.bias"},
    {"ffn_up.weight", "mlp.up_proj.weight"},       {"ffn_up.bias", "mlp.up_proj.bias"},
    {"ffn_down.weight", "mlp.down_proj.weight"},   {"ffn_down.bias", "mlp.down_proj.bias"},
};

static const name_map GPT2_LAYER_NAMES[] = {
    {"attn_norm.weight", "ln_1.weight"},        {"attn_norm.bias", "ln_1.bias"},
    {"attn_qkv.weight", "attn.c_attn.weight"},  {"attn_qkv.bias", "attn.c_attn.bias"},
    {"attn_output.weight", "attn.c_proj.weight"}, {"attn_output.bias", "attn.c_proj.bias"},
    {"ffn_norm.weight", "ln_2.weight"},         {"ffn_norm.bias", "ln_2.bias"},
    {"ffn_up.weight", "mlp.c_fc.weight"},       {"ffn_up.bias", "mlp.c_fc.bias"},
    {"ffn_down.weight", "mlp.c_proj.weight"},   {"ffn_down.bias", "mlp.c_proj.bias"},
};

/* The Hugging Face name of GGUF tensor `name` into hf (false: not a tensor the models use). */
static bool hf_name(const gguf_arch *a, const char *name, char *hf, size_t cap)
{
    bool gpt2 = strcmp(a->arch, "gpt2") == 0;
    static const name_map GLOBAL[] = {
        {"token_embd.weight", "model.embed_tokens.weight"}, {"output_norm.weight", "model.norm.weight"},
        {"output.weight", "lm_head.weight"},
    };
    static const name_map GPT2_GLOBAL[] = {
        {"token_embd.weight", "transformer.wte.weight"}, {"position_embd.weight", "transformer.wpe.weight"},
        {"output_norm.weight", "transformer.ln_f.weight"}, {"output_norm.bias", "transformer.ln_f.bias"},
        {"output.weight", "lm_head.weight"},
    };
    const name_map *gm = gpt2 ? GPT2_GLOBAL : GLOBAL;
    size_t ng = gpt2 ? sizeof GPT2_GLOBAL / sizeof *GPT2_GLOBAL : sizeof GLOBAL / sizeof *GLOBAL;
    for (size_t i = 0; i < ng; i++)
        if (strcmp(name, gm[i].gguf) == 0) {
            snprintf(hf, cap, "%s", gm[i].hf);
            return true;
        }
    /* blk.N.: N in decimal, at most 9 digits (a layer index past the model's is not one of its tensors) */
    if (strncmp(name, "blk.", 4) != 0)
        return false;
    unsigned long layer = 0;
    int used = 0;
    while (name[4 + used] >= '0' && name[4 + used] <= '9' && used < 9)
        layer = layer * 10 + (unsigned long)(name[4 + used++] - '0');
    if (used == 0 || name[4 + used] != '.')
        return false;
    const char *rest = name + 4 + used + 1;
    const name_map *lm = gpt2 ? GPT2_LAYER_NAMES : LAYER_NAMES;
    size_t nl = gpt2 ? sizeof GPT2_LAYER_NAMES / sizeof *GPT2_LAYER_NAMES : sizeof LAYER_NAMES / sizeof *LAYER_NAMES;
    for (size_t i = 0; i < nl; i++) {
        if (strcmp(rest, lm[i].gguf) != 0)
            continue;
        const char *h = lm[i].hf;
        if (strcmp(a->arch, "gemma2") == 0 && strcmp(rest, "ffn_norm.weight") == 0)
            h = "pre_feedforward_layernorm.weight";
        if (strcmp(a->arch, "phi3") == 0 && strcmp(rest, "ffn_up.weight") == 0)
            h = "mlp.gate_up_proj.weight"; /* phi3's fused [gate; up] */
        snprintf(hf, cap, "%s.%lu.%s", gpt2 ? "transformer.h" : "model.layers", layer, h);
        return true;
    }
    return false;
}

/* The block (layer) of a tensor named blk.N.*: N (INT64_MAX when it has more
 * digits than int64), -1 for another name. */
static int64_t block_of(const char *name)
{
    if (strncmp(name, "blk.", 4) != 0 || name[4] < '0' || name[4] > '9')
        return -1;
    int64_t n = 0;
    const char *p = name + 4;
    for (; *p >= '0' && *p <= '9'; p++)
        n = n > (INT64_MAX - 9) / 10 ? INT64_MAX : n * 10 + (*p - '0');
    return *p == '.' ? n : -1;
}

/* A rewritten copy of t's bytes (the caller fills it) as a table entry. */
static txc_status rewritten(txc_safetensors *st, const txc_st_tensor *t, txc_dtype dtype, size_t nbytes,
                            void **data)
{
    txc_storage *s = txc_storage_new(TXC_CPU, nbytes ? nbytes : 1);
    if (!s)
        return txc_last_status();
    *data = txc_storage_data(s);
    txc_st_tensor c = *t;
    c.storage = s;
    c.byte_offset = 0;
    c.dtype = dtype;
    c.nbytes = nbytes;
    c.data = *data;
    c.aligned = true;
    txc_status rc = txc_safetensors_add_owned(st, &c, s);
    txc_storage_release(s);
    return rc;
}

/* LlamaModel.permute undone: GGUF row h*d + 2i + j holds HF row h*d + j*d/2 + i. */
static void unpermute_rows(const uint8_t *src, uint8_t *dst, int64_t rows, size_t row_bytes, int64_t n_head)
{
    int64_t d = rows / n_head, half = d / 2;
    for (int64_t h = 0; h < n_head; h++)
        for (int64_t i = 0; i < half; i++)
            for (int64_t j = 0; j < 2; j++)
                memcpy(dst + (size_t)(h * d + j * half + i) * row_bytes, src + (size_t)(h * d + 2 * i + j) * row_bytes,
                       row_bytes);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static txc_status add_tensor(txc_safetensors *st, const gguf_arch *a, const txc_hf_config *c, const txc_gguf *g,
                             const txc_gguf_tensor *gt, const char *hf)
{
    txc_dtype dt;
    if (!txc_gguf_type_to_dtype(gt->ggml_type, &dt))
        return txc_error(TXC_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s, which txc does not compute with "
                                              "(supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)", txc_gguf_path(g), gt->name,
                         txc_ggml_type_name(gt->ggml_type));
    txc_st_tensor t = {0};
    t.name = hf;
    t.dtype = dt;
    t.ndim = gt->n_dims;
    memcpy(t.shape, gt->shape, sizeof t.shape);
    t.storage = txc_gguf_storage(g);
    t.byte_offset = gt->byte_offset;
    t.nbytes = gt->nbytes;
    t.data = gt->data;
    t.aligned = gt->byte_offset % (txc_dtype_is_quantized(dt) ? 2 : txc_dtype_size(dt)) == 0;
    bool q = ends_with(hf, "self_attn.q_proj.weight") || ends_with(hf, "self_attn.q_proj.bias");
    bool k = ends_with(hf, "self_attn.k_proj.weight") || ends_with(hf, "self_attn.k_proj.bias");
    if (a->permute_qk && (q || k)) {
        int64_t n_head = q ? c->num_attention_heads : c->num_key_value_heads;
        int64_t rows = gt->shape[0];
        if (n_head <= 0 || rows <= 0 || rows % (2 * n_head))
            return txc_error(TXC_ERR_FORMAT, "%s: tensor '%s' has %" PRId64 " rows, not a multiple of 2 x %" PRId64
                                             " heads", txc_gguf_path(g), gt->name, rows, n_head);
        if (gt->nbytes == 0 || gt->nbytes % (size_t)rows) /* an empty tensor: nothing to move (and no loop over
                                                              * its rows, however many it claims) */
            return gt->nbytes == 0 ? txc_safetensors_add(st, &t)
                                   : txc_error(TXC_ERR_FORMAT, "%s: tensor '%s': %zu bytes do not split into %" PRId64
                                                               " rows", txc_gguf_path(g), gt->name, gt->nbytes, rows);
        void *dst = NULL;
        txc_status s = rewritten(st, &t, dt, gt->nbytes, &dst);
        if (!s)
            unpermute_rows(gt->data, dst, rows, gt->nbytes / (size_t)rows, n_head);
        return s;
    }
    if (a->norm_plus_one && ends_with(hf, "norm.weight")) {
        if (!txc_dtype_is_float(dt)) /* the - 1 is done in float32 (a block type or an integer was left unread) */
            return txc_error(TXC_ERR_UNSUPPORTED, "%s: tensor '%s' (a %s norm, stored + 1) has type %s (expected F32, "
                                                  "F16 or BF16)", txc_gguf_path(g), gt->name, a->arch,
                             txc_ggml_type_name(gt->ggml_type));
        void *dst = NULL;
        txc_status s = rewritten(st, &t, TXC_F32, (size_t)gt->numel * 4, &dst);
        if (!s) {
            float *w = dst;
            txc_dtype_convert(dt, gt->data, TXC_F32, w, (size_t)gt->numel);
            for (int64_t i = 0; i < gt->numel; i++)
                w[i] -= 1.0f;
        }
        return s;
    }
    return txc_safetensors_add(st, &t);
}

txc_status txc_gguf_model_table(const txc_gguf *g, const txc_hf_config *c, txc_safetensors **out)
{
    *out = NULL;
    char arch_name[64];
    const gguf_arch *a = arch_of(g, arch_name, sizeof arch_name);
    if (!a)
        return txc_last_status();
    txc_safetensors *st;
    txc_status s = txc_safetensors_new_table(txc_gguf_path(g), txc_gguf_storage(g), &st);
    for (int64_t i = 0; !s && i < txc_gguf_tensor_count(g); i++) {
        const txc_gguf_tensor *gt = txc_gguf_tensor_at(g, i);
        int64_t layer = block_of(gt->name);
        if (layer >= c->num_hidden_layers) { /* (llama.cpp: "wrong number of tensors") */
            s = txc_error(TXC_ERR_FORMAT, "%s: tensor '%.96s' is in block %s%" PRId64 ", past %s.block_count %" PRId64
                                          " (blocks 0..%" PRId64 ")", txc_gguf_path(g), gt->name,
                          layer == INT64_MAX ? ">= " : "", layer, arch_name, c->num_hidden_layers,
                          c->num_hidden_layers - 1);
            break;
        }
        char hf[160];
        if (hf_name(a, gt->name, hf, sizeof hf))
            s = add_tensor(st, a, c, g, gt, hf);
    }
    if (!s)
        s = txc_safetensors_finish(st);
    if (s) {
        txc_safetensors_close(st);
        return s;
    }
    *out = st;
    return TXC_OK;
}

txc_status txc_model_config_load(const char *path, txc_hf_config *out)
{
    if (!path || !out)
        return txc_error(TXC_ERR_INVALID, "txc_model_config_load: NULL argument");
    if (!txc_gguf_is_path(path))
        return txc_hf_config_load(path, out);
    txc_gguf *g = NULL;
    txc_status s = txc_gguf_open(path, &g);
    if (s == TXC_OK)
        s = txc_gguf_model_config(g, out);
    txc_gguf_close(g);
    return s;
}
