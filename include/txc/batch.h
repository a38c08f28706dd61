/*
 * txc/batch.h — batched generation: slots over one StaticCache, continuous
 * (iteration-level) batching, batch-invariant results.
 *
 * Where it comes from:
 *   - transformers' generate() over a left-padded batch (padding_side=
 *     "left": every row's real tokens end at the last column, position_ids
 *     from the attention mask) and StaticCache(max_batch_size=B,
 *     max_cache_len=N): one (B, num_key_value_heads, N, head_dim) buffer per
 *     layer and K/V, one row per sequence;
 *   - iteration-level scheduling (Orca, OSDI '22; vLLM; llama.cpp's
 *     llama-server "slots", -np): a fixed number of slots; between two
 *     decode steps a new request takes a free slot, a finished one frees
 *     its slot at once; a prompt is prefilled in chunks interleaved with the
 *     running decodes (vLLM's chunked prefill, llama-server's n_batch), so a
 *     long prompt does not stall the streams already running;
 *   - prefix reuse (llama-server's cache_prompt, txc_generator_session): a
 *     free slot keeps the ids whose keys and values it holds; a new request
 *     takes the free slot sharing the longest prefix with its prompt and
 *     prefills only the rest.
 *
 * The batch (txc_batch) owns a StaticCache of n_slots rows:
 *   key/value cache per layer: float32 (n_slots, num_key_value_heads,
 *   max_cache_len, head_dim); slot s is row s.
 *
 * One step (txc_batch_step):
 *   1. prefill: of the slots whose prompt is not all in the cache yet, the
 *      one that waited longest runs its next chunk of at most prefill_chunk
 *      tokens, padded (compiled) to a bucket: a power of two up to 32
 *      tokens, a multiple of 8 above. The slots in the cache rows next to
 *      it whose chunks have the same padded length run in the same forward
 *      (input_ids (G, Lp), each row its own cache_position and last real
 *      token; chunks of up to 32 rows while the group has at most 32 rows:
 *      see batch invariance below), as one weight pass for all of them
 *      (llama-server and vLLM put every slot's prompt tokens in one batch).
 *      Then the same for the longest-waiting slot left, while the step's
 *      padded prompt rows stay within prefill_tokens (the first group runs
 *      whatever its size; the rest wait, first come first served). A chunk
 *      that ends the prompt yields the first new token.
 *   2. decode: every slot that is generating (its prompt done and a token to
 *      feed) advances by one token in ONE forward: input_ids (Bk, 1) with
 *      each row its own cache_position (Bk, 1) (its own valid length), Bk
 *      the smallest power of two (at most n_slots) above the highest busy
 *      slot; rows of free or prefilling slots in [0, Bk) are fed at the
 *      position just past what they hold (nothing valid is overwritten;
 *      their outputs are ignored). Compiled (jit), the step has one plan per
 *      Bk: requests coming and going do not recompile it.
 *   Each slot yields at most one token per step (txc_batch_event).
 *
 * Batch invariance: a request's tokens and logits (bits) do not depend on
 * the other requests, the number of slots, the slot it runs in, or when it
 * was added: they are those of the same request alone in a batch with the
 * same max_cache_len and prefill_chunk. Decode rows of one forward are
 * independent: the GEMMs give every row the summation order of one row
 * (txc_kern_gemm_nt's row invariance, src/ops/kernels.h), attention reads
 * only the row's own valid prefix with the one-row kernel (per row, see
 * txc_model_forward), nothing reduces across rows, and each request has its
 * own RNG state ([seed, 0] at add, one uniform per sampled token). Prefill
 * rows of one forward are independent the same way: a slot's chunks are a
 * function of the request alone, the GEMM kernel is chosen by the row
 * count (the multi-row GEMV up to TXC_KERN_ROWS_INVARIANT_MAX rows, whose
 * rows have the bits of one row; above, the many-row GEMM, whose rows have
 * bits independent of the row count), so a group keeps each chunk's own
 * kernel: chunks of more than 32 rows group freely, shorter ones only while
 * the group has at most 32 rows. A prompt that fits one chunk is prefilled
 * as txc_generator_run's compiled prefill (its own length up to 32 padded
 * to the same power of two; above 32 padded to a multiple of 8 instead of
 * a power of two: the padding rows come after the real ones and no real
 * row attends to them), so its tokens are also those of `txc generate`
 * with the same max_cache_len (greedy or seeded).
 * With prefix reuse the reused keys and values were computed by an earlier
 * request (its prefill chunks and decode steps), which may round
 * differently from a fresh prefill of the same ids (see
 * txc_generator_session_run): set cache_prompt false where bit-exactness
 * against a fresh run matters.
 *
 * Thread safety: none inside. One thread (the server's scheduler thread)
 * makes every call on a batch; the model and its env must not be used by
 * anything else while a batch exists (one env is single-threaded; the
 * kernels use the env's thread pool).
 */
#ifndef TXC_BATCH_H
#define TXC_BATCH_H

