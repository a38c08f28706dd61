/*
 * The BPE model of tokenizer.json, as the `tokenizers` crate's models::bpe:
 * BpeBuilder (vocab + merges → merge map), BPE::merge_word (chars → vocab
 * ids with byte fallback and unk fusing) and Word::merge_all (priority merges,
 * lowest rank first, then leftmost, with the crate's stale-entry rule).
 */
#include "tokenizer/tokenizer_impl.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- merge map: (a, b) → (rank, new_id) ------------------------------------ */

static inline uint64_t pair_key(int32_t a, int32_t b)
{
    return (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
}

static inline size_t pair_hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (size_t)k;
}

static const tk_merge_slot *merge_get(const tk_bpe *m, int32_t a, int32_t b)
{
    if (!m->merges_cap)
        return NULL;
    uint64_t k = pair_key(a, b);
    size_t mask = m->merges_cap - 1;
    for (size_t i = pair_hash(k) & mask;; i = (i + 1) & mask) {
        if (m->merges[i].key == k)
            return &m->merges[i];
        if (!m->merges[i].key)
            return NULL;
    }
}

static inline void merge_prefetch(const tk_bpe *m, int32_t a, int32_t b)
{
#if defined(__GNUC__)
    __builtin_prefetch(&m->merges[pair_hash(pair_key(a, b)) & (m->merges_cap - 1)]);
#else
    (void)m, (void)a, (void)b;
#endif
}

/* Insert or overwrite: the crate collects merges into a HashMap, so a repeated
 * pair keeps the last rank. */
static void merge_put(tk_bpe *m, int32_t a, int32_t b, uint32_t rank, int32_t new_id)
{
    uint64_t k = pair_key(a, b);
    size_t mask = m->merges_cap - 1;
    size_t i = pair_hash(k) & mask;
    while (m->merges[i].key && m->merges[i].key != k)
        i = (i + 1) & mask;
    if (!m->merges[i].key)
        m->n_merges++;
    m->merges[i].key = k;
    m->merges[i].rank = rank;
    m->merges[i].new_id = new_id;
}

/* ---- loading ------------------------------------------------------------------ */

static txc_status add_merge(tk_bpe *m, const char *a, size_t alen, const char *b, size_t blen,
                            uint32_t rank, tk_buf *tmp)
{
    int32_t ia = tk_strmap_get(&m->vocab, a, alen);
    if (ia < 0)
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: merge %u: token '%.*s' not in vocab",
                         rank, (int)alen, a);
    int32_t ib = tk_strmap_get(&m->vocab, b, blen);
    if (ib < 0)
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: merge %u: token '%.*s' not in vocab",
                         rank, (int)blen, b);
    tmp->n = 0;
    txc_status st = tk_buf_append(tmp, a, alen);
    if (!st)
        st = tk_buf_append(tmp, b, blen);
    if (st)
        return st;
    int32_t in = tk_strmap_get(&m->vocab, tmp->p, tmp->n);
    if (in < 0)
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: merge %u: token '%s' not in vocab",
                         rank, tmp->p);
    merge_put(m, ia, ib, rank, in);
    return TXC_OK;
}

#define META "\xE2\x96\x81" /* U+2581 "▁", SentencePiece's space */
enum { MAX_META_EXC = 64 };

static bool json_is_null_or_absent(const cJSON *j) { return !j || cJSON_IsNull(j); }

