/* DynamicCache and StaticCache (transformers cache_utils); see
 * include/txc/cache.h. They live beside the models because a model's
 * attention calls Cache.update, as modeling_llama calls cache_utils. */
#include "env/env_impl.h"
#include "txc/cache.h"
#include "txc/ops.h"
#include "txc/tree.h"

#include <pthread.h>
#include <stdio.h>

#include <stdlib.h>
#include <string.h>

struct txc_kv_cache {
    txc_cache_kind kind;
    txc_env *env;
    int num_layers;
    int64_t seq_length;    /* tokens stored (after the last layer's update) */
    int64_t max_cache_len; /* static only */
    txc_tensor **keys, **values; /* per layer, owned references (NULL: empty) */
};

const char *txc_cache_kind_name(txc_cache_kind kind)
{
    switch (kind) {
    case TXC_CACHE_NONE: return "none";
    case TXC_CACHE_DYNAMIC: return "dynamic";
    case TXC_CACHE_STATIC: return "static";
    }
    return "?";
}

txc_status txc_cache_kind_parse(const char *s, txc_cache_kind *out)
{
    for (int k = TXC_CACHE_NONE; k <= TXC_CACHE_STATIC; k++)
        if (strcmp(s, txc_cache_kind_name((txc_cache_kind)k)) == 0) {
            *out = (txc_cache_kind)k;
            return TXC_OK;
        }
    return txc_error(TXC_ERR_INVALID, "unknown cache '%s' (expected none, dynamic or static)", s);
}

static txc_kv_cache *cache_alloc(txc_env *env, txc_cache_kind kind, int num_layers)
{
    if (num_layers <= 0) {
        txc_error(TXC_ERR_INVALID, "cache: %d layers", num_layers);
        return NULL;
    }
    txc_kv_cache *c = calloc(1, sizeof *c);
    if (c) {
        c->keys = calloc((size_t)num_layers, sizeof *c->keys);
        c->values = calloc((size_t)num_layers, sizeof *c->values);
    }
    if (!c || !c->keys || !c->values) {
        if (c) {
            free(c->keys);
            free(c->values);
        }
        free(c);
        txc_error(TXC_ERR_NOMEM, "out of memory (cache)");
        return NULL;
    }
    c->kind = kind;
    c->env = env ? env : txc_env_active();
    c->num_layers = num_layers;
    c->max_cache_len = -1;
    return c;
}

txc_kv_cache *txc_dynamic_cache_new(txc_env *env, int num_layers)
{
    return cache_alloc(env, TXC_CACHE_DYNAMIC, num_layers);
}

txc_kv_cache *txc_static_cache_new(txc_env *env, int num_layers, int64_t batch, int64_t num_key_value_heads,
                                   int64_t max_cache_len, int64_t head_dim)
{
    if (batch <= 0 || num_key_value_heads <= 0 || max_cache_len <= 0 || head_dim <= 0) {
        txc_error(TXC_ERR_INVALID, "StaticCache: sizes must be positive (batch %lld, heads %lld, max_cache_len %lld, "
                                   "head_dim %lld)",
                  (long long)batch, (long long)num_key_value_heads, (long long)max_cache_len, (long long)head_dim);
        return NULL;
    }
    txc_kv_cache *c = cache_alloc(env, TXC_CACHE_STATIC, num_layers);
    if (!c)
        return NULL;
    c->max_cache_len = max_cache_len;
    int64_t shape[4] = {batch, num_key_value_heads, max_cache_len, head_dim};
    /* Allocated outside any scope: the cache owns them. */
    int open = c->env->n_scopes;
    c->env->n_scopes = 0;
    for (int l = 0; l < num_layers; l++) {
        c->keys[l] = txc_zeros(c->env, 4, shape, TXC_F32);
        c->values[l] = txc_zeros(c->env, 4, shape, TXC_F32);
        if (!c->keys[l] || !c->values[l]) {
            c->env->n_scopes = open;
            txc_kv_cache_free(c);
            return NULL;
        }
    }
    c->env->n_scopes = open;
    return c;
}

