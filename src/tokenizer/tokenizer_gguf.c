/*
 * The tokenizer of a GGUF file (its tokenizer.ggml.* metadata) as the
 * tokenizer.json that transformers builds from it (integrations/ggml.py:
 * GGUFLlamaConverter, GGUFGPTConverter, GGUFQwen2Converter), handed to the
 * tokenizer.json loader:
 *   tokenizer.ggml.model "llama"  SentencePiece-style BPE with byte fallback:
 *       vocab = tokens, the merges generated from the scores as
 *       SentencePieceExtractor.extract does (every split of every token into
 *       two tokens, ordered by the token's score, descending, then by the
 *       parts' ids), normalizer Prepend("▁") + Replace(" ", "▁"), decoder
 *       Replace("▁", " ") + ByteFallback + Fuse + Strip(1 leading space)
 *       (no Prepend and no Strip when tokenizer.ggml.add_space_prefix is
 *       false);
 *   tokenizer.ggml.model "gpt2"   byte-level BPE: tokens and
 *       tokenizer.ggml.merges, the pre-tokenizer of tokenizer.ggml.pre
 *       (llama.cpp's llama-vocab.cpp names mapped to the Hugging Face
 *       tokenizer.json of the same models; see PRE below), ByteLevel decoder.
 * Token types (llama.cpp's LLAMA_TOKEN_TYPE_*): UNKNOWN (2) and CONTROL (3)
 * become special added tokens, USER_DEFINED (4) added tokens that are not
 * special. bos_token_id with add_bos_token (default: true for llama, false
 * for gpt2, as llama.cpp) makes a TemplateProcessing post-processor.
 */
#include "tokenizer/tokenizer_impl.h"
#include "txc/gguf.h"
#include "txc/vocab.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cJSON *str_n(const txc_gguf_str *s)
{
    char *p = malloc((size_t)s->len + 1);
    if (!p)
        return NULL;
    memcpy(p, s->data, (size_t)s->len);
    p[s->len] = 0;
    cJSON *j = cJSON_CreateString(p);
    free(p);
    return j;
}

static char *cstr(const txc_gguf_str *s)
{
    char *p = malloc((size_t)s->len + 1);
    if (p) {
        memcpy(p, s->data, (size_t)s->len);
        p[s->len] = 0;
    }
    return p;
}

/* SentencePieceExtractor.extract's merges from the scores (txc/vocab.h). */
static txc_status spm_merges(const txc_gguf_value *tok, const txc_gguf_value *scores, const txc_vocab_map *vm,
                             cJSON *out)
{
    float *sc = malloc(sizeof *sc * (size_t)(vm->n ? vm->n : 1));
    if (!sc)
        return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory (GGUF merges)");
    for (int64_t k = 0; k < vm->n; k++)
        sc[k] = scores ? (float)txc_gguf_array_f64(scores, (uint64_t)k) : -(float)k;
    txc_spm_merge *ms;
    size_t cnt;
    txc_status s = txc_spm_merges(vm, sc, &ms, &cnt);
    free(sc);
    for (size_t i = 0; i < cnt && !s; i++) {
        cJSON *pair = cJSON_CreateArray();
        if (!pair || !cJSON_AddItemToArray(out, pair) || !cJSON_AddItemToArray(pair, str_n(&tok[ms[i].left].v.str)) ||
            !cJSON_AddItemToArray(pair, str_n(&tok[ms[i].right].v.str)))
            s = txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory (GGUF merges)");
    }
    free(ms);
    return s;
}

/* tokenizer.ggml.pre (llama-vocab.cpp's names) -> the Hugging Face pre-tokenizer and normalizer. */
typedef struct pre_map {
    const char *names;   /* space-separated */
    const char *regex;   /* Split(regex, Isolated) + ByteLevel(use_regex false); NULL: ByteLevel(use_regex) */
    bool digits;         /* Digits(individual_digits) first (SmolLM) */
    bool nfc;            /* NFC normalizer (Qwen2) */
    bool ignore_merges;  /* the BPE model's ignore_merges (Llama 3) */
} pre_map;


