/* Block-quantized dtypes (ggml's Q8_0 ... Q6_K).
 *
 * - the dtype table: block sizes and bytes as ggml-common.h's structs, ggml
 *   type ids both ways, names, arrays sized by blocks and refused when the
 *   last dim is not a whole number of blocks.
 * - dequantization bit-exact against gguf.quants.dequantize and
 *   quantization bit-exact against gguf.quants.quantize / ggml's reference
 *   quantizers (tests/fixtures/quant_fixtures.json, written by
 *   scripts/gen_quant_fixtures.py), for every type.
 * - the linear op with a quantized weight (activations quantized to int8
 *   per 32, per 256 for the K-quants, as ggml: ops/quant_impl.h) against
 *   the float32 product with the dequantized weight (in double):
 *   |y - ref| <= sum_B [(d_B/2 + 127 e_B) sum_{k in B} |w_k| + |m_B| t_B]
 *   + 1e-5 sum_k |w_k x_k| over the activation blocks B, d_B = amax_B/127,
 *   e_B = |f16(d_B) - d_B| (the float16 scale of q8_0/q8_1; 0 for the
 *   K-quants' float32 q8_K scale), m_B the weight block's min (Q4_1, Q5_1)
 *   and t_B = 2^-11 (X_B + 16 d_B) + 2^-25 + e_B (X_B/d_B + 16), X_B =
 *   sum_{k in B} |x_k| (the float16 rounding of q8_1's s = d*sum(q)) — the
 *   bound of the activation rounding plus float32 summation; at SIMD
 *   levels 0 (portable) and 1 (AVX2); K of
 *   an even and an odd number of 32-blocks (K = 512, 288) and of 2 and 3
 *   super-blocks (512, 768); each row of a batch (M = 2..9) bit-identical
 *   to that row alone, and with 1 or 2 threads.
 * - the activation quantization: AVX2 and portable give the same bytes
 *   (halves rounded to even, NaN to 0); against ggml's own row quantizers
 *   in tests/test_qact_ggml.c.
 * - embedding: a quantized table's rows are the dequantized rows, exactly.
 * - the jit: a compiled linear on a quantized weight input equals eager
 *   bit for bit; other ops refuse a quantized tensor with one message.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/kernels.h"
#include "ops/quant_impl.h"
#include "ops/registry.h"
#include "txc/env.h"
#include "txc/jit.h"
#include "txc/ops.h"
#include "txc/quant.h"
#include "txc/tensor.h"
#include "txc/threads.h"
#include <math.h>

#include "testutil.h"
#include "txc/array.h"
#include "txc/dtype.h"
#include "txc/status.h"

static void test_dtype_table(void **state)
{
    (void)state;
    static const struct { txc_dtype dt; const char *name; int64_t bs; size_t bb; int ggml; } want[] = {
        {TXC_Q8_0, "q8_0", 32, 34, 8},    {TXC_Q4_0, "q4_0", 32, 18, 2},    {TXC_Q4_1, "q4_1", 32, 20, 3},
        {TXC_Q5_0, "q5_0", 32, 22, 6},    {TXC_Q5_1, "q5_1", 32, 24, 7},    {TXC_Q4_K, "q4_K", 256, 144, 12},
        {TXC_Q5_K, "q5_K", 256, 176, 13}, {TXC_Q6_K, "q6_K", 256, 210, 14}, {TXC_F32, "float32", 1, 4, 0},
        {TXC_F16, "float16", 1, 2, 1},    {TXC_BF16, "bfloat16", 1, 2, 30},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        txc_dtype dt = want[i].dt, back;
        assert_string_equal(txc_dtype_name(dt), want[i].name);
        assert_int_equal(txc_dtype_block_size(dt), want[i].bs);
        assert_int_equal(txc_dtype_block_bytes(dt), want[i].bb);
        assert_int_equal(txc_dtype_to_ggml(dt), want[i].ggml);
        assert_true(txc_dtype_from_ggml((uint32_t)want[i].ggml, &back));
        assert_int_equal(back, dt);
        assert_int_equal(txc_dtype_is_quantized(dt), want[i].bs > 1);
        if (want[i].bs > 1) {
            assert_int_equal(txc_dtype_size(dt), 0);
            assert_int_equal(txc_dtype_row_bytes(dt, 4 * want[i].bs), 4 * want[i].bb);
            assert_int_equal(txc_dtype_row_bytes(dt, want[i].bs + 1), 0);
            assert_true(txc_dtype_parse(want[i].name, &back) && back == dt);
        }
    }
    txc_dtype dt;
    assert_true(txc_dtype_parse("Q4_K", &dt) && dt == TXC_Q4_K);
    assert_true(txc_dtype_parse("q6_k", &dt) && dt == TXC_Q6_K);
    assert_false(txc_dtype_from_ggml(10, &dt)); /* q2_K: not read */
    assert_false(txc_dtype_from_ggml(4, &dt));  /* removed id */
    assert_false(txc_dtype_from_ggml(1000, &dt));
    assert_false(txc_dtype_from_safetensors("q4_0", &dt));
    size_t n;
    assert_false(txc_dtype_nbytes(TXC_Q4_0, 33, &n));
    assert_false(txc_dtype_nbytes(TXC_Q4_0, -32, &n));
    assert_false(txc_dtype_nbytes(TXC_Q4_K, INT64_MAX - (INT64_MAX % 256), &n) && n < 1000);
}

