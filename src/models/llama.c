/*
 * The decoder-only families of transformers written once against the ops
 * API (so the same code runs eager and traced): LlamaForCausalLM
 * (models/llama/modeling_llama.py) and the models that are the same graph
 * with switches — Mistral (sliding window), Qwen2 (q/k/v biases, sliding
 * window from max_window_layers), Qwen3 (q_norm/k_norm), Gemma ((1 + w)
 * RMSNorm, sqrt(hidden) embedding scale, GeGLU), Gemma2 (+ sandwich norms,
 * logit soft-capping, alternating sliding window, query_pre_attn_scalar),
 * Phi-3 (fused qkv_proj / gate_up_proj, partial rotary). The loader and the
 * parameter set serve every architecture (gpt2.c too); tensor names come
 * from one table per architecture. See include/txc/model.h.
 */
#include "models/model_impl.h"
#include "txc/quant.h"
#include "txc/gguf.h"
#include "txc/shard.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the tables (transformers' state_dict names) ----------------------------- */

static txc_tensor *decoder_forward(txc_model *m, txc_tensor *const *params, txc_tensor *input_ids,
                                   txc_tensor *position_ids, txc_kv_cache *cache, txc_tensor *cache_position,
                                   int64_t logits_to_keep, txc_tensor *logits_index);

static const arch_param llama_global[] = {
    {G_EMBED, "model.embed_tokens.weight", WHEN_ALWAYS, false},
    {G_NORM, "model.norm.weight", WHEN_ALWAYS, false},
    {G_LM_HEAD, "lm_head.weight", WHEN_UNTIED, false},
};

#define ATTN_QKVO(when_qkv, when_o)                                                                           \
    {L_Q, "self_attn.q_proj.weight", WHEN_ALWAYS, false}, {L_K, "self_attn.k_proj.weight", WHEN_ALWAYS, false}, \
        {L_V, "self_attn.v_proj.weight", WHEN_ALWAYS, false}, {L_O, "self_attn.o_proj.weight", WHEN_ALWAYS, false}, \
        {L_Q_BIAS, "self_attn.q_proj.bias", when_qkv, false}, {L_K_BIAS, "self_attn.k_proj.bias", when_qkv, false}, \
        {L_V_BIAS, "self_attn.v_proj.bias", when_qkv, false}, {L_O_BIAS, "self_attn.o_proj.bias", when_o, false}
#define MLP_GATED(when)                                                                                        \
    {L_GATE, "mlp.gate_proj.weight", WHEN_ALWAYS, false}, {L_UP, "mlp.up_proj.weight", WHEN_ALWAYS, false},     \
        {L_DOWN, "mlp.down_proj.weight", WHEN_ALWAYS, false}, {L_GATE_BIAS, "mlp.gate_proj.bias", when, false},  \
        {L_UP_BIAS, "mlp.up_proj.bias", when, false}, {L_DOWN_BIAS, "mlp.down_proj.bias", when, false}
/* never loaded (the config flag does not apply to this architecture) */
#define WHEN_NEVER 255

static const arch_param llama_layer[] = {
    {L_ATTN_NORM, "input_layernorm.weight", WHEN_ALWAYS, false},
    ATTN_QKVO(WHEN_ATTN_BIAS, WHEN_ATTN_BIAS),
    {L_MLP_NORM, "post_attention_layernorm.weight", WHEN_ALWAYS, false},
    MLP_GATED(WHEN_MLP_BIAS),
};
static const arch_param mistral_layer[] = {
    {L_ATTN_NORM, "input_layernorm.weight", WHEN_ALWAYS, false},
    ATTN_QKVO(WHEN_NEVER, WHEN_NEVER),
    {L_MLP_NORM, "post_attention_layernorm.weight", WHEN_ALWAYS, false},
    MLP_GATED(WHEN_NEVER),
};
static const arch_param qwen2_layer[] = {
    {L_ATTN_NORM, "input_layernorm.weight", WHEN_ALWAYS, false},
    ATTN_QKVO(WHEN_ALWAYS, WHEN_NEVER),
    {L_MLP_NORM, "post_attention_layernorm.weight", WHEN_ALWAYS, false},
    MLP_GATED(WHEN_NEVER),
};
static const arch_param qwen3_layer[] = {
    {L_ATTN_NORM, "input_layernorm.weight", WHEN_ALWAYS, false},
    ATTN_QKVO(WHEN_ATTN_BIAS, WHEN_ATTN_BIAS),
    {L_Q_NORM, "self_attn.q_norm.weight", WHEN_ALWAYS, false},
    {L_K_NORM, "self_attn.k_norm.weight", WHEN_ALWAYS, false},
    {L_MLP_NORM, "post_attention_layernorm.weight", WHEN_ALWAYS, false},
    MLP_GATED(WHEN_NEVER),
};
static const arch_param gemma_layer[] = {
    {L_ATTN_NORM, "input_layernorm.weight", WHEN_ALWAYS, false},
    ATTN_QKVO(WHEN_ATTN_BIAS, WHEN_ATTN_BIAS),
    {L_MLP_NORM, "post_attention_layernorm.weight", WHEN_ALWAYS, false},
    MLP_GATED(WHEN_NEVER),
};
static const arch_param gemma2_layer[] = {
    {L_ATTN_NORM, "input_layernorm.weight", WHEN_ALWAYS, false},
    ATTN_QKVO(WHEN_ATTN_BIAS, WHEN_ATTN_BIAS),
    {L_ATTN_OUT_NORM, "post_attention_layernorm.weight", WHEN_ALWAYS, false},
    {L_MLP_NORM, "pre_feedforward_layernorm.weight", WHEN_ALWAYS, false},
    MLP_GATED(WHEN_NEVER),
    {L_MLP_OUT_NORM, "post_feedforward_layernorm.weight", WHEN_ALWAYS, false},
};
static const arch_param phi3_layer[] = {
    {L_ATTN_NORM, "input_layernorm.weight", WHEN_ALWAYS, false},
    {L_QKV, "self_attn.qkv_proj.weight", WHEN_ALWAYS, false},
    {L_O, "self_attn.o_proj.weight", WHEN_ALWAYS, false},
    {L_MLP_NORM, "post_attention_layernorm.weight", WHEN_ALWAYS, false},
    {L_GATE_UP, "mlp.gate_up_proj.weight", WHEN_ALWAYS, false},
    {L_DOWN, "mlp.down_proj.weight", WHEN_ALWAYS, false},
};

