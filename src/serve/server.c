/* The HTTP side of txc serve: libmicrohttpd with one thread per
 * connection. A connection thread reads the body (up to max_body_bytes,
 * else 413), checks the API key (401), routes (404 / 405), parses the
 * request (protocol.c), queues it for the scheduler (503 when full) and
 * then waits on the request's condition variable: a plain response is
 * sent when the request is done; a streamed one is a response callback
 * that turns each new piece of output into a server-sent event. While it
 * waits the thread watches its socket, so a client that goes away is
 * cancelled within one wait (50 ms), not at the end of its completion.
 * See include/txc/serve.h. */
#define _GNU_SOURCE /* POLLRDHUP */
#include "serve/serve_impl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define WAIT_MS 50

txc_serve_options txc_serve_default_options(void)
{
    txc_serve_options o;
    memset(&o, 0, sizeof o);
    o.host = "127.0.0.1";
    o.port = 8080;
    o.parallel = 8;
    o.max_queue = 64;
    o.max_connections = 256;
    o.max_body_bytes = 8u << 20;
    o.max_header_bytes = 64u << 10;
    o.idle_timeout_s = 30;
    o.defaults.max_new_tokens = 256;
    o.defaults.temperature = 1;
    o.defaults.top_p = 1;
    o.defaults.repetition_penalty = 1;
    return o;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- one connection ------------------------------------------------------------ */

typedef struct conn {
    txc_server *srv;
    char *body;
    size_t n_body, cap_body;
    bool too_big, answered;
    int fd;
    serve_request *req;  /* a streamed request (the connection's reference) */
    /* the stream: what was sent of the request's output */
    size_t text_sent;
    int64_t toks_sent, marks_sent;
    bool first_sent, final_sent, usage_sent, done_sent;
    char *pending;       /* the event being written */
    size_t n_pending, pending_at;
    double t_out_ms;     /* when the stream last handed bytes out (or began) */
} conn;

/* The client closed its end (or the socket failed): recv() would return 0. */
static bool peer_gone(int fd)
{
    if (fd < 0)
        return false;
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0)
        return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))
        return true;
    if (p.revents & POLLIN) {
        char c;
        ssize_t k = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        return k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
    }
    return false;
}

static void count_response(txc_server *srv, int status)
{
    pthread_mutex_lock(&srv->mu);
    if (status >= 0 && status < 600)
        srv->m.responses[status]++;
    pthread_mutex_unlock(&srv->mu);
}

static enum MHD_Result send_text(struct MHD_Connection *mc, conn *c, int status, char *text, const char *type)
{
    if (!text) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,"
                                  "\"code\":null}}";
        text = strdup(oom);
        status = 503;
        if (!text)
            return MHD_NO;
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (status == 401)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (status == 503)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (status == 405)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, POST");
    enum MHD_Result ret = MHD_queue_response(mc, (unsigned)status, resp);
    MHD_destroy_response(resp);
    c->answered = true;
    count_response(c->srv, status);
    return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *mc, conn *c, int status, char *json)
{
    return send_text(mc, c, status, json, "application/json");
}

static enum MHD_Result send_error(struct MHD_Connection *mc, conn *c, const serve_error *e)
{
    return send_json(mc, c, e->status, serve_error_json(e));
}

/* ---- the size of the request's head ------------------------------------------------ */

/* The bytes of the request line and header fields as sent ("Name: value\r\n"
 * each; the query string's "key=value&" pairs as MHD split them). */
static enum MHD_Result add_field(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                 const char *value, size_t value_size)
{
    size_t *n = cls;
    *n += key_size + value_size + (kind == MHD_HEADER_KIND ? 4 : 2);
    return MHD_YES;
}

static size_t head_bytes(struct MHD_Connection *mc, const char *method, const char *url, const char *version)
{
    size_t n = strlen(method) + strlen(url) + strlen(version) + 4;
    MHD_get_connection_values_n(mc, MHD_HEADER_KIND, add_field, &n);
    MHD_get_connection_values_n(mc, MHD_GET_ARGUMENT_KIND, add_field, &n);
    return n;
}

/* ---- /metrics ---------------------------------------------------------------------- */

