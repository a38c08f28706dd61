/*
 * Pre-tokenizers of tokenizer.json (the `tokenizers` crate's pre_tokenizers):
 * each one splits every text piece into smaller ones. Most are the crate's
 * NormalizedString::split — a pattern's find_matches, then a
 * SplitDelimiterBehavior — and ByteLevel also maps every byte to GPT-2's
 * printable alphabet.
 */
#include "tokenizer/tokenizer_impl.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* GPT-2's pattern, as the crate's ByteLevel pre-tokenizer hard-codes it. */
static const char gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* ---- the ByteLevel alphabet ---------------------------------------------------- */

/* bytes_to_unicode: the printable bytes '!'..'~', 0xA1..0xAC, 0xAE..0xFF map
 * to themselves, the 68 others in order to U+0100.. */
uint32_t tk_bytelevel_char(unsigned char b)
{
    if (b <= 0x20)
        return 0x100u + b;
    if (b >= 0x7F && b <= 0xA0)
        return 0x100u + 33 + (b - 0x7Fu);
    if (b == 0xAD)
        return 0x100u + 67;
    return b;
}

int tk_bytelevel_byte(uint32_t c)
{
    if ((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF))
        return (int)c;
    if (c >= 0x100 && c <= 0x120)
        return (int)(c - 0x100);
    if (c >= 0x121 && c <= 0x142)
        return (int)(c - 0x121 + 0x7F);
    if (c == 0x143)
        return 0xAD;
    return -1;
}

/* ---- parsing ------------------------------------------------------------------- */

static txc_status get_behavior(const cJSON *j, const char *what, bool required,
                               tk_split_behavior dflt, tk_split_behavior *out)
{
    static const struct {
        const char *name;
        tk_split_behavior b;
    } names[] = {{"Removed", TK_SPLIT_REMOVED},
                 {"Isolated", TK_SPLIT_ISOLATED},
                 {"MergedWithPrevious", TK_SPLIT_MERGED_WITH_PREVIOUS},
                 {"MergedWithNext", TK_SPLIT_MERGED_WITH_NEXT},
                 {"Contiguous", TK_SPLIT_CONTIGUOUS}};
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(j, "behavior");
    *out = dflt;
    if (tk_json_is_null(b)) {
        if (required)
            return txc_error(TXC_ERR_FORMAT, "tokenizer.json: %s without a \"behavior\"", what);
        return TXC_OK;
    }
    if (cJSON_IsString(b))
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (!strcmp(b->valuestring, names[i].name)) {
                *out = names[i].b;
                return TXC_OK;
            }
    return txc_error(TXC_ERR_FORMAT, "tokenizer.json: %s: unknown behavior '%s'", what,
                     cJSON_IsString(b) ? b->valuestring : "?");
}

void tk_pretok_free(tk_pretok *p)
{
    tk_regex_free(p->pat.re);
    p->pat.re = NULL;
}

