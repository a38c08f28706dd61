/* serve/serve_impl.h — what the server's files share (not a public header):
 * a request as parsed from its JSON body, its output as the scheduler fills
 * it, the shared state of the server (one mutex), and the functions of each
 * file: protocol.c (OpenAI JSON in and out), stop.c (stop strings),
 * scheduler.c (the thread that owns the model), server.c (HTTP). */
#ifndef TXC_SERVE_IMPL_H
#define TXC_SERVE_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <microhttpd.h>

#include "txc/chat_template.h"
#include "txc/serve.h"
#include "txc/tokenizer.h"

#define SERVE_MAX_STOP 16        /* stop strings per request (OpenAI allows 4) */
#define SERVE_MAX_STOP_LEN 256   /* bytes per stop string */
#define SERVE_MAX_TOP_LOGPROBS 20 /* OpenAI's limit for chat; 5 for completions (TXC_BATCH_MAX_TOP_LOGPROBS) */
#define SERVE_MAX_MESSAGES 4096

typedef enum serve_endpoint { SERVE_COMPLETIONS, SERVE_CHAT } serve_endpoint;

/* An HTTP error as OpenAI's error object: {"error": {"message", "type",
 * "param", "code"}}. */
typedef struct serve_error {
    int status;          /* 400, 401, 404, 413, 503... (0: none) */
    const char *type;    /* "invalid_request_error", ... (static) */
    const char *code;    /* NULL or a static code string */
    char param[64];      /* the field at fault, "" when none */
    char message[512];
} serve_error;