#define N(a) (int)(sizeof a / sizeof *a)
#define DECODER(type, layer_table, norm_kind_, scale, partial)                                                 \
    {type, "model.layers", llama_global, N(llama_global), layer_table, N(layer_table), norm_kind_, true, scale,  \
     partial, decoder_forward}

static const txc_arch decoder_archs[] = {
    DECODER("llama", llama_layer, NORM_RMS, false, false),
    DECODER("mistral", mistral_layer, NORM_RMS, false, false),
    DECODER("qwen2", qwen2_layer, NORM_RMS, false, false),
    DECODER("qwen3", qwen3_layer, NORM_RMS, false, false),
    DECODER("gemma", gemma_layer, NORM_RMS_PLUS_ONE, true, false),
    DECODER("gemma2", gemma2_layer, NORM_RMS_PLUS_ONE, true, false),
    DECODER("phi3", phi3_layer, NORM_RMS, false, true),
};

/* x + bias (a NULL bias: x). */
static txc_tensor *add_bias(txc_tensor *x, txc_tensor *bias) { return bias ? txc_add(x, bias) : x; }

static const txc_arch *find_arch(const char *model_type)
{
    for (int i = 0; i < N(decoder_archs); i++)
        if (strcmp(decoder_archs[i].model_type, model_type) == 0)
            return &decoder_archs[i];
    if (strcmp(txc_arch_gpt2.model_type, model_type) == 0)
        return &txc_arch_gpt2;
    return NULL;
}

#define SUPPORTED_TYPES "llama, mistral, qwen2, qwen3, gemma, gemma2, phi3, gpt2"

/* ---- loading ------------------------------------------------------------------ */

static void shape_str(char *buf, size_t n, int ndim, const int64_t *shape)
{
    size_t off = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (off < n)
        snprintf(buf + off, n - off, "]");
}

/* `name`, or the same name without its first component (a checkpoint of
 * the base model: "layers.0..." for "model.layers.0...", "h.0..." for
 * "transformer.h.0...", as transformers loads them). */
static const txc_st_tensor *find_tensor(const txc_safetensors *st, const char *name)
{
    const txc_st_tensor *t = txc_safetensors_find(st, name);
    const char *dot = strchr(name, '.');
    if (!t && dot && (strncmp(name, "model.", 6) == 0 || strncmp(name, "transformer.", 12) == 0))
        t = txc_safetensors_find(st, dot + 1);
    return t;
}

/* --check-tensors on a quantized (rows, K) matrix: its rows dequantized
 * one at a time (the scales are what can be non-finite) and scanned as
 * float32; the first bad flat index, -1 when all are finite, -2 (error
 * set) when a row cannot be dequantized. */
static int64_t quant_first_nonfinite(const txc_st_tensor *t, int64_t *count, bool *is_nan)
{
    const int64_t rows = t->shape[0], K = t->shape[1];
    const size_t row_bytes = txc_dtype_row_bytes(t->dtype, K);
    float *buf = row_bytes ? malloc(sizeof(float) * (size_t)K) : NULL;
    if (!buf) {
        txc_error(TXC_ERR_NOMEM, "out of memory (check_tensors: a row of %lld)", (long long)K);
        return -2;
    }
    int64_t first = -1, bad = 0;
    bool nan = false;
    for (int64_t r = 0; r < rows; r++) {
        if (txc_quant_dequantize(t->dtype, (const unsigned char *)t->data + (size_t)r * row_bytes, buf, K) != TXC_OK) {
            free(buf);
            return -2;
        }
        int64_t n;
        bool rn;
        int64_t at = txc_weights_first_nonfinite(buf, TXC_F32, K, &n, &rn);
        if (at >= 0 && first < 0)
            first = r * K + at, nan = rn;
        bad += n;
    }
    free(buf);
    *count = bad;
    *is_nan = nan;
    return first;
}

/* Find `name`, check its shape against what config.json implies (`why`
 * names the config fields), and wrap it: in its file dtype, zero copy where
 * aligned (txc_model_options.convert_dtype: converted once to its dtype);
 * 1-d parameters (norms, biases) are always float32 (tiny, and read by
 * elementwise ops whose results must stay float32). */
static txc_status load_param_part(txc_model *m, const txc_safetensors *st, const char *name, int ndim,
                                  const int64_t *shape, const char *why, int split, const char *part,
                                  int64_t part_off, int64_t part_len, int *out);
static txc_status load_param(txc_model *m, const txc_safetensors *st, const char *name, int ndim,
                             const int64_t *shape, const char *why, int split, int *out)
{
    return load_param_part(m, st, name, ndim, shape, why, split, NULL, 0, 0, out);
}

/* load_param; with `part` (tensor parallelism over a fused weight, Phi-3's
 * qkv_proj / gate_up_proj, GPT-2's c_attn and its bias): this rank's share
 * of rows [part_off, part_off + part_len) (columns for TP_COLS: a Conv1D's
 * output features), a parameter named "<name>[<part>]". */
