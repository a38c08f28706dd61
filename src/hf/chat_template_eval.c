/* Chat templates: the renderer (see hf/chat_template_impl.h).
 *
 * Values follow Python's semantics as jinja2 exposes them (str() / repr()
 * of values, truthiness, ==, ordering, arithmetic with Python's floor
 * division and modulo, strings indexed by code point), undefined values
 * follow jinja2.Undefined (empty when printed, falsy, iterable as empty, an
 * error when an attribute, item, call or arithmetic is taken of them), and
 * the filters, tests and methods implemented follow jinja2.filters /
 * jinja2.tests / Python's str and dict methods. transformers' tojson
 * (json.dumps with ensure_ascii=False) replaces jinja's. Scoping follows
 * jinja2: a for loop iteration and a macro call open a scope, `set` writes
 * to the innermost one, if blocks open none. */
#include "hf/chat_template_impl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

#define RENDER_MEM_LIMIT ((size_t)512 << 20)
#define OUTPUT_LIMIT ((size_t)64 << 20)
#define MAX_CALL_DEPTH 64
#define MAX_RANGE 100000 /* jinja2.sandbox.MAX_RANGE */

/* ---- context ------------------------------------------------------------ */
typedef struct frame {
    struct frame *parent;
    const char **names;
    ct_value **vals;
    size_t n, cap;
} frame;

typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

typedef struct rctx {
    ct_arena ar;
    jmp_buf fail;
    sbuf *out;
    size_t out_total;
    frame *root;
    frame *cur;
    int ctl; /* 1: break, 2: continue */
    int calls;
    int vdepth; /* nesting of repr / == / < on values (cycles through namespaces) */
    uint64_t steps, max_steps; /* the step budget: expressions, statements, comparisons */
} rctx;

#define MAX_VALUE_DEPTH 200

static void depth_enter(struct rctx *c);

struct ct_loop {
    size_t index0, length;
    ct_value **items;
};

static ct_value V_NONE_ = {.kind = CT_NONE};
static ct_value V_TRUE_ = {.kind = CT_BOOL, .b = true};
static ct_value V_FALSE_ = {.kind = CT_BOOL, .b = false};
#define V_NONE (&V_NONE_)
#define V_TRUE (&V_TRUE_)
#define V_FALSE (&V_FALSE_)
#define V_BOOL(x) ((x) ? V_TRUE : V_FALSE)

static _Noreturn void rfail(rctx *c, txc_status st, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static _Noreturn void rfail(rctx *c, txc_status st, int line, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0)
        txc_error(st, "chat template line %d: %s", line, msg);
    else
        txc_error(st, "chat template: %s", msg);
    longjmp(c->fail, 1);
}

/* One more step of the render (an expression, a statement, a loop item, a
 * comparison of values): a render past its budget ends with an error, so a
 * template that never ends (or takes hours) cannot hold the caller. */
static inline void tick(rctx *c, uint64_t n, int line)
{
    c->steps += n;
    if (c->steps > c->max_steps)
        rfail(c, TXC_ERR_CAPACITY, line,
              "the render took more than %llu steps (expressions, statements, loop items, comparisons): "
              "stopped", (unsigned long long)c->max_steps);
}

/* ---- builders ----------------------------------------------------------- */
static ct_value *mk(rctx *c, ct_kind k)
{
    ct_value *v = ct_alloc(&c->ar, sizeof *v);
    v->kind = k;
    return v;
}
static ct_value *mk_int(rctx *c, int64_t i)
{
    ct_value *v = mk(c, CT_INT);
    v->i = i;
    return v;
}
static ct_value *mk_float(rctx *c, double f)
{
    ct_value *v = mk(c, CT_FLOAT);
    v->f = f;
    return v;
}
static ct_value *mk_strn(rctx *c, const char *s, size_t n)
{
    ct_value *v = mk(c, CT_STR);
    v->str.s = s;
    v->str.n = n;
    return v;
}
static ct_value *mk_str_copy(rctx *c, const char *s, size_t n) { return mk_strn(c, ct_strndup(&c->ar, s, n), n); }
static ct_value *mk_list(rctx *c, size_t n, bool tuple)
{
    ct_value *v = mk(c, CT_LIST);
    v->list.items = ct_alloc(&c->ar, (n ? n : 1) * sizeof *v->list.items);
    v->list.n = n;
    v->list.tuple = tuple;
    return v;
}
/* range(start, stop, step) holding its n items */
static ct_value *mk_range(rctx *c, int64_t start, int64_t stop, int64_t step, size_t n)
{
    ct_value *v = mk_list(c, n, false);
    int64_t *r = ct_alloc(&c->ar, 3 * sizeof *r);
    r[0] = start;
    r[1] = stop;
    r[2] = step;
    v->list.range = r;
    /* each item lies between start and stop; k * step may not fit in
     * int64 (range(-2**62 * 2 + 1, 2**63 - 1, 2**62)): modulo 2**64 */
    for (size_t k = 0; k < n; k++)
        v->list.items[k] = mk_int(c, (int64_t)((uint64_t)start + (uint64_t)k * (uint64_t)step));
    return v;
}
static ct_value *mk_undef(rctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ct_value *mk_undef(rctx *c, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ct_value *v = mk(c, CT_UNDEF);
    v->undef_msg = ct_strndup(&c->ar, msg, strlen(msg));
    return v;
}

static void dict_set(rctx *c, ct_value *d, ct_value *k, ct_value *v);

/* ---- string buffers ----------------------------------------------------- */
static void sb_reserve(rctx *c, sbuf *b, size_t extra)
{
    if (b->n + extra <= b->cap)
        return;
    if (extra > OUTPUT_LIMIT || b->n + extra > OUTPUT_LIMIT)
        rfail(c, TXC_ERR_CAPACITY, 0, "the rendered text is larger than %zu MiB", OUTPUT_LIMIT >> 20);
    size_t nc = b->cap ? b->cap * 2 : 64;
    while (nc < b->n + extra)
        nc *= 2;
    char *np = ct_alloc(&c->ar, nc);
    if (b->n)
        memcpy(np, b->p, b->n);
    b->p = np;
    b->cap = nc;
}
static void sb_put(rctx *c, sbuf *b, const char *s, size_t n)
{
    if (!n)
        return;
    sb_reserve(c, b, n + 1);
    memcpy(b->p + b->n, s, n);
    b->n += n;
}
static void sb_puts(rctx *c, sbuf *b, const char *s) { sb_put(c, b, s, strlen(s)); }
static void sb_printf(rctx *c, sbuf *b, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void sb_printf(rctx *c, sbuf *b, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    sb_put(c, b, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}
static ct_value *sb_value(rctx *c, sbuf *b)
{
    if (!b->p)
        return mk_strn(c, "", 0);
    return mk_strn(c, b->p, b->n);
}

/* ---- frames ------------------------------------------------------------- */
static frame *frame_new(rctx *c, frame *parent)
{
    frame *f = ct_alloc(&c->ar, sizeof *f);
    f->parent = parent;
    return f;
}
static void frame_set(rctx *c, frame *f, const char *name, ct_value *v)
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
static ct_value *lookup(rctx *c, const char *name)
{
    for (frame *f = c->cur; f; f = f->parent)
        for (size_t i = f->n; i-- > 0;)
            if (!strcmp(f->names[i], name))
                return f->vals[i];
    return mk_undef(c, "'%s' is undefined", name);
}

/* ---- type names, truth, str, repr -------------------------------------- */
static const char *type_name(const ct_value *v)
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

static _Noreturn void undef_fail(rctx *c, const ct_value *v, int line)
{
    rfail(c, TXC_ERR_INVALID, line, "%s", v->undef_msg ? v->undef_msg : "value is undefined");
}

static bool truthy(const ct_value *v)
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
static void float_repr(rctx *c, sbuf *b, double f, bool json)
{
    if (isnan(f)) {
        sb_puts(c, b, json ? "NaN" : "nan");
        return;
    }
    if (isinf(f)) {
        sb_puts(c, b, f > 0 ? (json ? "Infinity" : "inf") : (json ? "-Infinity" : "-inf"));
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
        sb_put(c, b, "-", 1);
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            sb_puts(c, b, "0.");
            for (int k = 0; k < -exp - 1; k++)
                sb_put(c, b, "0", 1);
            sb_put(c, b, digits, (size_t)nd);
        } else {
            for (int k = 0; k <= exp; k++)
                sb_put(c, b, k < nd ? &digits[k] : "0", 1);
            sb_put(c, b, ".", 1);
            if (nd > exp + 1)
                sb_put(c, b, digits + exp + 1, (size_t)(nd - exp - 1));
            else
                sb_put(c, b, "0", 1);
        }
    } else {
        sb_put(c, b, digits, 1);
        if (nd > 1) {
            sb_put(c, b, ".", 1);
            sb_put(c, b, digits + 1, (size_t)(nd - 1));
        }
        sb_printf(c, b, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
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
    sb_put(c, b, &q, 1);
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = ct_utf8_decode(s + i, n - i, &cp);
        if (cp == (uint32_t)q || cp == '\\') {
            sb_put(c, b, "\\", 1);
            sb_put(c, b, s + i, 1);
        } else if (cp == '\n') {
            sb_puts(c, b, "\\n");
        } else if (cp == '\r') {
            sb_puts(c, b, "\\r");
        } else if (cp == '\t') {
            sb_puts(c, b, "\\t");
        } else if (!py_isprintable(cp)) {
            if (cp < 0x100)
                sb_printf(c, b, "\\x%02x", (unsigned)cp);
            else if (cp < 0x10000)
                sb_printf(c, b, "\\u%04x", (unsigned)cp);
            else
                sb_printf(c, b, "\\U%08x", (unsigned)cp);
        } else {
            sb_put(c, b, s + i, k);
        }
        i += k;
    }
    sb_put(c, b, &q, 1);
}

static void to_str(rctx *c, sbuf *b, const ct_value *v, int line);

static void to_repr_impl(rctx *c, sbuf *b, const ct_value *v, int line);
static void to_repr(rctx *c, sbuf *b, const ct_value *v, int line)
{
    depth_enter(c);
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
            sb_printf(c, b, "range(%lld, %lld", (long long)r[0], (long long)r[1]);
            if (r[2] != 1)
                sb_printf(c, b, ", %lld", (long long)r[2]);
            sb_put(c, b, ")", 1);
            return;
        }
        sb_put(c, b, v->list.tuple ? "(" : "[", 1);
        for (size_t i = 0; i < v->list.n; i++) {
            if (i)
                sb_puts(c, b, ", ");
            if (v->list.items[i]->kind == CT_UNDEF)
                sb_puts(c, b, "Undefined");
            else
                to_repr(c, b, v->list.items[i], line);
        }
        if (v->list.tuple && v->list.n == 1)
            sb_put(c, b, ",", 1);
        sb_put(c, b, v->list.tuple ? ")" : "]", 1);
        return;
    case CT_DICT:
    case CT_NS:
        if (v->kind == CT_NS)
            sb_puts(c, b, "<Namespace ");
        sb_put(c, b, "{", 1);
        for (size_t i = 0; i < v->dict.n; i++) {
            if (i)
                sb_puts(c, b, ", ");
            to_repr(c, b, v->dict.keys[i], line);
            sb_puts(c, b, ": ");
            if (v->dict.vals[i]->kind == CT_UNDEF)
                sb_puts(c, b, "Undefined");
            else
                to_repr(c, b, v->dict.vals[i], line);
        }
        sb_put(c, b, "}", 1);
        if (v->kind == CT_NS)
            sb_put(c, b, ">", 1);
        return;
    default: to_str(c, b, v, line);
    }
}

static void to_str(rctx *c, sbuf *b, const ct_value *v, int line)
{
    switch (v->kind) {
    case CT_UNDEF: return;
    case CT_NONE: sb_puts(c, b, "None"); return;
    case CT_BOOL: sb_puts(c, b, v->b ? "True" : "False"); return;
    case CT_INT: sb_printf(c, b, "%lld", (long long)v->i); return;
    case CT_FLOAT: float_repr(c, b, v->f, false); return;
    case CT_STR: sb_put(c, b, v->str.s, v->str.n); return;
    case CT_LIST:
    case CT_DICT:
    case CT_NS: to_repr(c, b, v, line); return;
    case CT_FUNC:
    case CT_LOOP: rfail(c, TXC_ERR_UNSUPPORTED, line, "printing a %s is not supported", type_name(v));
    }
}

/* str(v) as a value (strings returned as they are) */
static ct_value *str_of(rctx *c, ct_value *v, int line)
{
    if (v->kind == CT_STR)
        return v;
    sbuf b = {0};
    to_str(c, &b, v, line);
    return sb_value(c, &b);
}

/* ---- equality and ordering --------------------------------------------- */
static bool is_num(const ct_value *v) { return v->kind == CT_INT || v->kind == CT_FLOAT || v->kind == CT_BOOL; }
static double num_f(const ct_value *v)
{
    return v->kind == CT_FLOAT ? v->f : v->kind == CT_INT ? (double)v->i : (double)v->b;
}
static int64_t num_i(const ct_value *v) { return v->kind == CT_INT ? v->i : (int64_t)v->b; }

static void depth_enter(struct rctx *c)
{
    tick(c, 1, 0);
    if (++c->vdepth > MAX_VALUE_DEPTH)
        rfail(c, TXC_ERR_CAPACITY, 0, "a value nested deeper than %d levels (or containing itself)", MAX_VALUE_DEPTH);
}

static bool equal_impl(rctx *c, const ct_value *a, const ct_value *b);
static bool equal(rctx *c, const ct_value *a, const ct_value *b)
{
    depth_enter(c);
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
            if (!equal(c, a->list.items[i], b->list.items[i]))
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
                if (equal(c, a->dict.keys[i], b->dict.keys[j]))
                    break;
            if (j == b->dict.n || !equal(c, a->dict.vals[i], b->dict.vals[j]))
                return false;
        }
        return true;
    default: return a == b;
    }
}

