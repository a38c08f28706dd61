/*
 * ops/kernels.h — what the CPU kernel files share (not a public header).
 *
 *   elementwise.c  txc_ops_loop (the n-d strided loop every driver uses), txc_ops_loop_rows,
 *                  txc_ops_convert (strided dtype conversion, F16C rows),
 *                  txc_kern_copy (an n-d strided block copied/converted),
 *                  vector math: exp with a shift and a sum, sigmoid, silu,
 *                  max; txc_kern_round_through
 *   linalg.c       the f32 GEMM kernels, the SIMD level, txc_kern_shape_str
 *   gemm_avx2.c    the packed 6 x 16 AVX2 GEMM of prefill (no AVX-512/AMX)
 *   gemm_bf16dot.c the 6 x 64 AVX-512 BF16 (VDPBF16PS) GEMM of bf16 prefill (no AMX)
 *   attention_scores.c  attention's row-invariant Q·Kᵀ
 *
 * The kernels use the per-thread scratch of ops/registry.h (txc_scratch)
 * for work buffers, never malloc, so a compiled plan run again on the same
 * shapes allocates nothing. A helper here that uses a slot: TXC_SCRATCH_ROW
 * inside txc_kern_gemm_nt/nn (so their callers must not hold ROW across a
 * GEMM call); the other helpers use no scratch.
 */
#ifndef TXC_OPS_KERNELS_H
#define TXC_OPS_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops/registry.h"

/* ---- SIMD build knobs ---------------------------------------------------------
 * x86-64 with GCC or clang: AVX2+FMA+F16C and AVX-512 code is compiled with
 * per-function target attributes and chosen at run time by
 * txc_kern_simd_level(); -DTXC_NO_SIMD builds the portable C paths only. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(TXC_NO_SIMD)
#include <immintrin.h>
#define TXC_HAVE_X86 1
#define TXC_AVX2 __attribute__((target("avx2,fma,f16c")))
#define TXC_INLINE_AVX2 static inline __attribute__((always_inline, target("avx2,fma,f16c")))
#define TXC_AVX512_TARGET "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"
#define TXC_AVX512 __attribute__((target(TXC_AVX512_TARGET)))
#define TXC_INLINE_AVX512 static inline __attribute__((always_inline, target(TXC_AVX512_TARGET)))
#else
#define TXC_HAVE_X86 0
#endif

/* 0: portable C; 1: AVX2+FMA+F16C; 2: also AVX-512 F/BW/VL/DQ (where the
 * CPU also has AVX512_BF16, txc_kern_avx512bf16(), the bfloat16-weight GEMM
 * of prefill runs on VDPBF16PS, gemm_bf16dot.c); 3: also AMX-BF16 +
 * AVX512-BF16 with the OS's permission for the tile state (the
 * bfloat16-weight GEMM of prefill runs on AMX, below). */
int txc_kern_simd_level(void);
/* -1: automatic; 0: the portable C kernels, 1: at most AVX2, 2: at most
 * AVX-512 without AMX (for tests). */
void txc_kern_set_simd_level(int level);

/* ---- GEMM (linalg.c) -------------------------------------------------------------
 * A is float32 (rows of stride lda), B float32/bfloat16/float16 read as
 * stored, C float32 (rows of stride ldc); accumulation in float32.
 *   nt: C[i,j] = sum_k A[i,k] * B[j,k]  (B rows of stride ldb: x·Wᵀ)
 *   nn: C[i,j] = sum_k A[i,k] * B[k,j]  (B row-major, rows of stride ldb) */
void txc_kern_gemm_nt(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const void *B,
                      txc_dtype bdt, int64_t ldb, float *C, int64_t ldc);
void txc_kern_gemm_nn(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const void *B,
                      txc_dtype bdt, int64_t ldb, float *C, int64_t ldc);

/* attention_scores.c: attention's scores S[i,j] = sum_e Q[i,e] * K[j,e]
 * (Q float32, rows of stride ldq; K float32/bfloat16/float16 rows of
 * stride ldk, unit inner stride; S float32 rows of stride lds), for
 * i < M, j < N, E elements. Every S[i,j]'s arithmetic depends only on
 * Q's row i and K's row j — not on M, N, i, j or the tile the score is in
 * (unlike txc_kern_gemm_nt, whose reduction depends on the column's tile),
 * so attention's rows are bit-identical whatever the chunk of rows or keys
 * they are computed in (attention.c). Uses no scratch. */
void txc_kern_attn_scores(int64_t M, int64_t N, int64_t E, const float *Q, int64_t ldq, const void *K,
                          txc_dtype kdt, int64_t ldk, float *S, int64_t lds);

