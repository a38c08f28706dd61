/*
 * Unicode for the tokenizer: character classes and normalization forms
 * (utf8proc), String::from_utf8_lossy, and regexes (PCRE2) that behave as the
 * Oniguruma engine behind the `tokenizers` crate's SysRegex, plus the crate's
 * Pattern::find_matches.
 */
#include "tokenizer/tokenizer_impl.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ---- character classes ------------------------------------------------------- */

bool tk_urange_has(const tk_urange *r, size_t n, uint32_t c)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c < r[mid].lo)
            hi = mid;
        else if (c > r[mid].hi)
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

bool tk_is_word_char(uint32_t c)
{
    if (c < 0x80)
        return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
               c == '_';
    return tk_urange_has(tk_ud_word, tk_ud_word_n, c);
}

bool tk_is_numeric(uint32_t c)
{
    if (c < 0x80)
        return c >= '0' && c <= '9';
    return tk_urange_has(tk_ud_numeric, tk_ud_numeric_n, c);
}

bool tk_is_punctuation(uint32_t c)
{
    if (c < 0x80)
        return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') ||
               (c >= '{' && c <= '~');
    return tk_urange_has(tk_ud_punct, tk_ud_punct_n, c);
}

static bool in_unicode9(uint32_t c) { return tk_urange_has(tk_ud_in9, tk_ud_in9_n, c); }

bool tk_is_mark(uint32_t c)
{
    if (c < 0x300)
        return false;
    /* general categories changed since 9.0: Vedic signs Mc → Lo, the Sharada
     * sandhi mark Po → Mn */
    if (c == 0x1CF2 || c == 0x1CF3)
        return true;
    if (c == 0x111C9)
        return false;
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return (k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_MC ||
            k == UTF8PROC_CATEGORY_ME) &&
           in_unicode9(c);
}

/* ---- normalization ----------------------------------------------------------------- */

static bool all_ascii(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80)
            return false;
    return true;
}

static txc_status nf_map(const char *s, size_t n, int opt, tk_buf *out)
{
    utf8proc_uint8_t *r = NULL;
    utf8proc_ssize_t k = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &r,
                                      (utf8proc_option_t)opt);
    if (k < 0) {
        free(r);
        if (k == UTF8PROC_ERROR_NOMEM)
            return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
        return txc_error(TXC_ERR_INVALID, "tokenizer: Unicode normalization failed: %s",
                         utf8proc_errmsg(k));
    }
    txc_status st = tk_buf_append(out, r, (size_t)k);
    free(r);
    return st;
}

txc_status tk_unicode_normalize(tk_nf form, tk_buf *b)
{
    if (all_ascii(b->p, b->n)) /* every form leaves ASCII alone */
        return TXC_OK;
    int opt = UTF8PROC_STABLE;
    switch (form) {
    case TK_NFC:
        opt |= UTF8PROC_COMPOSE;
        break;
    case TK_NFD:
        opt |= UTF8PROC_DECOMPOSE;
        break;
    case TK_NFKC:
        opt |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
        break;
    case TK_NFKD:
        opt |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
        break;
    }
    /* Characters the crate's Unicode 9.0 tables do not know have no
     * decomposition, combining class 0 and no composition: each one stands
     * alone, and the text between them is normalized on its own.
     * The text is also cut before each ASCII character: a starter with no
     * decomposition that never composes with what precedes it, so that
     * normalize(x y) = normalize(x) normalize(y) in every form; an ASCII
     * character followed by another (or by the end) is copied as it is,
     * and utf8proc only sees the runs around non-ASCII text. */
    tk_buf out = {0};
    txc_status st = TXC_OK;
    size_t run = 0;
    for (size_t i = 0; i < b->n && !st;) {
        if ((unsigned char)b->p[i] < 0x80) {
            if (run < i)
                st = nf_map(b->p + run, i - run, opt, &out);
            size_t j = i; /* the last ASCII character of the stretch */
            while (j + 1 < b->n && (unsigned char)b->p[j + 1] < 0x80)
                j++;
            if (j + 1 == b->n)
                j = b->n; /* to the end: all copied */
            if (!st)
                st = tk_buf_append(&out, b->p + i, j - i);
            run = j; /* p[j] may compose with what follows: it starts the next run */
            i = j < b->n ? j + 1 : j;
            continue;
        }
        size_t cl;
        uint32_t c = tk_utf8_decode(b->p + i, &cl);
        if (c >= 0x80 && !in_unicode9(c)) {
            if (run < i)
                st = nf_map(b->p + run, i - run, opt, &out);
            if (!st)
                st = tk_buf_append(&out, b->p + i, cl);
            run = i + cl;
        }
        i += cl;
    }
    if (!st && run < b->n)
        st = nf_map(b->p + run, b->n - run, opt, &out);
    if (!st)
        st = tk_buf_append(&out, "", 0);
    if (st) {
        tk_buf_free(&out);
        return st;
    }
    tk_buf_free(b);
    *b = out;
    return TXC_OK;
}

