/*
 * txc/generate.h — the decode loop (transformers' GenerationMixin.generate:
 * greedy search, or sampling with do_sample).
 *
 * prefill: one forward over the prompt (cache_position 0..n-1);
 * decode:  one token at a time, cache_position n, n+1, ... (after a
 *          prefill of n tokens the next position is n, not n+1);
 * stop:    when the new token is any of eos_token_id (an id or a list of
 *          ids, compared as ids, never as strings) or after max_new_tokens.
 * With TXC_CACHE_NONE every step re-runs the whole sequence (no cache).
 * All three cache modes produce the same tokens.
 *
 * The next token (transformers' logits processors, in transformers' order):
 *   repetition_penalty != 1: the scores of the tokens already in the
 *       sequence (prompt included) become s * p where s < 0, s / p else
 *       (RepetitionPenaltyLogitsProcessor; greedy too);
 *   greedy (do_sample false): argmax;
 *   do_sample: scores / temperature (TemperatureLogitsWarper), then top_k,
 *       top_p, min_p and an inverse-CDF draw (txc_sample in txc/ops.h) with
 *       a uniform from the RNG state.
 * The RNG state is a tensor [seed, counter] made at the start of each run
 * from `seed`; every step draws one uniform at `counter` and advances it by
 * one. The compiled steps take the state as an input and advance it in
 * place inside the plan (txc_rng_advance_), so the same seed gives the same
 * tokens eager and compiled, and one plan serves every step. Sampling
 * parameters are static arguments of the plans (a new value compiles anew).
 *
 * Stop strings need the decoded text, which this layer does not have: the
 * caller stops through on_token (the txc command line's --stop does).
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
    /* Sampling, as transformers' GenerationConfig (defaults from
     * generation_config.json; greedy when do_sample is false). Checked by
     * txc_generator_run (TXC_ERR_INVALID). */
    bool do_sample;                  /* default false (greedy) */
    double temperature;              /* > 0 when sampling; 1: off */
    int64_t top_k;                   /* >= 0; 0: off (GenerationConfig's default 50) */
    double top_p;                    /* in [0, 1]; 1: off */
    double min_p;                    /* in [0, 1]; 0: off */
    double repetition_penalty;       /* > 0; 1: off; applies to greedy search too */
    uint64_t seed;                   /* the RNG state is [seed, 0] at the start of a run; default 0 */
    /* Called with each new token as soon as it is chosen (streaming);
     * returning false stops generation. May be NULL. */
    bool (*on_token)(void *ctx, int32_t token_id);
    void *ctx;
} txc_generate_options;

/* Defaults: max_new_tokens 256, static cache, eos from the model's
 * generation_config.json when present, else config.json; max_new_tokens
 * and the sampling fields (do_sample, temperature, top_k, top_p, min_p,
 * repetition_penalty) from generation_config.json, else GenerationConfig's
 * defaults (greedy; temperature 1, top_k 50, top_p 1, min_p off, no
 * penalty); seed 0. */
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
    int64_t rng_counter;        /* the RNG state's counter at the end (uniforms drawn; 0 when greedy) */
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

/* The logits processors and the choice of the next token, as ops (what
 * the eager and the compiled steps both run): `logits` (..., V) — its last
 * row is used; `seen` (V) bool, true for the tokens in the sequence so far
 * (needed when repetition_penalty != 1, else may be NULL); `rng_state`
 * int64 (2) (needed with do_sample, advanced by one; else may be NULL).
 * Returns the token as an int64 tensor of one element. */
txc_tensor *txc_generate_next_token(txc_tensor *logits, txc_tensor *seen, txc_tensor *rng_state,
                                    const txc_generate_options *opts);
/* RepetitionPenaltyLogitsProcessor on one row: where(seen, where(scores < 0,
 * scores * penalty, scores / penalty), scores). scores (V), seen (V) bool. */
txc_tensor *txc_repetition_penalty(txc_tensor *scores, txc_tensor *seen, double penalty);

/* Generation from `input_ids` (n_input >= 1, batch 1).
 * Errors: TXC_ERR_CAPACITY when the prompt is longer than max_cache_len
 * (static cache) or than max_position_embeddings — checked before any work;
 * TXC_ERR_INVALID for ids outside the vocabulary or bad options; any error
 * from the model. On error *result holds nothing to free. */
txc_status txc_generate(txc_model *model, const int32_t *input_ids, int64_t n_input,
                        const txc_generate_options *opts, txc_generate_result *result);
void txc_generate_result_free(txc_generate_result *result);

/* Save the compiled steps' plans to, and load them from, the folder `dir`
 * (txc_jit_set_compile_cache on both steps; NULL or "" turns it off, the
 * default). Their txc_generator_jit_stats count the loads and saves. */
txc_status txc_generator_set_compile_cache(txc_generator *gen, const char *dir);

#ifdef __cplusplus
}
#endif
#endif
