/*
 * tokenizer.json: loading, the added vocabulary, encode and decode
 * (the `tokenizers` crate's TokenizerImpl and AddedVocabulary).
 */
#include "formats/files.h"
#include "tokenizer/tokenizer_impl.h"
#include "txc/gguf.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- trie over added tokens ---------------------------------------------------- */

static txc_status trie_init(tk_trie *tr)
{
    memset(tr, 0, sizeof *tr);
    tr->nodes_cap = 16;
    tr->term = malloc(tr->nodes_cap * sizeof *tr->term);
    if (!tr->term)
        return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
    tr->term[0] = -1;
    tr->n_nodes = 1;
    return TXC_OK;
}

static void trie_free(tk_trie *tr)
{
    free(tr->edge_keys);
    free(tr->edge_vals);
    free(tr->term);
    memset(tr, 0, sizeof *tr);
}

static inline size_t edge_hash(uint32_t k) { return (size_t)(k * 2654435761u); }

static int64_t trie_child(const tk_trie *tr, uint32_t node, unsigned char c)
{
    if (!tr->edge_cap)
        return -1;
    uint32_t k = ((node << 8) | c) + 1;
    size_t mask = tr->edge_cap - 1;
    for (size_t i = edge_hash(k) & mask;; i = (i + 1) & mask) {
        if (tr->edge_keys[i] == k)
            return tr->edge_vals[i];
        if (!tr->edge_keys[i])
            return -1;
    }
}

static txc_status trie_grow_edges(tk_trie *tr)
{
    size_t cap = tr->edge_cap ? tr->edge_cap * 2 : 256;
    uint32_t *keys = calloc(cap, sizeof *keys), *vals = malloc(cap * sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
    }
    for (size_t i = 0; i < tr->edge_cap; i++) {
        if (!tr->edge_keys[i])
            continue;
        size_t j = edge_hash(tr->edge_keys[i]) & (cap - 1);
        while (keys[j])
            j = (j + 1) & (cap - 1);
        keys[j] = tr->edge_keys[i];
        vals[j] = tr->edge_vals[i];
    }
    free(tr->edge_keys);
    free(tr->edge_vals);
    tr->edge_keys = keys;
    tr->edge_vals = vals;
    tr->edge_cap = cap;
    return TXC_OK;
}

/* Insert a pattern; the first pattern inserted keeps a terminal node. */
static txc_status trie_insert(tk_trie *tr, const char *s, size_t n, int32_t id)
{
    if (n == 0)
        return TXC_OK;
    uint32_t node = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        int64_t ch = trie_child(tr, node, c);
        if (ch < 0) {
            if (tr->n_nodes >= (1u << 23))
                return txc_error(TXC_ERR_UNSUPPORTED, "tokenizer: added tokens too large");
            if ((tr->n_edges + 1) * 2 > tr->edge_cap) {
                txc_status st = trie_grow_edges(tr);
                if (st)
                    return st;
            }
            if (tr->n_nodes == tr->nodes_cap) {
                int32_t *term = realloc(tr->term, tr->nodes_cap * 2 * sizeof *term);
                if (!term)
                    return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
                tr->term = term;
                tr->nodes_cap *= 2;
            }
            ch = (int64_t)tr->n_nodes++;
            tr->term[ch] = -1;
            uint32_t k = ((node << 8) | c) + 1;
            size_t j = edge_hash(k) & (tr->edge_cap - 1);
            while (tr->edge_keys[j])
                j = (j + 1) & (tr->edge_cap - 1);
            tr->edge_keys[j] = k;
            tr->edge_vals[j] = (uint32_t)ch;
            tr->n_edges++;
        }
        node = (uint32_t)ch;
    }
    if (tr->term[node] < 0)
        tr->term[node] = id;
    tr->first[(unsigned char)s[0] >> 3] |= (uint8_t)(1u << ((unsigned char)s[0] & 7));
    return TXC_OK;
}

