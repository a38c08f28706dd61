/* Chat templates: the Jinja parser (see chat/chat_template_syntax.h): tokens
 * to the syntax tree of chat/chat_template_impl.h, following jinja2.parser's
 * grammar and operator precedence. */
#include "chat/chat_template_syntax.h"

#include <stdlib.h>
#include <string.h>

/* ---- parser ------------------------------------------------------------- */
#define MAX_DEPTH 200

static tok *cur(pctx *c) { return &c->toks[c->pos]; }
static tok *peek(pctx *c, size_t k)
{
    size_t p = c->pos + k;
    return &c->toks[p < c->ntoks ? p : c->ntoks - 1];
}
static bool is_op(const tok *t, const char *op) { return t->t == T_OP && strcmp(t->s, op) == 0; }
static bool is_name(const tok *t, const char *nm) { return t->t == T_NAME && strcmp(t->s, nm) == 0; }

static const char *tok_desc(const tok *t)
{
    switch (t->t) {
    case T_DATA: return "template data";
    case T_VBEGIN: return "'{{'";
    case T_VEND: return "end of print statement";
    case T_BBEGIN: return "'{%'";
    case T_BEND: return "end of statement block";
    case T_NAME: return t->s;
    case T_STR: return "string";
    case T_INT: return "integer";
    case T_FLOAT: return "float";
    case T_OP: return t->s;
    case T_EOF: return "end of template";
    }
    return "?";
}

static void expect_op(pctx *c, const char *op)
{
    if (!is_op(cur(c), op))
        ct_perr(c, TXC_ERR_FORMAT, cur(c)->line, "expected '%s', got '%s'", op, tok_desc(cur(c)));
    c->pos++;
}

static void expect_bend(pctx *c)
{
    if (cur(c)->t != T_BEND)
        ct_perr(c, TXC_ERR_FORMAT, cur(c)->line, "expected end of statement block, got '%s'", tok_desc(cur(c)));
    c->pos++;
}

static const char *expect_name(pctx *c)
{
    if (cur(c)->t != T_NAME)
        ct_perr(c, TXC_ERR_FORMAT, cur(c)->line, "expected a name, got '%s'", tok_desc(cur(c)));
    return c->toks[c->pos++].s;
}

static ct_node *node(pctx *c, ct_node_kind k, int line)
{
    ct_node *nd = ct_alloc(c->ar, sizeof *nd);
    nd->kind = k;
    nd->line = line;
    return nd;
}

/* growable node list in the arena */
typedef struct nlist {
    ct_node **v;
    size_t n, cap;
} nlist;
static void nl_push(pctx *c, nlist *l, ct_node *x)
{
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 4;
        ct_node **nv = ct_alloc(c->ar, nc * sizeof *nv);
        if (l->n)
            memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = x;
}

static ct_value *const_val(pctx *c, ct_kind k)
{
    ct_value *v = ct_alloc(c->ar, sizeof *v);
    v->kind = k;
    return v;
}

static ct_node *parse_expr(pctx *c);
static ct_node *parse_or(pctx *c);
static void enter(pctx *c);

/* A left-nested chain (a + b + c, a.b.c, x | f | g) deepens the tree as
 * recursion does: count each link against MAX_DEPTH until the chain ends. */
static void chain_step(pctx *c, int *chain)
{
    enter(c);
    (*chain)++;
}
static ct_node *parse_unary(pctx *c, bool with_filter);
static ct_node *parse_tuple(pctx *c, bool explicit_parens);

static void enter(pctx *c)
{
    if (++c->depth > MAX_DEPTH)
        ct_perr(c, TXC_ERR_UNSUPPORTED, cur(c)->line, "nesting deeper than %d levels", MAX_DEPTH);
}

