/*
 * Normalizers, post-processors and decoders of tokenizer.json (the
 * pre-tokenizers are in tokenizer_pretok.c):
 * one parse branch and one apply case per kind, each mirroring the `tokenizers`
 * crate's component of the same name. A JSON "Sequence" is flattened into the
 * tokenizer's array of components of that family.
 */
#include "tokenizer/tokenizer_impl.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GROW(arr, n, tmp)                                                                     \
    do {                                                                                      \
        tmp = realloc((arr), ((n) + 1) * sizeof *(arr));                                      \
        if (!tmp)                                                                             \
            return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");                      \
        (arr) = tmp;                                                                          \
        memset(&(arr)[(n)], 0, sizeof *(arr));                                                \
    } while (0)

/* ---- normalizers ------------------------------------------------------------ */

static txc_status get_size(const cJSON *obj, const char *what, const char *field, size_t *out)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, field);
    if (!cJSON_IsNumber(j) || j->valuedouble < 0 || j->valuedouble > 1e9 ||
        j->valuedouble != floor(j->valuedouble))
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: %s: \"%s\" is not a count", what, field);
    *out = (size_t)j->valuedouble;
    return TXC_OK;
}

/* A Replace's pattern: a non-empty {"String": s} is kept as a string (the
 * fast path), anything else ({"Regex": r}, the empty String) as a regex. */
static txc_status get_replace_pattern(const cJSON *j, const char *what, char **str, size_t *len,
                                      tk_regex **re)
{
    txc_status st = tk_json_pattern(j, what, re, str, len);
    if (!st && *str && *len) {
        tk_regex_free(*re);
        *re = NULL;
    } else if (!st && *str) {
        free(*str);
        *str = NULL;
    }
    return st;
}

static void normalizer_free(tk_normalizer *n)
{
    free(n->a);
    free(n->b);
    tk_regex_free(n->re);
    n->a = n->b = NULL;
    n->re = NULL;
}

txc_status tk_parse_normalizer(txc_tokenizer *t, const cJSON *j)
{
    if (tk_json_is_null(j))
        return TXC_OK;
    const char *type = tk_json_type(j);
    if (!cJSON_IsObject(j) || !type)
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: normalizer without a \"type\"");
    if (!strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(j, "normalizers");
        if (!cJSON_IsArray(list))
            return txc_error(TXC_ERR_FORMAT, "tokenizer.json: normalizer Sequence without a list");
        for (const cJSON *e = list->child; e; e = e->next) {
            txc_status st = tk_parse_normalizer(t, e);
            if (st)
                return st;
        }
        return TXC_OK;
    }
    static const struct {
        const char *name;
        tk_nf form;
    } forms[] = {{"NFC", TK_NFC}, {"NFD", TK_NFD}, {"NFKC", TK_NFKC}, {"NFKD", TK_NFKD}};
    tk_normalizer *tmp, n = {0};
    txc_status st = TXC_OK;
    bool known = false;
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++)
        if (!strcmp(type, forms[i].name)) {
            n.kind = TK_NORM_NF;
            n.form = forms[i].form;
            known = true;
        }
    if (known) {
    } else if (!strcmp(type, "Prepend")) {
        n.kind = TK_NORM_PREPEND;
        st = tk_json_dup_string(cJSON_GetObjectItemCaseSensitive(j, "prepend"),
                                "normalizer Prepend", "prepend", &n.a, &n.a_len);
    } else if (!strcmp(type, "Replace")) {
        n.kind = TK_NORM_REPLACE;
        st = get_replace_pattern(j, "normalizer Replace", &n.a, &n.a_len, &n.re);
        if (!st)
            st = tk_json_dup_string(cJSON_GetObjectItemCaseSensitive(j, "content"),
                                    "normalizer Replace", "content", &n.b, &n.b_len);
    } else if (!strcmp(type, "Strip")) {
        n.kind = TK_NORM_STRIP;
        st = tk_json_bool(j, "normalizer Strip", "strip_left", false, &n.left);
        if (!st)
            st = tk_json_bool(j, "normalizer Strip", "strip_right", false, &n.right);
    } else if (!strcmp(type, "Lowercase")) {
        n.kind = TK_NORM_LOWERCASE;
    } else if (!strcmp(type, "StripAccents")) {
        n.kind = TK_NORM_STRIP_ACCENTS;
    } else {
        return txc_error(TXC_ERR_UNSUPPORTED, "tokenizer.json: normalizer %s not supported",
                         type);
    }
    if (!st) {
        tmp = realloc(t->norm, (t->n_norm + 1) * sizeof *t->norm);
        if (!tmp)
            st = txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
        else
            t->norm = tmp, t->norm[t->n_norm++] = n, n.a = n.b = NULL, n.re = NULL;
    }
    normalizer_free(&n);
    return st;
}