/* Row invariance (what batched decoding's bit-exactness rests on,
 * txc/batch.h): txc_kern_gemm_nt with 1 < M <= TXC_KERN_ROWS_INVARIANT_MAX
 * runs txc_kern_gemv_rows, which gives every row of C the bits of
 * txc_kern_gemm_nt(1, N, K, that row, ...) — whatever M, the other rows,
 * the thread count — and reads B once for all rows on AVX2 and AVX-512
 * (gemv_batch.c: each one-row kernel's per-element order in multi-row
 * tiles). So below the bound the GEMM never switches summation order with
 * M: no AVX-512 tiles of another order, no AMX (which rounds A to bfloat16:
 * only for M above the bound), no half-to-float block conversion path. On
 * the portable build the rows run one at a time through the one-row GEMV
 * (the same bits; B read once per row). Above the bound (long prefills) the
 * fastest kernel for M is used and rows may differ in the last bits from
 * M = 1. The NN kernels (transposed weights) compute every element in k
 * order whatever M and are row-invariant at any M. */
#define TXC_KERN_ROWS_INVARIANT_MAX 32
/* Whether every row of txc_kern_gemm_nt with M > TXC_KERN_ROWS_INVARIANT_MAX
 * has bits that depend on its row of A alone (not on M, the other rows or
 * the row's place among them): at SIMD level 1 (gemm_avx2.c's packed
 * kernel: one fma chain per element whatever M) and 0 (the portable
 * kernel: one dot per element); not established for the AVX-512 and AMX
 * tiles (levels 2 and 3): false there (level 2's VDPBF16PS GEMM has the
 * property, its f32/f16 tiles do not). (They are other bits than M <= 32's
 * either way.) txc/batch.h puts several prompts' chunks of more than 32
 * rows in one forward only where this holds (tests/test_batch.c). */
bool txc_kern_gemm_rows_invariant(void);
void txc_kern_gemv_rows(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const void *B, txc_dtype bdt,
                        int64_t ldb, float *C, int64_t ldc);

/* gemm_avx2.c: C = A·Bᵀ as txc_kern_gemm_nt (A float32, rows of stride
 * lda; B float32, bfloat16 or float16 rows of stride ldb; C float32, rows
 * of stride ldc), on AVX2+FMA in 6 x 16 register tiles over packed operands
 * (A in 6-row panels, 4-row ones at the M edge, B converted to float32
 * once per 16 columns and K block), threads over chunks of columns:
 * txc_kern_gemm_nt's kernel for
 * M > TXC_KERN_ROWS_INVARIANT_MAX at SIMD level 1 (no AVX-512, no AMX:
 * prefill on AMD Zen 1-3, Intel before Skylake-SP).
 * Order: every C[i,j] is the fused multiply-add chain c = fma(A[i,k],
 * B[j,k], c) for k = 0..K-1 from c = 0 (B widened exactly to float32),
 * whatever M, N, the strides, the blocking and the thread count: a row
 * depends only on its row of A and is bit-identical to the scalar loop with
 * C's fmaf (tests/test_gemm_avx2.c). (It is not the one-row GEMV's 8-lane
 * order: below the bound the GEMV rows run instead.)
 * Error bound (recursive summation of exact products, Higham, "Accuracy and
 * Stability of Numerical Algorithms", 2nd ed., eq. 4.4):
 * |C - exact| <= γ(K-1) sum_k |A_ik B_jk|, γ(n) = n u / (1 - n u),
 * u = 2^-24, against the exact product of A and the weights as stored (no
 * rounding of A, unlike AMX's bfloat16 A); tested with a double reference.
 * Uses the calling thread's scratch slot GEMM_PACK (A's panels: the M block
 * of <= 192 rows (+3) x K floats). Returns false, touching nothing, where it
 * cannot run (no AVX2, M, N or K <= 0, a dtype other than those three, no
 * scratch memory): the caller falls back. */
bool txc_kern_gemm_nt_avx2_packed(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const void *B,
                                  txc_dtype bdt, int64_t ldb, float *C, int64_t ldc);

/* One matrix of a grouped GEMV: C[j] = sum_k A[k] * B[j,k] for j < N (B
 * rows of stride ldb, float32/bfloat16/float16; C float32). */
typedef struct txc_gemv_part {
    const void *B;
    txc_dtype bdt;
    int64_t N, ldb;
    float *C;
} txc_gemv_part;
/* Several GEMVs of one float32 row A (K elements) as one parallel job: the
 * rows of all parts are split into chunks taken on demand, so the threads
 * meet once for the group (the compiled plan's sibling projections: q/k/v,
 * gate/up). Every C[j] is bit-identical to txc_kern_gemm_nt(1, N, K, ...)
 * on that part alone (chunks start at the same row tiles). */
