/* txc serve over a tensor-parallel model (mpirun -np N txc serve --tp N):
 * rank 0 serves HTTP and schedules; every rank runs the same batch steps.
 *
 * The batch (txc/batch.h) is a deterministic function of the calls made on
 * it: the same txc_batch_add / txc_batch_cancel calls in the same order
 * between the same txc_batch_step calls give every rank the same slots,
 * the same forwards (whose collectives keep the ranks in lockstep) and,
 * since every rank gets the same logits bits (the collectives sum in rank
 * order) and each request carries its own RNG seed, the same sampled
 * tokens. So rank 0's scheduler records each add (the whole request: its
 * prompt ids, sampling parameters, slot) and cancel as it makes them, and
 * before each step broadcasts the record (the broadcast collective,
 * txc/shard.h) to the other ranks, which replay it on their own batch
 * (txc_serve_follow) and step. The message also carries the previous
 * step's events (slot, token, finish) as rank 0 saw them: a rank whose own
 * differ says so and stops (never a silent divergence). While idle, rank 0
 * sends a heartbeat every IDLE_MS so that the other ranks' broadcast never
 * reaches the collective deadline (TXC_COLLECTIVE_TIMEOUT); they sleep
 * between two heartbeats instead of polling. At the stop rank 0 sends EXIT
 * and every rank ends with status 0. The others never open a socket.
 *
 * Message: MSG_WORDS int64 words [MAGIC, kind, total words, records...];
 * a record past the first MSG_WORDS goes in a second broadcast of the rest.
 * Records: ADD slot n_input request-words ids..., CANCEL slot, EVENTS n
 * (slot token finish)*n. */
#include "serve/serve_impl.h"
#include "txc/batch.h"
#include "txc/ops.h"
#include "txc/shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAGIC 0x7478635f73727665LL /* "txc_srve" */
#define MSG_WORDS 64
#define IDLE_MS 50
enum { MSG_HELLO = 1, MSG_STEP, MSG_IDLE, MSG_EXIT };
#define REC_ADD SERVE_TP_REC_ADD
#define REC_CANCEL SERVE_TP_REC_CANCEL
#define REC_EVENTS SERVE_TP_REC_EVENTS
#define REQ_WORDS SERVE_TP_REQ_WORDS

struct serve_tp {
    const txc_mesh *mesh;
    txc_env *env;
    int64_t *log;   /* records since the last message (after the 3-word header) */
    int64_t n, cap; /* words */
    bool oom;       /* a record could not be stored: the next message is EXIT */
    bool hello_sent;
    int64_t hello[3]; /* n_slots, max_cache_len, jit */
};

static bool log_room(serve_tp *t, int64_t words)
{
    if (t->oom)
        return false;
    if (t->n + words > t->cap) {
        int64_t cap = t->cap ? t->cap : 256;
        while (cap < t->n + words)
            cap *= 2;
        int64_t *l = realloc(t->log, sizeof *l * (size_t)cap);
        if (!l) {
            t->oom = true;
            return false;
        }
        t->log = l, t->cap = cap;
    }
    return true;
}

txc_status serve_tp_new(txc_server *srv, txc_model *model, const txc_batch_options *bo)
{
    const txc_mesh *mesh = txc_model_tp_mesh(model);
    if (!mesh || txc_model_tp_size(model) <= 1)
        return TXC_OK;
    serve_tp *t = calloc(1, sizeof *t);
    if (!t)
        return txc_error(TXC_ERR_NOMEM, "serve: out of memory");
    t->mesh = mesh;
    t->env = txc_model_env(model);
    t->hello[0] = bo->n_slots, t->hello[1] = bo->max_cache_len, t->hello[2] = bo->jit;
    srv->tp = t;
    return TXC_OK;
}

void serve_tp_free(txc_server *srv)
{
    if (!srv->tp)
        return;
    free(srv->tp->log);
    free(srv->tp);
    srv->tp = NULL;
}

