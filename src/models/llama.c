/*
 * The LlamaForCausalLM family (transformers' models/llama/modeling_llama.py;
 * Mistral and Qwen2 are the same graph with biases / sliding windows).
 * Written once against the ops API, so the same code runs eager now and
 * traced later. See include/txc/model.h.
 */
#include "env/env_impl.h"
#include "txc/model.h"
#include "txc/ops.h"
#include "txc/safetensors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the parameter table (transformers' state_dict names) ---------------- */

enum {
    P_INPUT_NORM, P_Q, P_K, P_V, P_O, P_Q_BIAS, P_K_BIAS, P_V_BIAS,
    P_POST_NORM, P_GATE, P_UP, P_DOWN, P_LAYER_COUNT
};

static const char *const layer_param_names[P_LAYER_COUNT] = {
    [P_INPUT_NORM] = "input_layernorm.weight",
    [P_Q] = "self_attn.q_proj.weight", [P_K] = "self_attn.k_proj.weight",
    [P_V] = "self_attn.v_proj.weight", [P_O] = "self_attn.o_proj.weight",
    [P_Q_BIAS] = "self_attn.q_proj.bias", [P_K_BIAS] = "self_attn.k_proj.bias",
    [P_V_BIAS] = "self_attn.v_proj.bias",
    [P_POST_NORM] = "post_attention_layernorm.weight",
    [P_GATE] = "mlp.gate_proj.weight", [P_UP] = "mlp.up_proj.weight", [P_DOWN] = "mlp.down_proj.weight",
};

typedef struct llama_layer {
    int p[P_LAYER_COUNT]; /* index into the parameter set; -1 for absent biases */
} llama_layer;

typedef struct param {
    char name[96];
    txc_tensor *tensor; /* owned */
} param;

struct txc_model {
    txc_hf_config config;
    txc_env *env;
    bool qkv_bias;
    param *params;
    txc_tensor **param_tensors; /* params[i].tensor, as one array (the forward's weights) */
    int n_params;
    int embed_tokens, norm, lm_head; /* indices into params (lm_head == embed_tokens when tied) */
    llama_layer *layers;
    txc_tensor *inv_freq; /* float32 (head_dim / 2), owned; a buffer, not a parameter */
};

static const char *const supported_model_types[] = {"llama", "mistral", "qwen2"};

/* ---- loading ------------------------------------------------------------------ */

static void shape_str(char *buf, size_t n, int ndim, const int64_t *shape)
{
    size_t off = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (off < n)
        snprintf(buf + off, n - off, "]");
}

/* Find `name`, check its shape against what config.json implies (`why`
 * names the config fields), and wrap it as a float32 tensor: zero copy for
 * f32, converted once for f16/bf16. */
static txc_status load_param(txc_model *m, const txc_safetensors *st, const char *name, int ndim,
                             const int64_t *shape, const char *why, bool optional, int *out)
{
    *out = -1;
    const txc_st_tensor *t = txc_safetensors_find(st, name);
    if (!t) {
        if (optional)
            return TXC_OK;
        return txc_error(TXC_ERR_FORMAT, "model.safetensors: tensor '%s' is missing (expected by config.json: %s)",
                         name, why);
    }
    bool same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++)
        same = t->shape[i] == shape[i];
    if (!same) {
        char got[96], want[96];
        shape_str(got, sizeof got, t->ndim, t->shape);
        shape_str(want, sizeof want, ndim, shape);
        return txc_error(TXC_ERR_FORMAT, "model.safetensors: tensor '%s' has shape %s but config.json implies %s (%s)",
                         name, got, want, why);
    }
    if (!txc_dtype_is_float(t->dtype))
        return txc_error(TXC_ERR_UNSUPPORTED, "model.safetensors: tensor '%s' has dtype %s (expected a float dtype)",
                         name, txc_dtype_name(t->dtype));
    txc_array *arr;
    if (t->aligned) { /* in place, zero copy */
        arr = txc_array_from_storage(t->storage, t->byte_offset, t->dtype, t->ndim, t->shape);
    } else if ((arr = txc_array_new(txc_env_device(m->env), t->dtype, t->ndim, t->shape))) {
        memcpy(txc_array_data(arr), t->data, t->nbytes); /* unaligned in the file: a copy */
    }
    if (!arr)
        return txc_last_status();
    txc_tensor *w = txc_tensor_wrap(m->env, arr);
    txc_array_release(arr);
    if (w && t->dtype != TXC_F32) { /* float32 compute for now: convert once */
        txc_tensor *c = txc_to_dtype(w, TXC_F32);
        txc_tensor_release(w);
        w = c;
    }
    if (!w)
        return txc_last_status();
    param *p = &m->params[m->n_params];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->tensor = w;
    *out = m->n_params++;
    return TXC_OK;
}