static txc_status load_vocab(tk_bpe *m, const cJSON *vocab)
{
    if (!cJSON_IsObject(vocab))
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: model.vocab is not an object");
    int64_t max_id = -1;
    for (const cJSON *e = vocab->child; e; e = e->next) {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > INT32_MAX - 1 ||
            e->valuedouble != floor(e->valuedouble))
            return txc_error(TXC_ERR_FORMAT, "tokenizer.json: model.vocab['%s'] is not a valid id",
                             e->string ? e->string : "");
        int32_t id = (int32_t)e->valuedouble;
        txc_status st = tk_strmap_put(&m->vocab, e->string, strlen(e->string), id);
        if (st)
            return st;
        if (id > max_id)
            max_id = id;
    }
    /* The id tables are indexed by id: bound ids by the tokens present
     * before allocating (a real vocab is dense; the crate keeps a hash map
     * and takes any u32). */
    int64_t id_limit = 2 * (int64_t)m->vocab.n + TK_VOCAB_ID_SLACK;
    if (max_id >= id_limit) {
        const char *name = "";
        for (size_t i = 0; i < m->vocab.n; i++)
            if (m->vocab.ent[i].val == max_id)
                name = m->vocab.ent[i].key;
        return txc_error(TXC_ERR_FORMAT,
                         "tokenizer.json: model.vocab['%.64s'] has id %lld, but the vocab holds %zu tokens: txc "
                         "takes ids below 2 x the tokens + %d (%lld)",
                         name, (long long)max_id, m->vocab.n, TK_VOCAB_ID_SLACK, (long long)id_limit);
    }
    m->vocab_len = m->vocab.n;
    m->n_ids = (int32_t)(max_id + 1);
    if (m->n_ids > 0) {
        m->id_tok = calloc((size_t)m->n_ids, sizeof *m->id_tok);
        m->id_len = calloc((size_t)m->n_ids, sizeof *m->id_len);
        if (!m->id_tok || !m->id_len)
            return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
    }
    for (size_t i = 0; i < m->vocab.n; i++) {
        const tk_strmap_entry *e = &m->vocab.ent[i];
        m->id_tok[e->val] = e->key;
        m->id_len[e->val] = e->len;
    }
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        m->byte_ids[b] = tk_strmap_get(&m->vocab, name, 6);
    }
    for (uint32_t c = 0; c < 0x800; c++) {
        char ch[4];
        size_t cl = tk_utf8_encode(c, ch);
        m->char_ids[c] = tk_strmap_get(&m->vocab, ch, cl);
    }
    m->cut_at_meta = tk_strmap_get(&m->vocab, META, 3) >= 0;
    for (size_t i = 0; i < m->vocab.n && m->cut_at_meta; i++) {
        const char *k = m->vocab.ent[i].key;
        size_t n = m->vocab.ent[i].len, j = 0;
        while (j + 3 <= n && !memcmp(k + j, META, 3))
            j += 3;
        for (; j + 3 <= n; j++) {
            /* a "▁" after another character: a cut point inside the token */
            if (memcmp(k + j, META, 3) || (j >= 3 && !memcmp(k + j - 3, META, 3)))
                continue;
            if (m->n_meta_exc == MAX_META_EXC) { /* too many to check at each cut */
                m->cut_at_meta = false;
                break;
            }
            if (!m->meta_exc && !(m->meta_exc = malloc(MAX_META_EXC * sizeof *m->meta_exc)))
                return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
            m->meta_exc[m->n_meta_exc++] = (struct tk_meta_exc){k, (uint32_t)n, (uint32_t)j};
        }
    }
    return TXC_OK;
}

