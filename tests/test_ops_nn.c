/* linalg / nn / attention ops: the PyTorch fixtures of
 * scripts/gen_op_fixtures_nn.py (tests/fixtures/ops_nn.json), run with the
 * SIMD kernels and again with the portable C kernels; larger shapes against a
 * naive reference (the blocked GEMM paths); the static-cache views (index_copy_
 * touching only its rows, attention over a narrowed cache without a copy);
 * and the error cases. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/kernels.h" /* txc_kern_set_simd_level: -1 automatic, 0 portable, 1 at most AVX2 */
#include "txc/array.h"
#include "txc/env.h"
#include "txc/ops.h"
#include "txc/threads.h"

#define TXC_MAX_OP_INPUTS_TEST 64


/* ---- fixtures ----------------------------------------------------------------- */

static const cJSON *arg(const cJSON *args, const char *name)
{
    return args ? cJSON_GetObjectItemCaseSensitive(args, name) : NULL;
}

static int arg_int(const cJSON *args, const char *name, int dflt)
{
    const cJSON *v = arg(args, name);
    return cJSON_IsNumber(v) ? v->valueint : dflt;
}

static double arg_num(const cJSON *args, const char *name, double dflt)
{
    const cJSON *v = arg(args, name);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

static bool arg_bool(const cJSON *args, const char *name, bool dflt)
{
    const cJSON *v = arg(args, name);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : dflt;
}

/* Run one fixture case; returns the result (a new reference) or NULL. */
static txc_tensor *run_case(const char *op, txc_tensor **in, int n, const cJSON *args, bool *inplace_done)
{
    *inplace_done = false;
    if (strcmp(op, "matmul") == 0)
        return txc_matmul(in[0], in[1]);
    if (strcmp(op, "linear") == 0)
        return txc_linear(in[0], in[1], arg_bool(args, "has_bias", false) ? in[2] : NULL);
    if (strcmp(op, "embedding") == 0)
        return txc_embedding(in[0], in[1]);
    if (strcmp(op, "rotary_embedding") == 0)
        return txc_rotary_embedding(in[0], in[1], in[2]);
    if (strcmp(op, "rms_norm") == 0)
        return txc_rms_norm(in[0], arg_bool(args, "has_weight", false) ? in[1] : NULL, arg_num(args, "eps", 1e-6));
    if (strcmp(op, "layer_norm") == 0) {
        bool hw = arg_bool(args, "has_weight", false), hb = arg_bool(args, "has_bias", false);
        int k = 1;
        txc_tensor *w = hw ? in[k++] : NULL, *b = hb ? in[k++] : NULL;
        return txc_layer_norm(in[0], w, b, arg_num(args, "eps", 1e-5));
    }
    if (strcmp(op, "cat") == 0)
        return txc_cat(in, n, arg_int(args, "dim", 0));
    if (strcmp(op, "stack") == 0)
        return txc_stack(in, n, arg_int(args, "dim", 0));
    if (strcmp(op, "index_select") == 0)
        return txc_index_select(in[0], arg_int(args, "dim", 0), in[1]);
    if (strcmp(op, "index_copy") == 0) {
        if (arg_bool(args, "inplace", false)) {
            *inplace_done = true;
            if (txc_index_copy_(in[0], arg_int(args, "dim", 0), in[1], in[2]) != TXC_OK)
                return NULL;
            return txc_tensor_retain(in[0]);
        }
        return txc_index_copy(in[0], arg_int(args, "dim", 0), in[1], in[2]);
    }
    if (strcmp(op, "tril") == 0)
        return txc_tril(in[0], arg_int(args, "diagonal", 0));
    if (strcmp(op, "triu") == 0)
        return txc_triu(in[0], arg_int(args, "diagonal", 0));
    if (strcmp(op, "sdpa") == 0)
        return txc_scaled_dot_product_attention(in[0], in[1], in[2], arg_bool(args, "has_mask", false) ? in[3] : NULL,
                                                arg_bool(args, "is_causal", false), arg_num(args, "scale", NAN));
    fail_msg("unknown fixture op '%s'", op);
    return NULL;
}

static int run_fixtures(void)
{
    cJSON *root = tu_load_json("tests/fixtures/ops_nn.json");
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases"), *c;
    int count = 0;
    cJSON_ArrayForEach(c, cases)
    {
        const char *name = cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring;
        const char *op = cJSON_GetObjectItemCaseSensitive(c, "op")->valuestring;
        const cJSON *inputs = cJSON_GetObjectItemCaseSensitive(c, "inputs"), *args = arg(c, "args");
        txc_tensor *in[TXC_MAX_OP_INPUTS_TEST];
        int n = 0;
        const cJSON *ij;
        cJSON_ArrayForEach(ij, inputs)
        {
            assert_true(n < TXC_MAX_OP_INPUTS_TEST);
            in[n++] = tu_tensor_from_json(ij);
        }
        txc_clear_error();
        bool inplace;
        txc_tensor *r = run_case(op, in, n, args, &inplace);
        tu_assert_tensor_close(name, r, cJSON_GetObjectItemCaseSensitive(c, "expected"),
                               cJSON_GetObjectItemCaseSensitive(c, "rtol")->valuedouble,
                               cJSON_GetObjectItemCaseSensitive(c, "atol")->valuedouble);
        txc_tensor_release(r);
        for (int i = 0; i < n; i++)
            txc_tensor_release(in[i]);
        count++;
    }
    cJSON_Delete(root);
    return count;
}

static void test_fixtures_simd(void **state)
{
    txc_kern_set_simd_level(-1);
    int n = run_fixtures();
    assert_true(n >= 100);
    print_message("  %d fixture cases (SIMD level %d)\n", n, txc_kern_simd_level());
}

static void test_fixtures_avx2(void **state)
{
    txc_kern_set_simd_level(1); /* AVX2 tiles even where AVX-512 is there */
    int n = run_fixtures();
    print_message("  %d fixture cases (SIMD level %d)\n", n, txc_kern_simd_level());
    txc_kern_set_simd_level(-1);
    assert_true(n >= 100);
}

static void test_fixtures_portable(void **state)
{
    txc_kern_set_simd_level(0);
    int n = run_fixtures();
    txc_kern_set_simd_level(-1);
    assert_true(n >= 100);
    print_message("  %d fixture cases (portable kernels)\n", n);
}

/* ---- larger shapes against a naive reference ---------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static float frand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static txc_tensor *rand_tensor(txc_dtype dt, int ndim, const int64_t *shape)
{
    int64_t n = txc_shape_numel(ndim, shape);
    void *buf = calloc((size_t)(n > 0 ? n : 1), txc_dtype_size(dt));
    for (int64_t i = 0; i < n; i++)
        txc_dtype_store(dt, buf, (size_t)i, frand());
    txc_tensor *t = txc_tensor_from_data(NULL, dt, ndim, shape, buf);
    free(buf);
    assert_non_null(t);
    return t;
}

static double at2(const txc_tensor *t, int64_t i, int64_t j)
{
    int64_t idx[2] = {i, j};
    return txc_tensor_item_at(t, idx);
}

/* linear (M, K) x (N, K)ᵀ + b with N spanning several weight blocks. */
static void check_linear_big(int64_t M, int64_t N, int64_t K, txc_dtype wdt)
{
    int64_t xs[2] = {M, K}, ws[2] = {N, K}, bs[1] = {N};
    txc_tensor *x = rand_tensor(TXC_F32, 2, xs), *w = rand_tensor(wdt, 2, ws), *b = rand_tensor(TXC_F32, 1, bs);
    txc_tensor *y = txc_linear(x, w, b);
    assert_non_null(y);
    assert_int_equal(txc_tensor_dtype(y), TXC_F32);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double ref = txc_tensor_item_at(b, &j), mag = fabs(ref);
            for (int64_t k = 0; k < K; k++) {
                double p = at2(x, i, k) * at2(w, j, k);
                ref += p;
                mag += fabs(p);
            }
            double got = at2(y, i, j);
            if (fabs(got - ref) > 1e-5 * mag + 1e-6)
                fail_msg("linear %lldx%lldx%lld (%s weight): [%lld,%lld] = %.9g, expected %.9g", (long long)M,
                         (long long)N, (long long)K, txc_dtype_name(wdt), (long long)i, (long long)j, got, ref);
        }
    txc_tensor_release(x);
    txc_tensor_release(w);
    txc_tensor_release(b);
    txc_tensor_release(y);
}