static txc_status parse_one(tk_pretok *p, const cJSON *j, const char *type)
{
    txc_status st = TXC_OK;
    if (!strcmp(type, "Metaspace")) {
        const char *what = "pre_tokenizer Metaspace";
        p->kind = TK_PRETOK_METASPACE;
        uint32_t cp;
        st = tk_json_char(cJSON_GetObjectItemCaseSensitive(j, "replacement"), what, "replacement",
                          &cp);
        if (!st)
            st = tk_json_prepend_scheme(j, what, &p->scheme);
        if (!st)
            st = tk_json_bool(j, what, "split", true, &p->split);
        if (!st)
            p->repl_len = tk_utf8_encode(cp, p->repl);
    } else if (!strcmp(type, "ByteLevel")) {
        const char *what = "pre_tokenizer ByteLevel";
        p->kind = TK_PRETOK_BYTELEVEL;
        st = tk_json_bool(j, what, "add_prefix_space", true, &p->add_prefix_space);
        if (!st)
            st = tk_json_bool(j, what, "use_regex", true, &p->use_regex);
        if (!st && p->use_regex)
            st = tk_regex_compile(gpt2_pattern, sizeof gpt2_pattern - 1, false, what, &p->pat.re);
        p->behavior = TK_SPLIT_ISOLATED;
    } else if (!strcmp(type, "Split")) {
        const char *what = "pre_tokenizer Split";
        p->kind = TK_PRETOK_SPLIT;
        st = tk_json_pattern(j, what, &p->pat.re, NULL, NULL);
        if (!st)
            st = get_behavior(j, what, true, TK_SPLIT_REMOVED, &p->behavior);
        if (!st)
            st = tk_json_bool(j, what, "invert", false, &p->invert);
    } else if (!strcmp(type, "Digits")) {
        bool individual = false; /* read only when tk_json_bool succeeds */
        p->kind = TK_PRETOK_DIGITS;
        st = tk_json_bool(j, "pre_tokenizer Digits", "individual_digits", false, &individual);
        p->pat.cc = TK_CC_NUMERIC;
        p->behavior = individual ? TK_SPLIT_ISOLATED : TK_SPLIT_CONTIGUOUS;
    } else if (!strcmp(type, "Punctuation")) {
        p->kind = TK_PRETOK_PUNCT;
        p->pat.cc = TK_CC_PUNCT;
        st = get_behavior(j, "pre_tokenizer Punctuation", false, TK_SPLIT_ISOLATED, &p->behavior);
    } else if (!strcmp(type, "Whitespace")) {
        p->kind = TK_PRETOK_WHITESPACE;
    } else if (!strcmp(type, "WhitespaceSplit")) {
        p->kind = TK_PRETOK_WSPLIT;
        p->pat.cc = TK_CC_WHITESPACE;
        p->behavior = TK_SPLIT_REMOVED;
    } else if (!strcmp(type, "CharDelimiterSplit")) {
        p->kind = TK_PRETOK_CHARDELIM;
        p->pat.cc = TK_CC_CHAR;
        p->behavior = TK_SPLIT_REMOVED;
        st = tk_json_char(cJSON_GetObjectItemCaseSensitive(j, "delimiter"),
                          "pre_tokenizer CharDelimiterSplit", "delimiter", &p->pat.ch);
    } else {
        return txc_error(TXC_ERR_UNSUPPORTED, "tokenizer.json: pre_tokenizer %s not supported",
                         type);
    }
    return st;
}

txc_status tk_parse_pretokenizer(txc_tokenizer *t, const cJSON *j)
{
    if (tk_json_is_null(j))
        return TXC_OK;
    const char *type = tk_json_type(j);
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
    tk_pretok p = {0};
    txc_status st = parse_one(&p, j, type);
    if (!st) {
        tk_pretok *v = realloc(t->pretok, (t->n_pretok + 1) * sizeof *v);
        if (!v) {
            st = txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
        } else {
            t->pretok = v;
            t->pretok[t->n_pretok++] = p;
            return TXC_OK;
        }
    }
    tk_pretok_free(&p);
    return st;
}

/* ---- NormalizedString::split ---------------------------------------------------------- */

/* Apply a SplitDelimiterBehavior to the matches of s and append the
 * resulting non-empty pieces. */
static txc_status split_by(const tk_segs *g, tk_split_behavior beh, const char *s, bool at_origin,
                           tk_pieces *out, tk_segs *acc)
{
    txc_status st = TXC_OK;
    acc->n = 0;
    bool prev = false;
    switch (beh) {
    case TK_SPLIT_REMOVED:
    case TK_SPLIT_ISOLATED:
        for (size_t i = 0; i < g->n && !st; i++) {
            const tk_seg *e = &g->v[i];
            if (beh == TK_SPLIT_REMOVED && e->match)
                continue;
            st = tk_pieces_add_text(out, s + e->start, e->end - e->start,
                                    at_origin && e->start == 0);
        }
        return st;
    case TK_SPLIT_CONTIGUOUS:
    case TK_SPLIT_MERGED_WITH_PREVIOUS:
        for (size_t i = 0; i < g->n && !st; i++) {
            const tk_seg *e = &g->v[i];
            bool join = beh == TK_SPLIT_CONTIGUOUS ? e->match == prev : e->match && !prev;
            if (join && acc->n)
                acc->v[acc->n - 1].end = e->end;
            else
                st = tk_segs_push(acc, e->start, e->end, false);
            prev = e->match;
        }
        break;
    case TK_SPLIT_MERGED_WITH_NEXT:
        for (size_t i = g->n; i-- > 0 && !st;) {
            const tk_seg *e = &g->v[i];
            if (e->match && !prev && acc->n)
                acc->v[acc->n - 1].start = e->start;
            else
                st = tk_segs_push(acc, e->start, e->end, false);
            prev = e->match;
        }
        /* built back to front */
        for (size_t i = 0; i < acc->n / 2 && !st; i++) {
            tk_seg x = acc->v[i];
            acc->v[i] = acc->v[acc->n - 1 - i];
            acc->v[acc->n - 1 - i] = x;
        }
        break;
    }
    for (size_t i = 0; i < acc->n && !st; i++) {
        const tk_seg *e = &acc->v[i];
        st = tk_pieces_add_text(out, s + e->start, e->end - e->start, at_origin && e->start == 0);
    }
    return st;
}

