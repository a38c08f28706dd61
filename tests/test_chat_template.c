/* Chat templates (txc/chat_template.h) against transformers:
 * tests/fixtures/chat_templates.json, written by
 * scripts/gen_chat_template_fixtures.py, holds every conversation of a fixed
 * set rendered by apply_chat_template for each real template in
 * ../shared/tokenizers (text byte for byte, or the exception the template
 * raised) with the ids of apply_chat_template(tokenize=True), and small
 * templates exercising the Jinja subset rendered in transformers' Jinja
 * environment. Also: the one-BOS trap (the rendered text tokenized without
 * the post-processor gives transformers' ids, one BOS), syntax errors,
 * unsupported constructs, guards, and loading from a folder. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txc/chat_template.h"
#include "txc/tokenizer.h"

static cJSON *fixtures;

static int setup(void **state)
{
    (void)state;
    fixtures = tu_load_json("tests/fixtures/chat_templates.json");
    return fixtures ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    cJSON_Delete(fixtures);
    return 0;
}

/* messages of a fixture case (role/content strings point into the JSON) */
static txc_chat_message *case_messages(const cJSON *c, size_t *n)
{
    const cJSON *msgs = cJSON_GetObjectItem(c, "messages");
    *n = (size_t)cJSON_GetArraySize(msgs);
    txc_chat_message *m = calloc(*n ? *n : 1, sizeof *m);
    assert_non_null(m);
    size_t i = 0;
    for (const cJSON *e = msgs->child; e; e = e->next, i++) {
        m[i].role = cJSON_GetObjectItem(e, "role")->valuestring;
        const cJSON *ct = cJSON_GetObjectItem(e, "content");
        m[i].content = cJSON_IsString(ct) ? ct->valuestring : NULL;
    }
    return m;
}

static void set_vars(txc_chat_template *t, const cJSON *vars)
{
    for (const cJSON *v = vars ? vars->child : NULL; v; v = v->next) {
        char *js = cJSON_PrintUnformatted(v);
        assert_non_null(js);
        txc_status st = txc_chat_template_set_var_json(t, v->string, js);
        free(js);
        assert_int_equal(st, TXC_OK);
    }
}

/* Render case `c` with `t`; compare with "expected" or the "error". Returns
 * 1 on a match (else prints why); *text gets the rendering when it matched
 * an expected text. */
static int check_case(const char *what, txc_chat_template *t, const cJSON *c, char **text, size_t *text_len)
{
    size_t n;
    txc_chat_message *m = case_messages(c, &n);
    bool gen = cJSON_IsTrue(cJSON_GetObjectItem(c, "add_generation_prompt"));
    char *out = NULL;
    size_t len = 0;
    txc_clear_error();
    txc_status st = txc_chat_template_render(t, m, n, gen, &out, &len);
    free(m);
    const cJSON *exp = cJSON_GetObjectItem(c, "expected");
    const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
    int ok = 0;
    if (cJSON_IsString(exp)) {
        if (st != TXC_OK) {
            print_error("%s / %s (gen=%d): %s %s\n", what, name, gen, txc_status_name(st), txc_last_error());
        } else if (len != strlen(exp->valuestring) || memcmp(out, exp->valuestring, len) != 0) {
            print_error("%s / %s (gen=%d): rendered\n---\n%s\n--- expected\n%s\n---\n", what, name, gen, out,
                        exp->valuestring);
        } else {
            ok = 1;
        }
    } else {
        const char *etype = cJSON_GetObjectItem(c, "error")->valuestring;
        const char *emsg = cJSON_GetObjectItem(c, "message")->valuestring;
        if (st == TXC_OK) {
            print_error("%s / %s (gen=%d): rendered, want %s: %s\n", what, name, gen, etype, emsg);
        } else if (out != NULL) {
            print_error("%s / %s: *out not NULL on error\n", what, name);
        } else if (!strcmp(etype, "TemplateError") ||
                   (!strcmp(etype, "ValueError") && !strncmp(emsg, "Cannot apply chat template", 26))) {
            /* raise_exception / the empty conversation: TXC_ERR_INVALID with the message itself */
            if (st != TXC_ERR_INVALID || strcmp(txc_last_error(), emsg) != 0)
                print_error("%s / %s: got %s \"%s\", want TXC_ERR_INVALID \"%s\"\n", what, name,
                            txc_status_name(st), txc_last_error(), emsg);
            else
                ok = 1;
        } else if (st != TXC_ERR_INVALID) { /* UndefinedError, TypeError, OverflowError */
            print_error("%s / %s: got %s \"%s\", want TXC_ERR_INVALID (%s: %s)\n", what, name,
                        txc_status_name(st), txc_last_error(), etype, emsg);
        } else if (!strcmp(etype, "UndefinedError") && !strstr(txc_last_error(), emsg)) {
            /* the missing attribute named as jinja2 names it (a message without "content" once failed with
             * another error's text) */
            print_error("%s / %s: got \"%s\", want jinja2's UndefinedError \"%s\"\n", what, name, txc_last_error(),
                        emsg);
        } else {
            ok = 1;
        }
    }
    if (ok && text) {
        *text = out;
        *text_len = len;
    } else {
        free(out);
    }
    return ok;
}

static int count_id(const int32_t *ids, size_t n, int32_t id)
{
    int k = 0;
    for (size_t i = 0; i < n; i++)
        k += ids[i] == id;
    return k;
}

static bool ids_equal(const int32_t *ids, size_t n, const cJSON *want)
{
    if (n != (size_t)cJSON_GetArraySize(want))
        return false;
    size_t i = 0;
    for (const cJSON *e = want->child; e; e = e->next, i++)
        if (ids[i] != (int32_t)e->valuedouble)
            return false;
    return true;
}

