/*
 * txc/cache.h — KV caches (transformers' cache_utils).
 *
 * Layout as in transformers: per layer, keys and values of shape
 * (batch, num_key_value_heads, seq, head_dim), float32.
 *
 *   DynamicCache: starts empty and grows along seq (torch.cat per step).
 *   StaticCache:  preallocated (batch, num_key_value_heads, max_cache_len,
 *                 head_dim) zeros; each step writes the new keys/values in
 *                 place at `cache_position` (index_copy_) and attention reads
 *                 the valid prefix [0, max(cache_position) + 1), with the
 *                 causal mask built from cache_position.
 *
 * The model calls txc_kv_cache_update() once per layer per forward; the
 * cache is the only state that survives between forward calls.
 */
#ifndef TXC_CACHE_H
#define TXC_CACHE_H

#include <stdint.h>
#include "txc/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum txc_cache_kind {
    TXC_CACHE_NONE = 0,    /* no cache: every step re-runs the whole sequence */
    TXC_CACHE_DYNAMIC = 1, /* transformers DynamicCache */
    TXC_CACHE_STATIC = 2,  /* transformers StaticCache */
} txc_cache_kind;

typedef struct txc_kv_cache txc_kv_cache;

/* "none" / "dynamic" / "static" <-> kind. Parse errors: TXC_ERR_INVALID. */
const char *txc_cache_kind_name(txc_cache_kind kind);
txc_status txc_cache_kind_parse(const char *s, txc_cache_kind *out);

/* A DynamicCache for `num_layers` layers (in `env`, NULL = active). */
txc_kv_cache *txc_dynamic_cache_new(txc_env *env, int num_layers);
/* A StaticCache: per layer two zero tensors (batch, num_key_value_heads,
 * max_cache_len, head_dim) float32. Errors: TXC_ERR_INVALID for
 * non-positive sizes, TXC_ERR_NOMEM. */
txc_kv_cache *txc_static_cache_new(txc_env *env, int num_layers, int64_t batch, int64_t num_key_value_heads,
                                   int64_t max_cache_len, int64_t head_dim);
void txc_kv_cache_free(txc_kv_cache *cache);

txc_cache_kind txc_kv_cache_kind(const txc_kv_cache *cache);
/* Tokens stored so far (transformers get_seq_length()). */
int64_t txc_kv_cache_seq_length(const txc_kv_cache *cache);
/* max_cache_len for a StaticCache, -1 for a DynamicCache (unbounded). */
int64_t txc_kv_cache_max_length(const txc_kv_cache *cache);
/* Forget the contents (a new sequence); a StaticCache keeps its buffers. */
void txc_kv_cache_reset(txc_kv_cache *cache);
/* Keep the first `n` tokens only (transformers DynamicCache.crop(n)), for
 * a sequence that continues differently after them. A DynamicCache's layers
 * are copied to (batch, heads, n, head_dim) (n = 0: emptied); a StaticCache
 * only sets its length: its entries at positions >= n stay in the buffer
 * but are never read, since attention reads keys up to the query's
 * cache_position and the next forward overwrites them from position n on.
 * n >= the stored length changes nothing. Errors: TXC_ERR_INVALID for
 * n < 0, TXC_ERR_NOMEM (the cache is then unchanged). */
txc_status txc_kv_cache_crop(txc_kv_cache *cache, int64_t n);

/* Cache.update(key_states, value_states, layer_idx): store `key`/`value`
 * (batch, num_key_value_heads, q_len, head_dim) for `layer` at positions
 * `cache_position` (int64 (q_len), consecutive), and return in *keys /
 * *values the tensors attention reads: (batch, num_key_value_heads, S,
 * head_dim) — S = tokens so far (dynamic) or max_cache_len (static, whose
 * attention is bounded by cache_position, see txc_causal_attention) (borrowed: owned
 * by the cache or the env's scope; call it inside txc_env_scope_begin/end,
 * as the model's forward does). Errors: TXC_ERR_CAPACITY when a
 * StaticCache position is >= max_cache_len; TXC_ERR_INVALID for shapes
 * that disagree with the cache. */
txc_status txc_kv_cache_update(txc_kv_cache *cache, int layer, txc_tensor *key, txc_tensor *value,
                               txc_tensor *cache_position, txc_tensor **keys, txc_tensor **values);
/* The key and value tensors of `layer` as stored (borrowed): a
 * StaticCache's whole buffers (batch, num_key_value_heads, max_cache_len,
 * head_dim), a DynamicCache's tokens so far. Errors: TXC_ERR_INVALID for a
 * layer out of range or an empty DynamicCache layer. */
txc_status txc_kv_cache_layer(const txc_kv_cache *c, int layer, txc_tensor **keys, txc_tensor **values);
/* Set the stored-token counter (used by compiled calls, which cannot read
 * cache_position while tracing). */
void txc_kv_cache_set_seq_length(txc_kv_cache *cache, int64_t n);

/* Register "StaticCache" and "DynamicCache" with the flatten/unflatten
 * registry (txc/tree.h), once; called before caches cross a jit boundary.
 * Leaves: key_cache[0..num_layers) then value_cache[...]; aux: kind,
 * layers, max_cache_len (never the stored length). */
txc_status txc_cache_register_trees(void);
/* Replace a DynamicCache's contents with `leaves` (its flattened layout:
 * 2 * num_layers tensors, retained); the length follows their seq dim. */
txc_status txc_kv_cache_set_layers(txc_kv_cache *cache, txc_tensor *const *leaves, int n);
/* "StaticCache" or "DynamicCache". */
const char *txc_kv_cache_tree_type(const txc_kv_cache *cache);

#ifdef __cplusplus
}
#endif
#endif
