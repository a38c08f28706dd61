/* Chat templates: Python's str methods as templates call them (strip,
 * split, replace, upper / lower / title with utf8proc's case mappings and
 * Python's special cases, find, join, is*...), and the helpers the filters
 * that do the same share (see chat/chat_template_render.h). */
#include "chat/chat_template_render.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ---- string helpers ----------------------------------------------------- */
static bool cp_in(uint32_t cp, const ct_value *chars)
{
    for (size_t i = 0; i < chars->str.n;) {
        uint32_t d;
        i += ct_utf8_decode(chars->str.s + i, chars->str.n - i, &d);
        if (d == cp)
            return true;
    }
    return false;
}

ct_value *ct_str_strip(rctx *c, ct_value *s, const ct_value *chars, strip_side side)
{
    size_t cnt;
    size_t *off = ct_cp_offsets(c, s->str.s, s->str.n, &cnt);
    size_t a = 0, b = cnt;
    if (side != STRIP_RIGHT)
        while (a < b) {
            uint32_t cp;
            ct_utf8_decode(s->str.s + off[a], s->str.n - off[a], &cp);
            if (chars ? !cp_in(cp, chars) : !ct_py_isspace(cp))
                break;
            a++;
        }
    if (side != STRIP_LEFT)
        while (b > a) {
            uint32_t cp;
            ct_utf8_decode(s->str.s + off[b - 1], s->str.n - off[b - 1], &cp);
            if (chars ? !cp_in(cp, chars) : !ct_py_isspace(cp))
                break;
            b--;
        }
    return ct_mk_strn(c, s->str.s + off[a], off[b] - off[a]);
}

static bool cp_is_cased_letter(uint32_t cp)
{
    utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)cp);
    return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

/* Python's full case mappings (SpecialCasing.txt) that differ from the
 * simple ones utf8proc gives: upper (title) of a code point as up to 3 code
 * points; 0 when the simple mapping is right. */
static int special_upper(uint32_t cp, bool title, uint32_t out[3])
{
    static const struct {
        uint32_t cp, up[3], ti[3];
    } tab[] = {
        {0x00DF, {'S', 'S'}, {'S', 's'}},
        {0x0149, {0x02BC, 'N'}, {0x02BC, 'N'}},
        {0x01F0, {'J', 0x030C}, {'J', 0x030C}},
        {0x0390, {0x0399, 0x0308, 0x0301}, {0x0399, 0x0308, 0x0301}},
        {0x03B0, {0x03A5, 0x0308, 0x0301}, {0x03A5, 0x0308, 0x0301}},
        {0x0587, {0x0535, 0x0552}, {0x0535, 0x0582}},
        {0x1E96, {'H', 0x0331}, {'H', 0x0331}},
        {0x1E97, {'T', 0x0308}, {'T', 0x0308}},
        {0x1E98, {'W', 0x030A}, {'W', 0x030A}},
        {0x1E99, {'Y', 0x030A}, {'Y', 0x030A}},
        {0x1E9A, {'A', 0x02BE}, {'A', 0x02BE}},
        {0xFB00, {'F', 'F'}, {'F', 'f'}},
        {0xFB01, {'F', 'I'}, {'F', 'i'}},
        {0xFB02, {'F', 'L'}, {'F', 'l'}},
        {0xFB03, {'F', 'F', 'I'}, {'F', 'f', 'i'}},
        {0xFB04, {'F', 'F', 'L'}, {'F', 'f', 'l'}},
        {0xFB05, {'S', 'T'}, {'S', 't'}},
        {0xFB06, {'S', 'T'}, {'S', 't'}},
        {0xFB13, {0x0544, 0x0546}, {0x0544, 0x0576}},
        {0xFB14, {0x0544, 0x0535}, {0x0544, 0x0565}},
        {0xFB15, {0x0544, 0x053B}, {0x0544, 0x056B}},
        {0xFB16, {0x054E, 0x0546}, {0x054E, 0x0576}},
        {0xFB17, {0x0544, 0x053D}, {0x0544, 0x056D}},
    };
    for (size_t k = 0; k < sizeof tab / sizeof *tab; k++)
        if (tab[k].cp == cp) {
            const uint32_t *m = title ? tab[k].ti : tab[k].up;
            int n = 0;
            while (n < 3 && m[n])
                out[n] = m[n], n++;
            return n;
        }
    return 0;
}