/* ( args, name=value ) after the '(' was consumed */
static void parse_call_args(pctx *c, ct_node *nd)
{
    nlist args = {0}, kw = {0};
    nlist kwn = {0};
    while (!is_op(cur(c), ")")) {
        if (args.n + kw.n)
            expect_op(c, ",");
        if (is_op(cur(c), ")"))
            break;
        if (is_op(cur(c), "*") || is_op(cur(c), "**"))
            ct_perr(c, TXC_ERR_UNSUPPORTED, cur(c)->line, "'*args' / '**kwargs' in calls are not supported");
        if (cur(c)->t == T_NAME && is_op(peek(c, 1), "=")) {
            const char *nm = cur(c)->s;
            c->pos += 2;
            nl_push(c, &kwn, (ct_node *)nm);
            nl_push(c, &kw, parse_expr(c));
        } else {
            if (kw.n)
                ct_perr(c, TXC_ERR_FORMAT, cur(c)->line, "positional argument after keyword argument");
            nl_push(c, &args, parse_expr(c));
        }
    }
    c->pos++;
    nd->args = args.v;
    nd->nargs = args.n;
    nd->kwargs = kw.v;
    nd->kwnames = (const char **)kwn.v;
    nd->nkw = kw.n;
}

static ct_node *parse_primary(pctx *c)
{
    tok *t = cur(c);
    ct_node *nd;
    switch (t->t) {
    case T_NAME:
        c->pos++;
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True") || !strcmp(t->s, "false") || !strcmp(t->s, "False")) {
            nd = node(c, E_CONST, t->line);
            nd->value = const_val(c, CT_BOOL);
            nd->value->b = t->s[0] == 't' || t->s[0] == 'T';
            return nd;
        }
        if (!strcmp(t->s, "none") || !strcmp(t->s, "None")) {
            nd = node(c, E_CONST, t->line);
            nd->value = const_val(c, CT_NONE);
            return nd;
        }
        if (c->in_macro && (!strcmp(t->s, "varargs") || !strcmp(t->s, "kwargs") || !strcmp(t->s, "caller")))
            ct_perr(c, TXC_ERR_UNSUPPORTED, t->line, "'%s' in a macro is not supported", t->s);
        nd = node(c, E_NAME, t->line);
        nd->name = t->s;
        return nd;
    case T_STR: {
        /* adjacent string literals are concatenated */
        size_t total = 0, k = c->pos;
        while (c->toks[k].t == T_STR)
            total += c->toks[k++].n;
        char *buf = ct_alloc(c->ar, total + 1);
        size_t o = 0;
        while (cur(c)->t == T_STR) {
            memcpy(buf + o, cur(c)->s, cur(c)->n);
            o += cur(c)->n;
            c->pos++;
        }
        nd = node(c, E_CONST, t->line);
        nd->value = const_val(c, CT_STR);
        nd->value->str.s = buf;
        nd->value->str.n = total;
        return nd;
    }
    case T_INT:
    case T_FLOAT:
        c->pos++;
        nd = node(c, E_CONST, t->line);
        nd->value = const_val(c, t->t == T_INT ? CT_INT : CT_FLOAT);
        if (t->t == T_INT) {
            nd->value->i = t->i;
            nd->op = t->n == 1; /* the literal 2^63 (value INT64_MIN): valid only negated */
        } else
            nd->value->f = t->f;
        return nd;
    case T_OP:
        if (is_op(t, "(")) {
            c->pos++;
            nd = parse_tuple(c, true);
            expect_op(c, ")");
            return nd;
        }
        if (is_op(t, "[")) {
            c->pos++;
            nlist items = {0};
            while (!is_op(cur(c), "]")) {
                if (items.n)
                    expect_op(c, ",");
                if (is_op(cur(c), "]"))
                    break;
                nl_push(c, &items, parse_expr(c));
            }
            c->pos++;
            nd = node(c, E_LIST, t->line);
            nd->args = items.v;
            nd->nargs = items.n;
            return nd;
        }
        if (is_op(t, "{")) {
            c->pos++;
            nlist keys = {0}, vals = {0};
            while (!is_op(cur(c), "}")) {
                if (keys.n)
                    expect_op(c, ",");
                if (is_op(cur(c), "}"))
                    break;
                nl_push(c, &keys, parse_expr(c));
                expect_op(c, ":");
                nl_push(c, &vals, parse_expr(c));
            }
            c->pos++;
            nd = node(c, E_DICT, t->line);
            nd->args = keys.v;
            nd->nargs = keys.n;
            nd->kwargs = vals.v;
            nd->nkw = vals.n;
            return nd;
        }
        break;
    default:
        break;
    }
    ct_perr(c, TXC_ERR_FORMAT, t->line, "unexpected '%s'", tok_desc(t));
}