void txc_kv_cache_free(txc_kv_cache *c)
{
    if (!c)
        return;
    for (int l = 0; l < c->num_layers; l++) {
        txc_tensor_release(c->keys[l]);
        txc_tensor_release(c->values[l]);
    }
    free(c->keys);
    free(c->values);
    free(c);
}

txc_cache_kind txc_kv_cache_kind(const txc_kv_cache *c) { return c->kind; }
int64_t txc_kv_cache_seq_length(const txc_kv_cache *c) { return c->seq_length; }
int64_t txc_kv_cache_max_length(const txc_kv_cache *c) { return c->max_cache_len; }
void txc_kv_cache_set_seq_length(txc_kv_cache *c, int64_t n) { c->seq_length = n; }

txc_status txc_kv_cache_layer(const txc_kv_cache *c, int layer, txc_tensor **keys, txc_tensor **values)
{
    if (layer < 0 || layer >= c->num_layers || !c->keys[layer] || !c->values[layer])
        return txc_error(TXC_ERR_INVALID, "cache: layer %d of %d holds no tensors", layer, c->num_layers);
    *keys = c->keys[layer];
    *values = c->values[layer];
    return TXC_OK;
}

void txc_kv_cache_reset(txc_kv_cache *c)
{
    c->seq_length = 0;
    if (c->kind == TXC_CACHE_STATIC)
        return; /* stale entries are masked out by cache_position */
    for (int l = 0; l < c->num_layers; l++) {
        txc_tensor_release(c->keys[l]);
        txc_tensor_release(c->values[l]);
        c->keys[l] = c->values[l] = NULL;
    }
}

/* Replace *slot with t, keeping one owned reference. */
static void hold(txc_tensor **slot, txc_tensor *t)
{
    txc_tensor_retain(t);
    txc_tensor_release(*slot);
    *slot = t;
}

txc_status txc_kv_cache_crop(txc_kv_cache *c, int64_t n)
{
    if (n < 0)
        return txc_error(TXC_ERR_INVALID, "cache crop: %lld tokens", (long long)n);
    if (n >= c->seq_length)
        return TXC_OK;
    if (c->kind == TXC_CACHE_STATIC || n == 0) {
        if (n == 0)
            txc_kv_cache_reset(c);
        c->seq_length = n;
        return TXC_OK;
    }
    /* DynamicCache: fresh copies of the first n positions (owned by the
     * scope until held), all made before any layer is replaced, so an
     * allocation failure leaves the cache as it was. */
    txc_tensor **copies = calloc(2 * (size_t)c->num_layers, sizeof *copies);
    if (!copies)
        return txc_error(TXC_ERR_NOMEM, "out of memory (cache crop)");
    int mark = txc_env_scope_begin(c->env);
    txc_status s = mark < 0 ? TXC_ERR_NOMEM : TXC_OK;
    for (int l = 0; l < c->num_layers && s == TXC_OK; l++) {
        if (!c->keys[l])
            continue;
        copies[2 * l] = txc_clone(txc_narrow(c->keys[l], 2, 0, n));
        copies[2 * l + 1] = txc_clone(txc_narrow(c->values[l], 2, 0, n));
        if (!copies[2 * l] || !copies[2 * l + 1])
            s = txc_last_status() ? txc_last_status() : TXC_ERR_NOMEM;
    }
    for (int l = 0; l < c->num_layers && s == TXC_OK; l++)
        if (c->keys[l]) {
            hold(&c->keys[l], copies[2 * l]);
            hold(&c->values[l], copies[2 * l + 1]);
        }
    free(copies);
    if (mark < 0)
        return s;
    txc_env_scope_end(c->env, mark);
    if (s == TXC_OK)
        c->seq_length = n;
    return s;
}

