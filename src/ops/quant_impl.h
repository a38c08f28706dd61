/*
 * ops/quant_impl.h — the block-quantized kernels' shared declarations (not
 * a public header; the conversions are in txc/quant.h).
 *
 * quant.c       dequantization and reference quantizers, one block at a time
 * quant_dot.c   activation quantization, the portable dot kernels, the
 *               GEMV/GEMM driver (threads), the linear and embedding hooks
 * quant_avx2.c  the AVX2 dot kernels (maddubs), picked at run time
 * quant_repack.c  load-time repacking into groups of 8 interleaved rows,
 *               the portable kernels over that layout
 * quant_repack_avx2.c  the AVX2 kernels over it
 *
 * Activations: each float32 row of A is quantized to int8 per block of the
 * weight type's activation block (txc_qact_block) exactly as llama.cpp's
 * CPU backend quantizes it to the weight type's vec_dot_type, so that the
 * integer block dots are those of llama.cpp on the same GGUF:
 * - 32 elements (ggml's x86 quantize_row_q8_0 / q8_1, for Q8_0, Q4_0,
 *   Q5_0 / Q4_1, Q5_1): id = 127/amax, q = nearest-even(x*id), the scale
 *   d = amax/127 rounded to float16, and per block s = d*sum(q) (d before
 *   its rounding) rounded to float16 (q8_1's s, used by the types with a
 *   min). Where float16 would overflow (d or s past 65504: ggml's inf),
 *   the float32 value is kept.
 * - 256 elements (ggml's quantize_row_q8_K_ref, for the K-quants): the
 *   same q, the float32 scale d = 1/id, the integer sum(q) per 32
 *   (from ggml's per-16 bsums) and s = d*sum(q) in float32. ggml takes
 *   the scale's sign from the block's largest value (iscale = -127/max):
 *   its q and d are then both negated, their products the same.
 * Clamped to +-127, NaN made 0 (ggml leaves NaN to the conversion).
 * Checked against ggml's own bytes in tests/test_qact_ggml.c. A weight
 * block's integer dot with the activation block is exact; the float result
 * is sum over blocks of (dw*da)*isum (+ m*s). The error against the float32
 * product with the dequantized weight is bounded by the activation rounding:
 * |y - y_f32| <= sum_B [(d_B/2 + 127 e_B) sum_{k in B} |w_k| + |m_B| t_B]
 * over the activation blocks B, e_B = |f16(d_B) - d_B| (0 for 256), m_B
 * the weight block's min and t_B = 2^-11 (X_B + 16 d_B) + 2^-25 +
 * e_B (X_B/d_B + 16), X_B = sum_{k in B} |x_k| (the rounding of s), plus
 * the float32 summation error; tested in tests/test_quant.c. (With d_B in
 * float16's normal range e_B <= 2^-11 d_B: d_B/2 + 127 e_B <= 0.562 d_B,
 * against d_B/2 for a float32 scale.)
 *
 * Interleaved weights (Q4_0, Q4_1, Q8_0, Q4_K with 8 rows or more; txc_quant_repack,
 * done once at load on the weights' copy): rows 8g..8g+7 become one group
 * occupying exactly their bytes, so a group starts where its first row
 * did and the last N % 8 rows stay in ggml's layout after the groups.
 * Block b of a group (8 * block bytes) is: the 8 rows' float16 d (16
 * bytes), for Q4_1 their 8 m (16 bytes), then the integer bytes in chunks
 * of 32: chunk c holds bytes [4c, 4c+4) of each row's qs, row by row (Q4_0
 * and Q4_1: 4 chunks of nibble bytes, chunk c giving elements 4c.. and
 * 16+4c..; Q8_0: 8 chunks). Q4_K, per super-block of the group (1152
 * bytes): the 8 d, the 8 dmin (16 bytes each), then the 64 six-bit scales
 * and 64 mins of entries e = 8j + i (row i's sub-block j): 32 bytes of
 * scale low nibbles (byte k: entry k, entry k+32 in the high nibble), 32 of
 * min low nibbles, 32 of the 2-bit highs (byte k: scale k, scale k+32, min
 * k, min k+32 from bit 0 up), then 32 chunks of 32 bytes as above (chunk c:
 * bytes [4c, 4c+4) of each row's qs). The kernels over it sum each output row in a
 * fixed order of its own: acc = 0, then per 32-block b in order
 * acc = fma((float)isum_b, dw_b * da_b, acc) with the exact integer dot
 * isum_b (Q4_0: of q - 8), and for Q4_1 a second chain accm = fma(m_b, s_b,
 * accm), y = acc + accm; Q4_K per super-block s in order the exact
 * isum_s = sum_j sc_j dot_j and msum_s = sum_j m_j sum(q_a over j),
 * acc = fma((float)isum_s, d*D_s, acc), accm = fma((float)msum_s,
 * dmin*D_s, accm), y = acc - accm. That is another float32 summation order than the
 * row-layout kernels' (whose partial sums run in 8 lanes), so a repacked
 * weight's outputs may differ from the row layout's in the last bits; the
 * bound above holds for both (the float32 summation term), tested in
 * tests/test_quant_repack.c against the dequantized float32 product and
 * bit for bit against txc_qdot_r8_ref. The tail rows take the same order
 * (txc_qdot_r8_tail), so every row of a repacked weight does.
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

/* A row of K float32 activations quantized (see above). Every row has the
 * natural layout: d[K/32], s[K/32] (for a 256-element activation block d
 * repeats the block's scale over its eight 32s) and qs[K]. The AVX2 kernels
 * read one of two extras, by the activation block:
 * - 32 (pairs of blocks b = 2p, 2p+1, matching a 4/5-bit block's nibbles):
 *   qp[64 p ..] = qs of b [0,16), b+1 [0,16), b [16,32), b+1 [16,32);
 *   dv[8 p ..] = d_b x4, d_b+1 x4; sv[4 p ..] = 0, s_b, 0, s_b+1;
 *   iv[8 p ..] = sum(q_b), 0, 0, 0, sum(q_b+1), 0, 0, 0 (int32); an odd
 *   last block pairs with zeros.
 * - 256: bs[K/32] = sum(q) per 32 (int16), D[K/256] the block scales. */
