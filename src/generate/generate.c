/* Greedy generation with no cache, a DynamicCache or a StaticCache; see
 * include/txc/generate.h. */
#include "txc/generate.h"
#include "txc/ops.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

txc_generate_options txc_generate_default_options(const txc_model *model, const char *model_dir)
{
    txc_generate_options o = {.max_new_tokens = 256, .cache = TXC_CACHE_STATIC};
    const txc_hf_config *c = txc_model_config(model);
    txc_generation_config g;
    txc_status saved = txc_last_status();
    if (model_dir && txc_generation_config_load(model_dir, &g) == TXC_OK && g.present && g.n_eos > 0) {
        o.n_eos = g.n_eos < TXC_MAX_EOS_IDS ? g.n_eos : TXC_MAX_EOS_IDS;
        memcpy(o.eos_token_id, g.eos_token_id, sizeof(int64_t) * (size_t)o.n_eos);
        if (g.max_new_tokens > 0)
            o.max_new_tokens = g.max_new_tokens;
    } else {
        if (saved == TXC_OK)
            txc_clear_error(); /* a broken generation_config.json is reported by the caller's own load */
        o.n_eos = c->n_eos < TXC_MAX_EOS_IDS ? c->n_eos : TXC_MAX_EOS_IDS;
        memcpy(o.eos_token_id, c->eos_token_id, sizeof(int64_t) * (size_t)o.n_eos);
    }
    return o;
}

/* Index of the largest logit (first one on ties, as torch.argmax). */
static int32_t argmax_last(txc_tensor *logits)
{
    txc_tensor *last = txc_select(txc_select(logits, 0, 0), 0, -1); /* (vocab) */
    txc_tensor *idx = txc_argmax(last, 0, false);
    return idx ? (int32_t)txc_tensor_item(idx) : -1;
}

/* One forward of ids[from, to) at positions [from, to); returns the next
 * token, or -1 on error. */
static int32_t step(txc_model *model, txc_kv_cache *cache, const int32_t *ids, int64_t from, int64_t to)
{
    txc_env *env = txc_model_env(model);
    int mark = txc_env_scope_begin(env);
    if (mark < 0)
        return -1;
    int64_t L = to - from;
    int64_t shape[2] = {1, L};
    txc_tensor *input_ids = txc_zeros(env, 2, shape, TXC_I64);
    txc_tensor *cache_position = txc_arange(env, (double)from, (double)to, 1, TXC_I64);
    int32_t next = -1;
    if (input_ids) {
        int64_t *p = txc_tensor_data_ptr(input_ids);
        for (int64_t i = 0; i < L; i++)
            p[i] = ids[from + i];
        txc_tensor *logits = txc_model_forward(model, input_ids, NULL, cache, cache_position, 1);
        next = logits ? argmax_last(logits) : -1;
    }
    txc_env_scope_end(env, mark);
    return next;
}

