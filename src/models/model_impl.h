/*
 * models/model_impl.h — what the architectures of src/models share
 * (internal): the model struct, the parameter table, RoPE.
 *
 * One file per family (as llama.cpp): llama.c holds the loader, the
 * parameter set and the decoder shared by llama, mistral, qwen2, qwen3,
 * gemma, gemma2 and phi3 (the same graph with switches: fused projections,
 * q/k norms, (1 + w) norms, sandwich norms, soft-capping, sliding windows,
 * partial rotary); gpt2.c the GPT-2 graph; rope.c the rotary embedding and
 * its scaling types. Tensor names come from one table per architecture
 * (arch_param below), so loading, shape checks and the parameter set are
 * written once.
 */
#ifndef TXC_MODELS_IMPL_H
#define TXC_MODELS_IMPL_H

#include "env/env_impl.h"
#include "txc/model.h"
#include "txc/ops.h"
#include "txc/safetensors.h"

/* Per-layer parameter roles. The shapes follow from the role and the
 * config (q_out = heads * head_dim, kv_out = kv_heads * head_dim):
 * norms (hidden), Q (q_out, hidden), K/V (kv_out, hidden), fused QKV
 * (q_out + 2 kv_out, hidden), O (hidden, q_out), Q/K norms (head_dim),
 * gate/up (intermediate, hidden), fused gate_up (2 intermediate, hidden),
 * down (hidden, intermediate); biases the out dim. Conv1D weights (GPT-2)
 * are stored transposed, (in, out). */
enum {
    L_ATTN_NORM, L_ATTN_NORM_BIAS,
    L_Q, L_K, L_V, L_QKV, L_O,
    L_Q_BIAS, L_K_BIAS, L_V_BIAS, L_QKV_BIAS, L_O_BIAS,
    L_Q_NORM, L_K_NORM,
    L_ATTN_OUT_NORM,   /* gemma2's post_attention_layernorm: on the attention output */
    L_MLP_NORM, L_MLP_NORM_BIAS,
    L_GATE, L_UP, L_GATE_UP, L_FC, L_DOWN,
    L_GATE_BIAS, L_UP_BIAS, L_FC_BIAS, L_DOWN_BIAS,
    L_MLP_OUT_NORM,    /* gemma2's post_feedforward_layernorm */
    L_COUNT
};

/* Model-level roles. */
enum { G_EMBED, G_POS_EMBED, G_NORM, G_NORM_BIAS, G_LM_HEAD, G_COUNT };

/* When a table entry is loaded. */
enum { WHEN_ALWAYS, WHEN_ATTN_BIAS, WHEN_MLP_BIAS, WHEN_UNTIED };

typedef struct arch_param {
    int role;          /* L_* or G_* */
    const char *name;  /* state_dict name; layer names after "<layers>.<i>." */
    uint8_t when;      /* WHEN_* */
    bool conv1d;       /* stored (in, out) */
} arch_param;

typedef enum norm_kind {
    NORM_RMS,          /* LlamaRMSNorm: x / rms * w */
    NORM_RMS_PLUS_ONE, /* GemmaRMSNorm: x / rms * (1 + w) */
    NORM_LAYER,        /* nn.LayerNorm with bias */
} norm_kind;

typedef struct txc_model txc_model;

typedef struct txc_arch {
    const char *model_type;
    const char *layers;             /* "model.layers" / "transformer.h" */
    const arch_param *global;       /* G_* entries (lm_head last) */
    int n_global;
    const arch_param *layer;        /* L_* entries */
    int n_layer;
    norm_kind norm;
    bool rope;                      /* false: learned absolute positions (gpt2) */
    bool scale_embeddings;          /* gemma: embeddings * sqrt(hidden_size) */
    bool partial_rotary;            /* the model's RoPE honours partial_rotary_factor (phi3) */
    txc_tensor *(*forward)(txc_model *m, txc_tensor *const *params, txc_tensor *input_ids,
                           txc_tensor *position_ids, txc_kv_cache *cache, txc_tensor *cache_position,
                           int64_t logits_to_keep, txc_tensor *logits_index);
} txc_arch;

/* RoPE (LlamaRotaryEmbedding and its ROPE_INIT_FUNCTIONS). */
typedef enum rope_kind { ROPE_NONE, ROPE_STATIC, ROPE_DYNAMIC, ROPE_LONGROPE } rope_kind;

typedef struct txc_rope {
    rope_kind kind;
    int64_t dim;               /* rotary dims (head_dim * partial_rotary_factor), even */
    txc_tensor *inv_freq;      /* float32 (dim / 2), the buffer at load (owned) */
    double attention_scaling;  /* cos/sin are multiplied by it (yarn's attention_factor), 1 else */
    /* dynamic NTK: the table is recomputed in the graph from max(position) + 1 */
    double base, factor;
    int64_t max_position_embeddings;
    txc_tensor *exponents;     /* float32 (dim / 2): arange(0, dim, 2) / dim (owned) */
    /* longrope: inv_freq (short_factor) up to original_max_position_embeddings, this one past it */
    txc_tensor *inv_long;      /* float32 (dim / 2) (owned) */
    int64_t original_max_position_embeddings;
} txc_rope;

