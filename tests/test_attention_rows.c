/* Attention's row invariance (src/ops/attention.c): every query row's
 * output is bit-identical whatever the chunk of rows it is computed in
 * (1, 3, 16, 17, 64 rows, a compiled prefill's padding to a power of two),
 * the grouped-query ratio, the row's place in the batch, decode versus
 * prefill, and the thread count; and, at model level, compiled (padded)
 * and eager generation give the same logits bit for bit for prompts whose
 * length is not a power of two (stories260K and the GQA architecture
 * fixtures). */
#include "testutil.h"
#include "txc/batch.h"
#include "txc/ops.h"
#include "txc/threads.h"
#include "ops/kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x243f6a8885a308d3ull;
static float frand(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 40) / (double)(1ull << 24) * 4.0 - 2.0);
}

static txc_tensor *from_floats(txc_dtype dt, int ndim, const int64_t *shape, const float *x)
{
    int64_t n = txc_shape_numel(ndim, shape);
    void *buf = calloc((size_t)(n > 0 ? n : 1), txc_dtype_size(dt));
    assert_non_null(buf);
    for (int64_t i = 0; i < n; i++)
        txc_dtype_store(dt, buf, (size_t)i, x[i]);
    txc_tensor *t = txc_tensor_from_data(NULL, dt, ndim, shape, buf);
    free(buf);
    assert_non_null(t);
    return t;
}

typedef struct {
    int64_t B, Hq, Hkv, S, E; /* S: the cache's keys */
    txc_dtype dt;
    int64_t window;           /* sliding window (0: none) */
    double softcap;
    float *q;                 /* (B, Hq, S, E): the query of every position */
    txc_tensor *k, *v;        /* (B, Hkv, S, E) */
} problem;

static void problem_init(problem *p, int64_t B, int64_t Hq, int64_t Hkv, int64_t S, int64_t E, txc_dtype dt,
                         int64_t window, double softcap)
{
    *p = (problem){B, Hq, Hkv, S, E, dt, window, softcap, NULL, NULL, NULL};
    int64_t nq = B * Hq * S * E, nk = B * Hkv * S * E;
    p->q = malloc(sizeof(float) * (size_t)nq);
    float *kv = malloc(sizeof(float) * (size_t)nk);
    assert_non_null(p->q);
    assert_non_null(kv);
    for (int64_t i = 0; i < nq; i++)
        p->q[i] = frand();
    int64_t ks[4] = {B, Hkv, S, E};
    for (int64_t i = 0; i < nk; i++)
        kv[i] = frand();
    p->k = from_floats(dt, 4, ks, kv);
    for (int64_t i = 0; i < nk; i++)
        kv[i] = frand();
    p->v = from_floats(dt, 4, ks, kv);
    free(kv);
}

static void problem_free(problem *p)
{
    free(p->q);
    txc_tensor_release(p->k);
    txc_tensor_release(p->v);
}

/* Attention of the rows at positions p0 .. p0 + n - 1 followed by `pad`
 * padding rows (random queries at the next positions, as a compiled
 * prefill pads to its bucket); the result as float32 (B, Hq, n + pad, E),
 * malloc'd. */
static float *run_chunk(const problem *p, int64_t p0, int64_t n, int64_t pad)
{
    const int64_t L = n + pad, B = p->B, Hq = p->Hq, E = p->E, S = p->S;
    float *qd = malloc(sizeof(float) * (size_t)(B * Hq * L * E));
    int64_t *pos = malloc(sizeof(int64_t) * (size_t)L);
    assert_non_null(qd);
    assert_non_null(pos);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < L; i++)
                for (int64_t e = 0; e < E; e++)
                    qd[((b * Hq + h) * L + i) * E + e] =
                        i < n ? p->q[((b * Hq + h) * S + p0 + i) * E + e] : frand();
    for (int64_t i = 0; i < L; i++)
        pos[i] = p0 + i < S ? p0 + i : S - 1;
    int64_t qs[4] = {B, Hq, L, E};
    txc_tensor *q = from_floats(p->dt, 4, qs, qd);
    txc_tensor *cp = txc_tensor_from_data(NULL, TXC_I64, 1, &L, pos);
    assert_non_null(cp);
    txc_tensor *o = p->window || p->softcap > 0
                        ? txc_causal_attention_ext(q, p->k, p->v, cp, NAN, p->window, p->softcap)
                        : txc_causal_attention(q, p->k, p->v, cp, NAN);
    if (!o)
        fail_msg("attention: %s", txc_last_error());
    float *res = malloc(sizeof(float) * (size_t)(B * Hq * L * E));
    assert_non_null(res);
    txc_tensor *c = txc_contiguous(o);
    assert_non_null(c);
    const void *d = txc_tensor_data_ptr(c);
    for (int64_t i = 0; i < B * Hq * L * E; i++)
        res[i] = (float)txc_dtype_load(c->dtype, d, (size_t)i);
    txc_tensor_release(c);
    txc_tensor_release(o);
    txc_tensor_release(q);
    txc_tensor_release(cp);
    free(qd);
    free(pos);
    return res;
}

