/* txc_ops_set_batch_invariant (txc/ops.h), the switch behind
 * `txc bench --batch ... --no-batch-invariant` and `txc serve
 * --no-batch-invariant`, on aten::linear with float weights:
 * - on by default;
 * - on: txc_linear of 1 < M <= 32 rows gives every row the bits of that row
 *   alone (txc_kern_gemm_nt with M = 1), for float32, bfloat16 and float16
 *   weights, on 1 to 3 threads, at every SIMD level the CPU has (the
 *   portable rows, AVX2's tiles, AVX-512's);
 * - off, at SIMD level 1 (AVX2): txc_linear gives the packed GEMM's bits
 *   (txc_kern_gemm_nt_avx2_packed), which are not the rows' alone in at
 *   least one element (the switch changes the kernel), within float32
 *   summation error of them; txc_kern_gemm_nt itself (attention's products)
 *   keeps the rows' bits;
 * - off: M = 1 and M > 32 are what they are with it on.
 * The "off" part is skipped (with a message) where the CPU has no
 * AVX2+FMA+F16C. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/kernels.h"
#include "txc/env.h"
#include "txc/ops.h"
#include "txc/threads.h"

static uint32_t rng = 2463534242u;
static float rnd(void)
{
    rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
    return (float)(rng >> 8) / (float)(1 << 24) - 0.5f;
}

enum { N = 72, K = 333, MAXM = 40 };

typedef struct data {
    float A[MAXM * K], Bf[N * K], C[MAXM * N], R[MAXM * N];
    uint16_t Bh[N * K];
} data;

static data *make(void)
{
    data *d = malloc(sizeof *d);
    assert_non_null(d);
    for (int i = 0; i < MAXM * K; i++)
        d->A[i] = rnd();
    for (int i = 0; i < N * K; i++)
        d->Bf[i] = rnd();
    return d;
}

static const void *weights(data *d, txc_dtype dt)
{
    if (dt == TXC_F32)
        return d->Bf;
    txc_kern_from_f32(dt, d->Bf, d->Bh, N * K);
    return d->Bh;
}

/* R: each of the M rows alone. */
static void rows_alone(data *d, int64_t M, const void *B, txc_dtype dt)
{
    for (int64_t i = 0; i < M; i++)
        txc_kern_gemm_nt(1, N, K, d->A + i * K, K, B, dt, K, d->R + i * N, N);
}

/* C = txc_linear(A[0, M), B) (float32 out, contiguous). */
static void linear(data *d, int64_t M, const void *B, txc_dtype dt)
{
    txc_tensor *x = txc_tensor_from_data(NULL, TXC_F32, 2, (int64_t[]){M, K}, d->A);
    txc_tensor *w = txc_tensor_from_data(NULL, dt, 2, (int64_t[]){N, K}, B);
    txc_tensor *y = txc_linear(x, w, NULL);
    if (!y)
        fail_msg("%s", txc_last_error());
    assert_int_equal(txc_tensor_dtype(y), TXC_F32);
    assert_true(txc_tensor_is_contiguous(y));
    memcpy(d->C, txc_tensor_data_ptr(y), sizeof(float) * (size_t)(M * N));
    txc_tensor_release(y);
    txc_tensor_release(w);
    txc_tensor_release(x);
}

static bool avx2(void)
{
    if (txc_kern_simd_level() < 1) {
        print_message("  no AVX2+FMA+F16C on this CPU: skipped\n");
        return false;
    }
    return true;
}

static void test_default_on(void **state)
{
    (void)state;
    assert_true(txc_ops_batch_invariant());
    txc_ops_set_batch_invariant(false);
    assert_false(txc_ops_batch_invariant());
    txc_ops_set_batch_invariant(true);
    assert_true(txc_ops_batch_invariant());
}