static const pre_map PRE[] = {
    {"gpt-2 gpt2 phi-2 jina-es jina-de jina-v2-es jina-v2-de roberta-bpe", NULL, false, false, false},
    {"smollm", NULL, true, false, false},
    {"llama3 llama-v3 llama-bpe smaug-bpe dbrx falcon3 pixtral", TXC_LLAMA3_SPLIT_RE, false, false, true},
    {"qwen2 deepseek-r1-qwen", TXC_QWEN2_SPLIT_RE, false, true, false},
};
#define PRE_NAMES "gpt-2, smollm, llama-bpe (llama3), qwen2 and their aliases"

static const pre_map *find_pre(const txc_gguf_str *s)
{
    for (size_t i = 0; i < sizeof PRE / sizeof *PRE; i++)
        for (const char *p = PRE[i].names; *p;) {
            size_t n = strcspn(p, " ");
            if (n == s->len && memcmp(p, s->data, n) == 0)
                return &PRE[i];
            p += n + (p[n] == ' ');
        }
    return NULL;
}

static cJSON *obj_type(const char *type)
{
    cJSON *o = cJSON_CreateObject();
    if (o)
        cJSON_AddStringToObject(o, "type", type);
    return o;
}

static cJSON *byte_level(bool use_regex)
{
    cJSON *o = obj_type("ByteLevel");
    cJSON_AddBoolToObject(o, "add_prefix_space", false);
    cJSON_AddBoolToObject(o, "trim_offsets", false);
    cJSON_AddBoolToObject(o, "use_regex", use_regex);
    return o;
}

static cJSON *replace(const char *pattern, const char *content)
{
    cJSON *o = obj_type("Replace");
    cJSON_AddItemToObject(o, "pattern", cJSON_CreateObject());
    cJSON_AddStringToObject(cJSON_GetObjectItem(o, "pattern"), "String", pattern);
    cJSON_AddStringToObject(o, "content", content);
    return o;
}