static char *metrics_text(txc_server *srv)
{
    size_t cap = 8192;
    char *s = malloc(cap);
    if (!s)
        return NULL;
    pthread_mutex_lock(&srv->mu);
    serve_metrics m = srv->m;
    int queued = srv->n_queued, busy = srv->n_busy;
    pthread_mutex_unlock(&srv->mu);
    size_t at = 0;
#define P(...) at += (size_t)snprintf(s + at, at < cap ? cap - at : 0, __VA_ARGS__)
    P("# HELP txc_requests_total Requests accepted into the queue, by endpoint.\n# TYPE txc_requests_total counter\n");
    P("txc_requests_total{endpoint=\"/v1/completions\"} %llu\n", (unsigned long long)m.requests[0]);
    P("txc_requests_total{endpoint=\"/v1/chat/completions\"} %llu\n", (unsigned long long)m.requests[1]);
    P("# HELP txc_http_responses_total HTTP responses, by status code.\n# TYPE txc_http_responses_total counter\n");
    for (int code = 100; code < 600; code++)
        if (m.responses[code])
            P("txc_http_responses_total{code=\"%d\"} %llu\n", code, (unsigned long long)m.responses[code]);
    P("# HELP txc_requests_cancelled_total Requests whose client went away before the end.\n"
      "# TYPE txc_requests_cancelled_total counter\ntxc_requests_cancelled_total %llu\n",
      (unsigned long long)m.cancelled);
    P("# HELP txc_prompt_tokens_total Prompt tokens of the requests.\n# TYPE txc_prompt_tokens_total counter\n"
      "txc_prompt_tokens_total %llu\n", (unsigned long long)m.prompt_tokens);
    P("# HELP txc_completion_tokens_total Tokens generated.\n# TYPE txc_completion_tokens_total counter\n"
      "txc_completion_tokens_total %llu\n", (unsigned long long)m.completion_tokens);
    P("# HELP txc_prefill_tokens_total Prompt tokens run through the model (not reused from a slot).\n"
      "# TYPE txc_prefill_tokens_total counter\ntxc_prefill_tokens_total %llu\n",
      (unsigned long long)m.prefill_tokens);
    P("# HELP txc_queue_depth Requests waiting for a slot.\n# TYPE txc_queue_depth gauge\ntxc_queue_depth %d\n",
      queued);
    P("# HELP txc_slots_busy Slots running a request.\n# TYPE txc_slots_busy gauge\ntxc_slots_busy %d\n", busy);
    P("# HELP txc_slots_total Slots (--parallel).\n# TYPE txc_slots_total gauge\ntxc_slots_total %d\n",
      srv->o.parallel);
    P("# HELP txc_prefill_tokens_per_second Prompt tokens per second of prefill time, since the start.\n"
      "# TYPE txc_prefill_tokens_per_second gauge\ntxc_prefill_tokens_per_second %.3f\n",
      m.prefill_s > 0 ? (double)m.prefill_tokens / m.prefill_s : 0.0);
    P("# HELP txc_decode_tokens_per_second Generated tokens per second of decode time, all slots, since the "
      "start.\n# TYPE txc_decode_tokens_per_second gauge\ntxc_decode_tokens_per_second %.3f\n",
      m.decode_s > 0 ? (double)m.decode_tokens / m.decode_s : 0.0);
#undef P
    if (at >= cap) { /* cannot happen with the fixed lines above, but never send a cut text */
        free(s);
        return NULL;
    }
    return s;
}

/* ---- streaming: the response callback ------------------------------------------------ */

/* The next event of the stream into c->pending; false at the end. Called
 * with srv->mu held. */