static const tk_ulower *find_lower(uint32_t c)
{
    size_t lo = 0, hi = tk_ud_lower_n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c < tk_ud_lower[mid].cp)
            hi = mid;
        else if (c > tk_ud_lower[mid].cp)
            lo = mid + 1;
        else
            return &tk_ud_lower[mid];
    }
    return NULL;
}

txc_status tk_unicode_lowercase(tk_buf *b)
{
    size_t i = 0;
    while (i < b->n && (unsigned char)b->p[i] < 0x80) { /* ASCII in place */
        char c = b->p[i];
        if (c >= 'A' && c <= 'Z')
            b->p[i] = (char)(c + 32);
        i++;
    }
    if (i == b->n)
        return TXC_OK;
    tk_buf out = {0};
    txc_status st = tk_buf_append(&out, b->p, i);
    while (!st && i < b->n) {
        size_t cl;
        uint32_t c = tk_utf8_decode(b->p + i, &cl);
        i += cl;
        char enc[8];
        size_t el;
        const tk_ulower *lw = find_lower(c);
        if (lw) {
            el = tk_utf8_encode(lw->lower[0], enc);
            if (lw->lower[1]) /* U+0130: "i" + U+0307 */
                el += tk_utf8_encode(lw->lower[1], enc + el);
        } else {
            el = tk_utf8_encode(c, enc);
        }
        st = tk_buf_append(&out, enc, el);
    }
    if (st) {
        tk_buf_free(&out);
        return st;
    }
    tk_buf_free(b);
    *b = out;
    return TXC_OK;
}

/* Valid continuation range for the byte after lead c (Rust's Utf8Chunks). */
static void second_range(unsigned char c, unsigned char *lo, unsigned char *hi)
{
    *lo = 0x80, *hi = 0xBF;
    if (c == 0xE0)
        *lo = 0xA0;
    else if (c == 0xED)
        *hi = 0x9F;
    else if (c == 0xF0)
        *lo = 0x90;
    else if (c == 0xF4)
        *hi = 0x8F;
}

txc_status tk_utf8_lossy(const char *str, size_t n, tk_buf *out)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0, run = 0; /* run: start of the pending valid bytes */
    txc_status st = tk_buf_reserve(out, n + 1);
    while (!st && i < n) {
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need = c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2
                                               : c >= 0xF0 && c <= 0xF4 ? 3 : 0;
        size_t k = 1; /* bytes of this sequence that are valid so far */
        if (need) {
            unsigned char lo, hi;
            second_range(c, &lo, &hi);
            while (k <= need && i + k < n) {
                unsigned char d = s[i + k];
                if (k == 1 ? (d < lo || d > hi) : (d < 0x80 || d > 0xBF))
                    break;
                k++;
            }
            if (k == need + 1) {
                i += k;
                continue;
            }
        }
        /* s[i..i+k) is a maximal invalid subpart: one U+FFFD */
        st = tk_buf_append(out, str + run, i - run);
        if (!st)
            st = tk_buf_append(out, "\xEF\xBF\xBD", 3);
        i += k;
        run = i;
    }
    if (!st)
        st = tk_buf_append(out, str + run, n - run);
    return st;
}

/* ---- regexes --------------------------------------------------------------------- */

struct tk_regex {
    pcre2_code *code; /* NULL for a literal */
    char *lit;
    size_t lit_len;
};