/* Fill `e` (printf-style message) and return false (for `return serve_fail(...)`). */
bool serve_fail(serve_error *e, int status, const char *type, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* The decoding parameters of one request, resolved against the server's
 * defaults (protocol.c). */
typedef struct serve_sampling {
    bool do_sample;
    double temperature, top_p, min_p, repetition_penalty;
    int64_t top_k;
    uint64_t seed;
    double presence_penalty, frequency_penalty; /* OpenAI's: logit -= c * freq + (c > 0) * presence */
    int logprobs;      /* 0: none; else 1 + top_logprobs (chat) / logprobs (completions) */
    bool cache_prompt; /* reuse a free slot's prefix (llama-server's cache_prompt) */
    bool ignore_eos;   /* generate max_tokens whatever comes (llama-server's ignore_eos) */
} serve_sampling;

/* One generated token as the stream reports it (logprobs when asked). */
typedef struct serve_token {
    int32_t id;
    char *piece;       /* the text this token added to the decoded output (malloc'd) */
    float logprob;
    int n_top;
    int32_t top_id[SERVE_MAX_TOP_LOGPROBS];
    float top_logprob[SERVE_MAX_TOP_LOGPROBS];
} serve_token;

/* Where one generated token's output ends: r->n_text and r->n_toks once
 * it was processed. A stream sends one event per token (as OpenAI's and
 * llama-server's), not what happened to pile up since the last write. */
typedef struct serve_mark {
    size_t text;
    int64_t toks;
} serve_mark;

typedef enum serve_state { SERVE_QUEUED, SERVE_RUNNING, SERVE_DONE } serve_state;

typedef struct serve_request {
    /* ---- set by the HTTP thread before the request is queued (read-only after) */
    serve_endpoint endpoint;
    bool stream, include_usage;
    int64_t max_tokens;          /* resolved: >= 1 */
    serve_sampling sp;
    int n_stop;
    char *stop[SERVE_MAX_STOP];
    int32_t *ids;                /* the prompt's ids */
    int64_t n_ids;
    char id[48];                 /* "chatcmpl-..." / "cmpl-..." */
    time_t created;
    double t_arrive_ms;
    /* ---- shared, under server->mu ----------------------------------------- */
    int refs;                    /* the HTTP thread's and the scheduler's */
    serve_state state;
    bool cancelled;              /* the client went away: free the slot */
    char *text;                  /* the released output text (stop strings held back until decided) */
    size_t n_text, cap_text;
    serve_token *toks;           /* the generated tokens (the stop string's included) */
    int64_t n_toks, cap_toks;
    serve_mark *marks;           /* per generated token: n_text and n_toks after it (one SSE event each) */
    int64_t n_marks, cap_marks;
    int64_t n_completion;        /* tokens generated (usage.completion_tokens) */
    const char *finish_reason;   /* "stop" / "length" once done (static) */
    serve_error err;             /* a failure inside the scheduler (status 500 / 503) */
    double t_first_ms;           /* first token (TTFT), 0 before */
    pthread_cond_t cond;         /* signalled on new output and at the end */
    /* ---- the scheduler's own (no lock) ------------------------------------ */
    int slot;
    txc_detok_stream *detok;
    char *held;                  /* decoded text not released yet (may begin a stop string) */
    size_t n_held, cap_held;
    struct serve_request *next;  /* queue link */
} serve_request;

/* ---- protocol.c ------------------------------------------------------------ */

/* What the protocol layer needs from the server. */
typedef struct serve_context {
    const txc_tokenizer *tok;
    const txc_chat_template *tpl;   /* NULL: no chat template, /v1/chat/completions is a 400 */
    pthread_mutex_t *tpl_mu;        /* serialises renders */
    const char *model_id;
    int64_t context_len;            /* the tokens one slot holds (prompt + completion) */
    int32_t vocab_size;             /* the model's embedding rows */
    int64_t default_max_tokens;
    serve_sampling defaults;        /* the command line's / generation_config.json's */
    uint64_t *seed_counter;         /* requests without a seed: seed = (*seed_counter)++ (under mu) */
    pthread_mutex_t *mu;
} serve_context;

/* Parse a request body into `r` (zeroed by the caller): fields validated,
 * messages rendered and tokenized. False with `e` set (400 naming the
 * field, 404 for another model). `r` owns what it holds even on failure
 * (serve_request_free). */
bool serve_parse_request(const serve_context *c, serve_endpoint ep, const char *body, size_t len,
                         serve_request *r, serve_error *e);
void serve_request_free(serve_request *r);

/* JSON texts (malloc'd, NUL-terminated; NULL when out of memory). */
char *serve_error_json(const serve_error *e);
/* The whole response of a finished request (non-streaming). */
char *serve_response_json(const serve_context *c, const serve_request *r);
/* One SSE event "data: {...}\n\n" for a streamed request: the new text
 * text[text_from, text_to) and the tokens toks[tok_from, tok_to) (their
 * logprobs), with finish_reason when final; `first` adds the chat role.
 * The usage chunk and "data: [DONE]" are serve_sse_usage / SERVE_SSE_DONE. */
char *serve_sse_chunk(const serve_context *c, const serve_request *r, size_t text_from, size_t text_to,
                      int64_t tok_from, int64_t tok_to, bool first, bool final);
char *serve_sse_usage(const serve_context *c, const serve_request *r);
/* An error after a stream began, as OpenAI streams it: the error object
 * (serve_error_json) as one SSE event; the caller sends [DONE] after it. */
char *serve_sse_error(const serve_error *e);
#define SERVE_SSE_DONE "data: [DONE]\n\n"
char *serve_models_json(const serve_context *c);
/* The served model's object alone (GET /v1/models/{model}: OpenAI's "retrieve model"). */
char *serve_model_json(const serve_context *c);

/* ---- stop.c ---------------------------------------------------------------- */

/* Append decoded text to r->held and release into r->text what can no
 * longer begin a stop string. Returns 1 when a stop string completed (the
 * text before it is released, the rest dropped), 0 otherwise, -1 when out
 * of memory. `final`: no more text follows (everything held is released).
 * Called with server->mu held (r->text is shared). */
int serve_stop_feed(serve_request *r, const char *piece, size_t n, bool final);

/* ---- the server (server.c: HTTP; scheduler.c: the model's thread) ---------- */

typedef struct serve_metrics {
    uint64_t requests[2];          /* completions, chat: accepted into the queue */
    uint64_t responses[600];       /* by HTTP status */
    uint64_t prompt_tokens, completion_tokens, cancelled;
    uint64_t prefill_tokens, decode_tokens; /* run through the model */
    double prefill_s, decode_s;    /* wall time of the steps */
    uint64_t steps;
} serve_metrics;

struct serve_engine;
typedef struct serve_tp serve_tp;       /* tp_serve.c: the step record of a tensor-parallel model */
typedef struct serve_watch serve_watch; /* deadline.c: one connection's request deadline */

struct txc_server {
    txc_serve_options o;
    char *host, *api_key, *model_id, *compile_cache;
    txc_model *model;
    serve_context ctx;
    pthread_mutex_t mu, tpl_mu;
    pthread_cond_t sched_cond;     /* the scheduler waits on it for work */
    serve_request *queue_head, *queue_tail;
    int n_queued, n_busy;
    int n_open;                    /* HTTP requests being handled (their conn alive) */
    bool stopping;                 /* no new requests; the queue is answered 503 */
    bool cancel_all;               /* the grace time is over: cancel what runs */
    bool sched_exit;
    bool sched_started, stopped;
    pthread_t sched;
    struct serve_engine *engine;
    serve_tp *tp;                  /* NULL unless the model is tensor-parallel (mpirun ... --tp N) */
    uint64_t seed_counter;
    serve_metrics m;
    struct MHD_Daemon *daemon;
    int port;
    int listen_fd;                 /* after MHD_quiesce_daemon, closed after the stop */
    /* deadline.c: the connections receiving a request (under watch_mu) */
    pthread_mutex_t watch_mu;
    pthread_cond_t watch_cond;
    serve_watch *watch_head;
    pthread_t watchdog;
    bool watchdog_started, watch_exit;
};

/* server.c */
txc_status serve_http_start(txc_server *srv);
void serve_http_quiesce(txc_server *srv); /* stop accepting connections */
void serve_http_stop(txc_server *srv);    /* close every connection, join the threads */

/* deadline.c: a request must arrive whole within --timeout (idle_timeout_s)
 * seconds of its start. serve_conn_notify is the daemon's
 * MHD_OPTION_NOTIFY_CONNECTION; the HTTP side calls serve_deadline_received
 * once a request's last byte is in, serve_deadline_next when its response
 * ended (the next request on the connection starts its clock). */
void serve_conn_notify(void *cls, struct MHD_Connection *mc, void **socket_context,
                       enum MHD_ConnectionNotificationCode code);
void serve_deadline_received(txc_server *srv, struct MHD_Connection *mc);
void serve_deadline_next(txc_server *srv, struct MHD_Connection *mc);
txc_status serve_deadline_start(txc_server *srv);
void serve_deadline_stop(txc_server *srv);

/* scheduler.c */
txc_status serve_sched_start(txc_server *srv);
/* Queue r (refs 2 taken: the caller's and the scheduler's); false with e
 * set (503) when the queue is full or the server stops. */
bool serve_submit(txc_server *srv, serve_request *r, serve_error *e);
/* The client went away: the scheduler frees its slot before the next step. */
void serve_cancel(txc_server *srv, serve_request *r);
/* Drop one reference (frees r at zero). Takes srv->mu. */
void serve_release(txc_server *srv, serve_request *r);
/* Stop the scheduler: queued requests fail with 503 at once, running ones
 * finish for up to grace_ms, then are cancelled; joins the thread. */
void serve_sched_stop(txc_server *srv, int grace_ms);

/* tp_serve.c: rank 0's side of a tensor-parallel model. serve_tp_new (no-op
 * for a model on one device) records, the scheduler making its batch calls
 * through serve_tp_add / _cancel / _step, which call txc_batch_* and record
 * them; _step broadcasts the record to the other ranks first
 * (txc_serve_follow replays it). serve_tp_idle_wait is the scheduler's wait
 * for work (mu held): with a tp model it waits at most 50 ms, then sends
 * a heartbeat. serve_tp_end (after the scheduler's loop): every rank stops. */
struct txc_batch;
struct txc_batch_options;
struct txc_batch_request;
struct txc_batch_event;
txc_status serve_tp_new(txc_server *srv, txc_model *model, const struct txc_batch_options *bo);
void serve_tp_free(txc_server *srv);
txc_status serve_tp_add(txc_server *srv, struct txc_batch *b, const struct txc_batch_request *q, int *slot);
txc_status serve_tp_cancel(txc_server *srv, struct txc_batch *b, int slot);
txc_status serve_tp_step(txc_server *srv, struct txc_batch *b, struct txc_batch_event *events, int max_events,
                         int *n_events);
void serve_tp_idle_wait(txc_server *srv);
void serve_tp_end(txc_server *srv);
/* The records of one step message (tp_serve.c's header comment), words as
 * int64: ADD slot n_input <SERVE_TP_REQ_WORDS words: the txc_batch_request
 * as bytes> ids..., CANCEL slot, EVENTS n (slot token finish)*n. A rank
 * but 0 replays w[0..n) on its batch `b` (txc_batch_add / _cancel; EVENTS
 * compared with `last`, its own previous step's n_last events). Errors:
 * TXC_ERR_FORMAT (a malformed record: an unknown kind, a count past the
 * message), TXC_ERR_INVALID (out of step with rank 0: another slot, other
 * events), the batch's own error for a request it refuses, TXC_ERR_NOMEM;
 * each message names `rank`. (Fuzzed: fuzz/fuzz_tp_step.c.) */
enum { SERVE_TP_REC_ADD = 1, SERVE_TP_REC_CANCEL, SERVE_TP_REC_EVENTS };
#define SERVE_TP_REQ_WORDS ((int64_t)((sizeof(struct txc_batch_request) + 7) / 8))
txc_status serve_tp_follow_records(struct txc_batch *b, const int64_t *w, int64_t n,
                                   const struct txc_batch_event *last, int n_last, int rank);

#endif