static bool next_event(conn *c)
{
    serve_request *r = c->req;
    const serve_context *ctx = &c->srv->ctx;
    free(c->pending);
    c->pending = NULL;
    c->n_pending = c->pending_at = 0;
    if (c->done_sent)
        return false;
    char *ev = NULL;
    bool done = r->state == SERVE_DONE;
    if (done && r->err.status && !c->final_sent) {
        /* an error after the stream began: an error event (as OpenAI's), then [DONE] */
        ev = serve_sse_error(&r->err);
        c->final_sent = c->usage_sent = true;
    } else if (!c->final_sent) {
        /* one event per token: the next token that added text or logprobs */
        while (!ev && c->marks_sent < r->n_marks) {
            serve_mark m = r->marks[c->marks_sent++];
            if (m.text <= c->text_sent && m.toks <= c->toks_sent)
                continue; /* text held back (a stop string's beginning, a partial character) */
            if (!(ev = serve_sse_chunk(ctx, r, c->text_sent, m.text, c->toks_sent, m.toks, !c->first_sent, false)))
                return false;
            c->first_sent = true;
            c->text_sent = m.text;
            c->toks_sent = m.toks;
        }
        if (!ev && done) { /* what no token's event holds, and finish_reason */
            ev = serve_sse_chunk(ctx, r, c->text_sent, r->n_text, c->toks_sent, r->n_toks, !c->first_sent, true);
            c->first_sent = c->final_sent = true;
            c->text_sent = r->n_text;
            c->toks_sent = r->n_toks;
        }
        if (!ev && !done)
            return true; /* nothing new: wait */
    } else if (c->final_sent && !c->usage_sent) {
        c->usage_sent = true;
        if (r->include_usage)
            ev = serve_sse_usage(ctx, r);
        else
            ev = strdup(SERVE_SSE_DONE), c->done_sent = true;
    } else if (c->usage_sent) {
        ev = strdup(SERVE_SSE_DONE);
        c->done_sent = true;
    } else
        return true; /* nothing new: wait */
    if (!ev)
        return false;
    c->pending = ev;
    c->n_pending = strlen(ev);
    return true;
}

/* A stream with nothing to send this long ends with an error event:
 * libmicrohttpd closes a connection that sends nothing for --timeout s
 * (MHD_OPTION_CONNECTION_TIMEOUT) — without the event the client would see
 * a 200 stream end with neither an error nor [DONE]. A margin before that
 * (a quarter of it, at most 0.5 s) for the event to be written. */
static double stream_starved_ms(const txc_server *srv)
{
    double limit = (double)srv->o.idle_timeout_s * 1e3, margin = limit / 4 < 500 ? limit / 4 : 500;
    return limit - margin;
}

/* The starved stream's error event (OpenAI's error object, status 503,
 * code "timeout") into c->pending, then [DONE]; false without memory.
 * srv->mu held. */
