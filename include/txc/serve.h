/*
 * txc/serve.h — an OpenAI-compatible HTTP server over one model
 * (`txc serve`), in the manner of llama.cpp's llama-server and vLLM's
 * OpenAI server: libmicrohttpd for HTTP, cJSON for the bodies.
 *
 *   GET  /health                 {"status": "ok"} (503 "loading"/"stopping")
 *   GET  /v1/models              the one model ({"object": "list", "data": [...]})
 *   POST /v1/completions         OpenAI's legacy completions (prompt: a string or token ids)
 *   POST /v1/chat/completions    messages rendered with the model's chat template
 *   GET  /metrics                Prometheus text format 0.0.4
 *
 * Request fields: model, max_tokens / max_completion_tokens, temperature
 * (0: greedy), top_p, top_k, min_p, seed, stop (a string or a list),
 * presence_penalty / frequency_penalty, logprobs / top_logprobs (chat) or
 * logprobs (completions), stream with stream_options.include_usage, n
 * (only 1), and llama-server's repetition_penalty, cache_prompt (reuse a
 * free slot's prefix; default true) and ignore_eos. Responses as OpenAI's (id, object,
 * created, model, choices[].finish_reason "stop" / "length", usage);
 * streaming as server-sent events, one "data: {json}\n\n" per chunk, then
 * "data: [DONE]\n\n". Errors as OpenAI's error object {"error": {"message",
 * "type", "param", "code"}}: 400 bad JSON or parameters (param names the
 * field; a prompt longer than the context names both numbers), 401 a
 * missing or wrong API key (Authorization: Bearer KEY) when one is set,
 * 404 an unknown route or model, 405 a known route with another method,
 * 413 a body over max_body_bytes, 431 a request line and header fields over
 * max_header_bytes, 503 the queue full (max_queue) or the server stopping.
 * (libmicrohttpd answers alone, with its own HTML page, what never reaches
 * the server: headers past its per-connection memory, 16 x max_header_bytes
 * (1 MiB by default), a request line it cannot parse.)
 *
 * Threads: libmicrohttpd runs one thread per connection (parsing, chat
 * template, tokenizer, JSON); one scheduler thread owns the model and the
 * slots and runs the decode steps; a request crosses between them through
 * a bounded queue and its own condition variable. A client that closes
 * its connection is noticed by its connection thread (which watches the
 * socket while it waits) and its slot is freed before the next step.
 */
#ifndef TXC_SERVE_H
#define TXC_SERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "txc/chat_template.h"
#include "txc/generate.h"
#include "txc/model.h"
#include "txc/status.h"
#include "txc/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TXC_SERVE_VERSION "1"

typedef struct txc_serve_options {
    const char *host;          /* address to bind (default "127.0.0.1") */
    int port;                  /* TCP port; 0: any free one (txc_server_port tells which) */
    int parallel;              /* slots: requests decoded together (default 8) */
    int64_t max_cache_len;     /* tokens per slot, prompt + completion; 0: min(4096, max_position_embeddings) */
    const char *api_key;       /* NULL: no authentication */
    int max_queue;             /* requests waiting for a slot before 503 (default 64) */
    int max_connections;       /* open connections at most (default 256) */
    size_t max_body_bytes;     /* request bodies past this are 413 (default 8 MiB) */
    size_t max_header_bytes;   /* request line + header fields past this are 431 (default 64 KiB) */
    unsigned idle_timeout_s;   /* a connection idle this long is closed (default 30 s) */
    const char *model_id;      /* the name in /v1/models and responses (default: the folder's name) */
    bool verbose;              /* one line per request on stderr */
    /* Defaults of the requests (sampling, max_tokens, eos ids): as
     * txc_generate_default_options with the command line's flags applied;
     * max_new_tokens is the default max_tokens. */
    txc_generate_options defaults;
    /* The compiled steps' plan cache folder (NULL or "": none). */
    const char *compile_cache;
} txc_serve_options;

/* The defaults above (defaults.max_new_tokens 256, greedy). */
txc_serve_options txc_serve_default_options(void);

typedef struct txc_server txc_server;

/* A server over `model`, `tok` and `tpl` (NULL when the model has no chat
 * template: /v1/chat/completions is then a 400), which must outlive it.
 * Allocates the slots' caches and binds the socket; serves at once.
 * Errors: TXC_ERR_INVALID (bad options), TXC_ERR_IO (the address cannot be
 * bound: message names it), TXC_ERR_NOMEM. */
txc_status txc_server_start(txc_model *model, const txc_tokenizer *tok, const txc_chat_template *tpl,
                            const txc_serve_options *opts, txc_server **out);
/* The port it listens on. */
int txc_server_port(const txc_server *srv);
/* The tokens one slot holds (prompt + completion): the batch's max_cache_len. */
int64_t txc_server_max_cache_len(const txc_server *srv);
/* Stop: accept no new connections, answer queued requests with 503, let
 * running ones finish for up to grace_ms, then cancel them (a plain
 * request gets a 503 error object, a stream an error event and
 * "data: [DONE]"), give the connections up to 1 s to send their last bytes,
 * close them and join every thread. Calling it again does nothing;
 * txc_server_free calls it when needed. */
void txc_server_stop(txc_server *srv, int grace_ms);
void txc_server_free(txc_server *srv);

/* Tensor parallelism across processes (mpirun -np N txc serve --tp N): rank
 * 0 runs txc_server_start on its shard of the model and serves; every other
 * rank calls txc_serve_follow on its shard instead, which opens no socket
 * and runs the same batch steps as rank 0: before each step rank 0
 * broadcasts (txc_broadcast over the model's "tp" axis) the requests it
 * added to slots (prompt ids, sampling parameters, seed) and the slots it
 * cancelled since the last one, with the tokens its last step gave, and
 * every rank replays them on its own batch (txc/batch.h is deterministic in
 * its calls; every rank gets the same logits bits, so the same tokens).
 * Returns TXC_OK when rank 0's server stops (txc_server_stop / free);
 * errors: TXC_ERR_INVALID (the model is not tensor-parallel, or this is
 * rank 0; a rank whose batch or tokens differ from rank 0's: "out of step"),
 * TXC_ERR_NOMEM, TXC_ERR_FORMAT (a malformed message), those of
 * txc_batch_new. Idle, rank 0 sends a heartbeat every 50 ms, so a follower
 * waits for requests for any time without reaching the collectives'
 * deadline; a rank that dies ends the job as a collective's timeout does
 * (txc/shard.h). Under MPI the server's scheduler thread makes the
 * collectives (MPI_THREAD_SERIALIZED); in-process devices (--devices) are
 * not supported. */
txc_status txc_serve_follow(txc_model *model);

#ifdef __cplusplus
}
#endif
#endif