/* Longest pattern starting at s[0..n): its length (0: none), *id its id. */
static size_t trie_longest(const tk_trie *tr, const char *s, size_t n, int32_t *id)
{
    unsigned char c0 = (unsigned char)s[0];
    if (!(tr->first[c0 >> 3] & (1u << (c0 & 7))))
        return 0;
    uint32_t node = 0;
    size_t best = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t ch = trie_child(tr, node, (unsigned char)s[i]);
        if (ch < 0)
            break;
        node = (uint32_t)ch;
        if (tr->term[node] >= 0) {
            best = i + 1;
            *id = tr->term[node];
        }
    }
    return best;
}

/* ---- AddedVocabulary::find_matches -------------------------------------------------- */

static uint32_t last_char(const char *s, size_t end, size_t *start)
{
    size_t k = end - 1;
    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80)
        k--;
    size_t cl;
    *start = k;
    return tk_utf8_decode(s + k, &cl);
}

/* Split s[0..n) (a piece starting at the input's origin when at_origin) on
 * the added tokens of `tr`, appending text and token pieces to out. */
static txc_status split_added(const txc_tokenizer *t, const tk_trie *tr, const char *s, size_t n,
                              bool at_origin, tk_pieces *out)
{
    if (tr->n_nodes <= 1)
        return tk_pieces_add_text(out, s, n, at_origin);
    size_t start_offset = 0, i = 0;
    txc_status st = TXC_OK;
    while (i < n && !st) {
        int32_t id = -1;
        size_t mlen = trie_longest(tr, s + i, n - i, &id);
        if (!mlen) {
            i++;
            continue;
        }
        size_t start = i, stop = i + mlen;
        i = stop; /* non-overlapping: the search resumes after the match */
        static const tk_added plain_token = {0};
        const tk_added *a = t->added_by_id[id] >= 0 ? &t->added[t->added_by_id[id]] : &plain_token;
        if (a->single_word) {
            size_t k, cl;
            bool start_space = start == 0 || !tk_is_word_char(last_char(s, start, &k));
            bool stop_space = stop == n || !tk_is_word_char(tk_utf8_decode(s + stop, &cl));
            if (!start_space || !stop_space)
                continue;
        }
        if (a->lstrip) {
            size_t ns = start, k;
            while (ns > 0 && tk_is_whitespace(last_char(s, ns, &k)))
                ns = k;
            start = ns > start_offset ? ns : start_offset;
        }
        if (a->rstrip) {
            size_t cl;
            while (stop < n && tk_is_whitespace(tk_utf8_decode(s + stop, &cl)))
                stop += cl;
        }
        if (start_offset < start)
            st = tk_pieces_add_text(out, s + start_offset, start - start_offset,
                                    at_origin && start_offset == 0);
        if (!st)
            st = tk_pieces_add_token(out, id, at_origin && start == 0);
        start_offset = stop;
    }
    if (!st && start_offset < n)
        st = tk_pieces_add_text(out, s + start_offset, n - start_offset,
                                at_origin && start_offset == 0);
    return st;
}

/* ---- loading ------------------------------------------------------------------------ */

static bool jbool(const cJSON *obj, const char *key, bool dflt, bool *ok)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!j || cJSON_IsNull(j))
        return dflt;
    if (!cJSON_IsBool(j))
        *ok = false;
    return cJSON_IsTrue(j);
}

static int32_t token_to_id(const txc_tokenizer *t, const char *s, size_t n)
{
    int32_t id = tk_strmap_get(&t->added_map, s, n);
    return id >= 0 ? id : tk_strmap_get(&t->bpe.vocab, s, n);
}

static bool same_added(const tk_added *a, const tk_added *b)
{
    return a->len == b->len && !memcmp(a->content, b->content, a->len) &&
           a->special == b->special && a->lstrip == b->lstrip && a->rstrip == b->rstrip &&
           a->normalized == b->normalized && a->single_word == b->single_word;
}

typedef struct pattern {
    char *content;
    size_t len;
    bool normalized;
} pattern;

typedef struct pattern_list {
    pattern *v;
    size_t n, cap;
} pattern_list;

static txc_status pattern_add(pattern_list *l, const tk_added *a)
{
    if (l->n == l->cap) { /* doubling: many added tokens load in linear time */
        size_t cap = l->cap ? 2 * l->cap : 64;
        pattern *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
        l->v = v;
        l->cap = cap;
    }
    pattern *v = l->v;
    v[l->n].content = malloc(a->len + 1);
    if (!v[l->n].content)
        return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
    memcpy(v[l->n].content, a->content, a->len + 1);
    v[l->n].len = a->len;
    v[l->n].normalized = a->normalized;
    l->n++;
    return TXC_OK;
}