/* matmul (B, M, K) @ (K, N) (row-major B: the NN kernel) and @ (N, K)ᵀ. */
static void check_matmul_big(int64_t Bt, int64_t M, int64_t N, int64_t K, txc_dtype bdt, bool transposed)
{
    int64_t as[3] = {Bt, M, K}, bs[2] = {K, N}, bts[2] = {N, K};
    txc_tensor *a = rand_tensor(TXC_F32, 3, as), *braw = rand_tensor(bdt, 2, transposed ? bts : bs);
    txc_tensor *b = transposed ? txc_transpose(braw, 0, 1) : txc_tensor_retain(braw);
    txc_tensor *y = txc_matmul(a, b);
    assert_non_null(y);
    for (int64_t t = 0; t < Bt; t++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double ref = 0, mag = 0;
                for (int64_t k = 0; k < K; k++) {
                    int64_t ia[3] = {t, i, k};
                    double p = txc_tensor_item_at(a, ia) * at2(b, k, j);
                    ref += p;
                    mag += fabs(p);
                }
                int64_t iy[3] = {t, i, j};
                double got = txc_tensor_item_at(y, iy);
                double tol = txc_tensor_dtype(y) == TXC_F32 ? 1e-5 * mag + 1e-6 : 1e-2 * fabs(ref) + 1e-2 * mag;
                if (fabs(got - ref) > tol)
                    fail_msg("matmul (%lld,%lld,%lld)@(%lld,%lld) %s%s: [%lld,%lld,%lld] = %.9g, expected %.9g",
                             (long long)Bt, (long long)M, (long long)K, (long long)K, (long long)N,
                             txc_dtype_name(bdt), transposed ? " transposed" : "", (long long)t, (long long)i,
                             (long long)j, got, ref);
            }
    txc_tensor_release(a);
    txc_tensor_release(braw);
    txc_tensor_release(b);
    txc_tensor_release(y);
}

