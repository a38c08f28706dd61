/*
 * Normalizers, pre-tokenizers, post-processors and decoders of tokenizer.json:
 * one parse branch and one apply case per kind, each mirroring the `tokenizers`
 * crate's component of the same name. A JSON "Sequence" is flattened into the
 * tokenizer's array of components of that family.
 */
#include "hf/tokenizer_impl.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool is_null(const cJSON *j) { return !j || cJSON_IsNull(j); }

static const char *type_of(const cJSON *j)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "type");
    return cJSON_IsString(t) ? t->valuestring : NULL;
}

static txc_status dup_string(const cJSON *j, const char *what, const char *field, char **out,
                             size_t *len)
{
    if (!cJSON_IsString(j))
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: %s: \"%s\" is not a string", what, field);
    *len = strlen(j->valuestring);
    *out = malloc(*len + 1);
    if (!*out)
        return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
    memcpy(*out, j->valuestring, *len + 1);
    return TXC_OK;
}

/* A single char field (Metaspace replacement, Strip content). */
static txc_status get_char(const cJSON *j, const char *what, const char *field, uint32_t *cp)
{
    if (!cJSON_IsString(j) || !j->valuestring[0])
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: %s: \"%s\" is not a character", what,
                         field);
    size_t n = strlen(j->valuestring), cl;
    if (!tk_utf8_valid(j->valuestring, n) || (*cp = tk_utf8_decode(j->valuestring, &cl), cl != n))
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: %s: \"%s\" is not one character", what,
                         field);
    return TXC_OK;
}

/* A Replace's {"String": s} pattern (the "Regex" form is not supported yet). */
static txc_status get_string_pattern(const cJSON *obj, const char *what, char **out, size_t *len)
{
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(obj, "pattern");
    if (!cJSON_IsObject(pat))
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: %s Replace: \"pattern\" is not an object",
                         what);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(pat, "String");
    if (!s) {
        if (cJSON_GetObjectItemCaseSensitive(pat, "Regex"))
            return txc_error(TXC_ERR_UNSUPPORTED,
                             "tokenizer.json: %s Replace with a Regex pattern not supported yet",
                             what);
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: %s Replace: unknown pattern kind", what);
    }
    txc_status st = dup_string(s, what, "pattern", out, len);
    if (!st && *len == 0) {
        free(*out);
        *out = NULL;
        return txc_error(TXC_ERR_UNSUPPORTED,
                         "tokenizer.json: %s Replace with an empty pattern not supported", what);
    }
    return st;
}

static txc_status get_bool(const cJSON *obj, const char *what, const char *field, bool dflt,
                           bool *out)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, field);
    if (is_null(j)) {
        *out = dflt;
        return TXC_OK;
    }
    if (!cJSON_IsBool(j))
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: %s: \"%s\" is not a boolean", what, field);
    *out = cJSON_IsTrue(j);
    return TXC_OK;
}

static txc_status get_size(const cJSON *obj, const char *what, const char *field, size_t *out)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, field);
    if (!cJSON_IsNumber(j) || j->valuedouble < 0 || j->valuedouble > 1e9 ||
        j->valuedouble != floor(j->valuedouble))
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: %s: \"%s\" is not a count", what, field);
    *out = (size_t)j->valuedouble;
    return TXC_OK;
}

/* Metaspace's prepend scheme, new ("prepend_scheme") or legacy
 * ("add_prefix_space") form; the crate defaults to "always". */
static txc_status get_prepend_scheme(const cJSON *obj, const char *what, tk_prepend_scheme *out)
{
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(obj, "prepend_scheme");
    const cJSON *aps = cJSON_GetObjectItemCaseSensitive(obj, "add_prefix_space");
    *out = TK_PREPEND_ALWAYS;
    if (!is_null(ps)) {
        if (!cJSON_IsString(ps))
            return txc_error(TXC_ERR_FORMAT, "tokenizer.json: %s: prepend_scheme is not a string",
                             what);
        if (!strcmp(ps->valuestring, "always"))
            *out = TK_PREPEND_ALWAYS;
        else if (!strcmp(ps->valuestring, "first"))
            *out = TK_PREPEND_FIRST;
        else if (!strcmp(ps->valuestring, "never"))
            *out = TK_PREPEND_NEVER;
        else
            return txc_error(TXC_ERR_FORMAT, "tokenizer.json: %s: unknown prepend_scheme '%s'",
                             what, ps->valuestring);
    } else if (!is_null(aps)) {
        if (!cJSON_IsBool(aps))
            return txc_error(TXC_ERR_FORMAT, "tokenizer.json: %s: add_prefix_space is not a boolean",
                             what);
        *out = cJSON_IsTrue(aps) ? TK_PREPEND_ALWAYS : TK_PREPEND_NEVER;
    }
    return TXC_OK;
}