static txc_status load_merges(tk_bpe *m, const cJSON *merges)
{
    if (json_is_null_or_absent(merges))
        return TXC_OK;
    if (!cJSON_IsArray(merges))
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: model.merges is not an array");
    size_t n = (size_t)cJSON_GetArraySize(merges);
    size_t cap = 64;
    while (cap < n * 2 + 2)
        cap *= 2;
    m->merges = calloc(cap, sizeof *m->merges);
    if (!m->merges)
        return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
    m->merges_cap = cap;

    tk_buf tmp = {0};
    txc_status st = TXC_OK;
    uint32_t rank = 0;
    /* The crate reads merges as an untagged enum: all "a b" strings (legacy,
     * "#version" lines skipped) or all [a, b] pairs. */
    bool legacy = merges->child && cJSON_IsString(merges->child);
    for (const cJSON *e = merges->child; e && !st; e = e->next) {
        if (legacy) {
            if (!cJSON_IsString(e)) {
                st = txc_error(TXC_ERR_FORMAT, "tokenizer.json: model.merges mixes strings and pairs");
                break;
            }
            const char *s = e->valuestring;
            if (strncmp(s, "#version", 8) == 0)
                continue;
            const char *sp = strchr(s, ' ');
            if (!sp || strchr(sp + 1, ' ')) {
                st = txc_error(TXC_ERR_FORMAT, "tokenizer.json: merge %u '%s' is not 'a b'",
                               rank + 1, s);
                break;
            }
            st = add_merge(m, s, (size_t)(sp - s), sp + 1, strlen(sp + 1), rank, &tmp);
        } else {
            if (!cJSON_IsArray(e) || cJSON_GetArraySize(e) != 2 ||
                !cJSON_IsString(e->child) || !cJSON_IsString(e->child->next)) {
                st = txc_error(TXC_ERR_FORMAT, "tokenizer.json: merge %u is not a pair of strings",
                               rank + 1);
                break;
            }
            const char *a = e->child->valuestring, *b = e->child->next->valuestring;
            st = add_merge(m, a, strlen(a), b, strlen(b), rank, &tmp);
        }
        rank++;
    }
    tk_buf_free(&tmp);
    return st;
}

txc_status tk_bpe_load(tk_bpe *m, const cJSON *model)
{
    memset(m, 0, sizeof *m);
    for (int i = 0; i < 256; i++)
        m->byte_ids[i] = -1;
    for (int i = 0; i < 0x800; i++)
        m->char_ids[i] = -1;
    if (!cJSON_IsObject(model))
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: 'model' is missing or not an object");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(model, "type");
    if (!cJSON_IsString(type))
        return txc_error(TXC_ERR_UNSUPPORTED,
                         "tokenizer.json: model without a \"type\" field not supported");
    if (strcmp(type->valuestring, "BPE") != 0)
        return txc_error(TXC_ERR_UNSUPPORTED, "tokenizer.json: model type %s not supported",
                         type->valuestring);

    const cJSON *dropout = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    if (!json_is_null_or_absent(dropout) && !(cJSON_IsNumber(dropout) && dropout->valuedouble == 0))
        return txc_error(TXC_ERR_UNSUPPORTED, "tokenizer.json: BPE dropout not supported");
    static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(model, affixes[i]);
        if (json_is_null_or_absent(a) || (cJSON_IsString(a) && !a->valuestring[0]))
            continue;
        return txc_error(TXC_ERR_UNSUPPORTED, "tokenizer.json: BPE %s not supported", affixes[i]);
    }
    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
    if (cJSON_IsString(unk)) {
        m->unk_token = strdup(unk->valuestring);
        if (!m->unk_token)
            return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
    } else if (!json_is_null_or_absent(unk)) {
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: model.unk_token is not a string");
    }
    static const char *const flags[] = {"fuse_unk", "byte_fallback", "ignore_merges"};
    bool *dst[] = {&m->fuse_unk, &m->byte_fallback, &m->ignore_merges};
    for (int i = 0; i < 3; i++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(model, flags[i]);
        if (json_is_null_or_absent(f))
            continue;
        if (!cJSON_IsBool(f))
            return txc_error(TXC_ERR_FORMAT, "tokenizer.json: model.%s is not a boolean", flags[i]);
        *dst[i] = cJSON_IsTrue(f);
    }
    txc_status st = load_vocab(m, cJSON_GetObjectItemCaseSensitive(model, "vocab"));
    if (!st)
        st = load_merges(m, cJSON_GetObjectItemCaseSensitive(model, "merges"));
    return st;
}

void tk_bpe_free(tk_bpe *m)
{
    tk_strmap_free(&m->vocab);
    free(m->id_tok);
    free(m->id_len);
    free(m->merges);
    free(m->unk_token);
    free(m->meta_exc);
    memset(m, 0, sizeof *m);
}