static bool starved_event(conn *c)
{
    serve_error e;
    const serve_request *r = c->req;
    serve_fail(&e, 503, "server_error", NULL,
               "no output within --timeout (%u s): the request %s; it was cancelled, retry later",
               c->srv->o.idle_timeout_s,
               r->state == SERVE_QUEUED ? "waited in the queue for a free slot" : "was starved of decode steps");
    e.code = "timeout";
    char *ev = serve_sse_error(&e);
    if (!ev)
        return false;
    free(c->pending);
    c->pending = ev;
    c->n_pending = strlen(ev);
    c->pending_at = 0;
    c->final_sent = c->usage_sent = true; /* then [DONE] */
    if (c->srv->o.verbose)
        fprintf(stderr, "txc serve: 503 %s\n", e.message);
    return true;
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    conn *c = cls;
    txc_server *srv = c->srv;
    bool starved = false;
    (void)pos;
    pthread_mutex_lock(&srv->mu);
    while (c->pending_at == c->n_pending) {
        if (!next_event(c)) {
            pthread_mutex_unlock(&srv->mu);
            return c->done_sent ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (c->n_pending)
            break;
        if (c->req->state != SERVE_DONE && peer_gone(c->fd)) {
            pthread_mutex_unlock(&srv->mu);
            serve_cancel(srv, c->req);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += WAIT_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&c->req->cond, &srv->mu, &ts);
        if (c->req->state != SERVE_DONE && peer_gone(c->fd)) {
            pthread_mutex_unlock(&srv->mu);
            serve_cancel(srv, c->req);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (!c->final_sent && now_ms() - c->t_out_ms > stream_starved_ms(srv)) {
            starved = starved_event(c);
            if (!starved) {
                pthread_mutex_unlock(&srv->mu);
                serve_cancel(srv, c->req);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
        }
    }
    pthread_mutex_unlock(&srv->mu);
    if (starved) /* the error event is out: the request stops costing work */
        serve_cancel(srv, c->req);
    c->t_out_ms = now_ms();
    size_t n = c->n_pending - c->pending_at;
    if (n > max)
        n = max;
    memcpy(buf, c->pending + c->pending_at, n);
    c->pending_at += n;
    return (ssize_t)n;
}

/* ---- requests ------------------------------------------------------------------------ */

static bool authorized(txc_server *srv, struct MHD_Connection *mc)
{
    if (!srv->api_key)
        return true;
    const char *h = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncmp(h, "Bearer ", 7) != 0)
        return false;
    /* compare without an early exit */
    const char *k = h + 7, *want = srv->api_key;
    size_t nk = strlen(k), nw = strlen(want);
    unsigned char diff = nk != nw;
    for (size_t i = 0; i < nk && i < nw; i++)
        diff |= (unsigned char)(k[i] ^ want[i]);
    return diff == 0;
}

static void request_id(serve_request *r, const char *prefix)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char raw[12];
    FILE *f = fopen("/dev/urandom", "rb");
    size_t got = f ? fread(raw, 1, sizeof raw, f) : 0;
    if (f)
        fclose(f);
    if (got != sizeof raw) {
        uint64_t x = (uint64_t)now_ms() ^ (uint64_t)(uintptr_t)r;
        for (size_t i = 0; i < sizeof raw; i++, x = x * 6364136223846793005ull + 1442695040888963407ull)
            raw[i] = (unsigned char)(x >> 56);
    }
    size_t at = (size_t)snprintf(r->id, sizeof r->id, "%s", prefix);
    for (size_t i = 0; i < sizeof raw && at + 2 < sizeof r->id; i++) {
        r->id[at++] = hex[raw[i] >> 4];
        r->id[at++] = hex[raw[i] & 15];
    }
    r->id[at] = 0;
}

static enum MHD_Result completion(struct MHD_Connection *mc, conn *c, serve_endpoint ep)
{
    txc_server *srv = c->srv;
    serve_error e = {0};
    serve_request *r = calloc(1, sizeof *r);
    if (!r) {
        serve_fail(&e, 503, "server_error", NULL, "out of memory");
        return send_error(mc, c, &e);
    }
    r->t_arrive_ms = now_ms();
    r->created = time(NULL);
    request_id(r, ep == SERVE_CHAT ? "chatcmpl-" : "cmpl-");
    if (!serve_parse_request(&srv->ctx, ep, c->body ? c->body : "", c->n_body, r, &e)) {
        serve_request_free(r);
        free(r);
        if (srv->o.verbose)
            fprintf(stderr, "txc serve: %d %s\n", e.status, e.message);
        return send_error(mc, c, &e);
    }
    pthread_cond_init(&r->cond, NULL);
    if (!serve_submit(srv, r, &e)) {
        pthread_cond_destroy(&r->cond);
        serve_request_free(r);
        free(r);
        return send_error(mc, c, &e);
    }
    if (r->stream) {
        c->req = r;
        c->t_out_ms = now_ms();
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_reader, c, NULL);
        if (!resp) {
            serve_cancel(srv, r);
            return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        enum MHD_Result ret = MHD_queue_response(mc, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        c->answered = true;
        count_response(srv, 200);
        return ret;
    }
    /* wait for the whole completion, watching the socket */
    pthread_mutex_lock(&srv->mu);
    while (r->state != SERVE_DONE) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += WAIT_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&r->cond, &srv->mu, &ts);
        if (r->state != SERVE_DONE && peer_gone(c->fd)) {
            pthread_mutex_unlock(&srv->mu);
            serve_cancel(srv, r);
            serve_release(srv, r);
            return MHD_NO; /* close the connection */
        }
    }
    pthread_mutex_unlock(&srv->mu);
    enum MHD_Result ret = r->err.status ? send_error(mc, c, &r->err)
                                        : send_json(mc, c, 200, serve_response_json(&srv->ctx, r));
    serve_release(srv, r);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    txc_server *srv = cls;
    conn *c = *con_cls;
    if (!c) {
        if (!(c = calloc(1, sizeof *c)))
            return MHD_NO;
        c->srv = srv;
        c->fd = -1;
        pthread_mutex_lock(&srv->mu);
        srv->n_open++;
        pthread_mutex_unlock(&srv->mu);
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci)
            c->fd = ci->connect_fd;
        *con_cls = c;
        serve_error e = {0};
        size_t head = head_bytes(mc, method, url, version);
        if (head > srv->o.max_header_bytes) {
            serve_fail(&e, 431, "invalid_request_error", NULL,
                       "the request line and header fields have %zu bytes, more than the limit of %zu", head,
                       srv->o.max_header_bytes);
            e.code = "request_header_fields_too_large";
            return send_error(mc, c, &e);
        }
        const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (strcmp(url, "/health") != 0 && !authorized(srv, mc)) {
            serve_fail(&e, 401, "invalid_request_error", NULL, "Invalid or missing API key (Authorization: Bearer KEY)");
            e.code = "invalid_api_key";
            return send_error(mc, c, &e);
        }
        if (cl && strtoull(cl, NULL, 10) > srv->o.max_body_bytes) {
            serve_fail(&e, 413, "invalid_request_error", NULL, "the body has %s bytes, more than the limit of %zu",
                       cl, srv->o.max_body_bytes);
            return send_error(mc, c, &e);
        }
        return MHD_YES;
    }
    if (*upload_data_size) {
        /* the body, up to the limit (past it the rest is read and dropped) */
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (c->answered || c->too_big)
            return MHD_YES;
        if (c->n_body + n > srv->o.max_body_bytes) {
            c->too_big = true;
            free(c->body);
            c->body = NULL;
            c->n_body = c->cap_body = 0;
            return MHD_YES;
        }
        if (c->n_body + n + 1 > c->cap_body) {
            size_t cap = c->cap_body ? c->cap_body : 4096;
            while (cap < c->n_body + n + 1)
                cap *= 2;
            char *b = realloc(c->body, cap);
            if (!b)
                return MHD_NO;
            c->body = b;
            c->cap_body = cap;
        }
        memcpy(c->body + c->n_body, upload_data, n);
        c->n_body += n;
        c->body[c->n_body] = 0;
        return MHD_YES;
    }
    if (c->answered)
        return MHD_YES;
    serve_deadline_received(srv, mc); /* the request is in whole: its answer is not bound by the deadline */
    serve_error e = {0};
    if (c->too_big) {
        serve_fail(&e, 413, "invalid_request_error", NULL, "the body is larger than the limit of %zu bytes",
                   srv->o.max_body_bytes);
        return send_error(mc, c, &e);
    }
    bool get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
    const char *path = url;
    bool is_health = strcmp(path, "/health") == 0, is_models = !strcmp(path, "/v1/models") || !strcmp(path, "/models");
    bool is_metrics = strcmp(path, "/metrics") == 0;
    /* GET /v1/models/{model} (OpenAI's "retrieve model"; MHD has decoded the %-escapes) */
    const char *one_model = !strncmp(path, "/v1/models/", 11) ? path + 11 : !strncmp(path, "/models/", 8) ? path + 8 : NULL;
    if (one_model && get) {
        if (strcmp(one_model, srv->ctx.model_id) == 0)
            return send_json(mc, c, 200, serve_model_json(&srv->ctx));
        serve_fail(&e, 404, "invalid_request_error", "model", "The model '%.200s' does not exist (this server has '%.200s')",
                   one_model, srv->ctx.model_id);
        e.code = "model_not_found";
        return send_error(mc, c, &e);
    }
    int ep = !strcmp(path, "/v1/completions") || !strcmp(path, "/completions")                 ? SERVE_COMPLETIONS
             : !strcmp(path, "/v1/chat/completions") || !strcmp(path, "/chat/completions") ? SERVE_CHAT
                                                                                             : -1;
    if ((is_health || is_models || is_metrics) && get) {
        if (is_health) {
            pthread_mutex_lock(&srv->mu);
            bool stopping = srv->stopping;
            pthread_mutex_unlock(&srv->mu);
            return send_json(mc, c, stopping ? 503 : 200,
                             strdup(stopping ? "{\"status\":\"stopping\"}" : "{\"status\":\"ok\"}"));
        }
        if (is_models)
            return send_json(mc, c, 200, serve_models_json(&srv->ctx));
        return send_text(mc, c, 200, metrics_text(srv), "text/plain; version=0.0.4; charset=utf-8");
    }
    if (ep >= 0 && post)
        return completion(mc, c, (serve_endpoint)ep);
    if (is_health || is_models || is_metrics || one_model || ep >= 0) {
        serve_fail(&e, 405, "invalid_request_error", NULL, "%s %s: the method is not allowed (use %s)", method, url,
                   ep >= 0 ? "POST" : "GET");
        return send_error(mc, c, &e);
    }
    serve_fail(&e, 404, "invalid_request_error", NULL, "Unknown request URL: %s %s", method, url);
    e.code = "unknown_url";
    return send_error(mc, c, &e);
}

