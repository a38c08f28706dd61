/* The AVX-512 BF16 (VDPBF16PS) prefill GEMM (src/ops/gemm_bf16dot.c,
 * contract in src/ops/kernels.h):
 * - every C[i,j] bit-identical to the scalar emulation of its order: A
 *   rounded to bfloat16 (nearest even), then over k pairs p in order
 *   c = (c + a[2p+1] b[2p+1]) + a[2p] b[2p] from 0 (a zero pads an odd K),
 *   over M across the 6-row tiles, the edge tiles and the 252-row blocks, N
 *   across the 64-column panels and their masked edge, K odd, not a
 *   multiple of 2, 32 or the 256-k blocks, and row strides wider than the
 *   rows; C outside the M x N block untouched;
 * - within the documented bound of a double reference of A as given:
 *   |C - exact| <= (2^-8 + γ(K)) sum_k |A_ik B_jk|;
 * - txc_kern_gemm_nt at SIMD level 2 with M above the row-invariance bound
 *   runs it: the same bits on 1, 2 and 3 threads; the group of sibling
 *   GEMMs gives each part's bits alone, on 1-3 threads;
 * - with txc_kern_set_avx512bf16(0) (level 2 without it) the kernel refuses
 *   and txc_kern_gemm_nt keeps float32 A: within float32 summation error of
 *   the exact product (no bf16 rounding of A);
 * - refused for empty shapes, a group of a non-bf16 part, SIMD level < 2.
 * Skipped (with a message) where the CPU has no AVX-512 BF16.
 */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/kernels.h"
#include "txc/threads.h"

static uint32_t rng = 2891336453u;
static float rnd(void)
{
    rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
    return (float)(rng >> 8) / (float)(1 << 24) - 0.5f;
}

typedef struct problem {
    int64_t M, N, K, lda, ldb, ldc;
    float *A, *C, *R;
    uint16_t *B;
} problem;

static void make(problem *p, int64_t M, int64_t N, int64_t K, int64_t pa, int64_t pb, int64_t pc)
{
    p->M = M, p->N = N, p->K = K, p->lda = K + pa, p->ldb = K + pb, p->ldc = N + pc;
    p->A = malloc(sizeof(float) * (size_t)(M * p->lda));
    p->B = malloc(2 * (size_t)(N * p->ldb));
    p->C = malloc(sizeof(float) * (size_t)(M * p->ldc));
    p->R = malloc(sizeof(float) * (size_t)(M * p->ldc));
    assert_non_null(p->A), assert_non_null(p->B), assert_non_null(p->C), assert_non_null(p->R);
    for (int64_t i = 0; i < M * p->lda; i++)
        p->A[i] = 4.0f * rnd();
    for (int64_t i = 0; i < N * p->ldb; i++)
        p->B[i] = txc_f32_to_bf16(rnd());
}

static void drop(problem *p) { free(p->A), free(p->B), free(p->C), free(p->R); }

static void poison(problem *p) { memset(p->C, 0x7f, sizeof(float) * (size_t)(p->M * p->ldc)); }

/* The contract's order, emulated; R's row padding holds the sentinel. */
static void emulate(problem *p)
{
    for (int64_t i = 0; i < p->M; i++)
        for (int64_t j = 0; j < p->ldc; j++) {
            float c = 0.0f;
            if (j < p->N) {
                for (int64_t k = 0; k < p->K; k += 2) {
                    float a0 = txc_bf16_to_f32(txc_f32_to_bf16(p->A[i * p->lda + k]));
                    float b0 = txc_bf16_to_f32(p->B[j * p->ldb + k]);
                    float a1 = 0, b1 = 0;
                    if (k + 1 < p->K) {
                        a1 = txc_bf16_to_f32(txc_f32_to_bf16(p->A[i * p->lda + k + 1]));
                        b1 = txc_bf16_to_f32(p->B[j * p->ldb + k + 1]);
                    }
                    float q1 = a1 * b1, q0 = a0 * b0; /* exact: 8-bit x 8-bit significands */
                    c = c + q1;
                    c = c + q0;
                }
            } else {
                memset(&c, 0x7f, sizeof c);
            }
            p->R[i * p->ldc + j] = c;
        }
}

