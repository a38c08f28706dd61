/* Generation (greedy or sampled): no cache, a DynamicCache or a
 * StaticCache, each eager or compiled (txc/jit.h). See
 * include/txc/generate.h. */
#include "txc/generate.h"
#include "txc/ops.h"
#include "txc/tree.h"

#include <math.h>
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
    txc_generate_options o = {.max_new_tokens = 256, .cache = TXC_CACHE_STATIC, .jit = true};
    const txc_hf_config *c = txc_model_config(model);
    txc_generation_config g;
    txc_status saved = txc_last_status();
    bool loaded = model_dir && txc_generation_config_load(model_dir, &g) == TXC_OK && g.present;
    if (!loaded) {
        if (saved == TXC_OK)
            txc_clear_error(); /* a broken generation_config.json is reported by the caller's own load */
        txc_generation_config_defaults(&g);
    }
    if (loaded && g.n_eos > 0) {
        o.n_eos = g.n_eos < TXC_MAX_EOS_IDS ? g.n_eos : TXC_MAX_EOS_IDS;
        memcpy(o.eos_token_id, g.eos_token_id, sizeof(int64_t) * (size_t)o.n_eos);
    } else {
        o.n_eos = c->n_eos < TXC_MAX_EOS_IDS ? c->n_eos : TXC_MAX_EOS_IDS;
        memcpy(o.eos_token_id, c->eos_token_id, sizeof(int64_t) * (size_t)o.n_eos);
    }
    if (loaded && g.max_new_tokens > 0)
        o.max_new_tokens = g.max_new_tokens;
    o.do_sample = g.do_sample;
    o.temperature = g.temperature;
    o.top_k = g.top_k;
    o.top_p = g.top_p;
    o.min_p = g.min_p;
    o.repetition_penalty = g.repetition_penalty;
    return o;
}

/* ---- the next token ----------------------------------------------------------------
 * The processors as ops, so that the same code runs eagerly and traced
 * into the compiled steps. `sampling` holds only what changes the
 * computation (it is part of the plans' static arguments). */

typedef struct sampling {
    int32_t do_sample, penalize;
    int64_t top_k;
    double temperature, top_p, min_p, repetition_penalty;
} sampling;

static sampling sampling_of(const txc_generate_options *o)
{
    sampling sp;
    memset(&sp, 0, sizeof sp); /* padding too: the statics are compared as bytes */
    sp.penalize = o->repetition_penalty != 1.0;
    sp.repetition_penalty = sp.penalize ? o->repetition_penalty : 1.0;
    sp.do_sample = o->do_sample;
    if (o->do_sample) {
        sp.temperature = o->temperature;
        sp.top_k = o->top_k;
        sp.top_p = o->top_p;
        sp.min_p = o->min_p;
    }
    return sp;
}

/* The logits are float32: dividing them by a factor outside [1e-30, 1e30]
 * overflows them to inf (then NaN in the softmax) or flushes them to 0. */
#define FACTOR_MIN 1e-30
#define FACTOR_MAX 1e30

static txc_status check_sampling(const txc_generate_options *o)
{
    if (!(o->repetition_penalty >= FACTOR_MIN && o->repetition_penalty <= FACTOR_MAX))
        return txc_error(TXC_ERR_INVALID, "generate: repetition_penalty must be a number in [1e-30, 1e30] (1: off), "
                                          "got %g", o->repetition_penalty);
    if (!o->do_sample)
        return TXC_OK;
    if (!(o->temperature >= FACTOR_MIN && o->temperature <= FACTOR_MAX))
        return txc_error(TXC_ERR_INVALID, "generate: temperature must be in [1e-30, 1e30] when sampling (the "
                                          "float32 logits overflow past it), got %g (for greedy decoding turn "
                                          "do_sample off)", o->temperature);
    if (o->top_k < 0)
        return txc_error(TXC_ERR_INVALID, "generate: top_k must be >= 0 (0: off), got %lld", (long long)o->top_k);
    if (!(o->top_p >= 0.0 && o->top_p <= 1.0))
        return txc_error(TXC_ERR_INVALID, "generate: top_p must be in [0, 1] (1: off), got %g", o->top_p);
    if (!(o->min_p >= 0.0 && o->min_p <= 1.0))
        return txc_error(TXC_ERR_INVALID, "generate: min_p must be in [0, 1] (0: off), got %g", o->min_p);
    return TXC_OK;
}