/* ---- tokenize ------------------------------------------------------------------ */

typedef struct sym {
    int32_t c;          /* token id */
    int32_t prev, next; /* -1 at the ends */
    uint32_t len;       /* bytes; 0 = merged away */
} sym;

typedef struct hentry {
    uint32_t rank;
    uint32_t pos;
    int32_t new_id;
    int32_t a, b; /* the pair when pushed: unchanged means still valid */
} hentry;

/* The crate's Merge ordering: a min-heap on rank, then on pos. */
static inline bool h_less(const hentry *a, const hentry *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void h_push(hentry *h, size_t *n, hentry e)
{
    size_t i = (*n)++;
    while (i) {
        size_t p = (i - 1) / 2;
        if (!h_less(&e, &h[p]))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

static hentry h_pop(hentry *h, size_t *n)
{
    hentry top = h[0];
    hentry last = h[--(*n)];
    size_t i = 0, sz = *n;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= sz)
            break;
        size_t c = (l + 1 < sz && h_less(&h[l + 1], &h[l])) ? l + 1 : l;
        if (!h_less(&h[c], &last))
            break;
        h[i] = h[c];
        i = c;
    }
    if (sz)
        h[i] = last;
    return top;
}

static txc_status push_id(int32_t **ids, size_t *n, size_t *cap, int32_t id)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        int32_t *p = realloc(*ids, c * sizeof *p);
        if (!p)
            return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
        *ids = p;
        *cap = c;
    }
    (*ids)[(*n)++] = id;
    return TXC_OK;
}

static void word_add(sym *w, size_t *n, int32_t c, uint32_t len)
{
    size_t i = (*n)++;
    w[i].c = c;
    w[i].len = len;
    w[i].prev = (int32_t)i - 1;
    w[i].next = -1;
    if (i)
        w[i - 1].next = (int32_t)i;
}

static txc_status merge_word(const tk_bpe *m, const char *s, size_t len, tk_bpe_cache *scratch,
                             int32_t **ids, size_t *n, size_t *cap);

/* ---- the word cache ---------------------------------------------------------------- */

enum { CACHE_MAX_WORD = 256 /* the crate's MAX_LENGTH */, CACHE_MAX_ENTRIES = 1 << 20 };

static uint32_t word_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return (uint32_t)(h ^ (h >> 32));
}

/* The cached ids of a word, or NULL. */
static const int32_t *cache_get(const tk_bpe_cache *c, const char *s, size_t len, uint32_t h,
                                size_t *n_ids)
{
    if (!c->cap)
        return NULL;
    size_t mask = c->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        uint32_t e = c->slots[i];
        if (!e)
            return NULL;
        const struct tk_cache_ent *x = &c->ent[e - 1];
        if (x->hash == h && x->key_len == len && !memcmp(c->keys.p + x->key_off, s, len)) {
            static const int32_t none[1];
            *n_ids = x->n_ids; /* 0: a word of characters none of which is in the vocab */
            return x->n_ids ? c->ids + x->ids_off : none;
        }
    }
}

