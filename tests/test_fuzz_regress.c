/* Inputs the fuzz targets (fuzz/, see fuzz/README.md) found, each kept as a
 * regression test of the parser it broke, and the from-memory entry points
 * the targets use (txc_tokenizer_parse). */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "txc/tokenizer.h"

/* txc_tokenizer_parse gives what txc_tokenizer_load gives for the same
 * bytes, and its errors. */
static void test_tokenizer_parse(void **state)
{
    (void)state;
    static const char json[] = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\"]}}";
    txc_tokenizer *t = NULL;
    assert_int_equal(txc_tokenizer_parse(json, strlen(json), &t), TXC_OK);
    int32_t *ids;
    size_t n;
    assert_int_equal(txc_tokenizer_encode(t, "abab", 4, false, &ids, &n), TXC_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], 2);
    free(ids);
    assert_int_equal(txc_tokenizer_vocab_size(t), 3);
    txc_tokenizer_free(t);

    /* not NUL-terminated: only len bytes are read */
    char *copy = malloc(strlen(json) + 5);
    memcpy(copy, json, strlen(json));
    memcpy(copy + strlen(json), "junk", 4);
    assert_int_equal(txc_tokenizer_parse(copy, strlen(json), &t), TXC_OK);
    txc_tokenizer_free(t);
    txc_clear_error(); /* the first error of the thread is the one kept */
    assert_int_equal(txc_tokenizer_parse(copy, strlen(json) - 1, &t), TXC_ERR_FORMAT);
    assert_null(t);
    assert_non_null(strstr(txc_last_error(), "tokenizer.json is not valid JSON"));
    free(copy);

    assert_int_equal(txc_tokenizer_parse("", 0, &t), TXC_ERR_FORMAT);
    assert_int_equal(txc_tokenizer_parse(NULL, 0, &t), TXC_ERR_FORMAT);
    assert_int_equal(txc_tokenizer_parse(NULL, 3, &t), TXC_ERR_INVALID);
    assert_int_equal(txc_tokenizer_parse(json, strlen(json), NULL), TXC_ERR_INVALID);
    txc_clear_error();
    assert_int_equal(txc_tokenizer_parse("[1]", 3, &t), TXC_ERR_FORMAT);
    assert_non_null(strstr(txc_last_error(), "top level is not an object"));
}

/* fuzz_tokenizer_load: vocab entries sharing an id make the entry count
 * (where added-token numbering starts, the crate's get_vocab_size) larger
 * than max id + 1; the id -> added token table was sized by the latter and
 * the fourth added token here was written past its end (ASan:
 * heap-buffer-overflow in load_added_tokens). */
static void test_added_tokens_after_shared_ids(void **state)
{
    (void)state;
    static const char json[] =
        "{\"added_tokens\":[{\"content\":\"X\",\"special\":true},{\"content\":\"Y\"},{\"content\":\"Z\"},"
        "{\"content\":\"W\"}],\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0,\"c\":0,\"d\":0,\"e\":0},"
        "\"merges\":[]}}";
    txc_tokenizer *t = NULL;
    assert_int_equal(txc_tokenizer_parse(json, strlen(json), &t), TXC_OK);
    assert_int_equal(txc_tokenizer_token_to_id(t, "X"), 5); /* numbered from the 5 entries */
    assert_int_equal(txc_tokenizer_token_to_id(t, "W"), 8);
    assert_int_equal(txc_tokenizer_vocab_size(t), 9);
    int32_t ids[2] = {8, 6};
    char *text;
    size_t len;
    assert_int_equal(txc_tokenizer_decode(t, ids, 2, false, &text, &len), TXC_OK);
    assert_string_equal(text, "W Y"); /* no decoder: tokens joined by " " */
    free(text);
    txc_tokenizer_free(t);
}

/* fuzz_tokenizer_load: a vocab key holding a raw byte that is not UTF-8
 * ("\xA4") was accepted (cJSON passes raw bytes), and the streaming
 * detokenizer's text then differed from decode()'s. JSON is UTF-8 and the
 * crate (serde_json) refuses such a file: so does txc. */
static void test_tokenizer_not_utf8(void **state)
{
    (void)state;
    static const char json[] = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"\xA4\":1},\"merges\":[]}}";
    txc_tokenizer *t = NULL;
    txc_clear_error();
    assert_int_equal(txc_tokenizer_parse(json, strlen(json), &t), TXC_ERR_FORMAT);
    assert_null(t);
    assert_string_equal(txc_last_error(), "tokenizer: tokenizer.json is not valid UTF-8");
    /* the same bytes escaped are a valid file: "\u00a4" is U+00A4 */
    static const char ok[] = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"\\u00a4\":1},\"merges\":[]}}";
    assert_int_equal(txc_tokenizer_parse(ok, strlen(ok), &t), TXC_OK);
    assert_int_equal(txc_tokenizer_token_to_id(t, "\xC2\xA4"), 1);
    txc_tokenizer_free(t);
}

/* fuzz_tokenizer_load: a Digits pre-tokenizer whose individual_digits is not
 * a boolean: the error was returned, but the uninitialised flag was read
 * first (UBSan: load of value 144, not a valid value for type 'bool'). */
static void test_digits_flag_not_bool(void **state)
{
    (void)state;
    static const char json[] = "{\"pre_tokenizer\":{\"type\":\"Digits\",\"individual_digits\":7},"
                               "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}";
    txc_tokenizer *t = NULL;
    txc_clear_error();
    assert_int_equal(txc_tokenizer_parse(json, strlen(json), &t), TXC_ERR_FORMAT);
    assert_null(t);
    assert_non_null(strstr(txc_last_error(), "individual_digits"));
}

/* fuzz_tokenizer_load: TemplateProcessing's "<s>" carried id 1 in a
 * vocabulary of one token; encode with add_special_tokens returned it. */
static void test_post_processor_id_outside_vocab(void **state)
{
    (void)state;
    static const char json[] =
        "{\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\","
        "\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"pair\":[],\"special_tokens\":{\"<s>\":"
        "{\"id\":\"<s>\",\"ids\":[1],\"tokens\":[\"<s>\"]}}},"
        "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}";
    txc_tokenizer *t = NULL;
    txc_clear_error();
    assert_int_equal(txc_tokenizer_parse(json, strlen(json), &t), TXC_ERR_FORMAT);
    assert_null(t);
    assert_non_null(strstr(txc_last_error(), "special token id 1 is outside the vocabulary (size 1)"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokenizer_parse),
        cmocka_unit_test(test_added_tokens_after_shared_ids),
        cmocka_unit_test(test_tokenizer_not_utf8),
        cmocka_unit_test(test_digits_flag_not_bool),
        cmocka_unit_test(test_post_processor_id_outside_vocab),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