/* Set up the rotary embedding of `c` (inv_freq exactly as transformers'
 * float32 arithmetic). Errors: TXC_ERR_UNSUPPORTED naming a rope type or a
 * parameter txc does not support; TXC_ERR_FORMAT for a missing parameter. */
txc_status txc_rope_init(txc_rope *r, const txc_hf_config *c, txc_env *env, bool partial_rotary);
void txc_rope_free(txc_rope *r);
txc_status txc_rope_to(txc_rope *r, txc_device device);
/* cos and sin (B, 1, L, dim) for position_ids (B, L) int64. `seq_positions`
 * are the positions whose max + 1 is the sequence length dynamic NTK scales
 * for (transformers: max(position_ids) + 1). */
txc_status txc_rope_cos_sin(const txc_rope *r, txc_tensor *position_ids, txc_tensor *seq_positions, txc_tensor **cos,
                            txc_tensor **sin);
/* apply_rotary_pos_emb on x (B, heads, L, head_dim): the first r->dim dims
 * rotated (rotate_half), the rest passed through (partial rotary). */
txc_tensor *txc_rope_apply(const txc_rope *r, txc_tensor *x, txc_tensor *cos, txc_tensor *sin);

typedef struct param {
    char name[128];
    txc_tensor *tensor; /* owned */
} param;

struct txc_model {
    txc_hf_config config;
    const txc_arch *arch;
    txc_env *env;
    param *params;
    txc_tensor **param_tensors; /* params[i].tensor, as one array (the forward's weights) */
    int n_params;
    int g[G_COUNT];             /* index into params per role, -1 absent (lm_head == embed when tied) */
    int (*layer)[L_COUNT];      /* the same per layer */
    int64_t *window;            /* per layer: sliding window (keys with position > q - window), 0 = full */
    txc_rope rope;
    double attn_scale;          /* softmax scale (before per-layer factors) */
    double attn_softcap, final_softcap; /* tanh soft-capping of scores / logits, 0 = none */
    int64_t max_positions;      /* see txc_model_max_positions */
    bool convert_dtype;         /* txc_model_options: 2-d weights converted to weights_dtype at load */
    bool check_tensors;         /* txc_model_options.check_tensors */
    txc_dtype weights_dtype;
    txc_weights_info weights;   /* see txc_model_weights_info */
    bool linear_layout;         /* GGUF: Conv1D weights stored (out, in), used as linear weights */
    /* tensor parallelism (tp.c): the mesh's "tp" axis; config's
     * num_attention_heads, num_key_value_heads and intermediate_size are
     * this rank's shares after the load (the global ones kept here) */
    struct txc_mesh *tp_mesh;
    int64_t tp_size, tp_rank;
    bool vocab_split;           /* embedding / lm_head hold rows [vocab_off, + vocab_size / tp_size) */
    int64_t vocab_off;
    int64_t tp_global_heads, tp_global_kv_heads, tp_global_intermediate;
    int64_t kv_rep;             /* > 1: tp_size is a multiple of num_key_value_heads, each kv head held by
                                   kv_rep ranks (vLLM's replication); 1: the kv heads split */
    const struct txc_sharding *sh_rows, *sh_cols, *sh_vec;
    char wfile[256], cfile[256]; /* what messages call the weights and the config ("model.safetensors",
                                    "config.json"; a GGUF's file name and "FILE (metadata)") */
};

/* GGUF (gguf_model.c): the config.json transformers would have for the
 * file's general.architecture and metadata; and its tensors under the
 * Hugging Face names, the converter's changes undone (q/k row permutation
 * of llama, gemma's norm + 1). Errors: TXC_ERR_UNSUPPORTED naming an
 * architecture, a rope scaling or a tensor type txc does not handle;
 * TXC_ERR_FORMAT (missing or mistyped metadata). */
struct txc_gguf;
txc_status txc_gguf_model_config(const struct txc_gguf *g, txc_hf_config *out);
txc_status txc_gguf_model_table(const struct txc_gguf *g, const txc_hf_config *c, txc_safetensors **out);

/* Drop the pages wholly inside [p, p + n) of a read-only private file
 * mapping from this process's page tables (MADV_DONTNEED: the mapping is
 * not written, so the next read faults them in again from the page cache),
 * so a copy out of the mapping does not leave the source in the RSS; pages
 * shared with a neighbouring range stay. A refusal only leaves the RSS
 * higher (weights.c). */
void txc_impl_drop_mapped_pages(const void *p, size_t n);

/* Where the weights live (weights.c): with mode COPY, move every parameter
 * whose array is in a mapping of `st`'s files into one anonymous read-only
 * buffer (read from the files; the tensors keep their identity: their
 * arrays are swapped), on every thread; with MMAP leave them. Fills
 * m->weights. */
txc_status txc_model_place_weights(txc_model *m, const txc_safetensors *st, txc_weights_mode mode, bool hugepages);
/* Tests: copy with memcpy from the mapping (the fallback when a file cannot
 * be read) instead of pread. */
void txc_model_test_force_memcpy(bool on);

