/* Generator sessions (txc_generator_session_*): a conversation's KV cache
 * kept between runs gives the tokens of a fresh run over the whole
 * sequence, token for token, in every cache mode, eager and compiled; a
 * sequence that departs from the cached one crops the cache; a conversation
 * past max_cache_len is TXC_ERR_CAPACITY. Model: stories260K. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txc/generate.h"
#include "txc/model.h"
#include "txc/tokenizer.h"

static const char *model_dir(void) { return tu_path("%s/models/stories260K", tu_shared_dir()); }

typedef struct fixture {
    txc_model *m;
    txc_tokenizer *tok;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f || txc_model_load(model_dir(), NULL, &f->m) != TXC_OK || txc_tokenizer_load(model_dir(), &f->tok) != TXC_OK)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    txc_tokenizer_free(f->tok);
    txc_model_free(f->m);
    free(f);
    return 0;
}

/* A growing id sequence. */
typedef struct seq {
    int32_t ids[512];
    int64_t n;
} seq;

static void seq_text(seq *s, const txc_tokenizer *tok, const char *text, bool bos)
{
    int32_t *ids;
    size_t n;
    assert_int_equal(txc_tokenizer_encode(tok, text, strlen(text), bos, &ids, &n), TXC_OK);
    assert_true(s->n + (int64_t)n <= 512);
    memcpy(s->ids + s->n, ids, sizeof(int32_t) * n);
    s->n += (int64_t)n;
    free(ids);
}

static void seq_ids(seq *s, const int32_t *ids, int64_t n)
{
    assert_true(s->n + n <= 512);
    memcpy(s->ids + s->n, ids, sizeof(int32_t) * (size_t)n);
    s->n += n;
}

static txc_generate_options options(txc_model *m, bool jit, bool sample)
{
    txc_generate_options o = txc_generate_default_options(m, model_dir());
    o.max_new_tokens = 10;
    o.n_eos = 0; /* always 10 tokens: longer sequences to compare */
    o.jit = jit;
    o.do_sample = sample;
    o.temperature = 0.8;
    o.top_k = 40;
    o.seed = 1234;
    return o;
}

/* The session's run over `s` equals a fresh eager run with a cache of its
 * own over the same ids; returns the new ids (caller frees the result). */
static void run_and_compare(txc_model *m, txc_generator_session *sess, const seq *s, const txc_generate_options *o,
                            int64_t want_reused, txc_generate_result *r)
{
    txc_status st = txc_generator_session_run(sess, s->ids, s->n, o, r);
    if (st != TXC_OK)
        fail_msg("session run over %lld ids: %s", (long long)s->n, txc_last_error());
    txc_generate_options fo = *o;
    fo.jit = false;
    fo.cache = TXC_CACHE_STATIC;
    fo.max_cache_len = txc_generator_session_max_cache_len(sess); /* where a reply stops */
    txc_generate_result fresh;
    assert_int_equal(txc_generate(m, s->ids, s->n, &fo, &fresh), TXC_OK);
    if (fresh.n_new != r->n_new || memcmp(fresh.new_ids, r->new_ids, sizeof(int32_t) * (size_t)r->n_new) != 0) {
        for (int64_t i = 0; i < r->n_new && i < fresh.n_new; i++)
            fprintf(stderr, "  %lld: session %d fresh %d\n", (long long)i, r->new_ids[i], fresh.new_ids[i]);
        fail_msg("session (jit %d) and fresh run over %lld ids differ", o->jit, (long long)s->n);
    }
    assert_int_equal(r->n_reused, want_reused);
    assert_int_equal(r->n_reused + r->n_prefilled, s->n);
    txc_generate_result_free(&fresh);
}

/* Three turns: each sequence is the previous one, its reply and new text. */
static void check_turns(fixture *f, txc_cache_kind kind, bool jit, bool sample)
{
    txc_generator *gen = txc_generator_new(f->m);
    assert_non_null(gen);
    txc_generator_session *sess = txc_generator_session_new(gen, kind, 256);
    assert_non_null(sess);
    txc_generate_options o = options(f->m, jit, sample);
    seq s = {.n = 0};
    const char *turns[] = {"Once upon a time", " Lily and Ben went to the park.", " The dog said"};
    int64_t expect_reused = 0;
    for (int t = 0; t < 3; t++) {
        seq_text(&s, f->tok, turns[t], t == 0);
        txc_generate_result r;
        run_and_compare(f->m, sess, &s, &o, kind == TXC_CACHE_NONE ? 0 : expect_reused, &r);
        assert_int_equal(r.n_new, 10);
        /* the last new id is not in the cache: the next turn prefills it */
        assert_int_equal(txc_generator_session_cached(sess), kind == TXC_CACHE_NONE ? 0 : s.n + 9);
        expect_reused = s.n + 9;
        seq_ids(&s, r.new_ids, r.n_new);
        txc_generate_result_free(&r);
    }
    /* the whole sequence again: all but its last id come from the cache */
    txc_generate_result r;
    run_and_compare(f->m, sess, &s, &o, kind == TXC_CACHE_NONE ? 0 : s.n - 1, &r);
    txc_generate_result_free(&r);
    if (jit && kind == TXC_CACHE_STATIC) /* one decode plan for the whole conversation */
        assert_int_equal(txc_generator_jit_stats(gen, 1).misses, 1);
    txc_generator_session_free(sess);
    txc_generator_free(gen);
}