#define GROW(arr, n, tmp)                                                                     \
    do {                                                                                      \
        tmp = realloc((arr), ((n) + 1) * sizeof *(arr));                                      \
        if (!tmp)                                                                             \
            return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");                      \
        (arr) = tmp;                                                                          \
        memset(&(arr)[(n)], 0, sizeof *(arr));                                                \
    } while (0)

/* ---- normalizers ------------------------------------------------------------ */

txc_status tk_parse_normalizer(txc_tokenizer *t, const cJSON *j)
{
    static const char *what = "normalizer";
    if (is_null(j))
        return TXC_OK;
    const char *type = type_of(j);
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
    tk_normalizer *tmp, n = {0};
    txc_status st = TXC_OK;
    if (!strcmp(type, "Prepend")) {
        n.kind = TK_NORM_PREPEND;
        st = dup_string(cJSON_GetObjectItemCaseSensitive(j, "prepend"), "normalizer Prepend",
                        "prepend", &n.a, &n.a_len);
    } else if (!strcmp(type, "Replace")) {
        n.kind = TK_NORM_REPLACE;
        st = get_string_pattern(j, what, &n.a, &n.a_len);
        if (!st)
            st = dup_string(cJSON_GetObjectItemCaseSensitive(j, "content"), "normalizer Replace",
                            "content", &n.b, &n.b_len);
    } else if (!strcmp(type, "Strip")) {
        n.kind = TK_NORM_STRIP;
        st = get_bool(j, "normalizer Strip", "strip_left", false, &n.left);
        if (!st)
            st = get_bool(j, "normalizer Strip", "strip_right", false, &n.right);
    } else {
        return txc_error(TXC_ERR_UNSUPPORTED, "tokenizer.json: normalizer %s not supported yet",
                         type);
    }
    if (!st) {
        tmp = realloc(t->norm, (t->n_norm + 1) * sizeof *t->norm);
        if (!tmp)
            st = txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
        else
            t->norm = tmp, t->norm[t->n_norm++] = n, n.a = n.b = NULL;
    }
    free(n.a);
    free(n.b);
    return st;
}

/* NormalizedString::replace with a string pattern: non-overlapping, left to right. */
static txc_status replace_all(const char *s, size_t n, const char *pat, size_t plen,
                              const char *with, size_t wlen, tk_buf *out)
{
    txc_status st = TXC_OK;
    size_t i = 0, last = 0;
    while (!st && i + plen <= n) {
        const char *hit = memchr(s + i, pat[0], n - i - plen + 1);
        if (!hit)
            break;
        i = (size_t)(hit - s);
        if (memcmp(hit, pat, plen) == 0) {
            st = tk_buf_append(out, s + last, i - last);
            if (!st)
                st = tk_buf_append(out, with, wlen);
            i += plen;
            last = i;
        } else {
            i++;
        }
    }
    if (!st)
        st = tk_buf_append(out, s + last, n - last);
    return st;
}

static txc_status normalize_one(const tk_normalizer *nz, tk_buf *b)
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
        if (b->n < nz->a_len)
            return TXC_OK;
        st = replace_all(b->p, b->n, nz->a, nz->a_len, nz->b, nz->b_len, &out);
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
            size_t k = e - 1;
            while (k > s && ((unsigned char)b->p[k] & 0xC0) == 0x80)
                k--;
            uint32_t cp = tk_utf8_decode(b->p + k, &cl);
            if (!tk_is_whitespace(cp))
                break;
            e = k;
        }
        memmove(b->p, b->p + s, e - s);
        b->n = e - s;
        if (b->p)
            b->p[b->n] = '\0';
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