static ct_node *parse_subscript(pctx *c, ct_node *obj)
{
    tok *t = cur(c);
    c->pos++; /* '[' */
    ct_node *parts[3] = {NULL, NULL, NULL};
    int np = 0;
    bool slice = false;
    for (;;) {
        if (is_op(cur(c), ":")) {
            slice = true;
            if (np >= 2)
                ct_perr(c, TXC_ERR_FORMAT, cur(c)->line, "too many ':' in a slice");
            np++;
            c->pos++;
            continue;
        }
        if (is_op(cur(c), "]"))
            break;
        if (parts[np])
            ct_perr(c, TXC_ERR_FORMAT, cur(c)->line, "expected ':' or ']', got '%s'", tok_desc(cur(c)));
        parts[np] = parse_expr(c);
        if (is_op(cur(c), ","))
            ct_perr(c, TXC_ERR_UNSUPPORTED, cur(c)->line, "tuple subscripts are not supported");
    }
    c->pos++;
    ct_node *nd;
    if (slice) {
        nd = node(c, E_SLICE, t->line);
        nd->args = ct_alloc(c->ar, 3 * sizeof *nd->args);
        memcpy(nd->args, parts, sizeof parts);
        nd->nargs = 3;
    } else {
        if (!parts[0])
            ct_perr(c, TXC_ERR_FORMAT, t->line, "expected an expression in '[]'");
        nd = node(c, E_ITEM, t->line);
        nd->b = parts[0];
    }
    nd->a = obj;
    return nd;
}

/* fn(args) at the '(' (E_CALL). */
static ct_node *parse_call(pctx *c, ct_node *fn, int line)
{
    c->pos++;
    ct_node *call = node(c, E_CALL, line);
    call->a = fn;
    parse_call_args(c, call);
    return call;
}

static ct_node *parse_postfix(pctx *c, ct_node *nd)
{
    int chain = 0;
    for (;;) {
        tok *t = cur(c);
        if (is_op(t, ".") || is_op(t, "[") || is_op(t, "("))
            chain_step(c, &chain);
        if (is_op(t, ".")) {
            c->pos++;
            if (cur(c)->t == T_INT) { /* x.0 is x[0] */
                ct_node *it = node(c, E_ITEM, t->line);
                it->a = nd;
                it->b = node(c, E_CONST, t->line);
                it->b->value = const_val(c, CT_INT);
                it->b->value->i = cur(c)->i;
                it->b->op = cur(c)->n == 1; /* x.9223372036854775808: 2^63, a render error */
                c->pos++;
                nd = it;
                continue;
            }
            ct_node *at = node(c, E_ATTR, t->line);
            at->a = nd;
            at->name = expect_name(c);
            nd = at;
        } else if (is_op(t, "[")) {
            nd = parse_subscript(c, nd);
        } else if (is_op(t, "(")) {
            nd = parse_call(c, nd, t->line);
        } else {
            c->depth -= chain;
            return nd;
        }
    }
}

static ct_node *parse_filter(pctx *c, ct_node *input)
{
    tok *t = cur(c);
    const char *nm = expect_name(c);
    while (is_op(cur(c), ".")) /* dotted filter names */
        ct_perr(c, TXC_ERR_UNSUPPORTED, t->line, "dotted filter names are not supported");
    int id = ct_filter_id(nm);
    if (id < 0)
        ct_perr(c, TXC_ERR_UNSUPPORTED, t->line, "filter '%s' is not supported", nm);
    ct_node *f = node(c, E_FILTER, t->line);
    f->a = input;
    f->name = nm;
    f->id = id;
    if (is_op(cur(c), "(")) {
        c->pos++;
        parse_call_args(c, f);
    }
    return f;
}