static void pattern_list_free(pattern_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].content);
    free(l->v);
}

/* The crate's normalized_cache: a normalized token whose content the
 * normalizer changes decodes as its normalized form (and, since
 * is_special_token then sees that form, is not skipped as special). The
 * cache is keyed by id: an earlier entry's form stays unless replaced. */
static txc_status set_decode_form(txc_tokenizer *t, tk_added *a, const tk_added *prev)
{
    tk_buf b = {0};
    txc_status st = TXC_OK;
    if (a->normalized && t->n_norm) {
        st = tk_buf_append(&b, a->content, a->len);
        if (!st)
            st = tk_normalize(t, &b, NULL);
        if (!st && (b.n != a->len || memcmp(b.p, a->content, b.n) != 0)) {
            a->dec = b.p;
            a->dec_len = b.n;
            return TXC_OK;
        }
        tk_buf_free(&b);
    }
    if (!st && prev && prev->dec) {
        a->dec = malloc(prev->dec_len + 1);
        if (!a->dec)
            return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
        memcpy(a->dec, prev->dec, prev->dec_len + 1);
        a->dec_len = prev->dec_len;
    }
    return st;
}

/* AddedVocabulary::add_tokens, one token at a time as the crate's
 * deserializer calls it; then refresh_added_tokens builds the two tries. */
static txc_status load_added_tokens(txc_tokenizer *t, const cJSON *list)
{
    if (!list || cJSON_IsNull(list))
        list = NULL;
    else if (!cJSON_IsArray(list))
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: added_tokens is not an array");
    size_t n = list ? (size_t)cJSON_GetArraySize(list) : 0;
    /* An added token's id is its vocab id or one past the largest so far,
     * numbering starting at the vocab's entry count: below
     * max(bpe.n_ids, vocab_len) + n (vocab_len exceeds n_ids when several
     * vocab entries share an id). */
    size_t base = (size_t)t->bpe.n_ids > t->bpe.vocab_len ? (size_t)t->bpe.n_ids : t->bpe.vocab_len;
    if (base > (size_t)INT32_MAX - 1 || n > (size_t)INT32_MAX - 1 - base)
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: too many added tokens (%zu)", n);
    t->added = calloc(n ? n : 1, sizeof *t->added);
    t->added_by_id = malloc((base + n + 1) * sizeof *t->added_by_id);
    if (!t->added || !t->added_by_id)
        return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
    for (size_t i = 0; i < base + n + 1; i++)
        t->added_by_id[i] = -1;
    /* the crate's special_tokens and added_tokens lists, in order */
    pattern_list specials = {0}, plain = {0};
    txc_status st = TXC_OK;
    int32_t max_added = -1;
    bool any_added = false;

    for (const cJSON *e = list ? list->child : NULL; e && !st; e = e->next) {
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(e, "content");
        if (!cJSON_IsObject(e) || !cJSON_IsString(content)) {
            st = txc_error(TXC_ERR_FORMAT, "tokenizer.json: added token without a \"content\"");
            break;
        }
        bool ok = true;
        tk_added a = {0};
        a.len = strlen(content->valuestring);
        a.content = content->valuestring; /* copied below if kept */
        a.special = jbool(e, "special", false, &ok);
        a.lstrip = jbool(e, "lstrip", false, &ok);
        a.rstrip = jbool(e, "rstrip", false, &ok);
        a.normalized = jbool(e, "normalized", true, &ok);
        a.single_word = jbool(e, "single_word", false, &ok);
        if (!ok) {
            st = txc_error(TXC_ERR_FORMAT, "tokenizer.json: added token '%s': a flag is not a boolean",
                           a.content);
            break;
        }
        if (a.len == 0)
            continue;
        if (a.special && tk_strmap_get(&t->special_set, a.content, a.len) < 0) {
            st = tk_strmap_put(&t->special_set, a.content, a.len, 1);
            if (!st)
                st = pattern_add(&specials, &a);
            if (st)
                break;
        }
        /* The crate skips a token equal to one its id→token map holds: the
         * latest token of the id its content has. */
        int32_t id = token_to_id(t, a.content, a.len);
        if (id >= 0 && t->added_by_id[id] >= 0 && same_added(&t->added[t->added_by_id[id]], &a))
            continue;
        if (id < 0) {
            int32_t vs = (int32_t)t->bpe.vocab_len;
            id = !any_added ? vs : (max_added >= vs || vs == 0) ? max_added + 1 : vs;
        }
        if (id < 0 || id == INT32_MAX) {
            st = txc_error(TXC_ERR_FORMAT, "tokenizer.json: too many added tokens");
            break;
        }
        st = tk_strmap_put(&t->added_map, a.content, a.len, id);
        if (!st && tk_strmap_get(&t->special_set, a.content, a.len) < 0)
            st = pattern_add(&plain, &a);
        if (st)
            break;
        any_added = true;
        if (id > max_added)
            max_added = id;
        a.content = malloc(a.len + 1);
        if (!a.content) {
            st = txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
            break;
        }
        memcpy(a.content, content->valuestring, a.len + 1);
        a.id = id;
        t->added[t->n_added++] = a;
        int32_t prev = t->added_by_id[id];
        t->added_by_id[id] = (int32_t)(t->n_added - 1); /* the latest one for an id wins */
        st = set_decode_form(t, &t->added[t->n_added - 1], prev >= 0 ? &t->added[prev] : NULL);
    }
    if (!st) {
        t->n_ids = t->bpe.n_ids > max_added + 1 ? t->bpe.n_ids : max_added + 1;
        st = trie_init(&t->trie_raw);
        if (!st)
            st = trie_init(&t->trie_norm);
    }
    /* refresh_added_tokens: special_tokens ++ added_tokens, split by
     * "normalized"; normalized ones match their normalized form. */
    tk_buf b = {0};
    for (size_t pass = 0; pass < 2 && !st; pass++) {
        const pattern_list *l = pass ? &plain : &specials;
        for (size_t k = 0; k < l->n && !st; k++) {
            const pattern *a = &l->v[k];
            int32_t id = token_to_id(t, a->content, a->len);
            if (!a->normalized) {
                st = trie_insert(&t->trie_raw, a->content, a->len, id);
            } else {
                b.n = 0;
                st = tk_buf_append(&b, a->content, a->len);
                if (!st)
                    st = tk_normalize(t, &b, NULL);
                if (!st)
                    st = trie_insert(&t->trie_norm, b.p, b.n, id);
            }
        }
    }
    tk_buf_free(&b);
    pattern_list_free(&specials);
    pattern_list_free(&plain);
    return st;
}