static txc_status build(const txc_gguf *g, cJSON *root)
{
    const char *path = txc_gguf_path(g);
    txc_gguf_str model;
    bool bad = false;
    if (!txc_gguf_get_str(g, "tokenizer.ggml.model", &model, &bad))
        return bad ? txc_last_status()
                   : txc_error(TXC_ERR_FORMAT, "%s: no tokenizer.ggml.model in the metadata (no tokenizer)", path);
    bool spm = model.len == 5 && memcmp(model.data, "llama", 5) == 0;
    bool bpe = model.len == 4 && memcmp(model.data, "gpt2", 4) == 0;
    if (!spm && !bpe)
        return txc_error(TXC_ERR_UNSUPPORTED, "%s: tokenizer.ggml.model '%.*s' is not supported (supported: llama, "
                                              "gpt2)", path, (int)(model.len > 32 ? 32 : model.len), model.data);
    const pre_map *pre = NULL;
    if (bpe) {
        txc_gguf_str p = {"gpt-2", 5};
        if (!txc_gguf_get_str(g, "tokenizer.ggml.pre", &p, &bad) && bad)
            return txc_last_status();
        if (!(pre = find_pre(&p)))
            return txc_error(TXC_ERR_UNSUPPORTED, "%s: tokenizer.ggml.pre '%.*s' is not supported (supported: "
                                                  PRE_NAMES ")", path, (int)(p.len > 32 ? 32 : p.len), p.data);
    }
    const txc_gguf_value *tok = txc_gguf_find(g, "tokenizer.ggml.tokens");
    if (!tok || tok->type != TXC_GGUF_ARRAY || tok->v.arr.type != TXC_GGUF_STRING || tok->v.arr.n == 0)
        return txc_error(TXC_ERR_FORMAT, "%s: tokenizer.ggml.tokens is %s (expected a non-empty array of strings)",
                         path, tok ? "not an array of strings" : "missing");
    uint64_t n = tok->v.arr.n;
    if (n > INT32_MAX)
        return txc_error(TXC_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %" PRIu64 " tokens (more than int32 ids)", path,
                         n);
    const txc_gguf_value *items = tok->v.arr.items;
    const txc_gguf_value *scores = txc_gguf_find(g, "tokenizer.ggml.scores");
    const txc_gguf_value *types = txc_gguf_find(g, "tokenizer.ggml.token_type");
    static const char *const arr_keys[] = {"tokenizer.ggml.scores", "tokenizer.ggml.token_type"};
    const txc_gguf_value *arrs[] = {scores, types};
    for (int i = 0; i < 2; i++)
        if (arrs[i] && (arrs[i]->type != TXC_GGUF_ARRAY || arrs[i]->v.arr.n != n || !arrs[i]->v.arr.data))
            return txc_error(TXC_ERR_FORMAT, "%s: %s is not an array of %" PRIu64 " numbers (one per token)", path,
                             arr_keys[i], n);
    if (spm && !scores)
        return txc_error(TXC_ERR_FORMAT, "%s: tokenizer.ggml.model llama needs tokenizer.ggml.scores", path);
    for (uint64_t k = 0; k < n; k++)
        if (memchr(items[k].v.str.data, 0, (size_t)items[k].v.str.len))
            return txc_error(TXC_ERR_UNSUPPORTED, "%s: token %" PRIu64 " holds a NUL byte", path, k);

    /* the pieces as (bytes, length) for the map (txc/vocab.h) */
    const char **pieces = malloc(sizeof *pieces * (size_t)n);
    size_t *lens = malloc(sizeof *lens * (size_t)n);
    txc_vocab_map vm = {0};
    txc_status s = pieces && lens ? TXC_OK : txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory (GGUF vocab)");
    for (uint64_t k = 0; !s && k < n; k++)
        pieces[k] = items[k].v.str.data, lens[k] = (size_t)items[k].v.str.len;
    if (!s)
        s = txc_vocab_map_init(&vm, pieces, lens, (int64_t)n);
    if (s) {
        free(pieces), free(lens);
        return s;
    }
    /* A string twice: llama.cpp's llama_vocab::load asserts that every token
     * is its own map entry (and aborts); the ids of the second one would be
     * unreachable. Empty tokens are not compared (llama.cpp names each
     * "[EMPTY_<id>]"). */
    for (uint64_t k = 0; k < n; k++) {
        const txc_gguf_str *t = &items[k].v.str;
        int64_t first = t->len ? txc_vocab_map_get(&vm, t->data, (size_t)t->len) : (int64_t)k;
        if (first != (int64_t)k) {
            char shown[4 * 64 + 4]; /* the first 64 bytes, control bytes as \xNN (one line) */
            size_t at = 0;
            for (uint64_t i = 0; i < t->len && i < 64; i++) {
                unsigned char ch = (unsigned char)t->data[i];
                at += (size_t)snprintf(shown + at, sizeof shown - at, ch < 0x20 || ch == 0x7f ? "\\x%02x" : "%c", ch);
            }
            snprintf(shown + at, sizeof shown - at, "%s", t->len > 64 ? "..." : "");
            txc_vocab_map_free(&vm);
            free(pieces), free(lens);
            return txc_error(TXC_ERR_FORMAT, "%s: tokenizer.ggml.tokens has the string '%s' at ids %" PRId64
                                             " and %" PRIu64 " (each token's string must be its own)",
                             path, shown, first, k);
        }
    }
    cJSON_AddStringToObject(root, "version", "1.0");
    cJSON *m = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(m, "type", "BPE");
    cJSON *vocab = cJSON_AddObjectToObject(m, "vocab");
    for (uint64_t k = 0; k < n; k++) {
        if (txc_vocab_map_get(&vm, items[k].v.str.data, (size_t)items[k].v.str.len) != (int64_t)k)
            continue; /* a string twice: its first id (the vocab is a map) */
        char *key = cstr(&items[k].v.str);
        if (!key || !cJSON_AddItemToObject(vocab, key, cJSON_CreateNumber((double)k))) {
            free(key);
            s = txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory (GGUF vocab)");
            break;
        }
        free(key);
    }
    cJSON *merges = cJSON_AddArrayToObject(m, "merges");
    if (!s && spm) {
        s = spm_merges(items, scores, &vm, merges);
    } else if (!s) {
        const txc_gguf_value *mg = txc_gguf_find(g, "tokenizer.ggml.merges");
        if (!mg || mg->type != TXC_GGUF_ARRAY || mg->v.arr.type != TXC_GGUF_STRING)
            s = txc_error(TXC_ERR_FORMAT, "%s: tokenizer.ggml.merges is %s (expected an array of strings)", path,
                          mg ? "not an array of strings" : "missing");
        for (uint64_t k = 0; !s && k < mg->v.arr.n; k++) {
            cJSON *j = str_n(&mg->v.arr.items[k].v.str);
            if (!j || !cJSON_AddItemToArray(merges, j))
                s = txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory (GGUF merges)");
        }
    }
    txc_vocab_map_free(&vm);
    free(pieces), free(lens);
    if (s)
        return s;
    int64_t unk = -1, bos = -1;
    if (!txc_gguf_get_i64(g, "tokenizer.ggml.unknown_token_id", &unk, &bad))
        unk = -1;
    if (!txc_gguf_get_i64(g, "tokenizer.ggml.bos_token_id", &bos, &bad))
        bos = -1;
    bool add_bos = spm, prefix = true;
    txc_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos, &bad);
    txc_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &prefix, &bad);
    if (bad)
        return txc_last_status();
    if (unk >= (int64_t)n || bos >= (int64_t)n)
        return txc_error(TXC_ERR_FORMAT, "%s: tokenizer.ggml.%s %" PRId64 " is not a token id (%" PRIu64 " tokens)", path,
                         unk >= (int64_t)n ? "unknown_token_id" : "bos_token_id", unk >= (int64_t)n ? unk : bos, n);
    if (spm) {
        if (unk >= 0)
            cJSON_AddItemToObject(m, "unk_token", str_n(&items[unk].v.str));
        cJSON_AddBoolToObject(m, "fuse_unk", true);
        cJSON_AddBoolToObject(m, "byte_fallback", true);
        cJSON *norm = obj_type("Sequence");
        cJSON *list = cJSON_AddArrayToObject(norm, "normalizers");
        if (prefix) { /* tokenizer.ggml.add_space_prefix (default true): GGUFLlamaConverter's add_prefix_space */
            cJSON *prep = obj_type("Prepend");
            cJSON_AddStringToObject(prep, "prepend", "\xe2\x96\x81");
            cJSON_AddItemToArray(list, prep);
        }
        cJSON_AddItemToArray(list, replace(" ", "\xe2\x96\x81"));
        cJSON_AddItemToObject(root, "normalizer", norm);
        cJSON_AddNullToObject(root, "pre_tokenizer");
        cJSON *dec = obj_type("Sequence");
        cJSON *dl = cJSON_AddArrayToObject(dec, "decoders");
        cJSON_AddItemToArray(dl, replace("\xe2\x96\x81", " "));
        cJSON_AddItemToArray(dl, obj_type("ByteFallback"));
        cJSON_AddItemToArray(dl, obj_type("Fuse"));
        if (prefix) {
            cJSON *strip = obj_type("Strip");
            cJSON_AddStringToObject(strip, "content", " ");
            cJSON_AddNumberToObject(strip, "start", 1);
            cJSON_AddNumberToObject(strip, "stop", 0);
            cJSON_AddItemToArray(dl, strip);
        }
        cJSON_AddItemToObject(root, "decoder", dec);
    } else {
        cJSON_AddBoolToObject(m, "ignore_merges", pre->ignore_merges);
        if (pre->nfc)
            cJSON_AddItemToObject(root, "normalizer", obj_type("NFC"));
        cJSON *pt;
        if (pre->regex || pre->digits) {
            pt = obj_type("Sequence");
            cJSON *list = cJSON_AddArrayToObject(pt, "pretokenizers");
            if (pre->digits) {
                cJSON *d = obj_type("Digits");
                cJSON_AddBoolToObject(d, "individual_digits", true);
                cJSON_AddItemToArray(list, d);
            }
            if (pre->regex) {
                cJSON *sp = obj_type("Split");
                cJSON_AddItemToObject(sp, "pattern", cJSON_CreateObject());
                cJSON_AddStringToObject(cJSON_GetObjectItem(sp, "pattern"), "Regex", pre->regex);
                cJSON_AddStringToObject(sp, "behavior", "Isolated");
                cJSON_AddBoolToObject(sp, "invert", false);
                cJSON_AddItemToArray(list, sp);
            }
            cJSON_AddItemToArray(list, byte_level(!pre->regex));
        } else {
            pt = byte_level(true);
        }
        cJSON_AddItemToObject(root, "pre_tokenizer", pt);
        cJSON_AddItemToObject(root, "decoder", byte_level(true));
    }
    if (add_bos && bos >= 0) {
        cJSON *pp = obj_type("TemplateProcessing");
        cJSON *single = cJSON_AddArrayToObject(pp, "single");
        cJSON *st = cJSON_CreateObject(), *sq = cJSON_CreateObject();
        cJSON *sti = cJSON_AddObjectToObject(st, "SpecialToken"), *sqi = cJSON_AddObjectToObject(sq, "Sequence");
        cJSON_AddItemToObject(sti, "id", str_n(&items[bos].v.str));
        cJSON_AddNumberToObject(sti, "type_id", 0);
        cJSON_AddStringToObject(sqi, "id", "A");
        cJSON_AddNumberToObject(sqi, "type_id", 0);
        cJSON_AddItemToArray(single, st);
        cJSON_AddItemToArray(single, sq);
        cJSON *sp = cJSON_AddObjectToObject(pp, "special_tokens");
        char *bname = cstr(&items[bos].v.str);
        cJSON *e = cJSON_AddObjectToObject(sp, bname ? bname : "");
        cJSON_AddItemToObject(e, "id", str_n(&items[bos].v.str));
        cJSON *ids = cJSON_AddArrayToObject(e, "ids");
        cJSON_AddItemToArray(ids, cJSON_CreateNumber((double)bos));
        cJSON *toks = cJSON_AddArrayToObject(e, "tokens");
        cJSON_AddItemToArray(toks, str_n(&items[bos].v.str));
        free(bname);
        cJSON_AddItemToObject(root, "post_processor", pp);
    } else if (bpe) {
        cJSON_AddItemToObject(root, "post_processor", byte_level(false));
    }
    cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
    for (uint64_t k = 0; types && k < n; k++) {
        int64_t t = txc_gguf_array_i64(types, k);
        if (t != 2 && t != 3 && t != 4)
            continue; /* NORMAL, UNUSED, BYTE: the model's vocab */
        cJSON *a = cJSON_CreateObject();
        cJSON_AddNumberToObject(a, "id", (double)k);
        cJSON_AddItemToObject(a, "content", str_n(&items[k].v.str));
        cJSON_AddBoolToObject(a, "single_word", false);
        cJSON_AddBoolToObject(a, "lstrip", false);
        cJSON_AddBoolToObject(a, "rstrip", false);
        cJSON_AddBoolToObject(a, "normalized", false);
        cJSON_AddBoolToObject(a, "special", t != 4);
        cJSON_AddItemToArray(added, a);
    }
    return TXC_OK;
}

txc_status tk_gguf_tree(const char *path, cJSON **out)
{
    *out = NULL;
    txc_gguf *g;
    txc_status s = txc_gguf_open(path, &g);
    if (s)
        return s;
    cJSON *root = cJSON_CreateObject();
    s = root ? build(g, root) : txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory (GGUF)");
    txc_gguf_close(g);
    if (s) {
        cJSON_Delete(root);
        return s;
    }
    *out = root;
    return TXC_OK;
}