/* Whitespace: the pieces are the matches of \w+|[^\w\s]+ (Rust regex). */
static txc_status whitespace_split(const char *s, size_t n, bool at_origin, tk_pieces *out)
{
    txc_status st = TXC_OK;
    size_t i = 0;
    while (i < n && !st) {
        size_t cl;
        uint32_t c = tk_utf8_decode(s + i, &cl);
        if (tk_is_whitespace(c) && !tk_is_word_char(c)) {
            i += cl;
            continue;
        }
        bool word = tk_is_word_char(c);
        size_t start = i;
        i += cl;
        while (i < n) {
            c = tk_utf8_decode(s + i, &cl);
            bool w = tk_is_word_char(c);
            if (word ? !w : (w || tk_is_whitespace(c)))
                break;
            i += cl;
        }
        st = tk_pieces_add_text(out, s + start, i - start, at_origin && start == 0);
    }
    return st;
}

/* pre_tokenizers::metaspace::Metaspace::pre_tokenize on one piece. */
static txc_status metaspace_split(const tk_pretok *p, const char *s, size_t len, bool at_origin,
                                  tk_pieces *out, tk_buf *tmp)
{
    tmp->n = 0;
    txc_status st = TXC_OK;
    bool starts = len >= p->repl_len && !memcmp(s, p->repl, p->repl_len);
    /* replace(' ', replacement) */
    bool prepend = (p->scheme == TK_PREPEND_ALWAYS && !starts && !(len && s[0] == ' ')) ||
                   (p->scheme == TK_PREPEND_FIRST && !starts && !(len && s[0] == ' ') &&
                    at_origin);
    /* A leading ' ' becomes the replacement, so the crate's
     * starts_with(replacement) test sees it: no extra prepend then. */
    if (prepend)
        st = tk_buf_append(tmp, p->repl, p->repl_len);
    if (!st)
        st = tk_replace_all(s, len, " ", 1, p->repl, p->repl_len, tmp);
    if (st)
        return st;
    if (!p->split)
        return tk_pieces_add_text(out, tmp->p, tmp->n, at_origin);
    /* split(replacement, MergedWithNext): each replacement starts a piece,
     * except that a run of them leaves all but the last alone. */
    const char *q = tmp->p;
    size_t n = tmp->n, start = 0;
    bool first = true;
    for (size_t i = 0; i < n;) {
        if (i + p->repl_len <= n && !memcmp(q + i, p->repl, p->repl_len)) {
            if (i > start) {
                st = tk_pieces_add_text(out, q + start, i - start, at_origin && first);
                if (st)
                    return st;
                first = false;
                start = i;
            }
            i += p->repl_len;
            /* a replacement followed by another one is a piece of its own */
            if (i + p->repl_len <= n && !memcmp(q + i, p->repl, p->repl_len)) {
                st = tk_pieces_add_text(out, q + start, i - start, at_origin && first);
                if (st)
                    return st;
                first = false;
                start = i;
            }
        } else {
            i++;
        }
    }
    return tk_pieces_add_text(out, q + start, n - start, at_origin && first);
}

