/* Chat templates: the Jinja lexer (see chat/chat_template_syntax.h).
 *
 * The lexer follows jinja2.lexer with the environment transformers builds:
 * trim_blocks (the first newline after a block or comment tag is removed),
 * lstrip_blocks (spaces and tabs from the start of a line up to a block or
 * comment tag are removed), `-` / `+` whitespace control on tags, newlines
 * normalized to "\n" and one trailing newline of the source dropped
 * (keep_trailing_newline=False). */
#include "chat/chat_template_syntax.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Noreturn void ct_perr(pctx *c, txc_status st, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ct_verror(512, st, line, fmt, ap); /* line >= 1: every token has one */
    va_end(ap);
    longjmp(c->fail, 1);
}

static void push_tok(pctx *c, tok t)
{
    if (c->ntoks == c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 256;
        tok *nt = realloc(c->toks, nc * sizeof *nt);
        if (!nt) {
            txc_error(TXC_ERR_NOMEM, "chat template: out of memory");
            longjmp(c->fail, 1);
        }
        c->toks = nt;
        c->cap = nc;
    }
    c->toks[c->ntoks++] = t;
}

static int count_lines(const char *s, size_t n)
{
    int k = 0;
    for (size_t i = 0; i < n; i++)
        k += s[i] == '\n';
    return k;
}

/* Bytes of Python whitespace at the end of s[0..n). */
static size_t rstrip_len(const char *s, size_t n)
{
    size_t e = n;
    while (e > 0) {
        size_t b = e - 1;
        while (b > 0 && ((unsigned char)s[b] & 0xC0) == 0x80 && e - b < 4)
            b--;
        uint32_t cp;
        ct_utf8_decode(s + b, e - b, &cp);
        if (!ct_py_isspace(cp))
            break;
        e = b;
    }
    return e;
}

static size_t skip_space(const char *s, size_t i, size_t n)
{
    while (i < n) {
        uint32_t cp;
        size_t k = ct_utf8_decode(s + i, n - i, &cp);
        if (!ct_py_isspace(cp))
            break;
        i += k;
    }
    return i;
}

static void emit_data(pctx *c, const char *s, size_t n, int line)
{
    if (n == 0)
        return;
    tok t = {.t = T_DATA, .line = line, .s = ct_strndup(c->ar, s, n), .n = n};
    push_tok(c, t);
}

/* Decode a string literal body (Python unicode-escape on the ASCII escapes). */
static void lex_string(pctx *c, const char *s, size_t n, int line, tok *t)
{
    char *o = ct_alloc(c->ar, n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) {
            o[k++] = s[i];
            continue;
        }
        char e = s[++i];
        uint32_t cp;
        int nd = 0;
        switch (e) {
        case '\n': continue;
        case '\\': o[k++] = '\\'; continue;
        case '\'': o[k++] = '\''; continue;
        case '"': o[k++] = '"'; continue;
        case 'a': o[k++] = '\a'; continue;
        case 'b': o[k++] = '\b'; continue;
        case 'f': o[k++] = '\f'; continue;
        case 'n': o[k++] = '\n'; continue;
        case 'r': o[k++] = '\r'; continue;
        case 't': o[k++] = '\t'; continue;
        case 'v': o[k++] = '\v'; continue;
        case 'x': nd = 2; break;
        case 'u': nd = 4; break;
        case 'U': nd = 8; break;
        case 'N': ct_perr(c, TXC_ERR_UNSUPPORTED, line, "the string escape \\N{...} is not supported");
        default:
            if (e >= '0' && e <= '7') {
                cp = 0;
                int m = 0;
                while (m < 3 && i < n && s[i] >= '0' && s[i] <= '7') {
                    cp = cp * 8 + (uint32_t)(s[i] - '0');
                    i++, m++;
                }
                i--;
                k += ct_utf8_encode(cp, o + k); /* at most 3 bytes from 4 source bytes */
                continue;
            }
            o[k++] = '\\';
            o[k++] = e;
            continue;
        }
        cp = 0;
        for (int m = 0; m < nd; m++) {
            char h = i + 1 + (size_t)m < n ? s[i + 1 + (size_t)m] : 0;
            int v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
            if (v < 0)
                ct_perr(c, TXC_ERR_FORMAT, line, "truncated \\%c escape in a string", e);
            cp = cp * 16 + (uint32_t)v;
        }
        if (cp > 0x10FFFF)
            ct_perr(c, TXC_ERR_FORMAT, line, "illegal Unicode character in a string escape");
        i += (size_t)nd;
        k += ct_utf8_encode(cp, o + k); /* \xhh: 2 bytes from 4, \u: 3 from 6, \U: 4 from 10 */
    }
    o[k] = '\0';
    t->t = T_STR;
    t->s = o;
    t->n = k;
}