/* Every real template, every conversation: byte-exact; and the one-BOS trap. */
static void test_real_templates(void **state)
{
    (void)state;
    int total = 0, passed = 0, texts = 0, ids_checked = 0, ids_tokenizer_diff = 0, one_bos = 0, with_template = 0;
    const cJSON *chats = cJSON_GetObjectItem(fixtures, "chats");
    for (const cJSON *tk = chats->child; tk; tk = tk->next) {
        const char *name = cJSON_GetObjectItem(tk, "tokenizer")->valuestring;
        const char *dir = tu_path("%s/tokenizers/%s", tu_shared_dir(), name);
        txc_chat_template *t = NULL;
        txc_clear_error();
        txc_status st = txc_chat_template_load(dir, &t);
        if (!cJSON_IsTrue(cJSON_GetObjectItem(tk, "has_template"))) {
            /* a folder without a template: the clear error */
            assert_int_equal(st, TXC_ERR_UNSUPPORTED);
            assert_null(t);
            assert_non_null(strstr(txc_last_error(), "has no chat_template"));
            continue;
        }
        with_template++;
        if (st)
            print_error("%s: %s %s\n", name, txc_status_name(st), txc_last_error());
        assert_int_equal(st, TXC_OK);
        txc_tokenizer *tok = NULL;
        assert_int_equal(txc_tokenizer_load(dir, &tok), TXC_OK);
        const cJSON *bos_id_j = cJSON_GetObjectItem(tk, "bos_id");
        const cJSON *bos_tok_j = cJSON_GetObjectItem(tk, "bos_token");
        for (const cJSON *c = cJSON_GetObjectItem(tk, "cases")->child; c; c = c->next) {
            total++;
            /* kwargs (enable_thinking...) as variables; reset those of the previous case */
            assert_int_equal(txc_chat_template_set_var_json(t, "enable_thinking", NULL), TXC_OK);
            set_vars(t, cJSON_GetObjectItem(c, "kwargs"));
            char *text = NULL;
            size_t len = 0;
            int ok = check_case(name, t, c, &text, &len);
            const cJSON *want = cJSON_GetObjectItem(c, "ids");
            const cJSON *crate = cJSON_GetObjectItem(c, "crate_ids");
            if (!crate) /* absent: the crate's ids are transformers' */
                crate = want;
            if (ok && text && want) {
                texts++;
                int32_t *ids = NULL;
                size_t nids = 0;
                assert_int_equal(txc_tokenizer_encode(tok, text, len, false, &ids, &nids), TXC_OK);
                /* txc's tokenizer follows tokenizer.json as the `tokenizers` crate runs it */
                if (!ids_equal(ids, nids, crate)) {
                    print_error("%s / %s: ids differ from the tokenizers crate's\n", name,
                                cJSON_GetObjectItem(c, "name")->valuestring);
                    ok = 0;
                }
                /* transformers' ids: the same, except where transformers 5 rebuilds a
                 * Llama-2-style tokenizer differently from its tokenizer.json (then the
                 * crate's ids differ from transformers' too) */
                if (ids_equal(ids, nids, want))
                    ids_checked++;
                else if (ids_equal(ids, nids, crate))
                    ids_tokenizer_diff++;
                /* the template writes the BOS itself: exactly one, first */
                if (cJSON_IsNumber(bos_id_j) && cJSON_IsString(bos_tok_j) &&
                    !strncmp(text, bos_tok_j->valuestring, strlen(bos_tok_j->valuestring))) {
                    int32_t bos = (int32_t)bos_id_j->valuedouble;
                    if (nids == 0 || ids[0] != bos || count_id(ids, nids, bos) != 1) {
                        print_error("%s / %s: want exactly one BOS (%d) at the start\n", name,
                                    cJSON_GetObjectItem(c, "name")->valuestring, bos);
                        ok = 0;
                    } else {
                        one_bos++;
                    }
                    /* and the trap itself: with the post-processor's special tokens, a
                     * template that adds BOS gets two */
                    int32_t *ids2 = NULL;
                    size_t n2 = 0;
                    assert_int_equal(txc_tokenizer_encode(tok, text, len, true, &ids2, &n2), TXC_OK);
                    if (n2 > nids && count_id(ids2, n2, bos) != 2)
                        print_error("%s: note: add_special_tokens=true gave %d BOS\n", name, count_id(ids2, n2, bos));
                    free(ids2);
                }
                free(ids);
            }
            free(text);
            passed += ok;
        }
        txc_tokenizer_free(tok);
        txc_chat_template_free(t);
    }
    printf("chat templates: %d/%d fixture renderings identical to transformers (%d templates); "
           "txc's ids = transformers' for %d, = the tokenizers crate's (transformers 5 retokenizes "
           "Llama-2-style vocabularies) for %d; %d with exactly one BOS, first\n",
           passed, total, with_template, ids_checked, ids_tokenizer_diff, one_bos);
    assert_int_equal(with_template, 6);
    assert_int_equal(passed, total);
    assert_int_equal(ids_checked + ids_tokenizer_diff, texts);
    assert_true(total > 200);
}