static txc_status load_param_part(txc_model *m, const txc_safetensors *st, const char *name, int ndim,
                                  const int64_t *shape, const char *why, int split, const char *part,
                                  int64_t part_off, int64_t part_len, int *out)
{
    *out = -1;
    const txc_st_tensor *t = find_tensor(st, name);
    if (!t)
        return txc_error(TXC_ERR_FORMAT, "%s: tensor '%s' is missing (expected by %s: %s)", m->wfile, name, m->cfile,
                         why);
    bool same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++)
        same = t->shape[i] == shape[i];
    if (!same) {
        char got[96], want[96];
        shape_str(got, sizeof got, t->ndim, t->shape);
        shape_str(want, sizeof want, ndim, shape);
        return txc_error(TXC_ERR_FORMAT, "%s: tensor '%s' has shape %s but %s implies %s (%s)", m->wfile, name, got,
                         m->cfile, want, why);
    }
    bool quant = txc_dtype_is_quantized(t->dtype); /* a GGUF matrix: used as stored (ops/quant_dot.c) */
    if (!txc_dtype_is_float(t->dtype) && !(quant && ndim == 2))
        return txc_error(TXC_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s (expected a float dtype)", m->wfile,
                         name, txc_dtype_name(t->dtype));
    int64_t numel = 1;
    for (int i = 0; i < t->ndim; i++)
        numel *= t->shape[i];
    if (m->check_tensors) {
        int64_t bad;
        bool nan;
        int64_t at = quant ? quant_first_nonfinite(t, &bad, &nan)
                           : txc_weights_first_nonfinite(t->data, t->dtype, numel, &bad, &nan);
        if (at == -2)
            return txc_last_status();
        if (at >= 0) {
            char idx[96];
            txc_weights_index_str(idx, sizeof idx, t->ndim, t->shape, at);
            return txc_error(TXC_ERR_FORMAT, "%s: tensor '%s' has %s at index %s (%lld non-finite values in all; "
                                             "check_tensors)",
                             m->wfile, name, nan ? "a NaN" : "an inf", idx, (long long)bad);
        }
    }
    txc_array *arr;
    /* a block-quantized weight with convert_dtype (--dtype): dequantized once to float32 (ggml's
     * dequantize_row_*, txc/quant.h; what transformers does with a GGUF's torch_dtype), then
     * converted as a float weight is */
    bool dequant = quant && m->convert_dtype;
    if (dequant && (part || split != TP_REPLICATED)) /* GGUF files are refused under --tp */
        return txc_error(TXC_ERR_INVALID, "%s: tensor '%s': a block-quantized weight cannot be split for "
                                          "tensor parallelism", m->wfile, name);
    if (dequant) {
        if ((arr = txc_array_new(txc_env_device(m->env), TXC_F32, t->ndim, t->shape)) &&
            txc_quant_dequantize(t->dtype, t->data, txc_array_data(arr), numel) != TXC_OK) {
            txc_array_release(arr);
            return txc_last_status();
        }
    } else if (part) { /* a block of a fused weight: this rank's share of it */
        txc_status ts = txc_tp_slice_part(m, t, part_off, part_len, split, &arr);
        if (ts)
            return ts;
        numel = numel / t->shape[split == TP_COLS] * (part_len / txc_tp_blocks(m, split));
    } else if (split != TP_REPLICATED) { /* tensor parallelism: this rank's slice (models/tp.c) */
        txc_status ts = txc_tp_slice(m, t, split, &arr);
        if (ts)
            return ts;
        numel /= txc_tp_blocks(m, split);
    } else if (t->aligned) { /* in place, zero copy */
        arr = txc_array_from_storage(t->storage, t->byte_offset, t->dtype, t->ndim, t->shape);
    } else if ((arr = txc_array_new(txc_env_device(m->env), t->dtype, t->ndim, t->shape))) {
        memcpy(txc_array_data(arr), t->data, t->nbytes); /* unaligned in the file: a copy */
    }
    if (!arr)
        return txc_last_status();
    txc_tensor *w = txc_tensor_wrap(m->env, arr);
    txc_array_release(arr);
    txc_dtype have = dequant ? TXC_F32 : t->dtype;
    txc_dtype want = ndim == 1 ? TXC_F32 : m->convert_dtype ? m->weights_dtype : t->dtype;
    if (w && have != want) { /* converted once */
        txc_tensor *c = txc_to_dtype(w, want), *orig = w;
        w = c;
        /* narrowed: did a finite value overflow to inf? */
        int64_t after = 0, before = 0;
        if (w && want != TXC_F32 && txc_weights_first_nonfinite(txc_tensor_data_ptr(w), want, numel, &after, NULL) >= 0)
            txc_weights_first_nonfinite(txc_tensor_data_ptr(orig), have, numel, &before, NULL);
        txc_tensor_release(orig);
        if (after > before) {
            if (m->check_tensors) {
                txc_tensor_release(w);
                return txc_error(TXC_ERR_FORMAT, "%s: tensor '%s': %lld values overflow %s to inf "
                                                 "in the conversion (check_tensors)",
                                 m->wfile, name, (long long)(after - before), txc_dtype_name(want));
            }
            if (m->weights.n_overflow_tensors++ == 0) {
                snprintf(m->weights.overflow_tensor, sizeof m->weights.overflow_tensor, "%s", name);
                m->weights.overflow_values = after - before;
            }
        }
    }
    if (!w)
        return txc_last_status();
    w->sharding = txc_tp_sharding(m, split, ndim);
    param *p = &m->params[m->n_params];
    if (part)
        snprintf(p->name, sizeof p->name, "%s[%s]", name, part);
    else
        snprintf(p->name, sizeof p->name, "%s", name);
    p->tensor = w;
    *out = m->n_params++;
    return TXC_OK;
}

static bool act_supported(const char *act)
{
    static const char *const ok[] = {"silu", "swish", "gelu", "gelu_pytorch_tanh", "gelu_new", "relu"};
    for (int i = 0; i < N(ok); i++)
        if (strcmp(act, ok[i]) == 0)
            return true;
    return false;
}

txc_tensor *txc_model_act(const txc_model *m, txc_tensor *x)
{
    const char *act = m->config.hidden_act;
    if (strcmp(act, "silu") == 0 || strcmp(act, "swish") == 0)
        return txc_silu(x);
    if (strcmp(act, "gelu") == 0)
        return txc_gelu(x, false);
    if (strcmp(act, "relu") == 0)
        return txc_relu(x);
    return txc_gelu(x, true); /* gelu_pytorch_tanh, gelu_new: the tanh approximation */
}