/* Oniguruma's classes (Unicode 16, ONIG_SYNTAX_ONIGURUMA) where PCRE2's
 * differ: \s is White_Space (PCRE2 adds U+180E); \w is Letter, Mark,
 * Decimal_Number, Connector_Punctuation and a few more (PCRE2 10.42: L, N and
 * '_'); \h is a hex digit (PCRE2: horizontal space); and \d and each \p{..}
 * general category also hold the characters assigned since PCRE2's Unicode
 * version (tk_ud_props). Inside a class, a negated one (\W, \P{L}) keeps
 * PCRE2's meaning. */
#define ONIG_W "\\p{L}\\p{M}\\p{Nd}\\p{Pc}"
#define ONIG_H "0-9a-fA-F"

static bool hex4(const char *p, size_t n, size_t i)
{
    if (i + 4 > n)
        return false;
    for (size_t k = i; k < i + 4; k++)
        if (!p[k] || !strchr("0123456789abcdefABCDEF", p[k]))
            return false;
    return true;
}

static const char *prop_additions(const char *name, size_t len)
{
    for (size_t i = 0; i < tk_ud_props_n; i++)
        if (strlen(tk_ud_props[i].name) == len && !memcmp(tk_ud_props[i].name, name, len))
            return tk_ud_props[i].add;
    return NULL;
}

/* A class made of PCRE2 items plus additions: "[items add]" outside a class,
 * "items add" inside one; negated: "[^items add]" outside. Inside a class a
 * negated one keeps PCRE2's own escape `orig` (its additions cannot be
 * subtracted there). */
static txc_status emit_class(tk_buf *out, int depth, bool neg, const char *items, const char *add,
                             const char *orig, size_t orig_len)
{
    txc_status st = TXC_OK;
    if (depth && neg)
        return tk_buf_append(out, orig, orig_len);
    if (!depth)
        st = tk_buf_append(out, neg ? "[^" : "[", neg ? 2 : 1);
    if (!st)
        st = tk_buf_append(out, items, strlen(items));
    if (!st && add)
        st = tk_buf_append(out, add, strlen(add));
    if (!st && !depth)
        st = tk_buf_append(out, "]", 1);
    return st;
}

/* Rewrite an onig pattern for PCRE2; *why says what is not supported
 * (TXC_ERR_UNSUPPORTED, not recorded). */
static txc_status rewrite_pattern(const char *p, size_t n, tk_buf *out, const char **why)
{
    txc_status st = TXC_OK;
    int depth = 0; /* inside a character class (onig nests them) */
    const char *w_add = prop_additions("w", 1);
    for (size_t i = 0; i < n && !st; i++) {
        char c = p[i];
        if (c == '\\' && i + 1 < n) {
            char e = p[i + 1];
            if (e == 's' || e == 'S') {
                st = emit_class(out, depth, e == 'S', "\\p{WSpace}", NULL, "\\P{WSpace}", 10);
            } else if (e == 'w' || e == 'W') {
                st = emit_class(out, depth, e == 'W', ONIG_W, w_add, p + i, 2);
            } else if (e == 'd' || e == 'D') {
                st = emit_class(out, depth, e == 'D', "\\p{Nd}", prop_additions("Nd", 2), p + i, 2);
            } else if (e == 'h' || e == 'H') {
                st = emit_class(out, depth, e == 'H', ONIG_H, NULL, "\\H", 2);
            } else if (e == 'u' && hex4(p, n, i + 2)) { /* onig's \uHHHH */
                char x[8] = {'\\', 'x', '{', p[i + 2], p[i + 3], p[i + 4], p[i + 5], '}'};
                st = tk_buf_append(out, x, 8);
                i += 4;
            } else if ((e == 'p' || e == 'P') && i + 2 < n) {
                /* \pL, \p{L}, \p{^L}, \P{L}: general categories get the newer characters */
                size_t start = i + 2, end = start + 1, name = start, name_len = 1;
                bool neg = e == 'P';
                if (p[start] == '{') {
                    const char *close = memchr(p + start, '}', n - start);
                    end = close ? (size_t)(close - p) + 1 : n;
                    name = start + 1;
                    if (name < end && p[name] == '^')
                        neg = !neg, name++;
                    name_len = close ? (size_t)(close - p) - name : 0;
                }
                const char *add = name_len ? prop_additions(p + name, name_len) : NULL;
                if (add) {
                    char items[16];
                    snprintf(items, sizeof items, "\\p{%.*s}", (int)name_len, p + name);
                    st = emit_class(out, depth, neg, items, add, p + i, end - i);
                } else {
                    st = tk_buf_append(out, p + i, end - i);
                }
                i = end - 1;
                continue;
            } else {
                st = tk_buf_append(out, p + i, 2);
            }
            i++;
            continue;
        }
        if (c == '[') {
            /* "[:alpha:]" inside a class is a POSIX class, not a nested one */
            if (depth && i + 1 < n && p[i + 1] == ':') {
                const char *end = NULL;
                for (size_t k = i + 2; k + 1 < n; k++)
                    if (p[k] == ':' && p[k + 1] == ']') {
                        end = p + k + 2;
                        break;
                    }
                if (end) {
                    st = tk_buf_append(out, p + i, (size_t)(end - (p + i)));
                    i = (size_t)(end - p) - 1;
                    continue;
                }
            }
            depth++;
            st = tk_buf_append(out, p + i, 1);
            /* a ']' right after '[' or '[^' is a literal */
            if (!st && i + 1 < n && p[i + 1] == '^') {
                st = tk_buf_append(out, "^", 1);
                i++;
            }
            if (!st && i + 1 < n && p[i + 1] == ']') {
                st = tk_buf_append(out, "]", 1);
                i++;
            }
            continue;
        }
        if (c == ']' && depth)
            depth--;
        if (c == '&' && depth && i + 1 < n && p[i + 1] == '&') {
            *why = "onig's class intersection '&&'";
            return TXC_ERR_UNSUPPORTED;
        }
        st = tk_buf_append(out, p + i, 1);
    }
    return st;
}