/* sdpa against a naive double reference: GQA, head dims with tails, causal
 * or a bool mask, f32 or half inputs (both the decode and the prefill paths). */
static void check_sdpa_big(int64_t B, int64_t Hq, int64_t Hkv, int64_t L, int64_t S, int64_t E, int64_t Ev,
                           txc_dtype dt, bool causal, bool masked)
{
    int64_t qs[4] = {B, Hq, L, E}, ks[4] = {B, Hkv, S, E}, vs[4] = {B, Hkv, S, Ev}, ms[2] = {L, S};
    txc_tensor *q = rand_tensor(dt, 4, qs), *k = rand_tensor(dt, 4, ks), *v = rand_tensor(dt, 4, vs), *mask = NULL;
    uint8_t *mv = malloc((size_t)(L * S));
    for (int64_t i = 0; i < L * S; i++)
        mv[i] = frand() > -0.4f || i % S == 0;
    if (masked)
        mask = txc_tensor_from_data(NULL, TXC_BOOL, 2, ms, mv);
    txc_tensor *o = txc_scaled_dot_product_attention(q, k, v, mask, causal, NAN);
    if (!o)
        fail_msg("sdpa failed: %s", txc_last_error());
    double *p = malloc((size_t)S * sizeof(double));
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < L; i++) {
                int64_t hk = h / (Hq / Hkv);
                double mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j < S; j++) {
                    bool ok = causal ? j <= i : masked ? mv[i * S + j] != 0 : true;
                    double d = 0;
                    for (int64_t e = 0; e < E; e++) {
                        int64_t iq[4] = {b, h, i, e}, ik[4] = {b, hk, j, e};
                        d += txc_tensor_item_at(q, iq) * txc_tensor_item_at(k, ik);
                    }
                    p[j] = ok ? d / sqrt((double)E) : -INFINITY;
                    mx = p[j] > mx ? p[j] : mx;
                }
                for (int64_t j = 0; j < S; j++)
                    sum += p[j] = exp(p[j] - mx);
                for (int64_t e = 0; e < Ev; e++) {
                    double ref = 0;
                    for (int64_t j = 0; j < S; j++) {
                        int64_t iv[4] = {b, hk, j, e};
                        ref += p[j] / sum * txc_tensor_item_at(v, iv);
                    }
                    int64_t io[4] = {b, h, i, e};
                    double got = txc_tensor_item_at(o, io);
                    double tol = dt == TXC_F32 ? 1e-5 : 1e-2;
                    if (fabs(got - ref) > tol * (1 + fabs(ref)))
                        fail_msg("sdpa %s B%lld Hq%lld Hkv%lld L%lld S%lld E%lld: [%lld,%lld,%lld,%lld] = %.9g, "
                                 "expected %.9g",
                                 txc_dtype_name(dt), (long long)B, (long long)Hq, (long long)Hkv, (long long)L,
                                 (long long)S, (long long)E, (long long)b, (long long)h, (long long)i, (long long)e,
                                 got, ref);
                }
            }
    free(p);
    free(mv);
    txc_tensor *all[] = {q, k, v, mask, o};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        txc_tensor_release(all[i]);
}

