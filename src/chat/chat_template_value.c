/* Chat templates: values (see chat/chat_template_render.h).
 *
 * Values follow Python's semantics as jinja2 exposes them: str() / repr()
 * of values, truthiness, == and ordering, strings iterated by code point;
 * undefined values follow jinja2.Undefined (empty when printed, falsy,
 * iterable as empty, an error when an attribute, item, call or arithmetic
 * is taken of them). Scoping follows jinja2: a for loop iteration and a
 * macro call open a scope, `set` writes to the innermost one, if blocks
 * open none. */
#include "chat/chat_template_render.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define MAX_VALUE_DEPTH 200

ct_value ct_v_none = {.kind = CT_NONE};
ct_value ct_v_true = {.kind = CT_BOOL, .b = true};
ct_value ct_v_false = {.kind = CT_BOOL, .b = false};

_Noreturn void ct_rfail(rctx *c, txc_status st, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ct_verror(768, st, line, fmt, ap);
    va_end(ap);
    longjmp(c->fail, 1);
}

/* ---- builders ----------------------------------------------------------- */
ct_value *ct_mk(rctx *c, ct_kind k)
{
    ct_value *v = ct_alloc(&c->ar, sizeof *v);
    v->kind = k;
    return v;
}
ct_value *ct_mk_int(rctx *c, int64_t i)
{
    ct_value *v = ct_mk(c, CT_INT);
    v->i = i;
    return v;
}
ct_value *ct_mk_float(rctx *c, double f)
{
    ct_value *v = ct_mk(c, CT_FLOAT);
    v->f = f;
    return v;
}
ct_value *ct_mk_strn(rctx *c, const char *s, size_t n)
{
    ct_value *v = ct_mk(c, CT_STR);
    v->str.s = s;
    v->str.n = n;
    return v;
}
ct_value *ct_mk_str_copy(rctx *c, const char *s, size_t n) { return ct_mk_strn(c, ct_strndup(&c->ar, s, n), n); }
ct_value *ct_mk_list(rctx *c, size_t n, bool tuple)
{
    ct_value *v = ct_mk(c, CT_LIST);
    v->list.items = ct_alloc(&c->ar, (n ? n : 1) * sizeof *v->list.items);
    v->list.n = n;
    v->list.tuple = tuple;
    return v;
}
/* range(start, stop, step) holding its n items */
ct_value *ct_mk_range(rctx *c, int64_t start, int64_t stop, int64_t step, size_t n)
{
    ct_value *v = ct_mk_list(c, n, false);
    int64_t *r = ct_alloc(&c->ar, 3 * sizeof *r);
    r[0] = start;
    r[1] = stop;
    r[2] = step;
    v->list.range = r;
    /* each item lies between start and stop; k * step may not fit in
     * int64 (range(-2**62 * 2 + 1, 2**63 - 1, 2**62)): modulo 2**64 */
    for (size_t k = 0; k < n; k++)
        v->list.items[k] = ct_mk_int(c, (int64_t)((uint64_t)start + (uint64_t)k * (uint64_t)step));
    return v;
}
ct_value *ct_mk_undef(rctx *c, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ct_value *v = ct_mk(c, CT_UNDEF);
    v->undef_msg = ct_strndup(&c->ar, msg, strlen(msg));
    return v;
}


