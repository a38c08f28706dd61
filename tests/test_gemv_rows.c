/* The multi-row GEMV of batched decoding (src/ops/gemv_batch.c, the row
 * invariance of ops/kernels.h): every row of txc_kern_gemm_nt with
 * 2..16 rows (and up to TXC_KERN_ROWS_INVARIANT_MAX) has the bits of that row alone (M = 1), for the tiles that
 * keep their accumulators in registers (A within ROWS_KB_A_BYTES) and for
 * the k-blocked 4 x 3 tiles past it (K up to 4883: tails of K % 8, of the
 * 4-column reduction (N % 4), of the 3-column tiles and of the column
 * blocks), and for AVX-512's register and k-blocked tiles (K % 32 and K % 16
 * tails), every weight
 * dtype, 1 to 3 threads, strided A, B and C, at each SIMD level the CPU has. */
#include "testutil.h"
#include "ops/kernels.h"
#include "txc/threads.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 12345;

static float next_value(float scale)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((int64_t)(rng >> 40) - (1 << 23)) / (float)(1 << 23) * scale;
}

/* Rows 1..M of A (M x K, stride lda) against B (N x K of dt, stride ldb):
 * each GEMM's row i bit-identical to the one-row GEMM of row i. */
static void check_rows(int64_t N, int64_t K, txc_dtype dt, int threads, int64_t M)
{
    const int64_t lda = K + 3, ldb = K + 5, ldc = N + 2;
    float *A = malloc(sizeof(float) * (size_t)(M * lda)), *C = malloc(sizeof(float) * (size_t)(M * ldc));
    float *one = malloc(sizeof(float) * (size_t)(M * N)), *Bf = malloc(sizeof(float) * (size_t)(N * ldb));
    uint16_t *Bh = malloc(sizeof(uint16_t) * (size_t)(N * ldb));
    assert_true(A && C && one && Bf && Bh);
    for (int64_t i = 0; i < M * lda; i++)
        A[i] = next_value(4.0f);
    for (int64_t i = 0; i < N * ldb; i++) {
        Bf[i] = next_value(0.5f);
        Bh[i] = dt == TXC_BF16 ? txc_f32_to_bf16(Bf[i]) : txc_f32_to_f16(Bf[i]);
    }
    const void *B = dt == TXC_F32 ? (const void *)Bf : (const void *)Bh;
    assert_int_equal(txc_threads_set(threads), TXC_OK);
    for (int64_t i = 0; i < M; i++)
        txc_kern_gemm_nt(1, N, K, A + i * lda, lda, B, dt, ldb, one + i * N, N);
    for (int64_t m = 2; m <= M; m++) {
        for (int64_t i = 0; i < M * ldc; i++)
            C[i] = -1.0f;
        txc_kern_gemm_nt(m, N, K, A, lda, B, dt, ldb, C, ldc);
        for (int64_t i = 0; i < m; i++)
            if (memcmp(one + i * N, C + i * ldc, sizeof(float) * (size_t)N) != 0) {
                int64_t j = 0;
                while (memcmp(one + i * N + j, C + i * ldc + j, sizeof(float)) == 0)
                    j++;
                fail_msg("%s, %d threads, M %lld N %lld K %lld: row %lld column %lld is %.9g, alone %.9g",
                         txc_dtype_name(dt), threads, (long long)m, (long long)N, (long long)K, (long long)i,
                         (long long)j, (double)C[i * ldc + j], (double)one[i * N + j]);
            }
        for (int64_t i = 0; i < m; i++) /* the padding between rows of C untouched */
            for (int64_t j = N; j < ldc; j++)
                assert_true(C[i * ldc + j] == -1.0f);
    }
    free(A), free(C), free(one), free(Bf), free(Bh);
}

/* The full matrix at one SIMD level (1: AVX2's 4 x 2 / 8 x 1 tiles and the
 * k-blocked 4 x 3; 2: AVX-512's tiles in gemv_tile512's order). */
static void check_level(int level)
{
    /* K: below 8 (tail only); 23 (AVX-512: one 16-step and a masked 7);
     * qwen2.5's 896 (no tail at either width) and 912 (AVX-512: 28 steps of
     * 32 and one of 16); the register tiles (A within 32 KiB up to 16 rows:
     * 509), both past it (2051: from 4 rows on AVX2, 8 on AVX-512's
     * k-blocked tiles; 4883 = qwen2.5's 4864 + 19: tails of K % 8 and, on
     * AVX-512, one 16-step and a masked 3 after the k blocks) */
    static const int64_t Ks[] = {5, 23, 509, 896, 912, 2051, 4883};
    /* N: one column, tails of 3 and 4, more than one column block and
     * thread chunk (130, 301) */
    static const int64_t Ns[] = {1, 7, 37, 130, 301};
    static const txc_dtype dts[] = {TXC_BF16, TXC_F32, TXC_F16};
    int saved = txc_threads_get();
    txc_kern_set_simd_level(level);
    assert_int_equal(txc_kern_simd_level(), level);
    for (int threads = 1; threads <= 3; threads++)
        for (size_t d = 0; d < 3; d++)
            for (size_t k = 0; k < sizeof Ks / sizeof *Ks; k++)
                for (size_t n = 0; n < sizeof Ns / sizeof *Ns; n++)
                    check_rows(Ns[n], Ks[k], dts[d], threads, 16);
    /* up to the bound of the multi-row GEMV (32 rows) */
    check_rows(37, 2051, TXC_BF16, 2, TXC_KERN_ROWS_INVARIANT_MAX);
    check_rows(130, 4867, TXC_F16, 3, TXC_KERN_ROWS_INVARIANT_MAX);
    check_rows(301, 896, TXC_BF16, 2, TXC_KERN_ROWS_INVARIANT_MAX);
    check_rows(130, 912, TXC_F32, 3, TXC_KERN_ROWS_INVARIANT_MAX);
    txc_kern_set_simd_level(-1);
    assert_int_equal(txc_threads_set(saved), TXC_OK);
}

static void test_rows_avx2(void **state)
{
    (void)state;
    if (txc_kern_simd_level() < 1) {
        print_message("  no AVX2+FMA+F16C on this CPU: skipped\n");
        return;
    }
    check_level(1);
}

static void test_rows_avx512(void **state)
{
    (void)state;
    if (txc_kern_simd_level() < 2) {
        print_message("  no AVX-512 on this CPU: skipped\n");
        return;
    }
    check_level(2);
}

/* The portable build (the one-row GEMV per row) and, on AMX machines, level
 * 3 (the AVX-512 rows: AMX only takes M above the bound). */
static void test_rows_other_levels(void **state)
{
    (void)state;
    int saved = txc_threads_get(), top = txc_kern_simd_level();
    for (int level = 0; level <= top; level++) {
        if (level == 1 || level == 2)
            continue;
        txc_kern_set_simd_level(level);
        check_rows(37, 2051, TXC_BF16, 2, 16);
        check_rows(7, 509, TXC_F32, 1, 16);
        check_rows(130, 896, TXC_F16, 3, 16);
    }
    txc_kern_set_simd_level(-1);
    assert_int_equal(txc_threads_set(saved), TXC_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_avx2),
        cmocka_unit_test(test_rows_avx512),
        cmocka_unit_test(test_rows_other_levels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