static const char *const bos_names[] = {"<s>", "<bos>", "<|begin_of_text|>", "<|startoftext|>"};

static void find_bos(txc_tokenizer *t)
{
    t->bos_id = -1;
    for (size_t i = 0; i < t->n_post; i++) {
        const tk_post *p = &t->post[i];
        if (p->kind == TK_POST_TEMPLATE && p->n_single && p->single[0] >= 0) {
            t->bos_id = p->single[0];
            return;
        }
    }
    for (size_t i = 0; i < sizeof bos_names / sizeof bos_names[0]; i++) {
        int32_t id = tk_strmap_get(&t->added_map, bos_names[i], strlen(bos_names[i]));
        if (id >= 0 && txc_tokenizer_is_special(t, id)) {
            t->bos_id = id;
            return;
        }
    }
}


/* TemplateProcessing's special tokens carry their own ids ("special_tokens":
 * {"<s>": {"ids": [1]}}); the crate emits them unchecked, and an id outside
 * the vocabulary (model + added tokens) then cannot be decoded or embedded:
 * refused at load, naming the id. */
static txc_status check_post_ids(const txc_tokenizer *t)
{
    for (size_t i = 0; i < t->n_post; i++)
        for (size_t k = 0; t->post[i].kind == TK_POST_TEMPLATE && k < t->post[i].n_single; k++) {
            int32_t id = t->post[i].single[k];
            if (id >= t->n_ids)
                return txc_error(TXC_ERR_FORMAT, "tokenizer.json: post_processor: special token id %d is outside "
                                                 "the vocabulary (size %d)", (int)id, (int)t->n_ids);
        }
    return TXC_OK;
}

