/* The scheduler thread of txc serve: it alone calls the batch
 * (include/txc/batch.h). Between two steps it takes queued requests into
 * free slots and ends the cancelled ones (txc_batch_cancel); after each
 * step it turns every slot's event into output: the token (and its
 * logprobs), the text it completes (txc_detok_stream), stop strings on that
 * text (stop.c) — a stop string ends the request and frees its slot at
 * once — and the finish reason. HTTP threads wait on each request's
 * condition variable. */
#include "serve/serve_impl.h"
#include "txc/batch.h"
#include "txc/ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

bool serve_submit(txc_server *srv, serve_request *r, serve_error *e)
{
    pthread_mutex_lock(&srv->mu);
    if (srv->stopping) {
        pthread_mutex_unlock(&srv->mu);
        return serve_fail(e, 503, "server_error", NULL, "the server is stopping");
    }
    /* room: every slot (running or about to) and max_queue waiting */
    if (srv->n_queued + srv->n_busy >= srv->o.parallel + srv->o.max_queue) {
        int n = srv->n_queued + srv->n_busy;
        pthread_mutex_unlock(&srv->mu);
        serve_fail(e, 503, "server_error", NULL,
                   "the server is busy: %d requests hold its %d slots and %d queue places (--parallel, --max-queue); "
                   "retry later", n, srv->o.parallel, srv->o.max_queue);
        e->code = "queue_full";
        return false;
    }
    r->refs = 2;
    r->state = SERVE_QUEUED;
    r->next = NULL;
    if (srv->queue_tail)
        srv->queue_tail->next = r;
    else
        srv->queue_head = r;
    srv->queue_tail = r;
    srv->n_queued++;
    srv->m.requests[r->endpoint == SERVE_CHAT]++;
    srv->m.prompt_tokens += (uint64_t)r->n_ids;
    pthread_cond_signal(&srv->sched_cond);
    pthread_mutex_unlock(&srv->mu);
    return true;
}

void serve_cancel(txc_server *srv, serve_request *r)
{
    pthread_mutex_lock(&srv->mu);
    if (r->state != SERVE_DONE && !r->cancelled) {
        r->cancelled = true;
        pthread_cond_signal(&srv->sched_cond);
    }
    pthread_mutex_unlock(&srv->mu);
}

void serve_release(txc_server *srv, serve_request *r)
{
    pthread_mutex_lock(&srv->mu);
    bool last = --r->refs == 0;
    pthread_mutex_unlock(&srv->mu);
    if (last) {
        pthread_cond_destroy(&r->cond);
        serve_request_free(r);
        free(r);
    }
}

/* ---- the thread (everything below runs on it, srv->mu held unless said) ---- */

/* The request is over: wake its connection, drop the scheduler's reference
 * (it is freed when the connection has dropped its own). */
static void finish(txc_server *srv, serve_request *r)
{
    if (srv->o.verbose) {
        double t = now_ms();
        if (r->err.status)
            fprintf(stderr, "txc serve: %s: %d %s\n", r->id, r->err.status, r->err.message);
        else
            fprintf(stderr, "txc serve: %s: %lld prompt + %lld completion tokens, first token %.1f ms, total %.1f ms, "
                            "finish_reason %s%s\n",
                    r->id, (long long)r->n_ids, (long long)r->n_completion,
                    r->t_first_ms > 0 ? r->t_first_ms - r->t_arrive_ms : 0.0, t - r->t_arrive_ms,
                    r->finish_reason ? r->finish_reason : "-", r->cancelled ? " (cancelled by the client)" : "");
    }
    r->state = SERVE_DONE;
    pthread_cond_broadcast(&r->cond);
    if (--r->refs == 0) {
        pthread_cond_destroy(&r->cond);
        serve_request_free(r);
        free(r);
    }
}

static void fail(txc_server *srv, serve_request *r, int status, const char *type, const char *msg)
{
    serve_fail(&r->err, status, type, NULL, "%s", msg);
    finish(srv, r);
}