#include <stdbool.h>
#include <stdint.h>
#include "txc/generate.h"
#include "txc/model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TXC_BATCH_MAX_SLOTS 32 /* = the GEMMs' row-invariance bound, TXC_KERN_ROWS_INVARIANT_MAX */
#define TXC_BATCH_MAX_TOP_LOGPROBS 20 /* OpenAI's top_logprobs limit */

typedef struct txc_batch_options {
    int n_slots;            /* 1..TXC_BATCH_MAX_SLOTS; default 8 (llama-server's -np, txc serve --parallel) */
    int64_t max_cache_len;  /* per slot; 0: min(4096, max_position_embeddings); cut to max_position_embeddings */
    int64_t prefill_chunk;  /* prompt tokens of one slot per step; default 256 (>= 1) */
    int64_t prefill_tokens; /* prompt rows (padded) of all slots' prefills in one step; default 512 (vLLM's
                               max_num_batched_tokens, llama.cpp's n_batch); 0: prefill_chunk. The step's
                               first group runs whatever its size */
    bool jit;               /* compiled prefill and decode steps (txc/jit.h); default true */
} txc_batch_options;

/* n_slots 8, max_cache_len 0, prefill_chunk 256, prefill_tokens 512, jit true. */
txc_batch_options txc_batch_default_options(void);

typedef struct txc_batch txc_batch;

/* A batch over `model` (which must outlive it). Allocates the StaticCache:
 * 2 * num_hidden_layers * n_slots * num_key_value_heads * max_cache_len *
 * head_dim float32. Errors (NULL, txc_last_error()): TXC_ERR_INVALID for an
 * option out of range (named); TXC_ERR_UNSUPPORTED for a model whose
 * positions are batch-dependent (dynamic NTK RoPE: transformers scales it
 * by the batch's longest sequence); TXC_ERR_NOMEM. */
txc_batch *txc_batch_new(txc_model *model, const txc_batch_options *opts);
void txc_batch_free(txc_batch *b);

int txc_batch_n_slots(const txc_batch *b);
int64_t txc_batch_max_cache_len(const txc_batch *b);
/* Slots with a request (prefilling or generating). */
int txc_batch_busy(const txc_batch *b);

/* One request. `gen` holds what txc_generate_options holds for one
 * sequence: max_new_tokens (>= 1), n_eos / eos_token_id, do_sample,
 * temperature, top_k, top_p, min_p, repetition_penalty, seed (start from
 * txc_generate_default_options(model, dir)); its cache, jit, max_cache_len,
 * on_token and ctx are ignored. */
typedef struct txc_batch_request {
    uint64_t id;                /* the caller's tag, echoed in every event */
    const int32_t *input_ids;   /* the prompt, n_input >= 1 ids (copied by txc_batch_add) */
    int64_t n_input;
    txc_generate_options gen;
    /* OpenAI's penalties (applied before repetition_penalty and sampling, to
     * the logits of the tokens GENERATED so far, prompt excluded):
     *   logits[t] -= presence_penalty * (count[t] > 0) + frequency_penalty * count[t]
     * each in [-2, 2]; 0: off. */
    double presence_penalty, frequency_penalty;
    /* Log-probabilities of the chosen token (log_softmax of the model's
     * logits, before any processor: vLLM's default "raw" logprobs) and of
     * the top_logprobs most likely tokens (0..TXC_BATCH_MAX_TOP_LOGPROBS). */
    bool logprobs;
    int top_logprobs;
    /* When not NULL: room for max_new_tokens * vocab_size floats, receiving
     * each new token's raw logits row in order (transformers'
     * generate(output_logits=True); the rows batch invariance is about). */
    float *logits_out;
    /* Reuse the prefix a free slot holds (llama-server's cache_prompt;
     * txc_batch_default_request sets it true, a zeroed request has it off). */
    bool cache_prompt;
} txc_batch_request;

/* A zeroed request with gen = txc_generate_default_options(model, model_dir)
 * and cache_prompt true. */
txc_batch_request txc_batch_default_request(const txc_model *model, const char *model_dir);

/* Put `req` into a free slot (returned in *slot): the free slot sharing
 * the longest prefix with the prompt when cache_prompt, else the lowest
 * free one. Nothing runs until txc_batch_step. Errors (checked before
 * anything changes; the batch is as before):
 *   TXC_ERR_CAPACITY no free slot ("all N slots are busy"), or the prompt
 *                    has max_cache_len ids or more (message names both
 *                    numbers: "the prompt has 5000 tokens, more than the
 *                    context (max_cache_len 4096)");
 *   TXC_ERR_INVALID  n_input < 1, an id outside the vocabulary (named with
 *                    its position), max_new_tokens < 1, a sampling field
 *                    out of range (as txc_generator_run), a penalty
 *                    outside [-2, 2], top_logprobs outside [0, 20]. */
txc_status txc_batch_add(txc_batch *b, const txc_batch_request *req, int *slot);

