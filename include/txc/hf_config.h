/*
 * txc/hf_config.h — a Hugging Face model's config.json and
 * generation_config.json.
 *
 * Field names are transformers' own. Defaults are those of transformers'
 * LlamaConfig (configuration_llama.py) for the architecture fields and of
 * GenerationConfig (generation/configuration_utils.py) for generation; a
 * JSON null counts as absent (transformers' `None` -> default), except
 * where noted.
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

typedef struct txc_hf_config {
    char model_type[64];            /* "llama", "mistral", "qwen2", ... as given (required) */
    char architecture[128];         /* architectures[0] or "" */
    /* Required, > 0: vocab_size, hidden_size, intermediate_size,
     * num_hidden_layers, num_attention_heads (transformers would fall back to
     * LlamaConfig's 7B sizes; a checkpoint without them is treated as
     * malformed rather than silently given 4096-wide shapes). */
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
    char hidden_act[32];            /* default "silu" */
    char torch_dtype[16];           /* "torch_dtype" or the newer "dtype": "float32", "bfloat16"... or "" */
    bool has_rope_scaling;          /* rope_scaling is an object (or rope_parameters has a
                                       rope_type other than "default") */
    char rope_scaling_type[32];     /* its "rope_type" or, older, "type"; "" if neither */
    int64_t sliding_window;         /* 0 when absent or null */
    bool use_sliding_window;        /* false when absent */
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
} txc_generation_config;

/* Read model_dir/generation_config.json into *out. A missing file gives
 * the defaults with present = false and TXC_OK. Errors: TXC_ERR_IO
 * (exists but unreadable), TXC_ERR_FORMAT (as above; also out-of-range
 * sampling values). */
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
