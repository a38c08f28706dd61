/* Chat templates: the filters of `x | name(...)`, as jinja2.filters, and
 * int() / float() of a str as Python parses them (see
 * chat/chat_template_render.h). */
#include "chat/chat_template_render.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ---- filters ------------------------------------------------------------ */
enum {
    FL_TRIM,
    FL_LENGTH,
    FL_FIRST,
    FL_LAST,
    FL_UPPER,
    FL_LOWER,
    FL_CAPITALIZE,
    FL_TITLE,
    FL_REPLACE,
    FL_TOJSON,
    FL_JOIN,
    FL_DEFAULT,
    FL_ITEMS,
    FL_SELECTATTR,
    FL_REJECTATTR,
    FL_SELECT,
    FL_REJECT,
    FL_MAP,
    FL_LIST,
    FL_STRING,
    FL_INT,
    FL_FLOAT,
    FL_ABS,
    FL_INDENT,
    FL_SAFE,
    FL_ESCAPE,
    FL_REVERSE,
    FL_SORT,
    FL_UNIQUE,
    FL_SUM,
    FL_MIN,
    FL_MAX,
    FL_ROUND,
    FL_DICTSORT,
};
static const ct_named_id filters[] = {
    {"trim", FL_TRIM},         {"length", FL_LENGTH},         {"count", FL_LENGTH},       {"first", FL_FIRST},
    {"last", FL_LAST},         {"upper", FL_UPPER},           {"lower", FL_LOWER},        {"capitalize", FL_CAPITALIZE},
    {"title", FL_TITLE},       {"replace", FL_REPLACE},       {"tojson", FL_TOJSON},      {"join", FL_JOIN},
    {"default", FL_DEFAULT},   {"d", FL_DEFAULT},             {"items", FL_ITEMS},        {"selectattr", FL_SELECTATTR},
    {"rejectattr", FL_REJECTATTR}, {"select", FL_SELECT},     {"reject", FL_REJECT},      {"map", FL_MAP},
    {"list", FL_LIST},         {"string", FL_STRING},         {"int", FL_INT},            {"float", FL_FLOAT},
    {"abs", FL_ABS},           {"indent", FL_INDENT},         {"safe", FL_SAFE},          {"escape", FL_ESCAPE},
    {"e", FL_ESCAPE},          {"forceescape", FL_ESCAPE},    {"reverse", FL_REVERSE},    {"sort", FL_SORT},
    {"unique", FL_UNIQUE},     {"sum", FL_SUM},               {"min", FL_MIN},            {"max", FL_MAX},
    {"round", FL_ROUND},       {"dictsort", FL_DICTSORT},
};

int ct_filter_id(const char *name) { return ct_id_of(filters, sizeof filters / sizeof *filters, name); }

/* attribute path "a.b.0" of jinja's make_attrgetter */
static ct_value *attr_path(rctx *c, ct_value *item, ct_value *attr, int line)
{
    if (attr->kind == CT_INT)
        return ct_getitem_v(c, item, attr, line);
    ct_value *s = ct_need_str(c, attr, "attribute", line);
    size_t i = 0;
    ct_value *v = item;
    while (i <= s->str.n) {
        const char *dot = memchr(s->str.s + i, '.', s->str.n - i);
        size_t e = dot ? (size_t)(dot - s->str.s) : s->str.n;
        const char *part = s->str.s + i;
        size_t pn = e - i;
        bool digits = pn > 0;
        for (size_t k = 0; k < pn; k++)
            digits = digits && part[k] >= '0' && part[k] <= '9';
        errno = 0;
        int64_t k = digits ? strtoll(ct_strndup(&c->ar, part, pn), NULL, 10) : 0;
        if (digits && errno == ERANGE && v->kind != CT_UNDEF) /* no item has an index past 64 bits */
            v = ct_mk_undef(c, "no item at an index that large");
        else
            v = ct_getitem_v(c, v, digits ? ct_mk_int(c, k) : ct_mk_strn(c, part, pn), line);
        i = e + 1;
        if (!dot)
            break;
    }
    return v;
}

/* case-insensitive ordering key of sort/unique/min/max (jinja lowers strings) */
static ct_value *sort_key(rctx *c, ct_value *v, ct_value *attr, bool case_sensitive, int line)
{
    if (attr)
        v = attr_path(c, v, attr, line);
    if (!case_sensitive && v->kind == CT_STR)
        v = ct_str_case(c, v, CASE_LOWER);
    return v;
}

