/* The packed AVX2 prefill GEMM (src/ops/gemm_avx2.c, contract in
 * src/ops/kernels.h), and its AVX-512 twin of the same bits
 * (txc_kern_gemm_nt_fma512, src/ops/gemm_bf16dot.c's driver on float32
 * FMA): every test below runs for each (the "avx2" and "avx512" groups):
 * - every C[i,j] bit-identical to the scalar fused multiply-add chain
 *   c = fmaf(A[i,k], B[j,k], c), k = 0..K-1 from 0, for float32, bfloat16
 *   and float16 B, over M across the 6-row tiles and the 192-row blocks, N
 *   across the 16-column tiles, K across the 4-step unroll and the 256-k
 *   blocks, and row strides (lda, ldb, ldc) wider than the rows; C's
 *   entries outside the M x N block untouched;
 * - a row alone (M = 1) has the bits it has inside any M;
 * - txc_kern_gemm_nt at SIMD level 1 (level 2: float16 B, and bfloat16 B
 *   with the VDPBF16PS GEMM off) with M above the row-invariance bound
 *   runs it: the same bits on 1, 2 and 3 threads, also at prefill shapes
 *   (M = 128: 6- and 4-row tiles; A packed by the threads);
 * - the group of sibling GEMMs on one A (txc_kern_gemm_nt_avx2_packed_group):
 *   each part the chain's bits on 1-3 threads;
 * - within the documented bound of a double reference:
 *   |C - exact| <= γ(K-1) sum_k |A_ik B_jk|, γ(n) = n 2^-24 / (1 - n 2^-24);
 * - not run (false) at SIMD level 0, for other dtypes, or for empty shapes.
 * Skipped (with a message) where the CPU has no AVX2+FMA+F16C (no AVX-512
 * for the second group).
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

/* A (M x K), B (N x K) with row strides K + pa, K + pb; C rows of N + pc. */
static void make(problem *p, int64_t M, int64_t N, int64_t K, int64_t pa, int64_t pb, int64_t pc)
{
    p->M = M, p->N = N, p->K = K, p->lda = K + pa, p->ldb = K + pb, p->ldc = N + pc;
    p->A = malloc(sizeof(float) * (size_t)(M * p->lda));
    p->Bf = malloc(sizeof(float) * (size_t)(N * p->ldb));
    p->Bh = malloc(2 * (size_t)(N * p->ldb));
    p->C = malloc(sizeof(float) * (size_t)(M * p->ldc));
    p->R = malloc(sizeof(float) * (size_t)(M * p->ldc));
    assert_non_null(p->A), assert_non_null(p->Bf), assert_non_null(p->Bh), assert_non_null(p->C);
    assert_non_null(p->R);
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

/* B element (j, k) as float32 (exact). */
static float bval(const problem *p, txc_dtype dt, int64_t j, int64_t k)
{
    size_t o = (size_t)(j * p->ldb + k);
    if (dt == TXC_F32)
        return p->Bf[o];
    return dt == TXC_BF16 ? txc_bf16_to_f32(p->Bh[o]) : txc_f16_to_f32(p->Bh[o]);
}

/* The contract's order: R[i,j] = fmaf chain over k; the padding of R's rows
 * set to the sentinel the kernel's C starts with. */
static void reference(problem *p, txc_dtype dt)
{
    for (int64_t i = 0; i < p->M; i++)
        for (int64_t j = 0; j < p->ldc; j++) {
            float c = 0.0f;
            if (j < p->N)
                for (int64_t k = 0; k < p->K; k++)
                    c = fmaf(p->A[i * p->lda + k], bval(p, dt, j, k), c);
            else
                memset(&c, 0x7f, sizeof c);
            p->R[i * p->ldc + j] = c;
        }
}

/* The kernel under test: 1 the AVX2 packed GEMM, 2 the AVX-512 FMA twin
 * (set by the group's setup). */
static int level_ut = 1;

static int setup_avx2(void **state) { (void)state, level_ut = 1; return 0; }
static int setup_avx512(void **state) { (void)state, level_ut = 2; return 0; }

static bool simd_ok(void)
{
    if (txc_kern_simd_level() < level_ut) {
        print_message("  %s on this CPU: skipped\n", level_ut == 1 ? "no AVX2+FMA+F16C" : "no AVX-512");
        return false;
    }
    return true;
}

/* A test's start: false (skipped) without the kernel's SIMD level; else
 * that level and, when threads > 0, that many threads. finish() restores
 * both. */
static bool start(int threads)
{
    if (!simd_ok())
        return false;
    if (threads > 0)
        assert_int_equal(txc_threads_set(threads), TXC_OK);
    txc_kern_set_simd_level(level_ut);
    return true;
}

static void finish(void)
{
    txc_kern_set_simd_level(-1);
    txc_kern_set_avx512bf16(-1);
    txc_threads_set(0);
}

/* C filled with the sentinel the reference's padding holds. */
static void poison(problem *p) { memset(p->C, 0x7f, sizeof(float) * (size_t)(p->M * p->ldc)); }

/* The packed kernel on all of p (B of dtype dt), asserted to run. */
static void packed(problem *p, const void *B, txc_dtype dt)
{
    assert_true(level_ut == 1
                    ? txc_kern_gemm_nt_avx2_packed(p->M, p->N, p->K, p->A, p->lda, B, dt, p->ldb, p->C, p->ldc)
                    : txc_kern_gemm_nt_fma512(p->M, p->N, p->K, p->A, p->lda, B, dt, p->ldb, p->C, p->ldc));
}

static bool packed_group(int n, const txc_gemv_part *parts, int64_t M, int64_t K, const float *A, int64_t lda)
{
    return level_ut == 1 ? txc_kern_gemm_nt_avx2_packed_group(n, parts, M, K, A, lda)
                         : txc_kern_gemm_nt_fma512_group(n, parts, M, K, A, lda);
}

static const txc_dtype dts[] = {TXC_F32, TXC_BF16, TXC_F16};

static void expect_equal(const problem *p, txc_dtype dt, const char *what)
{
    for (int64_t i = 0; i < p->M; i++)
        for (int64_t j = 0; j < p->ldc; j++) {
            float c = p->C[i * p->ldc + j], r = p->R[i * p->ldc + j];
            if (memcmp(&c, &r, sizeof c) != 0)
                fail_msg("%s %s M %lld N %lld K %lld lda %lld ldb %lld ldc %lld: C[%lld,%lld] = %.9g, expected %.9g",
                         what, txc_dtype_name(dt), (long long)p->M, (long long)p->N, (long long)p->K,
                         (long long)p->lda, (long long)p->ldb, (long long)p->ldc, (long long)i, (long long)j, c, r);
        }
}

/* The kernel called directly against the fmaf chain, bit for bit. */
static void check_bits(int64_t M, int64_t N, int64_t K, int64_t pa, int64_t pb, int64_t pc)
{
    problem p;
    make(&p, M, N, K, pa, pb, pc);
    for (size_t d = 0; d < 3; d++) {
        const void *B = bdata(&p, dts[d]);
        reference(&p, dts[d]);
        poison(&p);
        packed(&p, B, dts[d]);
        expect_equal(&p, dts[d], "packed");
    }
    drop(&p);
}

/* For each dtype, on 1, 2 and 3 threads: the chain's bits from
 * txc_kern_gemm_nt (dispatch) or the packed kernel called directly. */
static void check_threads(problem *p, bool dispatch)
{
    static const char *const names[] = {"1 thread", "2 threads", "3 threads"};
    for (size_t d = 0; d < 3; d++) {
        const void *B = bdata(p, dts[d]);
        reference(p, dts[d]);
        /* at level 2 the dispatch takes the twin for float16 weights, and
         * for bfloat16 ones without the VDPBF16PS GEMM */
        if (dispatch && level_ut == 2 && dts[d] == TXC_F32)
            continue;
        txc_kern_set_avx512bf16(dispatch && level_ut == 2 && dts[d] == TXC_BF16 ? 0 : -1);
        for (int th = 1; th <= 3; th++) {
            assert_int_equal(txc_threads_set(th), TXC_OK);
            poison(p);
            if (dispatch)
                txc_kern_gemm_nt(p->M, p->N, p->K, p->A, p->lda, B, dts[d], p->ldb, p->C, p->ldc);
            else
                packed(p, B, dts[d]);
            expect_equal(p, dts[d], names[th - 1]);
        }
    }
}

static void test_bits_fma_chain(void **state)
{
    (void)state;
    if (!start(1))
        return;
    /* Edges of every loop: M around the 6-row and 4-row tiles (the row plan
     * of gemm_avx2.c: 7 = 4 + 3, 8 = 4 + 4, 9 = 6 + 3, 14 = 6 + 4 + 4), N around the 16-column
     * tile and the 8-column halves of the B panel, K around the 4-step
     * unroll, the 8-k transposes and the 256-k blocks. */
    const int64_t Ms[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 33};
    const int64_t Ns[] = {1, 2, 7, 8, 9, 15, 16, 17, 31, 33};
    const int64_t Ks[] = {1, 3, 4, 7, 8, 9, 17, 255, 256, 257, 600};
    for (size_t mi = 0; mi < sizeof Ms / sizeof *Ms; mi++)
        for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++)
            for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++) {
                size_t v = mi + ni + ki;
                check_bits(Ms[mi], Ns[ni], Ks[ki], (int64_t)(v % 3), (int64_t)(v % 5 == 0 ? 9 : 0),
                           (int64_t)(v % 2 ? 3 : 0));
            }
    /* Several M blocks (192 rows), several K blocks with a remainder, N of
     * several chunks. */
    check_bits(385, 37, 530, 1, 2, 5);
    check_bits(200, 130, 1100, 0, 0, 0);
    /* 64-column panels and their masked edge, 128-k blocks (the twin) */
    check_bits(70, 65, 129, 2, 1, 3);
    check_bits(13, 192, 385, 0, 4, 0);
    finish();
}

