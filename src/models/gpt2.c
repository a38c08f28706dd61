/*
 * GPT2LMHeadModel (transformers' models/gpt2/modeling_gpt2.py): learned
 * absolute positions (wpe), LayerNorm with bias before attention and MLP,
 * Conv1D projections — weights stored (in, out), used here through a
 * transposed view (no copy; linear reads it with the NN kernel) — a fused
 * c_attn split into q, k, v, a GELU MLP (activation_function, gelu_new by
 * default), and the head tied to wte. Names: transformer.h.{i}.attn.c_attn
 * ...; a checkpoint of GPT2Model ("h.0...", "wte.weight") loads too.
 *
 * Tensor-parallel (models/tp.c): c_attn arrives as this rank's q, k and v
 * column blocks (its heads), c_fc as its columns, attn.c_proj and
 * mlp.c_proj as their rows (partial sums, all_reduce, then the bias once),
 * wte vocab-parallel and the tied head gathered, as the decoder family.
 */
#include "models/model_impl.h"
#include "txc/shard.h"

#include <math.h>
#include <string.h>

static txc_tensor *gpt2_forward(txc_model *m, txc_tensor *const *params, txc_tensor *input_ids,
                                txc_tensor *position_ids, txc_kv_cache *cache, txc_tensor *cache_position,
                                int64_t logits_to_keep, txc_tensor *logits_index);

static const arch_param gpt2_global[] = {
    {G_EMBED, "transformer.wte.weight", WHEN_ALWAYS, false},
    {G_POS_EMBED, "transformer.wpe.weight", WHEN_ALWAYS, false},
    {G_NORM, "transformer.ln_f.weight", WHEN_ALWAYS, false},
    {G_NORM_BIAS, "transformer.ln_f.bias", WHEN_ALWAYS, false},
    {G_LM_HEAD, "lm_head.weight", WHEN_UNTIED, false},
};

static const arch_param gpt2_layer[] = {
    {L_ATTN_NORM, "ln_1.weight", WHEN_ALWAYS, false},
    {L_ATTN_NORM_BIAS, "ln_1.bias", WHEN_ALWAYS, false},
    {L_QKV, "attn.c_attn.weight", WHEN_ALWAYS, true},
    {L_QKV_BIAS, "attn.c_attn.bias", WHEN_ALWAYS, false},
    {L_O, "attn.c_proj.weight", WHEN_ALWAYS, true},
    {L_O_BIAS, "attn.c_proj.bias", WHEN_ALWAYS, false},
    {L_MLP_NORM, "ln_2.weight", WHEN_ALWAYS, false},
    {L_MLP_NORM_BIAS, "ln_2.bias", WHEN_ALWAYS, false},
    {L_FC, "mlp.c_fc.weight", WHEN_ALWAYS, true},
    {L_FC_BIAS, "mlp.c_fc.bias", WHEN_ALWAYS, false},
    {L_DOWN, "mlp.c_proj.weight", WHEN_ALWAYS, true},
    {L_DOWN_BIAS, "mlp.c_proj.bias", WHEN_ALWAYS, false},
};

const txc_arch txc_arch_gpt2 = {
    "gpt2", "transformer.h", gpt2_global, (int)(sizeof gpt2_global / sizeof *gpt2_global), gpt2_layer,
    (int)(sizeof gpt2_layer / sizeof *gpt2_layer), NORM_LAYER, false, false, false, gpt2_forward,
};

/* Conv1D: x @ weight + bias with weight (in, out) = linear with its
 * transpose; a GGUF stores it (out, in) already (linear_layout). */
static txc_tensor *conv1d(const txc_model *m, txc_tensor *x, txc_tensor *w, txc_tensor *b)
{
    return txc_linear(x, m->linear_layout ? w : txc_transpose(w, 0, 1), b);
}

/* A rowwise Conv1D (attn.c_proj, mlp.c_proj): under tp each rank's rows
 * give a partial sum, reduced over the ranks, then the bias once. */
static txc_tensor *rowwise(const txc_model *m, txc_tensor *x, txc_tensor *w, txc_tensor *b)
{
    if (m->tp_size <= 1)
        return conv1d(m, x, w, b);
    txc_tensor *y = txc_all_reduce(conv1d(m, x, w, NULL), m->tp_mesh, "tp");
    return b ? txc_add(y, b) : y;
}

