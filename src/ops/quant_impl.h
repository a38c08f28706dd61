/*
 * ops/quant_impl.h — the block-quantized kernels' shared declarations (not
 * a public header; the conversions are in txc/quant.h).
 *
 * quant.c       dequantization and reference quantizers, one block at a time
 * quant_dot.c   activation quantization, the portable dot kernels, the
 *               GEMV/GEMM driver (threads), the linear and embedding hooks
 * quant_avx2.c  the AVX2 dot kernels (maddubs), picked at run time
 *
 * Activations: each float32 row of A is quantized, per block of 32, to int8
 * with a float32 scale d = amax/127 (q = round-half-away(x/d), as ggml's
 * quantize_row_q8_0/q8_1, but d kept in float32 rather than float16) and
 * s = d * sum(q) (ggml's q8_1 `s`, used by the types with a min). A weight
 * block's integer dot with the activation block is exact; the float
 * result is sum over blocks of (dw*da)*isum (+ m*s). The error against the
 * float32 product with the dequantized weight is bounded by the activation
 * rounding: |y - y_f32| <= sum_b (da_b/2) sum_{k in b} |w_k| (+ float32
 * summation error), tested in tests/test_quant.c.
 */
#ifndef TXC_OPS_QUANT_IMPL_H
#define TXC_OPS_QUANT_IMPL_H

#include <stdint.h>

#include "txc/dtype.h"
#include "txc/status.h"

/* One block (32 or 256 elements) to float32 (ggml's dequantize_row_*). */
void txc_quant_dequantize_block(txc_dtype dt, const void *block, float *y);
/* ggml's get_scale_min_k4: the j-th 6-bit scale and min of a Q4_K/Q5_K block. */
void txc_quant_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m);

/* A row of K float32 activations quantized per 32: d[K/32], s[K/32], qs[K]. */
typedef struct txc_qact {
    const float *d, *s;
    const int8_t *qs;
} txc_qact;

/* Bytes of one quantized activation row of K elements (K a multiple of 32),
 * padded to 32 bytes. */
size_t txc_qact_row_bytes(int64_t K);
/* Quantize a row x[K] into buf (txc_qact_row_bytes(K) bytes, 32-aligned). */
txc_qact txc_qact_quantize(const float *x, int64_t K, void *buf);
txc_qact txc_qact_view(const void *buf, int64_t K);

/* y[r][j*ldy] for r < m (m <= TXC_QDOT_M), j < n: the dot of weight rows
 * w + j*row_bytes (K elements of dt) with activation rows a[r]. Each y is
 * computed by the same sequence of operations whatever m and n (batches
 * and single rows agree bit for bit). */
#define TXC_QDOT_M 4
typedef void (*txc_qdot_fn)(txc_dtype dt, const uint8_t *w, size_t row_bytes, int64_t n, int64_t K,
                            const txc_qact *a, int m, float *y, int64_t ldy);
void txc_qdot_ref(txc_dtype dt, const uint8_t *w, size_t row_bytes, int64_t n, int64_t K, const txc_qact *a, int m,
                  float *y, int64_t ldy);
/* NULL when this type has no AVX2 kernel. */
txc_qdot_fn txc_qdot_avx2_for(txc_dtype dt);

/* C[i*ldc + j] = sum_k A[i*lda + k] * W[j, k] for a (N, K) weight of
 * quantized dt (ggml's layout), A float32 (M rows; quantized per row as
 * above), C float32: the linear op's product. Threads split the weight's
 * rows; no result depends on M, N or the thread count. Uses the scratch
 * slot GEMM_B. Errors: TXC_ERR_INVALID (K not whole blocks),
 * TXC_ERR_NOMEM. */
txc_status txc_quant_gemm(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const void *W,
                          txc_dtype dt, float *C, int64_t ldc);
/* One weight of a grouped GEMV: C[j] = W[j, :] . A for j < N. */
#define TXC_QGEMV_GROUP_MAX 8
typedef struct txc_qgemv_part {
    const void *W;
    txc_dtype dt;
    int64_t N;
    float *C;
} txc_qgemv_part;
/* Several quantized GEMVs of one float32 row A (K elements) as one
 * parallel job (the activation quantized once); every C[j] bit-identical
 * to txc_quant_gemm(1, N, K, ...) on that part alone. */
txc_status txc_quant_gemv_group(int n, const txc_qgemv_part *parts, int64_t K, const float *A);
/* txc_ops_linear_group's quantized case: n linears of one float32 row x
 * (args[i] = {x, w_i[, b_i]}, no residual) whose weights are all
 * quantized, into contiguous float32 outs: one grouped GEMV, then the
 * biases. Returns false (doing nothing) when the calls are not that case;
 * else true with *status set. */
#include "ops/registry.h"
bool txc_quant_linear_group(int n, txc_tensor *const *outs, txc_tensor *const *const *args,
                            const txc_op_attrs *const *attrs, txc_status *status);
/* Row `row` of a (rows, K) quantized weight to K float32 (embedding). */
txc_status txc_quant_rows(txc_dtype dt, const void *W, int64_t K, int64_t row, float *dst);

#endif