/* The Jinja subset: small templates rendered in transformers' environment. */
static void test_jinja_subset(void **state)
{
    (void)state;
    int total = 0, passed = 0;
    const cJSON *cases = cJSON_GetObjectItem(fixtures, "jinja");
    for (const cJSON *c = cases->child; c; c = c->next) {
        total++;
        const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
        const char *src = cJSON_GetObjectItem(c, "template")->valuestring;
        txc_chat_template *t = NULL;
        txc_clear_error();
        txc_status st = txc_chat_template_parse(src, strlen(src), &t);
        if (st) {
            print_error("jinja %s: parse: %s %s\n", name, txc_status_name(st), txc_last_error());
            continue;
        }
        set_vars(t, cJSON_GetObjectItem(c, "vars"));
        passed += check_case("jinja", t, c, NULL, NULL);
        txc_chat_template_free(t);
    }
    printf("jinja subset: %d/%d cases identical to jinja2\n", passed, total);
    assert_int_equal(passed, total);
}

/* More real templates (Llama 3.2 with tools, gpt-oss with its macros, Llama 2,
 * Mistral, Qwen3 with tools) with their kwargs. */
static void test_extra_templates(void **state)
{
    (void)state;
    int total = 0, passed = 0;
    const cJSON *extra = cJSON_GetObjectItem(fixtures, "extra");
    for (const cJSON *tp = extra->child; tp; tp = tp->next) {
        const char *name = cJSON_GetObjectItem(tp, "template")->valuestring;
        const cJSON *file = cJSON_GetObjectItem(tp, "file");
        char *src = NULL;
        size_t len = 0;
        if (cJSON_IsString(file)) {
            src = tu_read_file(tu_path("%s/%s", tu_source_dir(), file->valuestring), &len);
            assert_non_null(src);
        }
        for (const cJSON *v = cJSON_GetObjectItem(tp, "variants")->child; v; v = v->next) {
            for (const cJSON *c = cJSON_GetObjectItem(v, "cases")->child; c; c = c->next) {
                txc_chat_template *t = NULL;
                txc_clear_error();
                txc_status st = src ? txc_chat_template_parse(src, len, &t)
                                    : txc_chat_template_load(tu_path("%s/tokenizers/%s", tu_shared_dir(), name), &t);
                if (st)
                    print_error("%s: %s %s\n", name, txc_status_name(st), txc_last_error());
                assert_int_equal(st, TXC_OK);
                for (const cJSON *tk = cJSON_GetObjectItem(tp, "tokens")->child; tk; tk = tk->next)
                    assert_int_equal(txc_chat_template_set_token(t, tk->string, tk->valuestring), TXC_OK);
                set_vars(t, cJSON_GetObjectItem(v, "kwargs"));
                total++;
                passed += check_case(name, t, c, NULL, NULL);
                txc_chat_template_free(t);
            }
        }
        free(src);
    }
    printf("extra templates: %d/%d renderings identical to transformers\n", passed, total);
    assert_int_equal(passed, total);
    assert_true(total >= 100);
}

/* ---- errors ---------------------------------------------------------------- */
static void expect_parse_error(const char *src, txc_status want, const char *substr)
{
    txc_chat_template *t = (txc_chat_template *)1;
    txc_clear_error();
    txc_status st = txc_chat_template_parse(src, strlen(src), &t);
    if (st != want || !strstr(txc_last_error(), substr))
        print_error("template %s: got %s \"%s\", want %s containing \"%s\"\n", src, txc_status_name(st),
                    txc_last_error(), txc_status_name(want), substr);
    assert_int_equal(st, want);
    assert_null(t);
    assert_non_null(strstr(txc_last_error(), substr));
}

static void expect_render_error(const char *src, txc_status want, const char *substr)
{
    txc_chat_template *t = NULL;
    txc_clear_error();
    txc_status st = txc_chat_template_parse(src, strlen(src), &t);
    if (st)
        print_error("template %s: %s\n", src, txc_last_error());
    assert_int_equal(st, TXC_OK);
    txc_chat_message m = {"user", "hi"};
    char *out = (char *)1;
    size_t len = 7;
    txc_clear_error();
    st = txc_chat_template_render(t, &m, 1, false, &out, &len);
    if (st != want || !strstr(txc_last_error(), substr))
        print_error("template %s: got %s \"%s\", want %s containing \"%s\"\n", src, txc_status_name(st),
                    txc_last_error(), txc_status_name(want), substr);
    assert_int_equal(st, want);
    assert_null(out);
    assert_int_equal(len, 0);
    assert_non_null(strstr(txc_last_error(), substr));
    txc_chat_template_free(t);
}

static char *render1(const char *src, bool gen)
{
    txc_chat_template *t = NULL;
    txc_clear_error();
    txc_status st = txc_chat_template_parse(src, strlen(src), &t);
    if (st)
        print_error("template %s: %s\n", src, txc_last_error());
    assert_int_equal(st, TXC_OK);
    txc_chat_message m[2] = {{"user", "hi"}, {"assistant", NULL}};
    char *out = NULL;
    size_t len = 0;
    st = txc_chat_template_render(t, m, 2, gen, &out, &len);
    if (st)
        print_error("template %s: %s\n", src, txc_last_error());
    assert_int_equal(st, TXC_OK);
    assert_int_equal(strlen(out), len);
    txc_chat_template_free(t);
    return out;
}

/* |float and |int: the filter's optional arguments are read only when
 * given (a read of an unset one was a wild pointer under ASan). */
static void test_number_filters(void **state)
{
    (void)state;
    char *out = render1("{{ '4.5'|float }}|{{ 3|float }}|{{ 4.5|float }}|{{ 'x'|float }}|{{ 'x'|float(2.5) }}|"
                        "{{ '7'|int }}|{{ 4.9|int }}|{{ 'y'|int(3) }}|{% for m in messages %}{{ loop.index|float }}{% endfor %}",
                        false);
    assert_string_equal(out, "4.5|3.0|4.5|0.0|2.5|7|4|3|1.02.0");
    free(out);
}