void txc_kern_gemv_group(int n_parts, const txc_gemv_part *parts, int64_t K, const float *A);

/* gemm_avx2.c: the packed GEMM of several weights on one A (the compiled
 * plan's sibling projections in prefill: q/k/v, gate/up): for each part,
 * C = A·Bᵀ (M x N, rows of stride N), every element bit-identical to
 * txc_kern_gemm_nt_avx2_packed on that part alone, with A packed once and
 * the columns of all parts split into one set of chunks the threads take on
 * demand (they meet once for the group). Returns false, touching nothing,
 * where txc_kern_gemm_nt_avx2_packed would (and for n_parts outside
 * [1, TXC_PACKED_GROUP_MAX]). */
#define TXC_PACKED_GROUP_MAX TXC_LINEAR_GROUP_MAX
bool txc_kern_gemm_nt_avx2_packed_group(int n_parts, const txc_gemv_part *parts, int64_t M, int64_t K,
                                        const float *A, int64_t lda);

/* amx.c: C = A·Bᵀ for bfloat16 B (rows of stride ldb) with A rounded to
 * bfloat16 (nearest even) and float32 products and sums, on AMX tiles —
 * torch's linear on bfloat16 inputs, but C stays float32. Error bound:
 * |C - exact| <= 2^-8 sum_k |A_ik B_jk| + float32 summation error. Returns
 * false, touching nothing, when it cannot run (no AMX or no permission,
 * K not a multiple of 32, no scratch memory): the caller falls back. Uses
 * the scratch slots GEMM_PACK and ROW. */
bool txc_amx_available(void);
/* The AMX bfloat16 peak probe: `iters` rounds of 4 independent TDPBF16PS
 * on resident tiles (no memory traffic); returns the flops done
 * (16 * 16 * 32 * 2 each), 0 where AMX is not available. */
double txc_kern_amx_peak_run(int64_t iters);
bool txc_kern_gemm_nt_amx(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const uint16_t *B,
                          int64_t ldb, float *C, int64_t ldc);

/* gemm_bf16dot.c: C = A·Bᵀ for bfloat16 B (rows of stride ldb) with A
 * (float32, rows of stride lda) rounded to bfloat16 (nearest even, as
 * amx.c), float32 products and sums, on AVX-512 BF16 (VDPBF16PS) in 6 x 64
 * register tiles over A rounded once and B packed per 64 columns x 256 k
 * in VDPBF16PS's pair-interleaved layout; threads over chunks of 64
 * columns: txc_kern_gemm_nt's kernel for bf16 weights and M >
 * TXC_KERN_ROWS_INVARIANT_MAX at SIMD level 2 where the CPU has
 * AVX512_BF16 (AMD Zen 4/5, Intel Cooper Lake; level 3 keeps AMX).
 * Order: every C[i,j] is the float32 chain over k pairs p in order of
 * c = (c + a[2p+1] b[2p+1]) + a[2p] b[2p] from 0 (products exact; a zero
 * pads an odd K; denormal inputs and results flushed to zero), whatever M,
 * N, the strides, the blocking and the thread count: a row depends only on
 * its row of A (tests/test_gemm_bf16dot.c checks the bits against a scalar
 * emulation).
 * Error bound, as AMX's (A's rounding dominates; Higham, "Accuracy and
 * Stability of Numerical Algorithms", 2nd ed., eq. 4.4, for the sums):
 * |C - exact| <= (2^-8 + γ(K)) sum_k |A_ik B_jk| (+ K 2^-126 for the flush
 * of denormals), γ(n) = n u / (1 - n u), u = 2^-24, against the exact
 * product of A as given and the weights as stored. Uses the calling
 * thread's scratch slot GEMM_PACK (A's M block of <= 252 rows x K rounded
 * up to even, bf16). Returns false, touching nothing, where it cannot run
 * (no AVX512_BF16 or SIMD level < 2 or txc_kern_set_avx512bf16(0), M, N or
 * K <= 0, ldb > INT32_MAX / 16, no scratch memory): the caller falls back. */
bool txc_kern_gemm_nt_bf16dot(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const uint16_t *B,
                              int64_t ldb, float *C, int64_t ldc);
/* The sibling GEMMs of one A (as txc_kern_gemm_nt_avx2_packed_group), every
 * part bfloat16, each C (rows of stride N) bit-identical to
 * txc_kern_gemm_nt_bf16dot on that part alone; A rounded once, one set of
 * column chunks. False, touching nothing, where that would be, or for
 * n_parts outside [1, TXC_PACKED_GROUP_MAX] or a part not bfloat16. */
