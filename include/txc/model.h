/*
 * txc/model.h — causal language models written against the ops API.
 *
 * transformers' *ForCausalLM of these model_types, each written once
 * (src/models/: llama.c for the llama-style decoders, gpt2.c, rope.c):
 *   llama    Llama 1-3, SmolLM, TinyLlama: grouped-query attention, RoPE
 *            with rope_scaling default / linear / dynamic / llama3 / yarn /
 *            longrope,
 *            attention_bias (q/k/v/o) and mlp_bias;
 *   mistral  + sliding-window attention (sliding_window);
 *   qwen2    + q/k/v biases, sliding window with use_sliding_window from
 *            max_window_layers (or layer_types);
 *   qwen3    + q_norm / k_norm (RMSNorm per head before RoPE), head_dim;
 *   gemma    embeddings * sqrt(hidden_size), RMSNorm * (1 + w), GeGLU
 *            (gelu_pytorch_tanh), head_dim, tied head;
 *   gemma2   + post-attention / pre- and post-feedforward norms, attention
 *            and final logit soft-capping, alternating sliding window,
 *            query_pre_attn_scalar;
 *   phi3     fused qkv_proj and gate_up_proj (row blocks, no copy), partial
 *            rotary (partial_rotary_factor), sliding window, longrope (its
 *            "su"/"yarn" types read as longrope, as Phi3Config);
 *   gpt2     LayerNorm with bias, learned positions (wpe), Conv1D weights
 *            (in, out) used through transposed views, fused c_attn,
 *            gelu_new, tied head.
 * The head is lm_head.weight when tie_word_embeddings is false (it must be
 * in the file), else the embedding (an lm_head.weight in the file is then
 * ignored, as transformers ties it). Activations are float32; weights
 * keep their file dtype (f32, bf16, f16) unless converted at load, and live
 * either in the mmap'd safetensors file (zero copy) or in an anonymous copy
 * (txc_weights_mode below).
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

/* Where the weights used in place live (those converted at load are copies
 * anyway):
 *   MMAP  the read-only mmap of the safetensors file: loading touches no
 *         weight page (a 1 GB file opens in milliseconds), pages are read on
 *         first use and are page cache the kernel may evict and re-read;
 *   COPY  one anonymous, 2 MiB-aligned buffer (madvise(MADV_HUGEPAGE) asked
 *         before it is touched; refused is no error), filled on every thread
 *         of the pool by pread() from the files (the kernel's copy out of
 *         the page cache; where a file cannot be read, memcpy from the
 *         mapping, each copied range then MADV_DONTNEED) and then made
 *         read-only; the files' mapping is dropped (munmap), so no page is
 *         counted twice in the RSS. llama.cpp's --no-mmap.
 * DEFAULT is TXC_WEIGHTS_DEFAULT_MODE: the copy. Measured on a shared
 * 2-core VM (README, "Where the weights live"): a 1 GB bf16 Qwen2.5-0.5B
 * decodes 1.3x faster (median) from the copy, faster in 12 of 13
 * alternated pairs, for a load of ~0.2-1.6 s instead of ~2 ms. */
typedef enum txc_weights_mode {
    TXC_WEIGHTS_DEFAULT = 0,
    TXC_WEIGHTS_MMAP = 1,
    TXC_WEIGHTS_COPY = 2,
} txc_weights_mode;

#define TXC_WEIGHTS_DEFAULT_MODE TXC_WEIGHTS_COPY

/* "mmap", "copy"; "memory" for DEFAULT (a model made in memory, e.g.
 * synthetic, has no file); "?" otherwise. */
const char *txc_weights_mode_name(txc_weights_mode mode);

/* What loading did with the weights (txc_model_weights_info). */
typedef struct txc_weights_info {
    txc_weights_mode mode;  /* MMAP or COPY; DEFAULT for a model not loaded from files */
    size_t param_bytes;     /* bytes of all parameters in memory (numel * dtype size) */
    size_t file_bytes;      /* of those, the bytes used in place from the file (MMAP) or copied
                               out of it (COPY); the rest were converted (or unaligned) at load */
    bool hugepages;         /* COPY: MADV_HUGEPAGE was accepted */
    size_t repacked_bytes;  /* COPY: of file_bytes, the block-quantized weights repacked at load
                               (rows interleaved by 8, txc_quant_repack in txc/quant.h) */
    double repack_ms;       /* COPY: wall time of that repacking (not in copy_ms) */
    double copy_ms;         /* COPY: wall time of the copy */
    double load_ms;         /* wall time of txc_model_load (the copy included) */
    /* convert_dtype: values finite in the file that the conversion turned
     * into +-inf (float16 past 65504, bfloat16 past ~3.39e38): how many
     * tensors, and the first such tensor's name and count (without
     * check_tensors this is no error; the caller may warn). */
    int n_overflow_tensors;
    char overflow_tensor[128];
    int64_t overflow_values;
} txc_weights_info;