/* Every row of every chunk equals the row alone (one query row, a decode
 * step), bit for bit. */
static void check_problem(const problem *p, const char *what)
{
    const int64_t B = p->B, Hq = p->Hq, E = p->E, S = p->S;
    /* each position alone */
    float *alone = malloc(sizeof(float) * (size_t)(B * Hq * S * E));
    assert_non_null(alone);
    for (int64_t t = 0; t < S; t++) {
        float *r = run_chunk(p, t, 1, 0);
        for (int64_t bh = 0; bh < B * Hq; bh++)
            memcpy(alone + (bh * S + t) * E, r + bh * E, sizeof(float) * (size_t)E);
        free(r);
    }
    static const struct {
        int64_t n, pad;
    } chunks[] = {{1, 0}, {3, 0}, {16, 0}, {17, 0}, {64, 0}, {3, 1}, {17, 15}, {40, 24}, {5, 59}};
    for (size_t ci = 0; ci < sizeof chunks / sizeof *chunks; ci++) {
        const int64_t n = chunks[ci].n, pad = chunks[ci].pad, L = n + pad;
        for (int64_t p0 = 0; p0 + n <= S; p0 += n + 37) {
            float *r = run_chunk(p, p0, n, pad);
            for (int64_t bh = 0; bh < B * Hq; bh++)
                for (int64_t i = 0; i < n; i++) {
                    const float *got = r + (bh * L + i) * E, *want = alone + (bh * S + p0 + i) * E;
                    if (memcmp(got, want, sizeof(float) * (size_t)E) != 0) {
                        int64_t e = 0;
                        while (got[e] == want[e])
                            e++;
                        fail_msg("%s: chunk of %lld rows + %lld padding at position %lld: batch %lld head %lld "
                                 "position %lld element %lld is %.9g, alone %.9g",
                                 what, (long long)n, (long long)pad, (long long)p0, (long long)(bh / Hq),
                                 (long long)(bh % Hq), (long long)(p0 + i), (long long)e, got[e], want[e]);
                    }
                }
            free(r);
        }
    }
    free(alone);
}

static void rows_cases(void)
{
    static const struct {
        int64_t B, Hq, Hkv, S, E;
        txc_dtype dt;
        int64_t window;
        double softcap;
    } cases[] = {
        {1, 2, 2, 80, 64, TXC_F32, 0, 0},     /* MHA, one key block */
        {2, 4, 2, 150, 8, TXC_F32, 0, 0},     /* GQA 2 (stories260K's head_dim), two blocks */
        {1, 14, 2, 300, 64, TXC_BF16, 0, 0},  /* qwen2.5's GQA 7, bfloat16 cache, three blocks */
        {1, 6, 2, 140, 72, TXC_F16, 0, 0},    /* head_dim with a tail */
        {2, 3, 1, 200, 24, TXC_F32, 37, 0},   /* multi-query, sliding window */
        {1, 4, 2, 170, 16, TXC_F32, 0, 30.0}, /* soft-capping */
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        problem p;
        problem_init(&p, cases[c].B, cases[c].Hq, cases[c].Hkv, cases[c].S, cases[c].E, cases[c].dt,
                     cases[c].window, cases[c].softcap);
        char what[160];
        snprintf(what, sizeof what, "B%lld Hq%lld Hkv%lld S%lld E%lld %s window %lld softcap %g",
                 (long long)p.B, (long long)p.Hq, (long long)p.Hkv, (long long)p.S, (long long)p.E,
                 txc_dtype_name(p.dt), (long long)p.window, p.softcap);
        check_problem(&p, what);
        problem_free(&p);
    }
}

static void test_rows_serial(void **state)
{
    (void)state;
    assert_int_equal(txc_threads_set(1), TXC_OK);
    rows_cases();
    assert_int_equal(txc_threads_set(0), TXC_OK);
}

static void test_rows_threads(void **state)
{
    (void)state;
    assert_int_equal(txc_threads_set(3), TXC_OK);
    txc_kern_set_attention_par_min(0); /* every call on the pool */
    rows_cases();
    txc_kern_set_attention_par_min(-1);
    assert_int_equal(txc_threads_set(0), TXC_OK);
}

static void test_rows_portable(void **state)
{
    (void)state;
    txc_kern_set_simd_level(0);
    rows_cases();
    txc_kern_set_simd_level(-1);
}

/* The scores kernel alone: a score does not depend on the rows and keys
 * around it. */
static void test_scores_kernel(void **state)
{
    (void)state;
    enum { M = 9, N = 13, E = 44 };
    float q[M * E], k[N * E], all[M * N];
    for (int i = 0; i < M * E; i++)
        q[i] = frand();
    for (int i = 0; i < N * E; i++)
        k[i] = frand();
    txc_kern_attn_scores(M, N, E, q, E, k, TXC_F32, E, all, N);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float one;
            txc_kern_attn_scores(1, 1, E, q + i * E, E, k + j * E, TXC_F32, E, &one, 1);
            assert_memory_equal(&one, &all[i * N + j], sizeof one);
            double d = 0;
            for (int e = 0; e < E; e++)
                d += (double)q[i * E + e] * k[j * E + e];
            assert_true(fabs(d - one) < 1e-4 * (1 + fabs(d)));
        }
}