/* The connection's request ended (sent, failed or the client went away). */
static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    txc_server *srv = cls;
    conn *c = *con_cls;
    (void)toe;
    serve_deadline_next(srv, mc); /* the connection's next request starts its clock now */
    if (!c)
        return;
    if (c->req) {
        serve_cancel(srv, c->req); /* nothing when it is done already */
        serve_release(srv, c->req);
    }
    free(c->pending);
    free(c->body);
    free(c);
    *con_cls = NULL;
    pthread_mutex_lock(&srv->mu);
    srv->n_open--;
    pthread_mutex_unlock(&srv->mu);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    txc_server *srv = cls;
    if (!srv->o.verbose)
        return;
    fprintf(stderr, "txc serve: libmicrohttpd: ");
    vfprintf(stderr, fmt, ap);
}

txc_status serve_http_start(txc_server *srv)
{
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    struct sockaddr *sa;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG;
    memset(&a4, 0, sizeof a4);
    memset(&a6, 0, sizeof a6);
    if (inet_pton(AF_INET, srv->host, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)srv->o.port);
        sa = (struct sockaddr *)&a4;
    } else if (inet_pton(AF_INET6, srv->host, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)srv->o.port);
        sa = (struct sockaddr *)&a6;
        flags |= MHD_USE_IPv6;
    } else
        return txc_error(TXC_ERR_INVALID, "serve: --host must be an IPv4 or IPv6 address, got '%s'", srv->host);
    /* Each connection's memory: MHD reads the request's head into it (half
     * of it at first, then what is left), and answers a head that does not
     * fit with its own HTML 431 page. 16 x max_header_bytes, so a head past
     * the limit reaches on_request and gets the JSON 431 (MHD maps the pool
     * without touching it: a connection's resident memory is what it was
     * sent). */
    size_t pool = srv->o.max_header_bytes < ((size_t)1 << 26) ? 16 * srv->o.max_header_bytes : (size_t)1 << 30;
    if (pool < 65536)
        pool = 65536;
    /* (the logger first: MHD reports the options after it through it) */
    srv->daemon = MHD_start_daemon(
        flags, (uint16_t)srv->o.port, NULL, NULL, on_request, srv, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, srv,
        MHD_OPTION_SOCK_ADDR, sa, MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_NOTIFY_CONNECTION, serve_conn_notify, srv,
        MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned int)srv->o.idle_timeout_s, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)srv->o.max_connections,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, pool, MHD_OPTION_END);
    if (!srv->daemon)
        return txc_error(TXC_ERR_IO, "serve: cannot listen on %s port %d (in use, or not an address of this machine)",
                         srv->host, srv->o.port);
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_BIND_PORT);
    srv->port = di ? di->port : srv->o.port;
    return TXC_OK;
}

void serve_http_quiesce(txc_server *srv)
{
    if (srv->daemon && srv->listen_fd < 0)
        srv->listen_fd = (int)MHD_quiesce_daemon(srv->daemon);
}

void serve_http_stop(txc_server *srv)
{
    /* the requests still being answered write their last bytes (1 s at most) */
    for (int i = 0; srv->daemon && i < 100; i++) {
        pthread_mutex_lock(&srv->mu);
        int open = srv->n_open;
        pthread_mutex_unlock(&srv->mu);
        if (open == 0)
            break;
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (srv->daemon)
        MHD_stop_daemon(srv->daemon);
    srv->daemon = NULL;
    /* a quiesced daemon leaves its listening socket to the caller, to close after the stop */
    if (srv->listen_fd >= 0)
        close(srv->listen_fd);
    srv->listen_fd = -1;
}