txc_tensor *txc_repetition_penalty(txc_tensor *scores, txc_tensor *seen, double penalty)
{
    if (!scores || !seen)
        return NULL;
    txc_tensor *zero = txc_zeros(txc_tensor_env(scores), 0, NULL, txc_tensor_dtype(scores));
    txc_tensor *pen = txc_where(txc_lt(scores, zero), txc_mul_scalar(scores, penalty), txc_div_scalar(scores, penalty));
    return txc_where(seen, pen, scores);
}

static txc_tensor *next_token(txc_tensor *logits, txc_tensor *seen, txc_tensor *state, const sampling *sp)
{
    if (!logits)
        return NULL;
    txc_tensor *row = logits;
    while (row && txc_tensor_ndim(row) > 1)
        row = txc_select(row, 0, txc_tensor_ndim(row) > 2 ? 0 : -1); /* (1, L, V) -> (L, V) -> last (V) */
    if (sp->penalize)
        row = txc_repetition_penalty(row, seen, sp->repetition_penalty);
    if (!sp->do_sample)
        return txc_argmax(row, 0, false);
    if (sp->temperature != 1.0)
        row = txc_div_scalar(row, sp->temperature);
    if (!state) {
        txc_error(TXC_ERR_INVALID, "generate: sampling needs an RNG state");
        return NULL;
    }
    txc_tensor *u = txc_rng_uniform(state, 1);
    if (!u || txc_rng_advance_(state, 1) != TXC_OK)
        return NULL;
    return txc_sample(row, u, sp->top_k, sp->top_p, sp->min_p);
}

txc_tensor *txc_generate_next_token(txc_tensor *logits, txc_tensor *seen, txc_tensor *rng_state,
                                    const txc_generate_options *o)
{
    if (check_sampling(o) != TXC_OK)
        return NULL;
    sampling sp = sampling_of(o);
    if (sp.penalize && !seen) {
        txc_error(TXC_ERR_INVALID, "generate: repetition_penalty needs the mask of seen tokens");
        return NULL;
    }
    return next_token(logits, seen, rng_state, &sp);
}

/* ---- the step, as one traced function -------------------------------------------
 * inputs: the model's parameters, the cache's leaves (txc/tree.h), then
 * input_ids (1, L) int64, cache_position (L) int64, for a prefill
 * logits_index (1) int64 (the last real token of a padded prompt), with a
 * repetition penalty seen (vocab) bool, and when sampling rng_state (2)
 * int64 (advanced in place by the plan).
 * outputs: next token int64 (one element), logits (1, 1, vocab), then the
 * cache's leaves after the step (a DynamicCache grows: new tensors; a
 * StaticCache is written in place, its leaves are the inputs). */

typedef struct step_statics {
    int32_t n_params, n_cache_leaves, has_logits_index, cache_kind;
    unsigned char cache_aux[TXC_TREE_MAX_AUX];
    size_t cache_aux_len;
    sampling samp;
} step_statics;

#define MAX_CACHE_LEAVES (2 * 512)

struct txc_generator {
    txc_model *model;
    txc_env *env;
    txc_jit *jit[2]; /* prefill, decode */
    /* A step's input list and the inputs' names, allocated once (not per
     * token); the cache leaves' names are written when their count changes. */
    txc_tensor **in;
    const char **names;
    char (*leaf_names)[64];
    int n_leaf_names;
};

