/* txc serve's lifecycle: options checked, the batch (slots) allocated, the
 * scheduler thread and the HTTP daemon started; the stop in the order that
 * lets every request end cleanly (no new connections, the queue answered,
 * running requests finished or cancelled, connections closed, threads
 * joined). See include/txc/serve.h. */
#include "serve/serve_impl.h"
#include "txc/batch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

txc_status txc_server_start(txc_model *model, const txc_tokenizer *tok, const txc_chat_template *tpl,
                            const txc_serve_options *opts, txc_server **out)
{
    *out = NULL;
    if (!model || !tok || !opts)
        return txc_error(TXC_ERR_INVALID, "serve: NULL argument");
    if (opts->parallel < 1 || opts->parallel > TXC_BATCH_MAX_SLOTS)
        return txc_error(TXC_ERR_INVALID, "serve: --parallel must be in [1, %d], got %d", TXC_BATCH_MAX_SLOTS,
                         opts->parallel);
    if (opts->port < 0 || opts->port > 65535)
        return txc_error(TXC_ERR_INVALID, "serve: --port must be in [0, 65535], got %d", opts->port);
    if (opts->max_queue < 0 || opts->max_connections < 1 || opts->max_body_bytes < 1 || opts->max_cache_len < 0 ||
        opts->max_header_bytes < 1)
        return txc_error(TXC_ERR_INVALID, "serve: an option is out of range (max_queue, max_connections, "
                                          "max_body_bytes, max_header_bytes, max_cache_len)");
    if (opts->api_key && !opts->api_key[0])
        return txc_error(TXC_ERR_INVALID, "serve: --api-key must not be empty");
    txc_server *srv = calloc(1, sizeof *srv);
    if (!srv)
        return txc_error(TXC_ERR_NOMEM, "serve: out of memory");
    srv->o = *opts;
    srv->model = model;
    srv->listen_fd = -1;
    srv->host = strdup(opts->host ? opts->host : "127.0.0.1");
    srv->api_key = dup_or_null(opts->api_key);
    srv->model_id = strdup(opts->model_id && opts->model_id[0] ? opts->model_id : "txc");
    pthread_mutex_init(&srv->mu, NULL);
    pthread_mutex_init(&srv->tpl_mu, NULL);
    pthread_cond_init(&srv->sched_cond, NULL);
    pthread_mutex_init(&srv->watch_mu, NULL);
    pthread_cond_init(&srv->watch_cond, NULL);
    if (!srv->host || !srv->model_id || (opts->api_key && !srv->api_key)) {
        txc_server_free(srv);
        return txc_error(TXC_ERR_NOMEM, "serve: out of memory");
    }
    txc_batch_options bo = txc_batch_default_options();
    bo.n_slots = opts->parallel;
    bo.max_cache_len = opts->max_cache_len;
    bo.jit = opts->defaults.jit;
    txc_batch *b = txc_batch_new(model, &bo);
    if (!b) {
        txc_server_free(srv);
        return txc_last_status() != TXC_OK ? txc_last_status() : TXC_ERR_NOMEM;
    }
    srv->engine = (struct serve_engine *)b;
    txc_status tps = serve_tp_new(srv, model, &bo); /* a tensor-parallel model: the other ranks follow (tp_serve.c) */
    if (tps != TXC_OK) {
        txc_server_free(srv);
        return tps;
    }
    /* requests without a seed: distinct seeds, different in every run */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    srv->seed_counter = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec;
    serve_context *c = &srv->ctx;
    c->tok = tok;
    c->tpl = tpl;
    c->tpl_mu = &srv->tpl_mu;
    c->model_id = srv->model_id;
    c->context_len = txc_batch_max_cache_len(b);
    c->vocab_size = (int32_t)txc_model_config(model)->vocab_size;
    c->default_max_tokens = opts->defaults.max_new_tokens > 0 ? opts->defaults.max_new_tokens : 256;
    c->seed_counter = &srv->seed_counter;
    c->mu = &srv->mu;
    serve_sampling *d = &c->defaults;
    d->do_sample = opts->defaults.do_sample;
    d->temperature = opts->defaults.temperature;
    d->top_k = opts->defaults.top_k;
    d->top_p = opts->defaults.top_p;
    d->min_p = opts->defaults.min_p;
    d->repetition_penalty = opts->defaults.repetition_penalty;
    d->cache_prompt = true;
    txc_status s = serve_sched_start(srv);
    if (s == TXC_OK)
        s = serve_deadline_start(srv);
    if (s == TXC_OK)
        s = serve_http_start(srv);
    if (s != TXC_OK) {
        txc_server_free(srv);
        return s;
    }
    *out = srv;
    return TXC_OK;
}

int txc_server_port(const txc_server *srv)
{
    return srv->port;
}

int64_t txc_server_max_cache_len(const txc_server *srv)
{
    return srv->ctx.context_len;
}

void txc_server_stop(txc_server *srv, int grace_ms)
{
    if (!srv || srv->stopped)
        return;
    srv->stopped = true;
    serve_http_quiesce(srv);          /* no new connections */
    serve_sched_stop(srv, grace_ms);  /* queue answered, running finished or cancelled */
    serve_http_stop(srv);             /* the connections write their last bytes and close */
    serve_deadline_stop(srv);
}

void txc_server_free(txc_server *srv)
{
    if (!srv)
        return;
    txc_server_stop(srv, 0);
    if (srv->sched_started)
        serve_sched_stop(srv, 0);
    serve_http_stop(srv);
    serve_deadline_stop(srv);
    txc_batch_free((txc_batch *)srv->engine);
    serve_tp_free(srv);
    pthread_cond_destroy(&srv->watch_cond);
    pthread_mutex_destroy(&srv->watch_mu);
    pthread_cond_destroy(&srv->sched_cond);
    pthread_mutex_destroy(&srv->tpl_mu);
    pthread_mutex_destroy(&srv->mu);
    free(srv->host);
    free(srv->api_key);
    free(srv->model_id);
    free(srv);
}
