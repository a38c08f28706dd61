/* A vocabulary's string -> id map and SentencePiece's merges from the scores
 * (txc/vocab.h). */
#include "txc/vocab.h"

#include <stdlib.h>
#include <string.h>

static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

txc_status txc_vocab_map_init(txc_vocab_map *m, const char *const *pieces, const size_t *lens, int64_t n)
{
    memset(m, 0, sizeof *m);
    if (n < 0 || (uint64_t)n > (UINT64_C(1) << 61))
        return txc_error(TXC_ERR_INVALID, "vocab: %lld pieces (expected 0 to 2^61)", (long long)n);
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)n)
        cap *= 2;
    if (cap > SIZE_MAX / sizeof *m->slot || !(m->slot = calloc((size_t)cap, sizeof *m->slot)))
        return txc_error(TXC_ERR_NOMEM, "vocab: out of memory (a map of %lld pieces)", (long long)n);
    m->cap = cap;
    m->pieces = pieces;
    m->lens = lens;
    m->n = n;
    for (int64_t k = 0; k < n; k++) {
        if (txc_vocab_map_get(m, pieces[k], lens[k]) >= 0)
            continue; /* a string twice keeps its first id */
        uint64_t i = fnv1a(pieces[k], lens[k]) & (cap - 1);
        while (m->slot[i])
            i = (i + 1) & (cap - 1);
        m->slot[i] = k + 1;
    }
    return TXC_OK;
}

int64_t txc_vocab_map_get(const txc_vocab_map *m, const char *s, size_t len)
{
    if (!m->slot)
        return -1;
    for (uint64_t i = fnv1a(s, len) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        int64_t k = m->slot[i];
        if (!k)
            return -1;
        if (m->lens[k - 1] == len && memcmp(m->pieces[k - 1], s, len) == 0)
            return k - 1;
    }
}

void txc_vocab_map_free(txc_vocab_map *m)
{
    free(m->slot);
    memset(m, 0, sizeof *m);
}

static int cmp_merge(const void *pa, const void *pb)
{
    const txc_spm_merge *x = pa, *y = pb;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    if (x->left != y->left)
        return x->left < y->left ? -1 : 1;
    return (x->right > y->right) - (x->right < y->right);
}

txc_status txc_spm_merges(const txc_vocab_map *m, const float *scores, txc_spm_merge **out, size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    txc_spm_merge *ms = NULL;
    size_t cap = 0, cnt = 0;
    for (int64_t k = 0; k < m->n; k++) {
        const char *t = m->pieces[k];
        size_t len = m->lens[k];
        if (txc_vocab_map_get(m, t, len) != k)
            continue; /* a string twice: the dict has one entry */
        for (size_t i = 1; i < len; i++) {
            if (((unsigned char)t[i] & 0xc0) == 0x80)
                continue; /* split at characters (Python str indices), not inside one */
            int64_t l = txc_vocab_map_get(m, t, i), r = txc_vocab_map_get(m, t + i, len - i);
            if (l < 0 || r < 0)
                continue;
            if (cnt == cap) {
                size_t c2 = cap ? 2 * cap : 1024;
                txc_spm_merge *p = c2 <= SIZE_MAX / sizeof *p ? realloc(ms, c2 * sizeof *p) : NULL;
                if (!p) {
                    free(ms);
                    return txc_error(TXC_ERR_NOMEM, "vocab: out of memory (SentencePiece merges)");
                }
                ms = p;
                cap = c2;
            }
            ms[cnt++] = (txc_spm_merge){scores ? scores[k] : -(float)k, k, l, r};
        }
    }
    if (cnt)
        qsort(ms, cnt, sizeof *ms, cmp_merge);
    *out = ms;
    *n_out = cnt;
    return TXC_OK;
}