static txc_status step_fn(void *ctx, txc_tensor *const *in, int n_in, const void *statics_p, size_t len,
                          txc_tensor **out, int max_out, int *n_out)
{
    txc_generator *gen = ctx;
    step_statics st;
    if (len != sizeof st)
        return txc_error(TXC_ERR_INTERNAL, "step: bad static arguments");
    memcpy(&st, statics_p, sizeof st);
    int P = st.n_params, C = st.n_cache_leaves, extra = P + C + 2 + st.has_logits_index;
    if (n_in != extra + st.samp.penalize + st.samp.do_sample || max_out < 2 + C)
        return txc_error(TXC_ERR_INTERNAL, "step: %d inputs", n_in);
    txc_tensor *seen = st.samp.penalize ? in[extra] : NULL;
    txc_tensor *rng_state = st.samp.do_sample ? in[extra + st.samp.penalize] : NULL;
    const char *type = st.cache_kind == TXC_CACHE_STATIC ? "StaticCache" : "DynamicCache";
    txc_kv_cache *cache = NULL;
    if (st.cache_kind != TXC_CACHE_NONE &&
        !(cache = txc_tree_unflatten(type, st.cache_aux, st.cache_aux_len, in + P, C, gen->env)))
        return txc_last_status();
    txc_tensor *logits = txc_model_forward_with(gen->model, in, in[P + C], NULL, cache, in[P + C + 1], 1,
                                                st.has_logits_index ? in[P + C + 2] : NULL);
    out[0] = next_token(logits, seen, rng_state, &st.samp);
    out[1] = logits;
    *n_out = 2;
    txc_status s = out[0] ? TXC_OK : txc_last_status();
    if (s == TXC_OK && cache) {
        unsigned char aux[TXC_TREE_MAX_AUX];
        size_t aux_len;
        int n;
        s = txc_tree_flatten(type, cache, out + 2, max_out - 2, &n, aux, &aux_len);
        *n_out += n;
    }
    txc_tree_free(type, cache);
    return s == TXC_OK ? TXC_OK : (s ? s : TXC_ERR_INTERNAL);
}

txc_generator *txc_generator_new(txc_model *model)
{
    txc_generator *g = calloc(1, sizeof *g);
    if (!g) {
        txc_error(TXC_ERR_NOMEM, "out of memory (generator)");
        return NULL;
    }
    g->model = model;
    g->env = txc_model_env(model);
    g->jit[0] = txc_jit_new(g->env, "prefill", step_fn, g);
    g->jit[1] = txc_jit_new(g->env, "decode", step_fn, g);
    int P = txc_model_num_parameters(model);
    size_t n_in = (size_t)P + MAX_CACHE_LEAVES + 5; /* params, cache, ids, positions, index, seen, rng */
    g->in = calloc(n_in, sizeof *g->in);
    g->names = calloc(n_in, sizeof *g->names);
    g->leaf_names = calloc(MAX_CACHE_LEAVES, sizeof *g->leaf_names);
    if (g->names)
        for (int i = 0; i < P; i++)
            g->names[i] = txc_model_parameter_name(model, i);
    if (!g->in || !g->names || !g->leaf_names)
        txc_error(TXC_ERR_NOMEM, "out of memory (generator)");
    if (!g->jit[0] || !g->jit[1] || !g->in || !g->names || !g->leaf_names || txc_cache_register_trees() != TXC_OK) {
        txc_generator_free(g);
        return NULL;
    }
    return g;
}

void txc_generator_free(txc_generator *g)
{
    if (!g)
        return;
    txc_jit_free(g->jit[0]);
    txc_jit_free(g->jit[1]);
    free(g->in);
    free(g->names);
    free(g->leaf_names);
    free(g);
}

txc_jit_stats txc_generator_jit_stats(const txc_generator *g, int which) { return txc_jit_get_stats(g->jit[which != 0]); }

void txc_generator_set_profile(txc_generator *g, bool on)
{
    txc_jit_set_profile(g->jit[0], on);
    txc_jit_set_profile(g->jit[1], on);
}

int txc_generator_jit_profile(const txc_generator *g, int which, txc_jit_op_time *out, int max)
{
    return txc_jit_get_profile(g->jit[which != 0], out, max);
}

int txc_generator_jit_gemm_profile(const txc_generator *g, int which, txc_jit_gemm_time *out, int max)
{
    return txc_jit_get_gemm_profile(g->jit[which != 0], out, max);
}