typedef struct txc_qact {
    const float *d, *s;
    const int8_t *qs;
    const int8_t *qp;
    const float *dv, *sv;
    const int32_t *iv;
    const int16_t *bs;
    const float *D;
} txc_qact;

/* The activation block of a quantized weight type: 256 for Q4_K, Q5_K,
 * Q6_K, else 32. */
int64_t txc_qact_block(txc_dtype dt);
/* Bytes of one quantized activation row of K elements (K a multiple of
 * `block`), a multiple of 32. */
size_t txc_qact_row_bytes(int64_t K, int64_t block);
/* Quantize a row x[K] into buf (txc_qact_row_bytes(K, block) bytes,
 * 32-aligned). */
txc_qact txc_qact_quantize(const float *x, int64_t K, int64_t block, void *buf);
txc_qact txc_qact_view(const void *buf, int64_t K, int64_t block);
/* One activation block of `block` floats x to q[block], its scale *d and
 * its per-32 sums[block/32]; the AVX2 one (NULL without AVX2) gives the
 * portable loop's bits on finite inputs. */
typedef void (*txc_qact_block_fn)(const float *x, int64_t block, int8_t *q, float *d, int32_t *sums);
txc_qact_block_fn txc_qact_block_avx2(void);

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

/* Interleaved weights (see above). Groups of TXC_QR8 rows. */
#define TXC_QR8 8
/* y[r][(8g + i) * ldy'] ... : for groups g < n of the interleaved weight
 * at w (row_bytes per row, so a group is 8 * row_bytes), y[r*ldy + 8g + i]
 * is row 8g+i's dot with a[r], in the order above. */
void txc_qdot_r8_ref(txc_dtype dt, const uint8_t *w, size_t row_bytes, int64_t n, int64_t K, const txc_qact *a,
                     int m, float *y, int64_t ldy);
/* NULL when this type has no AVX2 kernel over the interleaved layout. */
txc_qdot_fn txc_qdot_r8_avx2_for(txc_dtype dt);
/* The AVX-512 VNNI one (the same bits; SIMD level 2): NULL without it or
 * without AVX-512 VNNI and VL on this CPU. */
txc_qdot_fn txc_qdot_r8_vnni_for(txc_dtype dt);
/* n rows of ggml's layout at w, in the interleaved kernels' order (the
 * tail rows of a repacked weight); arguments as txc_qdot_fn. */
void txc_qdot_r8_tail(txc_dtype dt, const uint8_t *w, size_t row_bytes, int64_t n, int64_t K, const txc_qact *a,
                      int m, float *y, int64_t ldy);

/* C[i*ldc + j] = sum_k A[i*lda + k] * W[j, k] for a (N, K) weight of
 * quantized dt (ggml's layout), A float32 (M rows; quantized per row as
 * above), C float32: the linear op's product. Threads split the weight's
 * rows; no result depends on M, N or the thread count. Uses the scratch
 * slot GEMM_B. Errors: TXC_ERR_INVALID (K not whole blocks),
 * TXC_ERR_NOMEM. */
txc_status txc_quant_gemm(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const void *W,
                          txc_dtype dt, float *C, int64_t ldc);
/* txc_quant_gemm on a weight with interleave il (0: ggml's rows, TXC_QR8:
 * repacked, see above). */
txc_status txc_quant_gemm_il(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const void *W,
                             txc_dtype dt, int il, float *C, int64_t ldc);
/* One weight of a grouped GEMV: C[j] = W[j, :] . A for j < N. */
#define TXC_QGEMV_GROUP_MAX 8
typedef struct txc_qgemv_part {
    const void *W;
    txc_dtype dt;
    int64_t N;
    float *C;
    int il; /* the weight's interleave (0 or TXC_QR8) */
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
/* The interleave linear and embedding read the quantized weight tensor w
 * with: its array's (0 or TXC_QR8); -1 when w views only part of an
 * interleaved array (refused: no kernel reads that). */
int txc_quant_weight_il(const txc_tensor *w);
/* Row `row` of a (rows, K) quantized weight to K float32 (embedding). */
txc_status txc_quant_rows(txc_dtype dt, const void *W, int64_t K, int64_t row, float *dst);
/* The same for an (N, K) weight of interleave il (0 or TXC_QR8). */
txc_status txc_quant_rows_il(txc_dtype dt, const void *W, int64_t N, int il, int64_t K, int64_t row, float *dst);

#endif
