/*
 * txc/hf_config.h — a Hugging Face model's config.json and
 * generation_config.json.
 *
 * Field names are transformers' own. Defaults are those of transformers'
 * config class for the model_type (LlamaConfig, MistralConfig, Qwen2Config,
 * Qwen3Config, GemmaConfig, Gemma2Config, Phi3Config, GPT2Config: a
 * save_pretrained config.json leaves out values equal to them) for the
 * architecture fields and of GenerationConfig
 * (generation/configuration_utils.py) for generation; a JSON null counts as
 * absent (transformers' `None` -> default), except where noted. GPT-2's
 * names are read as aliases (transformers' attribute_map): n_embd ->
 * hidden_size, n_layer -> num_hidden_layers, n_head -> num_attention_heads,
 * n_positions -> max_position_embeddings, n_inner -> intermediate_size
 * (null: 4 * hidden_size), layer_norm_epsilon, activation_function ->
 * hidden_act.
 *
 * Errors (one line naming the file and the field):
 *   - TXC_ERR_IO: config.json missing or unreadable (the path is named);
 *     generation_config.json missing is NOT an error (present = false);
 *   - TXC_ERR_FORMAT: not JSON or not a JSON object; a field of the wrong
 *     JSON type (a string where an integer is expected, 1 for a boolean);
 *     an integer field that is not a whole number (1.5) or is out of range;
 *     a missing required field; a non-positive size; hidden_size not
 *     divisible by num_attention_heads when head_dim is absent;
 *     num_attention_heads not a multiple of num_key_value_heads; more than 8
 *     eos ids; a string field longer than its buffer;
 *   - TXC_ERR_INVALID: NULL arguments.
 */
#ifndef TXC_HF_CONFIG_H
#define TXC_HF_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "txc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TXC_MAX_EOS 8
/* Most GenerationConfig keys txc does not implement listed per file. */
#define TXC_MAX_IGNORED_GEN_KEYS 32
/* Longest longrope short_factor / long_factor lists read (rotary_dim / 2). */
#define TXC_MAX_ROPE_FACTORS 256
/* Longest layer_types list read (one entry per layer). */
#define TXC_MAX_LAYER_TYPES 1024

/* config.json's layer_types entries. */
typedef enum txc_layer_type {
    TXC_LAYER_FULL = 0,   /* "full_attention" */
    TXC_LAYER_SLIDING,    /* "sliding_attention" */
    TXC_LAYER_OTHER,      /* anything else (named in layer_type_other) */
} txc_layer_type;

typedef struct txc_hf_config {
    char model_type[64];            /* "llama", "mistral", "qwen2", ... as given (required) */
    char architecture[128];         /* architectures[0] or "" */
    /* Required, > 0: vocab_size, hidden_size, intermediate_size (gpt2:
     * n_inner, else 4 * hidden_size), num_hidden_layers, num_attention_heads
     * (transformers would fall back to the config class's 7B sizes; a
     * checkpoint without them is treated as malformed rather than silently
     * given 4096-wide shapes). head_dim's default is hidden_size /
     * num_attention_heads, except qwen3 (128) and gemma/gemma2 (256);
     * max_position_embeddings' is the config class's (llama 2048, mistral
     * 131072, qwen2/qwen3 32768, gemma/gemma2 8192, phi3 4096, gpt2 1024);
     * rms_norm_eps' 1e-6 (phi3 1e-5); tie_word_embeddings' false (gemma,
     * gemma2, gpt2: true). */
    int64_t vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
        num_key_value_heads,        /* default num_attention_heads; must divide it */
        head_dim,                   /* default hidden_size / num_attention_heads */
        max_position_embeddings;    /* default 2048 (LlamaConfig) */
    double rms_norm_eps;            /* default 1e-6 (LlamaConfig); > 0 */
    double rope_theta;              /* default 10000.0; also read from
                                       rope_parameters.rope_theta (transformers >= 4.56 / v5) */
    bool tie_word_embeddings;       /* default false (LlamaConfig) */
    bool attention_bias, mlp_bias;  /* raw values, default false (qwen2 implies q/k/v bias
                                       whatever attention_bias says: the model decides) */
    char hidden_act[32];            /* the MLP's activation: hidden_act, default "silu"; gemma: default
                                       "gelu_pytorch_tanh", and "gelu" means it (as GemmaConfig);
                                       gemma2: its "hidden_activation" (default "gelu_pytorch_tanh");
                                       gpt2: "activation_function" (default "gelu_new") */
    char torch_dtype[16];           /* "torch_dtype" or the newer "dtype": "float32", "bfloat16"... or "" */
    bool has_rope_scaling;          /* rope_scaling is an object (or rope_parameters has a
                                       rope_type other than "default") */
    char rope_scaling_type[32];     /* its "rope_type" or, older, "type"; "" if neither */
    /* The RoPE parameters (transformers' RopeParameters), read from
     * rope_scaling or rope_parameters; 0 means absent (the rope type's own
     * default applies). */
    double rope_factor;             /* "factor" */
    int64_t original_max_position_embeddings; /* the rope object's; a top-level one wins (as
                                       transformers' standardize_rope_params); 0 absent */
    double low_freq_factor, high_freq_factor;  /* llama3 */
    double beta_fast, beta_slow;    /* yarn (defaults 32 and 1) */
    double attention_factor;        /* yarn / longrope (default: computed from factor) */
    double mscale, mscale_all_dim;  /* yarn */
    bool rope_truncate;             /* yarn "truncate", default true */
    int n_short_factor, n_long_factor; /* longrope's lists (0 when absent) */
    double short_factor[TXC_MAX_ROPE_FACTORS], long_factor[TXC_MAX_ROPE_FACTORS];
    double partial_rotary_factor;   /* top-level or in rope_parameters; default 1.0; in (0, 1] */
    int64_t sliding_window;         /* 0 when null; absent: 4096 for mistral and gemma2 (their
                                       configs' default), else 0 */
    bool use_sliding_window;        /* false when absent (qwen2, qwen3) */
    int64_t max_window_layers;      /* qwen2/qwen3: layers from this one on slide; default 28 */
    int n_layer_types;              /* layer_types: 0 when absent, else num_hidden_layers */
    uint8_t layer_types[TXC_MAX_LAYER_TYPES]; /* txc_layer_type per layer */
    char layer_type_other[32];      /* the first unknown layer_types entry, "" if none */
    int64_t sliding_window_pattern; /* gemma3-style: every n-th layer is full; 0 absent */
    double final_logit_softcapping; /* 0 = none (null); absent: 30 for gemma2 */
    double attn_logit_softcapping;  /* 0 = none (null); absent: 50 for gemma2 */
    double query_pre_attn_scalar;   /* gemma2: attention scale query_pre_attn_scalar^-0.5; absent:
                                       256 for gemma2, else 0 (= head_dim) */
    bool use_bidirectional_attention; /* gemma: true is not causal (rejected by the model) */
    double layer_norm_epsilon;      /* gpt2's LayerNorm eps; default 1e-5 */
    bool scale_attn_weights;        /* gpt2: default true */
    bool scale_attn_by_inverse_layer_idx; /* gpt2: default false */
    bool add_cross_attention;       /* gpt2: default false (true: an encoder-decoder, rejected) */
    int64_t bos_token_id;           /* -1 when absent/null */
    int n_eos;                      /* 0..TXC_MAX_EOS */
    int64_t eos_token_id[TXC_MAX_EOS]; /* an int or a list of ints in the file */
    int64_t pad_token_id;           /* -1 when absent/null */
} txc_hf_config;