/* The first of the n elements of `data` (float32, float16 or bfloat16)
 * that is NaN or +-inf, -1 when none; *count: how many are (may be NULL);
 * *is_nan: whether the first one is a NaN (may be NULL). Any alignment. */
int64_t txc_weights_first_nonfinite(const void *data, txc_dtype dtype, int64_t n, int64_t *count, bool *is_nan);
/* "[i, j]": the flat index of a row-major tensor of `shape` per dimension. */
void txc_weights_index_str(char *buf, size_t cap, int ndim, const int64_t *shape, int64_t flat);

/* The activation of config.hidden_act (silu, gelu, gelu_pytorch_tanh,
 * gelu_new, relu); NULL input passes through. */
txc_tensor *txc_model_act(const txc_model *m, txc_tensor *x);
/* Attention over absolute positions: key j visible to query row i iff
 * j <= query_pos[i] and, with a window, j > query_pos[i] - window;
 * scores * scale, then tanh soft-capping when softcap > 0. */
txc_tensor *txc_model_attention(txc_tensor *q, txc_tensor *k, txc_tensor *v, txc_tensor *query_pos, double scale,
                                int64_t window, double softcap);
/* The most rows of a forward whose rows each have their own positions
 * (a 2-D cache_position; txc/batch.h's slots). */
#define TXC_JIT_MAX_BATCH_ROWS 64
/* One layer's cache update and attention (batch_rows.c); q (B, Hq, L, d),
 * k, v (B, Hkv, L, d) after RoPE:
 *   cache_position (L): txc_kv_cache_update (when cache) and
 *     txc_model_attention over query_pos;
 *   cache_position (B, L): row b's keys and values are written to row b of
 *     the StaticCache (which has at least B rows) at cache_position[b], and
 *     its queries attend to that row alone, bounded by cache_position[b]:
 *     the one-sequence attention per row, so a row gets the bits it gets
 *     alone whatever the other rows hold or where they are.
 * Returns (B, Hq, L, d), NULL on error. */
txc_tensor *txc_model_cached_attention(txc_model *m, txc_kv_cache *cache, int layer, txc_tensor *q, txc_tensor *k,
                                       txc_tensor *v, txc_tensor *cache_position, txc_tensor *query_pos, double scale,
                                       int64_t window, double softcap);
/* Each row's one position of x (B, L, ...) (batch_rows.c): logits_index
 * int64 (1) is the column of every row (index_select on dim 1); int64 (B)
 * with B > 1 holds row b's own column (a batch of prompts of different
 * lengths padded to one length, txc/batch.h's grouped prefill): the rows
 * (B, 1, ...) are gathered from x flattened to (B * L, ...), each a copy of
 * its row, so a row's value does not depend on the others. NULL on error. */
txc_tensor *txc_model_select_positions(txc_tensor *x, txc_tensor *logits_index);
/* (B, L, heads*d) -> (B, heads, L, d). */
txc_tensor *txc_model_split_heads(txc_tensor *x, int64_t B, int64_t L, int64_t heads, int64_t d);

/* Tensor parallelism (tp.c). */
enum { TP_REPLICATED, TP_ROWS, TP_COLS, TP_KV_ROWS };
/* Checks the config divides by the mesh's "tp" size (the error names the
 * sizes that work) and the architecture; mesh NULL: tp 1. */
txc_status txc_tp_setup(txc_model *m, struct txc_mesh *mesh);
/* How a role's tensor is split (TP_*; TP_KV_ROWS: k/v rows of a
 * replicated kv head). */
int txc_tp_split(const txc_model *m, int role, bool global);
/* Into how many blocks a split tensor's dim is cut (tp_size; the kv heads
 * for TP_KV_ROWS). */
int64_t txc_tp_blocks(const txc_model *m, int split);
/* This rank's slice of `t` (TP_ROWS / TP_KV_ROWS: dim 0, zero copy when
 * aligned; TP_COLS: dim 1, copied). */
txc_status txc_tp_slice(const txc_model *m, const txc_st_tensor *t, int split, txc_array **out);
/* This rank's block of [off, off + len) of a fused weight's (or its
 * bias's) dim: dim 0 for TP_ROWS / TP_KV_ROWS (rows, zero copy when
 * aligned; `t` 1-D or 2-D), dim 1 for TP_COLS (columns of a 2-D `t`,
 * copied: a Conv1D's output features). */
txc_status txc_tp_slice_part(const txc_model *m, const txc_st_tensor *t, int64_t off, int64_t len, int split,
                             txc_array **out);
/* The split of a 2-D Conv1D weight, stored (in, out): TP_ROWS (the output
 * features, colwise) becomes TP_COLS and TP_COLS (rowwise) TP_ROWS. */
int txc_tp_conv1d_split(int split);
/* The NamedSharding a split parameter carries (NULL: replicated). */
const struct txc_sharding *txc_tp_sharding(const txc_model *m, int split, int ndim);
/* After the load: the config's head and intermediate counts become this rank's. */
void txc_tp_localize(txc_model *m);

/* The GPT-2 architecture (gpt2.c). */
extern const txc_arch txc_arch_gpt2;

#endif
