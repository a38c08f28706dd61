/* Quantized weights repacked at load into groups of 8 interleaved rows
 * (txc_quant_repack, ops/quant_repack.c; the layout and the summation
 * order in ops/quant_impl.h), for every repacked type (Q4_0, Q4_1, Q8_0):
 *
 * - the repack is in place and keeps the size; embedding rows read from it
 *   are the dequantized rows, exactly (tail rows included);
 * - linear on a repacked weight, at SIMD levels 0 (portable), 1 (AVX2) and
 *   2 (AVX-512 VNNI where the CPU has it, else AVX2 again),
 *   1..3 threads, M = 1..9 activation rows: bit for bit the order of
 *   ops/quant_impl.h recomputed here from ggml's row layout (per 32-block
 *   the exact integer dot, one fmaf a block; Q4_1's min in a second chain),
 *   so every output row agrees whatever the batch, the threads or the
 *   kernel; and within the error bound of ops/quant_impl.h of the float32
 *   product with the dequantized weight; row counts N = 8, 13, 37, 80
 *   (5 and 5 tail rows past the groups) and K of 1, 3, 9 and 16 blocks
 *   (Q4_K: 1, 3, 2 and 4 super-blocks);
 * - the grouped GEMV of sibling projections on repacked weights (tails
 *   too): the separate linears' bits;
 * - what is not repacked: the other types and fewer than 8 rows;
 *   TXC_QUANT_REPACK=0.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/impl.h"
#include "ops/kernels.h"
#include "ops/quant_impl.h"
#include "ops/registry.h"
#include "testutil.h"
#include "txc/array.h"
#include "txc/env.h"
#include "txc/ops.h"
#include "txc/quant.h"
#include "txc/tensor.h"
#include "txc/threads.h"

static const txc_dtype R8[] = {TXC_Q4_0, TXC_Q4_1, TXC_Q8_0, TXC_Q4_K};

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) /* about N(0, 1) */
{
    float s = 0;
    for (int i = 0; i < 4; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        s += (float)((rng >> 11) * (1.0 / 9007199254740992.0)) - 0.5f;
    }
    return s * 1.7f;
}

/* a (N, K) weight of dt in ggml's layout: *plain its bytes (a copy), *deq
 * its dequantized values; repacked unless `keep` */
static txc_tensor *weight(txc_env *env, txc_dtype dt, int64_t N, int64_t K, bool keep, uint8_t **plain, float **deq)
{
    float *w = malloc((size_t)(N * K) * 4);
    for (int64_t i = 0; i < N * K; i++)
        w[i] = frand() * 0.02f + (i % 7 == 0 ? 0.01f : 0.0f); /* a mean: Q4_1's min is not 0 */
    txc_array *a = txc_array_new(TXC_CPU, dt, 2, (int64_t[]){N, K});
    assert_non_null(a);
    assert_int_equal(txc_quant_quantize(dt, w, txc_array_data(a), N * K), TXC_OK);
    assert_int_equal(txc_quant_dequantize(dt, txc_array_data(a), w, N * K), TXC_OK);
    size_t nb = txc_array_nbytes(a);
    *plain = malloc(nb);
    memcpy(*plain, txc_array_data(a), nb);
    if (!keep) {
        assert_int_equal(txc_quant_repack(a), TXC_OK);
        assert_int_equal(a->interleave, N >= 8 ? 8 : 0);
        assert_int_equal(txc_array_nbytes(a), nb);
        assert_int_equal(txc_quant_repack(a), TXC_OK); /* once only */
        if (N >= 8) /* the groups moved the bytes; the tail rows did not */
            assert_true(memcmp(txc_array_data(a), *plain, nb) != 0);
        size_t tail = (size_t)(N / 8 * 8) * txc_dtype_row_bytes(dt, K);
        assert_memory_equal((uint8_t *)txc_array_data(a) + tail, *plain + tail, nb - tail);
    }
    *deq = w;
    txc_tensor *t = txc_tensor_wrap(env, a);
    txc_array_release(a);
    return t;
}

static txc_tensor *rand_x(txc_env *env, int64_t M, int64_t K)
{
    txc_tensor *x = txc_zeros(env, 2, (int64_t[]){M, K}, TXC_F32);
    float *p = txc_tensor_data_ptr(x);
    for (int64_t i = 0; i < M * K; i++)
        p[i] = frand();
    p[3] = -30.0f; /* an outlier */
    return x;
}

