/* The cache update and attention of one layer, for a sequence (1-D
 * cache_position) or a batch of rows each at its own positions (2-D
 * cache_position): see txc_model_cached_attention in models/model_impl.h. */
#include "models/model_impl.h"

txc_tensor *txc_model_cached_attention(txc_model *m, txc_kv_cache *cache, int layer, txc_tensor *q, txc_tensor *k,
                                       txc_tensor *v, txc_tensor *cache_position, txc_tensor *query_pos, double scale,
                                       int64_t window, double softcap)
{
    (void)m;
    if (!q || !k || !v || !cache_position)
        return NULL;
    if (txc_tensor_ndim(cache_position) == 1) {
        if (cache && txc_kv_cache_update(cache, layer, k, v, cache_position, &k, &v) != TXC_OK)
            return NULL;
        return txc_model_attention(q, k, v, query_pos, scale, window, softcap);
    }
    /* (B, L): row b of the batch is row b of the StaticCache. */
    int64_t B = txc_tensor_size(q, 0);
    txc_tensor *keys, *values;
    if (!cache || txc_kv_cache_kind(cache) != TXC_CACHE_STATIC ||
        txc_kv_cache_layer(cache, layer, &keys, &values) != TXC_OK || txc_tensor_size(keys, 0) < B) {
        txc_error(TXC_ERR_INVALID, "forward: a (batch, q_len) cache_position needs a StaticCache of at least "
                                   "%lld rows", (long long)B);
        return NULL;
    }
    txc_tensor *rows[TXC_JIT_MAX_BATCH_ROWS];
    if (B > TXC_JIT_MAX_BATCH_ROWS) {
        txc_error(TXC_ERR_INVALID, "forward: a batch of %lld rows at their own positions (at most %d)", (long long)B,
                  TXC_JIT_MAX_BATCH_ROWS);
        return NULL;
    }
    for (int64_t b = 0; b < B; b++) {
        /* One sequence's view of everything: its cache row (the same view
         * object for the write and the read, so a traced read follows the
         * write), its positions, its queries, keys and values. */
        txc_tensor *kc = txc_narrow(keys, 0, b, 1), *vc = txc_narrow(values, 0, b, 1);
        txc_tensor *pos = txc_select(cache_position, 0, b);
        if (!kc || !vc || !pos || txc_index_copy_(kc, 2, pos, txc_narrow(k, 0, b, 1)) != TXC_OK ||
            txc_index_copy_(vc, 2, pos, txc_narrow(v, 0, b, 1)) != TXC_OK)
            return NULL;
        rows[b] = txc_model_attention(txc_narrow(q, 0, b, 1), kc, vc, pos, scale, window, softcap);
        if (!rows[b])
            return NULL;
    }
    return B == 1 ? rows[0] : txc_cat(rows, (int)B, 0);
}

txc_tensor *txc_model_select_positions(txc_tensor *x, txc_tensor *logits_index)
{
    if (!x || !logits_index)
        return NULL;
    const int64_t B = txc_tensor_size(x, 0), L = txc_tensor_size(x, 1);
    const int64_t n = txc_tensor_numel(logits_index);
    if (n == 1)
        return txc_index_select(x, 1, logits_index);
    int nd = txc_tensor_ndim(x);
    if (n != B || nd < 2 || nd > 8) {
        txc_error(TXC_ERR_INVALID, "forward: logits_index must be int64 (1) or (batch = %lld), got %lld elements",
                  (long long)B, (long long)n);
        return NULL;
    }
    int64_t shape[8];
    shape[0] = B * L;
    for (int i = 2; i < nd; i++)
        shape[i - 1] = txc_tensor_size(x, i);
    txc_tensor *flat = txc_reshape(x, nd - 1, shape);
    /* row b's column is index[b] of row b: b * L + index[b] of the flattened rows */
    txc_tensor *offset = txc_arange(txc_tensor_env(x), 0, (double)(B * L), (double)L, TXC_I64);
    txc_tensor *rows = txc_index_select(flat, 0, txc_add(logits_index, offset));
    return txc_unsqueeze(rows, 1);
}
