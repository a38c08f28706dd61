/* Chat templates: the renderer's expressions and statements, and
 * ct_render (see chat/chat_template_impl.h and chat/chat_template_render.h). */
#include "chat/chat_template_render.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#define RENDER_MEM_LIMIT ((size_t)512 << 20)

/* ---- expressions -------------------------------------------------------- */
static void eval_args(rctx *c, const ct_node *e, args *a)
{
    a->npos = e->nargs;
    a->nkw = e->nkw;
    a->pos = ct_alloc(&c->ar, (e->nargs ? e->nargs : 1) * sizeof *a->pos);
    a->kwv = ct_alloc(&c->ar, (e->nkw ? e->nkw : 1) * sizeof *a->kwv);
    a->kwn = e->kwnames;
    for (size_t i = 0; i < e->nargs; i++)
        a->pos[i] = ct_eval(c, e->args[i]);
    for (size_t i = 0; i < e->nkw; i++)
        a->kwv[i] = ct_eval(c, e->kwargs[i]);
}

ct_value *ct_eval(rctx *c, const ct_node *e)
{
    tick(c, 1, e->line);
    switch (e->kind) {
    case E_CONST:
        if (e->op == 1) /* the literal 2^63 not negated (see the parser) */
            ct_rfail(c, TXC_ERR_UNSUPPORTED, e->line,
                     "integer literal 9223372036854775808 is larger than 64 bits (only its negation fits)");
        return e->value;
    case E_NAME: return ct_lookup(c, e->name);
    case E_ATTR: return ct_getattr_v(c, ct_eval(c, e->a), e->name, e->line);
    case E_ITEM: {
        ct_value *o = ct_eval(c, e->a);
        return ct_getitem_v(c, o, ct_eval(c, e->b), e->line);
    }
    case E_SLICE: {
        ct_value *o = ct_eval(c, e->a);
        ct_value *parts[3];
        for (int k = 0; k < 3; k++)
            parts[k] = e->args[k] ? ct_eval(c, e->args[k]) : NULL;
        return ct_do_slice(c, o, parts, e->line);
    }
    case E_CALL: {
        ct_value *fn = ct_eval(c, e->a);
        args a;
        eval_args(c, e, &a);
        return ct_call_value(c, fn, &a, e->line);
    }
    case E_FILTER: {
        ct_value *in = ct_eval(c, e->a);
        args a;
        eval_args(c, e, &a);
        return ct_apply_filter(c, e, in, &a);
    }
    case E_TEST: {
        ct_value *in = ct_eval(c, e->a);
        args a;
        eval_args(c, e, &a);
        if (a.nkw)
            ct_rfail(c, TXC_ERR_UNSUPPORTED, e->line, "keyword arguments to tests are not supported");
        bool r = ct_run_test(c, e->id, in, a.pos, a.npos, e->line);
        return V_BOOL(e->op ? !r : r);
    }
    case E_NOT: return V_BOOL(!ct_truthy(ct_eval(c, e->a)));
    case E_NEG:
    case E_POS: {
        ct_value *v = ct_eval(c, e->a);
        if (v->kind == CT_UNDEF)
            ct_undef_fail(c, v, e->line);
        if (v->kind == CT_FLOAT)
            return ct_mk_float(c, e->kind == E_NEG ? -v->f : v->f);
        if (v->kind == CT_INT || v->kind == CT_BOOL) {
            int64_t x = num_i(v);
            if (e->kind == E_NEG && x == INT64_MIN)
                ct_rfail(c, TXC_ERR_UNSUPPORTED, e->line, "integer overflow");
            return ct_mk_int(c, e->kind == E_NEG ? -x : x);
        }
        ct_rfail(c, TXC_ERR_INVALID, e->line, "bad operand type for unary %c: '%s'", e->kind == E_NEG ? '-' : '+',
              ct_type_name(v));
    }
    case E_BINOP: {
        ct_value *a = ct_eval(c, e->a);
        return ct_arith(c, e->op, a, ct_eval(c, e->b), e->line);
    }
    case E_CONCAT: {
        sbuf b = {0};
        for (size_t i = 0; i < e->nargs; i++)
            ct_to_str(c, &b, ct_eval(c, e->args[i]), e->line);
        return ct_sb_value(c, &b);
    }
    case E_AND: {
        ct_value *a = ct_eval(c, e->a);
        return ct_truthy(a) ? ct_eval(c, e->b) : a;
    }
    case E_OR: {
        ct_value *a = ct_eval(c, e->a);
        return ct_truthy(a) ? a : ct_eval(c, e->b);
    }
    case E_CMP: {
        ct_value *a = ct_eval(c, e->a), *b = ct_eval(c, e->b);
        switch (e->op) {
        case 'e': return V_BOOL(ct_equal(c, a, b));
        case 'n': return V_BOOL(!ct_equal(c, a, b));
        case '<': return V_BOOL(ct_compare(c, a, b, "<", e->line) < 0);
        case 'l': return V_BOOL(ct_compare(c, a, b, "<=", e->line) <= 0);
        case '>': return V_BOOL(ct_compare(c, a, b, ">", e->line) > 0);
        case 'g': return V_BOOL(ct_compare(c, a, b, ">=", e->line) >= 0);
        case 'i': return V_BOOL(ct_contains(c, a, b, e->line));
        default: return V_BOOL(!ct_contains(c, a, b, e->line));
        }
    }
    case E_COND:
        if (ct_truthy(ct_eval(c, e->a)))
            return ct_eval(c, e->b);
        return e->c ? ct_eval(c, e->c) : ct_mk_undef(c, "the inline if expression on line %d evaluated to false and no else section was defined.", e->line);
    case E_LIST:
    case E_TUPLE: {
        ct_value *l = ct_mk_list(c, e->nargs, e->kind == E_TUPLE);
        for (size_t i = 0; i < e->nargs; i++)
            l->list.items[i] = ct_eval(c, e->args[i]);
        return l;
    }
    case E_DICT: {
        ct_value *d = ct_mk(c, CT_DICT);
        for (size_t i = 0; i < e->nargs; i++) {
            ct_value *k = ct_eval(c, e->args[i]);
            if (k->kind == CT_LIST && !k->list.tuple)
                ct_rfail(c, TXC_ERR_INVALID, e->line, "unhashable type: 'list'");
            if (k->kind == CT_DICT || k->kind == CT_NS || k->kind == CT_UNDEF)
                ct_rfail(c, TXC_ERR_INVALID, e->line, "unhashable type: '%s'", ct_type_name(k));
            ct_dict_set(c, d, k, ct_eval(c, e->kwargs[i]));
        }
        return d;
    }
    default: break;
    }
    ct_rfail(c, TXC_ERR_INTERNAL, e->line, "bad expression node %d", (int)e->kind);
}