static float h2f(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return txc_f16_to_f32(h);
}

/* Q4_K's order (ops/quant_impl.h): per super-block the exact sum_j sc_j dot_j and sum_j m_j bsum_j */
static void oracle_q4k(const uint8_t *plain, const float *x, int64_t M, int64_t N, int64_t K, float *y)
{
    size_t qb = txc_qact_row_bytes(K, 256), rb = txc_dtype_row_bytes(TXC_Q4_K, K);
    void *buf = aligned_alloc(32, qb);
    for (int64_t i = 0; i < M; i++) {
        txc_qact a = txc_qact_quantize(x + i * K, K, 256, buf);
        for (int64_t j = 0; j < N; j++) {
            float acc = 0, accm = 0;
            for (int64_t sb = 0; sb < K / 256; sb++) {
                const uint8_t *blk = plain + (size_t)j * rb + (size_t)sb * 144;
                int32_t isum = 0, msum = 0;
                for (int s = 0; s < 8; s++) {
                    uint8_t sc, mn;
                    txc_quant_scale_min_k4(s, blk + 4, &sc, &mn);
                    int32_t dot = 0, qsum = 0;
                    for (int k = 0; k < 32; k++) {
                        uint8_t byte = blk[16 + (s / 2) * 32 + k];
                        int8_t qa = a.qs[sb * 256 + s * 32 + k];
                        dot += (s & 1 ? byte >> 4 : byte & 15) * qa;
                        qsum += qa;
                    }
                    isum += sc * dot;
                    msum += mn * qsum;
                }
                acc = fmaf((float)isum, h2f(blk) * a.D[sb], acc);
                accm = fmaf((float)msum, h2f(blk + 2) * a.D[sb], accm);
            }
            y[i * N + j] = acc - accm;
        }
    }
    free(buf);
}

/* the order of ops/quant_impl.h from ggml's row layout (independent of the
 * repacked bytes): y[i*N + j] */
static void oracle(txc_dtype dt, const uint8_t *plain, const float *x, int64_t M, int64_t N, int64_t K, float *y)
{
    if (dt == TXC_Q4_K) {
        oracle_q4k(plain, x, M, N, K, y);
        return;
    }
    size_t qb = txc_qact_row_bytes(K, 32), rb = txc_dtype_row_bytes(dt, K), bb = txc_dtype_block_bytes(dt);
    void *buf = aligned_alloc(32, qb);
    for (int64_t i = 0; i < M; i++) {
        txc_qact a = txc_qact_quantize(x + i * K, K, 32, buf);
        for (int64_t j = 0; j < N; j++) {
            float acc = 0, accm = 0;
            for (int64_t b = 0; b < K / 32; b++) {
                const uint8_t *blk = plain + (size_t)j * rb + (size_t)b * bb;
                int32_t isum = 0;
                for (int k = 0; k < 32; k++) {
                    int q;
                    if (dt == TXC_Q8_0)
                        q = (int8_t)blk[2 + k];
                    else {
                        const uint8_t *p = blk + (dt == TXC_Q4_1 ? 4 : 2);
                        q = (k < 16 ? p[k] & 15 : p[k - 16] >> 4) - (dt == TXC_Q4_0 ? 8 : 0);
                    }
                    isum += q * a.qs[b * 32 + k];
                }
                acc = fmaf((float)isum, h2f(blk) * a.d[b], acc);
                if (dt == TXC_Q4_1)
                    accm = fmaf(h2f(blk + 2), a.s[b], accm);
            }
            y[i * N + j] = dt == TXC_Q4_1 ? acc + accm : acc;
        }
    }
    free(buf);
}

static double f16_scale(double d)
{
    float r = txc_f16_to_f32(txc_f32_to_f16((float)d));
    return isinf(r) ? d : r;
}

