/* chat/chat_template_render.h — what the files of the renderer share
 * (internal to chat/chat_template_*.c, on top of chat_template_impl.h):
 * the render context, string buffers and scopes, and the entry points of
 *   chat_template_value.c    values: builders, buffers, scopes, str() / repr(),
 *                            ==, ordering, iteration, dicts
 *   chat_template_json.c     tojson (transformers' json.dumps)
 *   chat_template_ops.c      attributes, items, slices, calls, arithmetic, `in`
 *   chat_template_str.c      Python's str methods
 *   chat_template_tests.c    jinja2 tests (`is ...`)
 *   chat_template_filters.c  jinja2 filters (`| ...`)
 *   chat_template_eval.c     expressions, statements, ct_render
 * Every function here reports an error by ct_rfail (a longjmp out of the
 * render), never by its return value. */
#ifndef TXC_CHAT_TEMPLATE_RENDER_H
#define TXC_CHAT_TEMPLATE_RENDER_H

#include "chat/chat_template_impl.h"

#define OUTPUT_LIMIT ((size_t)64 << 20)

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

struct ct_loop {
    size_t index0, length;
    ct_value **items;
};

/* The constants none, true and false (never written). */
extern ct_value ct_v_none, ct_v_true, ct_v_false;
#define V_NONE (&ct_v_none)
#define V_TRUE (&ct_v_true)
#define V_FALSE (&ct_v_false)
#define V_BOOL(x) ((x) ? V_TRUE : V_FALSE)

/* The render's error: "chat template line N: ..." (line <= 0: no line),
 * then a longjmp to c->fail. */