/* ---- model level: compiled (prefill padded to a power of two) equals eager ---- */

#define MAX_NEW 5

/* Greedy generation of one request through a batch of one slot with its
 * logits; jit on or off; the prompt prefilled in chunks of `chunk`. */
static void generate(txc_model *m, const int32_t *ids, int64_t n, bool jit, int64_t chunk, int32_t *tokens,
                     float *logits)
{
    txc_batch_options opt = txc_batch_default_options();
    opt.n_slots = 1;
    opt.max_cache_len = 64;
    opt.prefill_chunk = chunk;
    opt.jit = jit;
    txc_batch *b = txc_batch_new(m, &opt);
    assert_non_null(b);
    txc_batch_request q = txc_batch_default_request(m, NULL);
    q.input_ids = ids;
    q.n_input = n;
    q.gen.max_new_tokens = MAX_NEW;
    q.gen.n_eos = 0;
    q.gen.do_sample = false;
    q.gen.repetition_penalty = 1.0;
    q.logits_out = logits;
    q.cache_prompt = false;
    int s, got = 0;
    assert_int_equal(txc_batch_add(b, &q, &s), TXC_OK);
    txc_batch_event ev[TXC_BATCH_MAX_SLOTS];
    for (int guard = 0; got < MAX_NEW; guard++) {
        assert_true(guard < 100);
        int ne;
        assert_int_equal(txc_batch_step(b, ev, TXC_BATCH_MAX_SLOTS, &ne), TXC_OK);
        for (int k = 0; k < ne; k++)
            tokens[got++] = ev[k].token_id;
    }
    txc_batch_free(b);
}

static void check_compiled_eager(const char *name, const char *dir)
{
    txc_model *m = NULL;
    assert_int_equal(txc_model_load(dir, NULL, &m), TXC_OK);
    const int64_t V = txc_model_config(m)->vocab_size;
    static const int64_t lengths[] = {5, 13, 23, 37};
    for (size_t li = 0; li < sizeof lengths / sizeof *lengths; li++) {
        const int64_t n = lengths[li];
        int32_t ids[64];
        uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(n + 1);
        for (int64_t i = 0; i < n; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            ids[i] = (int32_t)((x >> 33) % (uint64_t)V);
        }
        int32_t tok[3][MAX_NEW];
        float *lg[3];
        for (int r = 0; r < 3; r++)
            assert_non_null(lg[r] = calloc((size_t)(MAX_NEW * V), sizeof(float)));
        generate(m, ids, n, false, 64, tok[0], lg[0]); /* eager, the prompt in one chunk */
        generate(m, ids, n, true, 64, tok[1], lg[1]);  /* compiled: padded to a power of two */
        generate(m, ids, n, false, 3, tok[2], lg[2]);  /* eager, chunks of 3 */
        static const char *kinds[] = {"eager", "compiled (padded prefill)", "eager in chunks of 3"};
        /* (chunks of 3 only up to the GEMM's row-invariance bound: a longer
         * prompt in one chunk takes the prefill GEMM, whose sums are ordered
         * otherwise, ops/kernels.h) */
        for (int r = 1; r < (n <= TXC_KERN_ROWS_INVARIANT_MAX ? 3 : 2); r++) {
            if (memcmp(lg[r], lg[0], sizeof(float) * (size_t)(MAX_NEW * V)) != 0) {
                int64_t i = 0;
                while (lg[r][i] == lg[0][i])
                    i++;
                fail_msg("%s, prompt of %lld ids: %s logits differ from eager at step %lld, id %lld (%.9g vs %.9g)",
                         name, (long long)n, kinds[r], (long long)(i / V), (long long)(i % V), lg[r][i], lg[0][i]);
            }
            assert_memory_equal(tok[r], tok[0], sizeof tok[0]);
        }
        for (int r = 0; r < 3; r++)
            free(lg[r]);
    }
    txc_model_free(m);
}

static void test_stories_compiled_eager(void **state)
{
    (void)state;
    check_compiled_eager("stories260K", tu_path("%s/models/stories260K", tu_shared_dir()));
}

static void test_arch_compiled_eager(void **state)
{
    (void)state;
    /* grouped-query fixtures (num_key_value_heads < num_attention_heads)
     * and the sliding window */
    static const char *names[] = {"llama_llama3", "mistral", "qwen2", "qwen2_sliding", "qwen3", "gemma2"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        check_compiled_eager(names[i], tu_path("%s/tests/fixtures/arch/%s", tu_source_dir(), names[i]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scores_kernel),
        cmocka_unit_test(test_rows_serial),
        cmocka_unit_test(test_rows_threads),
        cmocka_unit_test(test_rows_portable),
        cmocka_unit_test(test_stories_compiled_eager),
        cmocka_unit_test(test_arch_compiled_eager),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