static void test_arrays(void **state)
{
    (void)state;
    txc_array *a = txc_array_new(TXC_CPU, TXC_Q4_K, 2, (int64_t[]){3, 512});
    assert_non_null(a);
    assert_int_equal(txc_array_nbytes(a), 3 * 2 * 144);
    assert_int_equal(txc_array_numel(a), 3 * 512);
    txc_array_release(a);
    txc_clear_error();
    assert_null(txc_array_new(TXC_CPU, TXC_Q8_0, 2, (int64_t[]){2, 48}));
    assert_non_null(strstr(txc_last_error(), "multiple of 32"));
    assert_null(txc_array_new(TXC_CPU, TXC_Q8_0, 0, NULL));
    /* from a storage: sized by blocks, must fit */
    txc_storage *s = txc_storage_new(TXC_CPU, 2 * 34);
    a = txc_array_from_storage(s, 0, TXC_Q8_0, 2, (int64_t[]){2, 32});
    assert_non_null(a);
    txc_array_release(a);
    assert_null(txc_array_from_storage(s, 2, TXC_Q8_0, 2, (int64_t[]){2, 32}));
    txc_storage_release(s);
}

/* hex string -> malloc'd bytes (*n of them) */
static uint8_t *unhex(const char *h, size_t *n)
{
    size_t len = strlen(h);
    assert_int_equal(len % 2, 0);
    uint8_t *b = malloc(len / 2 + 1);
    for (size_t i = 0; i < len / 2; i++) {
        unsigned v;
        assert_int_equal(sscanf(h + 2 * i, "%2x", &v), 1);
        b[i] = (uint8_t)v;
    }
    *n = len / 2;
    return b;
}