/* Greek code points with a full upper/title mapping not in special_upper() */
static bool greek_special(uint32_t cp)
{
    if (cp == 0x1F50 || cp == 0x1F52 || cp == 0x1F54 || cp == 0x1F56)
        return true;
    if (cp >= 0x1F80 && cp <= 0x1FAF)
        return true;
    static const uint32_t more[] = {0x1FB2, 0x1FB3, 0x1FB4, 0x1FB6, 0x1FB7, 0x1FBC, 0x1FC2, 0x1FC3, 0x1FC4,
                                    0x1FC6, 0x1FC7, 0x1FCC, 0x1FD2, 0x1FD3, 0x1FD6, 0x1FD7, 0x1FE2, 0x1FE3,
                                    0x1FE4, 0x1FE6, 0x1FE7, 0x1FF2, 0x1FF3, 0x1FF4, 0x1FF6, 0x1FF7, 0x1FFC};
    for (size_t k = 0; k < sizeof more / sizeof *more; k++)
        if (more[k] == cp)
            return true;
    return false;
}

/* Case mapping per code point: utf8proc's simple mappings plus Python's
 * full ones above, İ lowercased to "i̇" and the final sigma rule of
 * str.lower(). The Greek letters with ypogegrammeni (U+1F50..U+1FFC) whose
 * full mappings are not tabled here are TXC_ERR_UNSUPPORTED. */
ct_value *ct_str_case(rctx *c, const ct_value *s, case_mode mode)
{
    sbuf b = {0};
    bool prev_cased = false, at_word_start = true;
    size_t idx = 0;
    for (size_t i = 0; i < s->str.n; idx++) {
        uint32_t cp;
        size_t w = ct_utf8_decode(s->str.s + i, s->str.n - i, &cp);
        bool to_upper = mode == CASE_UPPER || (mode == CASE_CAPITALIZE && idx == 0) ||
                        (mode == CASE_TITLE_PY && !prev_cased) || (mode == CASE_TITLE_JINJA && at_word_start);
        bool upper_is_title = mode == CASE_CAPITALIZE || mode == CASE_TITLE_PY;
        bool is_sep = mode == CASE_TITLE_JINJA && (cp == '-' || cp == '(' || cp == '{' || cp == '[' ||
                                                   cp == '<' || ct_py_isspace(cp));
        uint32_t full[3];
        int nf = 0;
        if (!is_sep && to_upper) {
            if (greek_special(cp))
                ct_rfail(c, TXC_ERR_UNSUPPORTED, 0, "the full case mapping of U+%04X is not supported", (unsigned)cp);
            nf = special_upper(cp, upper_is_title, full);
        } else if (!is_sep && mode != CASE_UPPER) {
            if (cp == 0x0130) {
                full[0] = 'i';
                full[1] = 0x0307;
                nf = 2;
            } else if (cp == 0x03A3) { /* final sigma: after a cased letter, not before one */
                uint32_t prev = 0, next = 0;
                if (i > 0) {
                    size_t q = i - 1;
                    while (q > 0 && ((unsigned char)s->str.s[q] & 0xC0) == 0x80)
                        q--;
                    ct_utf8_decode(s->str.s + q, s->str.n - q, &prev);
                }
                if (i + w < s->str.n)
                    ct_utf8_decode(s->str.s + i + w, s->str.n - i - w, &next);
                if (i > 0 && cp_is_cased_letter(prev) && !(i + w < s->str.n && cp_is_cased_letter(next))) {
                    full[0] = 0x03C2;
                    nf = 1;
                }
            }
        }
        if (nf) {
            for (int k = 0; k < nf; k++) {
                char enc[4];
                ct_sb_put(c, &b, enc, ct_utf8_encode(full[k], enc));
            }
            if (mode == CASE_TITLE_PY)
                prev_cased = cp_is_cased_letter(cp);
            if (mode == CASE_TITLE_JINJA)
                at_word_start = false;
            i += w;
            continue;
        }
        uint32_t o = cp;
        switch (mode) {
        case CASE_UPPER: o = (uint32_t)utf8proc_toupper((utf8proc_int32_t)cp); break;
        case CASE_LOWER: o = (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp); break;
        case CASE_CAPITALIZE:
            o = idx == 0 ? (uint32_t)utf8proc_totitle((utf8proc_int32_t)cp)
                         : (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp);
            break;
        case CASE_TITLE_PY: {
            bool cased = cp_is_cased_letter(cp);
            o = prev_cased ? (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp)
                           : (uint32_t)utf8proc_totitle((utf8proc_int32_t)cp);
            utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)cp);
            prev_cased = cased || cat == UTF8PROC_CATEGORY_LM || cat == UTF8PROC_CATEGORY_LO ? cased : false;
            break;
        }
        case CASE_TITLE_JINJA: {
            /* jinja's do_title: words start after runs of [-\s({\[<] */
            bool sep = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || ct_py_isspace(cp);
            if (sep) {
                o = cp;
                at_word_start = true;
            } else {
                o = at_word_start ? (uint32_t)utf8proc_toupper((utf8proc_int32_t)cp)
                                  : (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp);
                at_word_start = false;
            }
            break;
        }
        }
        char enc[4];
        if (o == cp)
            ct_sb_put(c, &b, s->str.s + i, w);
        else
            ct_sb_put(c, &b, enc, ct_utf8_encode(o, enc));
        i += w;
    }
    return ct_sb_value(c, &b);
}