static void test_turns_static_eager(void **state) { check_turns(*state, TXC_CACHE_STATIC, false, false); }
static void test_turns_static_jit(void **state) { check_turns(*state, TXC_CACHE_STATIC, true, false); }
static void test_turns_dynamic_eager(void **state) { check_turns(*state, TXC_CACHE_DYNAMIC, false, false); }
static void test_turns_dynamic_jit(void **state) { check_turns(*state, TXC_CACHE_DYNAMIC, true, false); }
static void test_turns_none(void **state) { check_turns(*state, TXC_CACHE_NONE, false, false); }
static void test_turns_sampled(void **state)
{
    check_turns(*state, TXC_CACHE_STATIC, false, true);
    check_turns(*state, TXC_CACHE_STATIC, true, true);
}

/* A sequence that departs from the cached one in the middle (an edited
 * turn): the cache is cropped to the shared prefix, the rest overwritten;
 * then a shorter one, and one that shares only BOS. */
static void check_divergence(fixture *f, txc_cache_kind kind, bool jit)
{
    txc_generator *gen = txc_generator_new(f->m);
    txc_generator_session *sess = txc_generator_session_new(gen, kind, 128);
    assert_non_null(sess);
    txc_generate_options o = options(f->m, jit, false);
    seq a = {.n = 0};
    seq_text(&a, f->tok, "Once upon a time, there was a little girl named Lily. She liked to play", true);
    txc_generate_result r;
    run_and_compare(f->m, sess, &a, &o, 0, &r);
    txc_generate_result_free(&r);

    seq b = {.n = 0};
    seq_ids(&b, a.ids, 8);
    seq_text(&b, f->tok, " a big red ball and a small cat", false);
    assert_true(b.ids[8] != a.ids[8]);
    run_and_compare(f->m, sess, &b, &o, 8, &r);
    txc_generate_result_free(&r);

    seq c = {.n = 0};
    seq_ids(&c, b.ids, 5); /* shorter than what is cached */
    run_and_compare(f->m, sess, &c, &o, 4, &r);
    txc_generate_result_free(&r);

    seq d = {.n = 0};
    seq_text(&d, f->tok, "The sun was hot", true);
    run_and_compare(f->m, sess, &d, &o, 1, &r); /* BOS only */
    txc_generate_result_free(&r);
    txc_generator_session_free(sess);
    txc_generator_free(gen);
}

static void test_divergence(void **state)
{
    check_divergence(*state, TXC_CACHE_STATIC, false);
    check_divergence(*state, TXC_CACHE_STATIC, true);
    check_divergence(*state, TXC_CACHE_DYNAMIC, false);
    check_divergence(*state, TXC_CACHE_DYNAMIC, true);
}

/* A StaticCache of 40: a reply stops where the cache ends; a conversation
 * that fills it is TXC_ERR_CAPACITY and leaves the session usable; a
 * compiled prefill near the end pads only up to the cache's end. */
static void test_capacity(void **state)
{
    fixture *f = *state;
    for (int jit = 0; jit < 2; jit++) {
        txc_generator *gen = txc_generator_new(f->m);
        txc_generator_session *sess = txc_generator_session_new(gen, TXC_CACHE_STATIC, 40);
        assert_non_null(sess);
        assert_int_equal(txc_generator_session_max_cache_len(sess), 40);
        txc_generate_options o = options(f->m, jit, false);
        seq s = {.n = 0};
        seq_text(&s, f->tok, "Once upon a time, there was a little girl", true);
        txc_generate_result r;
        run_and_compare(f->m, sess, &s, &o, 0, &r);
        seq_ids(&s, r.new_ids, r.n_new);
        txc_generate_result_free(&r);
        int64_t cached = txc_generator_session_cached(sess);

        /* 40 ids or more: no room for a reply */
        seq big = s;
        while (big.n < 40)
            seq_ids(&big, s.ids + 1, 1);
        assert_int_equal(txc_generator_session_run(sess, big.ids, big.n, &o, &r), TXC_ERR_CAPACITY);
        assert_non_null(strstr(txc_last_error(), "the conversation has 40 tokens"));
        assert_non_null(strstr(txc_last_error(), "max_cache_len 40"));
        assert_null(r.new_ids);
        seq_ids(&big, s.ids + 1, 5);
        txc_clear_error();
        assert_int_equal(txc_generator_session_run(sess, big.ids, big.n, &o, &r), TXC_ERR_CAPACITY);
        assert_non_null(strstr(txc_last_error(), "more than the session's max_cache_len 40"));
        assert_int_equal(txc_generator_session_cached(sess), cached); /* unchanged */

        /* up to 37 ids: the reply stops at the end of the cache; the
         * compiled prefill of the suffix pads to at most 40 - from */
        seq near = s;
        while (near.n < 37)
            seq_ids(&near, s.ids + 1 + near.n % 7, 1);
        run_and_compare(f->m, sess, &near, &o, cached, &r);
        assert_int_equal(r.n_new, 3);
        assert_string_equal(r.stop_reason, "max_cache_len");
        txc_generate_result_free(&r);

        /* bad ids: refused before any work, the session kept */
        cached = txc_generator_session_cached(sess);
        txc_clear_error();
        near.ids[3] = 100000;
        assert_int_equal(txc_generator_session_run(sess, near.ids, near.n, &o, &r), TXC_ERR_INVALID);
        assert_int_equal(txc_generator_session_cached(sess), cached);
        txc_generator_session_reset(sess);
        assert_int_equal(txc_generator_session_cached(sess), 0);
        txc_generator_session_free(sess);
        txc_generator_free(gen);
        txc_clear_error();
    }
}