static void test_fixtures(void **state)
{
    (void)state;
    char *text = tu_read_file(tu_path("%s/tests/fixtures/quant_fixtures.json", tu_source_dir()), NULL);
    assert_non_null(text);
    cJSON *doc = cJSON_Parse(text);
    assert_non_null(doc);
    const cJSON *c;
    int n_cases = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(doc, "cases"))
    {
        const char *name = cJSON_GetObjectItem(c, "type")->valuestring;
        txc_dtype dt;
        assert_true(txc_dtype_parse(name, &dt));
        int64_t n = cJSON_GetObjectItem(c, "n")->valueint;
        size_t nb, nd, ni, nq;
        uint8_t *blocks = unhex(cJSON_GetObjectItem(c, "blocks")->valuestring, &nb);
        uint8_t *deq = unhex(cJSON_GetObjectItem(c, "dequant")->valuestring, &nd);
        uint8_t *in = unhex(cJSON_GetObjectItem(c, "input")->valuestring, &ni);
        uint8_t *q = unhex(cJSON_GetObjectItem(c, "quant")->valuestring, &nq);
        assert_int_equal(nb, txc_dtype_row_bytes(dt, n));
        assert_int_equal(nq, nb);
        assert_int_equal(nd, (size_t)n * 4);
        float *got = malloc((size_t)n * 4);
        assert_int_equal(txc_quant_dequantize(dt, blocks, got, n), TXC_OK);
        for (int64_t i = 0; i < n; i++)
            if (memcmp(got + i, deq + 4 * i, 4) != 0) {
                float w;
                memcpy(&w, deq + 4 * i, 4);
                fail_msg("%s dequantize: element %lld is %.9g, gguf.quants says %.9g", name, (long long)i, got[i], w);
            }
        uint8_t *qb = malloc(nq);
        float *x = malloc(ni);
        memcpy(x, in, ni);
        assert_int_equal(txc_quant_quantize(dt, x, qb, n), TXC_OK);
        for (size_t i = 0; i < nq; i++)
            if (qb[i] != q[i])
                fail_msg("%s quantize: byte %zu (block %zu) is 0x%02x, %s says 0x%02x", name, i,
                         i / txc_dtype_block_bytes(dt), qb[i], cJSON_GetObjectItem(c, "quant_oracle")->valuestring, q[i]);
        /* not whole blocks: refused */
        assert_int_equal(txc_quant_dequantize(dt, blocks, got, n - 1), TXC_ERR_INVALID);
        assert_int_equal(txc_quant_quantize(dt, x, qb, n + 1), TXC_ERR_INVALID);
        free(got), free(qb), free(x), free(blocks), free(deq), free(in), free(q);
        n_cases++;
    }
    assert_int_equal(n_cases, 8);
    /* NaN and infinite inputs: some bytes, no undefined behaviour (UBSan build) */
    float bad[256];
    for (int i = 0; i < 256; i++)
        bad[i] = i % 3 == 0 ? NAN : i % 3 == 1 ? INFINITY : -1e38f;
    uint8_t qbad[256 * 4];
    for (size_t t = 0; t < 8; t++) {
        static const txc_dtype all[] = {TXC_Q8_0, TXC_Q4_0, TXC_Q4_1, TXC_Q5_0, TXC_Q5_1, TXC_Q4_K, TXC_Q5_K, TXC_Q6_K};
        assert_int_equal(txc_quant_quantize(all[t], bad, qbad, 256), TXC_OK);
    }
    assert_int_equal(txc_quant_dequantize(TXC_I64, text, NULL, 0), TXC_ERR_UNSUPPORTED);
    cJSON_Delete(doc);
    free(text);
}

static const txc_dtype ALL[] = {TXC_Q8_0, TXC_Q4_0, TXC_Q4_1, TXC_Q5_0, TXC_Q5_1, TXC_Q4_K, TXC_Q5_K, TXC_Q6_K};

static uint64_t rng_state = 88172645463325252ull;
static float frand(void) /* about N(0, 1), from a xorshift */
{
    float s = 0;
    for (int i = 0; i < 4; i++) {
        rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
        s += (float)((rng_state >> 11) * (1.0 / 9007199254740992.0)) - 0.5f;
    }
    return s * 1.7f;
}

/* a (N, K) weight of dt from random floats; *deq its dequantized values */
static txc_tensor *quant_weight(txc_env *env, txc_dtype dt, int64_t N, int64_t K, float **deq)
{
    float *w = malloc((size_t)(N * K) * 4);
    for (int64_t i = 0; i < N * K; i++)
        w[i] = frand() * 0.02f;
    txc_array *a = txc_array_new(TXC_CPU, dt, 2, (int64_t[]){N, K});
    assert_non_null(a);
    assert_int_equal(txc_quant_quantize(dt, w, txc_array_data(a), N * K), TXC_OK);
    assert_int_equal(txc_quant_dequantize(dt, txc_array_data(a), w, N * K), TXC_OK);
    *deq = w;
    txc_tensor *t = txc_tensor_wrap(env, a);
    txc_array_release(a);
    return t;
}

static txc_tensor *rand_x(txc_env *env, int64_t M, int64_t K)
{
    txc_tensor *x = txc_zeros(env, 2, (int64_t[]){M, K}, TXC_F32);
    if (!x)
        fail_msg("zeros: %s", txc_last_error());
    float *p = txc_tensor_data_ptr(x);
    for (int64_t i = 0; i < M * K; i++)
        p[i] = frand();
    p[5] = 40.0f; /* an outlier: its block's scale is large */
    return x;
}

/* the float16 scale of an activation block of 32 (ops/quant_impl.h: kept
 * in float32 where float16 would overflow) */
static double f16_scale(double d)
{
    float r = txc_f16_to_f32(txc_f32_to_f16((float)d));
    return isinf(r) ? d : r;
}

/* the bound of ops/quant_impl.h over the type's activation blocks B (32 or
 * 256 elements); wq the quantized weight (its blocks' mins) */