/* Replace every match of re in s[0..n) with `with` (NormalizedString::replace). */
static txc_status replace_regex(const tk_regex *re, const char *s, size_t n, const char *with,
                                size_t wlen, tk_ctx *cx, tk_buf *out)
{
    tk_pattern pat = {.re = (tk_regex *)re, .cc = TK_CC_NONE};
    txc_status st = tk_find_matches(&pat, s, n, false, &cx->rx, &cx->segs);
    for (size_t i = 0; i < cx->segs.n && !st; i++) {
        const tk_seg *g = &cx->segs.v[i];
        st = g->match ? tk_buf_append(out, with, wlen)
                      : tk_buf_append(out, s + g->start, g->end - g->start);
    }
    if (!st)
        st = tk_buf_append(out, "", 0);
    return st;
}

static txc_status normalize_one(const tk_normalizer *nz, tk_buf *b, tk_ctx *cx)
{
    tk_buf out = {0};
    txc_status st = TXC_OK;
    switch (nz->kind) {
    case TK_NORM_PREPEND:
        if (b->n == 0)
            return TXC_OK; /* the crate prepends only to non-empty strings */
        st = tk_buf_append(&out, nz->a, nz->a_len);
        if (!st)
            st = tk_buf_append(&out, b->p, b->n);
        break;
    case TK_NORM_REPLACE:
        if (nz->re) {
            if (b->n == 0)
                return TXC_OK;
            st = replace_regex(nz->re, b->p, b->n, nz->b, nz->b_len, cx, &out);
            break;
        }
        if (b->n < nz->a_len || !tk_memmem(b->p, b->n, nz->a, nz->a_len))
            return TXC_OK;
        st = tk_replace_all(b->p, b->n, nz->a, nz->a_len, nz->b, nz->b_len, &out);
        break;
    case TK_NORM_STRIP: {
        size_t s = 0, e = b->n, cl;
        while (nz->left && s < e) {
            uint32_t cp = tk_utf8_decode(b->p + s, &cl);
            if (!tk_is_whitespace(cp))
                break;
            s += cl;
        }
        while (nz->right && e > s) {
            size_t k = tk_utf8_prev(b->p, e);
            if (k < s)
                break;
            uint32_t cp = tk_utf8_decode(b->p + k, &cl);
            if (!tk_is_whitespace(cp))
                break;
            e = k;
        }
        if (b->p) {
            memmove(b->p, b->p + s, e - s);
            b->n = e - s;
            b->p[b->n] = '\0';
        }
        return TXC_OK;
    }
    case TK_NORM_NF:
        return tk_unicode_normalize(nz->form, b);
    case TK_NORM_LOWERCASE:
        return tk_unicode_lowercase(b);
    case TK_NORM_STRIP_ACCENTS: {
        size_t w = 0;
        for (size_t i = 0; i < b->n;) {
            size_t cl;
            uint32_t cp = tk_utf8_decode(b->p + i, &cl);
            if (!tk_is_mark(cp)) {
                memmove(b->p + w, b->p + i, cl);
                w += cl;
            }
            i += cl;
        }
        b->n = w;
        if (b->p)
            b->p[w] = '\0';
        return TXC_OK;
    }
    }
    if (st) {
        tk_buf_free(&out);
        return st;
    }
    tk_buf_free(b);
    *b = out;
    return TXC_OK;
}

txc_status tk_normalize(const txc_tokenizer *t, tk_buf *b, tk_ctx *cx)
{
    tk_ctx local = {0};
    if (!cx)
        cx = &local;
    txc_status st = TXC_OK;
    for (size_t i = 0; i < t->n_norm && !st; i++)
        st = normalize_one(&t->norm[i], b, cx);
    tk_ctx_free(&local);
    return st;
}

/* ---- post-processors ----------------------------------------------------------- */