const char *ct_memfind(const char *h, size_t hn, const char *nd, size_t nn)
{
    if (nn == 0)
        return h;
    if (nn > hn)
        return NULL;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == nd[0] && memcmp(h + i, nd, nn) == 0)
            return h + i;
    return NULL;
}

ct_value *ct_str_replace(rctx *c, const ct_value *s, const ct_value *old, const ct_value *nw, int64_t count)
{
    sbuf b = {0};
    if (old->str.n == 0) { /* Python inserts `new` between every character and at both ends */
        size_t cnt;
        size_t *off = ct_cp_offsets(c, s->str.s, s->str.n, &cnt);
        int64_t done = 0;
        for (size_t k = 0; k <= cnt; k++) {
            if (count < 0 || done < count) {
                ct_sb_put(c, &b, nw->str.s, nw->str.n);
                done++;
            }
            if (k < cnt)
                ct_sb_put(c, &b, s->str.s + off[k], off[k + 1] - off[k]);
        }
        return ct_sb_value(c, &b);
    }
    size_t i = 0;
    int64_t done = 0;
    while (i <= s->str.n) {
        const char *hit = (count < 0 || done < count) ? ct_memfind(s->str.s + i, s->str.n - i, old->str.s, old->str.n)
                                                     : NULL;
        if (!hit) {
            ct_sb_put(c, &b, s->str.s + i, s->str.n - i);
            break;
        }
        size_t at = (size_t)(hit - s->str.s);
        ct_sb_put(c, &b, s->str.s + i, at - i);
        ct_sb_put(c, &b, nw->str.s, nw->str.n);
        i = at + old->str.n;
        done++;
    }
    return ct_sb_value(c, &b);
}