static txc_status load_json(txc_tokenizer *t, const cJSON *root)
{
    if (!cJSON_IsObject(root))
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: the top level is not an object");
    const cJSON *version = cJSON_GetObjectItemCaseSensitive(root, "version");
    if (cJSON_IsString(version) && strcmp(version->valuestring, "1.0") != 0)
        return txc_error(TXC_ERR_UNSUPPORTED, "tokenizer.json: version %s not supported",
                         version->valuestring);
    txc_status st = tk_bpe_load(&t->bpe, cJSON_GetObjectItemCaseSensitive(root, "model"));
    if (!st)
        st = tk_parse_normalizer(t, cJSON_GetObjectItemCaseSensitive(root, "normalizer"));
    if (!st)
        st = tk_parse_pretokenizer(t, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"));
    if (!st)
        st = tk_parse_post_processor(t, cJSON_GetObjectItemCaseSensitive(root, "post_processor"));
    if (!st)
        st = tk_parse_decoder(t, cJSON_GetObjectItemCaseSensitive(root, "decoder"));
    if (!st)
        st = load_added_tokens(t, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"));
    if (!st)
        st = check_post_ids(t);
    if (!st)
        find_bos(t);
    return st;
}

/* Hand the heap that the parse tree freed back to the system: cJSON's
 * tree of a large tokenizer.json is about a million small allocations
 * (42 MiB for Qwen2.5's 6 MB file), freed under the tables that stay, so
 * glibc would keep it in the RSS for the life of the process (Qwen3's 11 MB
 * file: 80 MiB held after the load, 19 MiB with the trim;
 * test_tokenizer_memory). malloc_trim(3) returns the free pages inside the
 * heap too (MADV_DONTNEED); elsewhere: nothing. */
static void release_freed_heap(void)
{
    txc_hf_trim_heap();
}

/* Parse tokenizer.json text; `origin` names it in the "not valid JSON" message. */
static txc_status tokenizer_parse(const char *data, size_t len, const char *origin, txc_tokenizer **out)
{
    /* JSON text is UTF-8 (RFC 8259) and the crate's serde_json refuses
     * anything else; cJSON would pass raw bytes into token strings. */
    if (!tk_utf8_valid(data, len))
        return txc_error(TXC_ERR_FORMAT, "tokenizer: %s is not valid UTF-8", origin);
    cJSON *root = cJSON_ParseWithLength(data, len);
    if (!root) {
        const char *where = cJSON_GetErrorPtr();
        size_t off = where && where >= data && where <= data + len ? (size_t)(where - data) : 0;
        return txc_error(TXC_ERR_FORMAT, "tokenizer: %s is not valid JSON (near byte %zu)", origin, off);
    }
    txc_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        cJSON_Delete(root);
        return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
    }
    txc_status st = load_json(t, root);
    cJSON_Delete(root);
    release_freed_heap();
    if (st) {
        txc_tokenizer_free(t);
        return st;
    }
    *out = t;
    return TXC_OK;
}

txc_status txc_tokenizer_load(const char *path, txc_tokenizer **out)
{
    if (out)
        *out = NULL;
    if (!path || !out)
        return txc_error(TXC_ERR_INVALID, "txc_tokenizer_load: NULL argument");
    if (txc_gguf_is_path(path)) { /* a GGUF's tokenizer.ggml.* metadata (tokenizer_gguf.c) */
        cJSON *tree;
        txc_status gs = tk_gguf_tree(path, &tree);
        if (gs)
            return gs;
        txc_tokenizer *t = calloc(1, sizeof *t);
        gs = t ? load_json(t, tree) : txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
        cJSON_Delete(tree);
        release_freed_heap();
        if (gs) {
            txc_tokenizer_free(t);
            return gs;
        }
        *out = t;
        return TXC_OK;
    }
    char *file = NULL;
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        size_t n = strlen(path);
        file = malloc(n + sizeof "/tokenizer.json");
        if (!file)
            return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
        memcpy(file, path, n);
        memcpy(file + n, "/tokenizer.json", sizeof "/tokenizer.json");
    }
    char *data = NULL;
    size_t len = 0;
    txc_status st = txc_hf_read_file(file ? file : path, (size_t)1 << 30, &data, &len, NULL);
    if (st) {
        free(file);
        return st;
    }
    st = tokenizer_parse(data, len, file ? file : path, out);
    free(data);
    free(file);
    return st;
}