const char *txc_generator_last_recompile_reason(const txc_generator *g, int which)
{
    return txc_jit_last_recompile_reason(g->jit[which != 0]);
}

/* Smallest power of two >= n, at most cap (a StaticCache's length). */
static int64_t bucket(int64_t n, int64_t cap)
{
    int64_t b = 1;
    while (b < n)
        b *= 2;
    return b < cap ? b : cap;
}

/* One compiled step over ids[from, to) (padded to a bucket for a static
 * prefill). Returns the next token or -1; a DynamicCache is replaced by
 * the grown one in *cache. */
static int32_t step_jit(txc_generator *gen, txc_kv_cache **cache, const int32_t *ids, int64_t from, int64_t to,
                        const sampling *sp, txc_tensor *seen, txc_tensor *rng_state)
{
    txc_env *env = gen->env;
    const txc_model *m = gen->model;
    int P = txc_model_num_parameters(m);
    txc_tensor *const *params = txc_model_parameters(m);
    int64_t L = to - from;
    bool prefill = L > 1;
    txc_cache_kind kind = *cache ? txc_kv_cache_kind(*cache) : TXC_CACHE_NONE;
    int64_t Lp = prefill && kind == TXC_CACHE_STATIC ? bucket(L, txc_kv_cache_max_length(*cache) - from) : L;

    step_statics st;
    memset(&st, 0, sizeof st);
    st.n_params = P;
    st.has_logits_index = prefill;
    st.cache_kind = kind;
    memcpy(&st.samp, sp, sizeof st.samp);
    txc_tensor **in = gen->in;
    const char **names = gen->names;
    memcpy(in, params, sizeof *in * (size_t)P);
    int C = 0;
    int32_t next = -1;
    int mark = txc_env_scope_begin(env);
    if (*cache) {
        const char *type = txc_kv_cache_tree_type(*cache);
        if (txc_tree_flatten(type, *cache, in + P, MAX_CACHE_LEAVES, &C, st.cache_aux, &st.cache_aux_len) != TXC_OK)
            goto done;
        if (C != gen->n_leaf_names) { /* names depend on the layer count only */
            const txc_tree_def *d = txc_tree_find(type);
            for (int i = 0; i < C; i++) {
                d->leaf_name(st.cache_aux, st.cache_aux_len, i, gen->leaf_names[i], sizeof gen->leaf_names[i]);
                names[P + i] = gen->leaf_names[i];
            }
            gen->n_leaf_names = C;
        }
    }
    st.n_cache_leaves = C;
    int64_t shape[2] = {1, Lp};
    txc_tensor *input_ids = txc_zeros(env, 2, shape, TXC_I64);
    txc_tensor *cache_position = txc_arange(env, (double)from, (double)(from + Lp), 1, TXC_I64);
    if (!input_ids || !cache_position)
        goto done;
    int64_t *p = txc_tensor_data_ptr(input_ids);
    for (int64_t i = 0; i < L; i++)
        p[i] = ids[from + i];
    int n_in = P + C;
    names[n_in] = "input_ids";
    in[n_in++] = input_ids;
    names[n_in] = "cache_position";
    in[n_in++] = cache_position;
    if (prefill) {
        int64_t last = L - 1, one = 1;
        names[n_in] = "logits_index";
        if (!(in[n_in++] = txc_tensor_from_data(env, TXC_I64, 1, &one, &last)))
            goto done;
    }
    if (sp->penalize) {
        names[n_in] = "seen";
        in[n_in++] = seen;
    }
    if (sp->do_sample) {
        names[n_in] = "rng_state";
        in[n_in++] = rng_state;
    }
    txc_tensor *out[2 + MAX_CACHE_LEAVES];
    int n_out;
    if (txc_jit_call(gen->jit[!prefill], in, n_in, names, &st, sizeof st, out, 2 + MAX_CACHE_LEAVES, &n_out) !=
        TXC_OK)
        goto done;
    next = (int32_t)((const int64_t *)txc_tensor_data_ptr(out[0]))[0];
    if (kind == TXC_CACHE_DYNAMIC) {
        /* The grown cache lives in the plan's arena: copy it out. */
        txc_tensor *leaves[MAX_CACHE_LEAVES];
        for (int i = 0; i < n_out - 2; i++)
            leaves[i] = txc_clone(out[2 + i]); /* owned by the scope; the cache retains them */
        if (txc_kv_cache_set_layers(*cache, leaves, n_out - 2) != TXC_OK)
            next = -1;
    } else if (kind == TXC_CACHE_STATIC) {
        txc_kv_cache_set_seq_length(*cache, to);
    }
done:
    txc_env_scope_end(env, mark);
    return next;
}