static ct_node *parse_filter_expr(pctx *c, ct_node *nd)
{
    int chain = 0;
    for (;;) {
        tok *t = cur(c);
        if (is_op(t, "|") || is_name(t, "is") || is_op(t, "("))
            chain_step(c, &chain);
        if (is_op(t, "|")) {
            c->pos++;
            nd = parse_filter(c, nd);
        } else if (is_name(t, "is")) {
            c->pos++;
            ct_node *te = node(c, E_TEST, t->line);
            te->a = nd;
            if (is_name(cur(c), "not")) {
                te->op = 1;
                c->pos++;
            }
            /* test names may be keywords-like names: none, true, false, in ... */
            if (cur(c)->t != T_NAME)
                ct_perr(c, TXC_ERR_FORMAT, cur(c)->line, "expected a test name, got '%s'", tok_desc(cur(c)));
            te->name = cur(c)->s;
            c->pos++;
            te->id = ct_test_id(te->name);
            if (te->id < 0)
                ct_perr(c, TXC_ERR_UNSUPPORTED, t->line, "test '%s' is not supported", te->name);
            tok *u = cur(c);
            if (is_op(u, "(")) {
                c->pos++;
                parse_call_args(c, te);
            } else if ((u->t == T_NAME || u->t == T_STR || u->t == T_INT || u->t == T_FLOAT || is_op(u, "[") ||
                        is_op(u, "{")) &&
                       !is_name(u, "else") && !is_name(u, "or") && !is_name(u, "and")) {
                if (is_name(u, "is"))
                    ct_perr(c, TXC_ERR_FORMAT, u->line, "You cannot chain multiple tests with is");
                ct_node *arg = parse_postfix(c, parse_primary(c));
                te->args = ct_alloc(c->ar, sizeof *te->args);
                te->args[0] = arg;
                te->nargs = 1;
            }
            nd = te;
        } else if (is_op(t, "(")) {
            nd = parse_call(c, nd, t->line);
        } else {
            c->depth -= chain;
            return nd;
        }
    }
}

static ct_node *parse_unary(pctx *c, bool with_filter)
{
    enter(c);
    tok *t = cur(c);
    ct_node *nd;
    if (is_op(t, "-") || is_op(t, "+")) {
        c->pos++;
        nd = node(c, is_op(t, "-") ? E_NEG : E_POS, t->line);
        nd->a = parse_unary(c, false);
        if (nd->kind == E_NEG && nd->a->kind == E_CONST && nd->a->op == 1) { /* -9223372036854775808 */
            nd = nd->a;
            nd->op = 0;
        }
    } else {
        nd = parse_primary(c);
    }
    nd = parse_postfix(c, nd);
    if (with_filter)
        nd = parse_filter_expr(c, nd);
    c->depth--;
    return nd;
}

static ct_node *binop(pctx *c, int op, ct_node *a, ct_node *b, int line)
{
    ct_node *nd = node(c, E_BINOP, line);
    nd->op = op;
    nd->a = a;
    nd->b = b;
    return nd;
}

static ct_node *parse_pow(pctx *c)
{
    ct_node *l = parse_unary(c, true);
    int chain = 0;
    while (is_op(cur(c), "**")) {
        chain_step(c, &chain);
        int line = cur(c)->line;
        c->pos++;
        l = binop(c, 'p', l, parse_unary(c, true), line);
    }
    c->depth -= chain;
    return l;
}

/* One precedence level of left-associative binary operators: next (op
 * next)*, left-nested; `ops` maps each operator's text to its E_BINOP op
 * (ends at a NULL text). */
typedef struct binop_sym {
    const char *text;
    int op;
} binop_sym;

static ct_node *parse_left(pctx *c, ct_node *(*next)(pctx *), const binop_sym *ops)
{
    ct_node *l = next(c);
    int chain = 0;
    for (;;) {
        tok *t = cur(c);
        int op = 0;
        for (const binop_sym *o = ops; o->text && !op; o++)
            op = is_op(t, o->text) ? o->op : 0;
        if (!op) {
            c->depth -= chain;
            return l;
        }
        chain_step(c, &chain);
        c->pos++;
        l = binop(c, op, l, next(c), t->line);
    }
}

static ct_node *parse_math2(pctx *c)
{
    static const binop_sym ops[] = {{"*", '*'}, {"/", '/'}, {"//", 'f'}, {"%", '%'}, {NULL, 0}};
    return parse_left(c, parse_pow, ops);
}