/* ---- string buffers ----------------------------------------------------- */
static void sb_reserve(rctx *c, sbuf *b, size_t extra)
{
    if (b->n + extra <= b->cap)
        return;
    if (extra > OUTPUT_LIMIT || b->n + extra > OUTPUT_LIMIT)
        ct_rfail(c, TXC_ERR_CAPACITY, 0, "the rendered text is larger than %zu MiB", OUTPUT_LIMIT >> 20);
    size_t nc = b->cap ? b->cap * 2 : 64;
    while (nc < b->n + extra)
        nc *= 2;
    char *np = ct_alloc(&c->ar, nc);
    if (b->n)
        memcpy(np, b->p, b->n);
    b->p = np;
    b->cap = nc;
}
void ct_sb_put(rctx *c, sbuf *b, const char *s, size_t n)
{
    if (!n)
        return;
    sb_reserve(c, b, n + 1);
    memcpy(b->p + b->n, s, n);
    b->n += n;
}
void ct_sb_puts(rctx *c, sbuf *b, const char *s) { ct_sb_put(c, b, s, strlen(s)); }
void ct_sb_printf(rctx *c, sbuf *b, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    ct_sb_put(c, b, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}
ct_value *ct_sb_value(rctx *c, sbuf *b)
{
    if (!b->p)
        return ct_mk_strn(c, "", 0);
    return ct_mk_strn(c, b->p, b->n);
}

/* ---- frames ------------------------------------------------------------- */
frame *ct_frame_new(rctx *c, frame *parent)
{
    frame *f = ct_alloc(&c->ar, sizeof *f);
    f->parent = parent;
    return f;
}
void ct_frame_set(rctx *c, frame *f, const char *name, ct_value *v)
{
    for (size_t i = 0; i < f->n; i++)
        if (!strcmp(f->names[i], name)) {
            f->vals[i] = v;
            return;
        }
    if (f->n == f->cap) {
        size_t nc = f->cap ? f->cap * 2 : 8;
        const char **nn = ct_alloc(&c->ar, nc * sizeof *nn);
        ct_value **nv = ct_alloc(&c->ar, nc * sizeof *nv);
        if (f->n) {
            memcpy(nn, f->names, f->n * sizeof *nn);
            memcpy(nv, f->vals, f->n * sizeof *nv);
        }
        f->names = nn;
        f->vals = nv;
        f->cap = nc;
    }
    f->names[f->n] = name;
    f->vals[f->n++] = v;
}
ct_value *ct_lookup(rctx *c, const char *name)
{
    for (frame *f = c->cur; f; f = f->parent)
        for (size_t i = f->n; i-- > 0;)
            if (!strcmp(f->names[i], name))
                return f->vals[i];
    return ct_mk_undef(c, "'%s' is undefined", name);
}

/* ---- type names, truth, str, repr -------------------------------------- */
const char *ct_type_name(const ct_value *v)
{
    switch (v->kind) {
    case CT_UNDEF: return "Undefined";
    case CT_NONE: return "NoneType";
    case CT_BOOL: return "bool";
    case CT_INT: return "int";
    case CT_FLOAT: return "float";
    case CT_STR: return "str";
    case CT_LIST: return v->list.range ? "range" : v->list.tuple ? "tuple" : "list";
    case CT_DICT: return "dict";
    case CT_NS: return "Namespace";
    case CT_FUNC: return "function";
    case CT_LOOP: return "LoopContext";
    }
    return "?";
}

_Noreturn void ct_undef_fail(rctx *c, const ct_value *v, int line)
{
    ct_rfail(c, TXC_ERR_INVALID, line, "%s", v->undef_msg ? v->undef_msg : "value is undefined");
}

bool ct_truthy(const ct_value *v)
{
    switch (v->kind) {
    case CT_UNDEF:
    case CT_NONE: return false;
    case CT_BOOL: return v->b;
    case CT_INT: return v->i != 0;
    case CT_FLOAT: return v->f != 0.0;
    case CT_STR: return v->str.n != 0;
    case CT_LIST: return v->list.n != 0;
    case CT_DICT: return v->dict.n != 0;
    default: return true;
    }
}

/* Python's repr(float) (shortest round-trip digits, exponent outside
 * [1e-4, 1e16)). */
void ct_float_repr(rctx *c, sbuf *b, double f, bool json)
{
    if (isnan(f)) {
        ct_sb_puts(c, b, json ? "NaN" : "nan");
        return;
    }
    if (isinf(f)) {
        ct_sb_puts(c, b, f > 0 ? (json ? "Infinity" : "inf") : (json ? "-Infinity" : "-inf"));
        return;
    }
    char tmp[64];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f)
            break;
    }
    /* tmp: [-]d.ddde[+-]xx */
    char digits[32];
    int nd = 0;
    const char *p = tmp;
    bool neg = *p == '-';
    if (neg)
        p++;
    while (*p && *p != 'e') {
        if (*p >= '0' && *p <= '9')
            digits[nd++] = *p;
        p++;
    }
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = '\0';
    if (neg)
        ct_sb_put(c, b, "-", 1);
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            ct_sb_puts(c, b, "0.");
            for (int k = 0; k < -exp - 1; k++)
                ct_sb_put(c, b, "0", 1);
            ct_sb_put(c, b, digits, (size_t)nd);
        } else {
            for (int k = 0; k <= exp; k++)
                ct_sb_put(c, b, k < nd ? &digits[k] : "0", 1);
            ct_sb_put(c, b, ".", 1);
            if (nd > exp + 1)
                ct_sb_put(c, b, digits + exp + 1, (size_t)(nd - exp - 1));
            else
                ct_sb_put(c, b, "0", 1);
        }
    } else {
        ct_sb_put(c, b, digits, 1);
        if (nd > 1) {
            ct_sb_put(c, b, ".", 1);
            ct_sb_put(c, b, digits + 1, (size_t)(nd - 1));
        }
        ct_sb_printf(c, b, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
}

static bool py_isprintable(uint32_t cp)
{
    if (cp == ' ')
        return true;
    utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)cp);
    switch (cat) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS: return false;
    default: return true;
    }
}