/* One eager forward of ids[from, to) at positions [from, to); returns the
 * next token, or -1 on error. */
static int32_t step_eager(txc_model *model, txc_kv_cache *cache, const int32_t *ids, int64_t from, int64_t to,
                          const sampling *sp, txc_tensor *seen, txc_tensor *rng_state)
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
        txc_tensor *tok = next_token(logits, seen, rng_state, sp);
        next = tok ? (int32_t)txc_tensor_item(tok) : -1;
    }
    txc_env_scope_end(env, mark);
    return next;
}

/* A conversation kept between runs: its cache and the ids whose keys and
 * values the cache holds. */
struct txc_generator_session {
    txc_generator *gen;
    txc_cache_kind kind;
    int64_t max_cache_len; /* the StaticCache's length; else the model's positions */
    txc_kv_cache *cache;   /* NULL for TXC_CACHE_NONE */
    int32_t *ids;          /* the last run's sequence: prompt + new ids */
    int64_t n_ids, cap_ids;
    int64_t n_cached;      /* ids[0, n_cached) are in the cache */
};

/* The run of txc_generator_run (sess NULL: a cache of its own, freed at the
 * end) or of txc_generator_session_run (the session's cache, reused from
 * the longest prefix it shares with input_ids). */
static txc_status run(txc_generator *gen, txc_generator_session *sess, const int32_t *input_ids, int64_t n_input,
                      const txc_generate_options *o, txc_generate_result *r)
{
    memset(r, 0, sizeof *r);
    txc_model *model = gen->model;
    const txc_hf_config *c = txc_model_config(model);
    if (n_input < 1)
        return txc_error(TXC_ERR_INVALID, "generate: the prompt is empty (it needs at least one id, e.g. BOS)");
    if (o->max_new_tokens < 1)
        return txc_error(TXC_ERR_INVALID, "generate: max_new_tokens must be >= 1 (got %lld)",
                         (long long)o->max_new_tokens);
    if (check_sampling(o) != TXC_OK)
        return txc_last_status();
    for (int64_t i = 0; i < n_input; i++)
        if (input_ids[i] < 0 || input_ids[i] >= c->vocab_size)
            return txc_error(TXC_ERR_INVALID, "generate: input id %d at position %lld is outside the vocabulary (%lld)",
                             input_ids[i], (long long)i, (long long)c->vocab_size);
    const txc_cache_kind kind = sess ? sess->kind : o->cache;
    /* (saturated: max_new_tokens may be anything up to INT64_MAX; the
     * limits below cut it down to what a cache and the positions hold) */
    int64_t total = o->max_new_tokens > INT64_MAX - n_input ? INT64_MAX : n_input + o->max_new_tokens;
    const int64_t max_pos = txc_model_max_positions(model); /* dynamic NTK RoPE: unbounded */
    int64_t max_cache_len = sess ? sess->max_cache_len : o->max_cache_len > 0 ? o->max_cache_len : total;
    if (max_cache_len > max_pos) /* no position past it is ever used */
        max_cache_len = max_pos;
    /* The sequence (prompt + new tokens) holds at most max_position_embeddings
     * tokens, whatever the cache: a prompt that long leaves no new token. */
    if (n_input >= max_pos)
        return txc_error(TXC_ERR_CAPACITY, "generate: the %s has %lld tokens, %s max_position_embeddings %lld (no "
                                           "room for a new token)",
                         sess ? "conversation" : "prompt", (long long)n_input,
                         n_input > max_pos ? "more than" : "as many as", (long long)max_pos);
    if (sess && kind == TXC_CACHE_STATIC && n_input >= max_cache_len)
        return txc_error(TXC_ERR_CAPACITY, "generate: the conversation has %lld tokens, %s the session's max_cache_len "
                                           "%lld (no room for a reply)",
                         (long long)n_input, n_input > max_cache_len ? "more than" : "as many as",
                         (long long)max_cache_len);
    /* The sequence (prompt + new tokens) fits the cache, as transformers'
     * max_length <= max_cache_len: a prompt that fills it leaves no new token. */
    if (kind == TXC_CACHE_STATIC && n_input >= max_cache_len)
        return txc_error(TXC_ERR_CAPACITY, "generate: the prompt has %lld tokens, %s max_cache_len %lld (no room for "
                                           "a new token)",
                         (long long)n_input, n_input > max_cache_len ? "more than" : "as many as",
                         (long long)max_cache_len);
    /* Generation ends early, with a reason, where the cache or the
     * position table ends. */
    const char *limit = "max_new_tokens";
    if (kind == TXC_CACHE_STATIC && total > max_cache_len) {
        total = max_cache_len;
        limit = "max_cache_len";
    }
    if (total > max_pos) {
        total = max_pos;
        limit = "max_position_embeddings";
    }

    if ((uint64_t)total > SIZE_MAX / sizeof(int32_t) / 2)
        return txc_error(TXC_ERR_INVALID, "generate: max_new_tokens %lld is more than this machine can hold (the "
                                          "prompt has %lld tokens)", (long long)o->max_new_tokens, (long long)n_input);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)total);
    if (!ids)
        return txc_error(TXC_ERR_NOMEM, "out of memory (generate)");
    memcpy(ids, input_ids, sizeof(int32_t) * (size_t)n_input);
    txc_env *env = txc_model_env(model);
    txc_kv_cache *cache = NULL;
    int64_t reused = 0; /* prompt ids whose keys and values are already in the cache */
    txc_status s = TXC_OK;
    if (sess) {
        cache = sess->cache;
        if (cache) {
            while (reused < sess->n_cached && reused < n_input && sess->ids[reused] == input_ids[reused])
                reused++;
            if (reused == n_input) /* the last prompt id runs again: its logits give the first new token */
                reused--;
            /* Past the shared prefix the sequence differs: drop the rest
             * (a StaticCache just forgets it; its stale entries are
             * overwritten before attention could read them). */
            s = txc_kv_cache_crop(cache, reused);
        }
    } else if (kind == TXC_CACHE_DYNAMIC) {
        cache = txc_dynamic_cache_new(env, (int)c->num_hidden_layers);
    } else if (kind == TXC_CACHE_STATIC) {
        cache = txc_static_cache_new(env, (int)c->num_hidden_layers, 1, c->num_key_value_heads, max_cache_len,
                                     c->head_dim);
    }
    if (s == TXC_OK && kind != TXC_CACHE_NONE && !cache)
        s = txc_last_status() ? txc_last_status() : TXC_ERR_INTERNAL;
    if (s != TXC_OK) {
        if (!sess)
            txc_kv_cache_free(cache);
        free(ids);
        return s;
    }
    /* The sampling state of this run, in a scope of its own: the mask of
     * seen tokens (updated here after each token) and the RNG state
     * (advanced by the steps themselves, in place). */
    sampling sp = sampling_of(o);
    txc_tensor *seen = NULL, *rng_state = NULL;
    int mark = txc_env_scope_begin(env);
    s = mark < 0 ? TXC_ERR_NOMEM : TXC_OK;
    if (s == TXC_OK && sp.penalize) {
        int64_t V = c->vocab_size;
        if ((seen = txc_zeros(env, 1, &V, TXC_BOOL))) {
            unsigned char *m = txc_tensor_data_ptr(seen);
            for (int64_t i = 0; i < n_input; i++)
                m[input_ids[i]] = 1;
        } else {
            s = txc_last_status();
        }
    }
    if (s == TXC_OK && sp.do_sample && !(rng_state = txc_rng_state(env, o->seed)))
        s = txc_last_status();
    if (s != TXC_OK) {
        if (mark >= 0)
            txc_env_scope_end(env, mark);
        if (!sess)
            txc_kv_cache_free(cache);
        free(ids);
        return s ? s : TXC_ERR_INTERNAL;
    }
    txc_jit_stats before[2] = {txc_jit_get_stats(gen->jit[0]), txc_jit_get_stats(gen->jit[1])};
    double prefill_compile_ms = 0;

    int64_t n = n_input, fed = reused; /* ids[0, fed) are in the cache */
    double t0 = now_ms(), t_first = t0;
    while (n < total) {
        /* Without a cache, re-run everything; with one, only the ids it
         * does not hold yet (a static prefill is padded to a bucket: the
         * padding's positions lie past n, where nothing valid is kept). */
        int64_t from = cache ? fed : 0;
        int32_t next = o->jit ? step_jit(gen, &cache, ids, from, n, &sp, seen, rng_state)
                              : step_eager(model, cache, ids, from, n, &sp, seen, rng_state);
        if (next < 0) {
            s = txc_last_status() != TXC_OK ? txc_last_status() : TXC_ERR_INTERNAL;
            break;
        }
        if (cache)
            fed = n;
        ids[n++] = next;
        if (seen && next < c->vocab_size)
            ((unsigned char *)txc_tensor_data_ptr(seen))[next] = 1;
        if (n == n_input + 1) {
            t_first = now_ms();
            prefill_compile_ms = txc_jit_get_stats(gen->jit[0]).compile_ms - before[0].compile_ms +
                                 txc_jit_get_stats(gen->jit[1]).compile_ms - before[1].compile_ms;
        }
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
    int64_t rng_counter = rng_state ? ((const int64_t *)txc_tensor_data_ptr(rng_state))[1] : 0;
    txc_env_scope_end(env, mark);
    if (!sess) {
        txc_kv_cache_free(cache);
    } else if (s == TXC_OK) {
        /* Keep the sequence for the next run. The last new id was never fed
         * to the model: its keys and values are not in the cache (fed = n - 1). */
        if (n > sess->cap_ids) {
            int32_t *p = realloc(sess->ids, sizeof(int32_t) * (size_t)n);
            if (!p)
                s = txc_error(TXC_ERR_NOMEM, "out of memory (generate)");
            else {
                sess->ids = p;
                sess->cap_ids = n;
            }
        }
        if (s == TXC_OK) {
            memcpy(sess->ids, ids, sizeof(int32_t) * (size_t)n);
            sess->n_ids = n;
            sess->n_cached = cache ? fed : 0;
        }
    }
    if (sess && s != TXC_OK) /* what the cache holds is unknown: start over next time */
        txc_generator_session_reset(sess);
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
    r->n_reused = reused;
    r->n_prefilled = n > n_input ? (cache ? n_input - reused : n_input) : 0;
    r->prefill_ms = t_first - t0;
    r->decode_ms = t1 - t_first;
    r->max_cache_len = kind == TXC_CACHE_STATIC ? max_cache_len : 0;
    r->stop_reason = r->stopped_on_eos ? "eos_token_id" : n == total ? limit : "callback";
    txc_jit_stats after[2] = {txc_jit_get_stats(gen->jit[0]), txc_jit_get_stats(gen->jit[1])};
    r->prefill_compilations = (int64_t)(after[0].misses - before[0].misses);
    r->decode_compilations = (int64_t)(after[1].misses - before[1].misses);
    r->compile_ms = after[0].compile_ms - before[0].compile_ms + after[1].compile_ms - before[1].compile_ms;
    r->prefill_compile_ms = prefill_compile_ms;
    r->rng_counter = rng_counter;
    return TXC_OK;
}