static void test_syntax_errors(void **state)
{
    (void)state;
    expect_parse_error("line one\n{% if x %}\nno end", TXC_ERR_FORMAT, "endif");
    expect_parse_error("a\nb\n{{ x + }}", TXC_ERR_FORMAT, "line 3");
    expect_parse_error("{{ x ", TXC_ERR_FORMAT, "line 1");
    expect_parse_error("ok\n{% for x in y %}", TXC_ERR_FORMAT, "endfor");
    expect_parse_error("{% endif %}", TXC_ERR_FORMAT, "unexpected tag 'endif'");
    expect_parse_error("{% if a %}{% endfor %}", TXC_ERR_FORMAT, "endfor");
    expect_parse_error("\n\n{% frobnicate %}", TXC_ERR_FORMAT, "line 3: Encountered unknown tag 'frobnicate'");
    expect_parse_error("{# never closed", TXC_ERR_FORMAT, "comment");
    expect_parse_error("{{ 'unterminated }}", TXC_ERR_FORMAT, "unterminated string");
    expect_parse_error("{{ a ) }}", TXC_ERR_FORMAT, "unexpected ')'");
    expect_parse_error("{{ a $ b }}", TXC_ERR_FORMAT, "unexpected char");
    expect_parse_error("{% set %}", TXC_ERR_FORMAT, "expected a name");
    expect_parse_error("{{ }}", TXC_ERR_FORMAT, "expected an expression");
    expect_parse_error("{{ x is }}", TXC_ERR_FORMAT, "test name");
    expect_parse_error("{% macro m(a=1, b) %}{% endmacro %}", TXC_ERR_FORMAT, "non-default");
    expect_parse_error("{{ '\\x4' }}", TXC_ERR_FORMAT, "escape");
}

static void test_unsupported(void **state)
{
    (void)state;
    expect_parse_error("{{ x | frobnicate }}", TXC_ERR_UNSUPPORTED, "filter 'frobnicate' is not supported");
    expect_parse_error("\n{{ x is frobnicated }}", TXC_ERR_UNSUPPORTED, "line 2: test 'frobnicated'");
    expect_parse_error("{% include 'x.j2' %}", TXC_ERR_UNSUPPORTED, "include");
    expect_parse_error("{% extends 'x.j2' %}", TXC_ERR_UNSUPPORTED, "extends");
    expect_parse_error("{% call m() %}{% endcall %}", TXC_ERR_UNSUPPORTED, "call");
    expect_parse_error("{% macro m() %}{{ varargs }}{% endmacro %}", TXC_ERR_UNSUPPORTED, "varargs");
    expect_parse_error("{% macro m() %}{{ caller() }}{% endmacro %}", TXC_ERR_UNSUPPORTED, "caller");
    expect_parse_error("{% with a = 1 %}", TXC_ERR_FORMAT, "endwith");
    expect_parse_error("{% raw %}{{ x }}{% endraw %}", TXC_ERR_UNSUPPORTED, "raw");
    expect_parse_error("{% for x in y recursive %}{% endfor %}", TXC_ERR_UNSUPPORTED, "recursive");
    expect_parse_error("{{ f(*args) }}", TXC_ERR_UNSUPPORTED, "*args");
    expect_render_error("{{ 'a'.zfill(3) }}", TXC_ERR_UNSUPPORTED, "zfill");
    expect_render_error("{{ 'a %s' % 1 }}", TXC_ERR_UNSUPPORTED, "formatting");
    expect_render_error("{{ messages.append(1) }}", TXC_ERR_UNSUPPORTED, "append");
    expect_render_error("{{ 9223372036854775807 + 1 }}", TXC_ERR_UNSUPPORTED, "overflow");
    /* results past 64 bits (Python's are exact): a clear error, never a wrapped number */
    expect_render_error("{{ 9223372036854775808 }}", TXC_ERR_UNSUPPORTED, "larger than 64 bits");
    expect_render_error("{{ (9223372036854775808) - 1 }}", TXC_ERR_UNSUPPORTED, "larger than 64 bits");
    expect_render_error("{{ messages.9223372036854775808 }}", TXC_ERR_UNSUPPORTED, "larger than 64 bits");
    expect_render_error("{{ --9223372036854775808 }}", TXC_ERR_UNSUPPORTED, "overflow");
    expect_render_error("{{ -9223372036854775808 // -1 }}", TXC_ERR_UNSUPPORTED, "overflow");
    expect_render_error("{{ -9223372036854775808 * -1 }}", TXC_ERR_UNSUPPORTED, "overflow");
    expect_render_error("{{ -9223372036854775808 - 1 }}", TXC_ERR_UNSUPPORTED, "overflow");
    expect_render_error("{{ -9223372036854775808 | abs }}", TXC_ERR_UNSUPPORTED, "overflow");
    expect_render_error("{{ 3 ** 40 }}", TXC_ERR_UNSUPPORTED, "overflow");
    expect_parse_error("{{ 18446744073709551616 }}", TXC_ERR_UNSUPPORTED, "larger than 64 bits");
    /* float powers as Python's: errors where it raises, no complex numbers */
    expect_render_error("{{ 0 ** -1 }}", TXC_ERR_INVALID, "negative power");
    expect_render_error("{{ 0.0 ** -2.5 }}", TXC_ERR_INVALID, "negative power");
    expect_render_error("{{ 2 ** 1024.0 }}", TXC_ERR_INVALID, "out of range");
    expect_render_error("{{ (-8) ** 0.5 }}", TXC_ERR_UNSUPPORTED, "complex");
    expect_render_error("{{ ('<' | safe) + 'x' }}", TXC_ERR_UNSUPPORTED, "Markup");
    expect_parse_error("{{ x | wordcount }}", TXC_ERR_UNSUPPORTED, "wordcount");
    expect_render_error("{{ joiner() }}", TXC_ERR_UNSUPPORTED, "joiner");
}