/* Python's hash() as |unique's set needs it: equal values (as equal() sees
 * them: 1 == 1.0 == true) hash alike; a list or dict (also inside a tuple)
 * is unhashable, a TypeError as in Python. */
static uint64_t hash_mix(uint64_t h, uint64_t x)
{
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 29);
}

static uint64_t value_hash(rctx *c, const ct_value *v, int line)
{
    switch (v->kind) {
    case CT_UNDEF: return 1; /* jinja2.Undefined: all equal */
    case CT_NONE: return 2;
    case CT_BOOL:
    case CT_INT:
    case CT_FLOAT: {
        double d = num_f(v);
        if (d != d)
            return hash_mix(3, (uint64_t)(uintptr_t)v); /* NaN equals nothing */
        if (d == 0)
            d = 0; /* -0.0 == 0.0 */
        uint64_t bits;
        memcpy(&bits, &d, sizeof bits);
        return hash_mix(3, bits);
    }
    case CT_STR: {
        uint64_t h = 1469598103934665603ull;
        for (size_t i = 0; i < v->str.n; i++)
            h = (h ^ (unsigned char)v->str.s[i]) * 1099511628211ull;
        return hash_mix(4, h);
    }
    case CT_LIST: {
        if (!v->list.tuple && !v->list.range)
            ct_rfail(c, TXC_ERR_INVALID, line, "unhashable type: 'list'");
        ct_depth_enter(c);
        uint64_t h = 5;
        for (size_t i = 0; i < v->list.n; i++)
            h = hash_mix(h, value_hash(c, v->list.items[i], line));
        c->vdepth--;
        return h;
    }
    case CT_DICT: ct_rfail(c, TXC_ERR_INVALID, line, "unhashable type: 'dict'");
    default: return hash_mix(6, (uint64_t)(uintptr_t)v); /* by identity, as equal() */
    }
}

/* jinja2's do_unique: the items whose key was not seen before, in order (a
 * hash set of the keys: linear time). */
static size_t unique_items(rctx *c, ct_value **items, ct_value **keys, size_t n, ct_value **out, int line)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    size_t *slot = ct_alloc(&c->ar, cap * sizeof *slot); /* kept index + 1; 0: empty */
    uint64_t *hs = ct_alloc(&c->ar, (n ? n : 1) * sizeof *hs);
    memset(slot, 0, cap * sizeof *slot);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        tick(c, 1, line);
        uint64_t h = value_hash(c, keys[i], line);
        size_t j = (size_t)h & (cap - 1);
        bool seen = false;
        for (; slot[j]; j = (j + 1) & (cap - 1)) {
            size_t k = slot[j] - 1;
            if (hs[k] == h && ct_equal(c, keys[i], keys[k])) {
                seen = true;
                break;
            }
        }
        if (seen)
            continue;
        hs[i] = h;
        slot[j] = i + 1;
        out[m++] = items[i];
    }
    return m;
}

/* A stable merge sort of items by keys (Python's sorted() is stable, and
 * reverse=True keeps equal items in their order). */
static void sort_items(rctx *c, ct_value **items, ct_value **keys, size_t n, bool rev, int line)
{
    if (n < 2)
        return;
    ct_value **ti = ct_alloc(&c->ar, n * sizeof *ti), **tk = ct_alloc(&c->ar, n * sizeof *tk);
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t a = lo, b = mid, k = lo;
            while (a < mid && b < hi) {
                int r = ct_compare(c, keys[b], keys[a], "<", line);
                bool take_right = rev ? r > 0 : r < 0;
                size_t from = take_right ? b++ : a++;
                ti[k] = items[from];
                tk[k++] = keys[from];
            }
            for (; a < mid; a++, k++)
                ti[k] = items[a], tk[k] = keys[a];
            for (; b < hi; b++, k++)
                ti[k] = items[b], tk[k] = keys[b];
        }
        memcpy(items, ti, n * sizeof *ti);
        memcpy(keys, tk, n * sizeof *tk);
    }
}