/* str.split(sep=None, maxsplit=-1) / rsplit */
static ct_value *str_split(rctx *c, const ct_value *s, const ct_value *sep, int64_t maxsplit, bool right, int line)
{
    size_t cap = 8, n = 0;
    ct_value **items = ct_alloc(&c->ar, cap * sizeof *items);
#define PUSH(v)                                                                    \
    do {                                                                           \
        if (n == cap) {                                                            \
            ct_value **ni = ct_alloc(&c->ar, cap * 2 * sizeof *ni);                \
            memcpy(ni, items, n * sizeof *ni);                                     \
            items = ni;                                                            \
            cap *= 2;                                                              \
        }                                                                          \
        items[n++] = (v);                                                          \
    } while (0)
    if (sep && sep->kind != CT_NONE) {
        if (sep->kind != CT_STR)
            ct_rfail(c, TXC_ERR_INVALID, line, "must be str or None, not %s", ct_type_name(sep));
        if (sep->str.n == 0)
            ct_rfail(c, TXC_ERR_INVALID, line, "empty separator");
        if (right && maxsplit >= 0) {
            /* split from the right at most maxsplit times */
            size_t end = s->str.n;
            int64_t done = 0;
            size_t start_n = n;
            while (done < maxsplit) {
                const char *last = NULL;
                for (size_t i = 0; i + sep->str.n <= end; i++)
                    if (!memcmp(s->str.s + i, sep->str.s, sep->str.n))
                        last = s->str.s + i;
                if (!last)
                    break;
                size_t at = (size_t)(last - s->str.s);
                PUSH(ct_mk_strn(c, s->str.s + at + sep->str.n, end - at - sep->str.n));
                end = at;
                done++;
            }
            PUSH(ct_mk_strn(c, s->str.s, end));
            for (size_t a = start_n, b = n - 1; a < b; a++, b--) {
                ct_value *t = items[a];
                items[a] = items[b];
                items[b] = t;
            }
        } else {
            size_t i = 0;
            int64_t done = 0;
            for (;;) {
                const char *hit = (maxsplit < 0 || done < maxsplit)
                                      ? ct_memfind(s->str.s + i, s->str.n - i, sep->str.s, sep->str.n)
                                      : NULL;
                if (!hit) {
                    PUSH(ct_mk_strn(c, s->str.s + i, s->str.n - i));
                    break;
                }
                size_t at = (size_t)(hit - s->str.s);
                PUSH(ct_mk_strn(c, s->str.s + i, at - i));
                i = at + sep->str.n;
                done++;
            }
        }
    } else {
        if (right && maxsplit >= 0)
            ct_rfail(c, TXC_ERR_UNSUPPORTED, line, "rsplit() on whitespace with maxsplit is not supported");
        size_t i = 0;
        int64_t done = 0;
        for (;;) {
            while (i < s->str.n) {
                uint32_t cp;
                size_t w = ct_utf8_decode(s->str.s + i, s->str.n - i, &cp);
                if (!ct_py_isspace(cp))
                    break;
                i += w;
            }
            if (i >= s->str.n)
                break;
            if (maxsplit >= 0 && done >= maxsplit) {
                /* the rest, right-stripped of nothing: Python keeps trailing whitespace here */
                PUSH(ct_mk_strn(c, s->str.s + i, s->str.n - i));
                break;
            }
            size_t j = i;
            while (j < s->str.n) {
                uint32_t cp;
                size_t w = ct_utf8_decode(s->str.s + j, s->str.n - j, &cp);
                if (ct_py_isspace(cp))
                    break;
                j += w;
            }
            PUSH(ct_mk_strn(c, s->str.s + i, j - i));
            done++;
            i = j;
        }
    }
#undef PUSH
    ct_value *l = ct_mk_list(c, n, false);
    if (n)
        memcpy(l->list.items, items, n * sizeof *items);
    return l;
}

/* str.splitlines() */
ct_value **ct_str_splitlines(rctx *c, const char *s, size_t len, size_t *count)
{
    size_t cap = 8, n = 0;
    ct_value **items = ct_alloc(&c->ar, cap * sizeof *items);
    size_t start = 0, i = 0;
    while (i < len) {
        uint32_t cp;
        size_t w = ct_utf8_decode(s + i, len - i, &cp);
        bool br = cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || cp == 0x1c || cp == 0x1d || cp == 0x1e ||
                  cp == 0x85 || cp == 0x2028 || cp == 0x2029;
        if (br) {
            if (n == cap) {
                ct_value **ni = ct_alloc(&c->ar, cap * 2 * sizeof *ni);
                memcpy(ni, items, n * sizeof *ni);
                items = ni;
                cap *= 2;
            }
            items[n++] = ct_mk_strn(c, s + start, i - start);
            i += w;
            if (cp == '\r' && i < len && s[i] == '\n')
                i++;
            start = i;
        } else {
            i += w;
        }
    }
    if (start < len) {
        if (n == cap) {
            ct_value **ni = ct_alloc(&c->ar, (cap + 1) * sizeof *ni);
            memcpy(ni, items, n * sizeof *ni);
            items = ni;
        }
        items[n++] = ct_mk_strn(c, s + start, len - start);
    }
    *count = n;
    return items;
}