static void test_render_errors(void **state)
{
    (void)state;
    expect_render_error("{{ raise_exception('Only user and assistant roles are supported!') }}", TXC_ERR_INVALID,
                        "Only user and assistant roles are supported!");
    assert_string_equal(txc_last_error(), "Only user and assistant roles are supported!");
    expect_render_error("\n{{ nope.attr }}", TXC_ERR_INVALID, "line 2: 'nope' is undefined");
    expect_render_error("{{ messages[0].missing.x }}", TXC_ERR_INVALID, "has no attribute 'missing'");
    expect_render_error("{{ 1 + 'a' }}", TXC_ERR_INVALID, "unsupported operand");
    expect_render_error("{{ 1 // 0 }}", TXC_ERR_INVALID, "by zero");
    expect_render_error("{{ 'a' < 1 }}", TXC_ERR_INVALID, "not supported between");
    expect_render_error("{% for a, b in [1] %}{% endfor %}", TXC_ERR_INVALID, "not iterable");
    expect_render_error("{% set x = 1 %}{% set x.y = 2 %}", TXC_ERR_INVALID, "non-namespace");
    expect_render_error("{% set ns = namespace() %}{% set ns._x = 2 %}", TXC_ERR_INVALID, "underscore");
    expect_render_error("{{ range(200000) }}", TXC_ERR_INVALID, "MAX_RANGE");
    expect_render_error("{{ 1 | tojson }}{{ nope | tojson }}", TXC_ERR_INVALID, "not JSON serializable");
    /* guards: recursion and output size */
    expect_render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", TXC_ERR_CAPACITY, "deeper than");
    expect_render_error("{% for i in range(100000) %}{% for j in range(100000) %}xxxxxxxxxxxxxxxx"
                        "{% endfor %}{% endfor %}",
                        TXC_ERR_CAPACITY, "MiB");
    expect_render_error("{{ 'x' * 100000000000 }}", TXC_ERR_CAPACITY, "MiB");
    /* a deeply nested template is refused while parsing, not by the C stack */
    size_t depth = 5000;
    char *deep = malloc(depth * 2 + 16);
    assert_non_null(deep);
    size_t k = 0;
    k += (size_t)sprintf(deep + k, "{{ ");
    for (size_t i = 0; i < depth; i++)
        deep[k++] = '(';
    deep[k++] = '1';
    for (size_t i = 0; i < depth; i++)
        deep[k++] = ')';
    k += (size_t)sprintf(deep + k, " }}");
    expect_parse_error(deep, TXC_ERR_UNSUPPORTED, "nesting deeper");
    /* so is a long left-nested chain (a + a + ..., a.b.c..., x|f|g...) */
    static const char *const links[] = {"1 + ", "x.", "|trim", "not ", "1 if x else ", "[0]", "y or "};
    for (size_t q = 0; q < sizeof links / sizeof *links; q++) {
        size_t ln = strlen(links[q]);
        bool suffix = links[q][0] == '|' || links[q][0] == '[';
        char *chain = malloc(depth * ln + 32);
        assert_non_null(chain);
        k = (size_t)sprintf(chain, suffix ? "{{ y" : "{{ ");
        for (size_t i = 0; i < depth; i++, k += ln)
            memcpy(chain + k, links[q], ln);
        sprintf(chain + k, suffix ? " }}" : "y }}");
        expect_parse_error(chain, TXC_ERR_UNSUPPORTED, "nesting deeper");
        free(chain);
    }
    free(deep);
    char *elifs = malloc(depth * 20 + 64);
    assert_non_null(elifs);
    k = (size_t)sprintf(elifs, "{%% if x %%}");
    for (size_t i = 0; i < depth; i++)
        k += (size_t)sprintf(elifs + k, "{%% elif x %%}");
    sprintf(elifs + k, "{%% endif %%}");
    expect_parse_error(elifs, TXC_ERR_UNSUPPORTED, "nesting deeper");
    free(elifs);
    /* values that contain themselves, or nest deeper than the guard */
    expect_render_error("{% set ns = namespace(a=1) %}{% set ns.self = [ns] %}{{ ns }}", TXC_ERR_CAPACITY, "nested deeper");
    expect_render_error("{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}"
                        "{{ ns.x == ns.x }}",
                        TXC_ERR_CAPACITY, "nested deeper");
    expect_render_error("{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}"
                        "{{ ns.x | tojson }}",
                        TXC_ERR_CAPACITY, "nested deeper");
}