/* Append s mapped to the ByteLevel alphabet as one piece. */
static txc_status bytelevel_piece(const char *s, size_t n, bool at_origin, tk_pieces *out,
                                  tk_buf *tmp)
{
    tmp->n = 0;
    txc_status st = tk_buf_reserve(tmp, 2 * n + 1);
    if (st)
        return st;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = tk_bytelevel_char((unsigned char)s[i]);
        if (c < 0x80) {
            tmp->p[tmp->n++] = (char)c;
        } else {
            tmp->p[tmp->n++] = (char)(0xC0 | (c >> 6));
            tmp->p[tmp->n++] = (char)(0x80 | (c & 0x3F));
        }
    }
    return tk_pieces_add_text(out, tmp->p, tmp->n, at_origin);
}

static txc_status bytelevel_split(const tk_pretok *p, const char *s, size_t n, bool at_origin,
                                  tk_pieces *out, tk_ctx *cx)
{
    txc_status st = TXC_OK;
    if (p->add_prefix_space && !(n && s[0] == ' ')) {
        cx->tmp2.n = 0;
        st = tk_buf_append(&cx->tmp2, " ", 1);
        if (!st)
            st = tk_buf_append(&cx->tmp2, s, n);
        if (st)
            return st;
        s = cx->tmp2.p;
        n = cx->tmp2.n;
    }
    if (!p->use_regex)
        return bytelevel_piece(s, n, at_origin, out, &cx->tmp);
    st = tk_find_matches(&p->pat, s, n, false, &cx->rx, &cx->segs);
    for (size_t i = 0; i < cx->segs.n && !st; i++) { /* Isolated */
        const tk_seg *e = &cx->segs.v[i];
        if (e->end > e->start)
            st = bytelevel_piece(s + e->start, e->end - e->start, at_origin && e->start == 0, out,
                                 &cx->tmp);
    }
    return st;
}

/* ---- the chain ---------------------------------------------------------------------------- */

static txc_status pretok_one(const tk_pretok *p, const char *s, size_t n, bool at_origin,
                             tk_pieces *out, tk_ctx *cx, tk_segs *acc)
{
    switch (p->kind) {
    case TK_PRETOK_METASPACE:
        return metaspace_split(p, s, n, at_origin, out, &cx->tmp);
    case TK_PRETOK_BYTELEVEL:
        return bytelevel_split(p, s, n, at_origin, out, cx);
    case TK_PRETOK_WHITESPACE:
        return whitespace_split(s, n, at_origin, out);
    case TK_PRETOK_SPLIT:
    case TK_PRETOK_DIGITS:
    case TK_PRETOK_PUNCT:
    case TK_PRETOK_WSPLIT:
    case TK_PRETOK_CHARDELIM: {
        txc_status st = tk_find_matches(&p->pat, s, n, p->invert, &cx->rx, &cx->segs);
        return st ? st : split_by(&cx->segs, p->behavior, s, at_origin, out, acc);
    }
    }
    return txc_error(TXC_ERR_INTERNAL, "tokenizer: unknown pre-tokenizer kind");
}

txc_status tk_pretokenize(const txc_tokenizer *t, tk_pieces *ps, tk_ctx *cx)
{
    txc_status st = TXC_OK;
    tk_segs acc = {0};
    for (size_t k = 0; k < t->n_pretok && !st; k++) {
        const tk_pretok *p = &t->pretok[k];
        tk_pieces out = {0};
        for (size_t i = 0; i < ps->n && !st; i++) {
            const tk_piece *pc = &ps->v[i];
            if (pc->id >= 0)
                st = tk_pieces_add_token(&out, pc->id, pc->at_origin);
            else
                st = pretok_one(p, ps->text.p + pc->off, pc->len, pc->at_origin, &out, cx, &acc);
        }
        if (st) {
            tk_pieces_free(&out);
            break;
        }
        tk_pieces_free(ps);
        *ps = out;
    }
    free(acc.v);
    return st;
}

void tk_ctx_free(tk_ctx *cx)
{
    tk_rx_scratch_free(&cx->rx);
    free(cx->segs.v);
    tk_buf_free(&cx->tmp);
    tk_buf_free(&cx->tmp2);
    tk_bpe_cache_free(&cx->cache);
    memset(cx, 0, sizeof *cx);
}
