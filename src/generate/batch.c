/* Batched generation: slots over one StaticCache, iteration-level
 * scheduling with chunked prefill, prefix reuse. See include/txc/batch.h.
 *
 * A slot's state: FREE (keeps ids[0, n_cached) in its cache row for
 * prefix reuse), PREFILL (ids[0, n_prompt) is the prompt, ids[0, n_cached)
 * are in the cache) or DECODE (ids[0, n_ids) is prompt + new tokens, all but
 * the last in the cache: n_cached = n_ids - 1). */
#include "txc/batch.h"
#include "ops/kernels.h"
#include "txc/ops.h"
#include "txc/tree.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { SLOT_FREE, SLOT_PREFILL, SLOT_DECODE };

typedef struct slot {
    int state;
    txc_batch_request req;   /* input_ids not kept (ids holds them) */
    int32_t *ids;            /* max_cache_len */
    int64_t n_ids, n_cached, n_prompt, n_reused, n_new;
    uint64_t order;          /* when it was added (prefill order) */
    txc_tensor *rng;         /* [seed, counter] int64 (owned) */
    txc_tensor *seen;        /* bool (V): prompt + generated (repetition_penalty) (owned) */
    int32_t *counts;         /* (V): generated tokens (presence / frequency penalties) */
} slot;

#define MAX_LEAVES (2 * 512)