txc_status txc_generator_run(txc_generator *gen, const int32_t *input_ids, int64_t n_input,
                             const txc_generate_options *o, txc_generate_result *r)
{
    return run(gen, NULL, input_ids, n_input, o, r);
}

/* The default length of a session's StaticCache when none is given. */
#define SESSION_DEFAULT_MAX_CACHE_LEN 4096

txc_generator_session *txc_generator_session_new(txc_generator *gen, txc_cache_kind kind, int64_t max_cache_len)
{
    if (kind != TXC_CACHE_NONE && kind != TXC_CACHE_DYNAMIC && kind != TXC_CACHE_STATIC) {
        txc_error(TXC_ERR_INVALID, "generate: unknown cache kind %d", (int)kind);
        return NULL;
    }
    if (max_cache_len < 0) {
        txc_error(TXC_ERR_INVALID, "generate: max_cache_len must be >= 0 (0: the default), got %lld",
                  (long long)max_cache_len);
        return NULL;
    }
    const txc_hf_config *c = txc_model_config(gen->model);
    const int64_t max_pos = txc_model_max_positions(gen->model);
    if (max_cache_len == 0)
        max_cache_len = SESSION_DEFAULT_MAX_CACHE_LEN;
    if (max_cache_len > max_pos || kind != TXC_CACHE_STATIC)
        max_cache_len = max_pos;
    txc_generator_session *sess = calloc(1, sizeof *sess);
    if (!sess) {
        txc_error(TXC_ERR_NOMEM, "out of memory (generator session)");
        return NULL;
    }
    sess->gen = gen;
    sess->kind = kind;
    sess->max_cache_len = max_cache_len;
    txc_env *env = gen->env;
    if (kind == TXC_CACHE_DYNAMIC)
        sess->cache = txc_dynamic_cache_new(env, (int)c->num_hidden_layers);
    else if (kind == TXC_CACHE_STATIC)
        sess->cache = txc_static_cache_new(env, (int)c->num_hidden_layers, 1, c->num_key_value_heads, max_cache_len,
                                           c->head_dim);
    if (kind != TXC_CACHE_NONE && !sess->cache) {
        free(sess);
        return NULL;
    }
    return sess;
}

