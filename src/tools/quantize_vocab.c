/*
 * The tokenizer of a Hugging Face folder as GGUF's tokenizer.ggml.* (gguf-py's
 * _set_vocab_gpt2 and SpecialVocab for byte-level BPE; for a SentencePiece-
 * style BPE the scores derived from the merges): see quantize_vocab.h.
 */
#include "tools/quantize_vocab.h"
#include "txc/vocab.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void quantize_vocab_free(quantize_vocab *v)
{
    for (int64_t i = 0; v->tokens && i < v->n; i++)
        free(v->tokens[i]);
    for (size_t i = 0; v->merges && i < v->n_merges; i++)
        free(v->merges[i]);
    free(v->tokens), free(v->types), free(v->scores), free(v->merges), free(v->chat_template);
    memset(v, 0, sizeof *v);
}

static char *dup(const char *s)
{
    char *d = malloc(strlen(s) + 1);
    if (d)
        strcpy(d, s);
    return d;
}

static cJSON *load_json(const char *dir, const char *name, bool required)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (required)
            txc_error(TXC_ERR_IO, "quantize: cannot open %s", path);
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;
    size_t got = text ? fread(text, 1, (size_t)n, f) : 0;
    fclose(f);
    cJSON *j = NULL;
    if (text && got == (size_t)n) {
        text[n] = 0;
        j = cJSON_ParseWithLength(text, (size_t)n);
    }
    free(text);
    if (!j)
        txc_error(TXC_ERR_FORMAT, "quantize: %s is not valid JSON", path);
    return j;
}


static bool is_type(const cJSON *o, const char *t)
{
    const cJSON *ty = cJSON_GetObjectItem(o, "type");
    return cJSON_IsString(ty) && strcmp(ty->valuestring, t) == 0;
}

/* llama.cpp's tokenizer.ggml.pre for the pre-tokenizers it knows (convert_hf_to_gguf's
 * get_vocab_base_pre picks the name by the ids of a test text; here by the structure). */
static const char *pre_name(const cJSON *tj)
{
    const cJSON *pt = cJSON_GetObjectItem(tj, "pre_tokenizer"), *norm = cJSON_GetObjectItem(tj, "normalizer");
    if (is_type(pt, "ByteLevel"))
        return "gpt-2";
    if (!is_type(pt, "Sequence"))
        return NULL;
    const cJSON *list = cJSON_GetObjectItem(pt, "pretokenizers");
    int n = cJSON_GetArraySize(list);
    const cJSON *a = cJSON_GetArrayItem(list, 0), *b = cJSON_GetArrayItem(list, 1);
    if (n == 2 && is_type(a, "Digits") && cJSON_IsTrue(cJSON_GetObjectItem(a, "individual_digits")) &&
        is_type(b, "ByteLevel"))
        return "smollm";
    if (n == 2 && is_type(a, "Split") && is_type(b, "ByteLevel")) {
        const cJSON *re = cJSON_GetObjectItem(cJSON_GetObjectItem(a, "pattern"), "Regex");
        if (cJSON_IsString(re) && strcmp(re->valuestring, TXC_LLAMA3_SPLIT_RE) == 0 &&
            (!norm || cJSON_IsNull(norm)))
            return "llama-bpe";
        if (cJSON_IsString(re) && strcmp(re->valuestring, TXC_QWEN2_SPLIT_RE) == 0 && is_type(norm, "NFC"))
            return "qwen2";
    }
    return NULL;
}

/* ---- a string -> id map over the tokens ----------------------------------------------- */

/* The map of v's tokens (txc/vocab.h); a string twice is refused (llama.cpp's
 * llama_vocab::load asserts each token is its own map entry). *lens is
 * malloc'd (the map borrows it). */