static const char *const ops3[] = {"//", "**", "==", "!=", "<=", ">=", NULL};
static const char ops1[] = "+-/*%~<>=()[]{},.:|";

/* Tokens of one {{ }} or {% %} tag starting at i (after the opener). Returns
 * the index after the closer (and its whitespace handling). */
static size_t lex_tag(pctx *c, size_t i, bool block, int *line, bool *ends_nl)
{
    const char *s = c->src;
    size_t n = c->len;
    int depth = 0;
    int open_line = *line;
    for (;;) {
        size_t j = skip_space(s, i, n);
        *line += count_lines(s + i, j - i);
        i = j;
        if (i >= n)
            ct_perr(c, TXC_ERR_FORMAT, open_line, "unexpected end of template, expected '%s' to close the tag",
                 block ? "%}" : "}}");
        char ch = s[i];
        if (depth == 0) {
            char e1 = block ? '%' : '}';
            bool minus = ch == '-' && i + 2 < n + 0 && s[i + 1] == e1 && s[i + 2] == '}';
            bool plus = block && ch == '+' && i + 2 < n + 0 && s[i + 1] == '%' && s[i + 2] == '}';
            bool plain = ch == e1 && i + 1 < n && s[i + 1] == '}';
            if (minus || plus || plain) {
                push_tok(c, (tok){.t = block ? T_BEND : T_VEND, .line = *line});
                i += plain ? 2 : 3;
                *ends_nl = false;
                if (minus) {
                    size_t k = skip_space(s, i, n);
                    *line += count_lines(s + i, k - i);
                    *ends_nl = k > i && s[k - 1] == '\n';
                    i = k;
                } else if (plain && block && i < n && s[i] == '\n') { /* trim_blocks */
                    i++;
                    (*line)++;
                    *ends_nl = true;
                }
                return i;
            }
        }
        tok t = {.line = *line};
        if (ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) {
            size_t k = i;
            while (k < n && (s[k] == '_' || (s[k] >= 'a' && s[k] <= 'z') || (s[k] >= 'A' && s[k] <= 'Z') ||
                             (s[k] >= '0' && s[k] <= '9')))
                k++;
            t.t = T_NAME;
            t.s = ct_strndup(c->ar, s + i, k - i);
            t.n = k - i;
            i = k;
        } else if (ch >= '0' && ch <= '9') {
            char buf[128];
            size_t b = 0, k = i;
            bool isf = false;
            while (k < n && ((s[k] >= '0' && s[k] <= '9') || s[k] == '_') && b < 100) {
                if (s[k] != '_')
                    buf[b++] = s[k];
                k++;
            }
            if (k + 1 < n && s[k] == '.' && s[k + 1] >= '0' && s[k + 1] <= '9') {
                isf = true;
                buf[b++] = s[k++];
                while (k < n && ((s[k] >= '0' && s[k] <= '9') || s[k] == '_') && b < 100) {
                    if (s[k] != '_')
                        buf[b++] = s[k];
                    k++;
                }
            }
            if (k < n && (s[k] == 'e' || s[k] == 'E')) {
                size_t q = k + 1;
                if (q < n && (s[q] == '+' || s[q] == '-'))
                    q++;
                if (q < n && s[q] >= '0' && s[q] <= '9') {
                    isf = true;
                    buf[b++] = 'e';
                    for (size_t r = k + 1; r < q; r++)
                        buf[b++] = s[r];
                    k = q;
                    while (k < n && s[k] >= '0' && s[k] <= '9' && b < 120)
                        buf[b++] = s[k++];
                }
            }
            buf[b] = '\0';
            if (b >= 100)
                ct_perr(c, TXC_ERR_UNSUPPORTED, *line, "number literal too long");
            if (isf) {
                t.t = T_FLOAT;
                t.f = strtod(buf, NULL);
            } else {
                t.t = T_INT;
                errno = 0;
                t.i = strtoll(buf, NULL, 10);
                if (errno == ERANGE && strcmp(buf, "9223372036854775808") == 0) {
                    /* 2^63: only negated (INT64_MIN) a 64-bit integer; the parser
                     * folds "-" into it (T_INT with n = 1), else a render error */
                    t.i = INT64_MIN;
                    t.n = 1;
                } else if (errno == ERANGE) {
                    ct_perr(c, TXC_ERR_UNSUPPORTED, *line, "integer literal %s is larger than 64 bits", buf);
                }
            }
            i = k;
        } else if (ch == '\'' || ch == '"') {
            size_t k = i + 1;
            while (k < n && s[k] != ch) {
                if (s[k] == '\\' && k + 1 < n)
                    k++;
                k++;
            }
            if (k >= n)
                ct_perr(c, TXC_ERR_FORMAT, *line, "unterminated string literal");
            lex_string(c, s + i + 1, k - i - 1, *line, &t);
            *line += count_lines(s + i, k - i);
            i = k + 1;
        } else {
            const char *op = NULL;
            for (int q = 0; ops3[q]; q++)
                if (i + 1 < n && s[i] == ops3[q][0] && s[i + 1] == ops3[q][1])
                    op = ops3[q];
            if (op) {
                i += 2;
            } else if (ch && strchr(ops1, ch)) {
                op = ct_strndup(c->ar, s + i, 1);
                i += 1;
                if (ch == '(' || ch == '[' || ch == '{')
                    depth++;
                else if (ch == ')' || ch == ']' || ch == '}') {
                    if (depth == 0)
                        ct_perr(c, TXC_ERR_FORMAT, *line, "unexpected '%c'", ch);
                    depth--;
                }
            } else {
                uint32_t cp;
                ct_utf8_decode(s + i, n - i, &cp);
                ct_perr(c, TXC_ERR_FORMAT, *line, "unexpected char U+%04X '%.*s'", (unsigned)cp,
                     (int)ct_utf8_decode(s + i, n - i, &cp), s + i);
            }
            t.t = T_OP;
            t.s = op;
            t.n = strlen(op);
        }
        push_tok(c, t);
    }
}