bool txc_kern_gemm_nt_bf16dot_group(int n_parts, const txc_gemv_part *parts, int64_t M, int64_t K,
                                    const float *A, int64_t lda);
/* gemm_bf16dot.c, its float32 twin: C = A·Bᵀ as txc_kern_gemm_nt (A
 * float32, rows of stride lda, read as given; B float32, float16 or
 * bfloat16 rows of stride ldb, widened exactly to float32 while packed; C
 * float32, rows of stride ldc), on AVX-512 FMA with the VDPBF16PS GEMM's
 * driver: 6 x 64 register tiles, B packed per 64 columns x 128 k as float32
 * (32 KiB), the same M blocks, prefetch and column chunks on the threads:
 * txc_kern_gemm_nt's kernel for M > TXC_KERN_ROWS_INVARIANT_MAX at SIMD
 * level 2 for float16 weights, and bfloat16 ones where the VDPBF16PS GEMM
 * does not run (no AVX512_BF16). Float32 accumulation, not AVX512_FP16's
 * half-precision arithmetic: the bits and the bound of the AVX2 packed
 * GEMM (gemm_avx2.c): every C[i,j] is the chain c = fma(A[i,k], B[j,k], c),
 * k = 0..K-1 from 0, whatever M, N, the strides, the blocking and the
 * thread count (tests/test_gemm_avx2.c checks the bits against C's fmaf);
 * |C - exact| <= γ(K-1) sum_k |A_ik B_jk|. Uses no scratch. Returns false,
 * touching nothing, for SIMD level < 2, another dtype, M, N or K <= 0, or
 * ldb > INT32_MAX / 16. */
bool txc_kern_gemm_nt_fma512(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const void *B,
                             txc_dtype bdt, int64_t ldb, float *C, int64_t ldc);
/* Its sibling GEMMs of one A (as txc_kern_gemm_nt_avx2_packed_group; parts
 * of any of the three dtypes, each C of stride N bit-identical to the part
 * alone). False, touching nothing, where a part alone would be, or for
 * n_parts outside [1, TXC_PACKED_GROUP_MAX]. */
bool txc_kern_gemm_nt_fma512_group(int n_parts, const txc_gemv_part *parts, int64_t M, int64_t K,
                                   const float *A, int64_t lda);
/* Whether this CPU has AVX512_BF16 (CPUID.(7,1):EAX bit 5; TXC_AVX512_BF16=0
 * in the environment says no). */
bool txc_kern_avx512bf16_cpu(void);
/* Whether the VDPBF16PS GEMM runs: the CPU has it, the SIMD level is >= 2,
 * and no txc_kern_set_avx512bf16(0). */
bool txc_kern_avx512bf16(void);
/* -1 or 1: automatic; 0: never the VDPBF16PS GEMM (tests: level 2's f32 path). */
void txc_kern_set_avx512bf16(int on);
/* The VDPBF16PS peak probe: `iters` rounds of 16 independent accumulator
 * chains (no memory traffic); returns the flops done (16 lanes x 2
 * products x 2 per instruction), 0 where txc_kern_avx512bf16() is false; *sink += a value of
 * the result (so the work cannot be optimised away). */
double txc_kern_bf16dot_peak_run(int64_t iters, float *sink);

/* attention.c: the multiply-adds below which attention runs on the calling
 * thread (< 0: the default, 2^20); tests set 0 to split every problem. */
void txc_kern_set_attention_par_min(double macs);

/* Read n bytes at p as fast as this CPU streams memory — the GEMV's loads
 * and prefetch (AVX-512), else 64-bit words — and return a checksum (so the
 * reads cannot be optimised away). The bandwidth probe of txc bench. */
uint64_t txc_kern_read_bytes(const void *p, size_t n);

/* "(2, 3)" / "(4,)" as torch prints shapes, for error messages. */
const char *txc_kern_shape_str(char *buf, size_t cap, int ndim, const int64_t *shape);

/* ---- loops and conversions (elementwise.c) ------------------------------------------ */

#define TXC_LOOP_MAX_OPS 6

/* A row of the loop: operand k starts at off[k] and advances by stride[k]
 * (caller's units) over n elements. */
typedef void (*txc_loop_fn)(void *ctx, const int64_t *off, const int64_t *stride, int64_t n);

/* Run fn over every innermost row of the index space `shape` for nops
 * (<= TXC_LOOP_MAX_OPS) operands; operand k advances by strides[k][d] along
 * dim d. Size-1 dims are dropped and dims whose strides chain in every
 * operand are merged, so dense operands make one long row. */