/* <0, 0, >0 as Python's ordering; a TypeError for unorderable types */
static int compare_impl(rctx *c, const ct_value *a, const ct_value *b, const char *op, int line);
static int compare(rctx *c, const ct_value *a, const ct_value *b, const char *op, int line)
{
    depth_enter(c);
    int r = compare_impl(c, a, b, op, line);
    c->vdepth--;
    return r;
}

static int compare_impl(rctx *c, const ct_value *a, const ct_value *b, const char *op, int line)
{
    if (a->kind == CT_UNDEF)
        undef_fail(c, a, line);
    if (b->kind == CT_UNDEF)
        undef_fail(c, b, line);
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
            if (!equal(c, a->list.items[i], b->list.items[i]))
                return compare(c, a->list.items[i], b->list.items[i], op, line);
        return a->list.n < b->list.n ? -1 : a->list.n > b->list.n ? 1 : 0;
    }
    rfail(c, TXC_ERR_INVALID, line, "'%s' not supported between instances of '%s' and '%s'", op, type_name(a),
          type_name(b));
}

/* ---- iteration ---------------------------------------------------------- */
static size_t str_cp_count(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; k++) {
        uint32_t cp;
        i += ct_utf8_decode(s + i, n - i, &cp);
    }
    return k;
}

/* the items a for loop (or list()) sees */
static ct_value **iterate(rctx *c, ct_value *v, size_t *n, int line)
{
    switch (v->kind) {
    case CT_UNDEF: *n = 0; return NULL;
    case CT_LIST: *n = v->list.n; return v->list.items;
    case CT_DICT: *n = v->dict.n; return v->dict.keys;
    case CT_STR: {
        size_t k = str_cp_count(v->str.s, v->str.n);
        ct_value **items = ct_alloc(&c->ar, (k ? k : 1) * sizeof *items);
        size_t j = 0;
        for (size_t i = 0; i < v->str.n; j++) {
            uint32_t cp;
            size_t w = ct_utf8_decode(v->str.s + i, v->str.n - i, &cp);
            items[j] = mk_strn(c, v->str.s + i, w);
            i += w;
        }
        *n = k;
        return items;
    }
    default: rfail(c, TXC_ERR_INVALID, line, "'%s' object is not iterable", type_name(v));
    }
}

static size_t length_of(rctx *c, ct_value *v, int line)
{
    switch (v->kind) {
    case CT_UNDEF: return 0;
    case CT_STR: return str_cp_count(v->str.s, v->str.n);
    case CT_LIST: return v->list.n;
    case CT_DICT: return v->dict.n;
    default: rfail(c, TXC_ERR_INVALID, line, "object of type '%s' has no len()", type_name(v));
    }
}

static ct_value *list_of(rctx *c, ct_value *v, int line)
{
    size_t n;
    ct_value **items = iterate(c, v, &n, line);
    ct_value *l = mk_list(c, n, false);
    if (n)
        memcpy(l->list.items, items, n * sizeof *items);
    return l;
}

/* ---- dicts -------------------------------------------------------------- */
static ct_value *dict_get(rctx *c, const ct_value *d, const ct_value *k)
{
    for (size_t i = d->dict.n; i-- > 0;)
        if (equal(c, d->dict.keys[i], k))
            return d->dict.vals[i];
    return NULL;
}
static ct_value *dict_get_s(const ct_value *d, const char *k)
{
    size_t n = strlen(k);
    for (size_t i = 0; i < d->dict.n; i++) {
        const ct_value *key = d->dict.keys[i];
        if (key->kind == CT_STR && key->str.n == n && !memcmp(key->str.s, k, n))
            return d->dict.vals[i];
    }
    return NULL;
}
static void dict_set(rctx *c, ct_value *d, ct_value *k, ct_value *v)
{
    for (size_t i = 0; i < d->dict.n; i++)
        if (equal(c, d->dict.keys[i], k)) {
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

/* ---- builtin functions and methods ------------------------------------- */
enum {
    F_RAISE = 1,
    F_STRFTIME,
    F_RANGE,
    F_NAMESPACE,
    F_DICT,
    F_UNSUPPORTED_GLOBAL, /* cycler, joiner, lipsum */
    F_LOOP_CYCLE,
    /* str methods */
    M_STRIP,
    M_LSTRIP,
    M_RSTRIP,
    M_SPLIT,
    M_RSPLIT,
    M_SPLITLINES,
    M_STARTSWITH,
    M_ENDSWITH,
    M_UPPER,
    M_LOWER,
    M_TITLE,
    M_CAPITALIZE,
    M_REPLACE,
    M_FIND,
    M_RFIND,
    M_COUNT,
    M_JOIN,
    M_ISDIGIT,
    M_ISALPHA,
    M_ISSPACE,
    M_ISUPPER,
    M_ISLOWER,
    M_REMOVEPREFIX,
    M_REMOVESUFFIX,
    /* dict methods */
    M_GET,
    M_ITEMS,
    M_KEYS,
    M_VALUES,
};

static const struct {
    const char *name;
    int id;
} str_methods[] = {
    {"strip", M_STRIP},           {"lstrip", M_LSTRIP},       {"rstrip", M_RSTRIP},
    {"split", M_SPLIT},           {"rsplit", M_RSPLIT},       {"splitlines", M_SPLITLINES},
    {"startswith", M_STARTSWITH}, {"endswith", M_ENDSWITH},   {"upper", M_UPPER},
    {"lower", M_LOWER},           {"title", M_TITLE},         {"capitalize", M_CAPITALIZE},
    {"replace", M_REPLACE},       {"find", M_FIND},           {"rfind", M_RFIND},
    {"count", M_COUNT},           {"join", M_JOIN},           {"isdigit", M_ISDIGIT},
    {"isalpha", M_ISALPHA},       {"isspace", M_ISSPACE},     {"isupper", M_ISUPPER},
    {"islower", M_ISLOWER},       {"removeprefix", M_REMOVEPREFIX}, {"removesuffix", M_REMOVESUFFIX},
};
/* Python methods that exist but are not implemented: UNSUPPORTED, never undefined. */
static const char *const str_unimpl[] = {"casefold", "center", "encode", "expandtabs", "format", "format_map",
                                         "index", "isalnum", "isascii", "isdecimal", "isidentifier",
                                         "isnumeric", "isprintable", "istitle", "ljust", "maketrans",
                                         "partition", "rindex", "rjust", "rpartition", "swapcase",
                                         "translate", "zfill", NULL};
static const char *const dict_unimpl[] = {"clear", "copy", "fromkeys", "pop", "popitem", "setdefault", "update",
                                          NULL};
static const char *const list_unimpl[] = {"append", "clear", "copy", "count", "extend", "index", "insert",
                                          "pop", "remove", "reverse", "sort", NULL};

static bool in_list(const char *const *l, const char *s)
{
    for (; *l; l++)
        if (!strcmp(*l, s))
            return true;
    return false;
}

static ct_value *mk_func(rctx *c, int id, ct_value *self)
{
    ct_value *f = mk(c, CT_FUNC);
    f->func.id = id;
    f->func.self = self;
    return f;
}

/* ---- attribute and item access ----------------------------------------- */
static ct_value *getattr_v(rctx *c, ct_value *obj, const char *name, int line)
{
    if (obj->kind == CT_UNDEF)
        undef_fail(c, obj, line);
    if (name[0] == '_') /* the sandbox hides private attributes */
        return mk_undef(c, "access to attribute '%s' of '%s' object is unsafe", name, type_name(obj));
    switch (obj->kind) {
    case CT_DICT: {
        static const char *const dm[] = {"get", "items", "keys", "values"};
        static const int di[] = {M_GET, M_ITEMS, M_KEYS, M_VALUES};
        for (int k = 0; k < 4; k++)
            if (!strcmp(name, dm[k]))
                return mk_func(c, di[k], obj);
        if (in_list(dict_unimpl, name))
            rfail(c, TXC_ERR_UNSUPPORTED, line, "the dict method '%s' is not supported", name);
        ct_value *v = dict_get_s(obj, name);
        return v ? v : mk_undef(c, "'dict object' has no attribute '%s'", name);
    }
    case CT_NS: {
        ct_value *v = dict_get_s(obj, name);
        return v ? v : mk_undef(c, "'Namespace' object has no attribute '%s'", name);
    }
    case CT_STR:
        for (size_t k = 0; k < sizeof str_methods / sizeof *str_methods; k++)
            if (!strcmp(name, str_methods[k].name))
                return mk_func(c, str_methods[k].id, obj);
        if (in_list(str_unimpl, name))
            rfail(c, TXC_ERR_UNSUPPORTED, line, "the str method '%s' is not supported", name);
        return mk_undef(c, "'str object' has no attribute '%s'", name);
    case CT_LIST:
        if (in_list(list_unimpl, name))
            rfail(c, TXC_ERR_UNSUPPORTED, line, "the list method '%s' is not supported (lists are immutable in the sandbox)", name);
        return mk_undef(c, "'%s object' has no attribute '%s'", type_name(obj), name);
    case CT_LOOP: {
        ct_loop *l = obj->loop;
        if (!strcmp(name, "index"))
            return mk_int(c, (int64_t)l->index0 + 1);
        if (!strcmp(name, "index0"))
            return mk_int(c, (int64_t)l->index0);
        if (!strcmp(name, "revindex"))
            return mk_int(c, (int64_t)(l->length - l->index0));
        if (!strcmp(name, "revindex0"))
            return mk_int(c, (int64_t)(l->length - l->index0 - 1));
        if (!strcmp(name, "first"))
            return V_BOOL(l->index0 == 0);
        if (!strcmp(name, "last"))
            return V_BOOL(l->index0 + 1 == l->length);
        if (!strcmp(name, "length"))
            return mk_int(c, (int64_t)l->length);
        if (!strcmp(name, "depth"))
            return mk_int(c, 1);
        if (!strcmp(name, "depth0"))
            return mk_int(c, 0);
        if (!strcmp(name, "previtem"))
            return l->index0 > 0 ? l->items[l->index0 - 1] : mk_undef(c, "there is no previous item");
        if (!strcmp(name, "nextitem"))
            return l->index0 + 1 < l->length ? l->items[l->index0 + 1] : mk_undef(c, "there is no next item");
        if (!strcmp(name, "cycle"))
            return mk_func(c, F_LOOP_CYCLE, obj);
        if (!strcmp(name, "changed"))
            rfail(c, TXC_ERR_UNSUPPORTED, line, "loop.changed is not supported");
        return mk_undef(c, "'LoopContext' object has no attribute '%s'", name);
    }
    default: return mk_undef(c, "'%s object' has no attribute '%s'", type_name(obj), name);
    }
}

/* Python slice indices (PySlice_AdjustIndices) */
static size_t slice_indices(rctx *c, size_t len, ct_value *const *parts, int64_t *start, int64_t *stop, int64_t *step,
                            int line)
{
    int64_t st = 1;
    if (parts[2] && parts[2]->kind != CT_NONE) {
        if (parts[2]->kind != CT_INT && parts[2]->kind != CT_BOOL)
            rfail(c, TXC_ERR_INVALID, line, "slice indices must be integers or None");
        st = num_i(parts[2]);
        if (st == 0)
            rfail(c, TXC_ERR_INVALID, line, "slice step cannot be zero");
    }
    int64_t L = (int64_t)len, a, b;
    for (int k = 0; k < 2; k++) {
        ct_value *p = parts[k];
        int64_t *dst = k == 0 ? &a : &b;
        if (!p || p->kind == CT_NONE) {
            *dst = k == 0 ? (st < 0 ? L - 1 : 0) : (st < 0 ? -1 : L);
            continue;
        }
        if (p->kind != CT_INT && p->kind != CT_BOOL)
            rfail(c, TXC_ERR_INVALID, line, "slice indices must be integers or None");
        int64_t v = num_i(p);
        if (v < 0) {
            v += L;
            if (v < 0)
                v = st < 0 ? -1 : 0;
        } else if (v >= L) {
            v = st < 0 ? L - 1 : L;
        }
        *dst = v;
    }
    *start = a;
    *stop = b;
    *step = st;
    /* a and b lie in [-1, len]; -st as unsigned (st may be INT64_MIN) */
    if (st < 0)
        return b < a ? (size_t)((uint64_t)(a - b - 1) / (0 - (uint64_t)st) + 1) : 0;
    return a < b ? (size_t)((uint64_t)(b - a - 1) / (uint64_t)st + 1) : 0;
}

/* byte offsets of each code point (n+1 entries) */
static size_t *cp_offsets(rctx *c, const char *s, size_t n, size_t *count)
{
    size_t k = str_cp_count(s, n);
    size_t *off = ct_alloc(&c->ar, (k + 1) * sizeof *off);
    size_t j = 0;
    for (size_t i = 0; i < n; j++) {
        uint32_t cp;
        off[j] = i;
        i += ct_utf8_decode(s + i, n - i, &cp);
    }
    off[k] = n;
    *count = k;
    return off;
}

static ct_value *do_slice(rctx *c, ct_value *obj, ct_value *const *parts, int line)
{
    if (obj->kind == CT_UNDEF)
        undef_fail(c, obj, line);
    int64_t start, stop, step;
    if (obj->kind == CT_LIST) {
        size_t m = slice_indices(c, obj->list.n, parts, &start, &stop, &step, line);
        if (obj->list.range) { /* range(...)[i:j:k] is a range (compute_slice in rangeobject.c) */
            const int64_t *r = obj->list.range;
            int64_t a, b, s;
            if (__builtin_mul_overflow(start, r[2], &a) || __builtin_add_overflow(a, r[0], &a) ||
                __builtin_mul_overflow(stop, r[2], &b) || __builtin_add_overflow(b, r[0], &b) ||
                __builtin_mul_overflow(step, r[2], &s))
                rfail(c, TXC_ERR_UNSUPPORTED, line, "integer overflow in a range slice (Python integers are unbounded)");
            return mk_range(c, a, b, s, m);
        }
        ct_value *r = mk_list(c, m, obj->list.tuple);
        for (size_t k = 0; k < m; k++)
            r->list.items[k] = obj->list.items[start + (int64_t)k * step];
        return r;
    }
    if (obj->kind == CT_STR) {
        size_t cnt;
        size_t *off = cp_offsets(c, obj->str.s, obj->str.n, &cnt);
        size_t m = slice_indices(c, cnt, parts, &start, &stop, &step, line);
        sbuf b = {0};
        for (size_t k = 0; k < m; k++) {
            size_t ix = (size_t)(start + (int64_t)k * step);
            sb_put(c, &b, obj->str.s + off[ix], off[ix + 1] - off[ix]);
        }
        return sb_value(c, &b);
    }
    rfail(c, TXC_ERR_INVALID, line, "'%s' object is not subscriptable", type_name(obj));
}

static ct_value *getitem_v(rctx *c, ct_value *obj, ct_value *key, int line)
{
    if (obj->kind == CT_UNDEF)
        undef_fail(c, obj, line);
    if ((obj->kind == CT_LIST || obj->kind == CT_STR) && (key->kind == CT_INT || key->kind == CT_BOOL)) {
        int64_t i = num_i(key);
        if (obj->kind == CT_LIST) {
            int64_t L = (int64_t)obj->list.n;
            int64_t j = i < 0 ? i + L : i;
            if (j < 0 || j >= L)
                return mk_undef(c, "'%s object' has no element %lld", type_name(obj), (long long)i);
            return obj->list.items[j];
        }
        size_t cnt;
        size_t *off = cp_offsets(c, obj->str.s, obj->str.n, &cnt);
        int64_t j = i < 0 ? i + (int64_t)cnt : i;
        if (j < 0 || j >= (int64_t)cnt)
            return mk_undef(c, "'str object' has no element %lld", (long long)i);
        return mk_strn(c, obj->str.s + off[j], off[j + 1] - off[j]);
    }
    if (obj->kind == CT_DICT) {
        ct_value *v = dict_get(c, obj, key);
        if (v)
            return v;
    }
    if (key->kind == CT_STR) {
        if (obj->kind == CT_DICT) { /* a key that is not there: getattr, then undefined */
            char *nm = ct_strndup(&c->ar, key->str.s, key->str.n);
            ct_value *v = getattr_v(c, obj, nm, line);
            return v;
        }
        return getattr_v(c, obj, ct_strndup(&c->ar, key->str.s, key->str.n), line);
    }
    sbuf b = {0};
    to_repr(c, &b, key, line);
    return mk_undef(c, "'%s object' has no element %.*s", type_name(obj), (int)b.n, b.p ? b.p : "");
}

/* ---- string helpers ----------------------------------------------------- */
typedef enum { STRIP_BOTH, STRIP_LEFT, STRIP_RIGHT } strip_side;

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

static ct_value *str_strip(rctx *c, ct_value *s, const ct_value *chars, strip_side side)
{
    size_t cnt;
    size_t *off = cp_offsets(c, s->str.s, s->str.n, &cnt);
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
    return mk_strn(c, s->str.s + off[a], off[b] - off[a]);
}

typedef enum { CASE_UPPER, CASE_LOWER, CASE_TITLE_PY, CASE_CAPITALIZE, CASE_TITLE_JINJA } case_mode;

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
static ct_value *str_case(rctx *c, const ct_value *s, case_mode mode)
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
                rfail(c, TXC_ERR_UNSUPPORTED, 0, "the full case mapping of U+%04X is not supported", (unsigned)cp);
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
                sb_put(c, &b, enc, ct_utf8_encode(full[k], enc));
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
            sb_put(c, &b, s->str.s + i, w);
        else
            sb_put(c, &b, enc, ct_utf8_encode(o, enc));
        i += w;
    }
    return sb_value(c, &b);
}

