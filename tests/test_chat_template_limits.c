/* Chat templates at their limits: integer edges of slices and ranges,
 * |unique and |sort on mixed and 100k-item lists (against jinja2:
 * tests/fixtures/chat_template_limits.json, scripts/gen_chat_template_limit_fixtures.py),
 * and the step budget that ends a render that would not end. */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "txc/chat_template.h"

/* CPU time of the process: the bounds below hold on a loaded machine too. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static txc_status render(const char *src, uint64_t max_steps, char **out)
{
    txc_chat_template *t = NULL;
    txc_clear_error();
    txc_status st = txc_chat_template_parse(src, strlen(src), &t);
    if (st)
        print_error("template %s: %s\n", src, txc_last_error());
    assert_int_equal(st, TXC_OK);
    assert_int_equal(txc_chat_template_set_max_steps(t, max_steps), TXC_OK);
    txc_chat_message m = {"user", "hi"};
    size_t len = 0;
    txc_clear_error();
    st = txc_chat_template_render(t, &m, 1, false, out, &len);
    txc_chat_template_free(t);
    return st;
}

static void test_jinja_cases(void **state)
{
    (void)state;
    cJSON *fx = tu_load_json("tests/fixtures/chat_template_limits.json");
    int total = 0, passed = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(fx, "cases")) {
        total++;
        const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
        const char *src = cJSON_GetObjectItem(c, "template")->valuestring;
        const cJSON *exp = cJSON_GetObjectItem(c, "expected");
        char *out = NULL;
        double t0 = cpu_s();
        txc_status st = render(src, 0, &out);
        double dt = cpu_s() - t0;
        if (dt > 5.0) {
            print_error("%s: %.1f s of CPU\n", name, dt);
        } else if (cJSON_IsString(exp)) {
            if (st != TXC_OK)
                print_error("%s: %s %s\n", name, txc_status_name(st), txc_last_error());
            else if (strcmp(out, exp->valuestring) != 0)
                print_error("%s: rendered '%s', jinja2 '%s'\n", name, out, exp->valuestring);
            else
                passed++;
        } else { /* jinja2 raised (TypeError, OverflowError): an error of the render */
            if (st != TXC_ERR_INVALID || out)
                print_error("%s: got %s '%s', want TXC_ERR_INVALID (%s: %s)\n", name, txc_status_name(st),
                            txc_last_error(), cJSON_GetObjectItem(c, "error")->valuestring,
                            cJSON_GetObjectItem(c, "message")->valuestring);
            else
                passed++;
        }
        free(out);
    }
    print_message("%d/%d cases as jinja2\n", passed, total);
    assert_int_equal(passed, total);
    cJSON_Delete(fx);
}

/* A render that would take hours ends at its step budget with an error that
 * says so; under the budget it renders. */
static void test_step_budget(void **state)
{
    (void)state;
    const char *forever = "{% for i in range(100000) %}{% for j in range(100000) %}{{ '' }}{% endfor %}{% endfor %}";
    char *out = (char *)1;
    assert_int_equal(render(forever, 100000, &out), TXC_ERR_CAPACITY);
    assert_null(out);
    assert_non_null(strstr(txc_last_error(), "chat template line 1: the render took more than 100000 steps"));
    /* 10 x 1000 items, ~4 steps each: within 100000, not within 10000 */
    const char *small = "{% for i in range(10) %}{% for j in range(1000) %}{{ '' }}{% endfor %}{% endfor %}ok";
    assert_int_equal(render(small, 100000, &out), TXC_OK);
    assert_string_equal(out, "ok");
    free(out);
    assert_int_equal(render(small, 10000, &out), TXC_ERR_CAPACITY);
    /* comparisons count: an insertion sort's n^2 would not fit */
    assert_int_equal(render("{{ (range(100000) | list | sort)[0] }}", 3000000, &out), TXC_OK);
    assert_string_equal(out, "0");
    free(out);
    /* the default budget ends within seconds a render that allocates little
     * (so the memory limit does not end it): 10^5 comparisons of two
     * 10^5-item lists, 10^10 steps */
    const char *compares = "{% set a = range(100000) | list %}{% for i in range(100000) %}{% if a == a %}{% endif %}"
                           "{% endfor %}";
    double t0 = cpu_s();
    assert_int_equal(render(compares, 0, &out), TXC_ERR_CAPACITY);
    double dt = cpu_s() - t0;
    assert_non_null(strstr(txc_last_error(), "the render took more than 100000000 steps"));
    print_message("default budget (%llu steps): stopped after %.2f s of CPU\n",
                  (unsigned long long)TXC_CHAT_TEMPLATE_MAX_STEPS, dt);
    assert_true(dt < 60.0);
    assert_int_equal(txc_chat_template_set_max_steps(NULL, 1), TXC_ERR_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jinja_cases),
        cmocka_unit_test(test_step_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