static ct_node *parse_concat(pctx *c)
{
    ct_node *first = parse_math2(c);
    if (!is_op(cur(c), "~"))
        return first;
    nlist l = {0};
    nl_push(c, &l, first);
    int line = cur(c)->line;
    while (is_op(cur(c), "~")) {
        c->pos++;
        nl_push(c, &l, parse_math2(c));
    }
    ct_node *nd = node(c, E_CONCAT, line);
    nd->args = l.v;
    nd->nargs = l.n;
    return nd;
}

static ct_node *parse_math1(pctx *c)
{
    static const binop_sym ops[] = {{"+", '+'}, {"-", '-'}, {NULL, 0}};
    return parse_left(c, parse_concat, ops);
}

static ct_node *parse_compare(pctx *c)
{
    ct_node *l = parse_math1(c);
    ct_node *first = NULL, *last = NULL;
    int chain = 0;
    for (;;) {
        tok *t = cur(c);
        int op = 0;
        if (is_op(t, "=="))
            op = 'e';
        else if (is_op(t, "!="))
            op = 'n';
        else if (is_op(t, "<"))
            op = '<';
        else if (is_op(t, "<="))
            op = 'l';
        else if (is_op(t, ">"))
            op = '>';
        else if (is_op(t, ">="))
            op = 'g';
        else if (is_name(t, "in"))
            op = 'i';
        else if (is_name(t, "not") && is_name(peek(c, 1), "in")) {
            op = 'I';
            c->pos++;
        }
        if (!op)
            break;
        chain_step(c, &chain);
        c->pos++;
        ct_node *r = parse_math1(c);
        ct_node *cmp = node(c, E_CMP, t->line);
        cmp->op = op;
        cmp->a = last ? last->b : l;
        cmp->b = r;
        if (!first) {
            first = cmp;
        } else { /* a < b < c: (a < b) and (b < c) */
            ct_node *andn = node(c, E_AND, t->line);
            andn->a = first;
            andn->b = cmp;
            first = andn;
        }
        last = cmp;
    }
    c->depth -= chain;
    return first ? first : l;
}

static ct_node *parse_not(pctx *c)
{
    if (is_name(cur(c), "not")) {
        enter(c);
        ct_node *nd = node(c, E_NOT, cur(c)->line);
        c->pos++;
        nd->a = parse_not(c);
        c->depth--;
        return nd;
    }
    return parse_compare(c);
}

/* operand (kw operand)*, left-nested: `and` (E_AND) over not, `or` (E_OR) over and */
static ct_node *parse_logic(pctx *c, const char *kw, ct_node_kind k, ct_node *(*operand)(pctx *))
{
    ct_node *l = operand(c);
    int chain = 0;
    while (is_name(cur(c), kw)) {
        chain_step(c, &chain);
        ct_node *nd = node(c, k, cur(c)->line);
        c->pos++;
        nd->a = l;
        nd->b = operand(c);
        l = nd;
    }
    c->depth -= chain;
    return l;
}

static ct_node *parse_and(pctx *c) { return parse_logic(c, "and", E_AND, parse_not); }
static ct_node *parse_or(pctx *c) { return parse_logic(c, "or", E_OR, parse_and); }

/* x if cond else y */
static ct_node *parse_expr(pctx *c)
{
    enter(c);
    ct_node *l = parse_or(c);
    int chain = 0;
    while (is_name(cur(c), "if")) {
        chain_step(c, &chain);
        ct_node *nd = node(c, E_COND, cur(c)->line);
        c->pos++;
        nd->b = l;
        nd->a = parse_or(c);
        if (is_name(cur(c), "else")) {
            c->pos++;
            nd->c = parse_expr(c);
        }
        l = nd;
    }
    c->depth -= chain + 1;
    return l;
}

/* an expression or a bare tuple "a, b" */
static ct_node *parse_tuple(pctx *c, bool explicit_parens)
{
    int line = cur(c)->line;
    nlist items = {0};
    bool comma = false;
    for (;;) {
        if (items.n) {
            if (!is_op(cur(c), ","))
                break;
            c->pos++;
            comma = true;
        }
        tok *t = cur(c);
        if (t->t == T_VEND || t->t == T_BEND || is_op(t, ")") || (items.n && is_name(t, "in")))
            break;
        nl_push(c, &items, parse_expr(c));
    }
    if (!comma) {
        if (items.n)
            return items.v[0];
        if (!explicit_parens)
            ct_perr(c, TXC_ERR_FORMAT, line, "expected an expression, got '%s'", tok_desc(cur(c)));
    }
    ct_node *nd = node(c, E_TUPLE, line);
    nd->args = items.v;
    nd->nargs = items.n;
    return nd;
}