/* transformers' chats (scripts/gen_chat_fixtures.py): each turn's prompt
 * ids (the rendered conversation, tokenized without special tokens) give
 * transformers' new ids through one session, eager and compiled. */
static void test_transformers_chats(void **state)
{
    fixture *f = *state;
    cJSON *ref = tu_load_json("tests/fixtures/chat_stories260k.json");
    const int max_new = cJSON_GetObjectItem(ref, "max_new_tokens")->valueint;
    for (int jit = 0; jit < 2; jit++) {
        const cJSON *chat;
        cJSON_ArrayForEach(chat, cJSON_GetObjectItem(ref, "chats"))
        {
            txc_generator *gen = txc_generator_new(f->m);
            txc_generator_session *sess = txc_generator_session_new(gen, TXC_CACHE_STATIC, 512);
            assert_non_null(sess);
            txc_generate_options o = txc_generate_default_options(f->m, model_dir()); /* eos [1, 2] */
            o.max_new_tokens = max_new;
            o.jit = jit;
            int turn = 0;
            const cJSON *t;
            cJSON_ArrayForEach(t, cJSON_GetObjectItem(chat, "turns"))
            {
                seq s = {.n = 0}, want = {.n = 0};
                const cJSON *v;
                cJSON_ArrayForEach(v, cJSON_GetObjectItem(t, "prompt_ids")) s.ids[s.n++] = v->valueint;
                cJSON_ArrayForEach(v, cJSON_GetObjectItem(t, "new_ids")) want.ids[want.n++] = v->valueint;
                txc_generate_result r;
                assert_int_equal(txc_generator_session_run(sess, s.ids, s.n, &o, &r), TXC_OK);
                if (r.n_new != want.n || memcmp(r.new_ids, want.ids, sizeof(int32_t) * (size_t)want.n) != 0)
                    fail_msg("%s turn %d (jit %d): new ids differ from transformers'",
                             cJSON_GetObjectItem(chat, "name")->valuestring, turn + 1, jit);
                if (turn > 0) /* the previous turn's prompt at least came from the cache */
                    assert_true(r.n_reused > 0 && r.n_prefilled < s.n);
                txc_generate_result_free(&r);
                turn++;
            }
            assert_int_equal(turn, 3);
            txc_generator_session_free(sess);
            txc_generator_free(gen);
        }
    }
    cJSON_Delete(ref);
}

static void test_session_new_errors(void **state)
{
    fixture *f = *state;
    txc_clear_error();
    txc_generator *gen = txc_generator_new(f->m);
    assert_null(txc_generator_session_new(gen, TXC_CACHE_STATIC, -1));
    assert_int_equal(txc_last_status(), TXC_ERR_INVALID);
    txc_clear_error();
    assert_null(txc_generator_session_new(gen, (txc_cache_kind)7, 0));
    assert_int_equal(txc_last_status(), TXC_ERR_INVALID);
    /* 0: the default, cut to max_position_embeddings (512) */
    txc_generator_session *sess = txc_generator_session_new(gen, TXC_CACHE_STATIC, 0);
    assert_non_null(sess);
    assert_int_equal(txc_generator_session_max_cache_len(sess), 512);
    txc_generator_session_free(sess);
    txc_generator_free(gen);
    txc_clear_error();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_turns_static_eager), cmocka_unit_test(test_turns_static_jit),
        cmocka_unit_test(test_turns_dynamic_eager), cmocka_unit_test(test_turns_dynamic_jit),
        cmocka_unit_test(test_turns_none),          cmocka_unit_test(test_turns_sampled),
        cmocka_unit_test(test_divergence),          cmocka_unit_test(test_capacity),
        cmocka_unit_test(test_transformers_chats), cmocka_unit_test(test_session_new_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