static txc_status check_config(const txc_hf_config *c)
{
    bool known = false;
    for (size_t i = 0; i < sizeof supported_model_types / sizeof *supported_model_types; i++)
        known |= strcmp(c->model_type, supported_model_types[i]) == 0;
    if (!known)
        return txc_error(TXC_ERR_UNSUPPORTED, "config.json: model_type '%s' is not supported (supported: llama, "
                                              "mistral, qwen2)", c->model_type);
    if (strcmp(c->hidden_act, "silu") != 0)
        return txc_error(TXC_ERR_UNSUPPORTED, "config.json: hidden_act '%s' is not supported (supported: silu)",
                         c->hidden_act);
    if (c->has_rope_scaling)
        return txc_error(TXC_ERR_UNSUPPORTED, "config.json: rope_scaling of type '%s' is not supported yet",
                         c->rope_scaling_type[0] ? c->rope_scaling_type : "?");
    if (c->mlp_bias)
        return txc_error(TXC_ERR_UNSUPPORTED, "config.json: mlp_bias true is not supported yet");
    if (c->head_dim % 2)
        return txc_error(TXC_ERR_FORMAT, "config.json: head_dim %lld must be even for RoPE", (long long)c->head_dim);
    return TXC_OK;
}

/* LlamaRotaryEmbedding's default inv_freq: 1 / base^(2i/dim), in float32
 * as transformers computes it. */
static txc_tensor *make_inv_freq(txc_env *env, int64_t dim, double base)
{
    int64_t half = dim / 2;
    float *v = malloc(sizeof(float) * (size_t)half);
    if (!v) {
        txc_error(TXC_ERR_NOMEM, "out of memory (inv_freq)");
        return NULL;
    }
    for (int64_t i = 0; i < half; i++)
        v[i] = 1.0f / powf((float)base, (float)(2 * i) / (float)dim);
    txc_tensor *t = txc_tensor_from_data(env, TXC_F32, 1, &half, v);
    free(v);
    return t;
}