typedef struct txc_model_options {
    txc_env *env; /* NULL: the active env */
    /* The weights in memory: by default each keeps its file dtype (f32,
     * bf16, f16; zero copy from the mmap where aligned); with convert_dtype
     * the 2-d weights are converted once to `dtype` (f32, bf16 or f16).
     * 1-d parameters (norms, biases) are float32 either way, and so are
     * the activations: linear multiplies half weights with float32
     * accumulation. */
    bool convert_dtype;
    txc_dtype dtype;
    /* Where the weights used in place live (DEFAULT: TXC_WEIGHTS_DEFAULT_MODE). */
    txc_weights_mode weights;
    /* COPY: do not ask for transparent huge pages. */
    bool no_hugepages;
    /* Scan every parameter at load for NaN and +-inf (llama.cpp's
     * --check-tensors): the values in the file, and with convert_dtype the
     * converted ones; the first found fails the load (TXC_ERR_FORMAT naming
     * the tensor and the element's index). Every page of the file is read. */
    bool check_tensors;
    /* Tensor parallelism over the mesh's axis "tp" (txc/shard.h; NULL or
     * size 1: none). Hugging Face's base_model_tp_plan: q/k/v, gate/up and
     * lm_head colwise, o/down rowwise + all_reduce, the embedding
     * vocab-parallel; this process loads only its slices (rows of a
     * colwise weight zero copy from the mmap, columns of a rowwise one
     * copied). Then txc_model_config's num_attention_heads,
     * num_key_value_heads and intermediate_size are this rank's shares (its
     * KV cache holds its kv heads); the logits are the whole vocabulary on
     * every rank. Errors: TXC_ERR_INVALID when the heads or the
     * intermediate size do not divide by the size (naming the sizes that
     * work), TXC_ERR_UNSUPPORTED for gpt2 and GGUF weights (phi3's fused qkv_proj /
     * gate_up_proj are split block by block). */
    struct txc_mesh *tp_mesh;
} txc_model_options;

/* The config of the model at `path` without loading its weights: a folder's
 * config.json (txc_hf_config_load), or a *.gguf file's metadata mapped to
 * the same fields (llama.cpp's <arch>.* keys, as txc_model_load reads it).
 * Errors: those of txc_hf_config_load, of txc_gguf_open (IO, FORMAT), an
 * unknown general.architecture or a missing hyperparameter (FORMAT). */
txc_status txc_model_config_load(const char *path, txc_hf_config *out);

/* Load a Hugging Face model folder: config.json, model.safetensors (or a
 * sharded model.safetensors.index.json). Errors (one line each):
 *   TXC_ERR_INVALID     opts->weights or opts->dtype out of range;
 *   TXC_ERR_IO          folder or files missing/unreadable;
 *   TXC_ERR_FORMAT      corrupt or truncated files, a tensor missing, or a
 *                       tensor whose shape disagrees with config.json
 *                       (the message names the tensor, both shapes and the
 *                       config fields);
 *   TXC_ERR_UNSUPPORTED one line naming what: a model_type not above, a
 *                       hidden_act other than silu / gelu /
 *                       gelu_pytorch_tanh / gelu_new / relu, a rope_scaling
 *                       type other than default / linear / dynamic / llama3
 *                       / yarn / longrope, a layer_types entry other than
 *                       full_attention / sliding_attention,
 *                       use_bidirectional_attention, add_cross_attention,
 *                       tensor dtypes other than f32/f16/bf16. */