static txc_status check_config(const txc_hf_config *c, const txc_arch **arch)
{
    if (!(*arch = find_arch(c->model_type)))
        return txc_error(TXC_ERR_UNSUPPORTED, "config.json: model_type '%s' is not supported (supported: "
                                              SUPPORTED_TYPES ")", c->model_type);
    if (!act_supported(c->hidden_act))
        return txc_error(TXC_ERR_UNSUPPORTED, "config.json: hidden_act '%s' is not supported (supported: silu, "
                                              "gelu, gelu_pytorch_tanh, gelu_new, relu)", c->hidden_act);
    if (c->n_layer_types && c->layer_type_other[0])
        return txc_error(TXC_ERR_UNSUPPORTED, "config.json: layer_types entry '%s' is not supported (supported: "
                                              "full_attention, sliding_attention)", c->layer_type_other);
    if (c->use_bidirectional_attention)
        return txc_error(TXC_ERR_UNSUPPORTED, "config.json: use_bidirectional_attention true is not supported "
                                              "(a causal language model is)");
    if (c->add_cross_attention)
        return txc_error(TXC_ERR_UNSUPPORTED, "config.json: add_cross_attention true is not supported");
    if (c->head_dim % 2 && (*arch)->rope)
        return txc_error(TXC_ERR_FORMAT, "config.json: head_dim %lld must be even for RoPE", (long long)c->head_dim);
    return TXC_OK;
}

/* The shape of a role's tensor (Conv1D: transposed). */
static int role_shape(const txc_hf_config *c, int role, bool global, bool conv1d, int64_t *shape)
{
    int64_t H = c->hidden_size, V = c->vocab_size, I = c->intermediate_size, d = c->head_dim;
    int64_t q = c->num_attention_heads * d, kv = c->num_key_value_heads * d;
    int n = 1;
    if (global) {
        switch (role) {
        case G_EMBED: case G_LM_HEAD: shape[0] = V, shape[1] = H, n = 2; break;
        case G_POS_EMBED: shape[0] = c->max_position_embeddings, shape[1] = H, n = 2; break;
        default: shape[0] = H; break; /* norm, its bias */
        }
        return n;
    }
    switch (role) {
    case L_Q: shape[0] = q, shape[1] = H, n = 2; break;
    case L_K: case L_V: shape[0] = kv, shape[1] = H, n = 2; break;
    case L_QKV: shape[0] = q + 2 * kv, shape[1] = H, n = 2; break;
    case L_O: shape[0] = H, shape[1] = q, n = 2; break;
    case L_Q_BIAS: shape[0] = q; break;
    case L_K_BIAS: case L_V_BIAS: shape[0] = kv; break;
    case L_QKV_BIAS: shape[0] = q + 2 * kv; break;
    case L_Q_NORM: case L_K_NORM: shape[0] = d; break;
    case L_GATE: case L_UP: case L_FC: shape[0] = I, shape[1] = H, n = 2; break;
    case L_GATE_UP: shape[0] = 2 * I, shape[1] = H, n = 2; break;
    case L_DOWN: shape[0] = H, shape[1] = I, n = 2; break;
    case L_GATE_BIAS: case L_UP_BIAS: case L_FC_BIAS: shape[0] = I; break;
    default: shape[0] = H; break; /* norms, their biases, o/down biases */
    }
    if (conv1d && n == 2) {
        int64_t t = shape[0];
        shape[0] = shape[1];
        shape[1] = t;
    }
    return n;
}

static bool wanted(const txc_hf_config *c, uint8_t when)
{
    switch (when) {
    case WHEN_ALWAYS: return true;
    case WHEN_ATTN_BIAS: return c->attention_bias;
    case WHEN_MLP_BIAS: return c->mlp_bias;
    case WHEN_UNTIED: return !c->tie_word_embeddings;
    default: return false;
    }
}

/* The layers' tensors, in table order per layer. */
static txc_status load_layers(txc_model *m, const txc_safetensors *st)
{
    const txc_hf_config *c = &m->config;
    const txc_arch *a = m->arch;
    char why[200], name[160];
    int64_t shape[2];
    snprintf(why, sizeof why,
             "hidden_size %lld, intermediate_size %lld, num_attention_heads %lld, num_key_value_heads %lld, "
             "head_dim %lld, num_hidden_layers %lld",
             (long long)c->hidden_size, (long long)c->intermediate_size, (long long)c->num_attention_heads,
             (long long)c->num_key_value_heads, (long long)c->head_dim, (long long)c->num_hidden_layers);
    for (int64_t l = 0; l < c->num_hidden_layers; l++)
        for (int j = 0; j < a->n_layer; j++) {
            const arch_param *lp = &a->layer[j];
            if (!wanted(c, lp->when))
                continue;
            int n = role_shape(c, lp->role, false, lp->conv1d && !m->linear_layout, shape);
            snprintf(name, sizeof name, "%s.%lld.%s", a->layers, (long long)l, lp->name);
            txc_status s;
            /* a Conv1D weight is stored (in, out): its colwise split takes columns, its rowwise one rows */
            const bool conv1d = lp->conv1d && !m->linear_layout && n == 2;
            if (m->tp_size > 1 && (lp->role == L_QKV || lp->role == L_QKV_BIAS || lp->role == L_GATE_UP)) {
                /* fused: each block split alone (q|k|v, gate|up), one parameter each */
                int64_t q = c->num_attention_heads * c->head_dim, kv = c->num_key_value_heads * c->head_dim;
                int64_t I = c->intermediate_size;
                int f = lp->role == L_QKV ? 0 : lp->role == L_QKV_BIAS ? 1 : 2;
                static const char *const names[3][3] = {{"q", "k", "v"}, {"q", "k", "v"}, {"gate", "up", NULL}};
                static const int roles[3][3] = {{L_Q, L_K, L_V}, {L_Q_BIAS, L_K_BIAS, L_V_BIAS}, {L_GATE, L_UP, -1}};
                const int64_t len[3][3] = {{q, kv, kv}, {q, kv, kv}, {I, I, 0}};
                s = TXC_OK;
                int64_t off = 0;
                for (int k = 0; k < (f < 2 ? 3 : 2) && s == TXC_OK; off += len[f][k], k++) {
                    int split = txc_tp_split(m, roles[f][k], false);
                    s = load_param_part(m, st, name, n, shape, why, conv1d ? txc_tp_conv1d_split(split) : split,
                                        names[f][k], off, len[f][k], &m->layer[l][roles[f][k]]);
                }
            } else {
                int split = txc_tp_split(m, lp->role, false);
                s = load_param(m, st, name, n, shape, why, conv1d ? txc_tp_conv1d_split(split) : split,
                               &m->layer[l][lp->role]);
            }
            if (s)
                return s;
        }
    return TXC_OK;
}

