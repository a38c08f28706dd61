/* Every tokenizer family in ../shared/tokenizers against the `tokenizers`
 * package (PyPI): tests/fixtures/tokenizer_ids/<name>.json, written by
 * scripts/gen_tokenizer_fixtures.py, holds for each string of
 * tests/fixtures/tokenizer_corpus.json the ids with and without special
 * tokens and the decoded text with and without skip_special_tokens. txc must
 * match all of them exactly, for the nine real tokenizers and for variants
 * that switch on the components no shipped file uses. Also: llama.cpp's
 * golden vectors for the byte-level families, Llama 3's ignore_merges, the
 * streaming detokenizer on byte-level text, unsupported components, and
 * encode speed on ~1 MB. */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "txc/tokenizer.h"

static const char *tok_dir(const char *folder)
{
    return tu_path("%s/tokenizers/%s", tu_shared_dir(), folder);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static txc_tokenizer *load(const char *path)
{
    txc_tokenizer *t = NULL;
    txc_clear_error();
    txc_status st = txc_tokenizer_load(path, &t);
    if (st)
        print_error("load %s: %s %s\n", path, txc_status_name(st), txc_last_error());
    assert_int_equal(st, TXC_OK);
    assert_non_null(t);
    return t;
}

static void encode(const txc_tokenizer *t, const char *s, size_t n, bool add, int32_t **ids,
                   size_t *n_ids)
{
    txc_clear_error();
    txc_status st = txc_tokenizer_encode(t, s, n, add, ids, n_ids);
    if (st)
        print_error("encode: %s\n", txc_last_error());
    assert_int_equal(st, TXC_OK);
}

static char *decode(const txc_tokenizer *t, const int32_t *ids, size_t n, bool skip, size_t *len)
{
    char *s = NULL;
    txc_clear_error();
    txc_status st = txc_tokenizer_decode(t, ids, n, skip, &s, len);
    if (st)
        print_error("decode: %s\n", txc_last_error());
    assert_int_equal(st, TXC_OK);
    return s;
}

static void print_ids(const char *what, const int32_t *ids, size_t n)
{
    print_message("%s:", what);
    for (size_t i = 0; i < n && i < 64; i++)
        print_message(" %d", ids[i]);
    print_message(n > 64 ? " ...\n" : "\n");
}

/* ids (n) equal to the JSON array j */
static bool ids_match(const int32_t *ids, size_t n, const cJSON *j)
{
    if (!cJSON_IsArray(j) || (size_t)cJSON_GetArraySize(j) != n)
        return false;
    size_t i = 0;
    for (const cJSON *e = j->child; e; e = e->next, i++)
        if (ids[i] != (int32_t)e->valuedouble)
            return false;
    return true;
}

static int32_t *json_ids(const cJSON *j, size_t *n)
{
    *n = (size_t)cJSON_GetArraySize(j);
    int32_t *v = malloc((*n ? *n : 1) * sizeof *v);
    assert_non_null(v);
    size_t i = 0;
    for (const cJSON *e = j->child; e; e = e->next)
        v[i++] = (int32_t)e->valuedouble;
    return v;
}

/* ---- building a tokenizer: a shared file, or one with an override ---------------------- */

/* The base tokenizer.json with the fixture's override applied (top-level
 * fields replaced; "added_tokens+" appended), written under dir. */
static const char *write_variant(const char *dir, const char *name, const char *folder,
                                 const cJSON *override)
{
    char *text = tu_read_file(tu_path("%s/tokenizer.json", tok_dir(folder)), NULL);
    assert_non_null(text);
    cJSON *root = cJSON_Parse(text);
    free(text);
    assert_non_null(root);
    for (const cJSON *e = override->child; e; e = e->next) {
        if (!strcmp(e->string, "added_tokens+")) {
            cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
            assert_non_null(list);
            for (const cJSON *a = e->child; a; a = a->next)
                cJSON_AddItemToArray(list, cJSON_Duplicate(a, true));
        } else {
            cJSON *dup = cJSON_Duplicate(e, true);
            if (cJSON_GetObjectItemCaseSensitive(root, e->string))
                cJSON_ReplaceItemInObjectCaseSensitive(root, e->string, dup);
            else
                cJSON_AddItemToObject(root, e->string, dup);
        }
    }
    char *out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    const char *path = tu_path("%s/%s.json", dir, name);
    assert_int_equal(tu_write_file(path, out, strlen(out)), 0);
    free(out);
    return path;
}

static cJSON *g_corpus;

static const cJSON *corpus(void)
{
    if (!g_corpus)
        g_corpus = tu_load_json("tests/fixtures/tokenizer_corpus.json");
    return g_corpus;
}

static txc_tokenizer *load_fixture_tokenizer(const cJSON *fx, const char *name)
{
    const char *folder = cJSON_GetObjectItemCaseSensitive(fx, "tokenizer")->valuestring;
    const cJSON *override = cJSON_GetObjectItemCaseSensitive(fx, "override");
    if (!cJSON_IsObject(override))
        return load(tok_dir(folder)); /* a directory holding tokenizer.json */
    char *dir = tu_mkdtemp();
    txc_tokenizer *t = load(write_variant(dir, name, folder, override));
    tu_rm_rf(dir);
    return t;
}

/* Stream ids one by one: what put/flush return, concatenated, must equal
 * decode(ids). */
static bool stream_equals(const txc_tokenizer *t, const int32_t *ids, size_t n, bool skip,
                          const char *want, size_t want_len)
{
    txc_detok_stream *s = txc_detok_stream_new(t, skip);
    assert_non_null(s);
    char *acc = malloc(want_len + 4096);
    size_t got = 0, cap = want_len + 4096;
    bool ok = true;
    for (size_t i = 0; i <= n && ok; i++) {
        const char *piece;
        size_t plen;
        txc_status st = i < n ? txc_detok_stream_put(s, ids[i], &piece, &plen)
                              : txc_detok_stream_flush(s, &piece, &plen);
        ok = st == TXC_OK && got + plen <= cap;
        if (ok) {
            memcpy(acc + got, piece, plen);
            got += plen;
        }
    }
    ok = ok && got == want_len && memcmp(acc, want, got) == 0;
    if (!ok)
        print_error("stream: \"%.*s\" != \"%s\"\n", (int)got, acc, want);
    free(acc);
    txc_detok_stream_free(s);
    return ok;
}

/* Check one fixture file; returns the number of cases (all must match). */
static int check_fixture(const char *name)
{
    cJSON *fx = tu_load_json(tu_path("tests/fixtures/tokenizer_ids/%s.json", name));
    double t0 = now_s();
    txc_tokenizer *t = load_fixture_tokenizer(fx, name);
    double t1 = now_s();
    const cJSON *texts = corpus();
    int n_cases = 0, bad_ids = 0, bad_special = 0, bad_skip = 0, bad_keep = 0, bad_stream = 0;
    for (const cJSON *c = cJSON_GetObjectItemCaseSensitive(fx, "cases")->child; c; c = c->next) {
        int idx = (int)cJSON_GetObjectItemCaseSensitive(c, "i")->valuedouble;
        const cJSON *jt = cJSON_GetArrayItem(texts, idx);
        assert_non_null(jt);
        const char *text = jt->valuestring;
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(c, "ids");
        const cJSON *want_sp = cJSON_GetObjectItemCaseSensitive(c, "ids_special");
        if (!want_sp)
            want_sp = want;
        const char *skip = cJSON_GetObjectItemCaseSensitive(c, "decode_skip")->valuestring;
        const cJSON *jk = cJSON_GetObjectItemCaseSensitive(c, "decode_keep");
        const char *keep = jk ? jk->valuestring : skip;
        n_cases++;

        int32_t *ids;
        size_t n;
        encode(t, text, strlen(text), false, &ids, &n);
        if (!ids_match(ids, n, want)) {
            if (bad_ids++ < 5) {
                print_error("%s: case %d \"%s\"\n", name, idx, text);
                print_ids("  got ", ids, n);
                size_t wn;
                int32_t *w = json_ids(want, &wn);
                print_ids("  want", w, wn);
                free(w);
            }
        }
        free(ids);
        encode(t, text, strlen(text), true, &ids, &n);
        if (!ids_match(ids, n, want_sp) && bad_special++ < 5) {
            print_error("%s: case %d \"%s\" (add_special_tokens)\n", name, idx, text);
            print_ids("  got ", ids, n);
        }
        free(ids);
        /* decode the reference ids, so that a decode bug shows on its own */
        ids = json_ids(want_sp, &n);
        size_t len;
        char *s = decode(t, ids, n, true, &len);
        if ((len != strlen(skip) || memcmp(s, skip, len) != 0) && bad_skip++ < 5)
            print_error("%s: case %d decode(skip) \"%s\" != \"%s\"\n", name, idx, s, skip);
        free(s);
        s = decode(t, ids, n, false, &len);
        if ((len != strlen(keep) || memcmp(s, keep, len) != 0) && bad_keep++ < 5)
            print_error("%s: case %d decode(keep) \"%s\" != \"%s\"\n", name, idx, s, keep);
        free(s);
        if (!stream_equals(t, ids, n, true, skip, strlen(skip)))
            bad_stream++;
        free(ids);
    }
    double t2 = now_s();
    print_message("%-22s %d/%d ids, %d/%d with special tokens, %d/%d decode, %d/%d decode "
                  "(keep special), %d/%d streamed (load %.0f ms, check %.0f ms)\n",
                  name, n_cases - bad_ids, n_cases, n_cases - bad_special, n_cases,
                  n_cases - bad_skip, n_cases, n_cases - bad_keep, n_cases, n_cases - bad_stream,
                  n_cases, 1e3 * (t1 - t0), 1e3 * (t2 - t1));
    txc_tokenizer_free(t);
    cJSON_Delete(fx);
    assert_int_equal(bad_ids + bad_special + bad_skip + bad_keep + bad_stream, 0);
    return n_cases;
}

#define FAMILY_TEST(name)                                                                 \
    static void test_##name(void **state)                                                 \
    {                                                                                     \
        (void)state;                                                                      \
        assert_true(check_fixture(#name) > 150);                                          \
    }
FAMILY_TEST(gpt2)
FAMILY_TEST(llama3)
FAMILY_TEST(qwen3)
FAMILY_TEST(deepseek_v3)
FAMILY_TEST(gptoss)
FAMILY_TEST(gemma3)
FAMILY_TEST(tinyllama)
FAMILY_TEST(mistral)
FAMILY_TEST(phi3v)
FAMILY_TEST(v_nfkc_lower_punct)
FAMILY_TEST(v_nfd_strip_ws)
FAMILY_TEST(v_split_behaviors)
FAMILY_TEST(v_punct_contig_delim)
FAMILY_TEST(v_added_tokens)
FAMILY_TEST(v_metaspace_split)
FAMILY_TEST(v_metaspace_first)
FAMILY_TEST(v_llama3_bos)
FAMILY_TEST(v_prefix_space)

/* ---- llama.cpp golden vectors (ids from Hugging Face, add_special_tokens=False) ------------ */

static void check_golden(const char *folder, const char *name)
{
    txc_tokenizer *t = load(tok_dir(folder));
    char *inp = tu_read_file(
        tu_path("%s/tokenizer-vectors/llama.cpp/ggml-vocab-%s.gguf.inp", tu_shared_dir(), name),
        NULL);
    char *out = tu_read_file(
        tu_path("%s/tokenizer-vectors/llama.cpp/ggml-vocab-%s.gguf.out", tu_shared_dir(), name),
        NULL);
    assert_non_null(inp);
    assert_non_null(out);
    static const char sep[] = "\n__ggml_vocab_test__\n";
    char *p = inp, *o = out;
    int total = 0, ok = 0;
    for (char *q; (q = strstr(p, sep)); p = q + strlen(sep)) {
        char *nl = strchr(o, '\n');
        assert_non_null(nl);
        *nl = '\0';
        int32_t *ids;
        size_t n;
        encode(t, p, (size_t)(q - p), false, &ids, &n);
        size_t k = 0;
        bool same = true;
        for (char *r = o, *e; same; r = e) {
            long v = strtol(r, &e, 10);
            if (e == r)
                break;
            same = k < n && ids[k++] == v;
        }
        same = same && k == n;
        if (same)
            ok++;
        else
            print_error("%s: \"%.*s\"\n  want%s\n", name, (int)(q - p), p, o);
        /* byte-level BPE is lossless: decode gives the text back */
        size_t len;
        char *back = decode(t, ids, n, false, &len);
        if (len != (size_t)(q - p) || memcmp(back, p, len) != 0) {
            /* Qwen's NFC may change the text: then it must be what NFC gives */
            same = strcmp(folder, "qwen3") == 0;
            if (!same)
                print_error("%s: decode(\"%.*s\") = \"%s\"\n", name, (int)(q - p), p, back);
        }
        assert_true(same);
        free(back);
        free(ids);
        o = nl + 1;
        total++;
    }
    print_message("llama.cpp %s with %s: %d/%d exact\n", name, folder, ok, total);
    free(inp);
    free(out);
    txc_tokenizer_free(t);
    assert_int_equal(ok, total);
    assert_int_equal(total, 46);
}

static void test_golden_vectors(void **state)
{
    (void)state;
    check_golden("gpt2", "gpt-2");
    check_golden("llama3", "llama-bpe");
    check_golden("qwen3", "qwen2");
    check_golden("qwen3", "deepseek-r1-qwen");
}

/* ---- Llama 3: ignore_merges --------------------------------------------------------------- */

#define EXPECT_IDS(t, text, ...)                                                          \
    do {                                                                                  \
        const int32_t want_[] = {__VA_ARGS__};                                            \
        int32_t *ids_;                                                                    \
        size_t n_;                                                                        \
        encode(t, text, strlen(text), false, &ids_, &n_);                                 \
        bool ok_ = n_ == sizeof want_ / sizeof want_[0] &&                                \
                   memcmp(ids_, want_, sizeof want_) == 0;                                \
        if (!ok_) {                                                                       \
            print_error("\"%s\"\n", text);                                                \
            print_ids("got ", ids_, n_);                                                  \
        }                                                                                 \
        free(ids_);                                                                       \
        assert_true(ok_);                                                                 \
    } while (0)

/* A pre-token already in the vocab is one token even when no merge sequence
 * builds it: " việc" is 100769 in Llama 3, while the merges alone give
 * " vi" "ệ" "c". Checked against the crate with ignore_merges on and off. */
static void test_ignore_merges(void **state)
{
    (void)state;
    txc_tokenizer *t = load(tok_dir("llama3"));
    EXPECT_IDS(t, " vi\xe1\xbb\x87" "c", 100769);
    EXPECT_IDS(t, " nhi\xe1\xbb\x81u", 100937);
    EXPECT_IDS(t, "mektedir", 102909);
    EXPECT_IDS(t, ".:.:.:.:.:.:.:.:", 105356);
    EXPECT_IDS(t, " \xd0\xb4\xd0\xb0\xd0\xb6\xd0\xb5", 104199); /* " даже" */
    EXPECT_IDS(t, "Ti\xe1\xba\xbfng Vi\xe1\xbb\x87t nhi\xe1\xbb\x81u vi\xe1\xbb\x87" "c", 46451,
               27160, 983, 101798, 100937, 100769);
    txc_tokenizer_free(t);

    /* the same file with ignore_merges off: the merges' answer */
    char *dir = tu_mkdtemp();
    cJSON *ov = cJSON_Parse("{\"model\": null}");
    char *text = tu_read_file(tu_path("%s/tokenizer.json", tok_dir("llama3")), NULL);
    cJSON *root = cJSON_Parse(text);
    free(text);
    cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    cJSON_ReplaceItemInObjectCaseSensitive(model, "ignore_merges", cJSON_CreateFalse());
    char *out = cJSON_PrintUnformatted(root);
    const char *path = tu_path("%s/tokenizer.json", dir);
    assert_int_equal(tu_write_file(path, out, strlen(out)), 0);
    free(out);
    cJSON_Delete(root);
    cJSON_Delete(ov);
    t = load(path);
    EXPECT_IDS(t, " vi\xe1\xbb\x87" "c", 3355, 26298, 66);
    EXPECT_IDS(t, " nhi\xe1\xbb\x81u", 308, 6151, 41038, 84);
    EXPECT_IDS(t, "mektedir", 74853, 6702, 404);
    EXPECT_IDS(t, ".:.:.:.:.:.:.:.:", 124263, 17406, 17406, 108601);
    txc_tokenizer_free(t);
    tu_rm_rf(dir);
}

/* ---- words cut before "▁" ---------------------------------------------------------------------- */

/* A SentencePiece piece is merged word by word, cut before each "▁" that
 * follows another character, except where a token with such a "▁" inside
 * (Gemma 3's ">▁</") spells the text around it: the ids are those of the
 * whole piece (the crate's, by the tokenizers package). */
static void test_meta_cut(void **state)
{
    (void)state;
    txc_tokenizer *t = load(tok_dir("gemma3"));
    EXPECT_IDS(t, "x> </ >  </ > < /", 236781, 107068, 1890, 138, 954, 1890, 655, 965);
    EXPECT_IDS(t, "a> </b> </c", 236746, 236813, 236743, 209, 1454, 236755);
    txc_tokenizer_free(t);

    /* every token with an inner "▁" blocks the cut, intermediate merges too */
    static const char json[] =
        "{\"version\": \"1.0\", \"added_tokens\": [], \"normalizer\": null, \"pre_tokenizer\": null, "
        "\"post_processor\": null, \"decoder\": null, \"model\": {\"type\": \"BPE\", \"unk_token\": "
        "null, \"fuse_unk\": false, \"byte_fallback\": false, \"vocab\": {\"\\u2581\": 0, \"a\": 1, "
        "\"b\": 2, \">\": 3, \"<\": 4, \"/\": 5, \">\\u2581\": 6, \"</\": 7, \">\\u2581</\": 8, "
        "\"\\u2581a\": 9}, \"merges\": [[\">\", \"\\u2581\"], [\"<\", \"/\"], [\">\\u2581\", "
        "\"</\"], [\"\\u2581\", \"a\"]]}}";
    char *dir = tu_mkdtemp();
    const char *path = tu_path("%s/tokenizer.json", dir);
    assert_int_equal(tu_write_file(path, json, strlen(json)), 0);
    t = load(path);
    EXPECT_IDS(t, "a>\xe2\x96\x81</b\xe2\x96\x81" "a", 1, 8, 2, 9);
    EXPECT_IDS(t, "a>\xe2\x96\x81" "b\xe2\x96\x81" "a", 1, 6, 2, 9);
    EXPECT_IDS(t, "\xe2\x96\x81" "a>\xe2\x96\x81</\xe2\x96\x81" "a>\xe2\x96\x81", 9, 8, 9, 6);
    EXPECT_IDS(t, "a\xe2\x96\x81" "a", 1, 9);
    txc_tokenizer_free(t);
    tu_rm_rf(dir);
}

/* ---- byte-level details ------------------------------------------------------------------------ */

static void test_bytelevel(void **state)
{
    (void)state;
    txc_tokenizer *t = load(tok_dir("gpt2"));
    /* the vocab keeps the byte alphabet: "Ġ" is a space, "Ċ" a newline */
    assert_string_equal(txc_tokenizer_id_to_token(t, 220), "\xc4\xa0");
    assert_string_equal(txc_tokenizer_id_to_token(t, 198), "\xc4\x8a");
    assert_int_equal(txc_tokenizer_token_to_id(t, "\xc4\xa0the"), 262);
    EXPECT_IDS(t, "Hello world", 15496, 995);
    EXPECT_IDS(t, " Hello", 18435);
    EXPECT_IDS(t, "<|endoftext|>", 50256);
    assert_int_equal(txc_tokenizer_vocab_size(t), 50257);
    assert_int_equal(txc_tokenizer_bos_id(t), -1); /* GPT-2 adds nothing */

    /* decode: bytes that are not UTF-8 come out as String::from_utf8_lossy
     * does, one U+FFFD per maximal invalid subsequence */
    const int32_t half[] = {8582, 248}; /* "ðŁ" "ĺ": F0 9F 9A, a truncated emoji */
    size_t len;
    char *s = decode(t, half, 2, true, &len);
    assert_string_equal(s, "\xef\xbf\xbd");
    free(s);
    const int32_t half2[] = {8582, 248, 222}; /* + 80: complete */
    s = decode(t, half2, 3, true, &len);
    assert_string_equal(s, "\xf0\x9f\x9a\x80"); /* U+1F680 */
    free(s);
    const int32_t lone[] = {246, 64, 246}; /* 0x80 'a' 0x80 */
    s = decode(t, lone, 3, true, &len);
    assert_string_equal(s, "\xef\xbf\xbd" "a" "\xef\xbf\xbd");
    free(s);
    /* the stream holds back a partial character */
    txc_detok_stream *ds = txc_detok_stream_new(t, true);
    const char *piece;
    size_t plen;
    assert_int_equal(txc_detok_stream_put(ds, 15496, &piece, &plen), TXC_OK);
    assert_string_equal(piece, "Hello");
    assert_int_equal(txc_detok_stream_put(ds, 12520, &piece, &plen), TXC_OK); /* " ð" */
    assert_int_equal(txc_detok_stream_put(ds, 248, &piece, &plen), TXC_OK);
    assert_int_equal(txc_detok_stream_put(ds, 222, &piece, &plen), TXC_OK);
    assert_string_equal(piece, " \xf0\x9f\x9a\x80");
    txc_detok_stream_free(ds);
    txc_tokenizer_free(t);
}

/* ---- unsupported components: one clear line naming them ------------------------------------- */

static void expect_unsupported(const char *dir, const char *name, const char *override_json,
                               const char *needle)
{
    cJSON *ov = cJSON_Parse(override_json);
    assert_non_null(ov);
    const char *path = write_variant(dir, name, "gpt2", ov);
    cJSON_Delete(ov);
    txc_tokenizer *t = (txc_tokenizer *)1;
    txc_clear_error();
    txc_status st = txc_tokenizer_load(path, &t);
    if (st != TXC_ERR_UNSUPPORTED || !strstr(txc_last_error(), needle))
        print_error("%s: got %s \"%s\", want UNSUPPORTED naming \"%s\"\n", name,
                    txc_status_name(st), txc_last_error(), needle);
    assert_int_equal(st, TXC_ERR_UNSUPPORTED);
    assert_null(t);
    assert_non_null(strstr(txc_last_error(), needle));
    assert_null(strchr(txc_last_error(), '\n'));
}

static void test_unsupported(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    expect_unsupported(dir, "bert", "{\"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"}}",
                       "pre_tokenizer BertPreTokenizer not supported");
    expect_unsupported(dir, "scripts",
                       "{\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": "
                       "\"Digits\", \"individual_digits\": true}, {\"type\": \"UnicodeScripts\"}]}}",
                       "pre_tokenizer UnicodeScripts not supported");
    expect_unsupported(dir, "wp", "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}",
                       "model type WordPiece not supported");
    expect_unsupported(dir, "uni", "{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}",
                       "model type Unigram not supported");
    expect_unsupported(dir, "bertnorm", "{\"normalizer\": {\"type\": \"BertNormalizer\"}}",
                       "normalizer BertNormalizer not supported");
    expect_unsupported(dir, "precomp",
                       "{\"normalizer\": {\"type\": \"Precompiled\", \"precompiled_charsmap\": \"\"}}",
                       "normalizer Precompiled not supported");
    expect_unsupported(dir, "wpdec", "{\"decoder\": {\"type\": \"WordPiece\", \"prefix\": \"##\"}}",
                       "decoder WordPiece not supported");
    expect_unsupported(dir, "roberta",
                       "{\"post_processor\": {\"type\": \"RobertaProcessing\", \"sep\": [\"</s>\", 2], "
                       "\"cls\": [\"<s>\", 0]}}",
                       "post_processor RobertaProcessing not supported");
    /* a regex PCRE2 cannot compile: the message quotes the pattern and why */
    expect_unsupported(dir, "regex",
                       "{\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": "
                       "\"(?<=a+)b\"}, \"behavior\": \"Isolated\", \"invert\": false}}",
                       "regex '(?<=a+)b' not supported");
    tu_rm_rf(dir);
}

/* Every regex in the shipped files compiles (and the families' fixtures
 * check what they match); a few onig-vs-PCRE2 corners explicitly. */
static void test_regex_classes(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    /* \s is White_Space as in onig: U+180E (a Cf since Unicode 6.3) is not
     * one, while PCRE2's own \s includes it; \h is a hex digit in onig. */
    cJSON *ov = cJSON_Parse("{\"normalizer\": null, \"pre_tokenizer\": {\"type\": \"Sequence\", "
                            "\"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": "
                            "\"\\\\s+|\\\\h+\"}, \"behavior\": \"Removed\", \"invert\": false}, "
                            "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": "
                            "false}]}}");
    txc_tokenizer *t = load(write_variant(dir, "ws", "gpt2", ov));
    cJSON_Delete(ov);
    int32_t *ids;
    size_t n, len;
    const char *s = "x\xe1\xa0\x8ey zzCAFEzz";
    encode(t, s, strlen(s), false, &ids, &n);
    char *back = decode(t, ids, n, false, &len);
    assert_string_equal(back, "x\xe1\xa0\x8eyzzzz");
    free(back);
    free(ids);
    txc_tokenizer_free(t);
    tu_rm_rf(dir);
}

/* ---- speed ------------------------------------------------------------------------------------ */

/* The bench text of scripts/gen_tokenizer_fixtures.py --bench: the corpus,
 * one string per line, repeated up to >= 1,000,000 bytes. */
static char *bench_text(size_t *len)
{
    size_t unit = 0;
    for (const cJSON *e = corpus()->child; e; e = e->next)
        unit += strlen(e->valuestring) + 1;
    size_t reps = (1000000 + unit - 1) / unit;
    char *text = malloc(unit * reps + 1);
    assert_non_null(text);
    size_t n = 0;
    for (size_t r = 0; r < reps; r++)
        for (const cJSON *e = corpus()->child; e; e = e->next) {
            size_t k = strlen(e->valuestring);
            memcpy(text + n, e->valuestring, k);
            n += k;
            text[n++] = '\n';
        }
    text[n] = '\0';
    *len = n;
    return text;
}

static uint64_t fnv1a64(uint64_t h, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* Encode the ~1 MB bench text with every family: the ids and their decode
 * must be the crate's (tokenizer_ids/bench_1mb.json: count and FNV-1a
 * digests), and the time is printed (compare with
 * `scripts/gen_tokenizer_fixtures.py --bench`). */
static void test_encode_speed(void **state)
{
    (void)state;
    cJSON *ref = tu_load_json("tests/fixtures/tokenizer_ids/bench_1mb.json");
    size_t len;
    char *text = bench_text(&len);
    int checked = 0;
    for (const cJSON *f = cJSON_GetObjectItemCaseSensitive(ref, "families")->child; f; f = f->next) {
        const char *folder = cJSON_GetObjectItemCaseSensitive(f, "tokenizer")->valuestring;
        double t0 = now_s();
        txc_tokenizer *t = load(tok_dir(folder));
        double t1 = now_s();
        int32_t *ids;
        size_t n;
        encode(t, text, len, true, &ids, &n);
        double t2 = now_s();
        size_t back_len;
        char *back = decode(t, ids, n, false, &back_len);
        double t3 = now_s();
        print_message("speed %-12s load %6.0f ms; encode %.2f MB in %6.1f ms (%5.1f MB/s, %zu "
                      "tokens); decode %5.1f ms\n",
                      f->string, 1e3 * (t1 - t0), len / 1e6, 1e3 * (t2 - t1),
                      len / 1e6 / (t2 - t1), n, 1e3 * (t3 - t2));
        uint64_t h = 0xcbf29ce484222325ull;
        for (size_t i = 0; i < n; i++) {
            uint32_t v = (uint32_t)ids[i];
            unsigned char le[4] = {(unsigned char)v, (unsigned char)(v >> 8),
                                   (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
            h = fnv1a64(h, le, 4);
        }
        char ids_hex[17], dec_hex[17];
        snprintf(ids_hex, sizeof ids_hex, "%016llx", (unsigned long long)h);
        snprintf(dec_hex, sizeof dec_hex, "%016llx",
                 (unsigned long long)fnv1a64(0xcbf29ce484222325ull, (const unsigned char *)back,
                                             back_len));
        assert_int_equal(n, (size_t)cJSON_GetObjectItemCaseSensitive(f, "n_ids")->valuedouble);
        assert_string_equal(ids_hex, cJSON_GetObjectItemCaseSensitive(f, "ids_fnv")->valuestring);
        assert_string_equal(dec_hex,
                            cJSON_GetObjectItemCaseSensitive(f, "decode_fnv")->valuestring);
        checked++;
        free(back);
        free(ids);
        txc_tokenizer_free(t);
    }
    assert_int_equal(checked, 9);
    free(text);
    cJSON_Delete(ref);
}

/* ---- threads ---------------------------------------------------------------------------------- */

typedef struct encode_job {
    const txc_tokenizer *t;
    const char *text;
    size_t len;
    int32_t *ids;
    size_t n;
    txc_status st;
} encode_job;

static void *encode_thread(void *arg)
{
    encode_job *j = arg;
    j->st = txc_tokenizer_encode(j->t, j->text, j->len, true, &j->ids, &j->n);
    return NULL;
}

/* A tokenizer is immutable: encodes from many threads at once give the same
 * ids as one (the regex match data and the BPE cache are per call). */
static void test_threads(void **state)
{
    (void)state;
    txc_tokenizer *t = load(tok_dir("llama3"));
    size_t len;
    char *text = bench_text(&len);
    len /= 4;
    while (len && ((unsigned char)text[len] & 0xC0) == 0x80)
        len--;
    int32_t *want, *want1;
    size_t n_want, n_want1;
    encode(t, text, len, true, &want, &n_want);
    encode(t, text + 1, len - 1, true, &want1, &n_want1);
    enum { N = 4 };
    encode_job jobs[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        jobs[i] = (encode_job){.t = t, .text = text + (i % 2), .len = len - (i % 2)};
        assert_int_equal(pthread_create(&th[i], NULL, encode_thread, &jobs[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(jobs[i].st, TXC_OK);
        const int32_t *w = i % 2 ? want1 : want;
        size_t wn = i % 2 ? n_want1 : n_want;
        assert_int_equal(jobs[i].n, wn);
        assert_memory_equal(jobs[i].ids, w, wn * sizeof *w);
        free(jobs[i].ids);
    }
    free(want);
    free(want1);
    free(text);
    txc_tokenizer_free(t);
}

static int teardown(void **state)
{
    (void)state;
    cJSON_Delete(g_corpus);
    g_corpus = NULL;
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2),
        cmocka_unit_test(test_llama3),
        cmocka_unit_test(test_qwen3),
        cmocka_unit_test(test_deepseek_v3),
        cmocka_unit_test(test_gptoss),
        cmocka_unit_test(test_gemma3),
        cmocka_unit_test(test_tinyllama),
        cmocka_unit_test(test_mistral),
        cmocka_unit_test(test_phi3v),
        cmocka_unit_test(test_v_nfkc_lower_punct),
        cmocka_unit_test(test_v_nfd_strip_ws),
        cmocka_unit_test(test_v_split_behaviors),
        cmocka_unit_test(test_v_punct_contig_delim),
        cmocka_unit_test(test_v_added_tokens),
        cmocka_unit_test(test_v_metaspace_split),
        cmocka_unit_test(test_v_metaspace_first),
        cmocka_unit_test(test_v_llama3_bos),
        cmocka_unit_test(test_v_prefix_space),
        cmocka_unit_test(test_golden_vectors),
        cmocka_unit_test(test_ignore_merges),
        cmocka_unit_test(test_meta_cut),
        cmocka_unit_test(test_bytelevel),
        cmocka_unit_test(test_unsupported),
        cmocka_unit_test(test_regex_classes),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_encode_speed),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}