txc_status tk_normalize(const txc_tokenizer *t, tk_buf *b)
{
    for (size_t i = 0; i < t->n_norm; i++) {
        txc_status st = normalize_one(&t->norm[i], b);
        if (st)
            return st;
    }
    return TXC_OK;
}

/* ---- pre-tokenizers ---------------------------------------------------------- */

txc_status tk_parse_pretokenizer(txc_tokenizer *t, const cJSON *j)
{
    if (is_null(j))
        return TXC_OK;
    const char *type = type_of(j);
    if (!cJSON_IsObject(j) || !type)
        return txc_error(TXC_ERR_FORMAT, "tokenizer.json: pre_tokenizer without a \"type\"");
    if (!strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(j, "pretokenizers");
        if (!cJSON_IsArray(list))
            return txc_error(TXC_ERR_FORMAT, "tokenizer.json: pre_tokenizer Sequence without a list");
        for (const cJSON *e = list->child; e; e = e->next) {
            txc_status st = tk_parse_pretokenizer(t, e);
            if (st)
                return st;
        }
        return TXC_OK;
    }
    tk_pretok p = {0}, *tmp;
    if (!strcmp(type, "Metaspace")) {
        const char *what = "pre_tokenizer Metaspace";
        p.kind = TK_PRETOK_METASPACE;
        uint32_t cp;
        txc_status st = get_char(cJSON_GetObjectItemCaseSensitive(j, "replacement"), what,
                                 "replacement", &cp);
        if (!st)
            st = get_prepend_scheme(j, what, &p.scheme);
        if (!st)
            st = get_bool(j, what, "split", true, &p.split);
        if (st)
            return st;
        p.repl_len = tk_utf8_encode(cp, p.repl);
    } else {
        return txc_error(TXC_ERR_UNSUPPORTED, "tokenizer.json: pre_tokenizer %s not supported yet",
                         type);
    }
    GROW(t->pretok, t->n_pretok, tmp);
    t->pretok[t->n_pretok++] = p;
    return TXC_OK;
}

/* pre_tokenizers::metaspace::Metaspace::pre_tokenize on one piece. */
static txc_status metaspace_split(const tk_pretok *p, const tk_piece *pc, const char *s,
                                  tk_pieces *out, tk_buf *tmp)
{
    tmp->n = 0;
    txc_status st = TXC_OK;
    bool starts = pc->len >= p->repl_len && !memcmp(s, p->repl, p->repl_len);
    /* replace(' ', replacement) */
    bool prepend = (p->scheme == TK_PREPEND_ALWAYS && !starts && !(pc->len && s[0] == ' ')) ||
                   (p->scheme == TK_PREPEND_FIRST && !starts && !(pc->len && s[0] == ' ') &&
                    pc->at_origin);
    /* A leading ' ' becomes the replacement, so the crate's
     * starts_with(replacement) test sees it: no extra prepend then. */
    if (prepend)
        st = tk_buf_append(tmp, p->repl, p->repl_len);
    if (!st)
        st = replace_all(s, pc->len, " ", 1, p->repl, p->repl_len, tmp);
    if (st)
        return st;
    if (!p->split)
        return tk_pieces_add_text(out, tmp->p, tmp->n, pc->at_origin);
    /* split(replacement, MergedWithNext): each replacement starts a piece,
     * except that a run of them leaves all but the last alone. */
    const char *q = tmp->p;
    size_t n = tmp->n, start = 0;
    bool first = true;
    for (size_t i = 0; i < n;) {
        if (i + p->repl_len <= n && !memcmp(q + i, p->repl, p->repl_len)) {
            if (i > start) {
                st = tk_pieces_add_text(out, q + start, i - start, pc->at_origin && first);
                if (st)
                    return st;
                first = false;
                start = i;
            }
            i += p->repl_len;
            /* a replacement followed by another one is a piece of its own */
            if (i + p->repl_len <= n && !memcmp(q + i, p->repl, p->repl_len)) {
                st = tk_pieces_add_text(out, q + start, i - start, pc->at_origin && first);
                if (st)
                    return st;
                first = false;
                start = i;
            }
        } else {
            i++;
        }
    }
    return tk_pieces_add_text(out, q + start, n - start, pc->at_origin && first);
}