static txc_status cache_put(tk_bpe_cache *c, const char *s, size_t len, uint32_t h,
                            const int32_t *ids, size_t n_ids)
{
    if (c->n >= CACHE_MAX_ENTRIES)
        return TXC_OK;
    if ((c->n + 1) * 2 > c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 1024;
        uint32_t *slots = calloc(cap, sizeof *slots);
        if (!slots)
            return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
        for (size_t e = 0; e < c->n; e++) {
            size_t i = c->ent[e].hash & (cap - 1);
            while (slots[i])
                i = (i + 1) & (cap - 1);
            slots[i] = (uint32_t)(e + 1);
        }
        free(c->slots);
        c->slots = slots;
        c->cap = cap;
    }
    if (c->n == c->ent_cap) {
        size_t cap = c->ent_cap ? c->ent_cap * 2 : 512;
        struct tk_cache_ent *ent = realloc(c->ent, cap * sizeof *ent);
        if (!ent)
            return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
        c->ent = ent;
        c->ent_cap = cap;
    }
    if (c->n_ids + n_ids > c->ids_cap) {
        size_t cap = c->ids_cap ? c->ids_cap : 4096;
        while (cap < c->n_ids + n_ids)
            cap *= 2;
        int32_t *v = realloc(c->ids, cap * sizeof *v);
        if (!v)
            return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
        c->ids = v;
        c->ids_cap = cap;
    }
    size_t key_off = c->keys.n;
    txc_status st = tk_buf_append(&c->keys, s, len);
    if (st)
        return st;
    if (n_ids)
        memcpy(c->ids + c->n_ids, ids, n_ids * sizeof *ids);
    c->ent[c->n] = (struct tk_cache_ent){h, (uint32_t)len, key_off, c->n_ids, (uint32_t)n_ids};
    c->n_ids += n_ids;
    size_t i = h & (c->cap - 1);
    while (c->slots[i])
        i = (i + 1) & (c->cap - 1);
    c->slots[i] = (uint32_t)(++c->n);
    return TXC_OK;
}

void tk_bpe_cache_free(tk_bpe_cache *c)
{
    free(c->syms);
    free(c->heap);
    free(c->slots);
    free(c->ent);
    tk_buf_free(&c->keys);
    free(c->ids);
    memset(c, 0, sizeof *c);
}

/* The ids of one part (a word, or a part of a word cut before a "▁"): from
 * the cache, else merged and added to it. `vocab_first` (ignore_merges, the
 * part being the whole word): on a cache miss the word's own id when the
 * vocab has it (cached too). */
static txc_status tokenize_part(const tk_bpe *m, const char *s, size_t len, tk_bpe_cache *cache,
                                bool vocab_first, int32_t **ids, size_t *n, size_t *cap)
{
    if (!cache || len >= CACHE_MAX_WORD) {
        int32_t id = vocab_first ? tk_strmap_get(&m->vocab, s, len) : -1;
        return id >= 0 ? push_id(ids, n, cap, id) : merge_word(m, s, len, cache, ids, n, cap);
    }
    uint32_t h = word_hash(s, len);
    size_t k;
    const int32_t *hit = cache_get(cache, s, len, h, &k);
    if (hit && k) {
        if (*n + k > *cap) {
            size_t c = *cap ? *cap : 64;
            while (c < *n + k)
                c *= 2;
            int32_t *p = realloc(*ids, c * sizeof *p);
            if (!p)
                return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
            *ids = p;
            *cap = c;
        }
        memcpy(*ids + *n, hit, k * sizeof *hit);
        *n += k;
        return TXC_OK;
    }
    if (hit) /* no ids: *ids may still be NULL */
        return TXC_OK;
    size_t before = *n;
    int32_t id = vocab_first ? tk_strmap_get(&m->vocab, s, len) : -1;
    txc_status st = id >= 0 ? push_id(ids, n, cap, id) : merge_word(m, s, len, cache, ids, n, cap);
    if (!st) /* *ids is NULL when no id was pushed yet */
        st = cache_put(cache, s, len, h, *n > before ? *ids + before : NULL, *n - before);
    return st;
}

/* Whether a token with a "▁" after another character spells s around the
 * "▁" at byte i (then a merge may span a cut there). */
static bool meta_exc_at(const tk_bpe *m, const char *s, size_t len, size_t i)
{
    for (size_t e = 0; e < m->n_meta_exc; e++) {
        const struct tk_meta_exc *x = &m->meta_exc[e];
        if (i >= x->off && i - x->off + x->len <= len && !memcmp(s + i - x->off, x->tok, x->len))
            return true;
    }
    return false;
}