/* ops/quant_impl.h's bound (as tests/test_quant.c checks it) */
static void check_bound(txc_dtype dt, const float *y, const float *x, const float *w, const uint8_t *plain, int64_t M,
                        int64_t N, int64_t K)
{
    size_t rb = txc_dtype_row_bytes(dt, K), bb = txc_dtype_block_bytes(dt);
    int64_t B = txc_qact_block(dt); /* the activation's block: 256 for Q4_K (a float32 scale, exact sums) */
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double ref = 0, bound = 0, mag = 0;
            for (int64_t b = 0; b < K / B; b++) {
                double amax = 0, sw = 0, sx = 0;
                for (int64_t k = 0; k < B; k++) {
                    double xv = x[i * K + b * B + k], wv = w[j * K + b * B + k];
                    ref += xv * wv, mag += fabs(xv * wv), amax = fmax(amax, fabs(xv));
                    sw += fabs(wv), sx += fabs(xv);
                }
                double d = (double)((float)amax / 127.0f), e = B == 256 ? 0.0 : fabs(f16_scale(d) - d);
                bound += (d / 2 + 127 * e) * sw;
                if (dt == TXC_Q4_1 && d > 0)
                    bound += fabs(h2f(plain + (size_t)j * rb + (size_t)b * bb + 2)) *
                             (ldexp(sx + 16 * d, -11) + ldexp(1.0, -25) + e * (sx / d + 16));
            }
            bound = bound * 1.0001 + 1e-5 * mag;
            if (!(fabs(y[i * N + j] - ref) <= bound))
                fail_msg("%s repacked N=%lld K=%lld [%lld, %lld]: %.9g, float32 %.9g, bound %.3g", txc_dtype_name(dt),
                         (long long)N, (long long)K, (long long)i, (long long)j, y[i * N + j], ref, bound);
        }
}

static void check_linear(txc_env *env, txc_dtype dt, int64_t N, int64_t K)
{
    const int64_t M = 9;
    uint8_t *plain;
    float *w;
    txc_tensor *W = weight(env, dt, N, K, false, &plain, &w);
    txc_tensor *x = rand_x(env, M, K);
    const float *xp = txc_tensor_data_ptr(x);
    float *want = malloc((size_t)(M * N) * 4);
    oracle(dt, plain, xp, M, N, K, want);
    check_bound(dt, want, xp, w, plain, M, N, K);
    for (int level = 0; level <= 2; level++) {
        txc_kern_set_simd_level(level);
        for (int th = 1; th <= 3; th++) {
            assert_int_equal(txc_threads_set(th), TXC_OK);
            txc_tensor *y = txc_linear(x, W, NULL);
            if (!y)
                fail_msg("%s: %s", txc_dtype_name(dt), txc_last_error());
            const float *yp = txc_tensor_data_ptr(y);
            for (int64_t k = 0; k < M * N; k++)
                if (memcmp(yp + k, want + k, 4) != 0)
                    fail_msg("%s N=%lld K=%lld level %d threads %d: y[%lld, %lld] = %.9g, the order's %.9g",
                             txc_dtype_name(dt), (long long)N, (long long)K, level, th, (long long)(k / N),
                             (long long)(k % N), yp[k], want[k]);
            for (int64_t m = 1; m < M; m += 2) { /* smaller batches, single rows */
                txc_tensor *ys = txc_linear(txc_narrow(x, 0, 0, m), W, NULL);
                assert_non_null(ys);
                assert_memory_equal(txc_tensor_data_ptr(ys), want, (size_t)(m * N) * 4);
                txc_tensor *yi = txc_linear(txc_select(x, 0, m), W, NULL);
                assert_non_null(yi);
                assert_memory_equal(txc_tensor_data_ptr(yi), want + m * N, (size_t)N * 4);
            }
        }
    }
    txc_kern_set_simd_level(-1);
    assert_int_equal(txc_threads_set(1), TXC_OK);
    /* embedding rows out of the groups and the tail: the dequantized rows */
    txc_tensor *ids = txc_zeros(env, 1, (int64_t[]){N}, TXC_I64);
    for (int64_t j = 0; j < N; j++)
        ((int64_t *)txc_tensor_data_ptr(ids))[j] = N - 1 - j;
    txc_tensor *e = txc_embedding(W, ids);
    assert_non_null(e);
    for (int64_t j = 0; j < N; j++)
        assert_memory_equal((const float *)txc_tensor_data_ptr(e) + j * K, w + (N - 1 - j) * K, (size_t)K * 4);
    free(want), free(plain), free(w);
}