static const char *memfind(const char *h, size_t hn, const char *nd, size_t nn)
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

static ct_value *str_replace(rctx *c, const ct_value *s, const ct_value *old, const ct_value *nw, int64_t count)
{
    sbuf b = {0};
    if (old->str.n == 0) { /* Python inserts `new` between every character and at both ends */
        size_t cnt;
        size_t *off = cp_offsets(c, s->str.s, s->str.n, &cnt);
        int64_t done = 0;
        for (size_t k = 0; k <= cnt; k++) {
            if (count < 0 || done < count) {
                sb_put(c, &b, nw->str.s, nw->str.n);
                done++;
            }
            if (k < cnt)
                sb_put(c, &b, s->str.s + off[k], off[k + 1] - off[k]);
        }
        return sb_value(c, &b);
    }
    size_t i = 0;
    int64_t done = 0;
    while (i <= s->str.n) {
        const char *hit = (count < 0 || done < count) ? memfind(s->str.s + i, s->str.n - i, old->str.s, old->str.n)
                                                     : NULL;
        if (!hit) {
            sb_put(c, &b, s->str.s + i, s->str.n - i);
            break;
        }
        size_t at = (size_t)(hit - s->str.s);
        sb_put(c, &b, s->str.s + i, at - i);
        sb_put(c, &b, nw->str.s, nw->str.n);
        i = at + old->str.n;
        done++;
    }
    return sb_value(c, &b);
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
            rfail(c, TXC_ERR_INVALID, line, "must be str or None, not %s", type_name(sep));
        if (sep->str.n == 0)
            rfail(c, TXC_ERR_INVALID, line, "empty separator");
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
                PUSH(mk_strn(c, s->str.s + at + sep->str.n, end - at - sep->str.n));
                end = at;
                done++;
            }
            PUSH(mk_strn(c, s->str.s, end));
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
                                      ? memfind(s->str.s + i, s->str.n - i, sep->str.s, sep->str.n)
                                      : NULL;
                if (!hit) {
                    PUSH(mk_strn(c, s->str.s + i, s->str.n - i));
                    break;
                }
                size_t at = (size_t)(hit - s->str.s);
                PUSH(mk_strn(c, s->str.s + i, at - i));
                i = at + sep->str.n;
                done++;
            }
        }
    } else {
        if (right && maxsplit >= 0)
            rfail(c, TXC_ERR_UNSUPPORTED, line, "rsplit() on whitespace with maxsplit is not supported");
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
                PUSH(mk_strn(c, s->str.s + i, s->str.n - i));
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
            PUSH(mk_strn(c, s->str.s + i, j - i));
            done++;
            i = j;
        }
    }
#undef PUSH
    ct_value *l = mk_list(c, n, false);
    if (n)
        memcpy(l->list.items, items, n * sizeof *items);
    return l;
}

/* str.splitlines() */
static ct_value **str_splitlines(rctx *c, const char *s, size_t len, size_t *count)
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
            items[n++] = mk_strn(c, s + start, i - start);
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
        items[n++] = mk_strn(c, s + start, len - start);
    }
    *count = n;
    return items;
}

/* ---- JSON (transformers' tojson: json.dumps(ensure_ascii=False)) -------- */
typedef struct jopts {
    const char *indent; /* NULL: none */
    size_t indent_n;
    const char *item_sep, *key_sep;
    size_t item_sep_n, key_sep_n;
    bool sort_keys;
    bool ascii;
} jopts;

static void json_str(rctx *c, sbuf *b, const char *s, size_t n, bool ascii)
{
    sb_put(c, b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        const char *esc = NULL;
        char tmp[16];
        if (ascii && ch >= 0x80) { /* ensure_ascii: \uXXXX, surrogate pairs past the BMP */
            uint32_t cp;
            size_t w = ct_utf8_decode(s + i, n - i, &cp);
            sb_put(c, b, s + i - run, run);
            run = 0;
            if (cp >= 0x10000) {
                uint32_t v = cp - 0x10000;
                snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
            } else {
                snprintf(tmp, sizeof tmp, "\\u%04x", (unsigned)cp);
            }
            sb_puts(c, b, tmp);
            i += w - 1;
            continue;
        }
        if (ch == '"')
            esc = "\\\"";
        else if (ch == '\\')
            esc = "\\\\";
        else if (ch == '\n')
            esc = "\\n";
        else if (ch == '\r')
            esc = "\\r";
        else if (ch == '\t')
            esc = "\\t";
        else if (ch == '\b')
            esc = "\\b";
        else if (ch == '\f')
            esc = "\\f";
        else if (ch < 0x20) {
            snprintf(tmp, sizeof tmp, "\\u%04x", ch);
            esc = tmp;
        }
        if (esc) {
            sb_put(c, b, s + i - run, run);
            run = 0;
            sb_puts(c, b, esc);
        } else {
            run++;
        }
    }
    sb_put(c, b, s + n - run, run);
    sb_put(c, b, "\"", 1);
}

static void json_newline(rctx *c, sbuf *b, const jopts *o, int level)
{
    sb_put(c, b, "\n", 1);
    for (int k = 0; k < level; k++)
        sb_put(c, b, o->indent, o->indent_n);
}

static void json_dump(rctx *c, sbuf *b, const ct_value *v, const jopts *o, int level, int line)
{
    if (level > 200)
        rfail(c, TXC_ERR_CAPACITY, line, "tojson: a value nested deeper than 200 levels (or containing itself)");
    switch (v->kind) {
    case CT_NONE: sb_puts(c, b, "null"); return;
    case CT_BOOL: sb_puts(c, b, v->b ? "true" : "false"); return;
    case CT_INT: sb_printf(c, b, "%lld", (long long)v->i); return;
    case CT_FLOAT: float_repr(c, b, v->f, true); return;
    case CT_STR: json_str(c, b, v->str.s, v->str.n, o->ascii); return;
    case CT_LIST:
        if (v->list.range)
            rfail(c, TXC_ERR_INVALID, line, "Object of type range is not JSON serializable");
        if (v->list.n == 0) {
            sb_puts(c, b, "[]");
            return;
        }
        sb_put(c, b, "[", 1);
        for (size_t i = 0; i < v->list.n; i++) {
            if (i)
                sb_put(c, b, o->item_sep, o->item_sep_n);
            if (o->indent)
                json_newline(c, b, o, level + 1);
            json_dump(c, b, v->list.items[i], o, level + 1, line);
        }
        if (o->indent)
            json_newline(c, b, o, level);
        sb_put(c, b, "]", 1);
        return;
    case CT_DICT: {
        if (v->dict.n == 0) {
            sb_puts(c, b, "{}");
            return;
        }
        size_t n = v->dict.n;
        size_t *order = ct_alloc(&c->ar, n * sizeof *order);
        for (size_t i = 0; i < n; i++)
            order[i] = i;
        if (o->sort_keys) /* insertion sort by key (Python sorts the keys; mixed types are a TypeError) */
            for (size_t i = 1; i < n; i++)
                for (size_t j = i; j > 0 && compare(c, v->dict.keys[order[j - 1]], v->dict.keys[order[j]], "<", line) > 0; j--) {
                    size_t t = order[j];
                    order[j] = order[j - 1];
                    order[j - 1] = t;
                }
        sb_put(c, b, "{", 1);
        for (size_t q = 0; q < n; q++) {
            size_t i = order[q];
            if (q)
                sb_put(c, b, o->item_sep, o->item_sep_n);
            if (o->indent)
                json_newline(c, b, o, level + 1);
            const ct_value *k = v->dict.keys[i];
            if (k->kind == CT_STR) {
                json_str(c, b, k->str.s, k->str.n, o->ascii);
            } else if (k->kind == CT_INT || k->kind == CT_FLOAT || k->kind == CT_BOOL || k->kind == CT_NONE) {
                sbuf kb = {0};
                json_dump(c, &kb, k, o, level + 1, line);
                json_str(c, b, kb.p, kb.n, o->ascii);
            } else {
                rfail(c, TXC_ERR_INVALID, line, "keys must be str, int, float, bool or None, not %s", type_name(k));
            }
            sb_put(c, b, o->key_sep, o->key_sep_n);
            json_dump(c, b, v->dict.vals[i], o, level + 1, line);
        }
        if (o->indent)
            json_newline(c, b, o, level);
        sb_put(c, b, "}", 1);
        return;
    }
    default:
        rfail(c, TXC_ERR_INVALID, line, "Object of type %s is not JSON serializable", type_name(v));
    }
}