static txc_status load_weights(txc_model *m, const txc_safetensors *st)
{
    const txc_hf_config *c = &m->config;
    int64_t H = c->hidden_size, V = c->vocab_size, I = c->intermediate_size;
    int64_t q_out = c->num_attention_heads * c->head_dim, kv_out = c->num_key_value_heads * c->head_dim;
    char why[160], name[128];
    txc_status s;

    snprintf(why, sizeof why, "vocab_size %lld, hidden_size %lld", (long long)V, (long long)H);
    if ((s = load_param(m, st, "model.embed_tokens.weight", 2, (int64_t[]){V, H}, why, false, &m->embed_tokens)))
        return s;
    for (int64_t l = 0; l < c->num_hidden_layers; l++) {
        llama_layer *L = &m->layers[l];
        struct { int idx; int ndim; int64_t shape[2]; bool optional; } spec[P_LAYER_COUNT] = {
            {P_INPUT_NORM, 1, {H, 0}, false}, {P_Q, 2, {q_out, H}, false}, {P_K, 2, {kv_out, H}, false},
            {P_V, 2, {kv_out, H}, false},     {P_O, 2, {H, q_out}, false},  {P_Q_BIAS, 1, {q_out, 0}, true},
            {P_K_BIAS, 1, {kv_out, 0}, true}, {P_V_BIAS, 1, {kv_out, 0}, true}, {P_POST_NORM, 1, {H, 0}, false},
            {P_GATE, 2, {I, H}, false},       {P_UP, 2, {I, H}, false},     {P_DOWN, 2, {H, I}, false},
        };
        for (int i = 0; i < P_LAYER_COUNT; i++) {
            bool is_bias = spec[i].idx == P_Q_BIAS || spec[i].idx == P_K_BIAS || spec[i].idx == P_V_BIAS;
            snprintf(name, sizeof name, "model.layers.%lld.%s", (long long)l, layer_param_names[spec[i].idx]);
            snprintf(why, sizeof why,
                     "hidden_size %lld, intermediate_size %lld, num_attention_heads %lld, num_key_value_heads %lld, "
                     "head_dim %lld, num_hidden_layers %lld",
                     (long long)H, (long long)I, (long long)c->num_attention_heads, (long long)c->num_key_value_heads,
                     (long long)c->head_dim, (long long)c->num_hidden_layers);
            if ((s = load_param(m, st, name, spec[i].ndim, spec[i].shape, why, is_bias && !m->qkv_bias,
                                &L->p[spec[i].idx])))
                return s;
        }
    }
    snprintf(why, sizeof why, "hidden_size %lld", (long long)H);
    if ((s = load_param(m, st, "model.norm.weight", 1, (int64_t[]){H}, why, false, &m->norm)))
        return s;
    if (c->tie_word_embeddings) {
        m->lm_head = m->embed_tokens; /* tied: the head is the embedding */
    } else {
        snprintf(why, sizeof why, "tie_word_embeddings false, vocab_size %lld, hidden_size %lld", (long long)V,
                 (long long)H);
        if ((s = load_param(m, st, "lm_head.weight", 2, (int64_t[]){V, H}, why, false, &m->lm_head)))
            return s;
    }
    /* A deeper checkpoint than config.json says is a disagreement too. */
    snprintf(name, sizeof name, "model.layers.%lld.input_layernorm.weight", (long long)c->num_hidden_layers);
    if (txc_safetensors_find(st, name))
        return txc_error(TXC_ERR_FORMAT, "model.safetensors: has tensor '%s' but config.json says num_hidden_layers "
                                         "%lld", name, (long long)c->num_hidden_layers);
    return TXC_OK;
}

txc_status txc_model_load(const char *dir, const txc_model_options *opts, txc_model **out)
{
    *out = NULL;
    txc_model *m = calloc(1, sizeof *m);
    if (!m)
        return txc_error(TXC_ERR_NOMEM, "out of memory (model)");
    m->env = opts && opts->env ? opts->env : txc_env_active();
    txc_status s = txc_hf_config_load(dir, &m->config);
    if (s == TXC_OK)
        s = check_config(&m->config);
    txc_safetensors *st = NULL;
    if (s == TXC_OK)
        s = txc_safetensors_open(dir, &st);
    if (s == TXC_OK) {
        m->qkv_bias = m->config.attention_bias || strcmp(m->config.model_type, "qwen2") == 0;
        /* Each layer has 9 tensors at least: a layer count the file cannot
         * hold is a disagreement, reported before sizing anything by it. */
        if (m->config.num_hidden_layers > txc_safetensors_count(st) / 9 + 1)
            s = txc_error(TXC_ERR_FORMAT, "config.json: num_hidden_layers %lld, but model.safetensors has only %d "
                                          "tensors", (long long)m->config.num_hidden_layers,
                          txc_safetensors_count(st));
    }
    if (s == TXC_OK) {
        size_t max_params = 3 + (size_t)m->config.num_hidden_layers * P_LAYER_COUNT;
        m->params = calloc(max_params, sizeof *m->params);
        m->layers = calloc((size_t)m->config.num_hidden_layers, sizeof *m->layers);
        if (!m->params || !m->layers)
            s = txc_error(TXC_ERR_NOMEM, "out of memory (parameters)");
    }
    /* Parameters live outside any scope: the model owns them. */
    int open = m->env->n_scopes;
    m->env->n_scopes = 0;
    if (s == TXC_OK)
        s = load_weights(m, st);
    if (s == TXC_OK && !(m->inv_freq = make_inv_freq(m->env, m->config.head_dim, m->config.rope_theta)))
        s = txc_last_status();
    if (s == TXC_OK && !(m->param_tensors = calloc((size_t)m->n_params + 1, sizeof *m->param_tensors)))
        s = txc_error(TXC_ERR_NOMEM, "out of memory (parameters)");
    for (int i = 0; s == TXC_OK && i < m->n_params; i++)
        m->param_tensors[i] = m->params[i].tensor;
    m->env->n_scopes = open;
    txc_safetensors_close(st); /* the tensors keep their mmap storages alive */
    if (s != TXC_OK) {
        txc_model_free(m);
        return s;
    }
    *out = m;
    return TXC_OK;
}