void txc_generator_session_free(txc_generator_session *sess)
{
    if (!sess)
        return;
    txc_kv_cache_free(sess->cache);
    free(sess->ids);
    free(sess);
}

void txc_generator_session_reset(txc_generator_session *sess)
{
    sess->n_ids = sess->n_cached = 0;
    if (sess->cache)
        txc_kv_cache_reset(sess->cache);
}

int64_t txc_generator_session_cached(const txc_generator_session *sess) { return sess->n_cached; }

int64_t txc_generator_session_max_cache_len(const txc_generator_session *sess) { return sess->max_cache_len; }

txc_status txc_generator_session_run(txc_generator_session *sess, const int32_t *input_ids, int64_t n_input,
                                     const txc_generate_options *o, txc_generate_result *r)
{
    return run(sess->gen, sess, input_ids, n_input, o, r);
}

txc_status txc_generate(txc_model *model, const int32_t *input_ids, int64_t n_input, const txc_generate_options *o,
                        txc_generate_result *r)
{
    txc_generator *gen = txc_generator_new(model);
    if (!gen) {
        memset(r, 0, sizeof *r);
        return txc_last_status();
    }
    txc_status s = txc_generator_run(gen, input_ids, n_input, o, r);
    txc_generator_free(gen);
    return s;
}

void txc_generate_result_free(txc_generate_result *r)
{
    free(r->new_ids);
    memset(r, 0, sizeof *r);
}

txc_status txc_generator_set_compile_cache(txc_generator *gen, const char *dir)
{
    txc_status s = txc_jit_set_compile_cache(gen->jit[0], dir);
    return s != TXC_OK ? s : txc_jit_set_compile_cache(gen->jit[1], dir);
}

txc_status txc_generator_set_compile_cache_max_bytes(txc_generator *gen, int64_t max_bytes)
{
    txc_status s = txc_jit_set_compile_cache_max_bytes(gen->jit[0], max_bytes);
    return s != TXC_OK ? s : txc_jit_set_compile_cache_max_bytes(gen->jit[1], max_bytes);
}