txc_status tk_regex_compile(const char *pat, size_t len, bool literal, const char *what,
                            tk_regex **out)
{
    *out = NULL;
    tk_regex *re = calloc(1, sizeof *re);
    if (!re)
        return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
    if (literal && len > 0) {
        re->lit = malloc(len);
        if (!re->lit) {
            free(re);
            return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
        }
        memcpy(re->lit, pat, len);
        re->lit_len = len;
        *out = re;
        return TXC_OK;
    }
    tk_buf p = {0};
    const char *why = NULL;
    txc_status st = literal ? tk_buf_append(&p, "", 0) : rewrite_pattern(pat, len, &p, &why);
    if (st) {
        tk_buf_free(&p);
        free(re);
        if (why)
            return txc_error(st, "tokenizer.json: %s: regex '%.*s' not supported: %s", what,
                             (int)(len > 200 ? 200 : len), pat, why);
        return st;
    }
    int err;
    PCRE2_SIZE eoff;
    re->code = pcre2_compile((PCRE2_SPTR)p.p, p.n, PCRE2_UTF | PCRE2_UCP, &err, &eoff, NULL);
    tk_buf_free(&p);
    if (!re->code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        free(re);
        return txc_error(TXC_ERR_UNSUPPORTED, "tokenizer.json: %s: regex '%.*s' not supported: %s",
                         what, (int)(len > 200 ? 200 : len), pat, (const char *)msg);
    }
    (void)pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE); /* the interpreter otherwise */
    *out = re;
    return TXC_OK;
}

void tk_regex_free(tk_regex *re)
{
    if (!re)
        return;
    pcre2_code_free(re->code);
    free(re->lit);
    free(re);
}

void tk_rx_scratch_free(tk_rx_scratch *sc)
{
    pcre2_match_data_free(sc->md);
    pcre2_match_context_free(sc->mctx);
    pcre2_jit_stack_free(sc->jstack);
    memset(sc, 0, sizeof *sc);
}

static txc_status scratch_init(tk_rx_scratch *sc)
{
    if (sc->md)
        return TXC_OK;
    sc->md = pcre2_match_data_create(1, NULL);
    sc->mctx = pcre2_match_context_create(NULL);
    sc->jstack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
    if (!sc->md || !sc->mctx || !sc->jstack) {
        tk_rx_scratch_free(sc);
        return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
    }
    pcre2_jit_stack_assign(sc->mctx, NULL, sc->jstack);
    return TXC_OK;
}