static txc_status vocab_map(txc_vocab_map *m, size_t **lens, const quantize_vocab *v, const char *dir)
{
    memset(m, 0, sizeof *m);
    if (!(*lens = malloc(sizeof **lens * (size_t)(v->n ? v->n : 1))))
        return txc_error(TXC_ERR_NOMEM, "quantize: out of memory (vocabulary)");
    for (int64_t k = 0; k < v->n; k++)
        (*lens)[k] = strlen(v->tokens[k]);
    txc_status s = txc_vocab_map_init(m, (const char *const *)v->tokens, *lens, v->n);
    for (int64_t k = 0; !s && k < v->n; k++) {
        int64_t first = txc_vocab_map_get(m, v->tokens[k], (*lens)[k]);
        if (first != k)
            s = txc_error(TXC_ERR_FORMAT, "quantize: %s/tokenizer.json: ids %lld and %lld are both the token "
                                          "'%.64s' (llama.cpp cannot load a vocabulary with a string twice)",
                          dir, (long long)first, (long long)k, v->tokens[k]);
    }
    if (s)
        txc_vocab_map_free(m);
    return s;
}

/* ---- tokens and their types ------------------------------------------------------------- */

static bool is_byte_token(const char *s)
{
    static const char hex[] = "0123456789ABCDEFabcdef";
    return strlen(s) == 6 && !strncmp(s, "<0x", 3) && s[5] == '>' && strchr(hex, s[3]) && strchr(hex, s[4]);
}

/* The vocab (ids < vocab_size) and the added tokens; types: normal, control
 * (special added), user-defined (other added); for a SentencePiece model
 * also byte (<0xNN>) and unknown (the model's unk_token). */
static txc_status fill_tokens(const cJSON *tj, const txc_hf_config *c, bool spm, quantize_vocab *v)
{
    const cJSON *model = cJSON_GetObjectItem(tj, "model"), *vj = cJSON_GetObjectItem(model, "vocab");
    v->n = c->vocab_size;
    v->tokens = calloc((size_t)v->n, sizeof *v->tokens);
    v->types = calloc((size_t)v->n, sizeof *v->types);
    if (!v->tokens || !v->types)
        return txc_error(TXC_ERR_NOMEM, "quantize: out of memory (vocabulary)");
    const cJSON *e;
    cJSON_ArrayForEach(e, vj)
    {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= (double)v->n)
            continue; /* ids past vocab_size: cut, as the embedding has no row for them */
        int64_t id = (int64_t)e->valuedouble;
        free(v->tokens[id]);
        v->tokens[id] = dup(e->string);
        v->types[id] = spm && is_byte_token(e->string) ? 6 /* BYTE */ : 1 /* NORMAL */;
    }
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(tj, "added_tokens"))
    {
        const cJSON *id = cJSON_GetObjectItem(e, "id"), *content = cJSON_GetObjectItem(e, "content");
        if (!cJSON_IsNumber(id) || !cJSON_IsString(content) || id->valuedouble < 0 || id->valuedouble >= (double)v->n)
            continue;
        int64_t i = (int64_t)id->valuedouble;
        free(v->tokens[i]);
        v->tokens[i] = dup(content->valuestring);
        v->types[i] = cJSON_IsTrue(cJSON_GetObjectItem(e, "special")) ? 3 : 4; /* CONTROL / USER_DEFINED */
    }
    for (int64_t i = 0; i < v->n; i++)
        if (!v->tokens[i]) {
            char pad[32];
            snprintf(pad, sizeof pad, "[PAD%lld]", (long long)i);
            v->tokens[i] = dup(pad);
            v->types[i] = 5; /* UNUSED */
        }
    for (int64_t i = 0; i < v->n; i++)
        if (!v->tokens[i])
            return txc_error(TXC_ERR_NOMEM, "quantize: out of memory (vocabulary)");
    v->unk_id = -1;
    const cJSON *unk = cJSON_GetObjectItem(model, "unk_token");
    if (spm && cJSON_IsString(unk))
        for (int64_t i = 0; i < v->n; i++)
            if (strcmp(v->tokens[i], unk->valuestring) == 0) {
                v->unk_id = i;
                v->types[i] = 2; /* UNKNOWN */
                break;
            }
    return TXC_OK;
}