static void test_api(void **state)
{
    (void)state;
    txc_chat_template *t = NULL;
    const char *src = "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}"
                      "{% if add_generation_prompt %}GEN{% endif %}{{ eos_token is defined }}{{ date_string }}";
    assert_int_equal(txc_chat_template_parse(src, strlen(src), &t), TXC_OK);
    assert_int_equal(txc_chat_template_set_token(t, "bos_token", "<s>"), TXC_OK);
    assert_int_equal(txc_chat_template_set_token(t, "frob_token", "x"), TXC_ERR_INVALID);
    assert_int_equal(txc_chat_template_set_var_json(t, "date_string", "\"26 Jul 2024\""), TXC_OK);
    assert_int_equal(txc_chat_template_set_var_json(t, "messages", "[]"), TXC_ERR_INVALID);
    assert_int_equal(txc_chat_template_set_var_json(t, "bad name", "1"), TXC_ERR_INVALID);
    assert_int_equal(txc_chat_template_set_var_json(t, "x", "{not json"), TXC_ERR_INVALID);
    txc_chat_message m[2] = {{"user", "a"}, {"assistant", "b"}};
    char *out = NULL;
    size_t len = 0;
    assert_int_equal(txc_chat_template_render(t, m, 2, true, &out, &len), TXC_OK);
    assert_string_equal(out, "<s>[user:a][assistant:b]GENFalse26 Jul 2024");
    free(out);
    assert_int_equal(txc_chat_template_set_token(t, "bos_token", NULL), TXC_OK);
    assert_int_equal(txc_chat_template_set_token(t, "eos_token", "</s>"), TXC_OK);
    assert_int_equal(txc_chat_template_set_var_json(t, "date_string", NULL), TXC_OK);
    assert_int_equal(txc_chat_template_render(t, m, 1, false, &out, &len), TXC_OK);
    assert_string_equal(out, "[user:a]True");
    free(out);
    out = (char *)1;
    assert_int_equal(txc_chat_template_render(t, m, 0, false, &out, &len), TXC_ERR_INVALID);
    assert_null(out);
    txc_chat_message bad = {NULL, "x"};
    assert_int_equal(txc_chat_template_render(t, &bad, 1, false, &out, &len), TXC_ERR_INVALID);
    txc_chat_template_free(t);
    txc_chat_template_free(NULL);
    /* content NULL: the key is absent, as transformers drops None values */
    char *r = render1("{% for m in messages %}{{ m.content is defined }}{% endfor %}", false);
    assert_string_equal(r, "TrueFalse");
    free(r);
    /* strftime_now renders the local date (not compared with a fixture: it is the clock) */
    r = render1("{{ strftime_now('%Y') | length }}", false);
    assert_string_equal(r, "4");
    free(r);
}

/* |int follows jinja2 3.1 do_int: Python's int(str, base) (underscores
 * only between digits, surrounding whitespace, a sign, a 0x/0o/0b prefix
 * only when the base is 16/8/2 or 0, other Unicode digits), then
 * int(float(str)), then the default; |float follows Python's float(str).
 * Each expected string is jinja2 3.1.6's rendering. */
static void test_int_filter(void **state)
{
    (void)state;
    char *out = render1(
        "{{ '1_000'|int }}|{{ ' 42 '|int }}|{{ '+7'|int }}|{{ '0x1A'|int }}|{{ '0x1A'|int(0, 16) }}|"
        "{{ '0x_1a'|int(base=16) }}|{{ '3.9'|int }}|{{ '1e3'|int }}|{{ 'x'|int(5) }}|{{ '1__000'|int(9) }}|"
        "{{ '_1'|int(9) }}|{{ '1_'|int(9) }}|{{ '-3.9'|int }}|{{ '0b101'|int(0, 2) }}|{{ '0o17'|int(0, 0) }}|"
        "{{ '010'|int(0, 0) }}|{{ 'z'|int(0, 36) }}|{{ '12'|int(0, 1) }}|{{ '1_0.5'|int }}|{{ 'inf'|int(7) }}|"
        "{{ 'nan'|int(7) }}|{{ '- 5'|int(9) }}|{{ '\x0b\t8\r\n'|int }}|{{ '\x1c" "5'|int(9) }}|"
        "{{ '\xc2\xa0" "42\xe2\x80\x83'|int }}|{{ '\xd9\xa3\xef\xbc\x97'|int }}|{{ none|int(4) }}|{{ true|int }}|"
        "{{ [1]|int(4) }}|{{ ''|int(6) }}|{{ '.5'|float }}|{{ '0x1A'|float }}|{{ '1_0.5'|float }}|"
        "{{ '1._5'|float(2) }}|{{ '1_e5'|float(2) }}|{{ '1e1_0'|float }}|{{ ' -Infinity '|float }}|{{ '5.'|float }}",
        false);
    assert_string_equal(out, "1000|42|7|0|26|26|3|1000|5|9|9|9|-3|5|15|10|35|12|10|7|7|9|8|9|42|37|4|1|4|6|0.5|0.0|"
                             "10.5|2|2|10000000000.0|-inf|5.0");
    free(out);
    /* Undefined.__int__ raises; int(inf) is an OverflowError do_int lets through;
     * Python's unbounded ints are outside txc's int64 */
    expect_render_error("{{ nothing|int }}", TXC_ERR_INVALID, "'nothing' is undefined");
    expect_render_error("{{ nothing|float }}", TXC_ERR_INVALID, "'nothing' is undefined");
    expect_render_error("{{ ('1e400'|float)|int }}", TXC_ERR_INVALID, "cannot convert float infinity to integer");
    expect_render_error("{{ '9223372036854775808'|int }}", TXC_ERR_UNSUPPORTED, "64-bit integer range");
    expect_render_error("{{ '1e19'|int }}", TXC_ERR_UNSUPPORTED, "64-bit integer range");
    out = render1("{{ '9223372036854775807'|int }}|{{ '-9223372036854775808'|int }}", false);
    assert_string_equal(out, "9223372036854775807|-9223372036854775808");
    free(out);
}

/* range() prints as Python's repr(range) (jinja2 3.1.6's strings), iterates,
 * indexes and slices (to a range) as one; tojson, + and * refuse it. */