_Noreturn void ct_rfail(rctx *c, txc_status st, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* One more step of the render (an expression, a statement, a loop item, a
 * comparison of values): a render past its budget ends with an error, so a
 * template that never ends (or takes hours) cannot hold the caller. */
static inline void tick(rctx *c, uint64_t n, int line)
{
    c->steps += n;
    if (c->steps > c->max_steps)
        ct_rfail(c, TXC_ERR_CAPACITY, line,
                 "the render took more than %llu steps (expressions, statements, loop items, comparisons): "
                 "stopped", (unsigned long long)c->max_steps);
}

static inline bool is_num(const ct_value *v) { return v->kind == CT_INT || v->kind == CT_FLOAT || v->kind == CT_BOOL; }
static inline double num_f(const ct_value *v)
{
    return v->kind == CT_FLOAT ? v->f : v->kind == CT_INT ? (double)v->i : (double)v->b;
}
static inline int64_t num_i(const ct_value *v) { return v->kind == CT_INT ? v->i : (int64_t)v->b; }

/* ---- values (chat_template_value.c) ------------------------------------- */
ct_value *ct_mk(rctx *c, ct_kind k);
ct_value *ct_mk_int(rctx *c, int64_t i);
ct_value *ct_mk_float(rctx *c, double f);
ct_value *ct_mk_strn(rctx *c, const char *s, size_t n); /* s is kept, not copied */
ct_value *ct_mk_str_copy(rctx *c, const char *s, size_t n);
ct_value *ct_mk_list(rctx *c, size_t n, bool tuple);     /* n items to fill */
ct_value *ct_mk_range(rctx *c, int64_t start, int64_t stop, int64_t step, size_t n);
/* An undefined value whose use fails with this message (jinja2.Undefined). */
ct_value *ct_mk_undef(rctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* String buffers in the render's arena (at most OUTPUT_LIMIT bytes). */
void ct_sb_put(rctx *c, sbuf *b, const char *s, size_t n);
void ct_sb_puts(rctx *c, sbuf *b, const char *s);
void ct_sb_printf(rctx *c, sbuf *b, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
ct_value *ct_sb_value(rctx *c, sbuf *b); /* the buffer as a str value */

/* Scopes: a new one inside `parent`, a variable set in f, a name looked up
 * from the current scope outwards (undefined when absent). */
frame *ct_frame_new(rctx *c, frame *parent);
void ct_frame_set(rctx *c, frame *f, const char *name, ct_value *v);
ct_value *ct_lookup(rctx *c, const char *name);

/* Python's type(v).__name__, truth, and jinja2's undefined error. */
const char *ct_type_name(const ct_value *v);
bool ct_truthy(const ct_value *v);
_Noreturn void ct_undef_fail(rctx *c, const ct_value *v, int line);

/* repr(float) (json: NaN / Infinity as json.dumps), repr() and str() of a
 * value appended to b; str() as a str value. */
void ct_float_repr(rctx *c, sbuf *b, double f, bool json);
void ct_to_repr(rctx *c, sbuf *b, const ct_value *v, int line);
void ct_to_str(rctx *c, sbuf *b, const ct_value *v, int line);
ct_value *ct_str_of(rctx *c, ct_value *v, int line);

/* ==, and the sign of a <=> b (op names the operator in the TypeError);
 * both count steps and nesting (ct_depth_enter: one level deeper, the
 * caller decrements c->vdepth). */
void ct_depth_enter(struct rctx *c);
bool ct_equal(rctx *c, const ct_value *a, const ct_value *b);
int ct_compare(rctx *c, const ct_value *a, const ct_value *b, const char *op, int line);

/* Iteration as a for loop sees it (a str by code point, a dict by key),
 * len(), list(). */
size_t ct_str_cp_count(const char *s, size_t n);
ct_value **ct_iterate(rctx *c, ct_value *v, size_t *n, int line);
size_t ct_length_of(rctx *c, ct_value *v, int line);
ct_value *ct_list_of(rctx *c, ct_value *v, int line);

/* Dicts (insertion order): get (NULL when absent), by a C string key, set. */
ct_value *ct_dict_get(rctx *c, const ct_value *d, const ct_value *k);
ct_value *ct_dict_get_s(const ct_value *d, const char *k);
void ct_dict_set(rctx *c, ct_value *d, ct_value *k, ct_value *v);

/* ---- tojson (chat_template_json.c) -------------------------------------- */
typedef struct jopts {
    const char *indent; /* NULL: none */
    size_t indent_n;
    const char *item_sep, *key_sep;
    size_t item_sep_n, key_sep_n;
    bool sort_keys;
    bool ascii;
} jopts;
void ct_json_dump(rctx *c, sbuf *b, const ct_value *v, const jopts *o, int level, int line);

/* ---- calls, attributes, operators (chat_template_ops.c) ----------------- */
/* Ids of the builtin functions and methods (ct_value.func.id). */
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

/* The arguments of a call: positional, then keyword (names and values). */
typedef struct args {
    ct_value **pos;
    size_t npos;
    const char **kwn;
    ct_value **kwv;
    size_t nkw;
} args;

ct_value *ct_mk_func(rctx *c, int id, ct_value *self);
ct_value *ct_getattr_v(rctx *c, ct_value *obj, const char *name, int line);
ct_value *ct_getitem_v(rctx *c, ct_value *obj, ct_value *key, int line);
/* obj[parts[0]:parts[1]:parts[2]] (NULL parts: omitted). */
ct_value *ct_do_slice(rctx *c, ct_value *obj, ct_value *const *parts, int line);
/* Byte offset of each code point of s, and one past the end (count + 1 entries). */
size_t *ct_cp_offsets(rctx *c, const char *s, size_t n, size_t *count);

/* Bind `a` to the parameters `names` (NULL-terminated) into out[] (NULL:
 * not given); `what` names the callee in errors. */
void ct_bind(rctx *c, const args *a, const char *const *names, ct_value **out, const char *what, int line);
ct_value *ct_need_str(rctx *c, ct_value *v, const char *what, int line);
int64_t ct_need_int(rctx *c, ct_value *v, const char *what, int line);
/* dict.items() (which 0), .keys() (1), .values() (2) as a list. */
ct_value *ct_dict_items_list(rctx *c, ct_value *d, int which);
ct_value *ct_call_value(rctx *c, ct_value *fn, const args *a, int line);

/* a op b for op '+', '-', '*', '/', 'f' (//), '%', 'p' (**); needle in hay. */
ct_value *ct_arith(rctx *c, int op, ct_value *a, ct_value *b, int line);
bool ct_contains(rctx *c, ct_value *needle, ct_value *hay, int line);

/* ---- str methods (chat_template_str.c) ---------------------------------- */
typedef enum { STRIP_BOTH, STRIP_LEFT, STRIP_RIGHT } strip_side;
typedef enum { CASE_UPPER, CASE_LOWER, CASE_TITLE_PY, CASE_CAPITALIZE, CASE_TITLE_JINJA } case_mode;

ct_value *ct_str_strip(rctx *c, ct_value *s, const ct_value *chars, strip_side side); /* chars NULL: whitespace */
ct_value *ct_str_case(rctx *c, const ct_value *s, case_mode mode);
const char *ct_memfind(const char *h, size_t hn, const char *nd, size_t nn);
ct_value *ct_str_replace(rctx *c, const ct_value *s, const ct_value *old, const ct_value *nw, int64_t count);
ct_value **ct_str_splitlines(rctx *c, const char *s, size_t len, size_t *count);
ct_value *ct_call_str_method(rctx *c, int id, ct_value *s, const args *a, int line);

/* ---- tests and filters (chat_template_tests.c, chat_template_filters.c) - */
bool ct_run_test(rctx *c, int id, ct_value *v, ct_value **a, size_t na, int line);
/* f: the E_FILTER node (its id, name and line); a: its evaluated arguments. */
ct_value *ct_apply_filter(rctx *c, const ct_node *f, ct_value *v, const args *a);

/* ---- expressions and statements (chat_template_eval.c) ------------------ */
ct_value *ct_eval(rctx *c, const ct_node *e);
void ct_exec_body(rctx *c, ct_node *const *body, size_t n);

#endif