/* Every row of a product alone (M = 1) has the bits it has inside M rows. */
static void test_row_alone(void **state)
{
    (void)state;
    if (!start(1))
        return;
    /* (6, 1, 8) with lda = K + 3: where the previous packed kernel gave
     * row 5's sum in row 4 (GCC 12 with -fsanitize=object-size). */
    const int64_t shapes[][4] = {{6, 1, 8, 3}, {6, 2, 8, 0}, {7, 3, 9, 3}, {13, 17, 16, 1},
                                 {40, 45, 300, 3}, {200, 45, 300, 3}};
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        problem p;
        make(&p, shapes[si][0], shapes[si][1], shapes[si][2], shapes[si][3], 1, 2);
        for (size_t d = 0; d < 3; d++) {
            const void *B = bdata(&p, dts[d]);
            memset(p.C, 0, sizeof(float) * (size_t)(p.M * p.ldc));
            memset(p.R, 0, sizeof(float) * (size_t)(p.M * p.ldc));
            packed(&p, B, dts[d]);
            for (int64_t i = 0; i < p.M; i++)
                assert_true(level_ut == 1 ? txc_kern_gemm_nt_avx2_packed(1, p.N, p.K, p.A + i * p.lda, p.lda, B,
                                                                         dts[d], p.ldb, p.R + i * p.ldc, p.ldc)
                                          : txc_kern_gemm_nt_fma512(1, p.N, p.K, p.A + i * p.lda, p.lda, B, dts[d],
                                                                    p.ldb, p.R + i * p.ldc, p.ldc));
            expect_equal(&p, dts[d], "alone");
        }
        drop(&p);
    }
    finish();
}