txc_status txc_kv_cache_update(txc_kv_cache *c, int layer, txc_tensor *key, txc_tensor *value,
                               txc_tensor *cache_position, txc_tensor **keys, txc_tensor **values)
{
    if (!key || !value || !cache_position)
        return txc_error(TXC_ERR_INVALID, "cache update: NULL input");
    if (layer < 0 || layer >= c->num_layers)
        return txc_error(TXC_ERR_INVALID, "cache update: layer %d of %d", layer, c->num_layers);
    if (c->env->n_scopes == 0) /* the returned tensors belong to the caller's scope */
        return txc_error(TXC_ERR_INVALID, "cache update: call it inside txc_env_scope_begin/end");
    int64_t q_len = txc_tensor_size(key, 2);
    if (c->kind == TXC_CACHE_STATIC) {
        /* In place at cache_position; index_copy_ checks every position
         * against max_cache_len before writing. Attention bounds its reads
         * by cache_position (txc_causal_attention), so the whole buffer is
         * returned, not a copy. */
        txc_status st = txc_index_copy_(c->keys[layer], 2, cache_position, key);
        if (st == TXC_OK)
            st = txc_index_copy_(c->values[layer], 2, cache_position, value);
        if (st != TXC_OK) {
            if (st == TXC_ERR_INVALID && strstr(txc_last_error(), "out of range"))
                txc_error_replace(TXC_ERR_CAPACITY, "StaticCache: a cache_position is at or past max_cache_len %lld "
                                                    "(%s)", (long long)c->max_cache_len, txc_last_error());
            return txc_last_status();
        }
        *keys = c->keys[layer];
        *values = c->values[layer];
    } else {
        if (c->keys[layer]) {
            txc_tensor *kp[2] = {c->keys[layer], key}, *vp[2] = {c->values[layer], value};
            key = txc_cat(kp, 2, 2);
            value = txc_cat(vp, 2, 2);
        } else {
            key = txc_contiguous(key);
            value = txc_contiguous(value);
        }
        if (!key || !value)
            return txc_last_status() ? txc_last_status() : TXC_ERR_INTERNAL;
        hold(&c->keys[layer], key);
        hold(&c->values[layer], value);
        *keys = c->keys[layer];
        *values = c->values[layer];
    }
    if (!*keys || !*values)
        return txc_last_status() ? txc_last_status() : TXC_ERR_INTERNAL;
    /* The length is a counter (never inferred by scanning for non-zero
     * rows): the last layer advances it. A traced call has no values to
     * read; the JIT sets it with txc_kv_cache_set_seq_length. */
    if (layer == c->num_layers - 1) {
        if (c->kind != TXC_CACHE_STATIC)
            c->seq_length += q_len;
        else if (!txc_tensor_is_traced(cache_position) && q_len > 0) {
            int64_t idx = q_len - 1;
            c->seq_length = (int64_t)txc_tensor_item_at(cache_position, &idx) + 1;
        }
    }
    return TXC_OK;
}

/* ---- flatten / unflatten (txc/tree.h) ---------------------------------------------
 * Leaves: key_cache[0..L), value_cache[0..L). Aux: kind, layers,
 * max_cache_len, and whether a DynamicCache holds anything — never the
 * stored length, which changes every step and would recompile every step. */

typedef struct cache_aux {
    int32_t kind, num_layers;
    int64_t max_cache_len;
    int32_t has_data;
} cache_aux;