/* ---- argument binding --------------------------------------------------- */
typedef struct args {
    ct_value **pos;
    size_t npos;
    const char **kwn;
    ct_value **kwv;
    size_t nkw;
} args;

/* Bind `a` to the parameters `names` (NULL-terminated) into out[] (NULL:
 * not given). */
static void bind(rctx *c, const args *a, const char *const *names, ct_value **out, const char *what, int line)
{
    size_t np = 0;
    while (names[np])
        np++;
    for (size_t i = 0; i < np; i++)
        out[i] = NULL;
    if (a->npos > np)
        rfail(c, TXC_ERR_INVALID, line, "%s takes at most %zu argument%s (%zu given)", what, np, np == 1 ? "" : "s",
              a->npos);
    for (size_t i = 0; i < a->npos; i++)
        out[i] = a->pos[i];
    for (size_t k = 0; k < a->nkw; k++) {
        size_t i = 0;
        for (; i < np; i++)
            if (!strcmp(names[i], a->kwn[k]))
                break;
        if (i == np)
            rfail(c, TXC_ERR_INVALID, line, "%s got an unexpected keyword argument '%s'", what, a->kwn[k]);
        if (out[i])
            rfail(c, TXC_ERR_INVALID, line, "%s got multiple values for argument '%s'", what, a->kwn[k]);
        out[i] = a->kwv[k];
    }
}

static ct_value *need_str(rctx *c, ct_value *v, const char *what, int line)
{
    if (v->kind == CT_UNDEF)
        undef_fail(c, v, line);
    if (v->kind != CT_STR)
        rfail(c, TXC_ERR_INVALID, line, "%s: expected a string, got %s", what, type_name(v));
    return v;
}
static int64_t need_int(rctx *c, ct_value *v, const char *what, int line)
{
    if (v->kind == CT_UNDEF)
        undef_fail(c, v, line);
    if (v->kind != CT_INT && v->kind != CT_BOOL)
        rfail(c, TXC_ERR_INVALID, line, "%s: expected an integer, got %s", what, type_name(v));
    return num_i(v);
}

static ct_value *call_value(rctx *c, ct_value *fn, const args *a, int line);
static void exec_body(rctx *c, ct_node *const *body, size_t n);
static ct_value *eval(rctx *c, const ct_node *e);