/* ---- int() / float() of a str, as Python parses them -------------------- */
/* _PyUnicode_TransformDecimalAndSpaceToASCII: ASCII stays, other whitespace
 * (str.isspace: bidi class WS/B/S or category Zs) becomes ' ', other decimal
 * digits (category Nd) their ASCII digit, anything else '?' (so it fails);
 * then Py_ISSPACE (" \t\n\v\f\r") is stripped from both ends. */
static char *py_num_ascii(rctx *c, const ct_value *v)
{
    char *s = ct_alloc(&c->ar, v->str.n + 1);
    size_t k = 0;
    for (size_t i = 0; i < v->str.n;) {
        uint32_t cp;
        i += ct_utf8_decode(v->str.s + i, v->str.n - i, &cp);
        if (cp < 127) {
            s[k++] = cp ? (char)cp : '?';
            continue;
        }
        const utf8proc_property_t *pr = utf8proc_get_property((utf8proc_int32_t)cp);
        if (pr->category == UTF8PROC_CATEGORY_ZS || pr->bidi_class == UTF8PROC_BIDI_CLASS_WS ||
            pr->bidi_class == UTF8PROC_BIDI_CLASS_B || pr->bidi_class == UTF8PROC_BIDI_CLASS_S) {
            s[k++] = ' ';
        } else if (pr->category == UTF8PROC_CATEGORY_ND) {
            /* Unicode encodes each set of decimal digits as a run 0..9 */
            uint32_t z = cp;
            while (z > 0 && utf8proc_category((utf8proc_int32_t)(z - 1)) == UTF8PROC_CATEGORY_ND)
                z--;
            s[k++] = (char)('0' + (cp - z) % 10);
        } else {
            s[k++] = '?';
        }
    }
    while (k > 0 && strchr(" \t\n\v\f\r", s[k - 1]))
        k--;
    s[k] = '\0';
    while (*s && strchr(" \t\n\v\f\r", *s))
        s++;
    return s;
}

static int py_digit(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A' + 10;
    return 99;
}

/* Python's int(s, base) (PyLong_FromString), base 0 or 2..36, on the output
 * of py_num_ascii: a sign, a 0x/0o/0b prefix matching the base (base 0:
 * chosen by it, and "0..." without one must be zero), digits with single
 * underscores between them (one also allowed right after a prefix). false:
 * Python raises ValueError. A value outside int64 is an error here (Python
 * has big ints). */