/* From the queue into a free slot. */
static void admit(txc_server *srv, txc_batch *b, serve_request **slots)
{
    while (srv->queue_head && txc_batch_busy(b) < txc_batch_n_slots(b)) {
        serve_request *r = srv->queue_head;
        srv->queue_head = r->next;
        if (!srv->queue_head)
            srv->queue_tail = NULL;
        srv->n_queued--;
        if (r->cancelled) {
            srv->m.cancelled++;
            finish(srv, r);
            continue;
        }
        txc_batch_request q;
        memset(&q, 0, sizeof q);
        q.input_ids = r->ids;
        q.n_input = r->n_ids;
        q.gen = srv->o.defaults;
        q.gen.max_new_tokens = r->max_tokens;
        q.gen.do_sample = r->sp.do_sample;
        q.gen.temperature = r->sp.temperature;
        q.gen.top_k = r->sp.top_k;
        q.gen.top_p = r->sp.top_p;
        q.gen.min_p = r->sp.min_p;
        q.gen.repetition_penalty = r->sp.repetition_penalty;
        q.gen.seed = r->sp.seed;
        q.gen.on_token = NULL;
        q.gen.ctx = NULL;
        q.presence_penalty = r->sp.presence_penalty;
        q.frequency_penalty = r->sp.frequency_penalty;
        q.logprobs = r->sp.logprobs > 0;
        q.top_logprobs = r->sp.logprobs > 0 ? r->sp.logprobs - 1 : 0;
        q.cache_prompt = r->sp.cache_prompt;
        if (r->sp.ignore_eos)
            q.gen.n_eos = 0;
        int slot = -1;
        txc_clear_error();
        txc_status s = serve_tp_add(srv, b, &q, &slot);
        if (s != TXC_OK) {
            /* the request was checked before it was queued: what is left is
             * the batch's own check (e.g. a sampling value it refuses) */
            fail(srv, r, s == TXC_ERR_NOMEM ? 503 : 400, s == TXC_ERR_NOMEM ? "server_error" : "invalid_request_error",
                 txc_last_error());
            continue;
        }
        if (!(r->detok = txc_detok_stream_new(srv->ctx.tok, true))) {
            serve_tp_cancel(srv, b, slot);
            fail(srv, r, 503, "server_error", "out of memory");
            continue;
        }
        r->slot = slot;
        r->state = SERVE_RUNNING;
        slots[slot] = r;
        srv->n_busy++;
    }
}

/* An idle batch just got work. Requests sent together (clients starting
 * at once, or sending their next request as their previous ones end in the
 * same step) arrive within milliseconds of each other: admit them until
 * none has come for GATHER_GAP_MS (at most GATHER_MAX_MS in all, or until
 * the slots are full), so their prompts are prefilled together in one
 * forward (txc/batch.h) instead of the first alone and the rest one step
 * later. Nothing is running meanwhile, so no stream waits. */
#define GATHER_GAP_MS 20
#define GATHER_MAX_MS 100

static void gather(txc_server *srv, txc_batch *b, serve_request **slots)
{
    const double t_end = now_ms() + GATHER_MAX_MS;
    while (srv->n_busy < txc_batch_n_slots(b) && !srv->stopping && !srv->cancel_all) {
        double t = now_ms(), until = t + GATHER_GAP_MS < t_end ? t + GATHER_GAP_MS : t_end;
        if (until <= t)
            return;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long ns = ts.tv_nsec + (long)((until - t) * 1e6);
        ts.tv_sec += ns / 1000000000L;
        ts.tv_nsec = ns % 1000000000L;
        int busy = srv->n_busy;
        while (!srv->queue_head && !srv->stopping && now_ms() < until)
            if (pthread_cond_timedwait(&srv->sched_cond, &srv->mu, &ts) != 0)
                break;
        admit(srv, b, slots);
        if (srv->n_busy == busy) /* none came within the gap */
            return;
    }
}