txc_status tk_pretokenize(const txc_tokenizer *t, tk_pieces *ps)
{
    tk_buf tmp = {0};
    txc_status st = TXC_OK;
    for (size_t k = 0; k < t->n_pretok && !st; k++) {
        const tk_pretok *p = &t->pretok[k];
        tk_pieces out = {0};
        for (size_t i = 0; i < ps->n && !st; i++) {
            const tk_piece *pc = &ps->v[i];
            if (pc->id >= 0) {
                st = tk_pieces_add_token(&out, pc->id, pc->at_origin);
                continue;
            }
            switch (p->kind) {
            case TK_PRETOK_METASPACE:
                st = metaspace_split(p, pc, ps->text.p + pc->off, &out, &tmp);
                break;
            }
        }
        if (st) {
            tk_pieces_free(&out);
            break;
        }
        tk_pieces_free(ps);
        *ps = out;
    }
    tk_buf_free(&tmp);
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
    if (is_null(j))
        return TXC_OK;
    const char *type = type_of(j);
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
    return txc_error(TXC_ERR_UNSUPPORTED, "tokenizer.json: post_processor %s not supported yet",
                     type);
}

/* ---- decoders ------------------------------------------------------------------- */

txc_status tk_parse_decoder(txc_tokenizer *t, const cJSON *j)
{
    if (is_null(j))
        return TXC_OK;
    t->has_decoder = true;
    const char *type = type_of(j);
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
        st = get_string_pattern(j, "decoder", &d.a, &d.a_len);
        if (!st)
            st = dup_string(cJSON_GetObjectItemCaseSensitive(j, "content"), "decoder Replace",
                            "content", &d.b, &d.b_len);
    } else if (!strcmp(type, "ByteFallback")) {
        d.kind = TK_DEC_BYTEFALLBACK;
    } else if (!strcmp(type, "Fuse")) {
        d.kind = TK_DEC_FUSE;
    } else if (!strcmp(type, "Strip")) {
        d.kind = TK_DEC_STRIP;
        st = get_char(cJSON_GetObjectItemCaseSensitive(j, "content"), "decoder Strip", "content",
                      &d.ch);
        if (!st)
            st = get_size(j, "decoder Strip", "start", &d.start);
        if (!st)
            st = get_size(j, "decoder Strip", "stop", &d.stop);
    } else if (!strcmp(type, "Metaspace")) {
        d.kind = TK_DEC_METASPACE;
        st = get_char(cJSON_GetObjectItemCaseSensitive(j, "replacement"), "decoder Metaspace",
                      "replacement", &d.ch);
        if (!st)
            st = get_prepend_scheme(j, "decoder Metaspace", &d.scheme);
    } else {
        return txc_error(TXC_ERR_UNSUPPORTED, "tokenizer.json: decoder %s not supported yet", type);
    }
    if (!st) {
        tmp = realloc(t->dec, (t->n_dec + 1) * sizeof *t->dec);
        if (!tmp)
            st = txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
        else
            t->dec = tmp, t->dec[t->n_dec++] = d, d.a = d.b = NULL;
    }
    free(d.a);
    free(d.b);
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
        for (size_t i = 0; i < in->n && !st; i++) {
            b.n = 0;
            st = replace_all(tk_strlist_at(in, i), in->len[i], d->a, d->a_len, d->b, d->b_len, &b);
            if (!st)
                st = tk_strlist_add(out, b.p ? b.p : "", b.n);
        }
        tk_buf_free(&b);
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
            st = replace_all(tk_strlist_at(in, i), in->len[i], rep, rl, " ", drop ? 0 : 1, &b);
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
    for (size_t i = 0; i < t->n_norm; i++) {
        free(t->norm[i].a);
        free(t->norm[i].b);
    }
    free(t->norm);
    free(t->pretok);
    for (size_t i = 0; i < t->n_post; i++)
        free(t->post[i].single);
    free(t->post);
    for (size_t i = 0; i < t->n_dec; i++) {
        free(t->dec[i].a);
        free(t->dec[i].b);
    }
    free(t->dec);
    t->norm = NULL, t->pretok = NULL, t->post = NULL, t->dec = NULL;
    t->n_norm = t->n_pretok = t->n_post = t->n_dec = 0;
}
