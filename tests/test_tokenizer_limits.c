/* tokenizer.json at its limits: many added tokens (linear-time load), vocab
 * ids far past the vocab (refused before allocating), words none of whose
 * characters is in the vocab (no unk_token), added tokens listed again.
 * Expected ids: tests/fixtures/tokenizer_limits.json, from the `tokenizers`
 * package (scripts/gen_tokenizer_limit_fixtures.py). */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "txc/tokenizer.h"

/* CPU time of the process: the bounds below hold on a loaded machine too. */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Write `json` to a file in `dir` and load it. */
static txc_status load_text(const char *dir, const char *name, const char *json, txc_tokenizer **t)
{
    const char *path = tu_path("%s/%s", dir, name);
    assert_int_equal(tu_write_file(path, json, strlen(json)), 0);
    txc_clear_error();
    return txc_tokenizer_load(path, t);
}

static txc_tokenizer *load_obj(const char *dir, const cJSON *obj)
{
    char *json = cJSON_PrintUnformatted(obj);
    assert_non_null(json);
    txc_tokenizer *t = NULL;
    txc_status st = load_text(dir, "tok.json", json, &t);
    if (st)
        print_error("%s\n", txc_last_error());
    assert_int_equal(st, TXC_OK);
    free(json);
    return t;
}

/* Encode each case (twice: the second from the word cache) and compare. */
static void check_cases(const txc_tokenizer *t, const cJSON *cases, const char *what)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
        const cJSON *want = cJSON_GetObjectItem(c, "ids");
        for (int rep = 0; rep < 2; rep++) {
            int32_t *ids = NULL;
            size_t n = 99;
            txc_clear_error();
            assert_int_equal(txc_tokenizer_encode(t, text, strlen(text), false, &ids, &n), TXC_OK);
            bool same = n == (size_t)cJSON_GetArraySize(want);
            for (size_t i = 0; same && i < n; i++)
                same = ids[i] == cJSON_GetArrayItem(want, (int)i)->valueint;
            if (!same) {
                print_error("%s: '%s': got", what, text);
                for (size_t i = 0; i < n; i++)
                    print_error(" %d", ids[i]);
                print_error("\n");
            }
            assert_true(same);
            free(ids);
        }
    }
}

/* A word none of whose characters is in the vocab, no unk_token: its
 * characters are dropped (an empty word in the cache), as the crate does. */
static void test_fixture_sets(void **state)
{
    (void)state;
    cJSON *fx = tu_load_json("tests/fixtures/tokenizer_limits.json");
    char *dir = tu_mkdtemp();
    const cJSON *set;
    cJSON_ArrayForEach(set, cJSON_GetObjectItem(fx, "sets")) {
        txc_tokenizer *t = load_obj(dir, cJSON_GetObjectItem(set, "tokenizer"));
        check_cases(t, cJSON_GetObjectItem(set, "cases"), cJSON_GetObjectItem(set, "name")->valuestring);
        txc_tokenizer_free(t);
    }
    tu_rm_rf(dir);
    cJSON_Delete(fx);
}

/* 100k added tokens: quadratic before (75 s of CPU); the package loads them
 * in about 1 s. */
static void test_many_added_tokens(void **state)
{
    (void)state;
    cJSON *fx = tu_load_json("tests/fixtures/tokenizer_limits.json");
    cJSON *tok = cJSON_Duplicate(cJSON_GetObjectItem(fx, "tiny"), true);
    const cJSON *many = cJSON_GetObjectItem(fx, "many_added");
    int n = cJSON_GetObjectItem(many, "n_extra")->valueint;
    cJSON *list = cJSON_GetObjectItem(tok, "added_tokens");
    for (int i = 0; i < n; i++) {
        char content[32];
        snprintf(content, sizeof content, "<extra_%d>", i);
        cJSON *a = cJSON_CreateObject();
        cJSON_AddNumberToObject(a, "id", 0);
        cJSON_AddStringToObject(a, "content", content);
        cJSON_AddBoolToObject(a, "single_word", false);
        cJSON_AddBoolToObject(a, "lstrip", false);
        cJSON_AddBoolToObject(a, "rstrip", false);
        cJSON_AddBoolToObject(a, "normalized", i % 2 == 0);
        cJSON_AddBoolToObject(a, "special", i % 3 == 0);
        cJSON_AddItemToArray(list, a);
    }
    char *dir = tu_mkdtemp();
    double t0 = now_s();
    txc_tokenizer *t = load_obj(dir, tok);
    double dt = now_s() - t0;
    print_message("load with %d added tokens: %.3f s of CPU\n", n, dt);
    assert_true(dt < 10.0);
    assert_int_equal(txc_tokenizer_vocab_size(t), 4 + n);
    check_cases(t, cJSON_GetObjectItem(many, "cases"), "many added tokens");
    txc_tokenizer_free(t);
    tu_rm_rf(dir);
    cJSON_Delete(tok);
    cJSON_Delete(fx);
}

/* One id near INT32_MAX: refused before the id tables are allocated (they
 * were 24 GiB); ids with a few holes still load. */
static void test_sparse_vocab_ids(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    txc_tokenizer *t = NULL;
    double t0 = now_s();
    txc_status st = load_text(dir, "far.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":2147483646},\"merges\":[]}}", &t);
    assert_int_equal(st, TXC_ERR_FORMAT);
    assert_null(t);
    assert_true(now_s() - t0 < 1.0);
    assert_non_null(strstr(txc_last_error(), "model.vocab['a'] has id 2147483646"));
    assert_non_null(strstr(txc_last_error(), "holds 1 tokens"));
    /* the bound: 2 x 2 + 65536 */
    st = load_text(dir, "edge.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":65540},\"merges\":[]}}", &t);
    assert_int_equal(st, TXC_ERR_FORMAT);
    assert_non_null(strstr(txc_last_error(), "(65540)"));
    st = load_text(dir, "ok.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":65539},\"merges\":[]}}", &t);
    assert_int_equal(st, TXC_OK);
    assert_int_equal(txc_tokenizer_vocab_size(t), 65540);
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(txc_tokenizer_encode(t, "ba", 2, false, &ids, &n), TXC_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 65539);
    assert_int_equal(ids[1], 0);
    free(ids);
    txc_tokenizer_free(t);
    tu_rm_rf(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_sets),
        cmocka_unit_test(test_many_added_tokens),
        cmocka_unit_test(test_sparse_vocab_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