/* ---- statements --------------------------------------------------------- */
static void emit(rctx *c, const char *s, size_t n)
{
    if (c->out == NULL)
        return;
    ct_sb_put(c, c->out, s, n);
}

static void unpack(rctx *c, frame *f, const char **names, size_t nn, ct_value *v, int line)
{
    if (nn == 1) {
        ct_frame_set(c, f, names[0], v);
        return;
    }
    size_t n;
    ct_value **items = ct_iterate(c, v, &n, line);
    if (n != nn)
        ct_rfail(c, TXC_ERR_INVALID, line, "%s values to unpack (expected %zu, got %zu)", n > nn ? "too many" : "not enough",
              nn, n);
    for (size_t i = 0; i < nn; i++)
        ct_frame_set(c, f, names[i], items[i]);
}

static ct_value *apply_filter_chain(rctx *c, ct_node *const *fl, size_t n, ct_value *v)
{
    for (size_t i = 0; i < n; i++) {
        args a;
        eval_args(c, fl[i], &a);
        v = ct_apply_filter(c, fl[i], v, &a);
    }
    return v;
}

static ct_value *capture(rctx *c, ct_node *const *body, size_t n)
{
    sbuf *saved = c->out;
    sbuf b = {0};
    c->out = &b;
    ct_exec_body(c, body, n);
    c->out = saved;
    return ct_sb_value(c, &b);
}