/* Broadcast buf[0..n) words from rank 0 (buf on every rank). */
static txc_status bcast(const txc_mesh *mesh, txc_env *env, int64_t *buf, int64_t n)
{
    int mark = txc_env_scope_begin(env);
    if (mark < 0)
        return txc_last_status();
    txc_tensor *x = txc_tensor_from_data(env, TXC_I64, 1, (int64_t[]){n}, buf);
    txc_tensor *y = x ? txc_broadcast(x, mesh, "tp", 0) : NULL;
    const int64_t *d = y ? txc_tensor_data_ptr(txc_contiguous(y)) : NULL;
    if (d)
        memcpy(buf, d, sizeof *buf * (size_t)n);
    txc_status s = d ? TXC_OK : txc_last_status();
    txc_env_scope_end(env, mark);
    return s;
}

/* Rank 0: one message of `kind` with the records logged so far. */
static txc_status send_msg(serve_tp *t, int kind)
{
    txc_status s;
    if (!t->hello_sent) {
        int64_t h[MSG_WORDS] = {MAGIC, MSG_HELLO, 6, t->hello[0], t->hello[1], t->hello[2]};
        if ((s = bcast(t->mesh, t->env, h, MSG_WORDS)) != TXC_OK)
            return s;
        t->hello_sent = true;
    }
    if (t->oom)
        kind = MSG_EXIT;
    int64_t total = 3 + (kind == MSG_EXIT ? 0 : t->n);
    int64_t head[MSG_WORDS] = {MAGIC, kind, total};
    int64_t first = total < MSG_WORDS ? total : MSG_WORDS;
    if (first > 3)
        memcpy(head + 3, t->log, sizeof *head * (size_t)(first - 3));
    s = bcast(t->mesh, t->env, head, MSG_WORDS);
    if (s == TXC_OK && total > MSG_WORDS)
        s = bcast(t->mesh, t->env, t->log + (MSG_WORDS - 3), total - MSG_WORDS);
    t->n = 0;
    return s;
}

txc_status serve_tp_add(txc_server *srv, txc_batch *b, const txc_batch_request *q, int *slot)
{
    txc_status s = txc_batch_add(b, q, slot);
    serve_tp *t = srv->tp;
    if (s != TXC_OK || !t)
        return s;
    if (!log_room(t, 3 + REQ_WORDS + q->n_input)) { /* the ranks cannot follow: stop them all */
        txc_batch_cancel(b, *slot);
        return txc_error(TXC_ERR_NOMEM, "serve: out of memory (the tensor-parallel step record)");
    }
    int64_t *w = t->log + t->n;
    w[0] = REC_ADD, w[1] = *slot, w[2] = q->n_input;
    txc_batch_request c = *q;
    c.input_ids = NULL, c.logits_out = NULL, c.gen.on_token = NULL, c.gen.ctx = NULL;
    memset(w + 3, 0, sizeof *w * (size_t)REQ_WORDS);
    memcpy(w + 3, &c, sizeof c);
    for (int64_t i = 0; i < q->n_input; i++)
        w[3 + REQ_WORDS + i] = q->input_ids[i];
    t->n += 3 + REQ_WORDS + q->n_input;
    return TXC_OK;
}

txc_status serve_tp_cancel(txc_server *srv, txc_batch *b, int slot)
{
    txc_status s = txc_batch_cancel(b, slot);
    serve_tp *t = srv->tp;
    if (s == TXC_OK && t && log_room(t, 2)) {
        t->log[t->n++] = REC_CANCEL;
        t->log[t->n++] = slot;
    }
    return s;
}

txc_status serve_tp_step(txc_server *srv, txc_batch *b, txc_batch_event *events, int max_events, int *n_events)
{
    serve_tp *t = srv->tp;
    if (t) {
        txc_status s = send_msg(t, MSG_STEP);
        if (s != TXC_OK) {
            *n_events = 0;
            return s;
        }
    }
    txc_status s = txc_batch_step(b, events, max_events, n_events);
    if (t && log_room(t, 2 + 3 * (int64_t)*n_events)) { /* what the others must have seen, sent with the next step */
        int64_t *w = t->log + t->n;
        w[0] = REC_EVENTS, w[1] = *n_events;
        for (int i = 0; i < *n_events; i++)
            w[2 + 3 * i] = events[i].slot, w[3 + 3 * i] = events[i].token_id, w[4 + 3 * i] = events[i].finish;
        t->n += 2 + 3 * (int64_t)*n_events;
    }
    return s;
}