static void big_shapes(void)
{
    static const int64_t ms[] = {1, 3, 4, 9};
    static const txc_dtype dts[] = {TXC_F32, TXC_BF16, TXC_F16};
    for (int d = 0; d < 3; d++)
        for (int i = 0; i < 4; i++)
            check_linear_big(ms[i], 301, 203, dts[d]);
    check_linear_big(2, 70, 2100, TXC_F32); /* K larger than a weight block */
    check_matmul_big(2, 5, 37, 29, TXC_F32, false);
    check_matmul_big(1, 6, 35, 40, TXC_BF16, false);
    check_matmul_big(1, 5, 23, 64, TXC_F16, false);
    check_matmul_big(2, 7, 13, 41, TXC_F32, true);
    for (int d = 0; d < 3; d++) {
        check_sdpa_big(2, 6, 2, 7, 45, 72, 40, dts[d], true, false);  /* prefill: K transposed, NN */
        check_sdpa_big(1, 6, 2, 1, 45, 72, 40, dts[d], false, true);  /* decode: K in place, NT */
        check_sdpa_big(1, 4, 4, 9, 70, 24, 24, dts[d], false, true);
    }
}

static void test_big_shapes_simd(void **state)
{
    txc_kern_set_simd_level(-1);
    big_shapes();
}

static void test_big_shapes_avx2(void **state)
{
    txc_kern_set_simd_level(1);
    big_shapes();
    txc_kern_set_simd_level(-1);
}

static void test_big_shapes_portable(void **state)
{
    txc_kern_set_simd_level(0);
    big_shapes();
    txc_kern_set_simd_level(-1);
}

/* ---- static cache: index_copy_ and attention over a narrowed view ------------------------- */

static void test_static_cache(void **state)
{
    const int64_t B = 1, Hkv = 2, Hq = 4, MAX = 10, E = 8, L = 3;
    int64_t cs[4] = {B, Hkv, MAX, E};
    txc_tensor *kc = txc_full(NULL, 4, cs, 7.0, TXC_F32), *vc = txc_full(NULL, 4, cs, -7.0, TXC_F32);
    assert_non_null(kc);
    assert_non_null(vc);
    void *kbase = txc_tensor_data_ptr(kc);
    /* prefill 3 positions, then decode one at position 3 */
    int64_t ss[4] = {B, Hkv, L, E}, s1[4] = {B, Hkv, 1, E};
    txc_tensor *kn = rand_tensor(TXC_F32, 4, ss), *vn = rand_tensor(TXC_F32, 4, ss);
    int64_t pos[3] = {0, 1, 2}, pos3 = 3, ps[1] = {3}, p1[1] = {1};
    txc_tensor *cp = txc_tensor_from_data(NULL, TXC_I64, 1, ps, pos), *cp1 = txc_tensor_from_data(NULL, TXC_I64, 1, p1, &pos3);
    assert_int_equal(txc_index_copy_(kc, 2, cp, kn), TXC_OK);
    assert_int_equal(txc_index_copy_(vc, 2, cp, vn), TXC_OK);
    txc_tensor *kd = rand_tensor(TXC_F32, 4, s1), *vd = rand_tensor(TXC_F32, 4, s1);
    assert_int_equal(txc_index_copy_(kc, 2, cp1, kd), TXC_OK);
    assert_int_equal(txc_index_copy_(vc, 2, cp1, vd), TXC_OK);
    assert_ptr_equal(txc_tensor_data_ptr(kc), kbase); /* in place */
    /* rows 4.. untouched, rows 0..3 written */
    for (int64_t h = 0; h < Hkv; h++)
        for (int64_t s = 0; s < MAX; s++)
            for (int64_t e = 0; e < E; e++) {
                int64_t ic[4] = {0, h, s, e};
                double got = txc_tensor_item_at(kc, ic);
                if (s < 3) {
                    int64_t in_[4] = {0, h, s, e};
                    assert_true(got == txc_tensor_item_at(kn, in_));
                } else if (s == 3) {
                    int64_t in_[4] = {0, h, 0, e};
                    assert_true(got == txc_tensor_item_at(kd, in_));
                } else {
                    assert_true(got == 7.0);
                }
            }
    /* attention of one new query over the valid prefix (a narrowed view) equals
     * attention over a contiguous copy of it */
    int64_t qs[4] = {B, Hq, 1, E};
    txc_tensor *q = rand_tensor(TXC_F32, 4, qs);
    txc_tensor *kv = txc_narrow(kc, 2, 0, 4), *vv = txc_narrow(vc, 2, 0, 4);
    assert_false(txc_tensor_is_contiguous(kv));
    txc_tensor *kcopy = txc_clone(kv), *vcopy = txc_clone(vv);
    txc_tensor *o1 = txc_scaled_dot_product_attention(q, kv, vv, NULL, false, NAN);
    txc_tensor *o2 = txc_scaled_dot_product_attention(q, kcopy, vcopy, NULL, false, NAN);
    assert_non_null(o1);
    assert_non_null(o2);
    float a1[32], a2[32];
    assert_int_equal(txc_tensor_copy_to_f32(o1, a1, 32), TXC_OK);
    assert_int_equal(txc_tensor_copy_to_f32(o2, a2, 32), TXC_OK);
    assert_memory_equal(a1, a2, sizeof a1);
    /* the masked full-length cache gives the same result (transformers' way) */
    int64_t ms[4] = {1, 1, 1, MAX};
    uint8_t mv[10] = {1, 1, 1, 1, 0, 0, 0, 0, 0, 0};
    txc_tensor *mask = txc_tensor_from_data(NULL, TXC_BOOL, 4, ms, mv);
    txc_tensor *o3 = txc_scaled_dot_product_attention(q, kc, vc, mask, false, NAN);
    assert_non_null(o3);
    float a3[32];
    assert_int_equal(txc_tensor_copy_to_f32(o3, a3, 32), TXC_OK);
    for (int i = 0; i < 32; i++)
        assert_true(fabsf(a3[i] - a1[i]) <= 1e-6f + 1e-5f * fabsf(a1[i]));
    txc_tensor *all[] = {kc, vc, kn, vn, cp, cp1, kd, vd, q, kv, vv, kcopy, vcopy, o1, o2, mask, o3};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        txc_tensor_release(all[i]);
}