static void test_on_rows_alone(void **state)
{
    (void)state;
    data *d = make();
    const txc_dtype dts[] = {TXC_F32, TXC_BF16, TXC_F16};
    const int64_t Ms[] = {2, 3, 4, 5, 8, 9, 13, 16, 32};
    txc_ops_set_batch_invariant(true);
    const int top = txc_kern_simd_level();
    for (int level = 0; level <= top; level++) { /* each kernel this CPU has (AVX2, AVX-512) */
        txc_kern_set_simd_level(level);
        for (int th = 1; th <= 3; th++) {
            assert_int_equal(txc_threads_set(th), TXC_OK);
            for (size_t t = 0; t < 3; t++) {
                const void *B = weights(d, dts[t]);
                for (size_t m = 0; m < sizeof Ms / sizeof *Ms; m++) {
                    linear(d, Ms[m], B, dts[t]);
                    rows_alone(d, Ms[m], B, dts[t]);
                    if (memcmp(d->C, d->R, sizeof(float) * (size_t)(Ms[m] * N)) != 0)
                        fail_msg("invariant: M = %lld, dtype %d, %d threads, SIMD level %d: a row differs from it "
                                 "alone",
                                 (long long)Ms[m], (int)dts[t], th, txc_kern_simd_level());
                }
            }
        }
    }
    txc_kern_set_simd_level(-1);
    txc_threads_set(0);
    free(d);
}

static void test_off_reorders(void **state)
{
    (void)state;
    if (!avx2())
        return;
    txc_kern_set_simd_level(1);
    data *d = make();
    float *P = malloc(sizeof(float) * MAXM * N);
    assert_non_null(P);
    const txc_dtype dts[] = {TXC_F32, TXC_BF16, TXC_F16};
    const int64_t Ms[] = {2, 4, 8, 16, 32};
    txc_ops_set_batch_invariant(false);
    for (size_t t = 0; t < 3; t++) {
        const void *B = weights(d, dts[t]);
        for (size_t m = 0; m < sizeof Ms / sizeof *Ms; m++) {
            const int64_t M = Ms[m];
            linear(d, M, B, dts[t]);
            assert_true(txc_kern_gemm_nt_avx2_packed(M, N, K, d->A, K, B, dts[t], K, P, N));
            if (memcmp(d->C, P, sizeof(float) * (size_t)(M * N)) != 0)
                fail_msg("not invariant: M = %lld, dtype %d: not the packed GEMM's bits", (long long)M, (int)dts[t]);
            rows_alone(d, M, B, dts[t]);
            int64_t differ = 0;
            for (int64_t i = 0; i < M * N; i++) {
                differ += d->C[i] != d->R[i];
                /* both are float32 sums of the same K products: within γ(K) of each other's scale */
                double scale = 0;
                for (int64_t k = 0; k < K; k++)
                    scale += fabs((double)d->A[(i / N) * K + k]) * 0.5;
                if (fabs((double)d->C[i] - (double)d->R[i]) > 2.0 * K * ldexp(1.0, -24) * scale)
                    fail_msg("M = %lld: element %lld: %g vs %g alone", (long long)M, (long long)i, d->C[i], d->R[i]);
            }
            if (differ == 0)
                fail_msg("not invariant: M = %lld, dtype %d: every element has its bits alone (the kernel did not change)",
                         (long long)M, (int)dts[t]);
            /* the kernel itself is not switched */
            txc_kern_gemm_nt(M, N, K, d->A, K, B, dts[t], K, P, N);
            assert_memory_equal(P, d->R, sizeof(float) * (size_t)(M * N));
        }
        /* M = 1 and M > 32 are not affected */
        linear(d, 1, B, dts[t]);
        memcpy(P, d->C, sizeof(float) * N);
        txc_ops_set_batch_invariant(true);
        linear(d, 1, B, dts[t]);
        assert_memory_equal(d->C, P, sizeof(float) * N);
        linear(d, MAXM, B, dts[t]);
        memcpy(P, d->C, sizeof(float) * MAXM * N);
        txc_ops_set_batch_invariant(false);
        linear(d, MAXM, B, dts[t]);
        assert_memory_equal(d->C, P, sizeof(float) * MAXM * N);
    }
    txc_ops_set_batch_invariant(true);
    txc_kern_set_simd_level(-1);
    free(P);
    free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_on),
        cmocka_unit_test(test_on_rows_alone),
        cmocka_unit_test(test_off_reorders),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