static void str_repr(rctx *c, sbuf *b, const char *s, size_t n)
{
    bool sq = memchr(s, '\'', n) != NULL, dq = memchr(s, '"', n) != NULL;
    char q = sq && !dq ? '"' : '\'';
    ct_sb_put(c, b, &q, 1);
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = ct_utf8_decode(s + i, n - i, &cp);
        if (cp == (uint32_t)q || cp == '\\') {
            ct_sb_put(c, b, "\\", 1);
            ct_sb_put(c, b, s + i, 1);
        } else if (cp == '\n') {
            ct_sb_puts(c, b, "\\n");
        } else if (cp == '\r') {
            ct_sb_puts(c, b, "\\r");
        } else if (cp == '\t') {
            ct_sb_puts(c, b, "\\t");
        } else if (!py_isprintable(cp)) {
            if (cp < 0x100)
                ct_sb_printf(c, b, "\\x%02x", (unsigned)cp);
            else if (cp < 0x10000)
                ct_sb_printf(c, b, "\\u%04x", (unsigned)cp);
            else
                ct_sb_printf(c, b, "\\U%08x", (unsigned)cp);
        } else {
            ct_sb_put(c, b, s + i, k);
        }
        i += k;
    }
    ct_sb_put(c, b, &q, 1);
}


static void to_repr_impl(rctx *c, sbuf *b, const ct_value *v, int line);
void ct_to_repr(rctx *c, sbuf *b, const ct_value *v, int line)
{
    ct_depth_enter(c);
    to_repr_impl(c, b, v, line);
    c->vdepth--;
}

static void to_repr_impl(rctx *c, sbuf *b, const ct_value *v, int line)
{
    switch (v->kind) {
    case CT_STR: str_repr(c, b, v->str.s, v->str.n); return;
    case CT_UNDEF: return; /* repr(Undefined) is "Undefined"; str() is "" — only reached via str() */
    case CT_LIST:
        if (v->list.range) { /* repr(range): range(start, stop[, step]) */
            const int64_t *r = v->list.range;
            ct_sb_printf(c, b, "range(%lld, %lld", (long long)r[0], (long long)r[1]);
            if (r[2] != 1)
                ct_sb_printf(c, b, ", %lld", (long long)r[2]);
            ct_sb_put(c, b, ")", 1);
            return;
        }
        ct_sb_put(c, b, v->list.tuple ? "(" : "[", 1);
        for (size_t i = 0; i < v->list.n; i++) {
            if (i)
                ct_sb_puts(c, b, ", ");
            if (v->list.items[i]->kind == CT_UNDEF)
                ct_sb_puts(c, b, "Undefined");
            else
                ct_to_repr(c, b, v->list.items[i], line);
        }
        if (v->list.tuple && v->list.n == 1)
            ct_sb_put(c, b, ",", 1);
        ct_sb_put(c, b, v->list.tuple ? ")" : "]", 1);
        return;
    case CT_DICT:
    case CT_NS:
        if (v->kind == CT_NS)
            ct_sb_puts(c, b, "<Namespace ");
        ct_sb_put(c, b, "{", 1);
        for (size_t i = 0; i < v->dict.n; i++) {
            if (i)
                ct_sb_puts(c, b, ", ");
            ct_to_repr(c, b, v->dict.keys[i], line);
            ct_sb_puts(c, b, ": ");
            if (v->dict.vals[i]->kind == CT_UNDEF)
                ct_sb_puts(c, b, "Undefined");
            else
                ct_to_repr(c, b, v->dict.vals[i], line);
        }
        ct_sb_put(c, b, "}", 1);
        if (v->kind == CT_NS)
            ct_sb_put(c, b, ">", 1);
        return;
    default: ct_to_str(c, b, v, line);
    }
}