/* The slot's request ends here (cancelled by its client or by the stop). */
static void end_slot(txc_server *srv, txc_batch *b, serve_request **slots, int slot)
{
    serve_request *r = slots[slot];
    serve_tp_cancel(srv, b, slot);
    slots[slot] = NULL;
    srv->n_busy--;
    if (r->cancelled)
        srv->m.cancelled++;
    finish(srv, r);
}

/* Append the decoded piece; true when the request is done (a stop string,
 * or out of memory). */
static bool feed_text(serve_request *r, const char *piece, size_t n, bool final)
{
    int k = serve_stop_feed(r, piece, n, final);
    if (k < 0) {
        serve_fail(&r->err, 503, "server_error", NULL, "out of memory");
        return true;
    }
    if (k > 0) {
        r->finish_reason = "stop";
        return true;
    }
    return false;
}

static void on_event(txc_server *srv, txc_batch *b, serve_request **slots, const txc_batch_event *ev)
{
    serve_request *r = slots[ev->slot];
    if (!r)
        return;
    bool done = ev->finish != TXC_BATCH_RUNNING;
    if (ev->finish == TXC_BATCH_ERROR) {
        slots[ev->slot] = NULL;
        srv->n_busy--;
        fail(srv, r, 500, "server_error", "the model failed during generation (see the server's log)");
        return;
    }
    if (r->t_first_ms == 0)
        r->t_first_ms = now_ms();
    r->n_completion = ev->n_new;
    srv->m.completion_tokens++;
    /* the token (for logprobs) */
    if (r->sp.logprobs) {
        if (r->n_toks == r->cap_toks) {
            int64_t cap = r->cap_toks ? 2 * r->cap_toks : 32;
            serve_token *t = realloc(r->toks, sizeof *t * (size_t)cap);
            if (!t) {
                serve_fail(&r->err, 503, "server_error", NULL, "out of memory");
                if (!done)
                    serve_tp_cancel(srv, b, ev->slot);
                slots[ev->slot] = NULL;
                srv->n_busy--;
                finish(srv, r);
                return;
            }
            r->toks = t;
            r->cap_toks = cap;
        }
        serve_token *t = &r->toks[r->n_toks++];
        t->id = ev->token_id;
        t->piece = NULL;
        t->logprob = ev->logprob;
        t->n_top = ev->n_top < SERVE_MAX_TOP_LOGPROBS ? ev->n_top : SERVE_MAX_TOP_LOGPROBS;
        memcpy(t->top_id, ev->top_ids, sizeof(int32_t) * (size_t)t->n_top);
        memcpy(t->top_logprob, ev->top_logprobs, sizeof(float) * (size_t)t->n_top);
    }
    const char *piece = "";
    size_t n = 0;
    bool stopped = false;
    if (txc_detok_stream_put(r->detok, ev->token_id, &piece, &n) != TXC_OK) {
        serve_fail(&r->err, 500, "server_error", NULL, "the token %d cannot be decoded", ev->token_id);
        stopped = true;
    } else {
        if (r->sp.logprobs)
            r->toks[r->n_toks - 1].piece = strdup(piece); /* NULL when out of memory: decoded alone */
        stopped = feed_text(r, piece, n, false);
    }
    if (!stopped && done) {
        if (txc_detok_stream_flush(r->detok, &piece, &n) == TXC_OK)
            stopped = feed_text(r, piece, n, true);
        else
            feed_text(r, "", 0, true);
        if (!r->finish_reason)
            r->finish_reason = ev->finish == TXC_BATCH_STOP ? "stop" : "length";
    }
    if (r->stream && !r->err.status) { /* this token's event (none when out of memory: the next one carries it) */
        if (r->n_marks == r->cap_marks) {
            int64_t cap = r->cap_marks ? 2 * r->cap_marks : 32;
            serve_mark *mk = realloc(r->marks, sizeof *mk * (size_t)cap);
            if (mk)
                r->marks = mk, r->cap_marks = cap;
        }
        if (r->n_marks < r->cap_marks)
            r->marks[r->n_marks++] = (serve_mark){r->n_text, r->n_toks};
    }
    if (stopped || done) {
        if (!done)
            serve_tp_cancel(srv, b, ev->slot); /* a stop string: free the slot now */
        slots[ev->slot] = NULL;
        srv->n_busy--;
        finish(srv, r);
        return;
    }
    pthread_cond_broadcast(&r->cond);
}