/* A merge of tokenizer.json ("a b" or ["a", "b"]) into its two halves (borrowed). */
static bool merge_pair(const cJSON *e, const char **a, size_t *na, const char **b)
{
    if (cJSON_IsString(e)) {
        const char *sp = strchr(e->valuestring, ' ');
        if (!sp || strchr(sp + 1, ' '))
            return false;
        *a = e->valuestring, *na = (size_t)(sp - e->valuestring), *b = sp + 1;
        return true;
    }
    if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 && cJSON_IsString(cJSON_GetArrayItem(e, 0)) &&
        cJSON_IsString(cJSON_GetArrayItem(e, 1))) {
        *a = cJSON_GetArrayItem(e, 0)->valuestring, *na = strlen(*a), *b = cJSON_GetArrayItem(e, 1)->valuestring;
        return true;
    }
    return false;
}

/* ---- byte-level BPE -------------------------------------------------------------------- */

static txc_status bpe_merges(const char *dir, const cJSON *mj, quantize_vocab *v)
{
    v->merges = calloc((size_t)cJSON_GetArraySize(mj) + 1, sizeof *v->merges);
    if (!v->merges)
        return txc_error(TXC_ERR_NOMEM, "quantize: out of memory (merges)");
    const cJSON *e;
    cJSON_ArrayForEach(e, mj)
    {
        const char *a, *b;
        size_t na;
        if (!merge_pair(e, &a, &na, &b))
            return txc_error(TXC_ERR_FORMAT, "quantize: %s/tokenizer.json: a merge is neither \"a b\" nor [a, b]", dir);
        char *m = malloc(na + strlen(b) + 2);
        if (!m)
            return txc_error(TXC_ERR_NOMEM, "quantize: out of memory (merges)");
        sprintf(m, "%.*s %s", (int)na, a, b);
        v->merges[v->n_merges++] = m;
    }
    return TXC_OK;
}

/* ---- SentencePiece-style BPE ------------------------------------------------------------- */

/* byte_fallback BPE, the normalizer Prepend("▁") + Replace(" " -> "▁"), no
 * pre-tokenizer: what transformers' LlamaConverter writes (legacy), and what
 * its GGUF converter (and txc's GGUF reader) rebuild from tokenizer.ggml.model
 * llama with add_space_prefix. */
static bool is_spm(const cJSON *tj)
{
    const cJSON *model = cJSON_GetObjectItem(tj, "model"), *norm = cJSON_GetObjectItem(tj, "normalizer");
    const cJSON *pt = cJSON_GetObjectItem(tj, "pre_tokenizer");
    if (!is_type(model, "BPE") || !cJSON_IsTrue(cJSON_GetObjectItem(model, "byte_fallback")) ||
        (pt && !cJSON_IsNull(pt)) || !is_type(norm, "Sequence"))
        return false;
    const cJSON *list = cJSON_GetObjectItem(norm, "normalizers");
    const cJSON *a = cJSON_GetArrayItem(list, 0), *b = cJSON_GetArrayItem(list, 1);
    const cJSON *prep = cJSON_GetObjectItem(a, "prepend"), *pat = cJSON_GetObjectItem(b, "pattern");
    const cJSON *from = cJSON_GetObjectItem(pat, "String"), *to = cJSON_GetObjectItem(b, "content");
    return cJSON_GetArraySize(list) == 2 && is_type(a, "Prepend") && cJSON_IsString(prep) &&
           strcmp(prep->valuestring, "\xe2\x96\x81") == 0 && is_type(b, "Replace") && cJSON_IsString(from) &&
           strcmp(from->valuestring, " ") == 0 && cJSON_IsString(to) && strcmp(to->valuestring, "\xe2\x96\x81") == 0;
}