static void test_range_repr(void **state)
{
    (void)state;
    char *out = render1("{{ range(3) }}|{{ range(1, 5, 2) }}|{{ range(0) }}|{{ range(5, 1, -2) }}|{{ range(3)|list }}|"
                        "{{ range(3)|string }}|{{ [range(2)] }}|{{ range(3)|length }}|"
                        "{% for i in range(1, 5, 2) %}{{ i }},{% endfor %}|{{ range(10)[2:8:3] }}|{{ range(10)[::-1] }}|"
                        "{{ range(3) == [0, 1, 2] }}|{{ range(3) == range(0, 3, 1) }}|{{ range(3)[1] }}|"
                        "{{ range(3)|join('-') }}|{{ range(3)|last }}|{{ 1 in range(3) }}|{{ range(0, 10, 3)[1:] }}",
                        false);
    assert_string_equal(out, "range(0, 3)|range(1, 5, 2)|range(0, 0)|range(5, 1, -2)|[0, 1, 2]|range(0, 3)|"
                             "[range(0, 2)]|3|1,3,|range(2, 8, 3)|range(9, -1, -1)|False|True|1|0-1-2|2|True|"
                             "range(3, 12, 3)");
    free(out);
    expect_render_error("{{ range(3)|tojson }}", TXC_ERR_INVALID, "Object of type range is not JSON serializable");
    expect_render_error("{{ range(3) + [1] }}", TXC_ERR_INVALID, "range");
    expect_render_error("{{ range(2) * 2 }}", TXC_ERR_INVALID, "range");
    expect_render_error("{{ range(2) < range(3) }}", TXC_ERR_INVALID, "between instances of 'range' and 'range'");
}

/* A special token named in neither tokenizer_config.json nor
 * special_tokens_map.json: what transformers 5.24's apply_chat_template
 * renders (its tokenizer class's __init__ default, or undefined), each
 * expected string checked with AutoTokenizer on such a folder. */
static char *load_render(const char *dir, const char *cfg)
{
    assert_int_equal(tu_write_file(tu_path("%s/tokenizer_config.json", dir), cfg, strlen(cfg)), 0);
    txc_chat_template *t = NULL;
    txc_clear_error();
    txc_status st = txc_chat_template_load(dir, &t);
    if (st)
        print_error("load %s: %s\n", cfg, txc_last_error());
    assert_int_equal(st, TXC_OK);
    txc_chat_message m = {"user", "x"};
    char *out = NULL;
    size_t len;
    assert_int_equal(txc_chat_template_render(t, &m, 1, false, &out, &len), TXC_OK);
    txc_chat_template_free(t);
    return out;
}

static void test_missing_special_tokens(void **state)
{
    (void)state;
    static const struct {
        const char *cls_and_tokens, *want;
    } cases[] = {
        {"\"tokenizer_class\": \"LlamaTokenizerFast\"", "[<s>|</s>|<unk>||True]"},
        {"\"tokenizer_class\": \"GPT2Tokenizer\", \"bos_token\": null", "[|<|endoftext|>|<|endoftext|>||False]"},
        {"\"tokenizer_class\": \"Qwen2TokenizerFast\"", "[|<|endoftext|>|<|endoftext|>|<|endoftext|>|False]"},
        {"\"tokenizer_class\": \"GemmaTokenizer\", \"eos_token\": \"<end_of_turn>\"", "[<bos>|<end_of_turn>|<unk>|<pad>|True]"},
        {"\"tokenizer_class\": \"PreTrainedTokenizerFast\"", "[||||False]"},
        {"\"tokenizer_class\": \"TokenizersBackend\"", "[||||False]"},
        {"\"add_prefix_space\": false", "[||||False]"},
    };
    char *dir = tu_mkdtemp();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char cfg[512];
        snprintf(cfg, sizeof cfg,
                 "{%s, \"chat_template\": \"[{{ bos_token }}|{{ eos_token }}|{{ unk_token }}|{{ pad_token }}|"
                 "{{ bos_token is defined }}]\"}",
                 cases[i].cls_and_tokens);
        char *out = load_render(dir, cfg);
        if (strcmp(out, cases[i].want))
            print_error("%s: got %s, want %s\n", cases[i].cls_and_tokens, out, cases[i].want);
        assert_string_equal(out, cases[i].want);
        free(out);
    }
    /* special_tokens_map.json: read only without added_tokens_decoder, then
     * it replaces the config's tokens, and null there suppresses the default */
    const char *stm = "{\"bos_token\": \"<B>\", \"eos_token\": null, \"unk_token\": {\"content\": \"<U>\"}}";
    assert_int_equal(tu_write_file(tu_path("%s/special_tokens_map.json", dir), stm, strlen(stm)), 0);
    char *out = load_render(dir, "{\"tokenizer_class\": \"TokenizersBackend\", \"bos_token\": \"<A>\", "
                                 "\"eos_token\": \"<E>\", \"chat_template\": "
                                 "\"[{{ bos_token }}|{{ eos_token }}|{{ unk_token }}|{{ pad_token }}]\"}");
    assert_string_equal(out, "[<B>||<U>|]");
    free(out);
    out = load_render(dir, "{\"tokenizer_class\": \"TokenizersBackend\", \"bos_token\": \"<A>\", "
                           "\"eos_token\": \"<E>\", \"added_tokens_decoder\": {}, \"chat_template\": "
                           "\"[{{ bos_token }}|{{ eos_token }}|{{ unk_token }}|{{ pad_token }}]\"}");
    assert_string_equal(out, "[<A>|<E>||]");
    free(out);
    const char *stm2 = "{\"eos_token\": null, \"pad_token\": \"<P>\"}";
    assert_int_equal(tu_write_file(tu_path("%s/special_tokens_map.json", dir), stm2, strlen(stm2)), 0);
    out = load_render(dir, "{\"tokenizer_class\": \"GPT2Tokenizer\", \"bos_token\": \"<A>\", \"chat_template\": "
                           "\"[{{ bos_token }}|{{ eos_token }}|{{ unk_token }}|{{ pad_token }}]\"}");
    assert_string_equal(out, "[<A>||<|endoftext|>|<P>]");
    free(out);
    remove(tu_path("%s/special_tokens_map.json", dir));
    /* a LlamaTokenizer whose tokenizer.json is ByteLevel loads as TokenizersBackend: no defaults */
    const char *tj = "{\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false}}";
    assert_int_equal(tu_write_file(tu_path("%s/tokenizer.json", dir), tj, strlen(tj)), 0);
    out = load_render(dir, "{\"tokenizer_class\": \"LlamaTokenizer\", \"chat_template\": \"[{{ bos_token }}|{{ eos_token }}]\"}");
    assert_string_equal(out, "[|]");
    free(out);
    tu_rm_rf(dir);
}