/* The dispatch: txc_kern_gemm_nt at level 1 above the row-invariance bound
 * gives the chain's bits on 1-3 threads. */
static void test_dispatch_threads(void **state)
{
    (void)state;
    if (!start(0))
        return;
    problem p;
    make(&p, TXC_KERN_ROWS_INVARIANT_MAX + 7, 1001, 333, 0, 0, 0);
    check_threads(&p, true);
    drop(&p);
    finish();
}

/* Prefill shapes on 1-3 threads: the A panels packed by the threads in
 * parallel (M x K above the serial bound), M = 128 in 20 6-row and 2 4-row
 * tiles; the chain's bits. */
static void test_prefill_threads(void **state)
{
    (void)state;
    if (!start(0))
        return;
    const int64_t shapes[][3] = {{128, 160, 896}, {130, 33, 520}};
    for (size_t s = 0; s < 2; s++) {
        problem p;
        make(&p, shapes[s][0], shapes[s][1], shapes[s][2], 1, 0, 2);
        check_threads(&p, false);
        drop(&p);
    }
    finish();
}

/* The group of sibling GEMMs on one A: each part's C has the bits of the
 * chain (so of the part alone), on 1-3 threads, parts of N not a multiple
 * of 16 side by side in the joint column space. */
static void test_group(void **state)
{
    (void)state;
    if (!start(0))
        return;
    const int64_t Ms[] = {39, 128, 7};
    const int64_t Np[] = {45, 16, 7, 1}; /* B's rows [0, 45), [45, 61), [61, 68), [68, 69) */
    for (size_t mi = 0; mi < 3; mi++) {
        problem p;
        make(&p, Ms[mi], 69, mi == 1 ? 896 : 300, 2, 3, 0);
        float *C[4];
        for (int q = 0; q < 4; q++)
            assert_non_null(C[q] = malloc(sizeof(float) * (size_t)(p.M * Np[q])));
        for (size_t d = 0; d < 3; d++) {
            const char *B = bdata(&p, dts[d]);
            reference(&p, dts[d]);
            for (int th = 1; th <= 3; th++) {
                assert_int_equal(txc_threads_set(th), TXC_OK);
                txc_gemv_part parts[4];
                int64_t row = 0;
                for (int q = 0; q < 4; q++) {
                    memset(C[q], 0x7f, sizeof(float) * (size_t)(p.M * Np[q]));
                    parts[q] = (txc_gemv_part){B + (size_t)(row * p.ldb) * txc_dtype_size(dts[d]), dts[d], Np[q],
                                               p.ldb, C[q]};
                    row += Np[q];
                }
                assert_true(packed_group(4, parts, p.M, p.K, p.A, p.lda));
                row = 0;
                for (int q = 0; q < 4; q++) {
                    for (int64_t i = 0; i < p.M; i++)
                        for (int64_t j = 0; j < Np[q]; j++) {
                            float c = C[q][i * Np[q] + j], r = p.R[i * p.ldc + row + j];
                            if (memcmp(&c, &r, sizeof c) != 0)
                                fail_msg("group %s M %lld K %lld %d threads: part %d C[%lld,%lld] = %.9g, expected %.9g",
                                         txc_dtype_name(dts[d]), (long long)p.M, (long long)p.K, th, q, (long long)i,
                                         (long long)j, c, r);
                        }
                    row += Np[q];
                }
            }
        }
        for (int q = 0; q < 4; q++)
            free(C[q]);
        drop(&p);
    }
    txc_gemv_part one = {NULL, TXC_BF16, 1, 1, NULL};
    float a = 1;
    assert_false(packed_group(0, &one, 1, 1, &a, 1));
    assert_false(packed_group(TXC_PACKED_GROUP_MAX + 1, &one, 1, 1, &a, 1));
    one.bdt = TXC_I32;
    assert_false(packed_group(1, &one, 1, 1, &a, 1));
    finish();
}