static txc_status cache_flatten(const void *obj, txc_tensor **leaves, int max, int *n, void *aux, size_t *aux_len)
{
    const txc_kv_cache *c = obj;
    cache_aux a;
    memset(&a, 0, sizeof a); /* padding bytes too: aux is hashed into the plan key */
    a.kind = (int32_t)c->kind;
    a.num_layers = c->num_layers;
    a.max_cache_len = c->max_cache_len;
    a.has_data = c->keys[0] != NULL;
    memcpy(aux, &a, sizeof a);
    *aux_len = sizeof a;
    *n = 0;
    if (!a.has_data)
        return TXC_OK;
    if (max < 2 * c->num_layers)
        return txc_error(TXC_ERR_CAPACITY, "cache flatten: %d leaves, room for %d", 2 * c->num_layers, max);
    for (int l = 0; l < c->num_layers; l++) {
        leaves[l] = c->keys[l];
        leaves[c->num_layers + l] = c->values[l];
    }
    *n = 2 * c->num_layers;
    return TXC_OK;
}

static void *cache_unflatten(const void *aux, size_t aux_len, txc_tensor *const *leaves, int n, txc_env *env)
{
    cache_aux a;
    if (aux_len != sizeof a) {
        txc_error(TXC_ERR_INVALID, "cache unflatten: bad aux data");
        return NULL;
    }
    memcpy(&a, aux, sizeof a);
    if (n != (a.has_data ? 2 * a.num_layers : 0)) {
        txc_error(TXC_ERR_INVALID, "cache unflatten: %d leaves for %d layers", n, a.num_layers);
        return NULL;
    }
    txc_kv_cache *c = cache_alloc(env, (txc_cache_kind)a.kind, a.num_layers);
    if (!c)
        return NULL;
    c->max_cache_len = a.max_cache_len;
    for (int l = 0; a.has_data && l < a.num_layers; l++) {
        c->keys[l] = txc_tensor_retain(leaves[l]);
        c->values[l] = txc_tensor_retain(leaves[a.num_layers + l]);
    }
    if (a.kind == TXC_CACHE_DYNAMIC && a.has_data)
        c->seq_length = txc_tensor_size(leaves[0], 2);
    return c;
}

static void cache_leaf_name(const void *aux, size_t aux_len, int i, char *buf, size_t cap)
{
    cache_aux a;
    memcpy(&a, aux, sizeof a < aux_len ? sizeof a : aux_len);
    snprintf(buf, cap, "past_key_values.%s_cache[%d]", i < a.num_layers ? "key" : "value", i % a.num_layers);
}

txc_status txc_kv_cache_set_layers(txc_kv_cache *c, txc_tensor *const *leaves, int n)
{
    if (c->kind != TXC_CACHE_DYNAMIC || n != 2 * c->num_layers)
        return txc_error(TXC_ERR_INVALID, "cache: set_layers needs a DynamicCache and %d tensors (got %d)",
                         2 * c->num_layers, n);
    for (int i = 0; i < n; i++)
        if (!leaves[i])
            return txc_error(TXC_ERR_INVALID, "cache: set_layers: tensor %d is NULL", i);
    for (int l = 0; l < c->num_layers; l++) {
        hold(&c->keys[l], leaves[l]);
        hold(&c->values[l], leaves[c->num_layers + l]);
    }
    c->seq_length = txc_tensor_size(leaves[0], 2);
    return TXC_OK;
}

static void cache_free_obj(void *obj) { txc_kv_cache_free(obj); }

static const txc_tree_def static_def = {"StaticCache", cache_flatten, cache_unflatten, cache_free_obj,
                                        cache_leaf_name};
static const txc_tree_def dynamic_def = {"DynamicCache", cache_flatten, cache_unflatten, cache_free_obj,
                                         cache_leaf_name};
static pthread_once_t trees_once = PTHREAD_ONCE_INIT;
static txc_status trees_status;

static void register_trees(void)
{
    trees_status = txc_tree_register(&static_def);
    if (trees_status == TXC_OK)
        trees_status = txc_tree_register(&dynamic_def);
}

txc_status txc_cache_register_trees(void)
{
    pthread_once(&trees_once, register_trees);
    return trees_status;
}

const char *txc_kv_cache_tree_type(const txc_kv_cache *c)
{
    return c->kind == TXC_CACHE_STATIC ? "StaticCache" : "DynamicCache";
}