/* Read model_dir/config.json into *out (the whole struct is written, with
 * defaults for absent fields). Errors: see above. */
txc_status txc_hf_config_load(const char *model_dir, txc_hf_config *out);

/* Parse config.json text (`len` bytes; need not be NUL-terminated).
 * `origin` names the text in messages ("DIR/config.json"); NULL means
 * "config.json". */
txc_status txc_hf_config_parse(const char *json_text, size_t len, const char *origin,
                               txc_hf_config *out);

typedef struct txc_generation_config {
    bool present;                   /* false when the file does not exist (not an error) */
    int64_t bos_token_id;           /* -1 when absent */
    int n_eos;                      /* 0 when absent */
    int64_t eos_token_id[TXC_MAX_EOS];
    int64_t pad_token_id;           /* -1 when absent */
    int64_t max_length;             /* -1 when absent (GenerationConfig's default is 20: the caller
                                       decides; txc's generate uses its own limits) */
    int64_t max_new_tokens;         /* -1 when absent */
    bool do_sample;                 /* default false */
    double temperature;             /* default 1.0; >= 0 */
    double top_p;                   /* default 1.0; in [0, 1] */
    double min_p;                   /* default 0 = none (GenerationConfig's None); in [0, 1] */
    double repetition_penalty;      /* default 1.0; > 0 */
    int64_t top_k;                  /* default 50; >= 0 (0 = no top-k) */
    /* GenerationConfig keys that change what transformers generates but
     * that txc does not implement, in file order, each once: present, not
     * null and not at the value that turns them off (num_beams 1,
     * no_repeat_ngram_size 0, ...; the sampling-only ones such as
     * typical_p only with do_sample true, as transformers applies them).
     * Each entry is "key value" (the value as JSON, cut to fit); the
     * caller decides whether to warn (txc's command line prints one
     * warning line per entry, as transformers warns). */
    int n_ignored;
    char ignored[TXC_MAX_IGNORED_GEN_KEYS][80];
} txc_generation_config;

/* Read model_dir/generation_config.json into *out. A missing file gives
 * the defaults with present = false and TXC_OK. Errors: TXC_ERR_IO
 * (exists but unreadable), TXC_ERR_FORMAT (as above; also out-of-range
 * sampling values, and max_new_tokens 0: transformers' GenerationConfig
 * .validate() refuses max_new_tokens <= 0). */
txc_status txc_generation_config_load(const char *model_dir, txc_generation_config *out);

/* Parse generation_config.json text (sets present = true). */
txc_status txc_generation_config_parse(const char *json_text, size_t len, const char *origin,
                                       txc_generation_config *out);

/* The defaults (present = false). */
void txc_generation_config_defaults(txc_generation_config *out);

#ifdef __cplusplus
}
#endif
#endif