static void exec_for(rctx *c, const ct_node *s)
{
    ct_value *it = ct_eval(c, s->a);
    size_t n;
    ct_value **items = ct_iterate(c, it, &n, s->line);
    frame *outer = c->cur;
    if (s->b) { /* for x in xs if cond: filter first; loop.length counts what is left */
        ct_value **kept = ct_alloc(&c->ar, (n ? n : 1) * sizeof *kept);
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            frame *f = ct_frame_new(c, outer);
            c->cur = f;
            unpack(c, f, s->names, s->nnames, items[i], s->line);
            if (ct_truthy(ct_eval(c, s->b)))
                kept[m++] = items[i];
            c->cur = outer;
        }
        items = kept;
        n = m;
    }
    if (n == 0) {
        c->cur = ct_frame_new(c, outer);
        ct_exec_body(c, s->else_body, s->nelse);
        c->cur = outer;
        return;
    }
    ct_loop *lp = ct_alloc(&c->ar, sizeof *lp);
    lp->length = n;
    lp->items = items;
    ct_value *lv = ct_mk(c, CT_LOOP);
    lv->loop = lp;
    for (size_t i = 0; i < n; i++) {
        lp->index0 = i;
        frame *f = ct_frame_new(c, outer);
        c->cur = f;
        ct_frame_set(c, f, "loop", lv);
        unpack(c, f, s->names, s->nnames, items[i], s->line);
        ct_exec_body(c, s->body, s->nbody);
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
        ct_value *v = ct_eval(c, s->a);
        if (c->out)
            ct_to_str(c, c->out, v, s->line);
        return;
    }
    case N_IF:
        if (ct_truthy(ct_eval(c, s->a)))
            ct_exec_body(c, s->body, s->nbody);
        else
            ct_exec_body(c, s->else_body, s->nelse);
        return;
    case N_FOR: exec_for(c, s); return;
    case N_SET: {
        ct_value *v = ct_eval(c, s->b);
        if (s->a) {
            ct_value *ns = ct_eval(c, s->a);
            if (ns->kind != CT_NS)
                ct_rfail(c, TXC_ERR_INVALID, s->line, "cannot assign attribute on non-namespace object");
            if (s->name[0] == '_')
                ct_rfail(c, TXC_ERR_INVALID, s->line,
                      "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '%s'. "
                      "Please rename the attribute.", s->name);
            ct_dict_set(c, ns, ct_mk_str_copy(c, s->name, strlen(s->name)), v);
            return;
        }
        unpack(c, c->cur, s->names, s->nnames, v, s->line);
        return;
    }
    case N_SETBLOCK: {
        ct_value *v = capture(c, s->body, s->nbody);
        v = apply_filter_chain(c, s->filters, s->nfilters, v);
        ct_frame_set(c, c->cur, s->names[0], v);
        return;
    }
    case N_FILTERBLOCK: {
        ct_value *v = capture(c, s->body, s->nbody);
        v = apply_filter_chain(c, s->filters, s->nfilters, v);
        if (c->out)
            ct_to_str(c, c->out, v, s->line);
        return;
    }
    case N_MACRO: {
        ct_value *m = ct_mk(c, CT_FUNC);
        m->func.id = -1;
        m->func.macro = s;
        m->func.closure = c->cur;
        ct_frame_set(c, c->cur, s->name, m);
        return;
    }
    case N_BREAK: c->ctl = 1; return;
    case N_CONTINUE: c->ctl = 2; return;
    case N_BODY: ct_exec_body(c, s->body, s->nbody); return;
    case N_WITH: {
        frame *outer = c->cur;
        frame *f = ct_frame_new(c, outer);
        for (size_t i = 0; i < s->nnames; i++)
            ct_frame_set(c, f, s->names[i], ct_eval(c, s->args[i]));
        c->cur = f;
        ct_exec_body(c, s->body, s->nbody);
        c->cur = outer;
        return;
    }
    default: ct_rfail(c, TXC_ERR_INTERNAL, s->line, "bad statement node %d", (int)s->kind);
    }
}