txc_status tk_regex_search(const tk_regex *re, const char *s, size_t n, size_t from,
                           tk_rx_scratch *sc, bool *found, size_t *ms, size_t *me)
{
    *found = false;
    if (from > n)
        return TXC_OK;
    if (!re->code) {
        if (re->lit_len > n - from)
            return TXC_OK;
        const char *hit = tk_memmem(s + from, n - from, re->lit, re->lit_len);
        if (hit) {
            *found = true;
            *ms = (size_t)(hit - s);
            *me = *ms + re->lit_len;
        }
        return TXC_OK;
    }
    txc_status st = scratch_init(sc);
    if (st)
        return st;
    /* The input was validated (or produced) as UTF-8: no check per call,
     * which would make a scan over many matches quadratic. */
    int rc = pcre2_match(re->code, (PCRE2_SPTR)(s ? s : ""), n, from, PCRE2_NO_UTF_CHECK,
                         (pcre2_match_data *)sc->md, (pcre2_match_context *)sc->mctx);
    if (rc == PCRE2_ERROR_NOMATCH)
        return TXC_OK;
    if (rc < 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        return txc_error(rc == PCRE2_ERROR_NOMEMORY ? TXC_ERR_NOMEM : TXC_ERR_INVALID,
                         "tokenizer: regex match failed: %s", (const char *)msg);
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer((pcre2_match_data *)sc->md);
    *found = true;
    *ms = ov[0];
    *me = ov[1];
    return TXC_OK;
}

/* ---- Pattern::find_matches ----------------------------------------------------------- */

txc_status tk_segs_push(tk_segs *g, size_t start, size_t end, bool match)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 64;
        tk_seg *v = realloc(g->v, cap * sizeof *v);
        if (!v)
            return txc_error(TXC_ERR_NOMEM, "tokenizer: out of memory");
        g->v = v;
        g->cap = cap;
    }
    g->v[g->n++] = (tk_seg){start, end, match};
    return TXC_OK;
}

static bool class_has(const tk_pattern *p, uint32_t c)
{
    switch (p->cc) {
    case TK_CC_WHITESPACE:
        return tk_is_whitespace(c);
    case TK_CC_NUMERIC:
        return tk_is_numeric(c);
    case TK_CC_PUNCT:
        return tk_is_punctuation(c);
    case TK_CC_CHAR:
        return c == p->ch;
    case TK_CC_NONE:
        break;
    }
    return false;
}

txc_status tk_find_matches(const tk_pattern *p, const char *s, size_t n, bool invert,
                           tk_rx_scratch *sc, tk_segs *g)
{
    g->n = 0;
    txc_status st = TXC_OK;
    if (n == 0)
        return tk_segs_push(g, 0, 0, invert);
    if (p->cc != TK_CC_NONE) {
        /* impl Pattern for Fn(char) -> bool: each matching char is a match */
        size_t last = 0;
        for (size_t i = 0; i < n && !st;) {
            size_t cl;
            uint32_t c = tk_utf8_decode(s + i, &cl);
            if (class_has(p, c)) {
                if (last < i)
                    st = tk_segs_push(g, last, i, invert);
                if (!st)
                    st = tk_segs_push(g, i, i + cl, !invert);
                last = i + cl;
            }
            i += cl;
        }
        if (!st && last < n)
            st = tk_segs_push(g, last, n, invert);
        return st;
    }
    /* impl Pattern for &SysRegex over onig's FindMatches */
    size_t prev = 0, last_end = 0, last_match_end = SIZE_MAX;
    while (!st && last_end <= n) {
        bool found;
        size_t ms, me;
        st = tk_regex_search(p->re, s, n, last_end, sc, &found, &ms, &me);
        if (st || !found)
            break;
        if (ms == me && last_match_end == me) {
            /* no empty match right after the previous match */
            size_t cl = 1;
            if (last_end < n)
                tk_utf8_decode(s + last_end, &cl);
            last_end += cl;
            continue;
        }
        last_end = me;
        last_match_end = me;
        if (prev != ms)
            st = tk_segs_push(g, prev, ms, invert);
        if (!st)
            st = tk_segs_push(g, ms, me, !invert);
        prev = me;
    }
    if (!st && prev != n)
        st = tk_segs_push(g, prev, n, invert);
    return st;
}