/* str methods */
static ct_value *call_str_method(rctx *c, int id, ct_value *s, const args *a, int line)
{
    ct_value *p[3];
    if (s->str.markup && (id == M_REPLACE || id == M_JOIN))
        rfail(c, TXC_ERR_UNSUPPORTED, line, "methods of Markup strings (|safe, |escape) are not supported");
    switch (id) {
    case M_STRIP:
    case M_LSTRIP:
    case M_RSTRIP: {
        static const char *const nm[] = {"chars", NULL};
        bind(c, a, nm, p, "strip()", line);
        const ct_value *chars = p[0] && p[0]->kind != CT_NONE ? need_str(c, p[0], "strip()", line) : NULL;
        return str_strip(c, s, chars, id == M_STRIP ? STRIP_BOTH : id == M_LSTRIP ? STRIP_LEFT : STRIP_RIGHT);
    }
    case M_SPLIT:
    case M_RSPLIT: {
        static const char *const nm[] = {"sep", "maxsplit", NULL};
        bind(c, a, nm, p, "split()", line);
        return str_split(c, s, p[0], p[1] ? need_int(c, p[1], "split()", line) : -1, id == M_RSPLIT, line);
    }
    case M_SPLITLINES: {
        static const char *const nm[] = {"keepends", NULL};
        bind(c, a, nm, p, "splitlines()", line);
        if (p[0] && truthy(p[0]))
            rfail(c, TXC_ERR_UNSUPPORTED, line, "splitlines(keepends=True) is not supported");
        size_t n;
        ct_value **items = str_splitlines(c, s->str.s, s->str.n, &n);
        ct_value *l = mk_list(c, n, false);
        if (n)
            memcpy(l->list.items, items, n * sizeof *items);
        return l;
    }
    case M_STARTSWITH:
    case M_ENDSWITH: {
        static const char *const nm[] = {"prefix", "start", "end", NULL};
        bind(c, a, nm, p, id == M_STARTSWITH ? "startswith()" : "endswith()", line);
        if (!p[0])
            rfail(c, TXC_ERR_INVALID, line, "startswith()/endswith() takes at least 1 argument");
        if (p[1] || p[2])
            rfail(c, TXC_ERR_UNSUPPORTED, line, "startswith()/endswith() with start/end is not supported");
        size_t nc = 1;
        ct_value **cands = &p[0];
        if (p[0]->kind == CT_LIST && p[0]->list.tuple) {
            nc = p[0]->list.n;
            cands = p[0]->list.items;
        }
        for (size_t k = 0; k < nc; k++) {
            ct_value *x = cands[k];
            if (x->kind != CT_STR)
                rfail(c, TXC_ERR_INVALID, line, "startswith first arg must be str or a tuple of str, not %s",
                      type_name(x));
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
        bind(c, a, nm, p, "the method", line);
        return str_case(c, s,
                        id == M_UPPER ? CASE_UPPER : id == M_LOWER ? CASE_LOWER : id == M_TITLE ? CASE_TITLE_PY
                                                                                                 : CASE_CAPITALIZE);
    }
    case M_REPLACE: {
        static const char *const nm[] = {"old", "new", "count", NULL};
        bind(c, a, nm, p, "replace()", line);
        if (!p[0] || !p[1])
            rfail(c, TXC_ERR_INVALID, line, "replace() takes at least 2 arguments");
        return str_replace(c, s, need_str(c, p[0], "replace()", line), need_str(c, p[1], "replace()", line),
                           p[2] ? need_int(c, p[2], "replace()", line) : -1);
    }
    case M_FIND:
    case M_RFIND:
    case M_COUNT: {
        static const char *const nm[] = {"sub", "start", "end", NULL};
        bind(c, a, nm, p, "find()", line);
        if (!p[0])
            rfail(c, TXC_ERR_INVALID, line, "find()/count() takes at least 1 argument");
        if (p[1] || p[2])
            rfail(c, TXC_ERR_UNSUPPORTED, line, "find()/count() with start/end is not supported");
        ct_value *sub = need_str(c, p[0], "find()", line);
        if (id == M_COUNT) {
            if (sub->str.n == 0)
                return mk_int(c, (int64_t)str_cp_count(s->str.s, s->str.n) + 1);
            int64_t k = 0;
            size_t i = 0;
            const char *h;
            while ((h = memfind(s->str.s + i, s->str.n - i, sub->str.s, sub->str.n))) {
                k++;
                i = (size_t)(h - s->str.s) + sub->str.n;
            }
            return mk_int(c, k);
        }
        const char *hit = NULL;
        if (id == M_FIND) {
            hit = memfind(s->str.s, s->str.n, sub->str.s, sub->str.n);
        } else {
            for (size_t i = 0; i + sub->str.n <= s->str.n; i++)
                if (!memcmp(s->str.s + i, sub->str.s, sub->str.n))
                    hit = s->str.s + i;
        }
        if (!hit)
            return mk_int(c, -1);
        return mk_int(c, (int64_t)str_cp_count(s->str.s, (size_t)(hit - s->str.s)));
    }
    case M_JOIN: {
        static const char *const nm[] = {"iterable", NULL};
        bind(c, a, nm, p, "join()", line);
        if (!p[0])
            rfail(c, TXC_ERR_INVALID, line, "join() takes exactly one argument");
        size_t n;
        ct_value **items = iterate(c, p[0], &n, line);
        sbuf b = {0};
        for (size_t i = 0; i < n; i++) {
            if (items[i]->kind != CT_STR)
                rfail(c, TXC_ERR_INVALID, line, "sequence item %zu: expected str instance, %s found", i,
                      type_name(items[i]));
            if (i)
                sb_put(c, &b, s->str.s, s->str.n);
            sb_put(c, &b, items[i]->str.s, items[i]->str.n);
        }
        return sb_value(c, &b);
    }
    case M_ISDIGIT:
    case M_ISALPHA:
    case M_ISSPACE:
    case M_ISUPPER:
    case M_ISLOWER: {
        static const char *const nm[] = {NULL};
        bind(c, a, nm, p, "the method", line);
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
        bind(c, a, nm, p, "removeprefix()", line);
        if (!p[0])
            rfail(c, TXC_ERR_INVALID, line, "removeprefix()/removesuffix() takes exactly one argument");
        ct_value *x = need_str(c, p[0], "removeprefix()", line);
        if (x->str.n <= s->str.n) {
            if (id == M_REMOVEPREFIX && !memcmp(s->str.s, x->str.s, x->str.n))
                return mk_strn(c, s->str.s + x->str.n, s->str.n - x->str.n);
            if (id == M_REMOVESUFFIX && !memcmp(s->str.s + s->str.n - x->str.n, x->str.s, x->str.n))
                return mk_strn(c, s->str.s, s->str.n - x->str.n);
        }
        return s;
    }
    }
    rfail(c, TXC_ERR_INTERNAL, line, "unknown str method %d", id);
}

static ct_value *pair(rctx *c, ct_value *k, ct_value *v)
{
    ct_value *t = mk_list(c, 2, true);
    t->list.items[0] = k;
    t->list.items[1] = v;
    return t;
}

static ct_value *dict_items_list(rctx *c, ct_value *d, int which /* 0 items, 1 keys, 2 values */)
{
    ct_value *l = mk_list(c, d->dict.n, false);
    for (size_t i = 0; i < d->dict.n; i++)
        l->list.items[i] = which == 0 ? pair(c, d->dict.keys[i], d->dict.vals[i])
                                      : which == 1 ? d->dict.keys[i] : d->dict.vals[i];
    return l;
}

static ct_value *call_macro(rctx *c, ct_value *fn, const args *a, int line)
{
    const ct_node *m = fn->func.macro;
    if (a->npos > m->nnames)
        rfail(c, TXC_ERR_INVALID, line, "macro '%s' takes not more than %zu argument(s)", m->name, m->nnames);
    if (++c->calls > MAX_CALL_DEPTH)
        rfail(c, TXC_ERR_CAPACITY, line, "macro calls nested deeper than %d (recursion?)", MAX_CALL_DEPTH);
    frame *saved = c->cur;
    frame *f = frame_new(c, fn->func.closure);
    c->cur = f;
    for (size_t k = 0; k < a->nkw; k++) {
        size_t i = 0;
        for (; i < m->nnames; i++)
            if (!strcmp(m->names[i], a->kwn[k]))
                break;
        if (i == m->nnames)
            rfail(c, TXC_ERR_INVALID, line, "macro '%s' has no argument named '%s'", m->name, a->kwn[k]);
        if (i < a->npos)
            rfail(c, TXC_ERR_INVALID, line, "macro '%s' got multiple values for argument '%s'", m->name, a->kwn[k]);
    }
    for (size_t i = 0; i < m->nnames; i++) {
        ct_value *v = NULL;
        if (i < a->npos)
            v = a->pos[i];
        for (size_t k = 0; k < a->nkw; k++)
            if (!strcmp(m->names[i], a->kwn[k]))
                v = a->kwv[k];
        if (!v)
            v = m->args[i] ? eval(c, m->args[i]) : mk_undef(c, "parameter '%s' was not provided", m->names[i]);
        frame_set(c, f, m->names[i], v);
    }
    sbuf *saved_out = c->out;
    sbuf b = {0};
    c->out = &b;
    int saved_ctl = c->ctl;
    c->ctl = 0;
    exec_body(c, m->body, m->nbody);
    c->ctl = saved_ctl;
    c->out = saved_out;
    c->cur = saved;
    c->calls--;
    return sb_value(c, &b);
}

static ct_value *call_value(rctx *c, ct_value *fn, const args *a, int line)
{
    if (fn->kind == CT_UNDEF)
        undef_fail(c, fn, line);
    if (fn->kind != CT_FUNC)
        rfail(c, TXC_ERR_INVALID, line, "'%s' object is not callable", type_name(fn));
    if (fn->func.macro)
        return call_macro(c, fn, a, line);
    ct_value *p[4] = {0};
    int id = fn->func.id;
    switch (id) {
    case F_RAISE: {
        static const char *const nm[] = {"message", NULL};
        bind(c, a, nm, p, "raise_exception()", line);
        sbuf b = {0};
        if (p[0])
            to_str(c, &b, p[0], line);
        txc_error(TXC_ERR_INVALID, "%.*s", (int)b.n, b.p ? b.p : "");
        longjmp(c->fail, 1);
    }
    case F_STRFTIME: {
        static const char *const nm[] = {"format", NULL};
        bind(c, a, nm, p, "strftime_now()", line);
        if (!p[0])
            rfail(c, TXC_ERR_INVALID, line, "strftime_now() takes exactly one argument");
        ct_value *fmt = need_str(c, p[0], "strftime_now()", line);
        char *f = ct_strndup(&c->ar, fmt->str.s, fmt->str.n);
        time_t now = time(NULL);
        struct tm tmv;
        localtime_r(&now, &tmv);
        char out[512];
        size_t k = strftime(out, sizeof out, f, &tmv);
        if (k == 0 && fmt->str.n > 0)
            rfail(c, TXC_ERR_UNSUPPORTED, line, "strftime_now(): format too long or empty result");
        return mk_str_copy(c, out, k);
    }
    case F_RANGE: {
        if (a->nkw)
            rfail(c, TXC_ERR_INVALID, line, "range() takes no keyword arguments");
        if (a->npos < 1 || a->npos > 3)
            rfail(c, TXC_ERR_INVALID, line, "range expected 1 to 3 arguments, got %zu", a->npos);
        int64_t start = 0, stop, step = 1;
        if (a->npos == 1) {
            stop = need_int(c, a->pos[0], "range()", line);
        } else {
            start = need_int(c, a->pos[0], "range()", line);
            stop = need_int(c, a->pos[1], "range()", line);
            if (a->npos == 3)
                step = need_int(c, a->pos[2], "range()", line);
        }
        if (step == 0)
            rfail(c, TXC_ERR_INVALID, line, "range() arg 3 must not be zero");
        /* the length in unsigned arithmetic: stop - start and -step may
         * not fit in int64 (range(-2**63, 2**63 - 1), step -2**63) */
        uint64_t n = 0;
        if (step > 0 && stop > start)
            n = ((uint64_t)stop - (uint64_t)start - 1) / (uint64_t)step + 1;
        else if (step < 0 && start > stop)
            n = ((uint64_t)start - (uint64_t)stop - 1) / (0 - (uint64_t)step) + 1;
        if (n > MAX_RANGE)
            rfail(c, TXC_ERR_INVALID, line,
                  "Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).", MAX_RANGE);
        ct_value *l = mk_range(c, start, stop, step, (size_t)n);
        return l;
    }
    case F_NAMESPACE:
    case F_DICT: {
        ct_value *d = mk(c, id == F_NAMESPACE ? CT_NS : CT_DICT);
        if (a->npos > 1)
            rfail(c, TXC_ERR_INVALID, line, "%s expected at most 1 positional argument",
                  id == F_NAMESPACE ? "namespace()" : "dict()");
        if (a->npos == 1) {
            ct_value *src = a->pos[0];
            if (src->kind == CT_DICT || src->kind == CT_NS) {
                for (size_t i = 0; i < src->dict.n; i++)
                    dict_set(c, d, src->dict.keys[i], src->dict.vals[i]);
            } else {
                size_t n;
                ct_value **items = iterate(c, src, &n, line);
                for (size_t i = 0; i < n; i++) {
                    size_t m;
                    ct_value **kv = iterate(c, items[i], &m, line);
                    if (m != 2)
                        rfail(c, TXC_ERR_INVALID, line, "dictionary update sequence element #%zu has length %zu; 2 is required", i, m);
                    dict_set(c, d, kv[0], kv[1]);
                }
            }
        }
        for (size_t k = 0; k < a->nkw; k++) {
            if (id == F_NAMESPACE && a->kwn[k][0] == '_')
                rfail(c, TXC_ERR_INVALID, line,
                      "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '%s'. "
                      "Please rename the attribute.", a->kwn[k]);
            dict_set(c, d, mk_str_copy(c, a->kwn[k], strlen(a->kwn[k])), a->kwv[k]);
        }
        return d;
    }
    case F_UNSUPPORTED_GLOBAL: rfail(c, TXC_ERR_UNSUPPORTED, line, "cycler(), joiner() and lipsum() are not supported");
    case F_LOOP_CYCLE: {
        if (a->nkw || a->npos == 0)
            rfail(c, TXC_ERR_INVALID, line, "no items for cycling given");
        return a->pos[fn->func.self->loop->index0 % a->npos];
    }
    case M_GET: {
        static const char *const nm[] = {"key", "default", NULL};
        bind(c, a, nm, p, "get()", line);
        if (!p[0])
            rfail(c, TXC_ERR_INVALID, line, "get expected at least 1 argument, got 0");
        ct_value *v = dict_get(c, fn->func.self, p[0]);
        return v ? v : p[1] ? p[1] : V_NONE;
    }
    case M_ITEMS:
    case M_KEYS:
    case M_VALUES: {
        static const char *const nm[] = {NULL};
        bind(c, a, nm, p, "the method", line);
        return dict_items_list(c, fn->func.self, id == M_ITEMS ? 0 : id == M_KEYS ? 1 : 2);
    }
    default: return call_str_method(c, id, fn->func.self, a, line);
    }
}

/* ---- arithmetic --------------------------------------------------------- */
static ct_value *arith(rctx *c, int op, ct_value *a, ct_value *b, int line)
{
    if (a->kind == CT_UNDEF)
        undef_fail(c, a, line);
    if (b->kind == CT_UNDEF)
        undef_fail(c, b, line);
    static const char *const opn[] = {['+'] = "+", ['-'] = "-", ['*'] = "*", ['/'] = "/", ['f'] = "//",
                                      ['%'] = "%", ['p'] = "**"};
    if (is_num(a) && is_num(b)) {
        bool fl = a->kind == CT_FLOAT || b->kind == CT_FLOAT;
        if (op == '/') {
            if (num_f(b) == 0.0)
                rfail(c, TXC_ERR_INVALID, line, "division by zero");
            return mk_float(c, num_f(a) / num_f(b));
        }
        if (fl) {
            double x = num_f(a), y = num_f(b), r;
            switch (op) {
            case '+': r = x + y; break;
            case '-': r = x - y; break;
            case '*': r = x * y; break;
            case 'f':
                if (y == 0.0)
                    rfail(c, TXC_ERR_INVALID, line, "float floor division by zero");
                r = floor(x / y);
                break;
            case '%':
                if (y == 0.0)
                    rfail(c, TXC_ERR_INVALID, line, "float modulo");
                r = fmod(x, y);
                if (r != 0.0 && ((r < 0) != (y < 0)))
                    r += y;
                break;
            default: r = pow(x, y); break;
            }
            return mk_float(c, r);
        }
        int64_t x = num_i(a), y = num_i(b), r = 0;
        bool ovf = false;
        switch (op) {
        case '+': ovf = __builtin_add_overflow(x, y, &r); break;
        case '-': ovf = __builtin_sub_overflow(x, y, &r); break;
        case '*': ovf = __builtin_mul_overflow(x, y, &r); break;
        case 'f':
        case '%':
            if (y == 0)
                rfail(c, TXC_ERR_INVALID, line, "integer division or modulo by zero");
            if (x == INT64_MIN && y == -1) {
                ovf = op == 'f';
                r = 0;
                break;
            }
            {
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) {
                    q--;
                    m += y;
                }
                r = op == 'f' ? q : m;
            }
            break;
        default:
            if (y < 0)
                return mk_float(c, pow((double)x, (double)y));
            r = 1;
            for (int64_t k = 0; k < y && !ovf; k++) {
                ovf = __builtin_mul_overflow(r, x, &r);
                if (r == 0 || r == 1)
                    break;
            }
            if (!ovf && x == -1)
                r = (y % 2) ? -1 : 1;
            break;
        }
        if (ovf)
            rfail(c, TXC_ERR_UNSUPPORTED, line, "integer overflow in '%s' (Python integers are unbounded)", opn[op]);
        return mk_int(c, r);
    }
    if (op == '+' && ((a->kind == CT_STR && a->str.markup) || (b->kind == CT_STR && b->str.markup)))
        rfail(c, TXC_ERR_UNSUPPORTED, line, "'+' on Markup strings (|safe, |escape) is not supported");
    if (op == '+' && a->kind == CT_STR && b->kind == CT_STR) {
        if (a->str.n + b->str.n > OUTPUT_LIMIT)
            rfail(c, TXC_ERR_CAPACITY, line, "string larger than %zu MiB", OUTPUT_LIMIT >> 20);
        char *s = ct_alloc(&c->ar, a->str.n + b->str.n + 1);
        memcpy(s, a->str.s, a->str.n);
        memcpy(s + a->str.n, b->str.s, b->str.n);
        return mk_strn(c, s, a->str.n + b->str.n);
    }
    if (op == '+' && a->kind == CT_LIST && b->kind == CT_LIST && a->list.tuple == b->list.tuple && !a->list.range &&
        !b->list.range) {
        ct_value *l = mk_list(c, a->list.n + b->list.n, a->list.tuple);
        if (a->list.n)
            memcpy(l->list.items, a->list.items, a->list.n * sizeof *l->list.items);
        if (b->list.n)
            memcpy(l->list.items + a->list.n, b->list.items, b->list.n * sizeof *l->list.items);
        return l;
    }
    if (op == '*' && ((a->kind == CT_STR || (a->kind == CT_LIST && !a->list.range)) &&
                      (b->kind == CT_INT || b->kind == CT_BOOL))) {
        int64_t k = num_i(b);
        if (k < 0)
            k = 0;
        size_t unit = a->kind == CT_STR ? a->str.n : a->list.n;
        if (unit && (uint64_t)k > OUTPUT_LIMIT / unit)
            rfail(c, TXC_ERR_CAPACITY, line, "repetition larger than %zu MiB", OUTPUT_LIMIT >> 20);
        if (a->kind == CT_STR) {
            sbuf s = {0};
            for (int64_t q = 0; q < k; q++)
                sb_put(c, &s, a->str.s, a->str.n);
            return sb_value(c, &s);
        }
        ct_value *l = mk_list(c, unit * (size_t)k, a->list.tuple);
        for (int64_t q = 0; q < k; q++)
            if (unit)
                memcpy(l->list.items + (size_t)q * unit, a->list.items, unit * sizeof *l->list.items);
        return l;
    }
    if (op == '*' && (b->kind == CT_STR || (b->kind == CT_LIST && !b->list.range)) &&
        (a->kind == CT_INT || a->kind == CT_BOOL))
        return arith(c, op, b, a, line);
    if (op == '%' && a->kind == CT_STR)
        rfail(c, TXC_ERR_UNSUPPORTED, line, "'%%' string formatting is not supported");
    rfail(c, TXC_ERR_INVALID, line, "unsupported operand type(s) for %s: '%s' and '%s'", opn[op], type_name(a),
          type_name(b));
}

static bool contains(rctx *c, ct_value *needle, ct_value *hay, int line)
{
    switch (hay->kind) {
    case CT_UNDEF: return false;
    case CT_STR:
        if (needle->kind != CT_STR)
            rfail(c, TXC_ERR_INVALID, line, "'in <string>' requires string as left operand, not %s",
                  type_name(needle));
        return memfind(hay->str.s, hay->str.n, needle->str.s, needle->str.n) != NULL;
    case CT_LIST:
        for (size_t i = 0; i < hay->list.n; i++)
            if (equal(c, hay->list.items[i], needle))
                return true;
        return false;
    case CT_DICT: return dict_get(c, hay, needle) != NULL;
    case CT_NS:
        rfail(c, TXC_ERR_INVALID, line, "argument of type 'Namespace' is not iterable");
    default: rfail(c, TXC_ERR_INVALID, line, "argument of type '%s' is not iterable", type_name(hay));
    }
}