txc_status txc_tokenizer_parse(const char *json_text, size_t len, txc_tokenizer **out)
{
    if (out)
        *out = NULL;
    if ((!json_text && len) || !out)
        return txc_error(TXC_ERR_INVALID, "txc_tokenizer_parse: NULL argument");
    return tokenizer_parse(json_text ? json_text : "", len, "tokenizer.json", out);
}

void txc_tokenizer_free(txc_tokenizer *t)
{
    if (!t)
        return;
    tk_bpe_free(&t->bpe);
    for (size_t i = 0; i < t->n_added; i++) {
        free(t->added[i].content);
        free(t->added[i].dec);
    }
    free(t->added);
    tk_strmap_free(&t->added_map);
    tk_strmap_free(&t->special_set);
    free(t->added_by_id);
    trie_free(&t->trie_raw);
    trie_free(&t->trie_norm);
    tk_components_free(t);
    free(t);
}

/* ---- encode ----------------------------------------------------------------------------- */

txc_status txc_tokenizer_encode(const txc_tokenizer *t, const char *text, size_t len,
                                bool add_special_tokens, int32_t **ids_out, size_t *n_out)
{
    if (ids_out)
        *ids_out = NULL;
    if (n_out)
        *n_out = 0;
    if (!t || !ids_out || !n_out || (!text && len))
        return txc_error(TXC_ERR_INVALID, "txc_tokenizer_encode: NULL argument");
    if (!tk_utf8_valid(text, len))
        return txc_error(TXC_ERR_INVALID, "tokenizer: the text is not valid UTF-8");

    tk_pieces raw = {0}, pieces = {0};
    tk_buf b = {0};
    tk_ctx cx = {0};
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    /* 1. added tokens that match the raw text */
    txc_status st = split_added(t, &t->trie_raw, text, len, true, &raw);
    /* 2. normalize the rest, then added tokens that match normalized text */
    for (size_t i = 0; i < raw.n && !st; i++) {
        const tk_piece *p = &raw.v[i];
        if (p->id >= 0) {
            st = tk_pieces_add_token(&pieces, p->id, p->at_origin);
            continue;
        }
        b.n = 0;
        st = tk_buf_append(&b, raw.text.p + p->off, p->len);
        if (!st)
            st = tk_normalize(t, &b, &cx);
        if (!st)
            st = split_added(t, &t->trie_norm, b.p, b.n, p->at_origin, &pieces);
    }
    tk_pieces_free(&raw);
    tk_buf_free(&b);
    /* 3. pre-tokenize, 4. the model */
    if (!st)
        st = tk_pretokenize(t, &pieces, &cx);
    for (size_t i = 0; i < pieces.n && !st; i++) {
        const tk_piece *p = &pieces.v[i];
        if (p->id >= 0) {
            if (n == cap) {
                size_t c = cap ? cap * 2 : 64;
                int32_t *q = realloc(ids, c * sizeof *q);
                if (!q) {
                    st = txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
                    break;
                }
                ids = q, cap = c;
            }
            ids[n++] = p->id;
        } else {
            st = tk_bpe_tokenize(&t->bpe, pieces.text.p + p->off, p->len, &cx.cache, &ids, &n,
                                 &cap);
        }
    }
    tk_pieces_free(&pieces);
    tk_ctx_free(&cx);
    /* 5. post-process */
    for (size_t k = 0; k < t->n_post && add_special_tokens && !st; k++) {
        const tk_post *pp = &t->post[k];
        if (pp->kind != TK_POST_TEMPLATE)
            continue;
        size_t extra = 0;
        for (size_t j = 0; j < pp->n_single; j++)
            extra += pp->single[j] < 0 ? n : 1;
        int32_t *q = malloc((extra ? extra : 1) * sizeof *q);
        if (!q) {
            st = txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
            break;
        }
        size_t m = 0;
        for (size_t j = 0; j < pp->n_single; j++) {
            if (pp->single[j] < 0) {
                if (n)
                    memcpy(q + m, ids, n * sizeof *q);
                m += n;
            } else {
                q[m++] = pp->single[j];
            }
        }
        free(ids);
        ids = q, n = m, cap = extra ? extra : 1;
    }
    if (!st && !ids) {
        ids = malloc(sizeof *ids);
        if (!ids)
            st = txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
    }
    if (st) {
        free(ids);
        return st;
    }
    *ids_out = ids;
    *n_out = n;
    return TXC_OK;
}