static void test_linear(void **state)
{
    (void)state;
    txc_env *env = txc_env_default();
    static const int64_t Ns[] = {8, 13, 37, 80}, Ks[] = {32, 96, 288, 512}, Ks_k[] = {256, 768, 512, 1024};
    for (size_t t = 0; t < sizeof R8 / sizeof R8[0]; t++)
        for (size_t n = 0; n < 4; n++)
            for (size_t k = 0; k < 4; k++) {
                int mark = txc_env_scope_begin(env);
                check_linear(env, R8[t], Ns[n], R8[t] == TXC_Q4_K ? Ks_k[k] : Ks[k]);
                txc_env_scope_end(env, mark);
            }
}

/* sibling projections of one row as one job: the separate linears' bits */
static void test_group(void **state)
{
    (void)state;
    txc_env *env = txc_env_default();
    int mark = txc_env_scope_begin(env);
    const int64_t K = 512;
    uint8_t *plain[4];
    float *w[4];
    int64_t N[4] = {96, 40, 17, 8};
    txc_tensor *W[4] = {weight(env, TXC_Q4_K, N[0], K, false, &plain[0], &w[0]),
                        weight(env, TXC_Q8_0, N[1], K, false, &plain[1], &w[1]),
                        weight(env, TXC_Q4_1, N[2], K, false, &plain[2], &w[2]),
                        weight(env, TXC_Q4_0, N[3], K, true, &plain[3], &w[3])}; /* one in ggml's layout */
    txc_tensor *x = rand_x(env, 1, K);
    for (int th = 2; th <= 3; th++) {
        assert_int_equal(txc_threads_set(th), TXC_OK);
        txc_tensor *outs[4], *args[4][2];
        txc_tensor *const *argp[4];
        txc_op_attrs nb = {.flags = TXC_ATTR_NO_BIAS};
        const txc_op_attrs *attrs[4] = {&nb, &nb, &nb, &nb};
        for (int i = 0; i < 4; i++) {
            outs[i] = txc_zeros(env, 2, (int64_t[]){1, N[i]}, TXC_F32);
            args[i][0] = x, args[i][1] = W[i], argp[i] = args[i];
        }
        assert_int_equal(txc_ops_linear_group(4, outs, argp, attrs), TXC_OK);
        for (int i = 0; i < 4; i++) {
            txc_tensor *y = txc_linear(x, W[i], NULL);
            assert_non_null(y);
            assert_memory_equal(txc_tensor_data_ptr(y), txc_tensor_data_ptr(outs[i]), (size_t)N[i] * 4);
        }
    }
    for (int i = 0; i < 4; i++)
        free(plain[i]), free(w[i]);
    assert_int_equal(txc_threads_set(1), TXC_OK);
    txc_env_scope_end(env, mark);
}

static void test_not_repacked(void **state)
{
    (void)state;
    static const txc_dtype other[] = {TXC_Q5_0, TXC_Q5_1, TXC_Q5_K, TXC_Q6_K, TXC_F32, TXC_BF16};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
        assert_int_equal(txc_quant_interleave_for(other[i], 64), 0);
    for (size_t i = 0; i < sizeof R8 / sizeof R8[0]; i++) {
        assert_int_equal(txc_quant_interleave_for(R8[i], 7), 0);
        assert_int_equal(txc_quant_interleave_for(R8[i], 8), 8);
    }
    txc_array *a = txc_array_new(TXC_CPU, TXC_Q6_K, 2, (int64_t[]){16, 256});
    assert_int_equal(txc_quant_repack(a), TXC_OK);
    assert_int_equal(a->interleave, 0);
    txc_array_release(a);
    a = txc_array_new(TXC_CPU, TXC_Q4_0, 1, (int64_t[]){256}); /* not a matrix */
    assert_int_equal(txc_quant_repack(a), TXC_OK);
    assert_int_equal(a->interleave, 0);
    txc_array_release(a);
    unsetenv("TXC_QUANT_REPACK");
    assert_true(txc_quant_repack_enabled());
    setenv("TXC_QUANT_REPACK", "0", 1);
    assert_false(txc_quant_repack_enabled());
    unsetenv("TXC_QUANT_REPACK");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_group),
        cmocka_unit_test(test_not_repacked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