txc_status tk_bpe_tokenize(const tk_bpe *m, const char *s, size_t len, tk_bpe_cache *cache,
                           int32_t **ids, size_t *n, size_t *cap)
{
    if (len == 0)
        return TXC_OK;
    if (!m->cut_at_meta) /* ignore_merges: the whole word first, as the crate */
        return tokenize_part(m, s, len, cache, m->ignore_merges, ids, n, cap);
    if (m->ignore_merges) {
        int32_t id = tk_strmap_get(&m->vocab, s, len);
        if (id >= 0)
            return push_id(ids, n, cap, id);
    }
    /* Cut before each "▁" that follows another character: the merges on
     * each part are exactly those on the whole word (none can span a cut),
     * so each part can be merged (and cached) on its own. Without a
     * pre-tokenizer that splits (Llama 2, Mistral) a piece is all the text
     * between two added tokens: the parts are its words. A pending unk
     * cannot span a cut either: "▁" is in the vocab and flushes it. */
    size_t start = 0;
    for (size_t i = 1; i + 3 <= len; i++) {
        if (s[i] == META[0] && !memcmp(s + i, META, 3) &&
            !(i >= 3 && !memcmp(s + i - 3, META, 3)) && !meta_exc_at(m, s, len, i)) {
            txc_status st = tokenize_part(m, s + start, i - start, cache, false, ids, n, cap);
            if (st)
                return st;
            start = i;
        }
    }
    return tokenize_part(m, s + start, len - start, cache, false, ids, n, cap);
}

/* BPE::merge_word + Word::merge_all on one word. */
/* Grow a scratch array of `size`-byte entries to at least `need` entries. */
static bool scratch_reserve(void **p, size_t *cap, size_t need, size_t size)
{
    if (*cap >= need)
        return true;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = malloc(c * size); /* the old contents are not kept */
    if (!q)
        return false;
    free(*p);
    *p = q;
    *cap = c;
    return true;
}

/* BPE::merge_word + Word::merge_all on one word. `scratch` (may be NULL)
 * lends its symbol and heap arrays. */