void ct_lex(pctx *c)
{
    const char *s = c->src;
    size_t n = c->len;
    size_t i = 0;
    int line = 1;
    bool line_starting = true;
    while (i < n) {
        /* the next tag opener */
        size_t j = i;
        int kind = 0; /* '{', '%', '#' */
        while (j + 1 < n) {
            if (s[j] == '{' && (s[j + 1] == '{' || s[j + 1] == '%' || s[j + 1] == '#')) {
                kind = s[j + 1];
                break;
            }
            j++;
        }
        if (!kind) {
            emit_data(c, s + i, n - i, line);
            break;
        }
        size_t after = j + 2;
        char sign = after < n && (s[after] == '-' || s[after] == '+') ? s[after] : 0;
        size_t text_end = j;
        if (sign == '-') {
            text_end = i + rstrip_len(s + i, j - i);
        } else if (sign != '+' && kind != '{') { /* lstrip_blocks */
            size_t l = j;
            while (l > i && s[l - 1] != '\n')
                l--;
            bool has_nl = l > i;
            if (has_nl || line_starting) {
                size_t q = l;
                while (q < j && (s[q] == ' ' || s[q] == '\t'))
                    q++;
                if (q == j)
                    text_end = l;
            }
        }
        emit_data(c, s + i, text_end - i, line);
        line += count_lines(s + i, j - i);
        int tag_line = line;
        i = after + (sign ? 1 : 0);
        if (kind == '#') {
            size_t k = i;
            while (k + 1 < n && !(s[k] == '#' && s[k + 1] == '}'))
                k++;
            if (k + 1 >= n)
                ct_perr(c, TXC_ERR_FORMAT, tag_line, "missing end of comment tag");
            char pre = k > i ? s[k - 1] : 0;
            line += count_lines(s + i, k - i);
            k += 2;
            line_starting = false;
            if (pre == '-') {
                size_t q = skip_space(s, k, n);
                line += count_lines(s + k, q - k);
                line_starting = q > k && s[q - 1] == '\n';
                k = q;
            } else if (pre != '+' && k < n && s[k] == '\n') {
                k++;
                line++;
                line_starting = true;
            }
            i = k;
            continue;
        }
        if (kind == '%') { /* {% raw %} is not supported: say so rather than misparse */
            size_t q = skip_space(s, i, n);
            if (q + 3 <= n && memcmp(s + q, "raw", 3) == 0 && (q + 3 == n || !((s[q + 3] >= 'a' && s[q + 3] <= 'z') || s[q + 3] == '_')))
                ct_perr(c, TXC_ERR_UNSUPPORTED, tag_line, "'{%% raw %%}' is not supported");
        }
        push_tok(c, (tok){.t = kind == '%' ? T_BBEGIN : T_VBEGIN, .line = tag_line});
        i = lex_tag(c, i, kind == '%', &line, &line_starting);
    }
    push_tok(c, (tok){.t = T_EOF, .line = line});
}