/* assignment targets: name or name, name, ... */
static void parse_targets(pctx *c, ct_node *nd)
{
    nlist names = {0};
    bool parens = is_op(cur(c), "(");
    if (parens)
        c->pos++;
    for (;;) {
        nl_push(c, &names, (ct_node *)expect_name(c));
        if (!is_op(cur(c), ","))
            break;
        c->pos++;
    }
    if (parens)
        expect_op(c, ")");
    nd->names = (const char **)names.v;
    nd->nnames = names.n;
}

static ct_node **parse_body(pctx *c, const char *const *ends, size_t *count, const char **which);

static const char *const end_if[] = {"elif", "else", "endif", NULL};
static const char *const end_for[] = {"else", "endfor", NULL};
static const char *const end_for2[] = {"endfor", NULL};
static const char *const end_set[] = {"endset", NULL};
static const char *const end_macro[] = {"endmacro", NULL};
static const char *const end_filter[] = {"endfilter", NULL};
static const char *const end_gen[] = {"endgeneration", NULL};
static const char *const end_with[] = {"endwith", NULL};

static void parse_filter_chain(pctx *c, ct_node *nd)
{
    nlist fl = {0};
    ct_node *f = parse_filter(c, NULL);
    nl_push(c, &fl, f);
    while (is_op(cur(c), "|")) {
        c->pos++;
        nl_push(c, &fl, parse_filter(c, NULL));
    }
    nd->filters = fl.v;
    nd->nfilters = fl.n;
}

static ct_node *parse_if(pctx *c, int line)
{
    ct_node *nd = node(c, N_IF, line);
    nd->a = parse_tuple(c, false);
    expect_bend(c);
    const char *which;
    nd->body = parse_body(c, end_if, &nd->nbody, &which);
    if (!strcmp(which, "elif")) { /* an elif nests one level, as its own if */
        enter(c);
        ct_node *el = parse_if(c, cur(c)->line);
        c->depth--;
        nd->else_body = ct_alloc(c->ar, sizeof *nd->else_body);
        nd->else_body[0] = el;
        nd->nelse = 1;
        return nd; /* the nested if consumed endif */
    }
    if (!strcmp(which, "else")) {
        expect_bend(c);
        nd->else_body = parse_body(c, end_if + 2, &nd->nelse, &which);
    }
    expect_bend(c); /* endif */
    return nd;
}