static txc_status parse_template(txc_tokenizer *t, const cJSON *j, tk_post *p)
{
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(j, "single");
    const cJSON *specials = cJSON_GetObjectItemCaseSensitive(j, "special_tokens");
    if (cJSON_IsString(single))
        return txc_error(TXC_ERR_UNSUPPORTED,
                         "tokenizer.json: TemplateProcessing with a string template not supported");
    if (!cJSON_IsArray(single))
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: TemplateProcessing without \"single\"");
    for (const cJSON *it = single->child; it; it = it->next) {
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(it, "SpecialToken");
        const cJSON *sq = cJSON_GetObjectItemCaseSensitive(it, "Sequence");
        int32_t *tmp;
        if (cJSON_IsObject(sq)) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(sq, "id");
            if (!cJSON_IsString(id) || strcmp(id->valuestring, "A") != 0)
                return txc_error(TXC_ERR_FORMAT,
                                 "tokenizer.json: TemplateProcessing single template uses a "
                                 "sequence other than A");
            GROW(p->single, p->n_single, tmp);
            p->single[p->n_single++] = -1;
        } else if (cJSON_IsObject(sp)) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(sp, "id");
            const cJSON *tok = cJSON_IsString(id)
                                   ? cJSON_GetObjectItemCaseSensitive(specials, id->valuestring)
                                   : NULL;
            const cJSON *ids = cJSON_GetObjectItemCaseSensitive(tok, "ids");
            if (!cJSON_IsArray(ids))
                return txc_error(TXC_ERR_FORMAT,
                                 "tokenizer.json: TemplateProcessing: special token %s missing "
                                 "from special_tokens",
                                 cJSON_IsString(id) ? id->valuestring : "?");
            for (const cJSON *e = ids->child; e; e = e->next) {
                if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > INT32_MAX ||
                    e->valuedouble != floor(e->valuedouble))
                    return txc_error(TXC_ERR_FORMAT,
                                     "tokenizer.json: TemplateProcessing: bad id for %s",
                                     id->valuestring);
                GROW(p->single, p->n_single, tmp);
                p->single[p->n_single++] = (int32_t)e->valuedouble;
            }
        } else {
            return txc_error(TXC_ERR_FORMAT, "tokenizer.json: TemplateProcessing: unknown item");
        }
    }
    return TXC_OK;
}

txc_status tk_parse_post_processor(txc_tokenizer *t, const cJSON *j)
{
    if (tk_json_is_null(j))
        return TXC_OK;
    const char *type = tk_json_type(j);
    if (!cJSON_IsObject(j) || !type)
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: post_processor without a \"type\"");
    if (!strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(j, "processors");
        if (!cJSON_IsArray(list))
            return txc_error(TXC_ERR_FORMAT, "tokenizer.json: post_processor Sequence without a list");
        for (const cJSON *e = list->child; e; e = e->next) {
            txc_status st = tk_parse_post_processor(t, e);
            if (st)
                return st;
        }
        return TXC_OK;
    }
    tk_post *tmp;
    GROW(t->post, t->n_post, tmp);
    tk_post *p = &t->post[t->n_post++]; /* counted now so that free sees it */
    if (!strcmp(type, "TemplateProcessing")) {
        p->kind = TK_POST_TEMPLATE;
        return parse_template(t, j, p);
    }
    if (!strcmp(type, "ByteLevel")) {
        p->kind = TK_POST_BYTELEVEL;
        return TXC_OK;
    }
    t->n_post--;
    return txc_error(TXC_ERR_UNSUPPORTED, "tokenizer.json: post_processor %s not supported",
                     type);
}

/* ---- decoders ------------------------------------------------------------------- */