struct txc_batch {
    txc_model *model;
    txc_env *env;
    txc_batch_options opts;
    int64_t V, max_cache_len;
    txc_kv_cache *cache;      /* (n_slots, kv heads, max_cache_len, head_dim) per layer */
    txc_tensor *leaves[MAX_LEAVES];
    int n_leaves;
    unsigned char aux[TXC_TREE_MAX_AUX];
    size_t aux_len;
    txc_jit *jit[2];          /* prefill (one slot), decode (all rows) */
    txc_tensor **in;
    const char **names;
    char (*leaf_names)[64];
    slot slots[TXC_BATCH_MAX_SLOTS];
    uint64_t order;
    txc_batch_stats stats;
    float *row;               /* V floats: a logits row being processed */
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

txc_batch_options txc_batch_default_options(void)
{
    return (txc_batch_options){
        .n_slots = 8, .max_cache_len = 0, .prefill_chunk = 256, .prefill_tokens = 512, .jit = true};
}

txc_batch_request txc_batch_default_request(const txc_model *model, const char *model_dir)
{
    txc_batch_request r;
    memset(&r, 0, sizeof r);
    r.gen = txc_generate_default_options(model, model_dir);
    r.cache_prompt = true;
    return r;
}

/* ---- the traced steps ---------------------------------------------------------------
 * inputs: the parameters, the cache leaves (views of the batch's cache:
 * rows [lo, lo + G) for a prefill of G slots, rows [0, Bk) for a decode),
 * input_ids int64 (B, L), cache_position int64 (L) for a prefill of one
 * slot (one sequence, padded to a bucket, as txc_generator_run's) or
 * (G, L) for a prefill of G > 1 slots and (Bk, 1) for a decode (each row
 * its own positions), and for a prefill logits_index int64 (1) (one slot)
 * or (G) (each row's last real token). output: logits (B, 1, V). The cache
 * is written in place (its leaves are inputs). */

typedef struct step_statics {
    int32_t n_params, n_leaves, prefill, pad;
    unsigned char aux[TXC_TREE_MAX_AUX];
    size_t aux_len;
} step_statics;

static txc_status step_fn(void *ctx, txc_tensor *const *in, int n_in, const void *statics_p, size_t len,
                          txc_tensor **out, int max_out, int *n_out)
{
    txc_batch *b = ctx;
    step_statics st;
    if (len != sizeof st)
        return txc_error(TXC_ERR_INTERNAL, "batch step: bad static arguments");
    memcpy(&st, statics_p, sizeof st);
    int P = st.n_params, C = st.n_leaves;
    if (n_in != P + C + 2 + st.prefill || max_out < 1)
        return txc_error(TXC_ERR_INTERNAL, "batch step: %d inputs", n_in);
    txc_kv_cache *cache = txc_tree_unflatten("StaticCache", st.aux, st.aux_len, in + P, C, b->env);
    if (!cache)
        return txc_last_status();
    out[0] = txc_model_forward_with(b->model, in, in[P + C], NULL, cache, in[P + C + 1], 1,
                                    st.prefill ? in[P + C + 2] : NULL);
    *n_out = 1;
    txc_tree_free("StaticCache", cache);
    return out[0] ? TXC_OK : (txc_last_status() ? txc_last_status() : TXC_ERR_INTERNAL);
}

/* Run one step over `leaves` (views) and return its logits (B, 1, V) as
 * float32 rows (borrowed: the plan's arena, or the open scope's tensor), or
 * NULL. Call inside a scope. */
static const float *forward(txc_batch *b, bool prefill, txc_tensor **leaves, txc_tensor *input_ids,
                            txc_tensor *cache_position, txc_tensor *logits_index)
{
    int P = txc_model_num_parameters(b->model);
    step_statics st;
    memset(&st, 0, sizeof st);
    st.n_params = P;
    st.n_leaves = b->n_leaves;
    st.prefill = prefill;
    memcpy(st.aux, b->aux, b->aux_len);
    st.aux_len = b->aux_len;
    txc_tensor **in = b->in;
    memcpy(in, txc_model_parameters(b->model), sizeof *in * (size_t)P);
    memcpy(in + P, leaves, sizeof *in * (size_t)b->n_leaves);
    int n = P + b->n_leaves;
    in[n++] = input_ids;
    in[n++] = cache_position;
    if (prefill)
        in[n++] = logits_index;
    txc_tensor *out[1] = {NULL};
    int n_out = 0;
    if (!b->opts.jit) {
        if (step_fn(b, in, n, &st, sizeof st, out, 1, &n_out) != TXC_OK)
            return NULL;
    } else {
        const char **names = b->names;
        names[n - 2 - prefill] = "input_ids";
        names[n - 1 - prefill] = "cache_position";
        if (prefill)
            names[n - 1] = "logits_index";
        if (txc_jit_call(b->jit[!prefill], in, n, names, &st, sizeof st, out, 1, &n_out) != TXC_OK)
            return NULL;
    }
    if (!out[0] || txc_tensor_dtype(out[0]) != TXC_F32 || !txc_tensor_is_contiguous(out[0])) {
        txc_error(TXC_ERR_INTERNAL, "batch step: logits are not contiguous float32");
        return NULL;
    }
    return txc_tensor_data_ptr(out[0]);
}

/* ---- creation -------------------------------------------------------------------- */

static void slot_release(slot *s)
{
    txc_tensor_release(s->rng);
    txc_tensor_release(s->seen);
    s->rng = s->seen = NULL;
}

void txc_batch_free(txc_batch *b)
{
    if (!b)
        return;
    for (int i = 0; i < TXC_BATCH_MAX_SLOTS; i++) {
        slot_release(&b->slots[i]);
        free(b->slots[i].ids);
        free(b->slots[i].counts);
    }
    txc_jit_free(b->jit[0]);
    txc_jit_free(b->jit[1]);
    txc_kv_cache_free(b->cache);
    free(b->in);
    free(b->names);
    free(b->leaf_names);
    free(b->row);
    free(b);
}

/* The default per-slot length when none is given (as a session's). */
#define BATCH_DEFAULT_MAX_CACHE_LEN 4096

txc_batch *txc_batch_new(txc_model *model, const txc_batch_options *opts)
{
    txc_batch_options o = opts ? *opts : txc_batch_default_options();
    if (o.n_slots < 1 || o.n_slots > TXC_BATCH_MAX_SLOTS) {
        txc_error(TXC_ERR_INVALID, "batch: n_slots must be in [1, %d], got %d", TXC_BATCH_MAX_SLOTS, o.n_slots);
        return NULL;
    }
    if (o.max_cache_len < 0) {
        txc_error(TXC_ERR_INVALID, "batch: max_cache_len must be >= 0 (0: the default), got %lld",
                  (long long)o.max_cache_len);
        return NULL;
    }
    if (o.prefill_chunk < 1) {
        txc_error(TXC_ERR_INVALID, "batch: prefill_chunk must be >= 1, got %lld", (long long)o.prefill_chunk);
        return NULL;
    }
    if (o.prefill_tokens < 0) {
        txc_error(TXC_ERR_INVALID, "batch: prefill_tokens must be >= 0 (0: prefill_chunk), got %lld",
                  (long long)o.prefill_tokens);
        return NULL;
    }
    if (o.prefill_tokens == 0)
        o.prefill_tokens = o.prefill_chunk;
    const int64_t max_pos = txc_model_max_positions(model);
    if (max_pos == INT64_MAX) {
        txc_error(TXC_ERR_UNSUPPORTED, "batch: dynamic NTK RoPE scales every row by the batch's longest sequence "
                                       "(transformers' dynamic rope_scaling): batched rows would depend on each "
                                       "other; generate them one at a time");
        return NULL;
    }
    if (o.max_cache_len == 0)
        o.max_cache_len = BATCH_DEFAULT_MAX_CACHE_LEN;
    if (o.max_cache_len > max_pos)
        o.max_cache_len = max_pos;
    const txc_hf_config *c = txc_model_config(model);
    if (2 * c->num_hidden_layers > MAX_LEAVES) {
        txc_error(TXC_ERR_UNSUPPORTED, "batch: %lld layers (at most %d)", (long long)c->num_hidden_layers,
                  MAX_LEAVES / 2);
        return NULL;
    }
    if (txc_cache_register_trees() != TXC_OK)
        return NULL;
    txc_batch *b = calloc(1, sizeof *b);
    if (!b) {
        txc_error(TXC_ERR_NOMEM, "out of memory (batch)");
        return NULL;
    }
    b->model = model;
    b->env = txc_model_env(model);
    b->opts = o;
    b->V = c->vocab_size;
    b->max_cache_len = o.max_cache_len;
    int P = txc_model_num_parameters(model);
    size_t n_in = (size_t)P + MAX_LEAVES + 4;
    b->in = calloc(n_in, sizeof *b->in);
    b->names = calloc(n_in, sizeof *b->names);
    b->leaf_names = calloc(MAX_LEAVES, sizeof *b->leaf_names);
    b->row = malloc(sizeof(float) * (size_t)b->V);
    bool ok = b->in && b->names && b->leaf_names && b->row;
    for (int i = 0; ok && i < o.n_slots; i++) {
        b->slots[i].ids = malloc(sizeof(int32_t) * (size_t)b->max_cache_len);
        b->slots[i].counts = calloc((size_t)b->V, sizeof(int32_t));
        ok = b->slots[i].ids && b->slots[i].counts;
    }
    if (!ok) {
        txc_error(TXC_ERR_NOMEM, "out of memory (batch)");
        txc_batch_free(b);
        return NULL;
    }
    b->cache = txc_static_cache_new(b->env, (int)c->num_hidden_layers, o.n_slots, c->num_key_value_heads,
                                    b->max_cache_len, c->head_dim);
    if (b->cache)
        txc_tree_flatten("StaticCache", b->cache, b->leaves, MAX_LEAVES, &b->n_leaves, b->aux, &b->aux_len);
    b->jit[0] = txc_jit_new(b->env, "batch-prefill", step_fn, b);
    b->jit[1] = txc_jit_new(b->env, "batch-decode", step_fn, b);
    if (!b->cache || b->n_leaves != 2 * c->num_hidden_layers || !b->jit[0] || !b->jit[1]) {
        txc_batch_free(b);
        return NULL;
    }
    for (int i = 0; i < P; i++)
        b->names[i] = txc_model_parameter_name(model, i);
    const txc_tree_def *d = txc_tree_find("StaticCache");
    for (int i = 0; i < b->n_leaves; i++) {
        d->leaf_name(b->aux, b->aux_len, i, b->leaf_names[i], sizeof b->leaf_names[i]);
        b->names[P + i] = b->leaf_names[i];
    }
    return b;
}

int txc_batch_n_slots(const txc_batch *b) { return b->opts.n_slots; }
int64_t txc_batch_max_cache_len(const txc_batch *b) { return b->max_cache_len; }

int txc_batch_busy(const txc_batch *b)
{
    int n = 0;
    for (int i = 0; i < b->opts.n_slots; i++)
        n += b->slots[i].state != SLOT_FREE;
    return n;
}

txc_batch_stats txc_batch_get_stats(const txc_batch *b)
{
    txc_batch_stats s = b->stats;
    for (int i = 0; i < 2; i++) {
        txc_jit_stats js = txc_jit_get_stats(b->jit[i]);
        s.compilations += (int64_t)(js.misses - js.cache_loads);
    }
    return s;
}

void txc_batch_set_profile(txc_batch *b, bool on)
{
    txc_jit_set_profile(b->jit[0], on);
    txc_jit_set_profile(b->jit[1], on);
}

const txc_jit *txc_batch_jit(const txc_batch *b, int which) { return b->jit[which != 0]; }

/* ---- requests -------------------------------------------------------------------- */

/* The checks of txc_generator_run's sampling options, run on a dummy row
 * so the messages are the same (txc_generate_next_token checks first). */
static txc_status check_request(const txc_batch *b, const txc_batch_request *r)
{
    if (r->n_input < 1 || !r->input_ids)
        return txc_error(TXC_ERR_INVALID, "batch: the prompt is empty (it needs at least one id, e.g. BOS)");
    for (int64_t i = 0; i < r->n_input; i++)
        if (r->input_ids[i] < 0 || r->input_ids[i] >= b->V)
            return txc_error(TXC_ERR_INVALID, "batch: input id %d at position %lld is outside the vocabulary (%lld)",
                             r->input_ids[i], (long long)i, (long long)b->V);
    if (r->n_input >= b->max_cache_len)
        return txc_error(TXC_ERR_CAPACITY, "batch: the prompt has %lld tokens, %s the context (max_cache_len %lld; "
                                           "no room for a new token)",
                         (long long)r->n_input, r->n_input > b->max_cache_len ? "more than" : "as many as",
                         (long long)b->max_cache_len);
    const txc_generate_options *o = &r->gen;
    if (o->max_new_tokens < 1)
        return txc_error(TXC_ERR_INVALID, "batch: max_new_tokens must be >= 1 (got %lld)",
                         (long long)o->max_new_tokens);
    if (o->n_eos < 0 || o->n_eos > TXC_MAX_EOS_IDS)
        return txc_error(TXC_ERR_INVALID, "batch: n_eos must be in [0, %d], got %d", TXC_MAX_EOS_IDS, o->n_eos);
    if (!(r->presence_penalty >= -2 && r->presence_penalty <= 2))
        return txc_error(TXC_ERR_INVALID, "batch: presence_penalty must be in [-2, 2], got %g", r->presence_penalty);
    if (!(r->frequency_penalty >= -2 && r->frequency_penalty <= 2))
        return txc_error(TXC_ERR_INVALID, "batch: frequency_penalty must be in [-2, 2], got %g",
                         r->frequency_penalty);
    if (r->top_logprobs < 0 || r->top_logprobs > TXC_BATCH_MAX_TOP_LOGPROBS)
        return txc_error(TXC_ERR_INVALID, "batch: top_logprobs must be in [0, %d], got %d",
                         TXC_BATCH_MAX_TOP_LOGPROBS, r->top_logprobs);
    /* the sampling fields: as txc_generator_run (one processed dummy row) */
    txc_env *env = b->env;
    int mark = txc_env_scope_begin(env);
    if (mark < 0)
        return TXC_ERR_NOMEM;
    txc_tensor *row = txc_zeros(env, 1, (int64_t[]){2}, TXC_F32);
    txc_tensor *seen = txc_zeros(env, 1, (int64_t[]){2}, TXC_BOOL);
    txc_tensor *rng = txc_rng_state(env, 0);
    txc_tensor *tok = row && seen && rng ? txc_generate_next_token(row, seen, rng, o) : NULL;
    txc_env_scope_end(env, mark);
    if (!tok) {
        txc_status s = txc_last_status();
        return s ? s : TXC_ERR_INTERNAL;
    }
    return TXC_OK;
}

/* A persistent tensor: made in a scope, kept by a reference of its own. */
static txc_tensor *keep(txc_tensor *t) { return t ? txc_tensor_retain(t) : NULL; }

txc_status txc_batch_add(txc_batch *b, const txc_batch_request *req, int *slot_out)
{
    if (!b || !req || !slot_out)
        return txc_error(TXC_ERR_INVALID, "batch: NULL argument");
    txc_status st = check_request(b, req);
    if (st != TXC_OK)
        return st;
    /* the free slot sharing the longest prefix (cache_prompt), else the lowest */
    int best = -1;
    int64_t best_p = -1;
    for (int i = 0; i < b->opts.n_slots; i++) {
        const slot *s = &b->slots[i];
        if (s->state != SLOT_FREE)
            continue;
        int64_t p = 0;
        if (req->cache_prompt)
            while (p < s->n_cached && p < req->n_input && s->ids[p] == req->input_ids[p])
                p++;
        if (p > best_p)
            best = i, best_p = p;
    }
    if (best < 0)
        return txc_error(TXC_ERR_CAPACITY, "batch: all %d slots are busy", b->opts.n_slots);
    if (best_p == req->n_input) /* the last prompt id runs again: its logits give the first token */
        best_p--;
    slot *s = &b->slots[best];
    txc_env *env = b->env;
    int mark = txc_env_scope_begin(env);
    if (mark < 0)
        return TXC_ERR_NOMEM;
    txc_tensor *rng = keep(txc_rng_state(env, req->gen.seed));
    txc_tensor *seen = keep(txc_zeros(env, 1, &b->V, TXC_BOOL));
    txc_env_scope_end(env, mark);
    if (!rng || !seen) {
        txc_tensor_release(rng);
        txc_tensor_release(seen);
        return txc_last_status() ? txc_last_status() : TXC_ERR_NOMEM;
    }
    slot_release(s);
    s->rng = rng;
    s->seen = seen;
    unsigned char *m = txc_tensor_data_ptr(seen);
    for (int64_t i = 0; i < req->n_input; i++)
        m[req->input_ids[i]] = 1;
    memset(s->counts, 0, sizeof(int32_t) * (size_t)b->V);
    s->req = *req;
    s->req.input_ids = NULL;
    memcpy(s->ids, req->input_ids, sizeof(int32_t) * (size_t)req->n_input);
    s->n_ids = s->n_prompt = req->n_input;
    s->n_cached = s->n_reused = best_p;
    s->n_new = 0;
    s->order = b->order++;
    s->state = SLOT_PREFILL;
    b->stats.requests++;
    b->stats.reused_tokens += best_p;
    *slot_out = best;
    return TXC_OK;
}

txc_status txc_batch_cancel(txc_batch *b, int i)
{
    if (!b || i < 0 || i >= b->opts.n_slots || b->slots[i].state == SLOT_FREE)
        return txc_error(TXC_ERR_INVALID, "batch: slot %d is not busy", i);
    b->slots[i].state = SLOT_FREE; /* ids[0, n_cached) stay for prefix reuse */
    return TXC_OK;
}

/* ---- choosing a token -------------------------------------------------------------- */

/* log_softmax of the raw row: logprob of `tok` and the top n (ties: lower id). */
static void logprobs_of(const float *x, int64_t V, int32_t tok, int n, txc_batch_event *e)
{
    float mx = -INFINITY;
    for (int64_t j = 0; j < V; j++)
        mx = x[j] > mx ? x[j] : mx;
    double sum = 0;
    for (int64_t j = 0; j < V; j++)
        sum += exp((double)x[j] - (double)mx);
    double lse = (double)mx + log(sum);
    e->logprob = (float)((double)x[tok] - lse);
    e->n_top = 0;
    for (int64_t j = 0; j < V && n > 0; j++) { /* insertion into the sorted top n */
        int k = e->n_top;
        if (k == n && !(x[j] > x[e->top_ids[k - 1]]))
            continue;
        if (k < n)
            e->n_top++;
        else
            k--;
        while (k > 0 && x[j] > x[e->top_ids[k - 1]]) {
            e->top_ids[k] = e->top_ids[k - 1];
            k--;
        }
        e->top_ids[k] = (int32_t)j;
    }
    for (int k = 0; k < e->n_top; k++)
        e->top_logprobs[k] = (float)((double)x[e->top_ids[k]] - lse);
}

/* The next token of slot s from its logits row (V floats): OpenAI's
 * penalties, then txc_generate_next_token (repetition penalty, greedy or
 * sampling with the slot's RNG state). -1 on error. */
static int32_t choose(txc_batch *b, slot *s, const float *logits, txc_batch_event *e)
{
    const int64_t V = b->V;
    const float *x = logits;
    if (s->req.presence_penalty != 0 || s->req.frequency_penalty != 0) {
        memcpy(b->row, logits, sizeof(float) * (size_t)V);
        for (int64_t t = 0; t < V; t++)
            if (s->counts[t])
                b->row[t] -= (float)(s->req.presence_penalty + s->req.frequency_penalty * s->counts[t]);
        x = b->row;
    }
    txc_env *env = b->env;
    int mark = txc_env_scope_begin(env);
    if (mark < 0)
        return -1;
    txc_tensor *row = txc_tensor_from_data(env, TXC_F32, 1, &V, x);
    txc_tensor *tok = row ? txc_generate_next_token(row, s->seen, s->rng, &s->req.gen) : NULL;
    int32_t t = tok ? (int32_t)txc_tensor_item(tok) : -1;
    txc_env_scope_end(env, mark);
    if (t < 0 || t >= V)
        return -1;
    if (s->req.logprobs)
        logprobs_of(logits, V, t, s->req.top_logprobs, e);
    if (s->req.logits_out)
        memcpy(s->req.logits_out + s->n_new * V, logits, sizeof(float) * (size_t)V);
    return t;
}

/* Append token t to slot i and fill its event; frees the slot when it ends. */
static void emit(txc_batch *b, int i, int32_t t, txc_batch_event *e)
{
    slot *s = &b->slots[i];
    s->ids[s->n_ids++] = t;
    s->n_new++;
    s->counts[t]++;
    ((unsigned char *)txc_tensor_data_ptr(s->seen))[t] = 1;
    s->n_cached = s->n_ids - 1;
    s->state = SLOT_DECODE;
    e->slot = i;
    e->id = s->req.id;
    e->token_id = t;
    e->n_new = s->n_new;
    e->n_prompt = s->n_prompt;
    e->n_reused = s->n_reused;
    e->finish = TXC_BATCH_RUNNING;
    for (int k = 0; k < s->req.gen.n_eos; k++)
        if (t == s->req.gen.eos_token_id[k])
            e->finish = TXC_BATCH_STOP;
    if (e->finish == TXC_BATCH_RUNNING && (s->n_new >= s->req.gen.max_new_tokens || s->n_ids >= b->max_cache_len))
        e->finish = TXC_BATCH_LENGTH;
    if (e->finish != TXC_BATCH_RUNNING)
        s->state = SLOT_FREE;
    b->stats.decode_tokens++;
}

/* ---- the step -------------------------------------------------------------------- */

/* Decode rows: the smallest power of two >= n, at most cap. */
static int64_t pow2_bucket(int64_t n, int64_t cap)
{
    int64_t p = 1;
    while (p < n)
        p *= 2;
    return p < cap ? p : cap;
}

/* Prefill lengths above TXC_KERN_ROWS_INVARIANT_MAX are padded to a
 * multiple of this. */
#define PREFILL_ALIGN 8

/* The padded length of a compiled prefill chunk of n tokens with cap
 * positions left in the slot's cache: up to TXC_KERN_ROWS_INVARIANT_MAX
 * (32) the smallest power of two >= n (txc_generator_run's buckets), above
 * it the next multiple of PREFILL_ALIGN (a 40-token prompt runs as 40 rows,
 * not 64: the prefill GEMMs' work is proportional to the rows); at most
 * cap. Both sides of 32 keep the GEMM kernel of the chunk's own length
 * (linalg.c chooses it by the row count: the multi-row GEMV up to 32, the
 * many-row GEMM above), so padding never switches a chunk's kernel. */
static int64_t prefill_bucket(int64_t n, int64_t cap)
{
    int64_t p = n <= TXC_KERN_ROWS_INVARIANT_MAX ? pow2_bucket(n, TXC_KERN_ROWS_INVARIANT_MAX)
                                                 : (n + PREFILL_ALIGN - 1) / PREFILL_ALIGN * PREFILL_ALIGN;
    return p < cap ? p : cap;
}

/* A slot's next prompt chunk: positions [from, from + L) of its ids, run as
 * Lp rows. A function of the request alone (its prompt, what it reused,
 * prefill_chunk, max_cache_len), never of the other slots: the chunk's bits
 * depend on its length (the kernels chosen by it). */
typedef struct chunk {
    int64_t from, L, Lp;
} chunk;

static chunk next_chunk(const txc_batch *b, const slot *s)
{
    chunk c;
    c.from = s->n_cached;
    c.L = s->n_prompt - c.from;
    if (c.L > b->opts.prefill_chunk)
        c.L = b->opts.prefill_chunk;
    c.Lp = b->opts.jit ? prefill_bucket(c.L, b->max_cache_len - c.from) : c.L;
    return c;
}

/* Whether slot k can join a group of n slots whose chunks are Lp rows,
 * with `room` rows left in this step. A group is one forward of (n, Lp)
 * over cache rows [lo, lo + n): its GEMMs have n * Lp rows, so chunks of
 * at most 32 rows (the multi-row GEMV, each row's bits those of one row)
 * group only while the group has at most 32 rows; longer chunks (the
 * many-row GEMM, every row's bits independent of the row count above 32
 * where txc_kern_gemm_rows_invariant) group up to the room. Either way
 * each row gets the kernel, and so the bits, of its chunk run alone. */
static bool joins(const txc_batch *b, int k, const bool *taken, int64_t Lp, int n, int64_t room)
{
    if (k < 0 || k >= b->opts.n_slots || taken[k] || b->slots[k].state != SLOT_PREFILL)
        return false;
    if (next_chunk(b, &b->slots[k]).Lp != Lp)
        return false;
    const int64_t rows = (int64_t)(n + 1) * Lp;
    if (rows > room)
        return false;
    return Lp > TXC_KERN_ROWS_INVARIANT_MAX ? txc_kern_gemm_rows_invariant() : rows <= TXC_KERN_ROWS_INVARIANT_MAX;
}

/* One prefill forward of the next chunks of slots [lo, lo + n) (equal
 * padded lengths Lp); the first token of every slot whose prompt it ends
 * (its event, emitted[slot] set). */
static txc_status prefill_group(txc_batch *b, int lo, int n, int64_t Lp, txc_batch_event *ev, int *n_ev,
                                bool *emitted)
{
    chunk c[TXC_BATCH_MAX_SLOTS];
    for (int r = 0; r < n; r++)
        c[r] = next_chunk(b, &b->slots[lo + r]);
    txc_env *env = b->env;
    double t0 = now_ms();
    int mark = txc_env_scope_begin(env);
    if (mark < 0)
        return TXC_ERR_NOMEM;
    txc_status st = TXC_OK;
    txc_tensor *views[MAX_LEAVES];
    for (int l = 0; l < b->n_leaves && st == TXC_OK; l++)
        if (!(views[l] = txc_narrow(b->leaves[l], 0, lo, n)))
            st = txc_last_status();
    /* one slot: cache_position (Lp) and logits_index (1), as
     * txc_generator_run's prefill; several: (n, Lp) and (n), each row its own */
    int64_t shape[2] = {n, Lp}, n_li = n;
    txc_tensor *ids = txc_zeros(env, 2, shape, TXC_I64);
    txc_tensor *pos = n == 1 ? txc_arange(env, (double)c[0].from, (double)(c[0].from + Lp), 1, TXC_I64)
                             : txc_zeros(env, 2, shape, TXC_I64);
    txc_tensor *li = txc_zeros(env, 1, &n_li, TXC_I64);
    if (st == TXC_OK && (!ids || !pos || !li))
        st = txc_last_status() ? txc_last_status() : TXC_ERR_NOMEM;
    if (st == TXC_OK) {
        int64_t *p = txc_tensor_data_ptr(ids), *pp = txc_tensor_data_ptr(pos), *pl = txc_tensor_data_ptr(li);
        for (int r = 0; r < n; r++) {
            const slot *s = &b->slots[lo + r];
            for (int64_t k = 0; k < c[r].L; k++)
                p[r * Lp + k] = s->ids[c[r].from + k];
            /* padding rows continue the positions (bucketed within the
             * cache): they write past the real tokens, which the next
             * chunk or decode step overwrites */
            for (int64_t k = 0; n > 1 && k < Lp; k++)
                pp[r * Lp + k] = c[r].from + k;
            pl[r] = c[r].L - 1;
        }
        const float *logits = forward(b, true, views, ids, pos, li);
        if (!logits)
            st = txc_last_status() ? txc_last_status() : TXC_ERR_INTERNAL;
        for (int r = 0; logits && r < n && st == TXC_OK; r++) {
            slot *s = &b->slots[lo + r];
            s->n_cached = c[r].from + c[r].L;
            b->stats.prefill_tokens += c[r].L;
            if (s->n_cached < s->n_prompt)
                continue;
            txc_batch_event *e = &ev[*n_ev];
            memset(e, 0, sizeof *e);
            int32_t t = choose(b, s, logits + (int64_t)r * b->V, e);
            if (t < 0) {
                st = txc_last_status() ? txc_last_status() : TXC_ERR_INTERNAL;
                break;
            }
            emit(b, lo + r, t, e);
            (*n_ev)++;
            emitted[lo + r] = true;
        }
    }
    txc_env_scope_end(env, mark);
    b->stats.prefill_forwards++;
    b->stats.prefill_rows += (int64_t)n * Lp;
    b->stats.prefill_ms += now_ms() - t0;
    return st;
}

/* The step's prefills: the slot that waited longest, with the neighbouring
 * slots (adjacent cache rows) whose chunks have its padded length, in one
 * forward (joins), then the same for the longest-waiting slot left, while
 * the step's padded rows stay within prefill_tokens (the first group runs
 * whatever its size). The oldest that does not fit waits for the next step
 * (first come, first served). */
static txc_status prefill_step(txc_batch *b, txc_batch_event *ev, int *n_ev, bool *emitted)
{
    bool taken[TXC_BATCH_MAX_SLOTS] = {false};
    int64_t used = 0;
    for (;;) {
        int i = -1;
        for (int k = 0; k < b->opts.n_slots; k++)
            if (b->slots[k].state == SLOT_PREFILL && !taken[k] && (i < 0 || b->slots[k].order < b->slots[i].order))
                i = k;
        if (i < 0)
            return TXC_OK;
        const int64_t Lp = next_chunk(b, &b->slots[i]).Lp;
        if (used > 0 && used + Lp > b->opts.prefill_tokens)
            return TXC_OK;
        const int64_t room = used > 0 ? b->opts.prefill_tokens - used
                                      : (b->opts.prefill_tokens > Lp ? b->opts.prefill_tokens : Lp);
        int lo = i, n = 1;
        taken[i] = true;
        while (joins(b, lo + n, taken, Lp, n, room))
            taken[lo + n++] = true;
        while (joins(b, lo - 1, taken, Lp, n, room))
            taken[--lo] = true, n++;
        txc_status st = prefill_group(b, lo, n, Lp, ev, n_ev, emitted);
        if (st != TXC_OK)
            return st;
        used += (int64_t)n * Lp;
    }
}

/* One decode forward over rows [0, Bk) for every DECODE slot not emitted
 * this step (a prefill just gave it its first token). */
static txc_status decode_step(txc_batch *b, const bool *emitted, txc_batch_event *ev, int *n_ev)
{
    int hi = -1;
    for (int k = 0; k < b->opts.n_slots; k++)
        if (b->slots[k].state == SLOT_DECODE && !emitted[k])
            hi = k;
    if (hi < 0)
        return TXC_OK;
    const int64_t Bk = pow2_bucket(hi + 1, b->opts.n_slots);
    txc_env *env = b->env;
    double t0 = now_ms();
    int mark = txc_env_scope_begin(env);
    if (mark < 0)
        return TXC_ERR_NOMEM;
    txc_status st = TXC_OK;
    txc_tensor *views[MAX_LEAVES];
    for (int l = 0; l < b->n_leaves && st == TXC_OK; l++)
        if (!(views[l] = txc_narrow(b->leaves[l], 0, 0, Bk)))
            st = txc_last_status();
    int64_t shape[2] = {Bk, 1};
    txc_tensor *ids = txc_zeros(env, 2, shape, TXC_I64);
    txc_tensor *pos = txc_zeros(env, 2, shape, TXC_I64);
    if (st == TXC_OK && (!ids || !pos))
        st = txc_last_status() ? txc_last_status() : TXC_ERR_NOMEM;
    if (st == TXC_OK) {
        int64_t *pi = txc_tensor_data_ptr(ids), *pp = txc_tensor_data_ptr(pos);
        for (int64_t k = 0; k < Bk; k++) {
            const slot *s = &b->slots[k];
            /* a row that is not decoding is fed at the position just past
             * what its slot holds: nothing valid is overwritten */
            pp[k] = s->n_cached;
            pi[k] = s->state == SLOT_DECODE && !emitted[k] ? s->ids[s->n_ids - 1] : 0;
        }
        const float *logits = forward(b, false, views, ids, pos, NULL);
        if (!logits)
            st = txc_last_status() ? txc_last_status() : TXC_ERR_INTERNAL;
        for (int64_t k = 0; logits && k < Bk && st == TXC_OK; k++) {
            slot *s = &b->slots[k];
            if (s->state != SLOT_DECODE || emitted[k])
                continue;
            txc_batch_event *e = &ev[*n_ev];
            memset(e, 0, sizeof *e);
            s->n_cached = s->n_ids; /* the fed token is in the cache now */
            int32_t t = choose(b, s, logits + k * b->V, e);
            if (t < 0) {
                st = txc_last_status() ? txc_last_status() : TXC_ERR_INTERNAL;
                break;
            }
            emit(b, (int)k, t, e);
            (*n_ev)++;
        }
    }
    txc_env_scope_end(env, mark);
    b->stats.decode_ms += now_ms() - t0;
    b->stats.decode_bucket = (int)Bk;
    return st;
}

static int cmp_event(const void *a, const void *b)
{
    return ((const txc_batch_event *)a)->slot - ((const txc_batch_event *)b)->slot;
}

txc_status txc_batch_step(txc_batch *b, txc_batch_event *events, int max_events, int *n_events)
{
    if (!b || !events || !n_events)
        return txc_error(TXC_ERR_INVALID, "batch: NULL argument");
    *n_events = 0;
    if (max_events < b->opts.n_slots)
        return txc_error(TXC_ERR_INVALID, "batch: room for %d events, the batch has %d slots", max_events,
                         b->opts.n_slots);
    if (txc_batch_busy(b) == 0)
        return TXC_OK;
    bool emitted[TXC_BATCH_MAX_SLOTS] = {false};
    txc_status st = prefill_step(b, events, n_events, emitted);
    if (st == TXC_OK)
        st = decode_step(b, emitted, events, n_events);
    b->stats.steps++;
    if (st != TXC_OK) {
        /* every busy request ends; what the cache holds is unknown */
        *n_events = 0;
        for (int i = 0; i < b->opts.n_slots; i++) {
            slot *s = &b->slots[i];
            if (s->state != SLOT_FREE) {
                txc_batch_event *e = &events[(*n_events)++];
                memset(e, 0, sizeof *e);
                e->slot = i;
                e->id = s->req.id;
                e->token_id = -1;
                e->finish = TXC_BATCH_ERROR;
                e->n_new = s->n_new;
                e->n_prompt = s->n_prompt;
                e->n_reused = s->n_reused;
            }
            s->state = SLOT_FREE;
            s->n_cached = 0;
        }
        return st;
    }
    qsort(events, (size_t)*n_events, sizeof *events, cmp_event);
    return TXC_OK;
}

/* ---- a whole left-padded batch ---------------------------------------------------- */

txc_status txc_batch_generate(txc_model *model, const txc_batch_options *opts, int64_t B, int64_t T,
                              const int32_t *input_ids, const uint8_t *attention_mask,
                              const txc_batch_request *req, txc_generate_result *results)
{
    if (B < 1 || T < 1 || !input_ids || !req || !results)
        return txc_error(TXC_ERR_INVALID, "batch generate: input_ids must be (B, T) with B, T >= 1");
    int64_t *start = malloc(sizeof(int64_t) * (size_t)B);
    int32_t **out = calloc((size_t)B, sizeof *out);
    if (!start || !out) {
        free(start);
        free(out);
        return txc_error(TXC_ERR_NOMEM, "out of memory (batch generate)");
    }
    txc_status st = TXC_OK;
    for (int64_t r = 0; r < B && st == TXC_OK; r++) {
        int64_t k = 0;
        if (attention_mask) {
            const uint8_t *m = attention_mask + r * T;
            while (k < T && !m[k])
                k++;
            for (int64_t j = k; j < T && st == TXC_OK; j++)
                if (!m[j])
                    st = txc_error(TXC_ERR_INVALID, "batch generate: row %lld of attention_mask is not left padding "
                                                    "(a 0 at column %lld after a 1)", (long long)r, (long long)j);
            if (k == T && st == TXC_OK)
                st = txc_error(TXC_ERR_INVALID, "batch generate: row %lld of attention_mask has no real token",
                               (long long)r);
        }
        start[r] = k;
    }
    txc_batch_options o = opts ? *opts : txc_batch_default_options();
    if (o.n_slots > B)
        o.n_slots = (int)B;
    txc_batch *b = st == TXC_OK ? txc_batch_new(model, &o) : NULL;
    if (st == TXC_OK && !b)
        st = txc_last_status() ? txc_last_status() : TXC_ERR_INTERNAL;
    txc_batch_event ev[TXC_BATCH_MAX_SLOTS];
    int64_t next = 0, done = 0;
    memset(results, 0, sizeof *results * (size_t)B);
    while (st == TXC_OK && done < B) {
        while (next < B && txc_batch_busy(b) < o.n_slots) {
            txc_batch_request q = *req;
            q.id = (uint64_t)next;
            q.input_ids = input_ids + next * T + start[next];
            q.n_input = T - start[next];
            int s;
            if ((st = txc_batch_add(b, &q, &s)) != TXC_OK)
                break;
            if (!(out[next] = malloc(sizeof(int32_t) * (size_t)(req->gen.max_new_tokens > 0 ? req->gen.max_new_tokens : 1)))) {
                st = txc_error(TXC_ERR_NOMEM, "out of memory (batch generate)");
                break;
            }
            next++;
        }
        int n = 0;
        if (st == TXC_OK)
            st = txc_batch_step(b, ev, TXC_BATCH_MAX_SLOTS, &n);
        for (int k = 0; k < n && st == TXC_OK; k++) {
            txc_generate_result *r = &results[ev[k].id];
            out[ev[k].id][r->n_new++] = ev[k].token_id;
            if (ev[k].finish != TXC_BATCH_RUNNING) {
                r->stopped_on_eos = ev[k].finish == TXC_BATCH_STOP;
                r->stop_reason = r->stopped_on_eos ? "eos_token_id"
                                 : r->n_new >= req->gen.max_new_tokens ? "max_new_tokens"
                                                                       : "max_cache_len";
                r->max_cache_len = txc_batch_max_cache_len(b);
                r->n_reused = ev[k].n_reused;
                r->n_prefilled = ev[k].n_prompt - ev[k].n_reused;
                r->new_ids = out[ev[k].id];
                out[ev[k].id] = NULL;
                done++;
            }
        }
    }
    txc_batch_free(b);
    for (int64_t r = 0; r < B; r++)
        free(out[r]);
    free(out);
    free(start);
    if (st != TXC_OK) {
        for (int64_t r = 0; r < B; r++)
            txc_generate_result_free(&results[r]);
        return st;
    }
    return TXC_OK;
}