/* One {% ... %} statement; the '{%' and the keyword were consumed. */
static ct_node *parse_stmt(pctx *c, const char *kw, int line)
{
    const char *which;
    ct_node *nd;
    if (!strcmp(kw, "if"))
        return parse_if(c, line);
    if (!strcmp(kw, "for")) {
        nd = node(c, N_FOR, line);
        parse_targets(c, nd);
        if (!is_name(cur(c), "in"))
            ct_perr(c, TXC_ERR_FORMAT, cur(c)->line, "expected 'in', got '%s'", tok_desc(cur(c)));
        c->pos++;
        /* the iterable: no inline if-else here (jinja parses with_condexpr=False) */
        nd->a = parse_or(c);
        if (is_op(cur(c), ",")) {
            ct_node *tu = node(c, E_TUPLE, line);
            nlist items = {0};
            nl_push(c, &items, nd->a);
            while (is_op(cur(c), ",")) {
                c->pos++;
                nl_push(c, &items, parse_or(c));
            }
            tu->args = items.v;
            tu->nargs = items.n;
            nd->a = tu;
        }
        if (is_name(cur(c), "if")) {
            c->pos++;
            nd->b = parse_expr(c);
        }
        if (is_name(cur(c), "recursive"))
            ct_perr(c, TXC_ERR_UNSUPPORTED, cur(c)->line, "recursive for loops are not supported");
        expect_bend(c);
        nd->body = parse_body(c, end_for, &nd->nbody, &which);
        if (!strcmp(which, "else")) {
            expect_bend(c);
            nd->else_body = parse_body(c, end_for2, &nd->nelse, &which);
        }
        expect_bend(c);
        return nd;
    }
    if (!strcmp(kw, "set")) {
        if (cur(c)->t == T_NAME && is_op(peek(c, 1), ".")) {
            nd = node(c, N_SET, line);
            ct_node *ns = node(c, E_NAME, line);
            ns->name = expect_name(c);
            c->pos++;
            nd->a = ns;
            nd->name = expect_name(c);
            expect_op(c, "=");
            nd->b = parse_tuple(c, false);
            expect_bend(c);
            return nd;
        }
        nd = node(c, N_SET, line);
        parse_targets(c, nd);
        if (is_op(cur(c), "=")) {
            c->pos++;
            nd->b = parse_tuple(c, false);
            expect_bend(c);
            return nd;
        }
        if (nd->nnames != 1)
            ct_perr(c, TXC_ERR_FORMAT, line, "expected '=' in a set statement");
        nd->kind = N_SETBLOCK;
        if (is_op(cur(c), "|")) {
            c->pos++;
            parse_filter_chain(c, nd);
        }
        expect_bend(c);
        nd->body = parse_body(c, end_set, &nd->nbody, &which);
        expect_bend(c);
        return nd;
    }
    if (!strcmp(kw, "macro")) {
        nd = node(c, N_MACRO, line);
        nd->name = expect_name(c);
        expect_op(c, "(");
        nlist params = {0}, defs = {0};
        while (!is_op(cur(c), ")")) {
            if (params.n)
                expect_op(c, ",");
            if (is_op(cur(c), ")"))
                break;
            nl_push(c, &params, (ct_node *)expect_name(c));
            ct_node *d = NULL;
            if (is_op(cur(c), "=")) {
                c->pos++;
                d = parse_expr(c);
            } else if (defs.n && defs.v[defs.n - 1]) {
                ct_perr(c, TXC_ERR_FORMAT, line, "non-default argument follows default argument");
            }
            nl_push(c, &defs, d);
        }
        c->pos++;
        expect_bend(c);
        nd->names = (const char **)params.v;
        nd->nnames = params.n;
        nd->args = defs.v;
        nd->nargs = defs.n;
        c->in_macro++;
        nd->body = parse_body(c, end_macro, &nd->nbody, &which);
        c->in_macro--;
        if (cur(c)->t == T_NAME) /* {% endmacro name %} */
            c->pos++;
        expect_bend(c);
        return nd;
    }
    if (!strcmp(kw, "break") || !strcmp(kw, "continue")) {
        nd = node(c, kw[0] == 'b' ? N_BREAK : N_CONTINUE, line);
        expect_bend(c);
        return nd;
    }
    if (!strcmp(kw, "filter")) {
        nd = node(c, N_FILTERBLOCK, line);
        parse_filter_chain(c, nd);
        expect_bend(c);
        nd->body = parse_body(c, end_filter, &nd->nbody, &which);
        expect_bend(c);
        return nd;
    }
    if (!strcmp(kw, "generation")) { /* transformers' AssistantTracker: renders its body */
        nd = node(c, N_BODY, line);
        expect_bend(c);
        nd->body = parse_body(c, end_gen, &nd->nbody, &which);
        expect_bend(c);
        return nd;
    }
    if (!strcmp(kw, "with")) { /* {% with a = x, b = y %}: a scope; values from the outer one */
        nd = node(c, N_WITH, line);
        nlist names = {0}, vals = {0};
        while (cur(c)->t != T_BEND) {
            if (names.n)
                expect_op(c, ",");
            nl_push(c, &names, (ct_node *)expect_name(c));
            expect_op(c, "=");
            nl_push(c, &vals, parse_expr(c));
        }
        expect_bend(c);
        nd->names = (const char **)names.v;
        nd->nnames = names.n;
        nd->args = vals.v;
        nd->nargs = vals.n;
        nd->body = parse_body(c, end_with, &nd->nbody, &which);
        expect_bend(c);
        return nd;
    }
    static const char *const known[] = {"call", "block", "extends", "include", "import", "from",
                                        "autoescape", "do", "raw", "trans", "pluralize", NULL};
    for (int k = 0; known[k]; k++)
        if (!strcmp(kw, known[k]))
            ct_perr(c, TXC_ERR_UNSUPPORTED, line, "'{%% %s %%}' is not supported", kw);
    ct_perr(c, TXC_ERR_FORMAT, line, "Encountered unknown tag '%s'", kw);
}