/* Against a double-precision sum: the bound of kernels.h. */
static void test_error_bound(void **state)
{
    (void)state;
    if (!start(1))
        return;
    const int64_t shapes[][3] = {{16, 37, 1000}, {9, 12, 4867}, {40, 5, 96}};
    double worst = 0;
    for (size_t s = 0; s < 3; s++) {
        problem p;
        make(&p, shapes[s][0], shapes[s][1], shapes[s][2], 0, 0, 0);
        for (size_t d = 0; d < 3; d++) {
            packed(&p, bdata(&p, dts[d]), dts[d]);
            const double u = ldexp(1.0, -24), n = (double)(p.K - 1), g = n * u / (1 - n * u);
            for (int64_t i = 0; i < p.M; i++)
                for (int64_t j = 0; j < p.N; j++) {
                    double exact = 0, mag = 0;
                    for (int64_t k = 0; k < p.K; k++) {
                        double t = (double)p.A[i * p.lda + k] * (double)bval(&p, dts[d], j, k);
                        exact += t, mag += fabs(t);
                    }
                    double c = p.C[i * p.ldc + j];
                    if (!(fabs(c - exact) <= g * mag))
                        fail_msg("%s M %lld N %lld K %lld: C[%lld,%lld] %.9g exact %.9g, bound %.3g",
                                 txc_dtype_name(dts[d]), (long long)p.M, (long long)p.N, (long long)p.K, (long long)i,
                                 (long long)j, c, exact, g * mag);
                    if (mag > 0)
                        worst = fmax(worst, fabs(c - exact) / (mag * u));
                }
        }
        drop(&p);
    }
    print_message("  largest |C - exact| / (2^-24 sum|A B|): %.2f\n", worst);
    finish();
}

static void test_refusals(void **state)
{
    (void)state;
    float a = 1, c = 7;
    uint16_t b = 0x3f80;
    bool (*const kern)(int64_t, int64_t, int64_t, const float *, int64_t, const void *, txc_dtype, int64_t, float *,
                       int64_t) = level_ut == 1 ? txc_kern_gemm_nt_avx2_packed : txc_kern_gemm_nt_fma512;
    txc_kern_set_simd_level(level_ut - 1); /* below the kernel's level */
    assert_false(kern(1, 1, 1, &a, 1, &b, TXC_BF16, 1, &c, 1));
    txc_kern_set_simd_level(-1);
    if (simd_ok()) {
        txc_kern_set_simd_level(level_ut);
        assert_false(kern(1, 1, 1, &a, 1, &b, TXC_I32, 1, &c, 1));
        assert_false(kern(0, 1, 1, &a, 1, &b, TXC_BF16, 1, &c, 1));
        assert_false(kern(1, 1, 0, &a, 1, &b, TXC_BF16, 1, &c, 1));
        assert_true(kern(1, 1, 1, &a, 1, &b, TXC_BF16, 1, &c, 1));
        assert_true(c == 1.0f);
        txc_kern_set_simd_level(-1);
    }
    assert_true(c == 1.0f || c == 7.0f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bits_fma_chain),  cmocka_unit_test(test_row_alone),
        cmocka_unit_test(test_dispatch_threads), cmocka_unit_test(test_prefill_threads),
        cmocka_unit_test(test_group),            cmocka_unit_test(test_error_bound),
        cmocka_unit_test(test_refusals),
    };
    int failed = cmocka_run_group_tests_name("avx2", tests, setup_avx2, NULL);
    return failed + cmocka_run_group_tests_name("avx512", tests, setup_avx512, NULL);
}
