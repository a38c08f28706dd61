/* Chat templates: attribute and item access, slices, calls of builtins,
 * methods and macros, arithmetic (Python's floor division and modulo) and
 * `in` (see chat/chat_template_render.h). */
#include "chat/chat_template_render.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CALL_DEPTH 64
#define MAX_RANGE 100000 /* jinja2.sandbox.MAX_RANGE */

/* ---- builtin functions and methods ------------------------------------- */
static const ct_named_id str_methods[] = {
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

ct_value *ct_mk_func(rctx *c, int id, ct_value *self)
{
    ct_value *f = ct_mk(c, CT_FUNC);
    f->func.id = id;
    f->func.self = self;
    return f;
}

/* ---- attribute and item access ----------------------------------------- */
ct_value *ct_getattr_v(rctx *c, ct_value *obj, const char *name, int line)
{
    if (obj->kind == CT_UNDEF)
        ct_undef_fail(c, obj, line);
    if (name[0] == '_') /* the sandbox hides private attributes */
        return ct_mk_undef(c, "access to attribute '%s' of '%s' object is unsafe", name, ct_type_name(obj));
    switch (obj->kind) {
    case CT_DICT: {
        static const ct_named_id dict_methods[] = {{"get", M_GET}, {"items", M_ITEMS}, {"keys", M_KEYS},
                                                   {"values", M_VALUES}};
        int id = ct_id_of(dict_methods, sizeof dict_methods / sizeof *dict_methods, name);
        if (id >= 0)
            return ct_mk_func(c, id, obj);
        if (in_list(dict_unimpl, name))
            ct_rfail(c, TXC_ERR_UNSUPPORTED, line, "the dict method '%s' is not supported", name);
        ct_value *v = ct_dict_get_s(obj, name);
        return v ? v : ct_mk_undef(c, "'dict object' has no attribute '%s'", name);
    }
    case CT_NS: {
        ct_value *v = ct_dict_get_s(obj, name);
        return v ? v : ct_mk_undef(c, "'Namespace' object has no attribute '%s'", name);
    }
    case CT_STR: {
        int id = ct_id_of(str_methods, sizeof str_methods / sizeof *str_methods, name);
        if (id >= 0)
            return ct_mk_func(c, id, obj);
        if (in_list(str_unimpl, name))
            ct_rfail(c, TXC_ERR_UNSUPPORTED, line, "the str method '%s' is not supported", name);
        return ct_mk_undef(c, "'str object' has no attribute '%s'", name);
    }
    case CT_LIST:
        if (in_list(list_unimpl, name))
            ct_rfail(c, TXC_ERR_UNSUPPORTED, line, "the list method '%s' is not supported (lists are immutable in the sandbox)", name);
        return ct_mk_undef(c, "'%s object' has no attribute '%s'", ct_type_name(obj), name);
    case CT_LOOP: {
        ct_loop *l = obj->loop;
        if (!strcmp(name, "index"))
            return ct_mk_int(c, (int64_t)l->index0 + 1);
        if (!strcmp(name, "index0"))
            return ct_mk_int(c, (int64_t)l->index0);
        if (!strcmp(name, "revindex"))
            return ct_mk_int(c, (int64_t)(l->length - l->index0));
        if (!strcmp(name, "revindex0"))
            return ct_mk_int(c, (int64_t)(l->length - l->index0 - 1));
        if (!strcmp(name, "first"))
            return V_BOOL(l->index0 == 0);
        if (!strcmp(name, "last"))
            return V_BOOL(l->index0 + 1 == l->length);
        if (!strcmp(name, "length"))
            return ct_mk_int(c, (int64_t)l->length);
        if (!strcmp(name, "depth"))
            return ct_mk_int(c, 1);
        if (!strcmp(name, "depth0"))
            return ct_mk_int(c, 0);
        if (!strcmp(name, "previtem"))
            return l->index0 > 0 ? l->items[l->index0 - 1] : ct_mk_undef(c, "there is no previous item");
        if (!strcmp(name, "nextitem"))
            return l->index0 + 1 < l->length ? l->items[l->index0 + 1] : ct_mk_undef(c, "there is no next item");
        if (!strcmp(name, "cycle"))
            return ct_mk_func(c, F_LOOP_CYCLE, obj);
        if (!strcmp(name, "changed"))
            ct_rfail(c, TXC_ERR_UNSUPPORTED, line, "loop.changed is not supported");
        return ct_mk_undef(c, "'LoopContext' object has no attribute '%s'", name);
    }
    case CT_NONE: return ct_mk_undef(c, "'None' has no attribute '%s'", name); /* jinja2's object_type_repr */
    default: return ct_mk_undef(c, "'%s object' has no attribute '%s'", ct_type_name(obj), name);
    }
}

/* Python slice indices (PySlice_AdjustIndices) */
static size_t slice_indices(rctx *c, size_t len, ct_value *const *parts, int64_t *start, int64_t *stop, int64_t *step,
                            int line)
{
    int64_t st = 1;
    if (parts[2] && parts[2]->kind != CT_NONE) {
        if (parts[2]->kind != CT_INT && parts[2]->kind != CT_BOOL)
            ct_rfail(c, TXC_ERR_INVALID, line, "slice indices must be integers or None");
        st = num_i(parts[2]);
        if (st == 0)
            ct_rfail(c, TXC_ERR_INVALID, line, "slice step cannot be zero");
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
            ct_rfail(c, TXC_ERR_INVALID, line, "slice indices must be integers or None");
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
size_t *ct_cp_offsets(rctx *c, const char *s, size_t n, size_t *count)
{
    size_t k = ct_str_cp_count(s, n);
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

ct_value *ct_do_slice(rctx *c, ct_value *obj, ct_value *const *parts, int line)
{
    if (obj->kind == CT_UNDEF)
        ct_undef_fail(c, obj, line);
    int64_t start, stop, step;
    if (obj->kind == CT_LIST) {
        size_t m = slice_indices(c, obj->list.n, parts, &start, &stop, &step, line);
        if (obj->list.range) { /* range(...)[i:j:k] is a range (compute_slice in rangeobject.c) */
            const int64_t *r = obj->list.range;
            int64_t a, b, s;
            if (__builtin_mul_overflow(start, r[2], &a) || __builtin_add_overflow(a, r[0], &a) ||
                __builtin_mul_overflow(stop, r[2], &b) || __builtin_add_overflow(b, r[0], &b) ||
                __builtin_mul_overflow(step, r[2], &s))
                ct_rfail(c, TXC_ERR_UNSUPPORTED, line, "integer overflow in a range slice (Python integers are unbounded)");
            return ct_mk_range(c, a, b, s, m);
        }
        ct_value *r = ct_mk_list(c, m, obj->list.tuple);
        for (size_t k = 0; k < m; k++)
            r->list.items[k] = obj->list.items[start + (int64_t)k * step];
        return r;
    }
    if (obj->kind == CT_STR) {
        size_t cnt;
        size_t *off = ct_cp_offsets(c, obj->str.s, obj->str.n, &cnt);
        size_t m = slice_indices(c, cnt, parts, &start, &stop, &step, line);
        sbuf b = {0};
        for (size_t k = 0; k < m; k++) {
            size_t ix = (size_t)(start + (int64_t)k * step);
            ct_sb_put(c, &b, obj->str.s + off[ix], off[ix + 1] - off[ix]);
        }
        return ct_sb_value(c, &b);
    }
    ct_rfail(c, TXC_ERR_INVALID, line, "'%s' object is not subscriptable", ct_type_name(obj));
}

ct_value *ct_getitem_v(rctx *c, ct_value *obj, ct_value *key, int line)
{
    if (obj->kind == CT_UNDEF)
        ct_undef_fail(c, obj, line);
    if ((obj->kind == CT_LIST || obj->kind == CT_STR) && (key->kind == CT_INT || key->kind == CT_BOOL)) {
        int64_t i = num_i(key);
        if (obj->kind == CT_LIST) {
            int64_t L = (int64_t)obj->list.n;
            int64_t j = i < 0 ? i + L : i;
            if (j < 0 || j >= L)
                return ct_mk_undef(c, "'%s object' has no element %lld", ct_type_name(obj), (long long)i);
            return obj->list.items[j];
        }
        size_t cnt;
        size_t *off = ct_cp_offsets(c, obj->str.s, obj->str.n, &cnt);
        int64_t j = i < 0 ? i + (int64_t)cnt : i;
        if (j < 0 || j >= (int64_t)cnt)
            return ct_mk_undef(c, "'str object' has no element %lld", (long long)i);
        return ct_mk_strn(c, obj->str.s + off[j], off[j + 1] - off[j]);
    }
    if (obj->kind == CT_DICT) {
        ct_value *v = ct_dict_get(c, obj, key);
        if (v)
            return v;
    }
    if (key->kind == CT_STR) {
        /* a key a dict does not have, or an item of another object: getattr, then undefined */
        return ct_getattr_v(c, obj, ct_strndup(&c->ar, key->str.s, key->str.n), line);
    }
    sbuf b = {0};
    ct_to_repr(c, &b, key, line);
    return ct_mk_undef(c, "'%s object' has no element %.*s", ct_type_name(obj), (int)b.n, b.p ? b.p : "");
}

/* ---- argument binding and calls ----------------------------------------- */
/* Bind `a` to the parameters `names` (NULL-terminated) into out[] (NULL:
 * not given). */
void ct_bind(rctx *c, const args *a, const char *const *names, ct_value **out, const char *what, int line)
{
    size_t np = 0;
    while (names[np])
        np++;
    for (size_t i = 0; i < np; i++)
        out[i] = NULL;
    if (a->npos > np)
        ct_rfail(c, TXC_ERR_INVALID, line, "%s takes at most %zu argument%s (%zu given)", what, np, np == 1 ? "" : "s",
              a->npos);
    for (size_t i = 0; i < a->npos; i++)
        out[i] = a->pos[i];
    for (size_t k = 0; k < a->nkw; k++) {
        size_t i = 0;
        for (; i < np; i++)
            if (!strcmp(names[i], a->kwn[k]))
                break;
        if (i == np)
            ct_rfail(c, TXC_ERR_INVALID, line, "%s got an unexpected keyword argument '%s'", what, a->kwn[k]);
        if (out[i])
            ct_rfail(c, TXC_ERR_INVALID, line, "%s got multiple values for argument '%s'", what, a->kwn[k]);
        out[i] = a->kwv[k];
    }
}

ct_value *ct_need_str(rctx *c, ct_value *v, const char *what, int line)
{
    if (v->kind == CT_UNDEF)
        ct_undef_fail(c, v, line);
    if (v->kind != CT_STR)
        ct_rfail(c, TXC_ERR_INVALID, line, "%s: expected a string, got %s", what, ct_type_name(v));
    return v;
}
int64_t ct_need_int(rctx *c, ct_value *v, const char *what, int line)
{
    if (v->kind == CT_UNDEF)
        ct_undef_fail(c, v, line);
    if (v->kind != CT_INT && v->kind != CT_BOOL)
        ct_rfail(c, TXC_ERR_INVALID, line, "%s: expected an integer, got %s", what, ct_type_name(v));
    return num_i(v);
}

static ct_value *pair(rctx *c, ct_value *k, ct_value *v)
{
    ct_value *t = ct_mk_list(c, 2, true);
    t->list.items[0] = k;
    t->list.items[1] = v;
    return t;
}

ct_value *ct_dict_items_list(rctx *c, ct_value *d, int which /* 0 items, 1 keys, 2 values */)
{
    ct_value *l = ct_mk_list(c, d->dict.n, false);
    for (size_t i = 0; i < d->dict.n; i++)
        l->list.items[i] = which == 0 ? pair(c, d->dict.keys[i], d->dict.vals[i])
                                      : which == 1 ? d->dict.keys[i] : d->dict.vals[i];
    return l;
}

static ct_value *call_macro(rctx *c, ct_value *fn, const args *a, int line)
{
    const ct_node *m = fn->func.macro;
    if (a->npos > m->nnames)
        ct_rfail(c, TXC_ERR_INVALID, line, "macro '%s' takes not more than %zu argument(s)", m->name, m->nnames);
    if (++c->calls > MAX_CALL_DEPTH)
        ct_rfail(c, TXC_ERR_CAPACITY, line, "macro calls nested deeper than %d (recursion?)", MAX_CALL_DEPTH);
    frame *saved = c->cur;
    frame *f = ct_frame_new(c, fn->func.closure);
    c->cur = f;
    for (size_t k = 0; k < a->nkw; k++) {
        size_t i = 0;
        for (; i < m->nnames; i++)
            if (!strcmp(m->names[i], a->kwn[k]))
                break;
        if (i == m->nnames)
            ct_rfail(c, TXC_ERR_INVALID, line, "macro '%s' has no argument named '%s'", m->name, a->kwn[k]);
        if (i < a->npos)
            ct_rfail(c, TXC_ERR_INVALID, line, "macro '%s' got multiple values for argument '%s'", m->name, a->kwn[k]);
    }
    for (size_t i = 0; i < m->nnames; i++) {
        ct_value *v = NULL;
        if (i < a->npos)
            v = a->pos[i];
        for (size_t k = 0; k < a->nkw; k++)
            if (!strcmp(m->names[i], a->kwn[k]))
                v = a->kwv[k];
        if (!v)
            v = m->args[i] ? ct_eval(c, m->args[i]) : ct_mk_undef(c, "parameter '%s' was not provided", m->names[i]);
        ct_frame_set(c, f, m->names[i], v);
    }
    sbuf *saved_out = c->out;
    sbuf b = {0};
    c->out = &b;
    int saved_ctl = c->ctl;
    c->ctl = 0;
    ct_exec_body(c, m->body, m->nbody);
    c->ctl = saved_ctl;
    c->out = saved_out;
    c->cur = saved;
    c->calls--;
    return ct_sb_value(c, &b);
}

ct_value *ct_call_value(rctx *c, ct_value *fn, const args *a, int line)
{
    if (fn->kind == CT_UNDEF)
        ct_undef_fail(c, fn, line);
    if (fn->kind != CT_FUNC)
        ct_rfail(c, TXC_ERR_INVALID, line, "'%s' object is not callable", ct_type_name(fn));
    if (fn->func.macro)
        return call_macro(c, fn, a, line);
    ct_value *p[4] = {0};
    int id = fn->func.id;
    switch (id) {
    case F_RAISE: {
        static const char *const nm[] = {"message", NULL};
        ct_bind(c, a, nm, p, "raise_exception()", line);
        sbuf b = {0};
        if (p[0])
            ct_to_str(c, &b, p[0], line);
        txc_error(TXC_ERR_INVALID, "%.*s", (int)b.n, b.p ? b.p : "");
        longjmp(c->fail, 1);
    }
    case F_STRFTIME: {
        static const char *const nm[] = {"format", NULL};
        ct_bind(c, a, nm, p, "strftime_now()", line);
        if (!p[0])
            ct_rfail(c, TXC_ERR_INVALID, line, "strftime_now() takes exactly one argument");
        ct_value *fmt = ct_need_str(c, p[0], "strftime_now()", line);
        char *f = ct_strndup(&c->ar, fmt->str.s, fmt->str.n);
        time_t now = time(NULL);
        struct tm tmv;
        localtime_r(&now, &tmv);
        char out[512];
        size_t k = strftime(out, sizeof out, f, &tmv);
        if (k == 0 && fmt->str.n > 0)
            ct_rfail(c, TXC_ERR_UNSUPPORTED, line, "strftime_now(): format too long or empty result");
        return ct_mk_str_copy(c, out, k);
    }
    case F_RANGE: {
        if (a->nkw)
            ct_rfail(c, TXC_ERR_INVALID, line, "range() takes no keyword arguments");
        if (a->npos < 1 || a->npos > 3)
            ct_rfail(c, TXC_ERR_INVALID, line, "range expected 1 to 3 arguments, got %zu", a->npos);
        int64_t start = 0, stop, step = 1;
        if (a->npos == 1) {
            stop = ct_need_int(c, a->pos[0], "range()", line);
        } else {
            start = ct_need_int(c, a->pos[0], "range()", line);
            stop = ct_need_int(c, a->pos[1], "range()", line);
            if (a->npos == 3)
                step = ct_need_int(c, a->pos[2], "range()", line);
        }
        if (step == 0)
            ct_rfail(c, TXC_ERR_INVALID, line, "range() arg 3 must not be zero");
        /* the length in unsigned arithmetic: stop - start and -step may
         * not fit in int64 (range(-2**63, 2**63 - 1), step -2**63) */
        uint64_t n = 0;
        if (step > 0 && stop > start)
            n = ((uint64_t)stop - (uint64_t)start - 1) / (uint64_t)step + 1;
        else if (step < 0 && start > stop)
            n = ((uint64_t)start - (uint64_t)stop - 1) / (0 - (uint64_t)step) + 1;
        if (n > MAX_RANGE)
            ct_rfail(c, TXC_ERR_INVALID, line,
                  "Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).", MAX_RANGE);
        ct_value *l = ct_mk_range(c, start, stop, step, (size_t)n);
        return l;
    }
    case F_NAMESPACE:
    case F_DICT: {
        ct_value *d = ct_mk(c, id == F_NAMESPACE ? CT_NS : CT_DICT);
        if (a->npos > 1)
            ct_rfail(c, TXC_ERR_INVALID, line, "%s expected at most 1 positional argument",
                  id == F_NAMESPACE ? "namespace()" : "dict()");
        if (a->npos == 1) {
            ct_value *src = a->pos[0];
            if (src->kind == CT_DICT || src->kind == CT_NS) {
                for (size_t i = 0; i < src->dict.n; i++)
                    ct_dict_set(c, d, src->dict.keys[i], src->dict.vals[i]);
            } else {
                size_t n;
                ct_value **items = ct_iterate(c, src, &n, line);
                for (size_t i = 0; i < n; i++) {
                    size_t m;
                    ct_value **kv = ct_iterate(c, items[i], &m, line);
                    if (m != 2)
                        ct_rfail(c, TXC_ERR_INVALID, line, "dictionary update sequence element #%zu has length %zu; 2 is required", i, m);
                    ct_dict_set(c, d, kv[0], kv[1]);
                }
            }
        }
        for (size_t k = 0; k < a->nkw; k++) {
            if (id == F_NAMESPACE && a->kwn[k][0] == '_')
                ct_rfail(c, TXC_ERR_INVALID, line,
                      "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '%s'. "
                      "Please rename the attribute.", a->kwn[k]);
            ct_dict_set(c, d, ct_mk_str_copy(c, a->kwn[k], strlen(a->kwn[k])), a->kwv[k]);
        }
        return d;
    }
    case F_UNSUPPORTED_GLOBAL: ct_rfail(c, TXC_ERR_UNSUPPORTED, line, "cycler(), joiner() and lipsum() are not supported");
    case F_LOOP_CYCLE: {
        if (a->nkw || a->npos == 0)
            ct_rfail(c, TXC_ERR_INVALID, line, "no items for cycling given");
        return a->pos[fn->func.self->loop->index0 % a->npos];
    }
    case M_GET: {
        static const char *const nm[] = {"key", "default", NULL};
        ct_bind(c, a, nm, p, "get()", line);
        if (!p[0])
            ct_rfail(c, TXC_ERR_INVALID, line, "get expected at least 1 argument, got 0");
        ct_value *v = ct_dict_get(c, fn->func.self, p[0]);
        return v ? v : p[1] ? p[1] : V_NONE;
    }
    case M_ITEMS:
    case M_KEYS:
    case M_VALUES: {
        static const char *const nm[] = {NULL};
        ct_bind(c, a, nm, p, "the method", line);
        return ct_dict_items_list(c, fn->func.self, id == M_ITEMS ? 0 : id == M_KEYS ? 1 : 2);
    }
    default: return ct_call_str_method(c, id, fn->func.self, a, line);
    }
}

/* ---- arithmetic --------------------------------------------------------- */
/* x ** y for a float result as Python's float.__pow__: no infinity from
 * finite operands (OverflowError), no 0 ** negative (ZeroDivisionError), no
 * complex result of a negative base (a complex number in Python) */
static double py_pow(rctx *c, double x, double y, int line)
{
    if (x == 0.0 && y < 0.0)
        ct_rfail(c, TXC_ERR_INVALID, line, "0.0 cannot be raised to a negative power");
    if (x < 0.0 && isfinite(x) && isfinite(y) && y != floor(y))
        ct_rfail(c, TXC_ERR_UNSUPPORTED, line, "a negative number to a fractional power is a complex number");
    double r = pow(x, y);
    if (isinf(r) && isfinite(x) && isfinite(y))
        ct_rfail(c, TXC_ERR_INVALID, line, "(34, 'Numerical result out of range')");
    return r;
}

ct_value *ct_arith(rctx *c, int op, ct_value *a, ct_value *b, int line)
{
    if (a->kind == CT_UNDEF)
        ct_undef_fail(c, a, line);
    if (b->kind == CT_UNDEF)
        ct_undef_fail(c, b, line);
    static const char *const opn[] = {['+'] = "+", ['-'] = "-", ['*'] = "*", ['/'] = "/", ['f'] = "//",
                                      ['%'] = "%", ['p'] = "**"};
    if (is_num(a) && is_num(b)) {
        bool fl = a->kind == CT_FLOAT || b->kind == CT_FLOAT;
        if (op == '/') {
            if (num_f(b) == 0.0)
                ct_rfail(c, TXC_ERR_INVALID, line, "division by zero");
            return ct_mk_float(c, num_f(a) / num_f(b));
        }
        if (fl) {
            double x = num_f(a), y = num_f(b), r;
            switch (op) {
            case '+': r = x + y; break;
            case '-': r = x - y; break;
            case '*': r = x * y; break;
            case 'f':
                if (y == 0.0)
                    ct_rfail(c, TXC_ERR_INVALID, line, "float floor division by zero");
                r = floor(x / y);
                break;
            case '%':
                if (y == 0.0)
                    ct_rfail(c, TXC_ERR_INVALID, line, "float modulo");
                r = fmod(x, y);
                if (r != 0.0 && ((r < 0) != (y < 0)))
                    r += y;
                break;
            default: r = py_pow(c, x, y, line); break;
            }
            return ct_mk_float(c, r);
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
                ct_rfail(c, TXC_ERR_INVALID, line, "integer division or modulo by zero");
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
                return ct_mk_float(c, py_pow(c, (double)x, (double)y, line));
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
            ct_rfail(c, TXC_ERR_UNSUPPORTED, line, "integer overflow in '%s' (Python integers are unbounded)", opn[op]);
        return ct_mk_int(c, r);
    }
    if (op == '+' && ((a->kind == CT_STR && a->str.markup) || (b->kind == CT_STR && b->str.markup)))
        ct_rfail(c, TXC_ERR_UNSUPPORTED, line, "'+' on Markup strings (|safe, |escape) is not supported");
    if (op == '+' && a->kind == CT_STR && b->kind == CT_STR) {
        if (a->str.n + b->str.n > OUTPUT_LIMIT)
            ct_rfail(c, TXC_ERR_CAPACITY, line, "string larger than %zu MiB", OUTPUT_LIMIT >> 20);
        char *s = ct_alloc(&c->ar, a->str.n + b->str.n + 1);
        memcpy(s, a->str.s, a->str.n);
        memcpy(s + a->str.n, b->str.s, b->str.n);
        return ct_mk_strn(c, s, a->str.n + b->str.n);
    }
    if (op == '+' && a->kind == CT_LIST && b->kind == CT_LIST && a->list.tuple == b->list.tuple && !a->list.range &&
        !b->list.range) {
        ct_value *l = ct_mk_list(c, a->list.n + b->list.n, a->list.tuple);
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
            ct_rfail(c, TXC_ERR_CAPACITY, line, "repetition larger than %zu MiB", OUTPUT_LIMIT >> 20);
        if (a->kind == CT_STR) {
            sbuf s = {0};
            for (int64_t q = 0; q < k; q++)
                ct_sb_put(c, &s, a->str.s, a->str.n);
            return ct_sb_value(c, &s);
        }
        ct_value *l = ct_mk_list(c, unit * (size_t)k, a->list.tuple);
        for (int64_t q = 0; q < k; q++)
            if (unit)
                memcpy(l->list.items + (size_t)q * unit, a->list.items, unit * sizeof *l->list.items);
        return l;
    }
    if (op == '*' && (b->kind == CT_STR || (b->kind == CT_LIST && !b->list.range)) &&
        (a->kind == CT_INT || a->kind == CT_BOOL))
        return ct_arith(c, op, b, a, line);
    if (op == '%' && a->kind == CT_STR)
        ct_rfail(c, TXC_ERR_UNSUPPORTED, line, "'%%' string formatting is not supported");
    ct_rfail(c, TXC_ERR_INVALID, line, "unsupported operand type(s) for %s: '%s' and '%s'", opn[op], ct_type_name(a),
          ct_type_name(b));
}

bool ct_contains(rctx *c, ct_value *needle, ct_value *hay, int line)
{
    switch (hay->kind) {
    case CT_UNDEF: return false;
    case CT_STR:
        if (needle->kind != CT_STR)
            ct_rfail(c, TXC_ERR_INVALID, line, "'in <string>' requires string as left operand, not %s",
                  ct_type_name(needle));
        return ct_memfind(hay->str.s, hay->str.n, needle->str.s, needle->str.n) != NULL;
    case CT_LIST:
        for (size_t i = 0; i < hay->list.n; i++)
            if (ct_equal(c, hay->list.items[i], needle))
                return true;
        return false;
    case CT_DICT: return ct_dict_get(c, hay, needle) != NULL;
    case CT_NS:
        ct_rfail(c, TXC_ERR_INVALID, line, "argument of type 'Namespace' is not iterable");
    default: ct_rfail(c, TXC_ERR_INVALID, line, "argument of type '%s' is not iterable", ct_type_name(hay));
    }
}