static void test_load_folders(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    txc_chat_template *t = NULL;
    /* no tokenizer_config.json at all */
    txc_clear_error();
    assert_int_equal(txc_chat_template_load(dir, &t), TXC_ERR_UNSUPPORTED);
    assert_non_null(strstr(txc_last_error(), "has no chat_template in tokenizer_config.json or chat_template.jinja"));
    /* the list form with a "default" entry and AddedToken objects */
    const char *cfg = "{\"bos_token\": {\"__type\": \"AddedToken\", \"content\": \"<B>\"}, \"eos_token\": null,"
                      " \"chat_template\": [{\"name\": \"tool_use\", \"template\": \"TOOLS\"},"
                      " {\"name\": \"default\", \"template\": \"{{ bos_token }}{{ eos_token }}D\\n\"}]}";
    assert_int_equal(tu_write_file(tu_path("%s/tokenizer_config.json", dir), cfg, strlen(cfg)), 0);
    const char *stm = "{\"eos_token\": \"<E>\", \"unk_token\": {\"content\": \"<U>\"}}";
    assert_int_equal(tu_write_file(tu_path("%s/special_tokens_map.json", dir), stm, strlen(stm)), 0);
    assert_int_equal(txc_chat_template_load(dir, &t), TXC_OK);
    txc_chat_message m = {"user", "x"};
    char *out = NULL;
    size_t len;
    assert_int_equal(txc_chat_template_render(t, &m, 1, false, &out, &len), TXC_OK);
    assert_string_equal(out, "<B><E>D");
    free(out);
    txc_chat_template_free(t);
    /* chat_template.jinja takes priority */
    const char *jinja = "J{{ messages[0].content }}{{ unk_token }}\n";
    assert_int_equal(tu_write_file(tu_path("%s/chat_template.jinja", dir), jinja, strlen(jinja)), 0);
    assert_int_equal(txc_chat_template_load(dir, &t), TXC_OK);
    assert_int_equal(txc_chat_template_render(t, &m, 1, false, &out, &len), TXC_OK);
    assert_string_equal(out, "Jx<U>");
    free(out);
    txc_chat_template_free(t);
    /* a broken template in the .jinja: the syntax error */
    const char *broken = "{% if %}";
    assert_int_equal(tu_write_file(tu_path("%s/chat_template.jinja", dir), broken, strlen(broken)), 0);
    txc_clear_error();
    assert_int_equal(txc_chat_template_load(dir, &t), TXC_ERR_FORMAT);
    assert_null(t);
    /* a malformed config */
    remove(tu_path("%s/chat_template.jinja", dir));
    assert_int_equal(tu_write_file(tu_path("%s/tokenizer_config.json", dir), "{oops", 5), 0);
    assert_int_equal(txc_chat_template_load(dir, &t), TXC_ERR_FORMAT);
    const char *wrong = "{\"chat_template\": 5}";
    assert_int_equal(tu_write_file(tu_path("%s/tokenizer_config.json", dir), wrong, strlen(wrong)), 0);
    txc_clear_error();
    assert_int_equal(txc_chat_template_load(dir, &t), TXC_ERR_FORMAT);
    assert_non_null(strstr(txc_last_error(), "a number"));
    const char *nodefault = "{\"chat_template\": [{\"name\": \"rag\", \"template\": \"x\"}]}";
    assert_int_equal(tu_write_file(tu_path("%s/tokenizer_config.json", dir), nodefault, strlen(nodefault)), 0);
    assert_int_equal(txc_chat_template_load(dir, &t), TXC_ERR_UNSUPPORTED);
    tu_rm_rf(dir);
    /* missing folder */
    txc_clear_error();
    assert_int_equal(txc_chat_template_load("/nonexistent/dir/for/txc", &t), TXC_ERR_UNSUPPORTED);
    assert_int_equal(txc_chat_template_load(NULL, &t), TXC_ERR_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_templates), cmocka_unit_test(test_jinja_subset),
        cmocka_unit_test(test_extra_templates),
        cmocka_unit_test(test_syntax_errors),  cmocka_unit_test(test_unsupported),
        cmocka_unit_test(test_render_errors),  cmocka_unit_test(test_number_filters), cmocka_unit_test(test_api),
        cmocka_unit_test(test_load_folders), cmocka_unit_test(test_int_filter),
        cmocka_unit_test(test_range_repr), cmocka_unit_test(test_missing_special_tokens),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