/* ---- errors ---------------------------------------------------------------------------- */

static txc_tensor *zeros(int ndim, const int64_t *shape, txc_dtype dt)
{
    txc_tensor *t = txc_zeros(NULL, ndim, shape, dt);
    assert_non_null(t);
    return t;
}

static void expect_error(txc_tensor *r, txc_status st, const char *needle1, const char *needle2)
{
    assert_null(r);
    assert_int_equal(txc_last_status(), st);
    if (needle1 && !strstr(txc_last_error(), needle1))
        fail_msg("error '%s' does not mention '%s'", txc_last_error(), needle1);
    if (needle2 && !strstr(txc_last_error(), needle2))
        fail_msg("error '%s' does not mention '%s'", txc_last_error(), needle2);
    txc_clear_error();
}

static void test_errors_linalg(void **state)
{
    int64_t s23[2] = {2, 3}, s45[2] = {4, 5}, s3[1] = {3};
    txc_tensor *a = zeros(2, s23, TXC_F32), *b = zeros(2, s45, TXC_F32), *v3 = zeros(1, s3, TXC_F32);
    txc_clear_error();
    expect_error(txc_matmul(a, b), TXC_ERR_INVALID, "(2, 3)", "(4, 5)");
    expect_error(txc_linear(a, b, NULL), TXC_ERR_INVALID, "(2, 3)", "(4, 5)");
    int64_t s53[2] = {5, 3};
    txc_tensor *w = zeros(2, s53, TXC_F32);
    expect_error(txc_linear(a, w, v3), TXC_ERR_INVALID, "bias", "(3,)");
    txc_tensor *sc = txc_full(NULL, 0, NULL, 1.0, TXC_F32);
    expect_error(txc_matmul(sc, v3), TXC_ERR_INVALID, "1-D", NULL);
    int64_t s24[3] = {2, 2, 3}, s34[3] = {3, 3, 4};
    txc_tensor *ba = zeros(3, s24, TXC_F32), *bb = zeros(3, s34, TXC_F32);
    expect_error(txc_matmul(ba, bb), TXC_ERR_INVALID, "broadcast", NULL);
    /* a NULL input keeps the first error */
    expect_error(txc_matmul(a, b), TXC_ERR_INVALID, NULL, NULL);
    assert_null(txc_matmul(a, b));
    assert_null(txc_linear(NULL, w, NULL));
    assert_non_null(strstr(txc_last_error(), "aten::matmul"));
    txc_clear_error();
    txc_tensor *all[] = {a, b, v3, w, sc, ba, bb};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        txc_tensor_release(all[i]);
}