txc_status tk_parse_decoder(txc_tokenizer *t, const cJSON *j)
{
    if (tk_json_is_null(j))
        return TXC_OK;
    t->has_decoder = true;
    const char *type = tk_json_type(j);
    if (!cJSON_IsObject(j) || !type)
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: decoder without a \"type\"");
    if (!strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(j, "decoders");
        if (!cJSON_IsArray(list))
            return txc_error(TXC_ERR_FORMAT, "tokenizer.json: decoder Sequence without a list");
        for (const cJSON *e = list->child; e; e = e->next) {
            txc_status st = tk_parse_decoder(t, e);
            if (st)
                return st;
        }
        return TXC_OK;
    }
    tk_decoder d = {0}, *tmp;
    txc_status st = TXC_OK;
    if (!strcmp(type, "Replace")) {
        d.kind = TK_DEC_REPLACE;
        st = get_replace_pattern(j, "decoder Replace", &d.a, &d.a_len, &d.re);
        if (!st)
            st = tk_json_dup_string(cJSON_GetObjectItemCaseSensitive(j, "content"),
                                    "decoder Replace", "content", &d.b, &d.b_len);
    } else if (!strcmp(type, "ByteFallback")) {
        d.kind = TK_DEC_BYTEFALLBACK;
    } else if (!strcmp(type, "Fuse")) {
        d.kind = TK_DEC_FUSE;
    } else if (!strcmp(type, "Strip")) {
        d.kind = TK_DEC_STRIP;
        st = tk_json_char(cJSON_GetObjectItemCaseSensitive(j, "content"), "decoder Strip", "content",
                      &d.ch);
        if (!st)
            st = get_size(j, "decoder Strip", "start", &d.start);
        if (!st)
            st = get_size(j, "decoder Strip", "stop", &d.stop);
    } else if (!strcmp(type, "Metaspace")) {
        d.kind = TK_DEC_METASPACE;
        st = tk_json_char(cJSON_GetObjectItemCaseSensitive(j, "replacement"), "decoder Metaspace",
                      "replacement", &d.ch);
        if (!st)
            st = tk_json_prepend_scheme(j, "decoder Metaspace", &d.scheme);
    } else if (!strcmp(type, "ByteLevel")) {
        d.kind = TK_DEC_BYTELEVEL;
    } else {
        return txc_error(TXC_ERR_UNSUPPORTED, "tokenizer.json: decoder %s not supported", type);
    }
    if (!st) {
        tmp = realloc(t->dec, (t->n_dec + 1) * sizeof *t->dec);
        if (!tmp)
            st = txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
        else
            t->dec = tmp, t->dec[t->n_dec++] = d, d.a = d.b = NULL, d.re = NULL;
    }
    free(d.a);
    free(d.b);
    tk_regex_free(d.re);
    return st;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The ByteFallback decoder's test: exactly "<0x" + 2 chars + ">" that
 * u8::from_str_radix(_, 16) accepts (which includes "+F"). -1 if not. */
static int byte_token_value(const char *s, size_t n)
{
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return -1;
    int hi = hexval(s[3]), lo = hexval(s[4]);
    if (s[3] == '+' && lo >= 0)
        return lo;
    if (hi < 0 || lo < 0)
        return -1;
    return hi * 16 + lo;
}

static txc_status flush_bytes(tk_strlist *out, tk_buf *bytes)
{
    txc_status st = TXC_OK;
    if (!bytes->n)
        return TXC_OK;
    if (tk_utf8_valid(bytes->p, bytes->n)) {
        st = tk_strlist_add(out, bytes->p, bytes->n);
    } else {
        /* String::from_utf8 failed: one U+FFFD per byte, as the crate. */
        for (size_t i = 0; i < bytes->n && !st; i++)
            st = tk_strlist_add(out, "\xEF\xBF\xBD", 3);
    }
    bytes->n = 0;
    return st;
}