/* str methods */
ct_value *ct_call_str_method(rctx *c, int id, ct_value *s, const args *a, int line)
{
    ct_value *p[3];
    if (s->str.markup && (id == M_REPLACE || id == M_JOIN))
        ct_rfail(c, TXC_ERR_UNSUPPORTED, line, "methods of Markup strings (|safe, |escape) are not supported");
    switch (id) {
    case M_STRIP:
    case M_LSTRIP:
    case M_RSTRIP: {
        static const char *const nm[] = {"chars", NULL};
        ct_bind(c, a, nm, p, "strip()", line);
        const ct_value *chars = p[0] && p[0]->kind != CT_NONE ? ct_need_str(c, p[0], "strip()", line) : NULL;
        return ct_str_strip(c, s, chars, id == M_STRIP ? STRIP_BOTH : id == M_LSTRIP ? STRIP_LEFT : STRIP_RIGHT);
    }
    case M_SPLIT:
    case M_RSPLIT: {
        static const char *const nm[] = {"sep", "maxsplit", NULL};
        ct_bind(c, a, nm, p, "split()", line);
        return str_split(c, s, p[0], p[1] ? ct_need_int(c, p[1], "split()", line) : -1, id == M_RSPLIT, line);
    }
    case M_SPLITLINES: {
        static const char *const nm[] = {"keepends", NULL};
        ct_bind(c, a, nm, p, "splitlines()", line);
        if (p[0] && ct_truthy(p[0]))
            ct_rfail(c, TXC_ERR_UNSUPPORTED, line, "splitlines(keepends=True) is not supported");
        size_t n;
        ct_value **items = ct_str_splitlines(c, s->str.s, s->str.n, &n);
        ct_value *l = ct_mk_list(c, n, false);
        if (n)
            memcpy(l->list.items, items, n * sizeof *items);
        return l;
    }
    case M_STARTSWITH:
    case M_ENDSWITH: {
        static const char *const nm[] = {"prefix", "start", "end", NULL};
        ct_bind(c, a, nm, p, id == M_STARTSWITH ? "startswith()" : "endswith()", line);
        if (!p[0])
            ct_rfail(c, TXC_ERR_INVALID, line, "startswith()/endswith() takes at least 1 argument");
        if (p[1] || p[2])
            ct_rfail(c, TXC_ERR_UNSUPPORTED, line, "startswith()/endswith() with start/end is not supported");
        size_t nc = 1;
        ct_value **cands = &p[0];
        if (p[0]->kind == CT_LIST && p[0]->list.tuple) {
            nc = p[0]->list.n;
            cands = p[0]->list.items;
        }
        for (size_t k = 0; k < nc; k++) {
            ct_value *x = cands[k];
            if (x->kind != CT_STR)
                ct_rfail(c, TXC_ERR_INVALID, line, "startswith first arg must be str or a tuple of str, not %s",
                      ct_type_name(x));
            if (x->str.n <= s->str.n &&
                !memcmp(id == M_STARTSWITH ? s->str.s : s->str.s + s->str.n - x->str.n, x->str.s, x->str.n))
                return V_TRUE;
        }
        return V_FALSE;
    }
    case M_UPPER:
    case M_LOWER:
    case M_TITLE:
    case M_CAPITALIZE: {
        static const char *const nm[] = {NULL};
        ct_bind(c, a, nm, p, "the method", line);
        return ct_str_case(c, s,
                        id == M_UPPER ? CASE_UPPER : id == M_LOWER ? CASE_LOWER : id == M_TITLE ? CASE_TITLE_PY
                                                                                                 : CASE_CAPITALIZE);
    }
    case M_REPLACE: {
        static const char *const nm[] = {"old", "new", "count", NULL};
        ct_bind(c, a, nm, p, "replace()", line);
        if (!p[0] || !p[1])
            ct_rfail(c, TXC_ERR_INVALID, line, "replace() takes at least 2 arguments");
        return ct_str_replace(c, s, ct_need_str(c, p[0], "replace()", line), ct_need_str(c, p[1], "replace()", line),
                           p[2] ? ct_need_int(c, p[2], "replace()", line) : -1);
    }
    case M_FIND:
    case M_RFIND:
    case M_COUNT: {
        static const char *const nm[] = {"sub", "start", "end", NULL};
        ct_bind(c, a, nm, p, "find()", line);
        if (!p[0])
            ct_rfail(c, TXC_ERR_INVALID, line, "find()/count() takes at least 1 argument");
        if (p[1] || p[2])
            ct_rfail(c, TXC_ERR_UNSUPPORTED, line, "find()/count() with start/end is not supported");
        ct_value *sub = ct_need_str(c, p[0], "find()", line);
        if (id == M_COUNT) {
            if (sub->str.n == 0)
                return ct_mk_int(c, (int64_t)ct_str_cp_count(s->str.s, s->str.n) + 1);
            int64_t k = 0;
            size_t i = 0;
            const char *h;
            while ((h = ct_memfind(s->str.s + i, s->str.n - i, sub->str.s, sub->str.n))) {
                k++;
                i = (size_t)(h - s->str.s) + sub->str.n;
            }
            return ct_mk_int(c, k);
        }
        const char *hit = NULL;
        if (id == M_FIND) {
            hit = ct_memfind(s->str.s, s->str.n, sub->str.s, sub->str.n);
        } else {
            for (size_t i = 0; i + sub->str.n <= s->str.n; i++)
                if (!memcmp(s->str.s + i, sub->str.s, sub->str.n))
                    hit = s->str.s + i;
        }
        if (!hit)
            return ct_mk_int(c, -1);
        return ct_mk_int(c, (int64_t)ct_str_cp_count(s->str.s, (size_t)(hit - s->str.s)));
    }
    case M_JOIN: {
        static const char *const nm[] = {"iterable", NULL};
        ct_bind(c, a, nm, p, "join()", line);
        if (!p[0])
            ct_rfail(c, TXC_ERR_INVALID, line, "join() takes exactly one argument");
        size_t n;
        ct_value **items = ct_iterate(c, p[0], &n, line);
        sbuf b = {0};
        for (size_t i = 0; i < n; i++) {
            if (items[i]->kind != CT_STR)
                ct_rfail(c, TXC_ERR_INVALID, line, "sequence item %zu: expected str instance, %s found", i,
                      ct_type_name(items[i]));
            if (i)
                ct_sb_put(c, &b, s->str.s, s->str.n);
            ct_sb_put(c, &b, items[i]->str.s, items[i]->str.n);
        }
        return ct_sb_value(c, &b);
    }
    case M_ISDIGIT:
    case M_ISALPHA:
    case M_ISSPACE:
    case M_ISUPPER:
    case M_ISLOWER: {
        static const char *const nm[] = {NULL};
        ct_bind(c, a, nm, p, "the method", line);
        if (s->str.n == 0)
            return V_FALSE;
        bool any_cased = false;
        for (size_t i = 0; i < s->str.n;) {
            uint32_t cp;
            i += ct_utf8_decode(s->str.s + i, s->str.n - i, &cp);
            utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)cp);
            switch (id) {
            case M_ISDIGIT:
                if (cat != UTF8PROC_CATEGORY_ND && !(cp >= 0xB2 && cp <= 0xB3) && cp != 0xB9)
                    return V_FALSE;
                break;
            case M_ISALPHA:
                if (cat < UTF8PROC_CATEGORY_LU || cat > UTF8PROC_CATEGORY_LO)
                    return V_FALSE;
                break;
            case M_ISSPACE:
                if (!ct_py_isspace(cp))
                    return V_FALSE;
                break;
            case M_ISUPPER:
                if (cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT)
                    return V_FALSE;
                if (cat == UTF8PROC_CATEGORY_LU)
                    any_cased = true;
                break;
            case M_ISLOWER:
                if (cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LT)
                    return V_FALSE;
                if (cat == UTF8PROC_CATEGORY_LL)
                    any_cased = true;
                break;
            }
        }
        return V_BOOL(id == M_ISUPPER || id == M_ISLOWER ? any_cased : true);
    }
    case M_REMOVEPREFIX:
    case M_REMOVESUFFIX: {
        static const char *const nm[] = {"affix", NULL};
        ct_bind(c, a, nm, p, "removeprefix()", line);
        if (!p[0])
            ct_rfail(c, TXC_ERR_INVALID, line, "removeprefix()/removesuffix() takes exactly one argument");
        ct_value *x = ct_need_str(c, p[0], "removeprefix()", line);
        if (x->str.n <= s->str.n) {
            if (id == M_REMOVEPREFIX && !memcmp(s->str.s, x->str.s, x->str.n))
                return ct_mk_strn(c, s->str.s + x->str.n, s->str.n - x->str.n);
            if (id == M_REMOVESUFFIX && !memcmp(s->str.s + s->str.n - x->str.n, x->str.s, x->str.n))
                return ct_mk_strn(c, s->str.s, s->str.n - x->str.n);
        }
        return s;
    }
    }
    ct_rfail(c, TXC_ERR_INTERNAL, line, "unknown str method %d", id);
}
