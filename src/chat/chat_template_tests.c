/* Chat templates: the tests of `x is name(...)`, as jinja2.tests (see
 * chat/chat_template_render.h). */
#include "chat/chat_template_render.h"

#include <string.h>

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
static const ct_named_id tests[] = {
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

int ct_test_id(const char *name) { return ct_id_of(tests, sizeof tests / sizeof *tests, name); }

bool ct_run_test(rctx *c, int id, ct_value *v, ct_value **a, size_t na, int line)
{
    size_t need = (id == T_SAMEAS || id == T_IN || id == T_DIVISIBLEBY || (id >= T_EQ && id <= T_GE)) ? 1 : 0;
    if (na != need)
        ct_rfail(c, TXC_ERR_INVALID, line, "the test takes %zu argument%s (%zu given)", need, need == 1 ? "" : "s", na);
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
    case T_IN: return ct_contains(c, v, a[0], line);
    case T_ODD:
    case T_EVEN: {
        int64_t x = ct_need_int(c, v, "odd/even", line);
        return (((x % 2) + 2) % 2 == 1) == (id == T_ODD);
    }
    case T_DIVISIBLEBY: {
        ct_value *m = ct_arith(c, '%', v, a[0], line);
        return !ct_truthy(m);
    }
    case T_EQ: return ct_equal(c, v, a[0]);
    case T_NE: return !ct_equal(c, v, a[0]);
    case T_LT: return ct_compare(c, v, a[0], "<", line) < 0;
    case T_LE: return ct_compare(c, v, a[0], "<=", line) <= 0;
    case T_GT: return ct_compare(c, v, a[0], ">", line) > 0;
    case T_GE: return ct_compare(c, v, a[0], ">=", line) >= 0;
    case T_LOWER:
    case T_UPPER: {
        ct_value *s = ct_str_of(c, v, line);
        args none = {0};
        return ct_truthy(ct_call_str_method(c, id == T_LOWER ? M_ISLOWER : M_ISUPPER, s, &none, line));
    }
    case T_ESCAPED: return v->kind == CT_STR && v->str.markup;
    }
    return false;
}