static void test_errors_nn(void **state)
{
    int64_t ws[2] = {10, 4}, is[2] = {1, 3};
    txc_tensor *w = zeros(2, ws, TXC_F32);
    int64_t bad[3] = {1, 10, 2};
    txc_tensor *ids = txc_tensor_from_data(NULL, TXC_I64, 2, is, bad);
    txc_clear_error();
    expect_error(txc_embedding(w, ids), TXC_ERR_INVALID, "id 10", "10 rows");
    int32_t neg[3] = {0, -1, 2};
    txc_tensor *ids32 = txc_tensor_from_data(NULL, TXC_I32, 2, is, neg);
    expect_error(txc_embedding(w, ids32), TXC_ERR_INVALID, "id -1", "10 rows");
    txc_tensor *fids = zeros(2, is, TXC_F32);
    expect_error(txc_embedding(w, fids), TXC_ERR_INVALID, "int", NULL);

    /* index_copy_ into a read-only (mmap'd) tensor */
    char *dir = tu_mkdtemp();
    assert_non_null(dir);
    const char *path = tu_path("%s/w.bin", dir);
    float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    assert_int_equal(tu_write_file(path, data, sizeof data), 0);
    txc_storage *st = txc_storage_mmap_file(path);
    assert_non_null(st);
    int64_t s42[2] = {4, 2}, s12[2] = {1, 2}, s1[1] = {1};
    txc_array *arr = txc_array_from_storage(st, 0, TXC_F32, 2, s42);
    assert_non_null(arr);
    txc_tensor *ro = txc_tensor_wrap(NULL, arr);
    assert_non_null(ro);
    txc_tensor *src = zeros(2, s12, TXC_F32);
    int64_t one = 1;
    txc_tensor *ix = txc_tensor_from_data(NULL, TXC_I64, 1, s1, &one);
    assert_int_equal(txc_index_copy_(ro, 0, ix, src), TXC_ERR_INVALID);
    assert_non_null(strstr(txc_last_error(), "read-only"));
    txc_clear_error();
    int64_t i10[2] = {1, 0};
    assert_true(txc_tensor_item_at(ro, i10) == 3.0);
    /* the functional form works on it and leaves it unchanged */
    txc_tensor *cpy = txc_index_copy(ro, 0, ix, src);
    assert_non_null(cpy);
    assert_true(txc_tensor_item_at(cpy, i10) == 0.0);
    assert_true(txc_tensor_item_at(ro, i10) == 3.0);

    /* index out of range: nothing written */
    txc_tensor *self = txc_clone(ro);
    int64_t two[2] = {0, 4}, s2[1] = {2}, s22[2] = {2, 2};
    txc_tensor *ix2 = txc_tensor_from_data(NULL, TXC_I64, 1, s2, two), *src2 = zeros(2, s22, TXC_F32);
    assert_int_equal(txc_index_copy_(self, 0, ix2, src2), TXC_ERR_INVALID);
    assert_non_null(strstr(txc_last_error(), "index 4"));
    txc_clear_error();
    int64_t i00[2] = {0, 0};
    assert_true(txc_tensor_item_at(self, i00) == 1.0);
    /* source shape mismatch */
    expect_error(txc_index_copy(self, 0, ix, src2), TXC_ERR_INVALID, "(2, 2)", "(4, 2)");
    /* index_copy_ into a non-contiguous view */
    txc_tensor *tv = txc_transpose(self, 0, 1);
    assert_int_not_equal(txc_index_copy_(tv, 0, ix, src), TXC_OK);
    txc_clear_error();
    expect_error(txc_index_select(self, 0, ix2), TXC_ERR_INVALID, "index 4", "size 4");
    expect_error(txc_index_select(self, 2, ix), TXC_ERR_INVALID, "dim", NULL);

    /* cat / stack shapes, tril dims, norms */
    int64_t s23[2] = {2, 3}, s33[2] = {3, 3}, s3[1] = {3};
    txc_tensor *a = zeros(2, s23, TXC_F32), *b = zeros(2, s33, TXC_F32), *v3 = zeros(1, s3, TXC_F32);
    txc_tensor *ab[2] = {a, b}, *av[2] = {a, v3};
    expect_error(txc_cat(ab, 2, 1), TXC_ERR_INVALID, "(2, 3)", "(3, 3)");
    expect_error(txc_cat(av, 2, 0), TXC_ERR_INVALID, "dims", NULL);
    expect_error(txc_stack(ab, 2, 0), TXC_ERR_INVALID, "(2, 3)", "(3, 3)");
    txc_tensor *sc = txc_full(NULL, 0, NULL, 1.0, TXC_F32), *scs[1] = {sc};
    expect_error(txc_cat(scs, 1, 0), TXC_ERR_INVALID, "zero-dimensional", NULL);
    expect_error(txc_tril(v3, 0), TXC_ERR_INVALID, "2 dimensions", NULL);
    expect_error(txc_rms_norm(a, b, 1e-6), TXC_ERR_INVALID, "weight", NULL);
    expect_error(txc_layer_norm(a, NULL, b, 1e-6), TXC_ERR_INVALID, "bias", NULL);

    txc_tensor *all[] = {w, ids, ids32, fids, ro, src, ix, cpy, self, ix2, src2, tv, a, b, v3, sc};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        txc_tensor_release(all[i]);
    txc_array_release(arr);
    txc_storage_release(st);
    tu_rm_rf(dir);
}