/* Scores from the merges' ranks; refused unless the scores give the merges back. */
static txc_status spm_scores(const char *dir, const cJSON *mj, quantize_vocab *v, const txc_vocab_map *m)
{
    int64_t n_merges = cJSON_GetArraySize(mj);
    if (n_merges >= (1 << 24))
        return txc_error(TXC_ERR_UNSUPPORTED, "quantize: %s/tokenizer.json has %lld merges (scores are float32: "
                                              "at most 2^24 ranks)", dir, (long long)n_merges);
    int64_t *first = malloc(sizeof(int64_t) * (size_t)v->n);
    txc_spm_merge *want = malloc(sizeof *want * (size_t)(n_merges + 1));
    v->scores = calloc((size_t)v->n, sizeof *v->scores);
    txc_status s = first && want && v->scores ? TXC_OK : txc_error(TXC_ERR_NOMEM, "quantize: out of memory (scores)");
    for (int64_t i = 0; !s && i < v->n; i++)
        first[i] = -1;
    int64_t rank = 0;
    const cJSON *e;
    char *cat = NULL;
    cJSON_ArrayForEach(e, mj)
    {
        if (s)
            break;
        const char *a, *b;
        size_t na;
        if (!merge_pair(e, &a, &na, &b)) {
            s = txc_error(TXC_ERR_FORMAT, "quantize: %s/tokenizer.json: a merge is neither \"a b\" nor [a, b]", dir);
            break;
        }
        size_t nb = strlen(b);
        char *p = realloc(cat, na + nb + 1);
        if (!p) {
            s = txc_error(TXC_ERR_NOMEM, "quantize: out of memory (scores)");
            break;
        }
        cat = p;
        memcpy(cat, a, na), memcpy(cat + na, b, nb + 1);
        int64_t l = txc_vocab_map_get(m, a, na), r = txc_vocab_map_get(m, b, nb), t = txc_vocab_map_get(m, cat, na + nb);
        if (l < 0 || r < 0 || t < 0) {
            s = txc_error(TXC_ERR_FORMAT, "quantize: %s/tokenizer.json: merge %lld ('%.*s' + '%.64s') %s", dir,
                          (long long)rank, (int)(na > 64 ? 64 : na), a, b,
                          t < 0 ? "makes a string that is not a token" : "has a half that is not a token");
            break;
        }
        if (first[t] < 0)
            first[t] = rank;
        want[rank++] = (txc_spm_merge){0, t, l, r};
    }
    free(cat);
    for (int64_t i = 0; !s && i < v->n; i++)
        v->scores[i] = first[i] >= 0 ? -(float)(first[i] + 1) : 0.0f;
    /* what a reader of the GGUF derives: every split of every token into two tokens, in the scores' order */
    txc_spm_merge *got = NULL;
    size_t n_got = 0;
    if (!s)
        s = txc_spm_merges(m, v->scores, &got, &n_got);
    if (!s) {
        size_t i = 0;
        while (i < n_got && i < (size_t)rank && got[i].id == want[i].id && got[i].left == want[i].left &&
               got[i].right == want[i].right)
            i++;
        if (i < n_got || i < (size_t)rank) {
            const txc_spm_merge *x = i < (size_t)rank ? &want[i] : NULL, *y = i < n_got ? &got[i] : NULL;
            s = txc_error(TXC_ERR_UNSUPPORTED,
                          "quantize: %s/tokenizer.json: its merges are not a SentencePiece model's (merge %zu is "
                          "%s%.32s%s%.32s%s, the pieces' scores would make it %s%.32s%s%.32s%s): tokenizer.ggml.model "
                          "llama cannot hold them", dir, i, x ? "'" : "", x ? v->tokens[x->left] : "none",
                          x ? "' + '" : "", x ? v->tokens[x->right] : "", x ? "'" : "", y ? "'" : "",
                          y ? v->tokens[y->left] : "none", y ? "' + '" : "", y ? v->tokens[y->right] : "", y ? "'" : "");
        }
    }
    free(got);
    free(first);
    free(want);
    return s;
}

/* ---- the folder ---------------------------------------------------------------------------- */

