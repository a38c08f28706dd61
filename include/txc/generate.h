/*
 * txc/generate.h — the decode loop (transformers' GenerationMixin.generate,
 * greedy search).
 *
 * prefill: one forward over the prompt (cache_position 0..n-1);
 * decode:  one token at a time, cache_position n, n+1, ... (after a
 *          prefill of n tokens the next position is n, not n+1);
 * stop:    when the new token is any of eos_token_id (an id or a list of
 *          ids, compared as ids, never as strings) or after max_new_tokens.
 * With TXC_CACHE_NONE every step re-runs the whole sequence (no cache).
 * All three cache modes produce the same tokens.
 */
#ifndef TXC_GENERATE_H
#define TXC_GENERATE_H

#include <stdbool.h>
#include <stdint.h>
#include "txc/cache.h"
#include "txc/jit.h"
#include "txc/model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TXC_MAX_EOS_IDS 8

typedef struct txc_generate_options {
    int64_t max_new_tokens;          /* > 0 */
    txc_cache_kind cache;            /* default TXC_CACHE_STATIC */
    bool jit;                        /* compile the steps (txc/jit.h); default true */
    int64_t max_cache_len;           /* static cache length; 0: prompt + max_new_tokens */
    int n_eos;                       /* 0: never stop on a token */
    int64_t eos_token_id[TXC_MAX_EOS_IDS];
    /* Called with each new token as soon as it is chosen (streaming);
     * returning false stops generation. May be NULL. */
    bool (*on_token)(void *ctx, int32_t token_id);
    void *ctx;
} txc_generate_options;

/* Defaults: max_new_tokens 256, static cache, eos from the model's
 * generation_config.json when present, else config.json. */
txc_generate_options txc_generate_default_options(const txc_model *model, const char *model_dir);

typedef struct txc_generate_result {
    int32_t *new_ids;   /* malloc'd; the generated ids, including the eos id when one stopped it */
    int64_t n_new;
    bool stopped_on_eos;
    double prefill_ms;  /* wall time of the prompt's forward + first token */
    double decode_ms;   /* wall time of the remaining n_new - 1 steps */
    int64_t max_cache_len; /* the static cache length used (0 otherwise) */
    const char *stop_reason; /* "eos_token_id", "max_new_tokens", "max_cache_len",
                                "max_position_embeddings" or "callback" (static string) */
    /* compiled steps only (zero when eager): */
    int64_t prefill_compilations, decode_compilations; /* plans compiled during this call */
    double compile_ms;          /* time spent tracing + compiling during this call */
} txc_generate_result;

/* A generator keeps what outlives one generation: the compiled prefill
 * and decode steps of a model (so a session of many prompts compiles each
 * signature once: decode once per cache shape, prefill once per prompt
 * bucket — prompts are padded to powers of two up to max_cache_len). */
typedef struct txc_generator txc_generator;
txc_generator *txc_generator_new(txc_model *model);
void txc_generator_free(txc_generator *gen);
/* Stats of the compiled prefill (which = 0) or decode (which = 1) step. */
txc_jit_stats txc_generator_jit_stats(const txc_generator *gen, int which);
const char *txc_generator_last_recompile_reason(const txc_generator *gen, int which);
/* As txc_generate, reusing the generator's compiled steps. */
txc_status txc_generator_run(txc_generator *gen, const int32_t *input_ids, int64_t n_input,
                             const txc_generate_options *opts, txc_generate_result *result);

/* Greedy generation from `input_ids` (n_input >= 1, batch 1).
 * Errors: TXC_ERR_CAPACITY when the prompt is longer than max_cache_len
 * (static cache) or than max_position_embeddings — checked before any work;
 * TXC_ERR_INVALID for ids outside the vocabulary or bad options; any error
 * from the model. On error *result holds nothing to free. */
txc_status txc_generate(txc_model *model, const int32_t *input_ids, int64_t n_input,
                        const txc_generate_options *opts, txc_generate_result *result);
void txc_generate_result_free(txc_generate_result *result);

#ifdef __cplusplus
}
#endif
#endif