static void *sched_main(void *arg)
{
    txc_server *srv = arg;
    txc_batch *b = (txc_batch *)srv->engine;
    int n_slots = txc_batch_n_slots(b);
    serve_request *slots[TXC_BATCH_MAX_SLOTS] = {0};
    txc_batch_event events[TXC_BATCH_MAX_SLOTS];
    pthread_mutex_lock(&srv->mu);
    for (;;) {
        if (srv->stopping) /* the queue: 503 at once */
            while (srv->queue_head) {
                serve_request *r = srv->queue_head;
                srv->queue_head = r->next;
                srv->n_queued--;
                fail(srv, r, 503, "server_error", "the server is stopping");
            }
        if (!srv->queue_head)
            srv->queue_tail = NULL;
        for (int s = 0; s < n_slots; s++)
            if (slots[s] && (slots[s]->cancelled || srv->cancel_all)) {
                if (!slots[s]->cancelled)
                    serve_fail(&slots[s]->err, 503, "server_error", NULL, "the server stopped");
                end_slot(srv, b, slots, s);
            }
        const bool was_idle = srv->n_busy == 0;
        admit(srv, b, slots);
        if (srv->n_busy == 0) {
            if (srv->sched_exit)
                break;
            serve_tp_idle_wait(srv); /* (a tensor-parallel model's heartbeat to the other ranks) */
            continue;
        }
        if (was_idle)
            gather(srv, b, slots);
        pthread_mutex_unlock(&srv->mu);
        int n_events = 0;
        txc_clear_error();
        txc_status s = serve_tp_step(srv, b, events, TXC_BATCH_MAX_SLOTS, &n_events); /* (tp: the ranks follow) */
        if (s != TXC_OK && srv->o.verbose)
            fprintf(stderr, "txc serve: step failed: %s\n", txc_last_error());
        txc_batch_stats st = txc_batch_get_stats(b);
        pthread_mutex_lock(&srv->mu);
        for (int i = 0; i < n_events; i++)
            on_event(srv, b, slots, &events[i]);
        srv->m.prefill_tokens = (uint64_t)st.prefill_tokens;
        srv->m.decode_tokens = (uint64_t)st.decode_tokens;
        srv->m.prefill_s = st.prefill_ms / 1e3;
        srv->m.decode_s = st.decode_ms / 1e3;
        srv->m.steps = st.steps;
    }
    pthread_mutex_unlock(&srv->mu);
    serve_tp_end(srv); /* tensor-parallel: the other ranks stop */
    txc_ops_thread_release(); /* this thread's kernel scratch (thread-local: lost when it ends) */
    return NULL;
}

txc_status serve_sched_start(txc_server *srv)
{
    if (pthread_create(&srv->sched, NULL, sched_main, srv) != 0)
        return txc_error(TXC_ERR_NOMEM, "serve: cannot start the scheduler thread");
    srv->sched_started = true;
    return TXC_OK;
}

void serve_sched_stop(txc_server *srv, int grace_ms)
{
    if (!srv->sched_started)
        return;
    pthread_mutex_lock(&srv->mu);
    srv->stopping = true;
    pthread_cond_signal(&srv->sched_cond);
    /* let what runs finish, up to the grace time */
    double until = now_ms() + grace_ms;
    while (srv->n_busy > 0 && now_ms() < until) {
        pthread_mutex_unlock(&srv->mu);
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&srv->mu);
    }
    srv->cancel_all = true;
    srv->sched_exit = true;
    pthread_cond_signal(&srv->sched_cond);
    pthread_mutex_unlock(&srv->mu);
    pthread_join(srv->sched, NULL);
    srv->sched_started = false;
}