void txc_model_free(txc_model *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n_params; i++)
        txc_tensor_release(m->params[i].tensor);
    txc_tensor_release(m->inv_freq);
    free(m->params);
    free(m->param_tensors);
    free(m->layers);
    free(m);
}

const txc_hf_config *txc_model_config(const txc_model *m) { return &m->config; }
txc_env *txc_model_env(const txc_model *m) { return m->env; }
int txc_model_num_parameters(const txc_model *m) { return m->n_params; }
const char *txc_model_parameter_name(const txc_model *m, int i) { return i >= 0 && i < m->n_params ? m->params[i].name : NULL; }
txc_tensor *txc_model_parameter(const txc_model *m, int i) { return i >= 0 && i < m->n_params ? m->params[i].tensor : NULL; }

txc_tensor *const *txc_model_parameters(const txc_model *m) { return m->param_tensors; }

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
    if (s == TXC_OK) {
        txc_tensor *f = txc_tensor_to(m->inv_freq, device);
        if (f) {
            txc_tensor_release(m->inv_freq);
            m->inv_freq = f;
        } else {
            s = txc_last_status();
        }
    }
    m->env->n_scopes = open;
    return s;
}

/* ---- forward ---------------------------------------------------------------------- */

/* rotate_half(x) = cat(-x[..., d/2:], x[..., :d/2]). */
static txc_tensor *rotate_half(txc_tensor *x, int64_t d)
{
    txc_tensor *halves[2] = {txc_neg(txc_narrow(x, -1, d / 2, d / 2)), txc_narrow(x, -1, 0, d / 2)};
    return txc_cat(halves, 2, -1);
}

/* apply_rotary_pos_emb: x * cos + rotate_half(x) * sin; cos/sin (B, 1, L, d). */
static txc_tensor *apply_rope(txc_tensor *x, txc_tensor *cos, txc_tensor *sin, int64_t d)
{
    return txc_add(txc_mul(x, cos), txc_mul(rotate_half(x, d), sin));
}