static void expect_equal(const problem *p, const char *what)
{
    for (int64_t i = 0; i < p->M; i++)
        for (int64_t j = 0; j < p->ldc; j++) {
            float c = p->C[i * p->ldc + j], r = p->R[i * p->ldc + j];
            if (memcmp(&c, &r, sizeof c) != 0)
                fail_msg("%s M %lld N %lld K %lld lda %lld ldb %lld ldc %lld: C[%lld,%lld] = %.9g, expected %.9g",
                         what, (long long)p->M, (long long)p->N, (long long)p->K, (long long)p->lda,
                         (long long)p->ldb, (long long)p->ldc, (long long)i, (long long)j, c, r);
        }
}

/* The documented bound against a double reference of A as given: the
 * worst error over the bound (a NaN left in C fails too). with_rounding
 * false: float32 A, float32 summation error only. */
static double worst_over_bound(const problem *p, bool with_rounding)
{
    const double gamma = p->K * 0x1p-24 / (1 - p->K * 0x1p-24);
    double worst = 0;
    for (int64_t i = 0; i < p->M; i++)
        for (int64_t j = 0; j < p->N; j++) {
            double exact = 0, mag = 0;
            for (int64_t k = 0; k < p->K; k++) {
                double t = (double)p->A[i * p->lda + k] * txc_bf16_to_f32(p->B[j * p->ldb + k]);
                exact += t, mag += fabs(t);
            }
            double e = fabs(p->C[i * p->ldc + j] - exact) / (mag * ((with_rounding ? 0x1p-8 : 0) + gamma));
            if (!(e <= worst))
                worst = isnan(e) ? INFINITY : e;
        }
    return worst;
}

static bool available(void)
{
    if (txc_kern_simd_level() < 2 || !txc_kern_avx512bf16_cpu()) {
        print_message("  no AVX-512 BF16 on this CPU (or SIMD level < 2): skipped\n");
        return false;
    }
    return true;
}

/* (M, N, K, lda pad, ldb pad, ldc pad) */
static const int64_t shapes[][6] = {
    {1, 1, 1, 0, 0, 0},      {5, 3, 2, 1, 3, 2},      {6, 64, 32, 0, 0, 0},    {7, 65, 33, 2, 1, 3},
    {37, 77, 3, 0, 5, 1},    {33, 130, 333, 3, 0, 7}, {128, 192, 896, 0, 0, 0}, {13, 16, 513, 0, 2, 0},
    {253, 70, 31, 1, 1, 1},  {64, 1000, 257, 0, 0, 4},
};

static void test_bits_and_bound(void **state)
{
    (void)state;
    if (!available())
        return;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        problem p;
        make(&p, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], shapes[s][4], shapes[s][5]);
        emulate(&p);
        poison(&p);
        assert_true(txc_kern_gemm_nt_bf16dot(p.M, p.N, p.K, p.A, p.lda, p.B, p.ldb, p.C, p.ldc));
        expect_equal(&p, "direct");
        double w = worst_over_bound(&p, true);
        print_message("  M %lld N %lld K %lld: error / documented bound %.3f\n", (long long)p.M, (long long)p.N,
                      (long long)p.K, w);
        assert_true(w <= 1.0);
        drop(&p);
    }
}

/* txc_kern_gemm_nt at level 2 (M > the bound): the kernel's bits on 1-3 threads. */
static void test_dispatch_threads(void **state)
{
    (void)state;
    if (!available())
        return;
    const int64_t sh[][3] = {{33, 77, 333}, {128, 896, 896}, {100, 4099, 64}};
    for (size_t s = 0; s < 3; s++) {
        problem p;
        make(&p, sh[s][0], sh[s][1], sh[s][2], 0, 0, 0);
        emulate(&p);
        for (int th = 1; th <= 3; th++) {
            assert_int_equal(txc_threads_set(th), TXC_OK);
            txc_kern_set_simd_level(2);
            poison(&p);
            txc_kern_gemm_nt(p.M, p.N, p.K, p.A, p.lda, p.B, TXC_BF16, p.ldb, p.C, p.ldc);
            expect_equal(&p, th == 1 ? "gemm_nt 1 thread" : th == 2 ? "gemm_nt 2 threads" : "gemm_nt 3 threads");
        }
        drop(&p);
    }
    txc_kern_set_simd_level(-1);
    txc_threads_set(0);
}