static txc_status decode_one(const tk_decoder *d, const tk_strlist *in, tk_strlist *out)
{
    txc_status st = TXC_OK;
    switch (d->kind) {
    case TK_DEC_REPLACE: {
        tk_buf b = {0};
        tk_ctx cx = {0};
        for (size_t i = 0; i < in->n && !st; i++) {
            b.n = 0;
            if (d->re)
                st = replace_regex(d->re, tk_strlist_at(in, i), in->len[i], d->b, d->b_len, &cx, &b);
            else
                st = tk_replace_all(tk_strlist_at(in, i), in->len[i], d->a, d->a_len, d->b,
                                    d->b_len, &b);
            if (!st)
                st = tk_strlist_add(out, b.p ? b.p : "", b.n);
        }
        tk_buf_free(&b);
        tk_ctx_free(&cx);
        return st;
    }
    case TK_DEC_BYTELEVEL: {
        /* Each token's chars back to bytes (a token with a char outside the
         * byte alphabet keeps its own bytes), all joined, then lossy UTF-8. */
        tk_buf bytes = {0}, text = {0};
        for (size_t i = 0; i < in->n && !st; i++) {
            const char *s = tk_strlist_at(in, i);
            size_t n = in->len[i], start = bytes.n;
            st = tk_buf_reserve(&bytes, n + 1);
            for (size_t k = 0; k < n && !st;) {
                size_t cl;
                uint32_t c = tk_utf8_decode(s + k, &cl);
                int v = tk_bytelevel_byte(c);
                if (v < 0) {
                    bytes.n = start;
                    st = tk_buf_append(&bytes, s, n);
                    break;
                }
                bytes.p[bytes.n++] = (char)v;
                k += cl;
            }
        }
        if (!st)
            st = tk_utf8_lossy(bytes.p ? bytes.p : "", bytes.n, &text);
        if (!st)
            st = tk_strlist_add(out, text.p ? text.p : "", text.n);
        tk_buf_free(&bytes);
        tk_buf_free(&text);
        return st;
    }
    case TK_DEC_BYTEFALLBACK: {
        tk_buf bytes = {0};
        for (size_t i = 0; i < in->n && !st; i++) {
            int v = byte_token_value(tk_strlist_at(in, i), in->len[i]);
            if (v >= 0) {
                unsigned char c = (unsigned char)v;
                st = tk_buf_append(&bytes, &c, 1);
                continue;
            }
            st = flush_bytes(out, &bytes);
            if (!st)
                st = tk_strlist_add(out, tk_strlist_at(in, i), in->len[i]);
        }
        if (!st)
            st = flush_bytes(out, &bytes);
        tk_buf_free(&bytes);
        return st;
    }
    case TK_DEC_FUSE:
        /* The tokens sit back to back in in->text, in order: one string.
         * (No tokens: the crate's join gives one empty string.) */
        return tk_strlist_add(out, in->text.p ? in->text.p : "", in->text.n);
    case TK_DEC_STRIP:
        for (size_t i = 0; i < in->n && !st; i++) {
            const char *s = tk_strlist_at(in, i);
            size_t n = in->len[i], a = 0, e = n, cl;
            for (size_t k = 0; k < d->start && a < n; k++) {
                if (tk_utf8_decode(s + a, &cl) != d->ch)
                    break;
                a += cl;
            }
            for (size_t k = 0; k < d->stop && e > a; k++) {
                size_t p = e - 1;
                while (p > 0 && ((unsigned char)s[p] & 0xC0) == 0x80)
                    p--;
                if (tk_utf8_decode(s + p, &cl) != d->ch)
                    break;
                e = p;
            }
            st = tk_strlist_add(out, s + a, e - a);
        }
        return st;
    case TK_DEC_METASPACE: {
        char rep[4];
        size_t rl = tk_utf8_encode(d->ch, rep);
        tk_buf b = {0};
        for (size_t i = 0; i < in->n && !st; i++) {
            b.n = 0;
            /* In the first token every replacement char is dropped (unless
             * "never"); elsewhere it becomes a space. */
            bool drop = i == 0 && d->scheme != TK_PREPEND_NEVER;
            st = tk_replace_all(tk_strlist_at(in, i), in->len[i], rep, rl, " ", drop ? 0 : 1, &b);
            if (!st)
                st = tk_strlist_add(out, b.p ? b.p : "", b.n);
        }
        tk_buf_free(&b);
        return st;
    }
    }
    return txc_error(TXC_ERR_INTERNAL, "tokenizer: unknown decoder kind");
}

txc_status tk_decode_tokens(const txc_tokenizer *t, tk_strlist *tokens, tk_buf *out)
{
    txc_status st = TXC_OK;
    for (size_t k = 0; k < t->n_dec && !st; k++) {
        tk_strlist next = {0};
        st = decode_one(&t->dec[k], tokens, &next);
        tk_strlist_free(tokens);
        *tokens = next;
    }
    /* Decoder::decode joins the chain's output; no decoder: join with " ". */
    for (size_t i = 0; i < tokens->n && !st; i++) {
        if (!t->has_decoder && i)
            st = tk_buf_append(out, " ", 1);
        if (!st)
            st = tk_buf_append(out, tk_strlist_at(tokens, i), tokens->len[i]);
    }
    if (!st)
        st = tk_buf_append(out, "", 0); /* NUL-terminate even when empty */
    return st;
}

bool tk_has_byte_fallback_decoder(const txc_tokenizer *t)
{
    for (size_t i = 0; i < t->n_dec; i++)
        if (t->dec[i].kind == TK_DEC_BYTEFALLBACK)
            return true;
    return false;
}

bool tk_is_byte_token(const txc_tokenizer *t, int32_t id)
{
    size_t n;
    const char *s = tk_token_of(t, id, &n);
    return s && byte_token_value(s, n) >= 0;
}

void tk_components_free(txc_tokenizer *t)
{
    for (size_t i = 0; i < t->n_norm; i++)
        normalizer_free(&t->norm[i]);
    free(t->norm);
    for (size_t i = 0; i < t->n_pretok; i++)
        tk_pretok_free(&t->pretok[i]);
    free(t->pretok);
    for (size_t i = 0; i < t->n_post; i++)
        free(t->post[i].single);
    free(t->post);
    for (size_t i = 0; i < t->n_dec; i++) {
        free(t->dec[i].a);
        free(t->dec[i].b);
        tk_regex_free(t->dec[i].re);
    }
    free(t->dec);
    t->norm = NULL, t->pretok = NULL, t->post = NULL, t->dec = NULL;
    t->n_norm = t->n_pretok = t->n_post = t->n_dec = 0;
}