/* The parameter set: the embeddings, the layers, then the rest of the
 * model-level table (final norm, lm_head when untied). */
static txc_status load_weights(txc_model *m, const txc_safetensors *st)
{
    const txc_hf_config *c = &m->config;
    const txc_arch *a = m->arch;
    char why[200], name[160];
    int64_t shape[2];
    txc_status s;
    for (int i = 0; i < G_COUNT; i++)
        m->g[i] = -1;
    for (int i = 0; i < a->n_global; i++) {
        const arch_param *p = &a->global[i];
        if (!wanted(c, p->when))
            continue;
        int n = role_shape(c, p->role, true, p->conv1d, shape);
        snprintf(why, sizeof why, "vocab_size %lld, hidden_size %lld%s", (long long)c->vocab_size,
                 (long long)c->hidden_size, p->role == G_LM_HEAD ? ", tie_word_embeddings false" : "");
        if ((s = load_param(m, st, p->name, n, shape, why, txc_tp_split(m, p->role, true), &m->g[p->role])))
            return s;
        if (p->role == G_EMBED && (s = load_layers(m, st)))
            return s;
    }
    if (c->tie_word_embeddings || m->g[G_LM_HEAD] < 0)
        m->g[G_LM_HEAD] = m->g[G_EMBED]; /* tied: the head is the embedding (a stored lm_head is ignored) */
    /* A deeper checkpoint than config.json says is a disagreement too. */
    snprintf(name, sizeof name, "%s.%lld.%s", a->layers, (long long)c->num_hidden_layers, a->layer[0].name);
    if (find_tensor(st, name))
        return txc_error(TXC_ERR_FORMAT, "%s: has tensor '%s' but %s says num_hidden_layers %lld", m->wfile, name,
                         m->cfile, (long long)c->num_hidden_layers);
    return TXC_OK;
}

/* Which layers slide, and over how many keys (transformers' layer_types
 * and each config class's rule). */
static void set_windows(txc_model *m)
{
    const txc_hf_config *c = &m->config;
    const char *t = c->model_type;
    for (int64_t l = 0; l < c->num_hidden_layers; l++) {
        bool slide = false;
        if (strcmp(t, "mistral") == 0 || strcmp(t, "phi3") == 0) {
            slide = true; /* every layer, when sliding_window is set */
        } else if (strcmp(t, "qwen2") == 0 || strcmp(t, "qwen3") == 0) {
            /* sliding_window counts only with use_sliding_window; layer_types,
             * else the layers from max_window_layers on */
            slide = c->use_sliding_window &&
                    (c->n_layer_types ? c->layer_types[l] == TXC_LAYER_SLIDING : l >= c->max_window_layers);
        } else if (strcmp(t, "gemma2") == 0) {
            slide = c->n_layer_types ? c->layer_types[l] == TXC_LAYER_SLIDING : (l + 1) % 2 != 0;
        }
        m->window[l] = slide ? c->sliding_window : 0;
    }
}