static void test_errors_sdpa(void **state)
{
    int64_t qs[4] = {1, 3, 2, 4}, ks[4] = {1, 2, 2, 4}, k4[4] = {1, 4, 2, 4}, kb[4] = {2, 4, 2, 4},
            ke[4] = {1, 4, 2, 5};
    txc_tensor *q3 = zeros(4, qs, TXC_F32), *k2 = zeros(4, ks, TXC_F32);
    txc_clear_error();
    expect_error(txc_scaled_dot_product_attention(q3, k2, k2, NULL, false, NAN), TXC_ERR_INVALID, "multiple",
                 "(1, 3, 2, 4)");
    int64_t q4s[4] = {1, 4, 2, 4}, ms[2] = {2, 2};
    txc_tensor *q4 = zeros(4, q4s, TXC_F32), *k4t = zeros(4, k4, TXC_F32);
    txc_tensor *mask = txc_ones(NULL, 2, ms, TXC_BOOL);
    expect_error(txc_scaled_dot_product_attention(q4, k4t, k4t, mask, true, NAN), TXC_ERR_INVALID, "is_causal", NULL);
    txc_tensor *kbt = zeros(4, kb, TXC_F32);
    expect_error(txc_scaled_dot_product_attention(q4, kbt, kbt, NULL, false, NAN), TXC_ERR_INVALID, "batch", NULL);
    txc_tensor *ket = zeros(4, ke, TXC_F32);
    expect_error(txc_scaled_dot_product_attention(q4, ket, ket, NULL, false, NAN), TXC_ERR_INVALID, "head_dim", NULL);
    int64_t bm[2] = {3, 2};
    txc_tensor *badmask = txc_ones(NULL, 2, bm, TXC_BOOL);
    expect_error(txc_scaled_dot_product_attention(q4, k4t, k4t, badmask, false, NAN), TXC_ERR_INVALID, "broadcast",
                 NULL);
    int64_t s3[3] = {4, 2, 4};
    txc_tensor *q3d = zeros(3, s3, TXC_F32);
    expect_error(txc_scaled_dot_product_attention(q3d, q3d, q3d, NULL, false, NAN), TXC_ERR_INVALID, "4-D", NULL);
    txc_tensor *all[] = {q3, k2, q4, k4t, mask, kbt, ket, badmask, q3d};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        txc_tensor_release(all[i]);
}

/* txc::rotary_embedding gives the bits of the composition x * cos +
 * cat(-x2, x1) * sin (torch's apply_rotary_pos_emb) for float32, bfloat16,
 * float16 and mixed inputs, with cos/sin broadcast and x transposed. */