void ct_to_str(rctx *c, sbuf *b, const ct_value *v, int line)
{
    switch (v->kind) {
    case CT_UNDEF: return;
    case CT_NONE: ct_sb_puts(c, b, "None"); return;
    case CT_BOOL: ct_sb_puts(c, b, v->b ? "True" : "False"); return;
    case CT_INT: ct_sb_printf(c, b, "%lld", (long long)v->i); return;
    case CT_FLOAT: ct_float_repr(c, b, v->f, false); return;
    case CT_STR: ct_sb_put(c, b, v->str.s, v->str.n); return;
    case CT_LIST:
    case CT_DICT:
    case CT_NS: ct_to_repr(c, b, v, line); return;
    case CT_FUNC:
    case CT_LOOP: ct_rfail(c, TXC_ERR_UNSUPPORTED, line, "printing a %s is not supported", ct_type_name(v));
    }
}

/* str(v) as a value (strings returned as they are) */
ct_value *ct_str_of(rctx *c, ct_value *v, int line)
{
    if (v->kind == CT_STR)
        return v;
    sbuf b = {0};
    ct_to_str(c, &b, v, line);
    return ct_sb_value(c, &b);
}

/* ---- equality and ordering --------------------------------------------- */
void ct_depth_enter(struct rctx *c)
{
    tick(c, 1, 0);
    if (++c->vdepth > MAX_VALUE_DEPTH)
        ct_rfail(c, TXC_ERR_CAPACITY, 0, "a value nested deeper than %d levels (or containing itself)", MAX_VALUE_DEPTH);
}

static bool equal_impl(rctx *c, const ct_value *a, const ct_value *b);
bool ct_equal(rctx *c, const ct_value *a, const ct_value *b)
{
    ct_depth_enter(c);
    bool r = equal_impl(c, a, b);
    c->vdepth--;
    return r;
}

static bool equal_impl(rctx *c, const ct_value *a, const ct_value *b)
{
    if (is_num(a) && is_num(b)) {
        if (a->kind == CT_FLOAT || b->kind == CT_FLOAT)
            return num_f(a) == num_f(b);
        return num_i(a) == num_i(b);
    }
    if (a->kind != b->kind)
        return false;
    switch (a->kind) {
    case CT_UNDEF:
    case CT_NONE: return true;
    case CT_STR: return a->str.n == b->str.n && memcmp(a->str.s, b->str.s, a->str.n) == 0;
    case CT_LIST:
        if (a->list.tuple != b->list.tuple || !a->list.range != !b->list.range || a->list.n != b->list.n)
            return false;
        for (size_t i = 0; i < a->list.n; i++)
            if (!ct_equal(c, a->list.items[i], b->list.items[i]))
                return false;
        return true;
    case CT_DICT:
    case CT_NS:
        if (a->dict.n != b->dict.n)
            return false;
        if (a->kind == CT_NS)
            return a == b;
        for (size_t i = 0; i < a->dict.n; i++) {
            size_t j = 0;
            for (; j < b->dict.n; j++)
                if (ct_equal(c, a->dict.keys[i], b->dict.keys[j]))
                    break;
            if (j == b->dict.n || !ct_equal(c, a->dict.vals[i], b->dict.vals[j]))
                return false;
        }
        return true;
    default: return a == b;
    }
}

/* <0, 0, >0 as Python's ordering; a TypeError for unorderable types */
static int compare_impl(rctx *c, const ct_value *a, const ct_value *b, const char *op, int line);
int ct_compare(rctx *c, const ct_value *a, const ct_value *b, const char *op, int line)
{
    ct_depth_enter(c);
    int r = compare_impl(c, a, b, op, line);
    c->vdepth--;
    return r;
}

static int compare_impl(rctx *c, const ct_value *a, const ct_value *b, const char *op, int line)
{
    if (a->kind == CT_UNDEF)
        ct_undef_fail(c, a, line);
    if (b->kind == CT_UNDEF)
        ct_undef_fail(c, b, line);
    if (is_num(a) && is_num(b)) {
        if (a->kind == CT_FLOAT || b->kind == CT_FLOAT) {
            double x = num_f(a), y = num_f(b);
            return x < y ? -1 : x > y ? 1 : 0;
        }
        int64_t x = num_i(a), y = num_i(b);
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a->kind == CT_STR && b->kind == CT_STR) {
        size_t m = a->str.n < b->str.n ? a->str.n : b->str.n;
        int r = memcmp(a->str.s, b->str.s, m);
        if (r)
            return r;
        return a->str.n < b->str.n ? -1 : a->str.n > b->str.n ? 1 : 0;
    }
    if (a->kind == CT_LIST && b->kind == CT_LIST && a->list.tuple == b->list.tuple && !a->list.range &&
        !b->list.range) {
        for (size_t i = 0; i < a->list.n && i < b->list.n; i++)
            if (!ct_equal(c, a->list.items[i], b->list.items[i]))
                return ct_compare(c, a->list.items[i], b->list.items[i], op, line);
        return a->list.n < b->list.n ? -1 : a->list.n > b->list.n ? 1 : 0;
    }
    ct_rfail(c, TXC_ERR_INVALID, line, "'%s' not supported between instances of '%s' and '%s'", op, ct_type_name(a),
          ct_type_name(b));
}