txc_status txc_model_load(const char *dir, const txc_model_options *opts, txc_model **out)
{
    *out = NULL;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    txc_model *m = calloc(1, sizeof *m);
    if (!m)
        return txc_error(TXC_ERR_NOMEM, "out of memory (model)");
    m->env = opts && opts->env ? opts->env : txc_env_active();
    if (opts && opts->convert_dtype) {
        if (opts->dtype != TXC_F32 && opts->dtype != TXC_BF16 && opts->dtype != TXC_F16) {
            free(m);
            return txc_error(TXC_ERR_INVALID, "model options: dtype %s is not a weights dtype (float32, bfloat16, "
                                              "float16)", txc_dtype_name(opts->dtype));
        }
        m->convert_dtype = true;
        m->weights_dtype = opts->dtype;
    }
    m->check_tensors = opts && opts->check_tensors;
    txc_weights_mode weights = opts ? opts->weights : TXC_WEIGHTS_DEFAULT;
    if (weights == TXC_WEIGHTS_DEFAULT)
        weights = TXC_WEIGHTS_DEFAULT_MODE;
    if (weights != TXC_WEIGHTS_MMAP && weights != TXC_WEIGHTS_COPY) {
        free(m);
        return txc_error(TXC_ERR_INVALID, "model options: weights mode %d is not DEFAULT, MMAP or COPY", (int)weights);
    }
    txc_status s;
    const txc_hf_config *c = &m->config;
    txc_safetensors *st = NULL;
    if (txc_gguf_is_path(dir)) { /* one GGUF file: config from its metadata, its tensors renamed */
        const char *base = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
        snprintf(m->wfile, sizeof m->wfile, "%s", base);
        snprintf(m->cfile, sizeof m->cfile, "its metadata");
        m->linear_layout = true;
        txc_gguf *g = NULL;
        s = txc_gguf_open(dir, &g);
        if (s == TXC_OK)
            s = txc_gguf_model_config(g, &m->config);
        if (s == TXC_OK)
            s = check_config(c, &m->arch);
        if (s == TXC_OK && opts && opts->tp_mesh && txc_mesh_axis_size(opts->tp_mesh, "tp") > 1)
            s = txc_error(TXC_ERR_UNSUPPORTED, "--tp: a GGUF model is not tensor-parallel (a safetensors folder is)");
        if (s == TXC_OK)
            s = txc_gguf_model_table(g, c, &st);
        txc_gguf_close(g); /* the table holds the mapping */
    } else {
        snprintf(m->wfile, sizeof m->wfile, "model.safetensors");
        snprintf(m->cfile, sizeof m->cfile, "config.json");
        s = txc_hf_config_load(dir, &m->config);
        if (s == TXC_OK)
            s = check_config(c, &m->arch);
        if (s == TXC_OK)
            s = txc_tp_setup(m, opts ? opts->tp_mesh : NULL);
        if (s == TXC_OK)
            s = txc_safetensors_open(dir, &st);
    }
    if (s == TXC_OK) {
        /* Each layer has one tensor at least: a layer count the file cannot
         * hold is a disagreement, reported before sizing anything by it.
         * (Any other shortfall, e.g. llama weights under model_type qwen2
         * with its q/k/v biases, is named by the first missing tensor.) */
        if (c->num_hidden_layers > txc_safetensors_count(st))
            s = txc_error(TXC_ERR_FORMAT, "%s: num_hidden_layers %lld, but %s has only %d tensors", m->cfile,
                          (long long)c->num_hidden_layers, m->wfile, txc_safetensors_count(st));
    }
    if (s == TXC_OK) {
        /* (+ 4 per layer: under --tp a fused qkv_proj and gate_up_proj load as five parameters, GPT-2's c_attn
         * and its bias as six) */
        size_t max_params = (size_t)m->arch->n_global + (size_t)c->num_hidden_layers * ((size_t)m->arch->n_layer + 4);
        m->params = calloc(max_params, sizeof *m->params);
        m->layer = malloc((size_t)c->num_hidden_layers * sizeof *m->layer);
        m->window = calloc((size_t)c->num_hidden_layers, sizeof *m->window);
        if (!m->params || !m->layer || !m->window)
            s = txc_error(TXC_ERR_NOMEM, "out of memory (parameters)");
        else
            memset(m->layer, 0xff, (size_t)c->num_hidden_layers * sizeof *m->layer); /* all -1 */
    }
    /* Parameters live outside any scope: the model owns them. */
    int open = m->env->n_scopes;
    m->env->n_scopes = 0;
    if (s == TXC_OK)
        s = load_weights(m, st);
    if (s == TXC_OK) /* before the close, so that the file's mapping goes with it */
        s = txc_model_place_weights(m, st, weights, !(opts && opts->no_hugepages));
    if (s == TXC_OK && m->arch->rope)
        s = txc_rope_init(&m->rope, c, m->env, m->arch->partial_rotary);
    if (s == TXC_OK && !(m->param_tensors = calloc((size_t)m->n_params + 1, sizeof *m->param_tensors)))
        s = txc_error(TXC_ERR_NOMEM, "out of memory (parameters)");
    for (int i = 0; s == TXC_OK && i < m->n_params; i++)
        m->param_tensors[i] = m->params[i].tensor;
    m->env->n_scopes = open;
    txc_safetensors_close(st); /* the tensors keep their mmap storages alive */
    if (s == TXC_OK) {
        txc_tp_localize(m);
        set_windows(m);
        /* Gemma2 scales by query_pre_attn_scalar^-0.5, the others by head_dim^-0.5 */
        double qs = c->query_pre_attn_scalar > 0 && strcmp(c->model_type, "gemma2") == 0 ? c->query_pre_attn_scalar
                                                                                            : (double)c->head_dim;
        m->attn_scale = 1.0 / sqrt(qs);
        if (strcmp(c->model_type, "gemma2") == 0) { /* the only one of these that soft-caps */
            m->attn_softcap = c->attn_logit_softcapping;
            m->final_softcap = c->final_logit_softcapping;
        }
        m->max_positions = m->rope.kind == ROPE_DYNAMIC ? INT64_MAX : c->max_position_embeddings;
    }
    if (s != TXC_OK) {
        txc_model_free(m);
        return s;
    }
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    m->weights.load_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    *out = m;
    return TXC_OK;
}

void txc_model_free(txc_model *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n_params; i++)
        txc_tensor_release(m->params[i].tensor);
    txc_rope_free(&m->rope);
    free(m->params);
    free(m->param_tensors);
    free(m->layer);
    free(m->window);
    free(m);
}

const txc_hf_config *txc_model_config(const txc_model *m) { return &m->config; }
txc_env *txc_model_env(const txc_model *m) { return m->env; }
int txc_model_num_parameters(const txc_model *m) { return m->n_params; }
const char *txc_model_parameter_name(const txc_model *m, int i) { return i >= 0 && i < m->n_params ? m->params[i].name : NULL; }
txc_tensor *txc_model_parameter(const txc_model *m, int i) { return i >= 0 && i < m->n_params ? m->params[i].tensor : NULL; }
txc_tensor *const *txc_model_parameters(const txc_model *m) { return m->param_tensors; }
int64_t txc_model_max_positions(const txc_model *m) { return m->max_positions; }
txc_tensor *txc_model_rope_inv_freq(const txc_model *m) { return m->rope.inv_freq; }
double txc_model_rope_attention_scaling(const txc_model *m) { return m->rope.inv_freq ? m->rope.attention_scaling : 1.0; }

int64_t txc_model_sliding_window(const txc_model *m, int64_t layer)
{
    return layer >= 0 && layer < m->config.num_hidden_layers ? m->window[layer] : 0;
}

const char *txc_model_lm_head_name(const txc_model *m)
{
    return m->g[G_LM_HEAD] >= 0 ? m->params[m->g[G_LM_HEAD]].name : NULL;
}

int64_t txc_model_parameter_count(const txc_model *m)
{
    int64_t n = 0;
    for (int i = 0; i < m->n_params; i++)
        n += txc_tensor_numel(m->params[i].tensor);
    return n;
}

txc_status txc_model_to(txc_model *m, txc_device device)
{
    int open = m->env->n_scopes;
    m->env->n_scopes = 0;
    txc_status s = TXC_OK;
    for (int i = 0; i < m->n_params && s == TXC_OK; i++) {
        txc_tensor *old = m->params[i].tensor, *moved = txc_tensor_to(old, device);
        if (!moved) {
            s = txc_last_status();
            break;
        }
        m->params[i].tensor = m->param_tensors[i] = moved;
        txc_tensor_release(old);
    }
    if (s == TXC_OK)
        s = txc_rope_to(&m->rope, device);
    m->env->n_scopes = open;
    return s;
}

/* ---- forward ---------------------------------------------------------------------- */