static void check_bound(txc_dtype dt, const float *y, const float *x, const float *w, const uint8_t *wq, int64_t M,
                        int64_t N, int64_t K)
{
    int64_t B = txc_qact_block(dt);
    bool has_min = dt == TXC_Q4_1 || dt == TXC_Q5_1;
    size_t rb = txc_dtype_row_bytes(dt, K), bb = txc_dtype_block_bytes(dt);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double ref = 0, bound = 0, mag = 0;
            for (int64_t b = 0; b < K / B; b++) {
                double amax = 0, sw = 0, sx = 0;
                for (int64_t k = 0; k < B; k++) {
                    double xv = x[i * K + b * B + k], wv = w[j * K + b * B + k];
                    ref += xv * wv;
                    mag += fabs(xv * wv);
                    amax = fmax(amax, fabs(xv));
                    sw += fabs(wv);
                    sx += fabs(xv);
                }
                double d = (double)((float)amax / 127.0f), e = B == 256 ? 0.0 : fabs(f16_scale(d) - d);
                bound += (d / 2 + 127 * e) * sw;
                if (has_min && d > 0) {
                    uint16_t h;
                    memcpy(&h, wq + (size_t)j * rb + (size_t)b * bb + 2, 2);
                    double t = ldexp(sx + 16 * d, -11) + ldexp(1.0, -25) + e * (sx / d + 16);
                    bound += fabs(txc_f16_to_f32(h)) * t;
                }
            }
            bound = bound * 1.0001 + 1e-5 * mag;
            double got = y[i * N + j];
            if (!(fabs(got - ref) <= bound))
                fail_msg("%s linear K=%lld [%lld, %lld]: %.9g, float32 reference %.9g, bound %.3g", txc_dtype_name(dt),
                         (long long)K, (long long)i, (long long)j, got, ref, bound);
        }
}

/* K: an even and an odd number of 32-element blocks (the AVX2 kernels of
 * the 4/5-bit types take two blocks a step), and 3 super-blocks */
static void check_linear(txc_env *env, txc_dtype dt, int64_t K, int64_t N, int64_t M)
{
    float *w;
    txc_tensor *W = quant_weight(env, dt, N, K, &w);
    txc_tensor *x = rand_x(env, M, K);
    const float *xp = txc_tensor_data_ptr(x);
    for (int level = 0; level <= 1; level++) {
        txc_kern_set_simd_level(level);
        for (int th = 1; th <= 3; th++) {
            assert_int_equal(txc_threads_set(th), TXC_OK);
            txc_tensor *y = txc_linear(x, W, NULL);
            if (!y)
                fail_msg("%s: %s", txc_dtype_name(dt), txc_last_error());
            assert_int_equal(txc_tensor_dtype(y), TXC_F32);
            const float *yp = txc_tensor_data_ptr(y);
            check_bound(dt, yp, xp, w, txc_tensor_data_ptr(W), M, N, K);
            /* each row alone, and the first rows as smaller batches: the same bits */
            for (int64_t m = 1; m < M; m += 3) {
                txc_tensor *xs = txc_narrow(x, 0, 0, m);
                txc_tensor *ys = txc_linear(xs, W, NULL);
                assert_non_null(ys);
                assert_memory_equal(txc_tensor_data_ptr(ys), yp, (size_t)(m * N) * 4);
            }
            for (int64_t i = 0; i < M; i++) {
                txc_tensor *xi = txc_select(x, 0, i);
                txc_tensor *yi = txc_linear(xi, W, NULL);
                assert_non_null(yi);
                assert_memory_equal(txc_tensor_data_ptr(yi), yp + i * N, (size_t)N * 4);
            }
        }
    }
    txc_kern_set_simd_level(-1);
    /* the two thread counts gave the same bits: compare 1 and 2 once more directly */
    assert_int_equal(txc_threads_set(1), TXC_OK);
    txc_tensor *y1 = txc_linear(x, W, NULL);
    assert_int_equal(txc_threads_set(2), TXC_OK);
    txc_tensor *y2 = txc_linear(x, W, NULL);
    assert_memory_equal(txc_tensor_data_ptr(y1), txc_tensor_data_ptr(y2), (size_t)(M * N) * 4);
    free(w);
}