void ct_exec_body(rctx *c, ct_node *const *body, size_t n)
{
    for (size_t i = 0; i < n && !c->ctl; i++)
        exec_stmt(c, body[i]);
}

static ct_value *from_json(rctx *c, const cJSON *j)
{
    if (cJSON_IsNull(j))
        return V_NONE;
    if (cJSON_IsBool(j))
        return V_BOOL(cJSON_IsTrue(j));
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (d == floor(d) && fabs(d) < 9.0e15)
            return ct_mk_int(c, (int64_t)d);
        return ct_mk_float(c, d);
    }
    if (cJSON_IsString(j))
        return ct_mk_str_copy(c, j->valuestring, strlen(j->valuestring));
    if (cJSON_IsArray(j)) {
        ct_value *l = ct_mk_list(c, (size_t)cJSON_GetArraySize(j), false);
        size_t i = 0;
        for (const cJSON *e = j->child; e; e = e->next)
            l->list.items[i++] = from_json(c, e);
        return l;
    }
    ct_value *d = ct_mk(c, CT_DICT);
    for (const cJSON *e = j->child; e; e = e->next)
        ct_dict_set(c, d, ct_mk_str_copy(c, e->string, strlen(e->string)), from_json(c, e));
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
    frame *globals = ct_frame_new(c, NULL);
    ct_frame_set(c, globals, "raise_exception", ct_mk_func(c, F_RAISE, NULL));
    ct_frame_set(c, globals, "strftime_now", ct_mk_func(c, F_STRFTIME, NULL));
    ct_frame_set(c, globals, "range", ct_mk_func(c, F_RANGE, NULL));
    ct_frame_set(c, globals, "namespace", ct_mk_func(c, F_NAMESPACE, NULL));
    ct_frame_set(c, globals, "dict", ct_mk_func(c, F_DICT, NULL));
    ct_frame_set(c, globals, "cycler", ct_mk_func(c, F_UNSUPPORTED_GLOBAL, NULL));
    ct_frame_set(c, globals, "joiner", ct_mk_func(c, F_UNSUPPORTED_GLOBAL, NULL));
    ct_frame_set(c, globals, "lipsum", ct_mk_func(c, F_UNSUPPORTED_GLOBAL, NULL));
    frame *root = ct_frame_new(c, globals);
    c->root = root;
    c->cur = root;
    ct_value *msgs = ct_mk_list(c, n, false);
    ct_value *k_role = ct_mk_strn(c, "role", 4), *k_content = ct_mk_strn(c, "content", 7);
    for (size_t i = 0; i < n; i++) {
        ct_value *d = ct_mk(c, CT_DICT);
        ct_dict_set(c, d, k_role, ct_mk_str_copy(c, messages[i].role, strlen(messages[i].role)));
        /* transformers drops the keys whose value is None: NULL content leaves 'content' out */
        if (messages[i].content)
            ct_dict_set(c, d, k_content, ct_mk_str_copy(c, messages[i].content, strlen(messages[i].content)));
        msgs->list.items[i] = d;
    }
    /* transformers: render(messages=, tools=, documents=, add_generation_prompt=,
     * **special_tokens_map, **kwargs) */
    ct_frame_set(c, root, "messages", msgs);
    ct_frame_set(c, root, "tools", V_NONE);
    ct_frame_set(c, root, "documents", V_NONE);
    ct_frame_set(c, root, "add_generation_prompt", V_BOOL(add_generation_prompt));
    for (int k = 0; k < 4; k++)
        if (t->tokens[k])
            ct_frame_set(c, root, ct_token_names[k], ct_mk_str_copy(c, t->tokens[k], strlen(t->tokens[k])));
    for (size_t k = 0; k < t->nvars; k++) {
        json = cJSON_Parse(t->vars[k].json);
        if (!json)
            ct_rfail(c, TXC_ERR_INTERNAL, 0, "variable '%s': stored JSON does not parse", t->vars[k].name);
        ct_frame_set(c, root, t->vars[k].name, from_json(c, json));
        cJSON_Delete(json);
        json = NULL;
    }
    sbuf b = {0};
    c->out = &b;
    ct_exec_body(c, t->body, t->nbody);
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