txc_tensor *txc_model_split_heads(txc_tensor *x, int64_t B, int64_t L, int64_t heads, int64_t d)
{
    return txc_transpose(txc_view(x, 4, (int64_t[]){B, L, heads, d}), 1, 2);
}

txc_tensor *txc_model_attention(txc_tensor *q, txc_tensor *k, txc_tensor *v, txc_tensor *query_pos, double scale,
                                int64_t window, double softcap)
{
    if (!window && !(softcap > 0))
        return txc_causal_attention(q, k, v, query_pos, scale);
    return txc_causal_attention_ext(q, k, v, query_pos, scale, window, softcap > 0 ? softcap : 0);
}

static txc_tensor *norm(const txc_model *m, txc_tensor *x, txc_tensor *w, txc_tensor *b)
{
    const txc_hf_config *c = &m->config;
    switch (m->arch->norm) {
    case NORM_RMS_PLUS_ONE: /* GemmaRMSNorm: x * rsqrt(mean(x^2) + eps) * (1 + w) */
        return txc_mul(txc_rms_norm(x, NULL, c->rms_norm_eps), txc_add_scalar(w, 1.0));
    case NORM_LAYER:
        return txc_layer_norm(x, w, b, c->layer_norm_epsilon);
    default:
        return txc_rms_norm(x, w, c->rms_norm_eps);
    }
}

static txc_tensor *decoder_forward(txc_model *m, txc_tensor *const *params, txc_tensor *input_ids,
                                   txc_tensor *position_ids, txc_kv_cache *cache, txc_tensor *cache_position,
                                   int64_t logits_to_keep, txc_tensor *logits_index)
{
#define W(i) ((i) >= 0 ? params[i] : NULL)
    const txc_hf_config *c = &m->config;
    int64_t B = txc_tensor_size(input_ids, 0), L = txc_tensor_size(input_ids, 1);
    int64_t Hq = c->num_attention_heads, Hkv = c->num_key_value_heads, d = c->head_dim, I = c->intermediate_size;
    if (!position_ids) /* a batch of rows at their own positions: cache_position (B, L) is position_ids */
        position_ids = txc_tensor_ndim(cache_position) == 2
                           ? cache_position
                           : txc_expand(txc_unsqueeze(cache_position, 0), 2, (int64_t[]){B, L});

    const bool tp = m->tp_size > 1;
    txc_tensor *h = tp && m->vocab_split /* this rank's rows of the vocabulary, summed over the ranks */
                        ? txc_all_reduce(txc_vocab_parallel_embedding(W(m->g[G_EMBED]), input_ids, m->vocab_off),
                                         m->tp_mesh, "tp")
                        : txc_embedding(W(m->g[G_EMBED]), input_ids); /* (B, L, H) */
    if (h && txc_tensor_dtype(h) != TXC_F32) /* bf16/f16 weights: float32 activations */
        h = txc_to_dtype(h, TXC_F32);
    if (m->arch->scale_embeddings) /* the normalizer, sqrt(hidden_size) in the hidden dtype */
        h = txc_mul_scalar(h, (float)sqrt((double)c->hidden_size));

    /* cos/sin of the positions; dynamic NTK scales for max(position) + 1 of
     * the real tokens (a padded prefill's last real one is logits_index). */
    txc_tensor *seq_pos = logits_index ? txc_model_select_positions(position_ids, logits_index) : position_ids;
    txc_tensor *cos, *sin;
    if (txc_rope_cos_sin(&m->rope, position_ids, seq_pos, &cos, &sin) != TXC_OK)
        return NULL;

    /* Causal mask over absolute positions: key j is visible to query i when
     * j <= cache_position[i] (transformers' create_causal_mask), applied
     * inside attention. Without a cache the keys are this call's tokens. */
    txc_tensor *query_pos = cache ? cache_position : txc_arange(m->env, 0, (double)L, 1, TXC_I64);
    const int64_t q_out = Hq * d, kv_out = Hkv * d;

    txc_env *env = h ? txc_tensor_env(h) : NULL;
    /* Eager: one scope per layer, so its temporaries are released when it
     * ends and only the hidden state goes on (PyTorch frees them by
     * refcount; without this an eager 128-token prefill of Qwen2.5-0.5B
     * held ~500 MB of activations until the forward's end). A traced
     * forward holds no data (the plan's memory is planned), and keeps every
     * traced value to the end. */
    const bool layer_scopes = h && !txc_tensor_is_traced(h);
    for (int64_t l = 0; l < c->num_hidden_layers && h; l++) {
        int mark = layer_scopes ? txc_env_scope_begin(env) : 0;
        if (mark < 0)
            return NULL;
        const int *P = m->layer[l];
        txc_tensor *x = norm(m, h, W(P[L_ATTN_NORM]), W(P[L_ATTN_NORM_BIAS]));
        txc_tensor *q, *k, *v;
        if (P[L_QKV] >= 0) { /* Phi-3's fused qkv_proj: row blocks of one weight */
            txc_tensor *w = W(P[L_QKV]);
            q = txc_linear(x, txc_narrow(w, 0, 0, q_out), NULL);
            k = txc_linear(x, txc_narrow(w, 0, q_out, kv_out), NULL);
            v = txc_linear(x, txc_narrow(w, 0, q_out + kv_out, kv_out), NULL);
        } else {
            q = txc_linear(x, W(P[L_Q]), W(P[L_Q_BIAS]));
            k = txc_linear(x, W(P[L_K]), W(P[L_K_BIAS]));
            v = txc_linear(x, W(P[L_V]), W(P[L_V_BIAS]));
        }
        q = txc_view(q, 4, (int64_t[]){B, L, Hq, d});
        k = txc_view(k, 4, (int64_t[]){B, L, Hkv, d});
        if (P[L_Q_NORM] >= 0) { /* Qwen3: RMSNorm over head_dim, before RoPE */
            q = txc_rms_norm(q, W(P[L_Q_NORM]), c->rms_norm_eps);
            k = txc_rms_norm(k, W(P[L_K_NORM]), c->rms_norm_eps);
        }
        q = txc_rope_apply(&m->rope, txc_transpose(q, 1, 2), cos, sin);
        k = txc_rope_apply(&m->rope, txc_transpose(k, 1, 2), cos, sin);
        v = txc_model_split_heads(v, B, L, Hkv, d);
        txc_tensor *attn = txc_model_cached_attention(m, cache, (int)l, q, k, v, cache_position, query_pos,
                                                      m->attn_scale, m->window[l], m->attn_softcap); /* (B, Hq, L, d) */
        if (!attn) {
            if (layer_scopes)
                txc_env_scope_end(env, mark);
            return NULL;
        }
        attn = txc_reshape(txc_transpose(attn, 1, 2), 3, (int64_t[]){B, L, q_out});
        if (tp) /* rowwise: partial sums, reduced, then the bias once */
            attn = add_bias(txc_all_reduce(txc_linear(attn, W(P[L_O]), NULL), m->tp_mesh, "tp"), W(P[L_O_BIAS]));
        else
            attn = txc_linear(attn, W(P[L_O]), W(P[L_O_BIAS]));
        if (P[L_ATTN_OUT_NORM] >= 0)
            attn = norm(m, attn, W(P[L_ATTN_OUT_NORM]), NULL);
        h = txc_add(h, attn);

        x = norm(m, h, W(P[L_MLP_NORM]), W(P[L_MLP_NORM_BIAS]));
        txc_tensor *gate, *up;
        if (P[L_GATE_UP] >= 0) { /* Phi-3's fused gate_up_proj: gate rows, then up rows */
            txc_tensor *w = W(P[L_GATE_UP]);
            gate = txc_linear(x, txc_narrow(w, 0, 0, I), NULL);
            up = txc_linear(x, txc_narrow(w, 0, I, I), NULL);
        } else {
            gate = txc_linear(x, W(P[L_GATE]), W(P[L_GATE_BIAS]));
            up = txc_linear(x, W(P[L_UP]), W(P[L_UP_BIAS]));
        }
        txc_tensor *mlp = tp ? add_bias(txc_all_reduce(txc_linear(txc_mul(txc_model_act(m, gate), up), W(P[L_DOWN]),
                                                                        NULL), m->tp_mesh, "tp"), W(P[L_DOWN_BIAS]))
                             : txc_linear(txc_mul(txc_model_act(m, gate), up), W(P[L_DOWN]), W(P[L_DOWN_BIAS]));
        if (P[L_MLP_OUT_NORM] >= 0)
            mlp = norm(m, mlp, W(P[L_MLP_OUT_NORM]), NULL);
        h = txc_add(h, mlp);
        if (layer_scopes) { /* the layer's output outlives its scope: owned by the enclosing one */
            txc_tensor *keep = h ? txc_tensor_retain(h) : NULL;
            txc_env_scope_end(env, mark);
            h = keep ? txc_env_scope_adopt(env, keep) : NULL;
        }
    }
    h = norm(m, h, W(m->g[G_NORM]), W(m->g[G_NORM_BIAS]));
    if (logits_index) /* one position per row: every row's own (txc_model_select_positions) */
        h = txc_model_select_positions(h, logits_index);
    else if (logits_to_keep > 0 && logits_to_keep < L)
        h = txc_narrow(h, 1, L - logits_to_keep, logits_to_keep);
    txc_tensor *logits = txc_linear(h, W(m->g[G_LM_HEAD]), NULL); /* (B, keep, vocab) */
    if (tp && m->vocab_split) /* colwise over the vocabulary, gathered on every rank */
        logits = txc_all_gather(logits, m->tp_mesh, "tp", -1);
    if (m->final_softcap > 0) {
        float cap = (float)m->final_softcap;
        logits = txc_mul_scalar(txc_tanh(txc_div_scalar(logits, cap)), cap);
    }
    return logits;
#undef W
}