/* ---- tests -------------------------------------------------------------- */
enum {
    T_DEFINED,
    T_UNDEFINED,
    T_NONE,
    T_BOOLEAN,
    T_FALSE,
    T_TRUE,
    T_INTEGER,
    T_FLOAT,
    T_NUMBER,
    T_STRING,
    T_MAPPING,
    T_ITERABLE,
    T_SEQUENCE,
    T_CALLABLE,
    T_SAMEAS,
    T_IN,
    T_ODD,
    T_EVEN,
    T_DIVISIBLEBY,
    T_EQ,
    T_NE,
    T_LT,
    T_LE,
    T_GT,
    T_GE,
    T_LOWER,
    T_UPPER,
    T_ESCAPED,
};
static const struct {
    const char *name;
    int id;
} tests[] = {
    {"defined", T_DEFINED},     {"undefined", T_UNDEFINED}, {"none", T_NONE},       {"boolean", T_BOOLEAN},
    {"false", T_FALSE},         {"true", T_TRUE},           {"integer", T_INTEGER}, {"float", T_FLOAT},
    {"number", T_NUMBER},       {"string", T_STRING},       {"mapping", T_MAPPING}, {"iterable", T_ITERABLE},
    {"sequence", T_SEQUENCE},   {"callable", T_CALLABLE},   {"sameas", T_SAMEAS},   {"in", T_IN},
    {"odd", T_ODD},             {"even", T_EVEN},           {"divisibleby", T_DIVISIBLEBY},
    {"eq", T_EQ},               {"equalto", T_EQ},          {"==", T_EQ},           {"ne", T_NE},
    {"!=", T_NE},               {"lt", T_LT},               {"lessthan", T_LT},     {"<", T_LT},
    {"le", T_LE},               {"<=", T_LE},               {"gt", T_GT},           {"greaterthan", T_GT},
    {">", T_GT},                {"ge", T_GE},               {">=", T_GE},           {"lower", T_LOWER},
    {"upper", T_UPPER},         {"escaped", T_ESCAPED},
};

int ct_test_id(const char *name)
{
    for (size_t k = 0; k < sizeof tests / sizeof *tests; k++)
        if (!strcmp(tests[k].name, name))
            return tests[k].id;
    return -1;
}

