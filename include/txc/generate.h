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
    double prefill_compile_ms;  /* ...of which during the prefill (part of prefill_ms) */
    int64_t rng_counter;        /* the RNG state's counter at the end (uniforms drawn; 0 when greedy) */
    /* The prompt's ids whose keys and values came from a session's cache
     * (txc_generator_session_run; 0 otherwise) and those run through the
     * model by the prefill (n_reused + n_prefilled = n_input when a token
     * was generated; 0 prefilled when none was). */
    int64_t n_reused, n_prefilled;
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
/* Kernel time per op kind of the compiled prefill (which = 0) and decode
 * (1) steps: txc_jit_set_profile / txc_jit_get_profile on both jits. */
void txc_generator_set_profile(txc_generator *gen, bool on);
int txc_generator_jit_profile(const txc_generator *gen, int which, txc_jit_op_time *out, int max);
/* The same steps' kernel time per GEMM shape: txc_jit_get_gemm_profile. */
int txc_generator_jit_gemm_profile(const txc_generator *gen, int which, txc_jit_gemm_time *out, int max);
/* As txc_generate, reusing the generator's compiled steps. */
txc_status txc_generator_run(txc_generator *gen, const int32_t *input_ids, int64_t n_input,
                             const txc_generate_options *opts, txc_generate_result *result);

/* ---- sessions: the KV cache kept between runs (multi-turn chat) ------------
 * transformers reuses a cache across generate() calls by passing it back
 * (generate(input_ids, past_key_values=cache), its docs' "Re-use Cache to
 * continue generation", the way multi-turn chat keeps a conversation's
 * cache): the new input_ids hold the WHOLE conversation, and only the ids
 * past the cache's length are run. A session does the same, and checks
 * the ids instead of trusting the length:
 *
 *   txc_generator_session *s = txc_generator_session_new(gen, TXC_CACHE_STATIC, 2048);
 *   txc_generator_session_run(s, turn1_ids, n1, &opts, &r1);  // prefill n1 ids
 *   // turn2_ids = turn1_ids + the reply + the next user message (re-tokenized)
 *   txc_generator_session_run(s, turn2_ids, n2, &opts, &r2);  // prefill only the suffix
 *
 * Each run takes the full sequence so far (prompt ids, batch 1), finds the
 * longest common prefix P with the ids whose keys and values the cache
 * holds, and prefills ids[P, n) at cache_position P.. (a compiled static
 * prefill is padded to a power-of-two bucket from P on; the padding's
 * positions lie past the sequence, where nothing valid is kept). Then it
 * decodes as txc_generator_run, and the tokens are those of a fresh
 * txc_generator_run over the same ids with the same options (greedy or
 * sampled: the RNG state starts at [seed, 0] each run), eager or compiled.
 * (The keys and values of the previous reply were computed one token at a
 * time, a fresh run computes them in one prefill: equal where the kernels'
 * row results do not depend on the number of rows, as for float32
 * weights; bf16 weights on AMX round a prefill's activations to bf16, so
 * there they differ by rounding, as the cache of transformers' reuse does,
 * and a near tie may choose another token.)
 *   - The cache holds the previous run's prompt and new ids but its LAST
 *     new id: a sampled id is never fed to the model. It is prefilled with
 *     the next suffix when the sequence keeps it.
 *   - When the whole sequence is cached (P = n), the last id runs again:
 *     its logits give the first new token.
 *   - When the sequence departs from the cached one (an edited turn, or a
 *     reply that re-tokenizes differently), the cache is cropped to P
 *     (txc_kv_cache_crop: a StaticCache's stale entries are never read,
 *     attention being bounded by cache_position, and are overwritten).
 *   - TXC_CACHE_NONE: every step re-runs the whole sequence (nothing kept).
 * opts->cache and opts->max_cache_len are the session's, not the options'.
 *
 * Errors of txc_generator_session_run: as txc_generator_run (TXC_ERR_INVALID
 * for ids outside the vocabulary or bad options), and TXC_ERR_CAPACITY when
 * the sequence has max_cache_len ids or more (static: no room for a reply;
 * message "the conversation has N tokens, more than (or: as many as) the
 * session's max_cache_len M") or as many as max_position_embeddings or more
 * (in every cache kind: "... as many as max_position_embeddings P (no room
 * for a new token)"). These
 * are found before any work and leave the session as it was. A reply that
 * reaches the end of the StaticCache stops early (stop_reason
 * "max_cache_len"). An error during the run (out of memory, a kernel's)
 * resets the session: the next run prefills everything. */
typedef struct txc_generator_session txc_generator_session;
/* A session over `gen` (which must outlive it) with a cache of `kind`;
 * a StaticCache is allocated now, (1, num_key_value_heads, max_cache_len,
 * head_dim) float32 per layer and K/V: max_cache_len 0 means
 * min(4096, max_position_embeddings), larger values are cut to
 * max_position_embeddings. Errors: TXC_ERR_INVALID (max_cache_len < 0, an
 * unknown kind), TXC_ERR_NOMEM; NULL then. */
txc_generator_session *txc_generator_session_new(txc_generator *gen, txc_cache_kind kind, int64_t max_cache_len);
void txc_generator_session_free(txc_generator_session *sess);
/* Forget the conversation (the StaticCache's buffer is kept). */
void txc_generator_session_reset(txc_generator_session *sess);
/* Ids whose keys and values the cache holds now (0 for TXC_CACHE_NONE). */
int64_t txc_generator_session_cached(const txc_generator_session *sess);
/* The StaticCache's length (else max_position_embeddings; INT64_MAX with
 * dynamic NTK RoPE). */
int64_t txc_generator_session_max_cache_len(const txc_generator_session *sess);
/* Generate from the whole sequence `input_ids` (n_input >= 1), reusing the
 * session's cache as described above; result as txc_generator_run, with
 * n_reused / n_prefilled set. */
txc_status txc_generator_session_run(txc_generator_session *sess, const int32_t *input_ids, int64_t n_input,
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
 * Errors: TXC_ERR_CAPACITY when the prompt is as long as max_cache_len or
 * longer (static cache: the sequence, prompt + new tokens, fits the cache,
 * as transformers' max_length <= max_cache_len), or as long as
 * max_position_embeddings or longer in every cache kind (the sequence
 * holds at most that many tokens, so such a prompt leaves no new token;
 * this message comes first) — checked before any work; a max_new_tokens
 * past what the positions hold is cut there (stop_reason
 * "max_position_embeddings"), up to INT64_MAX without overflow;
 * TXC_ERR_INVALID for ids outside the vocabulary or bad options; any error
 * from the model. On error *result holds nothing to free. */
txc_status txc_generate(txc_model *model, const int32_t *input_ids, int64_t n_input,
                        const txc_generate_options *opts, txc_generate_result *result);
void txc_generate_result_free(txc_generate_result *result);

/* Save the compiled steps' plans to, and load them from, the folder `dir`
 * (txc_jit_set_compile_cache on both steps; NULL or "" turns it off, the
 * default). Their txc_generator_jit_stats count the loads and saves. */
txc_status txc_generator_set_compile_cache(txc_generator *gen, const char *dir);
/* The compile cache folder's size cap in bytes, 0: none
 * (txc_jit_set_compile_cache_max_bytes on both steps; the default is
 * TXC_JIT_COMPILE_CACHE_MAX_BYTES). Errors: TXC_ERR_INVALID (negative). */
txc_status txc_generator_set_compile_cache_max_bytes(txc_generator *gen, int64_t max_bytes);

#ifdef __cplusplus
}
#endif
#endif