static void test_rotary_bits(void **state)
{
    (void)state;
    const txc_dtype dts[][2] = {{TXC_F32, TXC_F32}, {TXC_BF16, TXC_BF16}, {TXC_F16, TXC_F16},
                                {TXC_BF16, TXC_F32}, {TXC_F32, TXC_BF16}};
    for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++)
        for (int transposed = 0; transposed < 2; transposed++) {
            int mark = txc_env_scope_begin(txc_env_active());
            int64_t xs[4] = {2, 3, 7, 16}, xt[4] = {2, 7, 3, 16}, cs[4] = {2, 1, 7, 16};
            txc_tensor *x = transposed ? txc_transpose(rand_tensor(dts[k][0], 4, xt), 1, 2) : rand_tensor(dts[k][0], 4, xs);
            txc_tensor *c = rand_tensor(dts[k][1], 4, cs), *sn = rand_tensor(dts[k][1], 4, cs);
            txc_tensor *halves[2] = {txc_neg(txc_narrow(x, -1, 8, 8)), txc_narrow(x, -1, 0, 8)};
            txc_tensor *want = txc_add(txc_mul(x, c), txc_mul(txc_cat(halves, 2, -1), sn));
            txc_tensor *got = txc_rotary_embedding(x, c, sn);
            assert_non_null(want);
            assert_non_null(got);
            assert_int_equal(txc_tensor_dtype(got), txc_tensor_dtype(want));
            int64_t n = txc_tensor_numel(want);
            float *a = malloc(sizeof(float) * (size_t)n), *b = malloc(sizeof(float) * (size_t)n);
            assert_int_equal(txc_tensor_copy_to_f32(got, a, n), TXC_OK);
            assert_int_equal(txc_tensor_copy_to_f32(want, b, n), TXC_OK);
            assert_memory_equal(a, b, sizeof(float) * (size_t)n);
            free(a), free(b);
            txc_env_scope_end(txc_env_active(), mark);
        }
}

/* rms_norm's rows split over the threads (above its bound in nn.c): the
 * bits of one thread, for float32 and bfloat16 inputs, a strided input and
 * no weight. */
static void test_rms_norm_threads(void **state)
{
    (void)state;
    int threads = txc_threads_get();
    for (int k = 0; k < 3; k++) {
        int mark = txc_env_scope_begin(txc_env_active());
        txc_tensor *x = k == 0   ? rand_tensor(TXC_F32, 3, (int64_t[]){1, 130, 1000})
                        : k == 1 ? rand_tensor(TXC_BF16, 3, (int64_t[]){1, 130, 1000})
                                 : txc_transpose(rand_tensor(TXC_F32, 3, (int64_t[]){1, 1000, 130}), 1, 2);
        txc_tensor *w = k == 2 ? NULL : rand_tensor(TXC_F32, 1, (int64_t[]){1000});
        float *r[2];
        for (int t = 0; t < 2; t++) {
            assert_int_equal(txc_threads_set(t ? 3 : 1), TXC_OK);
            txc_tensor *y = txc_rms_norm(x, w, 1e-6);
            assert_non_null(y);
            int64_t n = txc_tensor_numel(y);
            assert_int_equal(n, 130000);
            r[t] = malloc(sizeof(float) * (size_t)n);
            assert_int_equal(txc_tensor_copy_to_f32(y, r[t], n), TXC_OK);
        }
        assert_memory_equal(r[0], r[1], sizeof(float) * 130000);
        free(r[0]), free(r[1]);
        txc_env_scope_end(txc_env_active(), mark);
    }
    assert_int_equal(txc_threads_set(threads), TXC_OK);
}

static void test_errors_rotary(void **state)
{
    (void)state;
    int64_t xs[4] = {1, 2, 3, 8}, odd[4] = {1, 2, 3, 7}, cs[2] = {3, 8}, bad[2] = {4, 8}, co[2] = {3, 7};
    txc_tensor *x = zeros(4, xs, TXC_F32), *xo = zeros(4, odd, TXC_F32), *c = zeros(2, cs, TXC_F32),
               *cb = zeros(2, bad, TXC_F32), *cod = zeros(2, co, TXC_F32), *ids = zeros(4, xs, TXC_I64);
    txc_clear_error();
    expect_error(txc_rotary_embedding(xo, cod, cod), TXC_ERR_INVALID, "even", "7");
    expect_error(txc_rotary_embedding(x, cb, c), TXC_ERR_INVALID, "broadcast", NULL);
    expect_error(txc_rotary_embedding(x, c, cb), TXC_ERR_INVALID, "broadcast", NULL);
    expect_error(txc_rotary_embedding(ids, c, c), TXC_ERR_INVALID, "float", NULL);
    txc_tensor *all[] = {x, xo, c, cb, cod, ids};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        txc_tensor_release(all[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures_simd),
        cmocka_unit_test(test_fixtures_avx2),
        cmocka_unit_test(test_fixtures_portable),
        cmocka_unit_test(test_big_shapes_simd),
        cmocka_unit_test(test_big_shapes_avx2),
        cmocka_unit_test(test_big_shapes_portable),
        cmocka_unit_test(test_static_cache),
        cmocka_unit_test(test_errors_linalg),
        cmocka_unit_test(test_errors_nn),
        cmocka_unit_test(test_errors_sdpa),
        cmocka_unit_test(test_errors_rotary),
        cmocka_unit_test(test_rotary_bits),
        cmocka_unit_test(test_rms_norm_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
