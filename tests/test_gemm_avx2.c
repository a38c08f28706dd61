/* The packed AVX2 prefill GEMM (src/ops/gemm_avx2.c):
 * - every row of an M-row product is bit-identical to that row computed
 *   alone (txc_kern_gemm_nt with M = 1: linalg.c's AVX2 dot-product tiles),
 *   for float32, bfloat16 and float16 B, M across the 4-row tiles and the
 *   256-row passes, N across the 3-column tiles, the 4-column tail and the
 *   column blocks, K across the 8-lane remainder and the 1024-k blocks, and
 *   row strides wider than the rows;
 * - the same through txc_kern_gemm_nt (the dispatch at SIMD level 1) on 1,
 *   2 and 3 threads;
 * - within the documented bound of the portable kernel and of a double
 *   reference: |C - ref| <= 2 (K/8 + 12) 2^-24 sum_k |A_ik B_jk|;
 * - not run (false) at SIMD level 0.
 * Skipped (with a message) where the CPU has no AVX2+FMA+F16C.
 */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/kernels.h"
#include "txc/threads.h"

static uint32_t rng = 88172645u;
static float rnd(void)
{
    rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
    return (float)(rng >> 8) / (float)(1 << 24) - 0.5f;
}

typedef struct problem {
    int64_t M, N, K, lda, ldb, ldc;
    float *A, *Bf, *C, *R;
    uint16_t *Bh;
} problem;

static void make(problem *p, int64_t M, int64_t N, int64_t K, int64_t pad)
{
    p->M = M, p->N = N, p->K = K, p->lda = K + pad, p->ldb = K + pad, p->ldc = N + pad;
    p->A = malloc(sizeof(float) * (size_t)(M * p->lda));
    p->Bf = malloc(sizeof(float) * (size_t)(N * p->ldb));
    p->Bh = malloc(2 * (size_t)(N * p->ldb));
    p->C = malloc(sizeof(float) * (size_t)(M * p->ldc));
    p->R = malloc(sizeof(float) * (size_t)(M * p->ldc));
    for (int64_t i = 0; i < M * p->lda; i++)
        p->A[i] = rnd();
    for (int64_t i = 0; i < N * p->ldb; i++)
        p->Bf[i] = rnd() * 2.0f;
}

static void drop(problem *p) { free(p->A), free(p->Bf), free(p->Bh), free(p->C), free(p->R); }

static const void *bdata(problem *p, txc_dtype dt)
{
    if (dt == TXC_F32)
        return p->Bf;
    txc_kern_from_f32(dt, p->Bf, p->Bh, p->N * p->ldb);
    return p->Bh;
}

/* B element (j, k) as float32. */
static double bval(const problem *p, txc_dtype dt, int64_t j, int64_t k)
{
    size_t o = (size_t)(j * p->ldb + k);
    if (dt == TXC_F32)
        return p->Bf[o];
    return dt == TXC_BF16 ? txc_bf16_to_f32(p->Bh[o]) : txc_f16_to_f32(p->Bh[o]);
}

static bool simd_ok(void)
{
    if (txc_kern_simd_level() < 1) {
        print_message("  no AVX2+FMA+F16C on this CPU: skipped\n");
        return false;
    }
    return true;
}

static const txc_dtype dts[] = {TXC_F32, TXC_BF16, TXC_F16};

/* Row by row (M = 1 each) against the whole product, bit for bit. */
static void check_rows(int64_t M, int64_t N, int64_t K, int64_t pad)
{
    problem p;
    make(&p, M, N, K, pad);
    for (size_t d = 0; d < 3; d++) {
        const void *B = bdata(&p, dts[d]);
        memset(p.C, 0x7f, sizeof(float) * (size_t)(M * p.ldc));
        assert_true(txc_kern_gemm_nt_avx2_packed(M, N, K, p.A, p.lda, B, dts[d], p.ldb, p.C, p.ldc));
        for (int64_t i = 0; i < M; i++)
            txc_kern_gemm_nt(1, N, K, p.A + i * p.lda, p.lda, B, dts[d], p.ldb, p.R + i * p.ldc, p.ldc);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                float c = p.C[i * p.ldc + j], r = p.R[i * p.ldc + j];
                if (memcmp(&c, &r, sizeof c) != 0)
                    fail_msg("%s M %lld N %lld K %lld pad %lld: C[%lld,%lld] = %.9g, alone %.9g",
                             txc_dtype_name(dts[d]), (long long)M, (long long)N, (long long)K, (long long)pad,
                             (long long)i, (long long)j, c, r);
            }
    }
    drop(&p);
}