txc_status txc_model_load(const char *model_dir, const txc_model_options *opts, txc_model **out);
void txc_model_free(txc_model *model);
/* Whether a model of config `c` splits over `n` tensor-parallel ranks
 * (txc_model_options.tp_mesh, Hugging Face's base_model_tp_plan): n divides
 * num_attention_heads and intermediate_size, and divides
 * num_key_value_heads or is a multiple of it (replicated kv heads, as
 * vLLM). The check txc_model_load makes, from the config alone (a CLI
 * checks it once before the ranks load). Errors: TXC_ERR_INVALID naming
 * the field, its value and the sizes that work ("--tp 3:
 * num_attention_heads 8 does not divide by 3 (tensor-parallel sizes that
 * work: 1, 2, 4)"); n < 1 or no config. */
txc_status txc_model_tp_check(const txc_hf_config *c, int64_t n);
/* The tensor-parallel size and this process's rank along it (1, 0 without). */
int64_t txc_model_tp_size(const txc_model *model);
int64_t txc_model_tp_rank(const txc_model *model);
/* The mesh whose "tp" axis the model is split over (txc_model_options.tp_mesh; NULL without). */
const struct txc_mesh *txc_model_tp_mesh(const txc_model *model);
/* What loading did with the weights (see txc_weights_info). */
txc_weights_info txc_model_weights_info(const txc_model *model);

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
 *                  consecutive; or int64 (batch, q_len): each row its own
 *                  positions (rows at different lengths, txc/batch.h's
 *                  slots): then cache must be a StaticCache of at least
 *                  `batch` rows, row b's keys/values go to its row b at
 *                  cache_position[b], row b attends to that row alone
 *                  (bounded by its own positions, the one-sequence kernel
 *                  per row), and position_ids must be NULL (they are
 *                  cache_position); at most 64 rows. Each row's logits are
 *                  then the bits of that row run alone (the GEMMs' row
 *                  invariance, src/ops/kernels.h), except with dynamic NTK
 *                  RoPE (scaled by the batch's longest row, as transformers)
 *   logits_to_keep 0 = all positions, n = the last n
 * Returns logits float32 (batch, logits_to_keep or q_len, vocab_size) in the
 * env's open scope (call inside txc_env_scope_begin/end), NULL on error. */
txc_tensor *txc_model_forward(txc_model *model, txc_tensor *input_ids, txc_tensor *position_ids, txc_kv_cache *cache,
                              txc_tensor *cache_position, int64_t logits_to_keep);

/* The same forward with the weights passed explicitly (the article's
 * functional_call): params[i] stands for parameter i of the set above
 * (same shapes and dtypes). This is what a compiled step calls, with its
 * inputs as the weights. logits_index (may be NULL) selects the one
 * position of each row whose logits are computed (a padded prefill's last
 * real token), instead of logits_to_keep: int64 (1), the same column of
 * every row, or int64 (batch), row b's own column (rows of different
 * lengths padded to one q_len, txc/batch.h's grouped prefill); logits are
 * then (batch, 1, vocab_size). Errors: TXC_ERR_INVALID for another size. */
txc_tensor *txc_model_forward_with(txc_model *model, txc_tensor *const *params, txc_tensor *input_ids,
                                   txc_tensor *position_ids, txc_kv_cache *cache, txc_tensor *cache_position,
                                   int64_t logits_to_keep, txc_tensor *logits_index);
/* The parameter tensors as one array (borrowed; n = txc_model_num_parameters). */
txc_tensor *const *txc_model_parameters(const txc_model *model);

/* The longest sequence (positions) the model handles:
 * max_position_embeddings, except with dynamic NTK RoPE (whose point is to
 * run past it; transformers does not stop there): INT64_MAX. */
int64_t txc_model_max_positions(const txc_model *model);
/* The rotary embedding's inv_freq buffer as computed at load, float32
 * (rotary_dim / 2) (borrowed; NULL without RoPE, e.g. gpt2), equal to
 * transformers' (rope_scaling applied); and the factor cos/sin are scaled by
 * (yarn's attention_factor; 1 otherwise). */
txc_tensor *txc_model_rope_inv_freq(const txc_model *model);
double txc_model_rope_attention_scaling(const txc_model *model);
/* Layer `layer`'s sliding window (keys with position > query - window are
 * visible), 0 for full attention. */
int64_t txc_model_sliding_window(const txc_model *model, int64_t layer);
/* The name of the parameter used as the output head ("lm_head.weight", or
 * the embedding's name when tied). */
const char *txc_model_lm_head_name(const txc_model *model);

#ifdef __cplusplus
}
#endif
#endif