static bool py_parse_int(rctx *c, const char *s, int base, int64_t *out, int line)
{
    const char *text = s;
    bool neg = false, only_zero = false;
    if (*s == '+' || *s == '-')
        neg = *s++ == '-';
    if (base == 0) {
        if (s[0] != '0')
            base = 10;
        else if (s[1] == 'x' || s[1] == 'X')
            base = 16;
        else if (s[1] == 'o' || s[1] == 'O')
            base = 8;
        else if (s[1] == 'b' || s[1] == 'B')
            base = 2;
        else
            only_zero = true, base = 10;
    }
    if (s[0] == '0' && ((base == 16 && (s[1] == 'x' || s[1] == 'X')) || (base == 8 && (s[1] == 'o' || s[1] == 'O')) ||
                        (base == 2 && (s[1] == 'b' || s[1] == 'B')))) {
        s += 2;
        if (*s == '_')
            s++;
    }
    uint64_t x = 0;
    bool over = false;
    size_t nd = 0;
    for (;; s++) {
        if (*s == '_') {
            if (nd == 0 || py_digit(s[1]) >= base) /* leading, doubled or trailing */
                return false;
            continue;
        }
        int d = py_digit(*s);
        if (d >= base)
            break;
        nd++;
        if (x > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
            over = true;
        else
            x = x * (uint64_t)base + (uint64_t)d;
    }
    if (nd == 0 || *s || (only_zero && x))
        return false;
    if (over || x > (uint64_t)INT64_MAX + neg)
        ct_rfail(c, TXC_ERR_UNSUPPORTED, line, "int: '%s' is outside the 64-bit integer range", text);
    *out = neg ? (int64_t)(0 - x) : (int64_t)x;
    return true;
}

/* Python's float(s) on the output of py_num_ascii: [sign] then
 * inf/infinity/nan (any case) or digits[.digits][e[sign]digits] (either
 * side of the point may be empty, not both), underscores only between two
 * digits. false: Python raises ValueError. */
static bool ascii_ieq(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if ((*a | 0x20) != *b)
            return false;
    return !*a && !*b;
}

static bool py_parse_float(rctx *c, const char *s, double *out)
{
    const char *p = s;
    if (*p == '+' || *p == '-')
        p++;
    if (ascii_ieq(p, "inf") || ascii_ieq(p, "infinity") || ascii_ieq(p, "nan")) {
        *out = strtod(s, NULL);
        return true;
    }
    char *clean = ct_alloc(&c->ar, strlen(s) + 1);
    size_t k = 0, mant = 0;
    if (p != s)
        clean[k++] = *s;
    for (int part = 0; part < 3; part++) { /* integer digits, fraction digits, exponent digits */
        if (part == 1) {
            if (*p != '.')
                continue;
            clean[k++] = *p++;
        } else if (part == 2) {
            if (*p != 'e' && *p != 'E')
                break;
            if (!mant)
                return false;
            clean[k++] = *p++;
            if (*p == '+' || *p == '-')
                clean[k++] = *p++;
        }
        size_t nd = 0;
        for (;; p++) {
            if (*p == '_' && nd && p[1] >= '0' && p[1] <= '9')
                continue;
            if (*p < '0' || *p > '9')
                break;
            clean[k++] = *p;
            nd++;
        }
        if (part == 2 && !nd)
            return false;
        if (part < 2)
            mant += nd;
    }
    if (*p || !mant)
        return false;
    clean[k] = '\0';
    *out = strtod(clean, NULL);
    return true;
}

ct_value *ct_apply_filter(rctx *c, const ct_node *f, ct_value *v, const args *a)
{
    int line = f->line;
    ct_value *p[4] = {0};
    const char *what = f->name;
    switch (f->id) {
    case FL_TRIM: {
        static const char *const nm[] = {"chars", NULL};
        ct_bind(c, a, nm, p, what, line);
        ct_value *s = ct_str_of(c, v, line);
        return ct_str_strip(c, s, p[0] && p[0]->kind != CT_NONE ? ct_need_str(c, p[0], what, line) : NULL, STRIP_BOTH);
    }
    case FL_LENGTH: {
        static const char *const nm[] = {NULL};
        ct_bind(c, a, nm, p, what, line);
        return ct_mk_int(c, (int64_t)ct_length_of(c, v, line));
    }
    case FL_FIRST:
    case FL_LAST: {
        static const char *const nm[] = {NULL};
        ct_bind(c, a, nm, p, what, line);
        size_t n;
        ct_value **items = ct_iterate(c, v, &n, line);
        if (n == 0)
            return ct_mk_undef(c, "No %s item, sequence was empty.", f->id == FL_FIRST ? "first" : "last");
        return f->id == FL_FIRST ? items[0] : items[n - 1];
    }
    case FL_UPPER:
    case FL_LOWER:
    case FL_CAPITALIZE:
    case FL_TITLE: {
        static const char *const nm[] = {NULL};
        ct_bind(c, a, nm, p, what, line);
        ct_value *s = ct_str_of(c, v, line);
        return ct_str_case(c, s,
                        f->id == FL_UPPER ? CASE_UPPER : f->id == FL_LOWER ? CASE_LOWER
                                                     : f->id == FL_TITLE ? CASE_TITLE_JINJA : CASE_CAPITALIZE);
    }
    case FL_REPLACE: {
        static const char *const nm[] = {"old", "new", "count", NULL};
        ct_bind(c, a, nm, p, what, line);
        if (!p[0] || !p[1])
            ct_rfail(c, TXC_ERR_INVALID, line, "replace needs 'old' and 'new'");
        return ct_str_replace(c, ct_str_of(c, v, line), ct_str_of(c, p[0], line), ct_str_of(c, p[1], line),
                           p[2] && p[2]->kind != CT_NONE ? ct_need_int(c, p[2], what, line) : -1);
    }
    case FL_TOJSON: {
        static const char *const nm[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
        ct_bind(c, a, nm, p, what, line);
        jopts o = {0};
        o.ascii = p[0] && ct_truthy(p[0]);
        sbuf ind = {0};
        if (p[1] && p[1]->kind != CT_NONE) {
            if (p[1]->kind == CT_STR) {
                ct_sb_put(c, &ind, p[1]->str.s, p[1]->str.n);
            } else {
                int64_t k = ct_need_int(c, p[1], what, line);
                for (int64_t q = 0; q < k && q < 64; q++)
                    ct_sb_put(c, &ind, " ", 1);
            }
            o.indent = ind.p ? ind.p : "";
            o.indent_n = ind.n;
        }
        o.item_sep = o.indent ? "," : ", ";
        o.key_sep = ": ";
        if (p[2] && p[2]->kind != CT_NONE) {
            size_t m;
            ct_value **sp = ct_iterate(c, p[2], &m, line);
            if (m != 2 || sp[0]->kind != CT_STR || sp[1]->kind != CT_STR)
                ct_rfail(c, TXC_ERR_INVALID, line, "tojson: separators must be a pair of strings");
            o.item_sep = sp[0]->str.s;
            o.item_sep_n = sp[0]->str.n;
            o.key_sep = sp[1]->str.s;
            o.key_sep_n = sp[1]->str.n;
        } else {
            o.item_sep_n = strlen(o.item_sep);
            o.key_sep_n = strlen(o.key_sep);
        }
        o.sort_keys = p[3] && ct_truthy(p[3]);
        sbuf b = {0};
        ct_json_dump(c, &b, v, &o, 0, line);
        return ct_sb_value(c, &b);
    }
    case FL_JOIN: {
        static const char *const nm[] = {"d", "attribute", NULL};
        ct_bind(c, a, nm, p, what, line);
        size_t n;
        ct_value **items = ct_iterate(c, v, &n, line);
        ct_value *sep = p[0] ? ct_str_of(c, p[0], line) : NULL;
        sbuf b = {0};
        for (size_t i = 0; i < n; i++) {
            if (i && sep)
                ct_sb_put(c, &b, sep->str.s, sep->str.n);
            ct_to_str(c, &b, p[1] ? attr_path(c, items[i], p[1], line) : items[i], line);
        }
        return ct_sb_value(c, &b);
    }
    case FL_DEFAULT: {
        static const char *const nm[] = {"default_value", "boolean", NULL};
        ct_bind(c, a, nm, p, what, line);
        bool use = v->kind == CT_UNDEF || (p[1] && ct_truthy(p[1]) && !ct_truthy(v));
        return use ? (p[0] ? p[0] : ct_mk_strn(c, "", 0)) : v;
    }
    case FL_ITEMS: {
        static const char *const nm[] = {NULL};
        ct_bind(c, a, nm, p, what, line);
        if (v->kind == CT_UNDEF)
            return ct_mk_list(c, 0, false);
        if (v->kind != CT_DICT)
            ct_rfail(c, TXC_ERR_INVALID, line, "Can only get item pairs from a mapping.");
        return ct_dict_items_list(c, v, 0);
    }
    case FL_SELECTATTR:
    case FL_REJECTATTR:
    case FL_SELECT:
    case FL_REJECT: {
        bool byattr = f->id == FL_SELECTATTR || f->id == FL_REJECTATTR;
        bool keep_true = f->id == FL_SELECTATTR || f->id == FL_SELECT;
        if (a->nkw)
            ct_rfail(c, TXC_ERR_UNSUPPORTED, line, "%s with keyword arguments is not supported", what);
        size_t k = 0;
        ct_value *attr = NULL;
        if (byattr) {
            if (a->npos < 1)
                ct_rfail(c, TXC_ERR_INVALID, line, "%s needs an attribute name", what);
            attr = a->pos[k++];
        }
        int tid = -1;
        if (k < a->npos) {
            ct_value *tn = ct_need_str(c, a->pos[k++], what, line);
            char *nm = ct_strndup(&c->ar, tn->str.s, tn->str.n);
            tid = ct_test_id(nm);
            if (tid < 0)
                ct_rfail(c, TXC_ERR_UNSUPPORTED, line, "test '%s' is not supported", nm);
        }
        size_t n;
        ct_value **items = ct_iterate(c, v, &n, line);
        ct_value *out = ct_mk_list(c, n, false);
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            ct_value *x = attr ? attr_path(c, items[i], attr, line) : items[i];
            bool r = tid >= 0 ? ct_run_test(c, tid, x, a->pos + k, a->npos - k, line) : ct_truthy(x);
            if (r == keep_true)
                out->list.items[m++] = items[i];
        }
        out->list.n = m;
        return out;
    }
    case FL_MAP: {
        ct_value *attr = NULL, *dflt = NULL;
        for (size_t q = 0; q < a->nkw; q++) {
            if (!strcmp(a->kwn[q], "attribute"))
                attr = a->kwv[q];
            else if (!strcmp(a->kwn[q], "default"))
                dflt = a->kwv[q];
            else
                ct_rfail(c, TXC_ERR_UNSUPPORTED, line, "map(): keyword argument '%s' is not supported", a->kwn[q]);
        }
        size_t n;
        ct_value **items = ct_iterate(c, v, &n, line);
        ct_value *out = ct_mk_list(c, n, false);
        if (attr) {
            if (a->npos)
                ct_rfail(c, TXC_ERR_INVALID, line, "map(): attribute= takes no positional arguments");
            for (size_t i = 0; i < n; i++) {
                ct_value *x = attr_path(c, items[i], attr, line);
                out->list.items[i] = x->kind == CT_UNDEF && dflt ? dflt : x;
            }
            return out;
        }
        if (a->npos < 1)
            ct_rfail(c, TXC_ERR_INVALID, line, "map requires a filter argument");
        ct_value *fname = ct_need_str(c, a->pos[0], what, line);
        ct_node fake = *f;
        fake.name = ct_strndup(&c->ar, fname->str.s, fname->str.n);
        fake.id = ct_filter_id(fake.name);
        if (fake.id < 0)
            ct_rfail(c, TXC_ERR_UNSUPPORTED, line, "filter '%s' is not supported", fake.name);
        args rest = {a->pos + 1, a->npos - 1, NULL, NULL, 0};
        for (size_t i = 0; i < n; i++)
            out->list.items[i] = ct_apply_filter(c, &fake, items[i], &rest);
        return out;
    }
    case FL_LIST: {
        static const char *const nm[] = {NULL};
        ct_bind(c, a, nm, p, what, line);
        return ct_list_of(c, v, line);
    }
    case FL_STRING: {
        static const char *const nm[] = {NULL};
        ct_bind(c, a, nm, p, what, line);
        return ct_str_of(c, v, line);
    }
    case FL_INT:
    case FL_FLOAT: {
        /* jinja2 do_int: int(value, base) for a str, int(value) otherwise;
         * on TypeError/ValueError int(float(value)), on TypeError/ValueError/
         * OverflowError `default`. do_float: float(value), else `default`. */
        static const char *const nmi[] = {"default", "base", NULL};
        static const char *const nmf[] = {"default", NULL};
        ct_bind(c, a, f->id == FL_INT ? nmi : nmf, p, what, line);
        ct_value *dflt = p[0] ? p[0] : f->id == FL_INT ? ct_mk_int(c, 0) : ct_mk_float(c, 0.0);
        double d;
        if (v->kind == CT_UNDEF)
            ct_undef_fail(c, v, line);
        if (v->kind == CT_STR) {
            const char *s = py_num_ascii(c, v);
            if (f->id == FL_INT) {
                /* base: an int 0 or 2..36, else int() raises and the float path is taken */
                int64_t base = 10;
                if (p[1])
                    base = p[1]->kind == CT_INT || p[1]->kind == CT_BOOL ? num_i(p[1]) : -1;
                int64_t x;
                if ((base == 0 || (base >= 2 && base <= 36)) && py_parse_int(c, s, (int)base, &x, line))
                    return ct_mk_int(c, x);
            }
            if (!py_parse_float(c, s, &d))
                return dflt;
            if (f->id == FL_FLOAT)
                return ct_mk_float(c, d);
            if (!isfinite(d)) /* ValueError / OverflowError, caught */
                return dflt;
        } else if (is_num(v)) {
            if (f->id == FL_FLOAT)
                return ct_mk_float(c, num_f(v));
            if (v->kind != CT_FLOAT)
                return ct_mk_int(c, num_i(v));
            d = v->f;
            if (isnan(d)) /* int(nan): ValueError, then int(float(nan)) again: the default */
                return dflt;
            if (isinf(d)) /* int(inf): OverflowError, which do_int's first except does not catch */
                ct_rfail(c, TXC_ERR_INVALID, line, "cannot convert float infinity to integer");
        } else {
            return dflt; /* TypeError */
        }
        if (fabs(d) >= 9223372036854775808.0)
            ct_rfail(c, TXC_ERR_UNSUPPORTED, line, "int: %g is outside the 64-bit integer range", d);
        return ct_mk_int(c, (int64_t)d);
    }
    case FL_ABS: {
        static const char *const nm[] = {NULL};
        ct_bind(c, a, nm, p, what, line);
        if (v->kind == CT_FLOAT)
            return ct_mk_float(c, fabs(v->f));
        int64_t x = ct_need_int(c, v, what, line);
        if (x == INT64_MIN)
            ct_rfail(c, TXC_ERR_UNSUPPORTED, line, "integer overflow in abs");
        return ct_mk_int(c, x < 0 ? -x : x);
    }
    case FL_ROUND: {
        static const char *const nm[] = {"precision", "method", NULL};
        ct_bind(c, a, nm, p, what, line);
        if ((p[0] && ct_need_int(c, p[0], what, line) != 0) || p[1])
            ct_rfail(c, TXC_ERR_UNSUPPORTED, line, "round() with a precision or method is not supported");
        if (!is_num(v))
            ct_rfail(c, TXC_ERR_INVALID, line, "round: expected a number, got %s", ct_type_name(v));
        return ct_mk_float(c, nearbyint(num_f(v)));
    }
    case FL_INDENT: {
        static const char *const nm[] = {"width", "first", "blank", NULL};
        ct_bind(c, a, nm, p, what, line);
        sbuf ind = {0};
        if (p[0] && p[0]->kind == CT_STR) {
            ct_sb_put(c, &ind, p[0]->str.s, p[0]->str.n);
        } else {
            int64_t w = p[0] ? ct_need_int(c, p[0], what, line) : 4;
            for (int64_t q = 0; q < w && q < 4096; q++)
                ct_sb_put(c, &ind, " ", 1);
        }
        ct_value *s = ct_str_of(c, v, line);
        sbuf t = {0};
        ct_sb_put(c, &t, s->str.s, s->str.n);
        ct_sb_put(c, &t, "\n", 1);
        size_t n;
        ct_value **lines = ct_str_splitlines(c, t.p, t.n, &n);
        sbuf o = {0};
        if (p[1] && ct_truthy(p[1]))
            ct_sb_put(c, &o, ind.p, ind.n);
        bool blank = p[2] && ct_truthy(p[2]);
        for (size_t i = 0; i < n; i++) {
            if (i) {
                ct_sb_put(c, &o, "\n", 1);
                if (blank || lines[i]->str.n)
                    ct_sb_put(c, &o, ind.p, ind.n);
            }
            ct_sb_put(c, &o, lines[i]->str.s, lines[i]->str.n);
        }
        return ct_sb_value(c, &o);
    }
    case FL_SAFE:
    case FL_ESCAPE: {
        static const char *const nm[] = {NULL};
        ct_bind(c, a, nm, p, what, line);
        if (v->kind == CT_STR && v->str.markup && strcmp(what, "forceescape") != 0)
            return v;
        ct_value *s = ct_str_of(c, v, line);
        ct_value *r;
        if (f->id == FL_SAFE) {
            r = ct_mk_strn(c, s->str.s, s->str.n);
        } else {
            sbuf b = {0};
            for (size_t i = 0; i < s->str.n; i++) {
                switch (s->str.s[i]) {
                case '&': ct_sb_puts(c, &b, "&amp;"); break;
                case '<': ct_sb_puts(c, &b, "&lt;"); break;
                case '>': ct_sb_puts(c, &b, "&gt;"); break;
                case '"': ct_sb_puts(c, &b, "&#34;"); break;
                case '\'': ct_sb_puts(c, &b, "&#39;"); break;
                default: ct_sb_put(c, &b, s->str.s + i, 1);
                }
            }
            r = ct_sb_value(c, &b);
        }
        r->str.markup = true;
        return r;
    }
    case FL_REVERSE: {
        static const char *const nm[] = {NULL};
        ct_bind(c, a, nm, p, what, line);
        if (v->kind == CT_STR) {
            size_t cnt;
            size_t *off = ct_cp_offsets(c, v->str.s, v->str.n, &cnt);
            sbuf b = {0};
            for (size_t k = cnt; k-- > 0;)
                ct_sb_put(c, &b, v->str.s + off[k], off[k + 1] - off[k]);
            return ct_sb_value(c, &b);
        }
        size_t n;
        ct_value **items = ct_iterate(c, v, &n, line);
        ct_value *l = ct_mk_list(c, n, false);
        for (size_t k = 0; k < n; k++)
            l->list.items[k] = items[n - 1 - k];
        return l;
    }
    case FL_SORT:
    case FL_UNIQUE:
    case FL_MIN:
    case FL_MAX: {
        static const char *const nms[] = {"reverse", "case_sensitive", "attribute", NULL};
        static const char *const nmu[] = {"case_sensitive", "attribute", NULL};
        ct_value *q[4] = {0};
        if (f->id == FL_SORT) {
            ct_bind(c, a, nms, q, what, line);
        } else {
            ct_bind(c, a, nmu, q + 1, what, line);
        }
        bool rev = q[0] && ct_truthy(q[0]), cs = q[1] && ct_truthy(q[1]);
        ct_value *attr = q[2];
        size_t n;
        ct_value **items = ct_iterate(c, v, &n, line);
        ct_value *l = ct_mk_list(c, n, false);
        ct_value **keys = ct_alloc(&c->ar, (n ? n : 1) * sizeof *keys);
        for (size_t i = 0; i < n; i++) {
            l->list.items[i] = items[i];
            keys[i] = sort_key(c, items[i], attr, cs, line);
        }
        if (f->id == FL_UNIQUE) {
            l->list.n = unique_items(c, items, keys, n, l->list.items, line);
            return l;
        }
        if (f->id == FL_MIN || f->id == FL_MAX) {
            if (n == 0)
                return ct_mk_undef(c, "No aggregated item, sequence was empty.");
            size_t best = 0;
            for (size_t i = 1; i < n; i++) {
                int r = ct_compare(c, keys[i], keys[best], "<", line);
                if (f->id == FL_MIN ? r < 0 : r > 0)
                    best = i;
            }
            return items[best];
        }
        sort_items(c, l->list.items, keys, n, rev, line);
        return l;
    }
    case FL_SUM: {
        static const char *const nm[] = {"attribute", "start", NULL};
        ct_bind(c, a, nm, p, what, line);
        size_t n;
        ct_value **items = ct_iterate(c, v, &n, line);
        ct_value *acc = p[1] ? p[1] : ct_mk_int(c, 0);
        for (size_t i = 0; i < n; i++)
            acc = ct_arith(c, '+', acc, p[0] ? attr_path(c, items[i], p[0], line) : items[i], line);
        return acc;
    }
    case FL_DICTSORT: {
        static const char *const nm[] = {"case_sensitive", "by", "reverse", NULL};
        ct_bind(c, a, nm, p, what, line);
        if (v->kind != CT_DICT)
            ct_rfail(c, TXC_ERR_INVALID, line, "dictsort: expected a mapping, got %s", ct_type_name(v));
        int by = 0;
        if (p[1]) {
            ct_value *b = ct_need_str(c, p[1], what, line);
            if (b->str.n == 5 && !memcmp(b->str.s, "value", 5))
                by = 1;
            else if (!(b->str.n == 3 && !memcmp(b->str.s, "key", 3)))
                ct_rfail(c, TXC_ERR_INVALID, line, "You can only sort by either \"key\" or \"value\"");
        }
        bool cs = p[0] && ct_truthy(p[0]), rev = p[2] && ct_truthy(p[2]);
        ct_value *l = ct_dict_items_list(c, v, 0);
        size_t n = l->list.n;
        ct_value **keys = ct_alloc(&c->ar, (n ? n : 1) * sizeof *keys);
        for (size_t i = 0; i < n; i++)
            keys[i] = sort_key(c, l->list.items[i]->list.items[by], NULL, cs, line);
        for (size_t i = 1; i < n; i++)
            for (size_t j = i; j > 0; j--) {
                int r = ct_compare(c, keys[j - 1], keys[j], "<", line);
                if (rev ? r >= 0 : r <= 0)
                    break;
                ct_value *t = keys[j];
                keys[j] = keys[j - 1];
                keys[j - 1] = t;
                t = l->list.items[j];
                l->list.items[j] = l->list.items[j - 1];
                l->list.items[j - 1] = t;
            }
        return l;
    }
    }
    ct_rfail(c, TXC_ERR_INTERNAL, line, "unknown filter %d", f->id);
}