static void test_rows_bit_identical(void **state)
{
    (void)state;
    if (!simd_ok())
        return;
    assert_int_equal(txc_threads_set(1), TXC_OK);
    txc_kern_set_simd_level(1);
    const int64_t Ms[] = {5, 6, 7, 8, 37, 130}, Ns[] = {1, 2, 3, 4, 5, 7, 13, 100, 197};
    const int64_t Ks[] = {1, 7, 8, 64, 333, 1024, 1025, 2100};
    for (size_t mi = 0; mi < sizeof Ms / sizeof *Ms; mi++)
        for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++)
            for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++)
                check_rows(Ms[mi], Ns[ni], Ks[ki], (mi + ni + ki) % 3 == 0 ? 3 : 0);
    /* More rows than a pass (256), and a K of several blocks with a remainder. */
    check_rows(300, 29, 2500, 1);
    /* Columns spanning several blocks (each block's panel in half of L2). */
    check_rows(9, 1000, 1100, 0);
    txc_kern_set_simd_level(-1);
    txc_threads_set(0);
}

/* The dispatch: txc_kern_gemm_nt at level 1 gives the same bits on 1-3
 * threads, and the same as the kernel called directly. */
static void test_dispatch_threads(void **state)
{
    (void)state;
    if (!simd_ok())
        return;
    txc_kern_set_simd_level(1);
    problem p;
    make(&p, 64, 4099, 333, 0);
    for (size_t d = 0; d < 3; d++) {
        const void *B = bdata(&p, dts[d]);
        assert_true(txc_kern_gemm_nt_avx2_packed(64, 4099, 333, p.A, p.lda, B, dts[d], p.ldb, p.R, p.ldc));
        for (int th = 1; th <= 3; th++) {
            assert_int_equal(txc_threads_set(th), TXC_OK);
            txc_kern_gemm_nt(64, 4099, 333, p.A, p.lda, B, dts[d], p.ldb, p.C, p.ldc);
            if (memcmp(p.C, p.R, sizeof(float) * (size_t)(64 * p.ldc)) != 0)
                fail_msg("%s: %d threads differ from the kernel alone", txc_dtype_name(dts[d]), th);
        }
    }
    drop(&p);
    txc_kern_set_simd_level(-1);
    txc_threads_set(0);
}

/* Against the portable kernel and a double-precision sum: the bound. */
static void test_error_bound(void **state)
{
    (void)state;
    if (!simd_ok())
        return;
    assert_int_equal(txc_threads_set(1), TXC_OK);
    const int64_t shapes[][3] = {{16, 37, 1000}, {9, 12, 4867}, {130, 5, 96}};
    double worst = 0;
    for (size_t s = 0; s < 3; s++) {
        problem p;
        make(&p, shapes[s][0], shapes[s][1], shapes[s][2], 0);
        for (size_t d = 0; d < 3; d++) {
            const void *B = bdata(&p, dts[d]);
            txc_kern_set_simd_level(1);
            assert_true(txc_kern_gemm_nt_avx2_packed(p.M, p.N, p.K, p.A, p.lda, B, dts[d], p.ldb, p.C, p.ldc));
            txc_kern_set_simd_level(0);
            txc_kern_gemm_nt(p.M, p.N, p.K, p.A, p.lda, B, dts[d], p.ldb, p.R, p.ldc);
            const double u = ldexp(1.0, -24), g = 2.0 * ((double)p.K / 8 + 12) * u;
            for (int64_t i = 0; i < p.M; i++)
                for (int64_t j = 0; j < p.N; j++) {
                    double exact = 0, mag = 0;
                    for (int64_t k = 0; k < p.K; k++) {
                        double t = (double)p.A[i * p.lda + k] * bval(&p, dts[d], j, k);
                        exact += t, mag += fabs(t);
                    }
                    double c = p.C[i * p.ldc + j], r = p.R[i * p.ldc + j];
                    if (!(fabs(c - r) <= g * mag) || !(fabs(c - exact) <= g * mag))
                        fail_msg("%s M %lld N %lld K %lld: C[%lld,%lld] %.9g portable %.9g exact %.9g, bound %.3g",
                                 txc_dtype_name(dts[d]), (long long)p.M, (long long)p.N, (long long)p.K, (long long)i,
                                 (long long)j, c, r, exact, g * mag);
                    if (mag > 0)
                        worst = fmax(worst, fabs(c - exact) / (mag * u));
                }
        }
        drop(&p);
    }
    print_message("  largest |C - exact| / (2^-24 sum|A B|): %.2f\n", worst);
    txc_kern_set_simd_level(0);
    float a = 1, c = 0;
    uint16_t b = 0x3f80;
    assert_false(txc_kern_gemm_nt_avx2_packed(1, 1, 1, &a, 1, &b, TXC_BF16, 1, &c, 1));
    txc_kern_set_simd_level(1);
    assert_false(txc_kern_gemm_nt_avx2_packed(1, 1, 1, &a, 1, &b, TXC_I32, 1, &c, 1));
    txc_kern_set_simd_level(-1);
    txc_threads_set(0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_bit_identical),
        cmocka_unit_test(test_dispatch_threads),
        cmocka_unit_test(test_error_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
