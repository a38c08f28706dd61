/*
 * txc/model.h — causal language models written against the ops API.
 *
 * The LlamaForCausalLM family (transformers' modeling_llama.py), written
 * once: Llama, Mistral (without sliding-window attention yet), Qwen2 (q/k/v
 * biases), SmolLM (a Llama). Grouped-query attention, RoPE with rope_theta,
 * head_dim when config.json gives it, tied or untied lm_head. Computation is
 * float32; bf16/f16 weights are converted once at load, f32 weights are used
 * in place from the mmap'd safetensors file (zero copy).
 *
 * The parameters form a named set (transformers' state_dict names), so that
 * later layers (the JIT) can pass them as explicit inputs.
 */
#ifndef TXC_MODEL_H
#define TXC_MODEL_H

#include <stdint.h>
#include "txc/cache.h"
#include "txc/env.h"
#include "txc/hf_config.h"
#include "txc/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct txc_model txc_model;

typedef struct txc_model_options {
    txc_env *env; /* NULL: the active env */
} txc_model_options;

/* Load a Hugging Face model folder: config.json, model.safetensors (or a
 * sharded model.safetensors.index.json). Errors (one line each):
 *   TXC_ERR_IO          folder or files missing/unreadable;
 *   TXC_ERR_FORMAT      corrupt or truncated files, a tensor missing, or a
 *                       tensor whose shape disagrees with config.json
 *                       (the message names the tensor, both shapes and the
 *                       config fields);
 *   TXC_ERR_UNSUPPORTED unknown model_type, hidden_act other than silu,
 *                       rope_scaling, tensor dtypes other than f32/f16/bf16. */
txc_status txc_model_load(const char *model_dir, const txc_model_options *opts, txc_model **out);
void txc_model_free(txc_model *model);

const txc_hf_config *txc_model_config(const txc_model *model);
txc_env *txc_model_env(const txc_model *model);

/* The parameter set, in a fixed order: count, and the i-th name/tensor
 * (borrowed). Tied lm_head is not listed twice. */
int txc_model_num_parameters(const txc_model *model);
const char *txc_model_parameter_name(const txc_model *model, int i);
txc_tensor *txc_model_parameter(const txc_model *model, int i);
/* Total number of parameter elements. */
int64_t txc_model_parameter_count(const txc_model *model);

/* Move every parameter to `device` (torch's model.to(device)). */
txc_status txc_model_to(txc_model *model, txc_device device);

/* LlamaForCausalLM.forward(input_ids, position_ids, past_key_values,
 * cache_position, logits_to_keep):
 *   input_ids      int64 (batch, q_len)
 *   position_ids   int64 (batch, q_len) (NULL: cache_position for every row)
 *   cache          NULL (attend over this call's tokens only) or a cache
 *                  whose keys/values are updated in place
 *   cache_position int64 (q_len): absolute positions of these tokens,
 *                  consecutive
 *   logits_to_keep 0 = all positions, n = the last n
 * Returns logits float32 (batch, logits_to_keep or q_len, vocab_size) in the
 * env's open scope (call inside txc_env_scope_begin/end), NULL on error. */
txc_tensor *txc_model_forward(txc_model *model, txc_tensor *input_ids, txc_tensor *position_ids, txc_kv_cache *cache,
                              txc_tensor *cache_position, int64_t logits_to_keep);

/* The same forward with the weights passed explicitly (the article's
 * functional_call): params[i] stands for parameter i of the set above
 * (same shapes and dtypes). This is what a compiled step calls, with its
 * inputs as the weights. logits_index (int64 (1), may be NULL) selects the
 * one position whose logits are computed (a padded prefill's last real
 * token), instead of logits_to_keep. */
txc_tensor *txc_model_forward_with(txc_model *model, txc_tensor *const *params, txc_tensor *input_ids,
                                   txc_tensor *position_ids, txc_kv_cache *cache, txc_tensor *cache_position,
                                   int64_t logits_to_keep, txc_tensor *logits_index);
/* The parameter tensors as one array (borrowed; n = txc_model_num_parameters). */
txc_tensor *const *txc_model_parameters(const txc_model *model);

#ifdef __cplusplus
}
#endif
#endif