/* ---- iteration ---------------------------------------------------------- */
size_t ct_str_cp_count(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; k++) {
        uint32_t cp;
        i += ct_utf8_decode(s + i, n - i, &cp);
    }
    return k;
}

/* the items a for loop (or list()) sees */
ct_value **ct_iterate(rctx *c, ct_value *v, size_t *n, int line)
{
    switch (v->kind) {
    case CT_UNDEF: *n = 0; return NULL;
    case CT_LIST: *n = v->list.n; return v->list.items;
    case CT_DICT: *n = v->dict.n; return v->dict.keys;
    case CT_STR: {
        size_t k = ct_str_cp_count(v->str.s, v->str.n);
        ct_value **items = ct_alloc(&c->ar, (k ? k : 1) * sizeof *items);
        size_t j = 0;
        for (size_t i = 0; i < v->str.n; j++) {
            uint32_t cp;
            size_t w = ct_utf8_decode(v->str.s + i, v->str.n - i, &cp);
            items[j] = ct_mk_strn(c, v->str.s + i, w);
            i += w;
        }
        *n = k;
        return items;
    }
    default: ct_rfail(c, TXC_ERR_INVALID, line, "'%s' object is not iterable", ct_type_name(v));
    }
}

size_t ct_length_of(rctx *c, ct_value *v, int line)
{
    switch (v->kind) {
    case CT_UNDEF: return 0;
    case CT_STR: return ct_str_cp_count(v->str.s, v->str.n);
    case CT_LIST: return v->list.n;
    case CT_DICT: return v->dict.n;
    default: ct_rfail(c, TXC_ERR_INVALID, line, "object of type '%s' has no len()", ct_type_name(v));
    }
}

ct_value *ct_list_of(rctx *c, ct_value *v, int line)
{
    size_t n;
    ct_value **items = ct_iterate(c, v, &n, line);
    ct_value *l = ct_mk_list(c, n, false);
    if (n)
        memcpy(l->list.items, items, n * sizeof *items);
    return l;
}

/* ---- dicts -------------------------------------------------------------- */
ct_value *ct_dict_get(rctx *c, const ct_value *d, const ct_value *k)
{
    for (size_t i = d->dict.n; i-- > 0;)
        if (ct_equal(c, d->dict.keys[i], k))
            return d->dict.vals[i];
    return NULL;
}
ct_value *ct_dict_get_s(const ct_value *d, const char *k)
{
    size_t n = strlen(k);
    for (size_t i = 0; i < d->dict.n; i++) {
        const ct_value *key = d->dict.keys[i];
        if (key->kind == CT_STR && key->str.n == n && !memcmp(key->str.s, k, n))
            return d->dict.vals[i];
    }
    return NULL;
}
void ct_dict_set(rctx *c, ct_value *d, ct_value *k, ct_value *v)
{
    for (size_t i = 0; i < d->dict.n; i++)
        if (ct_equal(c, d->dict.keys[i], k)) {
            d->dict.vals[i] = v;
            return;
        }
    if (d->dict.n == d->dict.cap) {
        size_t nc = d->dict.cap ? d->dict.cap * 2 : 4;
        ct_value **nk = ct_alloc(&c->ar, nc * sizeof *nk), **nv = ct_alloc(&c->ar, nc * sizeof *nv);
        if (d->dict.n) {
            memcpy(nk, d->dict.keys, d->dict.n * sizeof *nk);
            memcpy(nv, d->dict.vals, d->dict.n * sizeof *nv);
        }
        d->dict.keys = nk;
        d->dict.vals = nv;
        d->dict.cap = nc;
    }
    d->dict.keys[d->dict.n] = k;
    d->dict.vals[d->dict.n++] = v;
}