static bool run_test(rctx *c, int id, ct_value *v, ct_value **a, size_t na, int line)
{
    size_t need = (id == T_SAMEAS || id == T_IN || id == T_DIVISIBLEBY || (id >= T_EQ && id <= T_GE)) ? 1 : 0;
    if (na != need)
        rfail(c, TXC_ERR_INVALID, line, "the test takes %zu argument%s (%zu given)", need, need == 1 ? "" : "s", na);
    switch (id) {
    case T_DEFINED: return v->kind != CT_UNDEF;
    case T_UNDEFINED: return v->kind == CT_UNDEF;
    case T_NONE: return v->kind == CT_NONE;
    case T_BOOLEAN: return v->kind == CT_BOOL;
    case T_FALSE: return v->kind == CT_BOOL && !v->b;
    case T_TRUE: return v->kind == CT_BOOL && v->b;
    case T_INTEGER: return v->kind == CT_INT;
    case T_FLOAT: return v->kind == CT_FLOAT;
    case T_NUMBER: return is_num(v);
    case T_STRING: return v->kind == CT_STR;
    case T_MAPPING: return v->kind == CT_DICT;
    case T_ITERABLE: return v->kind == CT_UNDEF || v->kind == CT_STR || v->kind == CT_LIST || v->kind == CT_DICT;
    case T_SEQUENCE: return v->kind == CT_UNDEF || v->kind == CT_STR || v->kind == CT_LIST || v->kind == CT_DICT;
    case T_CALLABLE: return v->kind == CT_FUNC;
    case T_SAMEAS:
        if (v->kind != a[0]->kind)
            return false;
        if (v->kind == CT_NONE || v->kind == CT_UNDEF)
            return v->kind == CT_NONE;
        if (v->kind == CT_BOOL)
            return v->b == a[0]->b;
        return v == a[0];
    case T_IN: return contains(c, v, a[0], line);
    case T_ODD:
    case T_EVEN: {
        int64_t x = need_int(c, v, "odd/even", line);
        return (((x % 2) + 2) % 2 == 1) == (id == T_ODD);
    }
    case T_DIVISIBLEBY: {
        ct_value *m = arith(c, '%', v, a[0], line);
        return !truthy(m);
    }
    case T_EQ: return equal(c, v, a[0]);
    case T_NE: return !equal(c, v, a[0]);
    case T_LT: return compare(c, v, a[0], "<", line) < 0;
    case T_LE: return compare(c, v, a[0], "<=", line) <= 0;
    case T_GT: return compare(c, v, a[0], ">", line) > 0;
    case T_GE: return compare(c, v, a[0], ">=", line) >= 0;
    case T_LOWER:
    case T_UPPER: {
        ct_value *s = str_of(c, v, line);
        args none = {0};
        return truthy(call_str_method(c, id == T_LOWER ? M_ISLOWER : M_ISUPPER, s, &none, line));
    }
    case T_ESCAPED: return v->kind == CT_STR && v->str.markup;
    }
    return false;
}

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
static const struct {
    const char *name;
    int id;
} filters[] = {
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

int ct_filter_id(const char *name)
{
    for (size_t k = 0; k < sizeof filters / sizeof *filters; k++)
        if (!strcmp(filters[k].name, name))
            return filters[k].id;
    return -1;
}

/* attribute path "a.b.0" of jinja's make_attrgetter */
static ct_value *attr_path(rctx *c, ct_value *item, ct_value *attr, int line)
{
    if (attr->kind == CT_INT)
        return getitem_v(c, item, attr, line);
    ct_value *s = need_str(c, attr, "attribute", line);
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
        ct_value *key = digits ? mk_int(c, strtoll(ct_strndup(&c->ar, part, pn), NULL, 10)) : mk_strn(c, part, pn);
        v = getitem_v(c, v, key, line);
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
        v = str_case(c, v, CASE_LOWER);
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
            rfail(c, TXC_ERR_INVALID, line, "unhashable type: 'list'");
        depth_enter(c);
        uint64_t h = 5;
        for (size_t i = 0; i < v->list.n; i++)
            h = hash_mix(h, value_hash(c, v->list.items[i], line));
        c->vdepth--;
        return h;
    }
    case CT_DICT: rfail(c, TXC_ERR_INVALID, line, "unhashable type: 'dict'");
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
            if (hs[k] == h && equal(c, keys[i], keys[k])) {
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
                int r = compare(c, keys[b], keys[a], "<", line);
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
        rfail(c, TXC_ERR_UNSUPPORTED, line, "int: '%s' is outside the 64-bit integer range", text);
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

static ct_value *apply_filter(rctx *c, const ct_node *f, ct_value *v, const args *a)
{
    int line = f->line;
    ct_value *p[4] = {0};
    const char *what = f->name;
    switch (f->id) {
    case FL_TRIM: {
        static const char *const nm[] = {"chars", NULL};
        bind(c, a, nm, p, what, line);
        ct_value *s = str_of(c, v, line);
        return str_strip(c, s, p[0] && p[0]->kind != CT_NONE ? need_str(c, p[0], what, line) : NULL, STRIP_BOTH);
    }
    case FL_LENGTH: {
        static const char *const nm[] = {NULL};
        bind(c, a, nm, p, what, line);
        return mk_int(c, (int64_t)length_of(c, v, line));
    }
    case FL_FIRST:
    case FL_LAST: {
        static const char *const nm[] = {NULL};
        bind(c, a, nm, p, what, line);
        size_t n;
        ct_value **items = iterate(c, v, &n, line);
        if (n == 0)
            return mk_undef(c, "No %s item, sequence was empty.", f->id == FL_FIRST ? "first" : "last");
        return f->id == FL_FIRST ? items[0] : items[n - 1];
    }
    case FL_UPPER:
    case FL_LOWER:
    case FL_CAPITALIZE:
    case FL_TITLE: {
        static const char *const nm[] = {NULL};
        bind(c, a, nm, p, what, line);
        ct_value *s = str_of(c, v, line);
        return str_case(c, s,
                        f->id == FL_UPPER ? CASE_UPPER : f->id == FL_LOWER ? CASE_LOWER
                                                     : f->id == FL_TITLE ? CASE_TITLE_JINJA : CASE_CAPITALIZE);
    }
    case FL_REPLACE: {
        static const char *const nm[] = {"old", "new", "count", NULL};
        bind(c, a, nm, p, what, line);
        if (!p[0] || !p[1])
            rfail(c, TXC_ERR_INVALID, line, "replace needs 'old' and 'new'");
        return str_replace(c, str_of(c, v, line), str_of(c, p[0], line), str_of(c, p[1], line),
                           p[2] && p[2]->kind != CT_NONE ? need_int(c, p[2], what, line) : -1);
    }
    case FL_TOJSON: {
        static const char *const nm[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
        bind(c, a, nm, p, what, line);
        jopts o = {0};
        o.ascii = p[0] && truthy(p[0]);
        sbuf ind = {0};
        if (p[1] && p[1]->kind != CT_NONE) {
            if (p[1]->kind == CT_STR) {
                sb_put(c, &ind, p[1]->str.s, p[1]->str.n);
            } else {
                int64_t k = need_int(c, p[1], what, line);
                for (int64_t q = 0; q < k && q < 64; q++)
                    sb_put(c, &ind, " ", 1);
            }
            o.indent = ind.p ? ind.p : "";
            o.indent_n = ind.n;
        }
        o.item_sep = o.indent ? "," : ", ";
        o.key_sep = ": ";
        if (p[2] && p[2]->kind != CT_NONE) {
            size_t m;
            ct_value **sp = iterate(c, p[2], &m, line);
            if (m != 2 || sp[0]->kind != CT_STR || sp[1]->kind != CT_STR)
                rfail(c, TXC_ERR_INVALID, line, "tojson: separators must be a pair of strings");
            o.item_sep = sp[0]->str.s;
            o.item_sep_n = sp[0]->str.n;
            o.key_sep = sp[1]->str.s;
            o.key_sep_n = sp[1]->str.n;
        } else {
            o.item_sep_n = strlen(o.item_sep);
            o.key_sep_n = strlen(o.key_sep);
        }
        o.sort_keys = p[3] && truthy(p[3]);
        sbuf b = {0};
        json_dump(c, &b, v, &o, 0, line);
        return sb_value(c, &b);
    }
    case FL_JOIN: {
        static const char *const nm[] = {"d", "attribute", NULL};
        bind(c, a, nm, p, what, line);
        size_t n;
        ct_value **items = iterate(c, v, &n, line);
        ct_value *sep = p[0] ? str_of(c, p[0], line) : NULL;
        sbuf b = {0};
        for (size_t i = 0; i < n; i++) {
            if (i && sep)
                sb_put(c, &b, sep->str.s, sep->str.n);
            to_str(c, &b, p[1] ? attr_path(c, items[i], p[1], line) : items[i], line);
        }
        return sb_value(c, &b);
    }
    case FL_DEFAULT: {
        static const char *const nm[] = {"default_value", "boolean", NULL};
        bind(c, a, nm, p, what, line);
        bool use = v->kind == CT_UNDEF || (p[1] && truthy(p[1]) && !truthy(v));
        return use ? (p[0] ? p[0] : mk_strn(c, "", 0)) : v;
    }
    case FL_ITEMS: {
        static const char *const nm[] = {NULL};
        bind(c, a, nm, p, what, line);
        if (v->kind == CT_UNDEF)
            return mk_list(c, 0, false);
        if (v->kind != CT_DICT)
            rfail(c, TXC_ERR_INVALID, line, "Can only get item pairs from a mapping.");
        return dict_items_list(c, v, 0);
    }
    case FL_SELECTATTR:
    case FL_REJECTATTR:
    case FL_SELECT:
    case FL_REJECT: {
        bool byattr = f->id == FL_SELECTATTR || f->id == FL_REJECTATTR;
        bool keep_true = f->id == FL_SELECTATTR || f->id == FL_SELECT;
        if (a->nkw)
            rfail(c, TXC_ERR_UNSUPPORTED, line, "%s with keyword arguments is not supported", what);
        size_t k = 0;
        ct_value *attr = NULL;
        if (byattr) {
            if (a->npos < 1)
                rfail(c, TXC_ERR_INVALID, line, "%s needs an attribute name", what);
            attr = a->pos[k++];
        }
        int tid = -1;
        if (k < a->npos) {
            ct_value *tn = need_str(c, a->pos[k++], what, line);
            char *nm = ct_strndup(&c->ar, tn->str.s, tn->str.n);
            tid = ct_test_id(nm);
            if (tid < 0)
                rfail(c, TXC_ERR_UNSUPPORTED, line, "test '%s' is not supported", nm);
        }
        size_t n;
        ct_value **items = iterate(c, v, &n, line);
        ct_value *out = mk_list(c, n, false);
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            ct_value *x = attr ? attr_path(c, items[i], attr, line) : items[i];
            bool r = tid >= 0 ? run_test(c, tid, x, a->pos + k, a->npos - k, line) : truthy(x);
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
                rfail(c, TXC_ERR_UNSUPPORTED, line, "map(): keyword argument '%s' is not supported", a->kwn[q]);
        }
        size_t n;
        ct_value **items = iterate(c, v, &n, line);
        ct_value *out = mk_list(c, n, false);
        if (attr) {
            if (a->npos)
                rfail(c, TXC_ERR_INVALID, line, "map(): attribute= takes no positional arguments");
            for (size_t i = 0; i < n; i++) {
                ct_value *x = attr_path(c, items[i], attr, line);
                out->list.items[i] = x->kind == CT_UNDEF && dflt ? dflt : x;
            }
            return out;
        }
        if (a->npos < 1)
            rfail(c, TXC_ERR_INVALID, line, "map requires a filter argument");
        ct_value *fname = need_str(c, a->pos[0], what, line);
        ct_node fake = *f;
        fake.name = ct_strndup(&c->ar, fname->str.s, fname->str.n);
        fake.id = ct_filter_id(fake.name);
        if (fake.id < 0)
            rfail(c, TXC_ERR_UNSUPPORTED, line, "filter '%s' is not supported", fake.name);
        args rest = {a->pos + 1, a->npos - 1, NULL, NULL, 0};
        for (size_t i = 0; i < n; i++)
            out->list.items[i] = apply_filter(c, &fake, items[i], &rest);
        return out;
    }
    case FL_LIST: {
        static const char *const nm[] = {NULL};
        bind(c, a, nm, p, what, line);
        return list_of(c, v, line);
    }
    case FL_STRING: {
        static const char *const nm[] = {NULL};
        bind(c, a, nm, p, what, line);
        return str_of(c, v, line);
    }
    case FL_INT:
    case FL_FLOAT: {
        /* jinja2 do_int: int(value, base) for a str, int(value) otherwise;
         * on TypeError/ValueError int(float(value)), on TypeError/ValueError/
         * OverflowError `default`. do_float: float(value), else `default`. */
        static const char *const nmi[] = {"default", "base", NULL};
        static const char *const nmf[] = {"default", NULL};
        bind(c, a, f->id == FL_INT ? nmi : nmf, p, what, line);
        ct_value *dflt = p[0] ? p[0] : f->id == FL_INT ? mk_int(c, 0) : mk_float(c, 0.0);
        double d;
        if (v->kind == CT_UNDEF)
            undef_fail(c, v, line);
        if (v->kind == CT_STR) {
            const char *s = py_num_ascii(c, v);
            if (f->id == FL_INT) {
                /* base: an int 0 or 2..36, else int() raises and the float path is taken */
                int64_t base = 10;
                if (p[1])
                    base = p[1]->kind == CT_INT || p[1]->kind == CT_BOOL ? num_i(p[1]) : -1;
                int64_t x;
                if ((base == 0 || (base >= 2 && base <= 36)) && py_parse_int(c, s, (int)base, &x, line))
                    return mk_int(c, x);
            }
            if (!py_parse_float(c, s, &d))
                return dflt;
            if (f->id == FL_FLOAT)
                return mk_float(c, d);
            if (!isfinite(d)) /* ValueError / OverflowError, caught */
                return dflt;
        } else if (is_num(v)) {
            if (f->id == FL_FLOAT)
                return mk_float(c, num_f(v));
            if (v->kind != CT_FLOAT)
                return mk_int(c, num_i(v));
            d = v->f;
            if (isnan(d)) /* int(nan): ValueError, then int(float(nan)) again: the default */
                return dflt;
            if (isinf(d)) /* int(inf): OverflowError, which do_int's first except does not catch */
                rfail(c, TXC_ERR_INVALID, line, "cannot convert float infinity to integer");
        } else {
            return dflt; /* TypeError */
        }
        if (fabs(d) >= 9223372036854775808.0)
            rfail(c, TXC_ERR_UNSUPPORTED, line, "int: %g is outside the 64-bit integer range", d);
        return mk_int(c, (int64_t)d);
    }
    case FL_ABS: {
        static const char *const nm[] = {NULL};
        bind(c, a, nm, p, what, line);
        if (v->kind == CT_FLOAT)
            return mk_float(c, fabs(v->f));
        int64_t x = need_int(c, v, what, line);
        if (x == INT64_MIN)
            rfail(c, TXC_ERR_UNSUPPORTED, line, "integer overflow in abs");
        return mk_int(c, x < 0 ? -x : x);
    }
    case FL_ROUND: {
        static const char *const nm[] = {"precision", "method", NULL};
        bind(c, a, nm, p, what, line);
        if ((p[0] && need_int(c, p[0], what, line) != 0) || p[1])
            rfail(c, TXC_ERR_UNSUPPORTED, line, "round() with a precision or method is not supported");
        if (!is_num(v))
            rfail(c, TXC_ERR_INVALID, line, "round: expected a number, got %s", type_name(v));
        return mk_float(c, nearbyint(num_f(v)));
    }
    case FL_INDENT: {
        static const char *const nm[] = {"width", "first", "blank", NULL};
        bind(c, a, nm, p, what, line);
        sbuf ind = {0};
        if (p[0] && p[0]->kind == CT_STR) {
            sb_put(c, &ind, p[0]->str.s, p[0]->str.n);
        } else {
            int64_t w = p[0] ? need_int(c, p[0], what, line) : 4;
            for (int64_t q = 0; q < w && q < 4096; q++)
                sb_put(c, &ind, " ", 1);
        }
        ct_value *s = str_of(c, v, line);
        sbuf t = {0};
        sb_put(c, &t, s->str.s, s->str.n);
        sb_put(c, &t, "\n", 1);
        size_t n;
        ct_value **lines = str_splitlines(c, t.p, t.n, &n);
        sbuf o = {0};
        if (p[1] && truthy(p[1]))
            sb_put(c, &o, ind.p, ind.n);
        bool blank = p[2] && truthy(p[2]);
        for (size_t i = 0; i < n; i++) {
            if (i) {
                sb_put(c, &o, "\n", 1);
                if (blank || lines[i]->str.n)
                    sb_put(c, &o, ind.p, ind.n);
            }
            sb_put(c, &o, lines[i]->str.s, lines[i]->str.n);
        }
        return sb_value(c, &o);
    }
    case FL_SAFE:
    case FL_ESCAPE: {
        static const char *const nm[] = {NULL};
        bind(c, a, nm, p, what, line);
        if (v->kind == CT_STR && v->str.markup && strcmp(what, "forceescape") != 0)
            return v;
        ct_value *s = str_of(c, v, line);
        ct_value *r;
        if (f->id == FL_SAFE) {
            r = mk_strn(c, s->str.s, s->str.n);
        } else {
            sbuf b = {0};
            for (size_t i = 0; i < s->str.n; i++) {
                switch (s->str.s[i]) {
                case '&': sb_puts(c, &b, "&amp;"); break;
                case '<': sb_puts(c, &b, "&lt;"); break;
                case '>': sb_puts(c, &b, "&gt;"); break;
                case '"': sb_puts(c, &b, "&#34;"); break;
                case '\'': sb_puts(c, &b, "&#39;"); break;
                default: sb_put(c, &b, s->str.s + i, 1);
                }
            }
            r = sb_value(c, &b);
        }
        r->str.markup = true;
        return r;
    }
    case FL_REVERSE: {
        static const char *const nm[] = {NULL};
        bind(c, a, nm, p, what, line);
        if (v->kind == CT_STR) {
            size_t cnt;
            size_t *off = cp_offsets(c, v->str.s, v->str.n, &cnt);
            sbuf b = {0};
            for (size_t k = cnt; k-- > 0;)
                sb_put(c, &b, v->str.s + off[k], off[k + 1] - off[k]);
            return sb_value(c, &b);
        }
        size_t n;
        ct_value **items = iterate(c, v, &n, line);
        ct_value *l = mk_list(c, n, false);
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
            bind(c, a, nms, q, what, line);
        } else {
            bind(c, a, nmu, q + 1, what, line);
        }
        bool rev = q[0] && truthy(q[0]), cs = q[1] && truthy(q[1]);
        ct_value *attr = q[2];
        size_t n;
        ct_value **items = iterate(c, v, &n, line);
        ct_value *l = mk_list(c, n, false);
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
                return mk_undef(c, "No aggregated item, sequence was empty.");
            size_t best = 0;
            for (size_t i = 1; i < n; i++) {
                int r = compare(c, keys[i], keys[best], "<", line);
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
        bind(c, a, nm, p, what, line);
        size_t n;
        ct_value **items = iterate(c, v, &n, line);
        ct_value *acc = p[1] ? p[1] : mk_int(c, 0);
        for (size_t i = 0; i < n; i++)
            acc = arith(c, '+', acc, p[0] ? attr_path(c, items[i], p[0], line) : items[i], line);
        return acc;
    }
    case FL_DICTSORT: {
        static const char *const nm[] = {"case_sensitive", "by", "reverse", NULL};
        bind(c, a, nm, p, what, line);
        if (v->kind != CT_DICT)
            rfail(c, TXC_ERR_INVALID, line, "dictsort: expected a mapping, got %s", type_name(v));
        int by = 0;
        if (p[1]) {
            ct_value *b = need_str(c, p[1], what, line);
            if (b->str.n == 5 && !memcmp(b->str.s, "value", 5))
                by = 1;
            else if (!(b->str.n == 3 && !memcmp(b->str.s, "key", 3)))
                rfail(c, TXC_ERR_INVALID, line, "You can only sort by either \"key\" or \"value\"");
        }
        bool cs = p[0] && truthy(p[0]), rev = p[2] && truthy(p[2]);
        ct_value *l = dict_items_list(c, v, 0);
        size_t n = l->list.n;
        ct_value **keys = ct_alloc(&c->ar, (n ? n : 1) * sizeof *keys);
        for (size_t i = 0; i < n; i++)
            keys[i] = sort_key(c, l->list.items[i]->list.items[by], NULL, cs, line);
        for (size_t i = 1; i < n; i++)
            for (size_t j = i; j > 0; j--) {
                int r = compare(c, keys[j - 1], keys[j], "<", line);
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
    rfail(c, TXC_ERR_INTERNAL, line, "unknown filter %d", f->id);
}

/* ---- expressions -------------------------------------------------------- */
static void eval_args(rctx *c, const ct_node *e, args *a)
{
    a->npos = e->nargs;
    a->nkw = e->nkw;
    a->pos = ct_alloc(&c->ar, (e->nargs ? e->nargs : 1) * sizeof *a->pos);
    a->kwv = ct_alloc(&c->ar, (e->nkw ? e->nkw : 1) * sizeof *a->kwv);
    a->kwn = e->kwnames;
    for (size_t i = 0; i < e->nargs; i++)
        a->pos[i] = eval(c, e->args[i]);
    for (size_t i = 0; i < e->nkw; i++)
        a->kwv[i] = eval(c, e->kwargs[i]);
}

static ct_value *eval(rctx *c, const ct_node *e)
{
    tick(c, 1, e->line);
    switch (e->kind) {
    case E_CONST: return e->value;
    case E_NAME: return lookup(c, e->name);
    case E_ATTR: return getattr_v(c, eval(c, e->a), e->name, e->line);
    case E_ITEM: {
        ct_value *o = eval(c, e->a);
        return getitem_v(c, o, eval(c, e->b), e->line);
    }
    case E_SLICE: {
        ct_value *o = eval(c, e->a);
        ct_value *parts[3];
        for (int k = 0; k < 3; k++)
            parts[k] = e->args[k] ? eval(c, e->args[k]) : NULL;
        return do_slice(c, o, parts, e->line);
    }
    case E_CALL: {
        ct_value *fn = eval(c, e->a);
        args a;
        eval_args(c, e, &a);
        return call_value(c, fn, &a, e->line);
    }
    case E_FILTER: {
        ct_value *in = eval(c, e->a);
        args a;
        eval_args(c, e, &a);
        return apply_filter(c, e, in, &a);
    }
    case E_TEST: {
        ct_value *in = eval(c, e->a);
        args a;
        eval_args(c, e, &a);
        if (a.nkw)
            rfail(c, TXC_ERR_UNSUPPORTED, e->line, "keyword arguments to tests are not supported");
        bool r = run_test(c, e->id, in, a.pos, a.npos, e->line);
        return V_BOOL(e->op ? !r : r);
    }
    case E_NOT: return V_BOOL(!truthy(eval(c, e->a)));
    case E_NEG:
    case E_POS: {
        ct_value *v = eval(c, e->a);
        if (v->kind == CT_UNDEF)
            undef_fail(c, v, e->line);
        if (v->kind == CT_FLOAT)
            return mk_float(c, e->kind == E_NEG ? -v->f : v->f);
        if (v->kind == CT_INT || v->kind == CT_BOOL) {
            int64_t x = num_i(v);
            if (e->kind == E_NEG && x == INT64_MIN)
                rfail(c, TXC_ERR_UNSUPPORTED, e->line, "integer overflow");
            return mk_int(c, e->kind == E_NEG ? -x : x);
        }
        rfail(c, TXC_ERR_INVALID, e->line, "bad operand type for unary %c: '%s'", e->kind == E_NEG ? '-' : '+',
              type_name(v));
    }
    case E_BINOP: {
        ct_value *a = eval(c, e->a);
        return arith(c, e->op, a, eval(c, e->b), e->line);
    }
    case E_CONCAT: {
        sbuf b = {0};
        for (size_t i = 0; i < e->nargs; i++)
            to_str(c, &b, eval(c, e->args[i]), e->line);
        return sb_value(c, &b);
    }
    case E_AND: {
        ct_value *a = eval(c, e->a);
        return truthy(a) ? eval(c, e->b) : a;
    }
    case E_OR: {
        ct_value *a = eval(c, e->a);
        return truthy(a) ? a : eval(c, e->b);
    }
    case E_CMP: {
        ct_value *a = eval(c, e->a), *b = eval(c, e->b);
        switch (e->op) {
        case 'e': return V_BOOL(equal(c, a, b));
        case 'n': return V_BOOL(!equal(c, a, b));
        case '<': return V_BOOL(compare(c, a, b, "<", e->line) < 0);
        case 'l': return V_BOOL(compare(c, a, b, "<=", e->line) <= 0);
        case '>': return V_BOOL(compare(c, a, b, ">", e->line) > 0);
        case 'g': return V_BOOL(compare(c, a, b, ">=", e->line) >= 0);
        case 'i': return V_BOOL(contains(c, a, b, e->line));
        default: return V_BOOL(!contains(c, a, b, e->line));
        }
    }
    case E_COND:
        if (truthy(eval(c, e->a)))
            return eval(c, e->b);
        return e->c ? eval(c, e->c) : mk_undef(c, "the inline if expression on line %d evaluated to false and no else section was defined.", e->line);
    case E_LIST:
    case E_TUPLE: {
        ct_value *l = mk_list(c, e->nargs, e->kind == E_TUPLE);
        for (size_t i = 0; i < e->nargs; i++)
            l->list.items[i] = eval(c, e->args[i]);
        return l;
    }
    case E_DICT: {
        ct_value *d = mk(c, CT_DICT);
        for (size_t i = 0; i < e->nargs; i++) {
            ct_value *k = eval(c, e->args[i]);
            if (k->kind == CT_LIST && !k->list.tuple)
                rfail(c, TXC_ERR_INVALID, e->line, "unhashable type: 'list'");
            if (k->kind == CT_DICT || k->kind == CT_NS || k->kind == CT_UNDEF)
                rfail(c, TXC_ERR_INVALID, e->line, "unhashable type: '%s'", type_name(k));
            dict_set(c, d, k, eval(c, e->kwargs[i]));
        }
        return d;
    }
    default: break;
    }
    rfail(c, TXC_ERR_INTERNAL, e->line, "bad expression node %d", (int)e->kind);
}

/* ---- statements --------------------------------------------------------- */
static void emit(rctx *c, const char *s, size_t n)
{
    if (c->out == NULL)
        return;
    sb_put(c, c->out, s, n);
}

static void unpack(rctx *c, frame *f, const char **names, size_t nn, ct_value *v, int line)
{
    if (nn == 1) {
        frame_set(c, f, names[0], v);
        return;
    }
    size_t n;
    ct_value **items = iterate(c, v, &n, line);
    if (n != nn)
        rfail(c, TXC_ERR_INVALID, line, "%s values to unpack (expected %zu, got %zu)", n > nn ? "too many" : "not enough",
              nn, n);
    for (size_t i = 0; i < nn; i++)
        frame_set(c, f, names[i], items[i]);
}

static ct_value *apply_filter_chain(rctx *c, ct_node *const *fl, size_t n, ct_value *v)
{
    for (size_t i = 0; i < n; i++) {
        args a;
        eval_args(c, fl[i], &a);
        v = apply_filter(c, fl[i], v, &a);
    }
    return v;
}

static ct_value *capture(rctx *c, ct_node *const *body, size_t n)
{
    sbuf *saved = c->out;
    sbuf b = {0};
    c->out = &b;
    exec_body(c, body, n);
    c->out = saved;
    return sb_value(c, &b);
}

static void exec_for(rctx *c, const ct_node *s)
{
    ct_value *it = eval(c, s->a);
    size_t n;
    ct_value **items = iterate(c, it, &n, s->line);
    frame *outer = c->cur;
    if (s->b) { /* for x in xs if cond: filter first; loop.length counts what is left */
        ct_value **kept = ct_alloc(&c->ar, (n ? n : 1) * sizeof *kept);
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            frame *f = frame_new(c, outer);
            c->cur = f;
            unpack(c, f, s->names, s->nnames, items[i], s->line);
            if (truthy(eval(c, s->b)))
                kept[m++] = items[i];
            c->cur = outer;
        }
        items = kept;
        n = m;
    }
    if (n == 0) {
        c->cur = frame_new(c, outer);
        exec_body(c, s->else_body, s->nelse);
        c->cur = outer;
        return;
    }
    ct_loop *lp = ct_alloc(&c->ar, sizeof *lp);
    lp->length = n;
    lp->items = items;
    ct_value *lv = mk(c, CT_LOOP);
    lv->loop = lp;
    for (size_t i = 0; i < n; i++) {
        lp->index0 = i;
        frame *f = frame_new(c, outer);
        c->cur = f;
        frame_set(c, f, "loop", lv);
        unpack(c, f, s->names, s->nnames, items[i], s->line);
        exec_body(c, s->body, s->nbody);
        c->cur = outer;
        if (c->ctl == 1) {
            c->ctl = 0;
            break;
        }
        c->ctl = 0;
    }
}

static void exec_stmt(rctx *c, const ct_node *s)
{
    tick(c, 1, s->line);
    switch (s->kind) {
    case N_TEXT: emit(c, s->value->str.s, s->value->str.n); return;
    case N_OUTPUT: {
        ct_value *v = eval(c, s->a);
        if (c->out)
            to_str(c, c->out, v, s->line);
        return;
    }
    case N_IF:
        if (truthy(eval(c, s->a)))
            exec_body(c, s->body, s->nbody);
        else
            exec_body(c, s->else_body, s->nelse);
        return;
    case N_FOR: exec_for(c, s); return;
    case N_SET: {
        ct_value *v = eval(c, s->b);
        if (s->a) {
            ct_value *ns = eval(c, s->a);
            if (ns->kind != CT_NS)
                rfail(c, TXC_ERR_INVALID, s->line, "cannot assign attribute on non-namespace object");
            if (s->name[0] == '_')
                rfail(c, TXC_ERR_INVALID, s->line,
                      "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '%s'. "
                      "Please rename the attribute.", s->name);
            dict_set(c, ns, mk_str_copy(c, s->name, strlen(s->name)), v);
            return;
        }
        unpack(c, c->cur, s->names, s->nnames, v, s->line);
        return;
    }
    case N_SETBLOCK: {
        ct_value *v = capture(c, s->body, s->nbody);
        v = apply_filter_chain(c, s->filters, s->nfilters, v);
        frame_set(c, c->cur, s->names[0], v);
        return;
    }
    case N_FILTERBLOCK: {
        ct_value *v = capture(c, s->body, s->nbody);
        v = apply_filter_chain(c, s->filters, s->nfilters, v);
        if (c->out)
            to_str(c, c->out, v, s->line);
        return;
    }
    case N_MACRO: {
        ct_value *m = mk(c, CT_FUNC);
        m->func.id = -1;
        m->func.macro = s;
        m->func.closure = c->cur;
        frame_set(c, c->cur, s->name, m);
        return;
    }
    case N_BREAK: c->ctl = 1; return;
    case N_CONTINUE: c->ctl = 2; return;
    case N_BODY: exec_body(c, s->body, s->nbody); return;
    case N_WITH: {
        frame *outer = c->cur;
        frame *f = frame_new(c, outer);
        for (size_t i = 0; i < s->nnames; i++)
            frame_set(c, f, s->names[i], eval(c, s->args[i]));
        c->cur = f;
        exec_body(c, s->body, s->nbody);
        c->cur = outer;
        return;
    }
    default: rfail(c, TXC_ERR_INTERNAL, s->line, "bad statement node %d", (int)s->kind);
    }
}

static void exec_body(rctx *c, ct_node *const *body, size_t n)
{
    for (size_t i = 0; i < n && !c->ctl; i++)
        exec_stmt(c, body[i]);
}

/* ---- JSON variables (txc_chat_template_set_var_json) ------------------- */
#include <cjson/cJSON.h>

static ct_value *from_json(rctx *c, const cJSON *j)
{
    if (cJSON_IsNull(j))
        return V_NONE;
    if (cJSON_IsBool(j))
        return V_BOOL(cJSON_IsTrue(j));
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (d == floor(d) && fabs(d) < 9.0e15)
            return mk_int(c, (int64_t)d);
        return mk_float(c, d);
    }
    if (cJSON_IsString(j))
        return mk_str_copy(c, j->valuestring, strlen(j->valuestring));
    if (cJSON_IsArray(j)) {
        ct_value *l = mk_list(c, (size_t)cJSON_GetArraySize(j), false);
        size_t i = 0;
        for (const cJSON *e = j->child; e; e = e->next)
            l->list.items[i++] = from_json(c, e);
        return l;
    }
    ct_value *d = mk(c, CT_DICT);
    for (const cJSON *e = j->child; e; e = e->next)
        dict_set(c, d, mk_str_copy(c, e->string, strlen(e->string)), from_json(c, e));
    return d;
}

/* ---- entry -------------------------------------------------------------- */
txc_status ct_render(const txc_chat_template *t, const txc_chat_message *messages, size_t n,
                     bool add_generation_prompt, char **out, size_t *out_len)
{
    *out = NULL;
    if (out_len)
        *out_len = 0;
    for (size_t i = 0; i < n; i++)
        if (!messages[i].role)
            return txc_error(TXC_ERR_INVALID, "chat template: message %zu has no role", i);
    rctx *c = calloc(1, sizeof *c);
    if (!c)
        return txc_error(TXC_ERR_NOMEM, "out of memory");
    c->ar.limit_bytes = RENDER_MEM_LIMIT;
    c->ar.fail = &c->fail;
    c->max_steps = t->max_steps ? t->max_steps : TXC_CHAT_TEMPLATE_MAX_STEPS;
    txc_status st = TXC_OK;
    cJSON *volatile json = NULL;
    if (setjmp(c->fail)) {
        st = txc_last_status() != TXC_OK ? txc_last_status() : TXC_ERR_INTERNAL;
        goto done;
    }
    frame *globals = frame_new(c, NULL);
    frame_set(c, globals, "raise_exception", mk_func(c, F_RAISE, NULL));
    frame_set(c, globals, "strftime_now", mk_func(c, F_STRFTIME, NULL));
    frame_set(c, globals, "range", mk_func(c, F_RANGE, NULL));
    frame_set(c, globals, "namespace", mk_func(c, F_NAMESPACE, NULL));
    frame_set(c, globals, "dict", mk_func(c, F_DICT, NULL));
    frame_set(c, globals, "cycler", mk_func(c, F_UNSUPPORTED_GLOBAL, NULL));
    frame_set(c, globals, "joiner", mk_func(c, F_UNSUPPORTED_GLOBAL, NULL));
    frame_set(c, globals, "lipsum", mk_func(c, F_UNSUPPORTED_GLOBAL, NULL));
    frame *root = frame_new(c, globals);
    c->root = root;
    c->cur = root;
    ct_value *msgs = mk_list(c, n, false);
    ct_value *k_role = mk_strn(c, "role", 4), *k_content = mk_strn(c, "content", 7);
    for (size_t i = 0; i < n; i++) {
        ct_value *d = mk(c, CT_DICT);
        dict_set(c, d, k_role, mk_str_copy(c, messages[i].role, strlen(messages[i].role)));
        /* transformers drops the keys whose value is None: NULL content leaves 'content' out */
        if (messages[i].content)
            dict_set(c, d, k_content, mk_str_copy(c, messages[i].content, strlen(messages[i].content)));
        msgs->list.items[i] = d;
    }
    /* transformers: render(messages=, tools=, documents=, add_generation_prompt=,
     * **special_tokens_map, **kwargs) */
    frame_set(c, root, "messages", msgs);
    frame_set(c, root, "tools", V_NONE);
    frame_set(c, root, "documents", V_NONE);
    frame_set(c, root, "add_generation_prompt", V_BOOL(add_generation_prompt));
    for (int k = 0; k < 4; k++)
        if (t->tokens[k])
            frame_set(c, root, ct_token_names[k], mk_str_copy(c, t->tokens[k], strlen(t->tokens[k])));
    for (size_t k = 0; k < t->nvars; k++) {
        json = cJSON_Parse(t->vars[k].json);
        if (!json)
            rfail(c, TXC_ERR_INTERNAL, 0, "variable '%s': stored JSON does not parse", t->vars[k].name);
        frame_set(c, root, t->vars[k].name, from_json(c, json));
        cJSON_Delete(json);
        json = NULL;
    }
    sbuf b = {0};
    c->out = &b;
    exec_body(c, t->body, t->nbody);
    char *res = malloc(b.n + 1);
    if (!res) {
        st = txc_error(TXC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (b.n)
        memcpy(res, b.p, b.n);
    res[b.n] = '\0';
    *out = res;
    if (out_len)
        *out_len = b.n;
done:
    cJSON_Delete(json);
    ct_arena_free(&c->ar);
    free(c);
    return st;
}