txc_tensor *txc_model_forward(txc_model *m, txc_tensor *input_ids, txc_tensor *position_ids, txc_kv_cache *cache,
                              txc_tensor *cache_position, int64_t logits_to_keep)
{
    return txc_model_forward_with(m, m->param_tensors, input_ids, position_ids, cache, cache_position,
                                  logits_to_keep, NULL);
}

txc_tensor *txc_model_forward_with(txc_model *m, txc_tensor *const *params, txc_tensor *input_ids,
                                   txc_tensor *position_ids, txc_kv_cache *cache, txc_tensor *cache_position,
                                   int64_t logits_to_keep, txc_tensor *logits_index)
{
    if (!input_ids || !cache_position) {
        /* a NULL from a failed op keeps that op's error; a NULL passed on
         * purpose gets its own */
        txc_error(TXC_ERR_INVALID, "forward: input_ids and cache_position are required (NULL given)");
        return NULL;
    }
    int cp_dims = txc_tensor_ndim(cache_position);
    if (txc_tensor_ndim(input_ids) != 2 || (cp_dims != 1 && cp_dims != 2) ||
        txc_tensor_size(cache_position, cp_dims - 1) != txc_tensor_size(input_ids, 1) ||
        (cp_dims == 2 && txc_tensor_size(cache_position, 0) != txc_tensor_size(input_ids, 0))) {
        txc_error(TXC_ERR_INVALID, "forward: input_ids must be (batch, q_len) and cache_position (q_len) or "
                                   "(batch, q_len)");
        return NULL;
    }
    if (cp_dims == 2 && (!cache || txc_kv_cache_kind(cache) != TXC_CACHE_STATIC || position_ids)) {
        txc_error(TXC_ERR_INVALID, "forward: a (batch, q_len) cache_position needs a StaticCache and no "
                                   "position_ids (it is each row's positions)");
        return NULL;
    }
    if (m->env->n_scopes == 0) {
        txc_error(TXC_ERR_INVALID, "forward: call it inside txc_env_scope_begin/end");
        return NULL;
    }
    /* the tensor-parallel forward calls its collectives itself (models/tp.c): a shard_map body */
    txc_shard_map_begin();
    txc_tensor *logits = m->arch->forward(m, params, input_ids, position_ids, cache, cache_position, logits_to_keep,
                                          logits_index);
    txc_shard_map_end();
    return logits;
}