static txc_tensor *gpt2_forward(txc_model *m, txc_tensor *const *params, txc_tensor *input_ids,
                                txc_tensor *position_ids, txc_kv_cache *cache, txc_tensor *cache_position,
                                int64_t logits_to_keep, txc_tensor *logits_index)
{
#define W(i) ((i) >= 0 ? params[i] : NULL)
    const txc_hf_config *c = &m->config;
    int64_t B = txc_tensor_size(input_ids, 0), L = txc_tensor_size(input_ids, 1);
    int64_t heads = c->num_attention_heads, d = c->head_dim, A = heads * d; /* A: this rank's attention width */
    double eps = c->layer_norm_epsilon;
    if (!position_ids) /* cache_position (B, L): each row's own positions */
        position_ids = txc_tensor_ndim(cache_position) == 2
                           ? cache_position
                           : txc_expand(txc_unsqueeze(cache_position, 0), 2, (int64_t[]){B, L});
    const bool tp = m->tp_size > 1;
    /* token + position embeddings, float32 activations whatever the weights' dtype; under tp the token rows
     * are this rank's of the vocabulary, summed over the ranks */
    txc_tensor *tok = tp && m->vocab_split ? txc_all_reduce(txc_vocab_parallel_embedding(W(m->g[G_EMBED]), input_ids,
                                                                                        m->vocab_off), m->tp_mesh, "tp")
                                           : txc_embedding(W(m->g[G_EMBED]), input_ids);
    txc_tensor *h = txc_add(txc_to_dtype(tok, TXC_F32),
                            txc_to_dtype(txc_embedding(W(m->g[G_POS_EMBED]), position_ids), TXC_F32));
    txc_tensor *query_pos = cache ? cache_position : txc_arange(m->env, 0, (double)L, 1, TXC_I64);
    for (int64_t l = 0; l < c->num_hidden_layers && h; l++) {
        const int *P = m->layer[l];
        txc_tensor *x = txc_layer_norm(h, W(P[L_ATTN_NORM]), W(P[L_ATTN_NORM_BIAS]), eps);
        txc_tensor *q, *k, *v;
        if (P[L_QKV] >= 0) {
            txc_tensor *qkv = conv1d(m, x, W(P[L_QKV]), W(P[L_QKV_BIAS])); /* (B, L, 3H): q | k | v */
            q = txc_narrow(qkv, -1, 0, A), k = txc_narrow(qkv, -1, A, A), v = txc_narrow(qkv, -1, 2 * A, A);
        } else { /* tensor-parallel: this rank's blocks of c_attn, one parameter each */
            q = conv1d(m, x, W(P[L_Q]), W(P[L_Q_BIAS]));
            k = conv1d(m, x, W(P[L_K]), W(P[L_K_BIAS]));
            v = conv1d(m, x, W(P[L_V]), W(P[L_V_BIAS]));
        }
        q = txc_model_split_heads(q, B, L, heads, d);
        k = txc_model_split_heads(k, B, L, heads, d);
        v = txc_model_split_heads(v, B, L, heads, d);
        double scale = c->scale_attn_weights ? 1.0 / sqrt((double)d) : 1.0;
        if (c->scale_attn_by_inverse_layer_idx)
            scale /= (double)(l + 1);
        txc_tensor *attn = txc_model_cached_attention(m, cache, (int)l, q, k, v, cache_position, query_pos, scale, 0, 0);
        if (!attn)
            return NULL;
        attn = txc_reshape(txc_transpose(attn, 1, 2), 3, (int64_t[]){B, L, A});
        h = txc_add(h, rowwise(m, attn, W(P[L_O]), W(P[L_O_BIAS])));

        x = txc_layer_norm(h, W(P[L_MLP_NORM]), W(P[L_MLP_NORM_BIAS]), eps);
        x = txc_model_act(m, conv1d(m, x, W(P[L_FC]), W(P[L_FC_BIAS])));
        h = txc_add(h, rowwise(m, x, W(P[L_DOWN]), W(P[L_DOWN_BIAS])));
    }
    h = txc_layer_norm(h, W(m->g[G_NORM]), W(m->g[G_NORM_BIAS]), eps);
    if (logits_index) /* one position per row: every row's own (txc_model_select_positions) */
        h = txc_model_select_positions(h, logits_index);
    else if (logits_to_keep > 0 && logits_to_keep < L)
        h = txc_narrow(h, 1, L - logits_to_keep, logits_to_keep);
    txc_tensor *logits = txc_linear(h, W(m->g[G_LM_HEAD]), NULL); /* (B, keep, vocab) */
    if (tp && m->vocab_split) /* colwise over the vocabulary, gathered on every rank */
        logits = txc_all_gather(logits, m->tp_mesh, "tp", -1);
    return logits;
#undef W
}