txc_status txc_generate(txc_model *model, const int32_t *input_ids, int64_t n_input, const txc_generate_options *o,
                        txc_generate_result *r)
{
    memset(r, 0, sizeof *r);
    const txc_hf_config *c = txc_model_config(model);
    if (n_input < 1)
        return txc_error(TXC_ERR_INVALID, "generate: the prompt is empty (it needs at least one id, e.g. BOS)");
    if (o->max_new_tokens < 1)
        return txc_error(TXC_ERR_INVALID, "generate: max_new_tokens must be >= 1 (got %lld)",
                         (long long)o->max_new_tokens);
    for (int64_t i = 0; i < n_input; i++)
        if (input_ids[i] < 0 || input_ids[i] >= c->vocab_size)
            return txc_error(TXC_ERR_INVALID, "generate: input id %d at position %lld is outside the vocabulary (%lld)",
                             input_ids[i], (long long)i, (long long)c->vocab_size);
    int64_t total = n_input + o->max_new_tokens;
    int64_t max_cache_len = o->max_cache_len > 0 ? o->max_cache_len : total;
    if (o->cache == TXC_CACHE_STATIC && n_input > max_cache_len)
        return txc_error(TXC_ERR_CAPACITY, "generate: the prompt has %lld tokens, more than max_cache_len %lld",
                         (long long)n_input, (long long)max_cache_len);
    if (n_input > c->max_position_embeddings)
        return txc_error(TXC_ERR_CAPACITY, "generate: the prompt has %lld tokens, more than max_position_embeddings %lld",
                         (long long)n_input, (long long)c->max_position_embeddings);
    if (c->sliding_window > 0 && (c->use_sliding_window || strcmp(c->model_type, "mistral") == 0) &&
        total > c->sliding_window)
        return txc_error(TXC_ERR_UNSUPPORTED, "generate: %lld tokens exceed sliding_window %lld (sliding-window "
                                              "attention is not supported yet)", (long long)total,
                         (long long)c->sliding_window);
    /* Generation ends early, with a reason, where the cache or the
     * position table ends. */
    const char *limit = "max_new_tokens";
    if (o->cache == TXC_CACHE_STATIC && total > max_cache_len) {
        total = max_cache_len;
        limit = "max_cache_len";
    }
    if (total > c->max_position_embeddings) {
        total = c->max_position_embeddings;
        limit = "max_position_embeddings";
    }

    int32_t *ids = malloc(sizeof(int32_t) * (size_t)total);
    if (!ids)
        return txc_error(TXC_ERR_NOMEM, "out of memory (generate)");
    memcpy(ids, input_ids, sizeof(int32_t) * (size_t)n_input);
    txc_env *env = txc_model_env(model);
    txc_kv_cache *cache = NULL;
    if (o->cache == TXC_CACHE_DYNAMIC)
        cache = txc_dynamic_cache_new(env, (int)c->num_hidden_layers);
    else if (o->cache == TXC_CACHE_STATIC)
        cache = txc_static_cache_new(env, (int)c->num_hidden_layers, 1, c->num_key_value_heads, max_cache_len,
                                     c->head_dim);
    if (o->cache != TXC_CACHE_NONE && !cache) {
        free(ids);
        return txc_last_status();
    }

    txc_status s = TXC_OK;
    int64_t n = n_input;
    double t0 = now_ms(), t_first = t0;
    while (n < total) {
        /* Without a cache, re-run everything; with one, only the new tokens. */
        int64_t from = (cache && n > n_input) ? n - 1 : 0;
        int32_t next = step(model, cache, ids, from, n);
        if (next < 0) {
            s = txc_last_status() != TXC_OK ? txc_last_status() : TXC_ERR_INTERNAL;
            break;
        }
        ids[n++] = next;
        if (n == n_input + 1)
            t_first = now_ms();
        bool stop = false;
        for (int i = 0; i < o->n_eos; i++)
            stop |= next == o->eos_token_id[i];
        r->stopped_on_eos = stop;
        if (o->on_token && !o->on_token(o->ctx, next))
            stop = true;
        if (stop)
            break;
    }
    double t1 = now_ms();
    txc_kv_cache_free(cache);
    if (s != TXC_OK) {
        free(ids);
        memset(r, 0, sizeof *r);
        return s;
    }
    r->n_new = n - n_input;
    r->new_ids = malloc(sizeof(int32_t) * (size_t)(r->n_new > 0 ? r->n_new : 1));
    if (!r->new_ids) {
        free(ids);
        return txc_error(TXC_ERR_NOMEM, "out of memory (generate)");
    }
    memcpy(r->new_ids, ids + n_input, sizeof(int32_t) * (size_t)r->n_new);
    free(ids);
    r->prefill_ms = t_first - t0;
    r->decode_ms = t1 - t_first;
    r->max_cache_len = o->cache == TXC_CACHE_STATIC ? max_cache_len : 0;
    r->stop_reason = r->stopped_on_eos ? "eos_token_id" : n == total ? limit : "callback";
    return TXC_OK;
}

void txc_generate_result_free(txc_generate_result *r)
{
    free(r->new_ids);
    memset(r, 0, sizeof *r);
}