static void deadline_in(struct timespec *ts, int ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    long ns = ts->tv_nsec + (long)ms * 1000000L;
    ts->tv_sec += ns / 1000000000L;
    ts->tv_nsec = ns % 1000000000L;
}

void serve_tp_idle_wait(txc_server *srv)
{
    serve_tp *t = srv->tp;
    if (!t) {
        pthread_cond_wait(&srv->sched_cond, &srv->mu);
        return;
    }
    struct timespec ts;
    deadline_in(&ts, IDLE_MS);
    if (pthread_cond_timedwait(&srv->sched_cond, &srv->mu, &ts) == 0)
        return;
    pthread_mutex_unlock(&srv->mu); /* nothing came: a heartbeat (the HTTP threads may queue meanwhile) */
    if (send_msg(t, MSG_IDLE) != TXC_OK)
        fprintf(stderr, "txc serve: --tp heartbeat: %s\n", txc_last_error());
    pthread_mutex_lock(&srv->mu);
}

void serve_tp_end(txc_server *srv)
{
    if (srv->tp && send_msg(srv->tp, MSG_EXIT) != TXC_OK)
        fprintf(stderr, "txc serve: --tp stop: %s\n", txc_last_error());
}

/* ---- the other ranks ------------------------------------------------------- */

txc_status serve_tp_follow_records(txc_batch *b, const int64_t *w, int64_t n, const txc_batch_event *last,
                                   int n_last, int rank)
{
    for (int64_t i = 0; i < n;) {
        if (w[i] == REC_ADD && i + 3 + REQ_WORDS <= n && w[i + 2] >= 1 && w[i + 2] <= n - i - 3 - REQ_WORDS) {
            const int64_t n_input = w[i + 2];
            txc_batch_request q;
            memcpy(&q, w + i + 3, sizeof q);
            q.logits_out = NULL, q.gen.on_token = NULL, q.gen.ctx = NULL; /* (rank 0's pointers mean nothing here) */
            int32_t *ids = malloc(sizeof *ids * (size_t)n_input);
            if (!ids)
                return txc_error(TXC_ERR_NOMEM, "serve --tp: rank %d: out of memory (%lld prompt ids)", rank,
                                 (long long)n_input);
            for (int64_t k = 0; k < n_input; k++)
                ids[k] = (int32_t)w[i + 3 + REQ_WORDS + k];
            q.input_ids = ids;
            q.n_input = n_input;
            int slot = -1;
            txc_status s = txc_batch_add(b, &q, &slot);
            free(ids);
            if (s != TXC_OK)
                return txc_error_replace(s, "serve --tp: rank %d: the request rank 0 put in slot %lld fails here: %s",
                                         rank,
                                 (long long)w[i + 1], txc_last_error());
            if (slot != w[i + 1])
                return txc_error(TXC_ERR_INVALID, "serve --tp: rank %d is out of step with rank 0: a request took "
                                                  "slot %d here, slot %lld there", rank, slot, (long long)w[i + 1]);
            i += 3 + REQ_WORDS + n_input;
        } else if (w[i] == REC_CANCEL && i + 2 <= n) {
            txc_status s = txc_batch_cancel(b, w[i + 1] >= 0 && w[i + 1] < TXC_BATCH_MAX_SLOTS ? (int)w[i + 1] : -1);
            if (s != TXC_OK)
                return txc_error_replace(s, "serve --tp: rank %d is out of step with rank 0 (cancel slot %lld): %s",
                                         rank, (long long)w[i + 1], txc_last_error());
            i += 2;
        } else if (w[i] == REC_EVENTS && i + 2 <= n && w[i + 1] >= 0 && w[i + 1] <= (n - i - 2) / 3) {
            const int64_t k = w[i + 1];
            bool same = k == n_last;
            for (int64_t e = 0; same && e < k; e++)
                same = w[i + 2 + 3 * e] == last[e].slot && w[i + 3 + 3 * e] == last[e].token_id &&
                       w[i + 4 + 3 * e] == last[e].finish;
            if (!same)
                return txc_error(TXC_ERR_INVALID, "serve --tp: rank %d is out of step with rank 0: its last step "
                                                  "gave %d events, rank 0's %lld (or other tokens)",
                                 rank, n_last, (long long)k);
            i += 2 + 3 * k;
        } else {
            return txc_error(TXC_ERR_FORMAT, "serve --tp: rank %d: a malformed step message (record %lld at word "
                                             "%lld)", rank, (long long)w[i], (long long)i);
        }
    }
    return TXC_OK;
}