/* ---- decode ----------------------------------------------------------------------------- */

const char *tk_token_of(const txc_tokenizer *t, int32_t id, size_t *len)
{
    if (id < 0 || id >= t->n_ids)
        return NULL;
    if (t->added_by_id[id] >= 0) {
        const tk_added *a = &t->added[t->added_by_id[id]];
        *len = a->dec ? a->dec_len : a->len;
        return a->dec ? a->dec : a->content;
    }
    if (id < t->bpe.n_ids && t->bpe.id_tok[id]) {
        *len = t->bpe.id_len[id];
        return t->bpe.id_tok[id];
    }
    return NULL;
}

txc_status tk_decode_ids(const txc_tokenizer *t, const int32_t *ids, size_t n, tk_buf *out)
{
    tk_strlist toks = {0};
    txc_status st = TXC_OK;
    for (size_t i = 0; i < n && !st; i++) {
        size_t len = 0;
        const char *s = tk_token_of(t, ids[i], &len);
        st = tk_strlist_add(&toks, s, len);
    }
    if (!st)
        st = tk_decode_tokens(t, &toks, out);
    tk_strlist_free(&toks);
    return st;
}

txc_status txc_tokenizer_decode(const txc_tokenizer *t, const int32_t *ids, size_t n_ids,
                                bool skip_special_tokens, char **text, size_t *len)
{
    if (text)
        *text = NULL;
    if (len)
        *len = 0;
    if (!t || !text || (!ids && n_ids))
        return txc_error(TXC_ERR_INVALID, "txc_tokenizer_decode: NULL argument");
    int32_t *kept = malloc((n_ids ? n_ids : 1) * sizeof *kept);
    if (!kept)
        return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
    size_t m = 0;
    for (size_t i = 0; i < n_ids; i++) {
        size_t tl;
        const char *s = tk_token_of(t, ids[i], &tl);
        if (!s) {
            free(kept);
            return txc_error(TXC_ERR_INVALID,
                             "tokenizer: id %d at position %zu is out of range "
                             "(vocab size %d)",
                             (int)ids[i], i, (int)t->n_ids);
        }
        if (skip_special_tokens && tk_strmap_get(&t->special_set, s, tl) >= 0)
            continue;
        kept[m++] = ids[i];
    }
    tk_buf out = {0};
    txc_status st = tk_decode_ids(t, kept, m, &out);
    free(kept);
    if (st) {
        tk_buf_free(&out);
        return st;
    }
    *text = out.p;
    if (len)
        *len = out.n;
    return TXC_OK;
}

/* ---- vocabulary --------------------------------------------------------------------------- */

int32_t txc_tokenizer_vocab_size(const txc_tokenizer *t) { return t ? t->n_ids : 0; }

const char *txc_tokenizer_id_to_token(const txc_tokenizer *t, int32_t id)
{
    size_t len;
    return t ? tk_token_of(t, id, &len) : NULL;
}

int32_t txc_tokenizer_token_to_id(const txc_tokenizer *t, const char *token)
{
    return t && token ? token_to_id(t, token, strlen(token)) : -1;
}

bool txc_tokenizer_is_added(const txc_tokenizer *t, int32_t id)
{
    return t && id >= 0 && id < t->n_ids && t->added_by_id[id] >= 0;
}

bool txc_tokenizer_is_special(const txc_tokenizer *t, int32_t id)
{
    size_t len;
    const char *s = t ? tk_token_of(t, id, &len) : NULL;
    return s && tk_strmap_get(&t->special_set, s, len) >= 0;
}

int32_t txc_tokenizer_bos_id(const txc_tokenizer *t) { return t ? t->bos_id : -1; }
