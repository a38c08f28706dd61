/* A vocabulary's string -> id map and SentencePiece's merges from the scores
 * (txc/vocab.h, src/tokenizer/vocab.c): lookups by bytes (prefixes, the empty
 * piece, a string twice keeps its first id), and the merges of
 * SentencePieceExtractor.extract: every split at a character boundary into
 * two pieces, by score descending then ids; none inside a UTF-8 character. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "txc/vocab.h"

/* ids: 0 a, 1 b, 2 ab, 3 c, 4 abc, 5 bc, 6 a (again), 7 \xc3, 8 \xa9, 9 é, 10 "" */
static const char *const PIECES[] = {"a", "b", "ab", "c", "abc", "bc", "a", "\xc3", "\xa9", "\xc3\xa9", ""};
#define N_PIECES ((int64_t)(sizeof PIECES / sizeof *PIECES))

static void make_map(txc_vocab_map *m, size_t *lens)
{
    for (int64_t k = 0; k < N_PIECES; k++)
        lens[k] = strlen(PIECES[k]);
    assert_int_equal(txc_vocab_map_init(m, PIECES, lens, N_PIECES), TXC_OK);
}

static void test_map(void **state)
{
    (void)state;
    size_t lens[N_PIECES];
    txc_vocab_map m;
    make_map(&m, lens);
    assert_int_equal(txc_vocab_map_get(&m, "ab", 2), 2);
    assert_int_equal(txc_vocab_map_get(&m, "abc", 1), 0); /* by length, not by NUL */
    assert_int_equal(txc_vocab_map_get(&m, "a", 1), 0);   /* a string twice: its first id */
    assert_int_equal(txc_vocab_map_get(&m, "", 0), 10);
    assert_int_equal(txc_vocab_map_get(&m, "\xc3\xa9", 2), 9);
    assert_int_equal(txc_vocab_map_get(&m, "ba", 2), -1);
    assert_int_equal(txc_vocab_map_get(&m, "abcd", 4), -1);
    txc_vocab_map_free(&m);
    assert_null(m.slot);
    assert_int_equal(txc_vocab_map_get(&m, "a", 1), -1); /* a freed map holds nothing */
    assert_int_equal(txc_vocab_map_init(&m, PIECES, lens, -1), TXC_ERR_INVALID);
    txc_vocab_map_free(&m);
}

static void expect(const txc_spm_merge *got, float score, int64_t id, int64_t left, int64_t right)
{
    assert_true(got->score == score);
    assert_int_equal(got->id, id);
    assert_int_equal(got->left, left);
    assert_int_equal(got->right, right);
}

static void test_spm_merges(void **state)
{
    (void)state;
    size_t lens[N_PIECES];
    txc_vocab_map m;
    make_map(&m, lens);
    /* ab -1, bc -2, abc -3; the others lower */
    const float scores[N_PIECES] = {-10, -11, -1, -12, -3, -2, -13, -14, -15, -4, -16};
    txc_spm_merge *ms = NULL;
    size_t n = 0;
    assert_int_equal(txc_spm_merges(&m, scores, &ms, &n), TXC_OK);
    assert_int_equal(n, 4); /* none for the second "a", none inside "é" */
    expect(&ms[0], -1, 2, 0, 1); /* ab = a + b */
    expect(&ms[1], -2, 5, 1, 3); /* bc = b + c */
    expect(&ms[2], -3, 4, 0, 5); /* abc = a + bc, then ab + c (left ascending) */
    expect(&ms[3], -3, 4, 2, 3);
    free(ms);
    /* no scores: the ids' order */
    assert_int_equal(txc_spm_merges(&m, NULL, &ms, &n), TXC_OK);
    assert_int_equal(n, 4);
    expect(&ms[0], -2, 2, 0, 1);
    expect(&ms[1], -4, 4, 0, 5);
    expect(&ms[2], -4, 4, 2, 3);
    expect(&ms[3], -5, 5, 1, 3);
    free(ms);
    txc_vocab_map_free(&m);
    /* a vocabulary without merges */
    const char *const one[] = {"x"};
    size_t one_len[] = {1};
    assert_int_equal(txc_vocab_map_init(&m, one, one_len, 1), TXC_OK);
    assert_int_equal(txc_spm_merges(&m, NULL, &ms, &n), TXC_OK);
    assert_int_equal(n, 0);
    assert_null(ms);
    txc_vocab_map_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_map),
        cmocka_unit_test(test_spm_merges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