void txc_ops_loop(int nops, int ndim, const int64_t *shape, const int64_t (*strides)[TXC_MAX_DIMS],
                  txc_loop_fn fn, void *ctx);

/* txc_ops_loop over every dim of (ndim, shape) but `dim`, for a kernel that
 * handles whole rows along dim (softmax, cumsum): operand 0 advances by
 * in_strides[d] * in_size bytes, operand 1 (the output) by
 * out_strides[d] * out_size bytes (strides in elements). */
void txc_ops_loop_rows(int ndim, const int64_t *shape, int dim, const int64_t *in_strides, size_t in_size,
                       const int64_t *out_strides, size_t out_size, txc_loop_fn fn, void *ctx);

/* Convert n elements (strides in bytes) with torch's casts
 * (txc_dtype_convert_strided), contiguous f16 <-> f32 rows with F16C. */
void txc_ops_convert(txc_dtype sdt, const void *src, int64_t sstride, txc_dtype ddt, void *dst,
                     int64_t dstride, int64_t n);

/* n elements of `dt` (element stride `stride`) to contiguous float32. */
static inline void txc_kern_to_f32(txc_dtype dt, const void *src, int64_t stride, float *dst, int64_t n)
{
    txc_ops_convert(dt, src, stride * (int64_t)txc_dtype_size(dt), TXC_F32, dst, 4, n);
}

/* n contiguous float32 to contiguous `dt` (round to nearest even). */
static inline void txc_kern_from_f32(txc_dtype dt, const float *src, void *dst, int64_t n)
{
    txc_ops_convert(TXC_F32, src, 4, dt, dst, (int64_t)txc_dtype_size(dt), n);
}

/* dst = (ddt) src over an n-d block; strides in elements. */
void txc_kern_copy(int ndim, const int64_t *shape, const void *src, txc_dtype sdt, const int64_t *sstrides,
                   void *dst, txc_dtype ddt, const int64_t *dstrides);

/* Advance an n-d index (row-major) over `shape`; false after the last. */
static inline bool txc_kern_next_index(int64_t *idx, int nd, const int64_t *shape)
{
    for (int d = nd - 1; d >= 0; d--) {
        if (++idx[d] < shape[d])
            return true;
        idx[d] = 0;
    }
    return false;
}

/* Round float32 values through a reduced float dtype and back (torch's
 * .to(bf16/f16) of an intermediate); no-op for other dtypes. */
static inline float txc_kern_round_to(txc_dtype dt, float v)
{
    if (dt == TXC_BF16)
        return txc_bf16_to_f32(txc_f32_to_bf16(v));
    if (dt == TXC_F16)
        return txc_f16_to_f32(txc_f32_to_f16(v));
    return v;
}
void txc_kern_round_through(txc_dtype dt, float *x, int64_t n);

/* ---- vector math (elementwise.c) ------------------------------------------------------
 * One exp: with AVX2/AVX-512 a polynomial (Cephes', within 1.3 ulp; it
 * overflows to inf and underflows through the subnormals as expf does, NaN
 * stays NaN), else the C library's expf. softmax, log_softmax and attention
 * use it, and so do the elementwise exp/sigmoid/silu ops and the JIT's
 * fused kernels (src/jit/fusion.c), whose results are checked bit for bit
 * against eager (about 5x faster than expf on AVX2, 9x on AVX-512 for
 * silu). A scalar operand (a broadcast 0-d input) still uses expf. */

/* y[i] = exp(x[i] - shift) (y may be x; NULL: only the sum); returns the
 * sum of the results, accumulated in double. */
double txc_kern_exp(float *y, const float *x, int64_t n, float shift);
/* y[i] = 1 / (1 + exp(-x[i])) (y may be x). */
void txc_kern_sigmoid(float *y, const float *x, int64_t n);
/* y[i] = x[i] / (1 + exp(-x[i])) (y may be x). */
void txc_kern_silu(float *y, const float *x, int64_t n);
/* Largest of x[0..n), NaNs skipped (-inf when n is 0 or all NaN); *nan
 * (may be NULL): some value is NaN. */
float txc_kern_max(const float *x, int64_t n, bool *nan);

/* pow(x, python number) over float32 values, with torch's special
 * exponents (2, 3, 0.5, -0.5, -1, -2); dt is the tensor's dtype (bfloat16
 * rounds x*x as torch does). Shared by the eager kernel and fused programs. */
void txc_kern_pow_scalar_f32(int64_t n, float *restrict o, const float *restrict x, float e, txc_dtype dt);

#endif