/* Statements until a block tag whose keyword is in `ends` (NULL: the end of
 * the template). On return the position is after that keyword; *which is
 * the keyword. */
static ct_node **parse_body(pctx *c, const char *const *ends, size_t *count, const char **which)
{
    enter(c);
    nlist body = {0};
    int start_line = cur(c)->line;
    for (;;) {
        tok *t = cur(c);
        if (t->t == T_EOF) {
            if (ends)
                ct_perr(c, TXC_ERR_FORMAT, t->line,
                     "unexpected end of template: the block opened at or before line %d needs '{%% %s %%}'",
                     start_line, ends[0] && !strcmp(ends[0], "elif") ? "endif" : ends[0] && !strcmp(ends[0], "else") ? "endfor" : ends[0]);
            break;
        }
        if (t->t == T_DATA) {
            ct_node *nd = node(c, N_TEXT, t->line);
            nd->value = const_val(c, CT_STR);
            nd->value->str.s = t->s;
            nd->value->str.n = t->n;
            nl_push(c, &body, nd);
            c->pos++;
            continue;
        }
        if (t->t == T_VBEGIN) {
            c->pos++;
            ct_node *nd = node(c, N_OUTPUT, t->line);
            nd->a = parse_tuple(c, false);
            if (cur(c)->t != T_VEND)
                ct_perr(c, TXC_ERR_FORMAT, cur(c)->line, "expected end of print statement, got '%s'",
                     tok_desc(cur(c)));
            c->pos++;
            nl_push(c, &body, nd);
            continue;
        }
        if (t->t != T_BBEGIN)
            ct_perr(c, TXC_ERR_FORMAT, t->line, "unexpected '%s'", tok_desc(t));
        c->pos++;
        if (cur(c)->t != T_NAME)
            ct_perr(c, TXC_ERR_FORMAT, cur(c)->line, "tag name expected, got '%s'", tok_desc(cur(c)));
        const char *kw = cur(c)->s;
        int line = cur(c)->line;
        c->pos++;
        if (ends) {
            bool hit = false;
            for (int k = 0; ends[k]; k++)
                if (!strcmp(kw, ends[k]))
                    hit = true;
            if (hit) {
                *which = kw;
                break;
            }
        }
        if (!strncmp(kw, "end", 3) || !strcmp(kw, "elif") || !strcmp(kw, "else"))
            ct_perr(c, TXC_ERR_FORMAT, line, "Encountered unexpected tag '%s'%s", kw,
                 ends ? "" : " (no block is open)");
        nl_push(c, &body, parse_stmt(c, kw, line));
    }
    c->depth--;
    *count = body.n;
    return body.v;
}

txc_status ct_parse(txc_chat_template *t, const char *src, size_t len)
{
    pctx *c = calloc(1, sizeof *c);
    if (!c)
        return txc_error(TXC_ERR_NOMEM, "out of memory");
    c->t = t;
    c->ar = &t->arena;
    t->arena.fail = &c->fail;
    txc_status st = TXC_OK;
    if (setjmp(c->fail)) {
        st = txc_last_status() != TXC_OK ? txc_last_status() : TXC_ERR_INTERNAL;
        goto out;
    }
    /* newlines to "\n", one trailing newline dropped (keep_trailing_newline=False) */
    char *norm = ct_alloc(c->ar, len + 1);
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            norm[k++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n')
                i++;
        } else {
            norm[k++] = src[i];
        }
    }
    if (k > 0 && norm[k - 1] == '\n')
        k--;
    norm[k] = '\0';
    c->src = norm;
    c->len = k;
    ct_lex(c);
    const char *which = NULL;
    t->body = parse_body(c, NULL, &t->nbody, &which);
out:
    t->arena.fail = NULL;
    free(c->toks);
    free(c);
    return st;
}