static void test_linear(void **state)
{
    (void)state;
    txc_env *env = txc_env_default();
    int mark = txc_env_scope_begin(env);
    static const int64_t Ks[] = {512, 288, 768};
    for (size_t t = 0; t < sizeof ALL / sizeof ALL[0]; t++)
        for (size_t k = 0; k < sizeof Ks / sizeof Ks[0]; k++)
            if (Ks[k] % txc_dtype_block_size(ALL[t]) == 0)
                check_linear(env, ALL[t], Ks[k], k == 0 ? 80 : 37, k == 0 ? 9 : 5);
    assert_int_equal(txc_threads_set(1), TXC_OK);
    txc_env_scope_end(env, mark);
}

/* the activation quantization: the AVX2 block quantizer gives the portable
 * loop's bytes (round half to even at exact halves, NaN to 0, the clamp),
 * for activation blocks of 32 and 256 */
static void test_qact(void **state)
{
    (void)state;
    const int64_t K = 768;
    float *x = malloc((size_t)K * 4);
    for (int64_t i = 0; i < K; i++)
        x[i] = frand();
    /* block 0: amax 127, so x*id is x: exact halves both ways, and near-halves */
    x[0] = 127.0f, x[1] = 2.5f, x[2] = -2.5f, x[3] = 0.5f, x[4] = -0.5f, x[5] = 0.49999997f, x[6] = -126.5f;
    x[7] = 3.5f, x[8] = 1.5000001f;
    x[700] = NAN; /* in block 21 of 32, super-block 2: a NaN element */
    x[64] = 0.0f;
    for (int i = 96; i < 128; i++) /* block 3: all zero, d = 0 */
        x[i] = 0.0f;
    for (int64_t block = 32; block <= 256; block *= 8) {
        size_t n = txc_qact_row_bytes(K, block);
        char *b0 = aligned_alloc(32, n), *b1 = aligned_alloc(32, n);
        memset(b0, 0, n), memset(b1, 0, n);
        txc_kern_set_simd_level(0);
        txc_qact_quantize(x, K, block, b0);
        txc_kern_set_simd_level(1);
        txc_qact_quantize(x, K, block, b1);
        txc_kern_set_simd_level(-1);
        txc_qact a0 = txc_qact_view(b0, K, block), a1 = txc_qact_view(b1, K, block);
        /* outside the NaN's block (whose amax depends on the order of the max): the same bytes */
        int64_t nan_at = 700 / block * block;
        assert_memory_equal(a0.qs, a1.qs, (size_t)nan_at);
        assert_memory_equal(a0.qs + nan_at + block, a1.qs + nan_at + block, (size_t)(K - nan_at - block));
        assert_int_equal(a0.qs[700], 0);
        assert_int_equal(a1.qs[700], 0);
        for (int64_t b = 0; b < K / 32; b++)
            if (b * 32 / block != 700 / block) {
                assert_true(a0.d[b] == a1.d[b]);
                assert_true(a0.s[b] == a1.s[b]);
            }
        if (block == 32) {
            static const int8_t want[9] = {127, 2, -2, 0, 0, 0, -126, 4, 2};
            assert_memory_equal(a0.qs, want, 9);
            assert_true(a0.d[3] == 0.0f);
        }
        free(b0), free(b1);
    }
    free(x);
}

static void test_embedding(void **state)
{
    (void)state;
    txc_env *env = txc_env_default();
    int mark = txc_env_scope_begin(env);
    for (size_t t = 0; t < sizeof ALL / sizeof ALL[0]; t++) {
        float *w;
        const int64_t V = 10, D = 256;
        txc_tensor *W = quant_weight(env, ALL[t], V, D, &w);
        txc_tensor *ids = txc_zeros(env, 1, (int64_t[]){3}, TXC_I64);
        int64_t *ip = txc_tensor_data_ptr(ids);
        ip[0] = 7, ip[1] = 0, ip[2] = 9;
        txc_tensor *e = txc_embedding(W, ids);
        assert_non_null(e);
        assert_int_equal(txc_tensor_dtype(e), TXC_F32);
        for (int i = 0; i < 3; i++)
            assert_memory_equal((const float *)txc_tensor_data_ptr(e) + i * D, w + ip[i] * D, (size_t)D * 4);
        ip[0] = 10;
        assert_null(txc_embedding(W, ids));
        free(w);
    }
    txc_env_scope_end(env, mark);
}