/* (B, L, heads*d) -> (B, heads, L, d). */
static txc_tensor *split_heads(txc_tensor *x, int64_t B, int64_t L, int64_t heads, int64_t d)
{
    return txc_transpose(txc_view(x, 4, (int64_t[]){B, L, heads, d}), 1, 2);
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
#define W(i) ((i) >= 0 ? params[i] : NULL)
    const txc_hf_config *c = &m->config;
    if (!input_ids || !cache_position)
        return NULL;
    if (txc_tensor_ndim(input_ids) != 2 || txc_tensor_ndim(cache_position) != 1 ||
        txc_tensor_size(cache_position, 0) != txc_tensor_size(input_ids, 1)) {
        txc_error(TXC_ERR_INVALID, "forward: input_ids must be (batch, q_len) and cache_position (q_len)");
        return NULL;
    }
    if (m->env->n_scopes == 0) {
        txc_error(TXC_ERR_INVALID, "forward: call it inside txc_env_scope_begin/end");
        return NULL;
    }
    int64_t B = txc_tensor_size(input_ids, 0), L = txc_tensor_size(input_ids, 1);
    int64_t Hq = c->num_attention_heads, Hkv = c->num_key_value_heads, d = c->head_dim;
    if (!position_ids)
        position_ids = txc_expand(txc_unsqueeze(cache_position, 0), 2, (int64_t[]){B, L});

    txc_tensor *h = txc_embedding(W(m->embed_tokens), input_ids); /* (B, L, H) */

    /* LlamaRotaryEmbedding: freqs = position_ids ⊗ inv_freq; emb = cat(freqs, freqs). */
    txc_tensor *pos = txc_unsqueeze(txc_to_dtype(position_ids, TXC_F32), -1); /* (B, L, 1) */
    txc_tensor *freqs = txc_mul(pos, m->inv_freq);                           /* (B, L, d/2) */
    txc_tensor *emb = txc_cat((txc_tensor *[]){freqs, freqs}, 2, -1);        /* (B, L, d) */
    txc_tensor *cos = txc_unsqueeze(txc_cos(emb), 1), *sin = txc_unsqueeze(txc_sin(emb), 1);

    /* Causal mask over absolute positions: key j is visible to query i when
     * j <= cache_position[i] (transformers' create_causal_mask), applied
     * inside attention. Without a cache the keys are this call's tokens. */
    txc_tensor *query_pos = cache ? cache_position : txc_arange(m->env, 0, (double)L, 1, TXC_I64);
    double scale = 1.0 / sqrt((double)d);

    for (int64_t l = 0; l < c->num_hidden_layers && h; l++) {
        llama_layer *Ly = &m->layers[l];
        txc_tensor *x = txc_rms_norm(h, W(Ly->p[P_INPUT_NORM]), c->rms_norm_eps);
        txc_tensor *q = split_heads(txc_linear(x, W(Ly->p[P_Q]), W(Ly->p[P_Q_BIAS])), B, L, Hq, d);
        txc_tensor *k = split_heads(txc_linear(x, W(Ly->p[P_K]), W(Ly->p[P_K_BIAS])), B, L, Hkv, d);
        txc_tensor *v = split_heads(txc_linear(x, W(Ly->p[P_V]), W(Ly->p[P_V_BIAS])), B, L, Hkv, d);
        q = apply_rope(q, cos, sin, d);
        k = apply_rope(k, cos, sin, d);
        if (cache && k && v && txc_kv_cache_update(cache, (int)l, k, v, cache_position, &k, &v) != TXC_OK)
            return NULL;
        txc_tensor *attn = txc_causal_attention(q, k, v, query_pos, scale); /* (B, Hq, L, d) */
        attn = txc_reshape(txc_transpose(attn, 1, 2), 3, (int64_t[]){B, L, Hq * d});
        h = txc_add(h, txc_linear(attn, W(Ly->p[P_O]), NULL));

        x = txc_rms_norm(h, W(Ly->p[P_POST_NORM]), c->rms_norm_eps);
        txc_tensor *gate = txc_silu(txc_linear(x, W(Ly->p[P_GATE]), NULL));
        h = txc_add(h, txc_linear(txc_mul(gate, txc_linear(x, W(Ly->p[P_UP]), NULL)), W(Ly->p[P_DOWN]), NULL));
    }
    h = txc_rms_norm(h, W(m->norm), c->rms_norm_eps);
    if (logits_index)
        h = txc_index_select(h, 1, logits_index);
    else if (logits_to_keep > 0 && logits_to_keep < L)
        h = txc_narrow(h, 1, L - logits_to_keep, logits_to_keep);
    return txc_linear(h, W(m->lm_head), NULL); /* (B, keep, vocab) */
#undef W
}