static txc_status merge_word(const tk_bpe *m, const char *s, size_t len, tk_bpe_cache *scratch,
                             int32_t **ids, size_t *n, size_t *cap)
{
    if (len > INT32_MAX)
        return txc_error(TXC_ERR_INVALID, "tokenizer: piece of %zu bytes too long", len);

    /* At most one symbol per byte. */
    sym *w;
    if (scratch) {
        if (!scratch_reserve(&scratch->syms, &scratch->syms_cap, len, sizeof *w))
            return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
        w = scratch->syms;
    } else if (!(w = malloc(len * sizeof *w))) {
        return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
    }
    size_t nw = 0;
    int32_t unk_id = -1;
    uint32_t unk_len = 0;
    bool have_unk = false;
    txc_status st = TXC_OK;

    /* BPE::merge_word */
    for (size_t i = 0; i < len;) {
        size_t cl = tk_utf8_len((unsigned char)s[i]);
        unsigned char c0 = (unsigned char)s[i];
        int32_t id = c0 < 0x80  ? m->char_ids[c0]
                     : cl == 2  ? m->char_ids[(c0 & 0x1Fu) << 6 | ((unsigned char)s[i + 1] & 0x3Fu)]
                                : tk_strmap_get(&m->vocab, s + i, cl);
        if (id >= 0) {
            if (have_unk) {
                word_add(w, &nw, unk_id, unk_len);
                have_unk = false;
            }
            word_add(w, &nw, id, (uint32_t)cl);
        } else {
            bool done = false;
            if (m->byte_fallback) {
                bool all = true;
                for (size_t k = 0; k < cl; k++)
                    all = all && m->byte_ids[(unsigned char)s[i + k]] >= 0;
                if (all) {
                    /* As the crate: a pending unk is not flushed first. */
                    for (size_t k = 0; k < cl; k++)
                        word_add(w, &nw, m->byte_ids[(unsigned char)s[i + k]], 1);
                    done = true;
                }
            }
            if (!done && m->unk_token) {
                int32_t u = tk_strmap_get(&m->vocab, m->unk_token, strlen(m->unk_token));
                if (have_unk && m->fuse_unk) {
                    unk_len += (uint32_t)cl;
                } else {
                    if (u < 0) {
                        st = txc_error(TXC_ERR_FORMAT,
                                       "tokenizer.json: unk_token '%s' is not in the vocab",
                                       m->unk_token);
                        break;
                    }
                    if (have_unk)
                        word_add(w, &nw, unk_id, unk_len);
                    unk_id = u;
                    unk_len = (uint32_t)cl;
                    have_unk = true;
                }
            }
            /* No unk_token: the character is dropped, as the crate does. */
        }
        i += cl;
    }
    if (!st && have_unk)
        word_add(w, &nw, unk_id, unk_len);

    /* Word::merge_all */
    hentry *heap = NULL;
    size_t hn = 0;
    if (!st && nw > 1 && m->n_merges) {
        /* Each merge pushes at most 2 entries and removes a symbol: the heap
         * never holds more than 3 * nw entries. */
        if (scratch)
            heap = scratch_reserve(&scratch->heap, &scratch->heap_cap, 3 * nw, sizeof *heap)
                       ? scratch->heap
                       : NULL;
        else
            heap = malloc(3 * nw * sizeof *heap);
        if (!heap)
            st = txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
    }
    if (heap) {
        /* The merge table is larger than the caches: ask for every slot of
         * the word's pairs first, so that the misses overlap. */
        for (size_t i = 0; i + 1 < nw; i++)
            merge_prefetch(m, w[i].c, w[i + 1].c);
        for (size_t i = 0; i + 1 < nw; i++) {
            const tk_merge_slot *mg = merge_get(m, w[i].c, w[i + 1].c);
            if (mg)
                h_push(heap, &hn, (hentry){mg->rank, (uint32_t)i, mg->new_id, w[i].c, w[i + 1].c});
        }
        while (hn) {
            hentry top = h_pop(heap, &hn);
            sym *cur = &w[top.pos];
            if (cur->len == 0 || cur->next == -1)
                continue;
            int32_t rpos = cur->next;
            sym right = w[rpos];
            /* The crate's test: merges[(cur, right)] == new_id, else the
             * entry has expired. When the pair is still the one pushed the
             * answer is known without a lookup. */
            if (cur->c != top.a || right.c != top.b) {
                const tk_merge_slot *mg = merge_get(m, cur->c, right.c);
                if (!mg || mg->new_id != top.new_id)
                    continue; /* an expired queue entry */
            }
            cur->c = top.new_id;
            cur->len += right.len;
            cur->next = right.next;
            w[rpos].len = 0; /* the right part is merged away */
            if (right.next >= 0)
                w[right.next].prev = (int32_t)top.pos;
            if (cur->prev >= 0) {
                const tk_merge_slot *pm = merge_get(m, w[cur->prev].c, cur->c);
                if (pm)
                    h_push(heap, &hn,
                           (hentry){pm->rank, (uint32_t)cur->prev, pm->new_id, w[cur->prev].c, cur->c});
            }
            if (cur->next >= 0 && (size_t)cur->next < nw) {
                const tk_merge_slot *nm = merge_get(m, cur->c, w[cur->next].c);
                if (nm)
                    h_push(heap, &hn, (hentry){nm->rank, top.pos, nm->new_id, cur->c, w[cur->next].c});
            }
        }
        if (!scratch)
            free(heap);
    }
    /* Emit the surviving symbols in order. */
    if (!st && nw) {
        for (int32_t i = 0; i >= 0 && !st; i = w[i].next)
            st = push_id(ids, n, cap, w[i].c);
    }
    if (!scratch)
        free(w);
    return st;
}