/* the grouped GEMV of sibling projections: the same bits as separate linears */
static void test_group(void **state)
{
    (void)state;
    txc_env *env = txc_env_default();
    int mark = txc_env_scope_begin(env);
    const int64_t K = 512;
    float *w[3];
    txc_tensor *W[3] = {quant_weight(env, TXC_Q4_0, 96, K, &w[0]), quant_weight(env, TXC_Q6_K, 40, K, &w[1]),
                        quant_weight(env, TXC_Q4_1, 17, K, &w[2])};
    txc_tensor *x = rand_x(env, 1, K);
    txc_tensor *bias = txc_zeros(env, 1, (int64_t[]){40}, TXC_F32);
    for (int j = 0; j < 40; j++)
        ((float *)txc_tensor_data_ptr(bias))[j] = 0.25f * (float)j;
    assert_int_equal(txc_threads_set(2), TXC_OK);
    txc_tensor *outs[3], *args0[2] = {x, W[0]}, *args1[3] = {x, W[1], bias}, *args2[2] = {x, W[2]};
    txc_tensor *const *args[3] = {args0, args1, args2};
    txc_op_attrs nb = {.flags = TXC_ATTR_NO_BIAS}, wb = {0};
    const txc_op_attrs *attrs[3] = {&nb, &wb, &nb};
    int64_t N[3] = {96, 40, 17};
    for (int i = 0; i < 3; i++)
        outs[i] = txc_zeros(env, 2, (int64_t[]){1, N[i]}, TXC_F32);
    assert_int_equal(txc_ops_linear_group(3, outs, args, attrs), TXC_OK);
    for (int i = 0; i < 3; i++) {
        txc_tensor *y = txc_linear(x, W[i], i == 1 ? bias : NULL);
        assert_non_null(y);
        assert_memory_equal(txc_tensor_data_ptr(y), txc_tensor_data_ptr(outs[i]), (size_t)N[i] * 4);
        free(w[i]);
    }
    assert_int_equal(txc_threads_set(1), TXC_OK);
    txc_env_scope_end(env, mark);
}

static txc_status lin_fn(void *ctx, txc_tensor *const *in, int n_in, const void *st, size_t sl, txc_tensor **out,
                         int max_out, int *n_out)
{
    (void)ctx, (void)n_in, (void)st, (void)sl, (void)max_out;
    txc_tensor *h = txc_linear(in[0], in[1], NULL);
    out[0] = txc_silu(txc_linear(h, in[2], NULL));
    *n_out = 1;
    return out[0] ? TXC_OK : TXC_ERR_INVALID;
}

static void test_jit_and_refusals(void **state)
{
    (void)state;
    txc_env *env = txc_env_default();
    int mark = txc_env_scope_begin(env);
    float *w1, *w2;
    txc_tensor *W1 = quant_weight(env, TXC_Q4_K, 64, 256, &w1), *W2 = quant_weight(env, TXC_Q8_0, 32, 64, &w2);
    txc_tensor *x = rand_x(env, 1, 256);
    txc_jit *jit = txc_jit_new(env, "quant", lin_fn, NULL);
    txc_tensor *in[3] = {x, W1, W2}, *out[1];
    int n_out = 0;
    for (int call = 0; call < 2; call++) {
        assert_int_equal(txc_jit_call(jit, in, 3, NULL, NULL, 0, out, 1, &n_out), TXC_OK);
        txc_tensor *eager = txc_silu(txc_linear(txc_linear(x, W1, NULL), W2, NULL));
        assert_non_null(eager);
        assert_memory_equal(txc_tensor_data_ptr(out[0]), txc_tensor_data_ptr(eager), 32 * 4);
    }
    assert_int_equal(txc_jit_get_stats(jit).misses, 1);
    txc_jit_free(jit);
    /* other ops refuse a quantized tensor */
    txc_clear_error();
    assert_null(txc_add(W1, W1));
    assert_non_null(strstr(txc_last_error(), "q4_K"));
    /* in_features mismatch */
    txc_clear_error();
    assert_null(txc_linear(rand_x(env, 1, 128), W1, NULL));
    assert_non_null(strstr(txc_last_error(), "do not match"));
    free(w1), free(w2);
    txc_env_scope_end(env, mark);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_table),
        cmocka_unit_test(test_arrays),
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_qact),
        cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_group),
        cmocka_unit_test(test_jit_and_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