txc_status quantize_vocab_load(const char *dir, const txc_hf_config *c, quantize_vocab *v)
{
    memset(v, 0, sizeof *v);
    v->add_bos = v->add_eos = -1;
    v->unk_id = -1;
    cJSON *tj = load_json(dir, "tokenizer.json", true);
    if (!tj)
        return txc_last_status();
    cJSON *tc = load_json(dir, "tokenizer_config.json", false);
    txc_status s = TXC_OK;
    txc_vocab_map m = {0};
    size_t *lens = NULL;
    const cJSON *model = cJSON_GetObjectItem(tj, "model");
    const cJSON *vj = cJSON_GetObjectItem(model, "vocab"), *mj = cJSON_GetObjectItem(model, "merges");
    bool spm = is_spm(tj);
    if (!is_type(model, "BPE") || !cJSON_IsObject(vj) || !cJSON_IsArray(mj) ||
        (!spm && cJSON_IsTrue(cJSON_GetObjectItem(model, "byte_fallback")))) {
        s = txc_error(TXC_ERR_UNSUPPORTED, "quantize: %s/tokenizer.json is neither a byte-level BPE nor a "
                                           "SentencePiece-style BPE (byte_fallback, normalizer Prepend(\"\xe2\x96\x81\") + "
                                           "Replace(\" \", \"\xe2\x96\x81\")); not converted", dir);
        goto out;
    }
    v->model = spm ? "llama" : "gpt2";
    if (!spm && !(v->pre = pre_name(tj))) {
        s = txc_error(TXC_ERR_UNSUPPORTED, "quantize: %s/tokenizer.json: its pre-tokenizer is none llama.cpp "
                                           "names here (supported: gpt-2, smollm, llama-bpe, qwen2)", dir);
        goto out;
    }
    if ((s = fill_tokens(tj, c, spm, v)) || (s = vocab_map(&m, &lens, v, dir)))
        goto out;
    if ((s = spm ? spm_scores(dir, mj, v, &m) : bpe_merges(dir, mj, v)))
        goto out;
    if (tc) {
        const cJSON *ct = cJSON_GetObjectItem(tc, "chat_template"), *ab = cJSON_GetObjectItem(tc, "add_bos_token");
        const cJSON *ae = cJSON_GetObjectItem(tc, "add_eos_token");
        if (cJSON_IsString(ct) && !(v->chat_template = dup(ct->valuestring)))
            s = txc_error(TXC_ERR_NOMEM, "quantize: out of memory");
        if (cJSON_IsBool(ab))
            v->add_bos = cJSON_IsTrue(ab);
        if (cJSON_IsBool(ae))
            v->add_eos = cJSON_IsTrue(ae);
    }
out:
    txc_vocab_map_free(&m);
    free(lens);
    cJSON_Delete(tj);
    cJSON_Delete(tc);
    if (s)
        quantize_vocab_free(v);
    return s;
}

txc_status quantize_vocab_write(txc_gguf_writer *w, const quantize_vocab *v, const txc_hf_config *c)
{
    bool spm = strcmp(v->model, "llama") == 0;
    txc_status s = txc_gguf_w_str(w, "tokenizer.ggml.model", v->model);
    if (!s && v->pre) s = txc_gguf_w_str(w, "tokenizer.ggml.pre", v->pre);
    if (!s) s = txc_gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->tokens, (size_t)v->n);
    if (!s && spm) s = txc_gguf_w_arr_f32(w, "tokenizer.ggml.scores", v->scores, (size_t)v->n);
    if (!s) s = txc_gguf_w_arr_i32(w, "tokenizer.ggml.token_type", v->types, (size_t)v->n);
    if (!s && !spm) s = txc_gguf_w_arr_str(w, "tokenizer.ggml.merges", (const char *const *)v->merges, v->n_merges);
    if (!s && c->bos_token_id >= 0 && c->bos_token_id < c->vocab_size)
        s = txc_gguf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)c->bos_token_id);
    if (!s && c->n_eos > 0 && c->eos_token_id[0] >= 0 && c->eos_token_id[0] < c->vocab_size)
        s = txc_gguf_w_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)c->eos_token_id[0]);
    if (!s && spm && v->unk_id >= 0) s = txc_gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)v->unk_id);
    if (!s && c->pad_token_id >= 0 && c->pad_token_id < c->vocab_size)
        s = txc_gguf_w_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)c->pad_token_id);
    if (!s && v->add_bos >= 0) s = txc_gguf_w_bool(w, "tokenizer.ggml.add_bos_token", v->add_bos != 0);
    if (!s && v->add_eos >= 0) s = txc_gguf_w_bool(w, "tokenizer.ggml.add_eos_token", v->add_eos != 0);
    if (!s && spm) s = txc_gguf_w_bool(w, "tokenizer.ggml.add_space_prefix", true); /* the Prepend("▁") */
    if (!s && v->chat_template) s = txc_gguf_w_str(w, "tokenizer.chat_template", v->chat_template);
    return s;
}