typedef enum txc_batch_finish {
    TXC_BATCH_RUNNING = 0, /* more tokens will come */
    TXC_BATCH_STOP = 1,    /* the token is one of eos_token_id (OpenAI finish_reason "stop") */
    TXC_BATCH_LENGTH = 2,  /* max_new_tokens reached, or the slot's cache is full ("length") */
    TXC_BATCH_ERROR = 3,   /* the step failed (no token; see txc_batch_step) */
} txc_batch_finish;

/* What one slot did in one step. */
typedef struct txc_batch_event {
    int slot;
    uint64_t id;                /* the request's id */
    int32_t token_id;           /* the new token (-1 with TXC_BATCH_ERROR) */
    txc_batch_finish finish;    /* not RUNNING: the slot is free again when the event is returned */
    int64_t n_new;              /* tokens generated so far, this one included */
    int64_t n_prompt, n_reused; /* prompt ids, of which taken from the slot's cache (prefix reuse) */
    /* request.logprobs only: */
    float logprob;
    int n_top;                  /* = request.top_logprobs */
    int32_t top_ids[TXC_BATCH_MAX_TOP_LOGPROBS];  /* most likely first (ties: lower id first) */
    float top_logprobs[TXC_BATCH_MAX_TOP_LOGPROBS];
} txc_batch_event;

/* One scheduler step (see the top of this file): at most one event per busy
 * slot, in slot order, written to events[0..*n_events) (max_events >=
 * n_slots is always enough). A step with nothing to do returns at once
 * with *n_events = 0. Errors: TXC_ERR_INVALID for max_events < n_slots;
 * an error of the model (out of memory, a kernel's): then every busy
 * request is ended with a TXC_BATCH_ERROR event, every slot is free and its
 * kept prefix forgotten, and the status is returned. */
txc_status txc_batch_step(txc_batch *b, txc_batch_event *events, int max_events, int *n_events);

/* End the request in `slot` now (a cancelled or disconnected client, a
 * stop string found by the caller): the slot is free at once and keeps the
 * ids whose keys and values it holds for prefix reuse. No event follows.
 * Errors: TXC_ERR_INVALID for a slot out of range or free. */
txc_status txc_batch_cancel(txc_batch *b, int slot);

/* Counters since txc_batch_new (for txc serve's /metrics, txc bench). */
typedef struct txc_batch_stats {
    uint64_t steps;            /* txc_batch_step calls that ran a forward */
    uint64_t requests;         /* requests added */
    int64_t prefill_tokens;    /* prompt ids run through the model (reused ones excluded) */
    int64_t reused_tokens;     /* prompt ids taken from a slot's cache */
    int64_t decode_tokens;     /* tokens generated (first tokens of prefills included) */
    double prefill_ms;         /* wall time in prefill chunks */
    double decode_ms;          /* wall time in decode forwards and sampling */
    uint64_t prefill_forwards; /* prefill forwards run (a group of slots is one) */
    int64_t prefill_rows;      /* rows they ran, padding included (prefill_tokens counts the real ones) */
    int64_t compilations;      /* plans compiled (prefill + decode jits) */
    int decode_bucket;         /* rows of the last decode forward (Bk) */
} txc_batch_stats;
txc_batch_stats txc_batch_get_stats(const txc_batch *b);

/* Kernel-time profiling of the batch's compiled steps (`txc bench --batch
 * --profile`): on, every kernel launch of the prefill and decode plans is
 * timed from zero (txc_jit_set_profile on both jits); off keeps the counts.
 * txc_batch_jit: the jit of the prefill (which = 0) or decode (which != 0)
 * step, for txc_jit_get_profile / txc_jit_get_gemm_profile / txc_jit_get_stats;
 * valid until txc_batch_free (its plans are not run with opts.jit false). */
void txc_batch_set_profile(txc_batch *b, bool on);
const txc_jit *txc_batch_jit(const txc_batch *b, int which);

/* ---- convenience: a whole batch, as generate() on a left-padded batch ----
 * input_ids int32 (B, T) row-major, attention_mask uint8 (B, T) (1: a real
 * token; left padding: every row's zeros come first, then at least one 1),
 * NULL: no padding. Every row is generated with `req` (its id = the row,
 * its input_ids = the row's real tokens) through a batch of
 * min(B, opts->n_slots) slots, rows taking slots as they free up; each
 * row's result as txc_generator_run's (new_ids including the eos that
 * stopped it, stop_reason "eos_token_id", "max_new_tokens" or
 * "max_cache_len"), its tokens those of the row alone (batch invariance).
 * results[0..B) are filled (free each with txc_generate_result_free).
 * Errors: TXC_ERR_INVALID for a mask that is not left padding (naming the
 * row) and those of txc_batch_new / txc_batch_add / txc_batch_step; on error
 * no result needs freeing. */
txc_status txc_batch_generate(txc_model *model, const txc_batch_options *opts, int64_t B, int64_t T,
                              const int32_t *input_ids, const uint8_t *attention_mask,
                              const txc_batch_request *req, txc_generate_result *results);

#ifdef __cplusplus
}
#endif
#endif