/* Sibling GEMMs of one A: each part the bits of that part alone. */
static void test_group(void **state)
{
    (void)state;
    if (!available())
        return;
    const int64_t M = 70, K = 201, Ns[3] = {64, 130, 5};
    problem p[3];
    for (int i = 0; i < 3; i++) {
        make(&p[i], M, Ns[i], K, 0, 0, 0);
        if (i > 0)
            memcpy(p[i].A, p[0].A, sizeof(float) * (size_t)(M * K));
        emulate(&p[i]);
    }
    for (int th = 1; th <= 3; th++) {
        assert_int_equal(txc_threads_set(th), TXC_OK);
        txc_gemv_part parts[3];
        for (int i = 0; i < 3; i++) {
            poison(&p[i]);
            parts[i] = (txc_gemv_part){p[i].B, TXC_BF16, Ns[i], K, p[i].C};
        }
        assert_true(txc_kern_gemm_nt_bf16dot_group(3, parts, M, K, p[0].A, K));
        for (int i = 0; i < 3; i++)
            expect_equal(&p[i], "group");
        parts[1].bdt = TXC_F16; /* a part that is not bf16: refused, nothing written */
        poison(&p[0]);
        assert_false(txc_kern_gemm_nt_bf16dot_group(3, parts, M, K, p[0].A, K));
        assert_true(isnan(p[0].C[0]) || p[0].C[0] != p[0].R[0]);
    }
    txc_threads_set(0);
    for (int i = 0; i < 3; i++)
        drop(&p[i]);
}

/* Level 2 without AVX-512 BF16: the kernel refuses; gemm_nt keeps float32 A. */
static void test_knob_off(void **state)
{
    (void)state;
    if (!available())
        return;
    problem p;
    make(&p, 48, 100, 333, 0, 0, 0);
    txc_kern_set_simd_level(2);
    txc_kern_set_avx512bf16(0);
    assert_false(txc_kern_avx512bf16());
    assert_false(txc_kern_gemm_nt_bf16dot(p.M, p.N, p.K, p.A, p.lda, p.B, p.ldb, p.C, p.ldc));
    for (int th = 1; th <= 2; th++) {
        assert_int_equal(txc_threads_set(th), TXC_OK);
        poison(&p);
        txc_kern_gemm_nt(p.M, p.N, p.K, p.A, p.lda, p.B, TXC_BF16, p.ldb, p.C, p.ldc);
        double w = worst_over_bound(&p, false);
        print_message("  knob off, %d threads: error / float32 summation bound %.3f\n", th, w);
        assert_true(w <= 1.0); /* fails with A rounded to bf16 (error ~2^-9 relative) */
    }
    txc_kern_set_avx512bf16(-1);
    assert_true(txc_kern_avx512bf16());
    txc_kern_set_simd_level(1);
    assert_false(txc_kern_avx512bf16());
    assert_false(txc_kern_gemm_nt_bf16dot(p.M, p.N, p.K, p.A, p.lda, p.B, p.ldb, p.C, p.ldc));
    txc_kern_set_simd_level(-1);
    txc_threads_set(0);
    drop(&p);
}

static void test_refusals(void **state)
{
    (void)state;
    float a[4] = {0}, c[4];
    uint16_t b[4] = {0};
    assert_false(txc_kern_gemm_nt_bf16dot(0, 1, 1, a, 1, b, 1, c, 1));
    assert_false(txc_kern_gemm_nt_bf16dot(1, 0, 1, a, 1, b, 1, c, 1));
    assert_false(txc_kern_gemm_nt_bf16dot(1, 1, 0, a, 1, b, 1, c, 1));
    txc_gemv_part one = {b, TXC_BF16, 1, 1, c};
    assert_false(txc_kern_gemm_nt_bf16dot_group(0, &one, 1, 1, a, 1));
    assert_false(txc_kern_gemm_nt_bf16dot_group(TXC_PACKED_GROUP_MAX + 1, &one, 1, 1, a, 1));
    if (!txc_kern_avx512bf16()) {
        float s = 0;
        assert_true(txc_kern_bf16dot_peak_run(10, &s) == 0);
    } else {
        float s = 0;
        assert_true(txc_kern_bf16dot_peak_run(10, &s) == 10.0 * 16 * 16 * 2 * 2);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bits_and_bound), cmocka_unit_test(test_dispatch_threads),
        cmocka_unit_test(test_group),          cmocka_unit_test(test_knob_off),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