txc_status txc_serve_follow(txc_model *model)
{
    const txc_mesh *mesh = txc_model_tp_mesh(model);
    const int rank = txc_process_index();
    if (!mesh || txc_model_tp_size(model) <= 1 || txc_model_tp_rank(model) == 0)
        return txc_error(TXC_ERR_INVALID, "serve: txc_serve_follow runs on the ranks but 0 of a tensor-parallel "
                                          "model");
    txc_env *env = txc_model_env(model);
    txc_batch *b = NULL;
    txc_batch_event *last = calloc(TXC_BATCH_MAX_SLOTS, sizeof *last);
    int64_t *rest = NULL, cap = 0;
    int n_last = 0;
    txc_status s = last ? TXC_OK : txc_error(TXC_ERR_NOMEM, "serve --tp: out of memory");
    while (s == TXC_OK) {
        int64_t head[MSG_WORDS] = {0};
        if ((s = bcast(mesh, env, head, MSG_WORDS)) != TXC_OK)
            break;
        const int64_t kind = head[1], total = head[2];
        if (head[0] != MAGIC || total < 3 || kind < MSG_HELLO || kind > MSG_EXIT || (kind == MSG_HELLO) != !b) {
            s = txc_error(TXC_ERR_FORMAT, "serve --tp: rank %d: not a step message from rank 0", rank);
            break;
        }
        if (kind == MSG_EXIT)
            break;
        if (kind == MSG_HELLO) {
            txc_batch_options bo = txc_batch_default_options();
            bo.n_slots = (int)head[3], bo.max_cache_len = head[4], bo.jit = head[5] != 0;
            if (!(b = txc_batch_new(model, &bo)))
                s = txc_last_status();
            continue;
        }
        const int64_t *w = head + 3;
        if (total > MSG_WORDS) { /* the rest of the records */
            if (total - 3 > cap) {
                int64_t *r = realloc(rest, sizeof *r * (size_t)(total - 3));
                if (!r) {
                    s = txc_error(TXC_ERR_NOMEM, "serve --tp: out of memory (%lld words)", (long long)total);
                    break;
                }
                rest = r, cap = total - 3;
            }
            memcpy(rest, head + 3, sizeof *rest * (MSG_WORDS - 3));
            if ((s = bcast(mesh, env, rest + (MSG_WORDS - 3), total - MSG_WORDS)) != TXC_OK)
                break;
            w = rest;
        }
        if ((s = serve_tp_follow_records(b, w, total - 3, last, n_last, rank)) != TXC_OK)
            break;
        if (kind == MSG_IDLE) { /* nothing to run: sleep most of the heartbeat period instead of polling */
            struct timespec ts = {0, (IDLE_MS - 10) * 1000000L};
            nanosleep(&ts, NULL);
            continue;
        }
        txc_clear_error();
        if (txc_batch_step(b, last, TXC_BATCH_MAX_SLOTS, &n_last) != TXC_OK)
            fprintf(stderr, "txc serve: rank %d: step failed: %s\n", rank, txc_last_error());
    }
    txc_batch_free(b);
    free(last);
    free(rest);
    txc_ops_thread_release();
    return s;
}
