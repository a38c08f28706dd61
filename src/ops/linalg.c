/* linalg ops: matmul and linear (shape/dtype inference and CPU kernels),
 * plus the float32 GEMM kernels that attention.c shares. See ops/registry.h.
 *
 * Kernels (A is float32, rows of stride lda; B is float32, bfloat16 or
 * float16 read as stored; C is float32; accumulation in float32):
 *   txc_kern_gemm_nt: C[i,j] = sum_k A[i,k] * B[j,k]  (x·Wᵀ: both operands
 *                     are read along contiguous rows; the linear/GEMV path)
 *   txc_kern_gemm_nn: C[i,j] = sum_k A[i,k] * B[k,j]  (B row-major)
 * On x86-64 CPUs with AVX2+FMA+F16C the tiles use 256-bit FMAs (4x4 output
 * tiles of dot products for NT, 4 rows x 16 columns of broadcast-FMAs for
 * NN), chosen at run time; elsewhere a portable C path runs. Large GEMMs
 * split their output columns over the thread pool (txc/threads.h) with
 * results identical to one thread.
 */
#include "ops/avx2_dot.h"
#include "ops/kernels.h"
#include "ops/quant_impl.h"
#include "txc/ops.h"
#include "txc/threads.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#if TXC_HAVE_X86
#include <cpuid.h>
#endif

/* ---- CPU features ------------------------------------------------------------ */

static int simd_auto;          /* 1: AVX2+FMA+F16C; 2: also AVX-512 F/BW/VL/DQ; 3: also AMX-BF16 */
static int simd_override = -1; /* tests force the portable path with 0 */
static pthread_once_t simd_once = PTHREAD_ONCE_INIT;

static void simd_detect(void)
{
#if TXC_HAVE_X86
    __builtin_cpu_init();
    unsigned eax, ebx, ecx = 0, edx;
    bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C); /* (clang's builtin lacks "f16c") */
    simd_auto = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
    if (simd_auto && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        simd_auto = 2;
    if (simd_auto == 2 && txc_amx_available())
        simd_auto = 3;
    /* TXC_SIMD_LEVEL=N caps the level (0 portable, 1 AVX2, 2 AVX-512, 3 AMX):
     * to compare kernels, or to run without AMX's bfloat16 activations. */
    const char *cap = getenv("TXC_SIMD_LEVEL");
    if (cap && cap[0] >= '0' && cap[0] <= '3' && !cap[1] && cap[0] - '0' < simd_auto)
        simd_auto = cap[0] - '0';
#else
    simd_auto = 0;
#endif
}

int txc_kern_simd_level(void)
{
    pthread_once(&simd_once, simd_detect);
    int o = __atomic_load_n(&simd_override, __ATOMIC_RELAXED);
    return o >= 0 && o < simd_auto ? o : simd_auto;
}

/* -1: automatic; 0: the portable C kernels, 1: at most AVX2 (for tests). */
void txc_kern_set_simd_level(int level) { __atomic_store_n(&simd_override, level, __ATOMIC_RELAXED); }

/* Batch invariance of aten::linear's float GEMM (txc/ops.h
 * txc_ops_set_batch_invariant; kernels.h "row invariance"): 1 (the default)
 * keeps txc_kern_gemm_nt's rows, 0 lets 1 < M <= the bound take the kernel
 * that M above the bound takes (linear_gemm_nt below). */
static int batch_invariant = 1;

void txc_ops_set_batch_invariant(bool on) { __atomic_store_n(&batch_invariant, on ? 1 : 0, __ATOMIC_RELAXED); }

bool txc_ops_batch_invariant(void) { return __atomic_load_n(&batch_invariant, __ATOMIC_RELAXED) != 0; }

/* ---- messages ------------------------------------------------------------------ */

const char *txc_kern_shape_str(char *buf, size_t cap, int ndim, const int64_t *shape)
{
    size_t n = 0;
    n += (size_t)snprintf(buf + n, cap - n, "(");
    for (int i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (ndim == 1 && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, ",");
    if (n < cap)
        snprintf(buf + n, cap - n, ")");
    return buf;
}

/* ---- portable kernels --------------------------------------------------------- */

static float dot_f32(const float *a, const float *b, int64_t K)
{
    float acc[8] = {0};
    int64_t k = 0;
    for (; k + 8 <= K; k += 8)
        for (int u = 0; u < 8; u++)
            acc[u] += a[k + u] * b[k + u];
    float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; k < K; k++)
        s += a[k] * b[k];
    return s;
}

static size_t bsize(txc_dtype dt) { return dt == TXC_F32 ? 4 : 2; }

static void gemm_nt_generic(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const void *B,
                            txc_dtype bdt, int64_t ldb, float *C, int64_t ldc)
{
    float *row = NULL;
    if (bdt != TXC_F32) {
        row = txc_scratch((size_t)K * sizeof(float), TXC_SCRATCH_ROW);
        if (!row) { /* no memory for a row: element by element */
            for (int64_t j = 0; j < N; j++)
                for (int64_t i = 0; i < M; i++) {
                    float s = 0;
                    for (int64_t k = 0; k < K; k++)
                        s += A[i * lda + k] * (float)txc_dtype_load(bdt, B, (size_t)(j * ldb + k));
                    C[i * ldc + j] = s;
                }
            return;
        }
    }
    for (int64_t j = 0; j < N; j++) {
        const float *b = (const float *)B + j * ldb;
        if (row) {
            txc_kern_to_f32(bdt, (const char *)B + (size_t)(j * ldb) * bsize(bdt), 1, row, K);
            b = row;
        }
        for (int64_t i = 0; i < M; i++)
            C[i * ldc + j] = dot_f32(A + i * lda, b, K);
    }
}

static void gemm_nn_generic(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const void *B,
                            txc_dtype bdt, int64_t ldb, float *C, int64_t ldc)
{
    for (int64_t i = 0; i < M; i++)
        memset(C + i * ldc, 0, (size_t)N * sizeof(float));
    float *row = NULL;
    if (bdt != TXC_F32) {
        row = txc_scratch((size_t)N * sizeof(float), TXC_SCRATCH_ROW);
        if (!row) {
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    float s = 0;
                    for (int64_t k = 0; k < K; k++)
                        s += A[i * lda + k] * (float)txc_dtype_load(bdt, B, (size_t)(k * ldb + j));
                    C[i * ldc + j] = s;
                }
            return;
        }
    }
    for (int64_t k = 0; k < K; k++) {
        const float *b = (const float *)B + k * ldb;
        if (row) {
            txc_kern_to_f32(bdt, (const char *)B + (size_t)(k * ldb) * bsize(bdt), 1, row, N);
            b = row;
        }
        for (int64_t i = 0; i < M; i++) {
            float a = A[i * lda + k], *c = C + i * ldc;
            for (int64_t j = 0; j < N; j++)
                c[j] += a * b[j];
        }
    }
}

/* ---- AVX2 kernels ---------------------------------------------------------------- */

#if TXC_HAVE_X86
/* ld8, ld1, hsum8, hsum8x4 and the dot tile: ops/avx2_dot.h (shared with gemv_batch.c). */

/* One MR x NR tile of C = A·Bᵀ (MR, NR <= 4; constants after inlining). */
TXC_INLINE_AVX2 void nt_tile(const int MR, const int NR, const int DT, int64_t K, const float *A, int64_t lda,
                             const char *B, int64_t ldb, float *C, int64_t ldc)
{
    const size_t es = DT == TXC_F32 ? 4 : 2;
    const char *b[4];
    __m256 acc[16];
    float tail[16];
    for (int j = 0; j < NR; j++)
        b[j] = B + (size_t)(j * ldb) * es;
    avx2_dot_tile(MR, NR, DT, 0, 0, K, A, lda, b, acc, tail);
    for (int i = 0; i < MR; i++) {
        if (NR == 4) {
            __m128 s = _mm_add_ps(hsum8x4(acc[i * 4 + 0], acc[i * 4 + 1], acc[i * 4 + 2], acc[i * 4 + 3]),
                                  _mm_loadu_ps(tail + i * 4));
            _mm_storeu_ps(C + i * ldc, s);
        } else {
            for (int j = 0; j < NR; j++)
                C[i * ldc + j] = hsum8(acc[i * NR + j]) + tail[i * NR + j];
        }
    }
}

/* C = A·Bᵀ over blocks of B rows that stay in L2 while every A row uses
 * them, in MR x NR tiles of TILE: stamped once per ISA (a driver is compiled
 * for its tiles' target). */
#define NT_BLOCKED(ATTR, NAME, TILE)                                                                       \
    ATTR void NAME(const int DT, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const char *B, \
                   int64_t ldb, float *C, int64_t ldc)                                                     \
    {                                                                                                      \
        const size_t es = DT == TXC_F32 ? 4 : 2;                                                           \
        int64_t nb = (int64_t)(160 * 1024 / ((size_t)(K > 0 ? K : 1) * es)) & ~(int64_t)3;                \
        if (nb < 4)                                                                                        \
            nb = 4;                                                                                        \
        for (int64_t n0 = 0; n0 < N; n0 += nb) {                                                           \
            int64_t n1 = n0 + nb < N ? n0 + nb : N;                                                        \
            for (int64_t m = 0; m < M;) {                                                                  \
                const float *a = A + m * lda;                                                              \
                float *c = C + m * ldc;                                                                    \
                int64_t n = n0;                                                                            \
                if (m + 4 <= M) {                                                                          \
                    for (; n + 4 <= n1; n += 4)                                                            \
                        TILE(4, 4, DT, K, a, lda, B + (size_t)(n * ldb) * es, ldb, c + n, ldc);            \
                    for (; n < n1; n++)                                                                    \
                        TILE(4, 1, DT, K, a, lda, B + (size_t)(n * ldb) * es, ldb, c + n, ldc);            \
                    m += 4;                                                                                \
                } else {                                                                                   \
                    for (; n + 4 <= n1; n += 4)                                                            \
                        TILE(1, 4, DT, K, a, lda, B + (size_t)(n * ldb) * es, ldb, c + n, ldc);            \
                    for (; n < n1; n++)                                                                    \
                        TILE(1, 1, DT, K, a, lda, B + (size_t)(n * ldb) * es, ldb, c + n, ldc);            \
                    m += 1;                                                                                \
                }                                                                                          \
            }                                                                                              \
        }                                                                                                  \
    }

/* The dispatch of a kernel over B's dtype (constant inside each call). */
#define DT_DISPATCH(ATTR, NAME, IMPL)                                                                      \
    ATTR static void NAME(const int DT, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,       \
                          const void *B, int64_t ldb, float *C, int64_t ldc)                               \
    {                                                                                                      \
        if (DT == TXC_F32)                                                                                 \
            IMPL(TXC_F32, M, N, K, A, lda, B, ldb, C, ldc);                                                \
        else if (DT == TXC_BF16)                                                                           \
            IMPL(TXC_BF16, M, N, K, A, lda, B, ldb, C, ldc);                                               \
        else                                                                                               \
            IMPL(TXC_F16, M, N, K, A, lda, B, ldb, C, ldc);                                                \
    }

NT_BLOCKED(TXC_INLINE_AVX2, nt_blocked, nt_tile)
DT_DISPATCH(TXC_AVX2, nt_avx2, nt_blocked)

/* One MR x (8*NV) tile of C = A·B (B row-major): broadcast A, FMA rows of B. */
TXC_INLINE_AVX2 void nn_tile(const int MR, const int NV, const int DT, int64_t K, const float *A, int64_t lda,
                             const char *B, int64_t ldb, float *C, int64_t ldc)
{
    const size_t es = DT == TXC_F32 ? 4 : 2;
    __m256 acc[4][2];
    for (int i = 0; i < MR; i++)
        for (int v = 0; v < NV; v++)
            acc[i][v] = _mm256_setzero_ps();
    for (int64_t k = 0; k < K; k++) {
        const char *brow = B + (size_t)(k * ldb) * es;
        __m256 bv[2];
        for (int v = 0; v < NV; v++)
            bv[v] = ld8(brow + (size_t)(8 * v) * es, DT);
        for (int i = 0; i < MR; i++) {
            __m256 a = _mm256_broadcast_ss(A + i * lda + k);
            for (int v = 0; v < NV; v++)
                acc[i][v] = _mm256_fmadd_ps(a, bv[v], acc[i][v]);
        }
    }
    for (int i = 0; i < MR; i++)
        for (int v = 0; v < NV; v++)
            _mm256_storeu_ps(C + i * ldc + 8 * v, acc[i][v]);
}

TXC_INLINE_AVX2 void nn_cols_tail(const int DT, int64_t M, int64_t j0, int64_t N, int64_t K, const float *A,
                                  int64_t lda, const char *B, int64_t ldb, float *C, int64_t ldc)
{
    const size_t es = DT == TXC_F32 ? 4 : 2;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = j0; j < N; j++) {
            float s = 0.0f;
            for (int64_t k = 0; k < K; k++)
                s += A[i * lda + k] * ld1(B + (size_t)(k * ldb + j) * es, DT);
            C[i * ldc + j] = s;
        }
}

TXC_INLINE_AVX2 void nn_blocked(const int DT, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                                const char *B, int64_t ldb, float *C, int64_t ldc)
{
    const size_t es = DT == TXC_F32 ? 4 : 2;
    int64_t j = 0;
    for (; j + 16 <= N; j += 16) {
        const char *b = B + (size_t)j * es;
        int64_t i = 0;
        for (; i + 4 <= M; i += 4)
            nn_tile(4, 2, DT, K, A + i * lda, lda, b, ldb, C + i * ldc + j, ldc);
        for (; i < M; i++)
            nn_tile(1, 2, DT, K, A + i * lda, lda, b, ldb, C + i * ldc + j, ldc);
    }
    for (; j + 8 <= N; j += 8) {
        const char *b = B + (size_t)j * es;
        int64_t i = 0;
        for (; i + 4 <= M; i += 4)
            nn_tile(4, 1, DT, K, A + i * lda, lda, b, ldb, C + i * ldc + j, ldc);
        for (; i < M; i++)
            nn_tile(1, 1, DT, K, A + i * lda, lda, b, ldb, C + i * ldc + j, ldc);
    }
    if (j < N)
        nn_cols_tail(DT, M, j, N, K, A, lda, B, ldb, C, ldc);
}

DT_DISPATCH(TXC_AVX2, nn_avx2, nn_blocked)

/* ---- AVX-512 kernels (same tiles, 16 lanes, masked tails) ------------------------ */

/* ld16, ld16m and fold512: ops/avx2_dot.h (shared with gemv_batch.c). */

TXC_INLINE_AVX512 void nt_tile512(const int MR, const int NR, const int DT, int64_t K, const float *A, int64_t lda,
                                  const char *B, int64_t ldb, float *C, int64_t ldc)
{
    const size_t es = DT == TXC_F32 ? 4 : 2;
    const char *b[4];
    __m512 acc[4][4];
    for (int j = 0; j < NR; j++)
        b[j] = B + (size_t)(j * ldb) * es;
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++)
            acc[i][j] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) {
        __m512 bv[4];
        for (int j = 0; j < NR; j++)
            bv[j] = ld16(b[j] + (size_t)k * es, DT);
        for (int i = 0; i < MR; i++) {
            __m512 a = _mm512_loadu_ps(A + i * lda + k);
            for (int j = 0; j < NR; j++)
                acc[i][j] = _mm512_fmadd_ps(a, bv[j], acc[i][j]);
        }
    }
    if (k < K) {
        __mmask16 m = (__mmask16)((1u << (K - k)) - 1u);
        __m512 bv[4];
        for (int j = 0; j < NR; j++)
            bv[j] = ld16m(b[j] + (size_t)k * es, DT, m);
        for (int i = 0; i < MR; i++) {
            __m512 a = _mm512_maskz_loadu_ps(m, A + i * lda + k);
            for (int j = 0; j < NR; j++)
                acc[i][j] = _mm512_fmadd_ps(a, bv[j], acc[i][j]);
        }
    }
    for (int i = 0; i < MR; i++) {
        if (NR == 4) {
            __m128 s = hsum8x4(fold512(acc[i][0]), fold512(acc[i][1]), fold512(acc[i][2]), fold512(acc[i][3]));
            _mm_storeu_ps(C + i * ldc, s);
        } else {
            for (int j = 0; j < NR; j++)
                C[i * ldc + j] = _mm512_reduce_add_ps(acc[i][j]);
        }
    }
}

NT_BLOCKED(TXC_INLINE_AVX512, nt_blocked512, nt_tile512)
DT_DISPATCH(TXC_AVX512, nt_avx512, nt_blocked512)

/* Prefetch distance of the GEMV's weight stream, bytes ahead of the read,
 * into L2 (prefetcht1: the L2's queue holds more misses in flight than the
 * L1's fill buffers). Measured on 2 cores (qwen2.5-0.5b's 4864 x 896 bf16
 * up_proj, 1 GiB of copies): 8 KiB to L2 streamed 11.5-11.8 GB/s, 4 KiB to
 * L1 9.3-10.1, no prefetch about 7 (alternated, medians of 5). */
#define GEMV_PREFETCH 8192

/* GEMV (one row of A, the decode step's x·Wᵀ): NR rows of B per tile,
 * read one after another, 32 elements (one 64-byte line of bf16/f16) per
 * step, with a software prefetch GEMV_PREFETCH bytes ahead of the read.
 * Reading the tile's rows in turn, not side by side, makes the whole
 * matrix one linear stream for the prefetch and the hardware prefetchers
 * whatever the row length (side by side, 4 rows of 4864 bf16 were 4
 * streams 9.7 KB apart and read at 0.85 of the bandwidth probe, against
 * 0.97 in turn; rows of 896: 0.94 either way). The rows' sums are reduced
 * together at the end. A reads come from L1. A prefetch past the end of B
 * is harmless (prefetches never fault). */
TXC_INLINE_AVX512 void gemv_tile512(const int NR, const int DT, int64_t K, const float *A, const char *B, int64_t ldb,
                                    float *C)
{
    const size_t es = DT == TXC_F32 ? 4 : 2;
    __m512 acc0[4], acc1[4];
    for (int j = 0; j < NR; j++) {
        const char *b = B + (size_t)(j * ldb) * es;
        __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
        int64_t k = 0;
        for (; k + 32 <= K; k += 32) {
            const char *p = b + (size_t)k * es;
            for (size_t o = 0; o < 32 * es; o += 64)
                _mm_prefetch(p + GEMV_PREFETCH + o, _MM_HINT_T1);
            s0 = _mm512_fmadd_ps(_mm512_loadu_ps(A + k), ld16(p, DT), s0);
            s1 = _mm512_fmadd_ps(_mm512_loadu_ps(A + k + 16), ld16(p + 16 * es, DT), s1);
        }
        for (; k < K; k += 16) {
            __mmask16 m = K - k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (K - k)) - 1u);
            s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, A + k), ld16m(b + (size_t)k * es, DT, m), s0);
        }
        acc0[j] = s0;
        acc1[j] = s1;
    }
    if (NR == 4) {
        __m128 s = hsum8x4(fold512(_mm512_add_ps(acc0[0], acc1[0])), fold512(_mm512_add_ps(acc0[1], acc1[1])),
                           fold512(_mm512_add_ps(acc0[2], acc1[2])), fold512(_mm512_add_ps(acc0[3], acc1[3])));
        _mm_storeu_ps(C, s);
    } else {
        for (int j = 0; j < NR; j++)
            C[j] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[j], acc1[j]));
    }
}

TXC_INLINE_AVX512 void gemv_rows512(const int DT, int64_t N, int64_t K, const float *A, const char *B, int64_t ldb,
                                    float *C)
{
    const size_t es = DT == TXC_F32 ? 4 : 2;
    int64_t n = 0;
    for (; n + 4 <= N; n += 4)
        gemv_tile512(4, DT, K, A, B + (size_t)(n * ldb) * es, ldb, C + n);
    for (; n < N; n++)
        gemv_tile512(1, DT, K, A, B + (size_t)(n * ldb) * es, ldb, C + n);
}

TXC_AVX512 static void gemv_avx512(const int DT, int64_t N, int64_t K, const float *A, const void *B, int64_t ldb,
                                   float *C)
{
    if (DT == TXC_F32)
        gemv_rows512(TXC_F32, N, K, A, B, ldb, C);
    else if (DT == TXC_BF16)
        gemv_rows512(TXC_BF16, N, K, A, B, ldb, C);
    else
        gemv_rows512(TXC_F16, N, K, A, B, ldb, C);
}

/* MR rows x NV vectors of 16 columns; the last vector reads/writes only the
 * lanes in `last` (a column tail). */
TXC_INLINE_AVX512 void nn_tile512(const int MR, const int NV, const int DT, int64_t K, const float *A, int64_t lda,
                                  const char *B, int64_t ldb, float *C, int64_t ldc, __mmask16 last)
{
    const size_t es = DT == TXC_F32 ? 4 : 2;
    __m512 acc[4][4];
    for (int i = 0; i < MR; i++)
        for (int v = 0; v < NV; v++)
            acc[i][v] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k++) {
        const char *brow = B + (size_t)(k * ldb) * es;
        __m512 bv[4];
        for (int v = 0; v < NV; v++)
            bv[v] = v == NV - 1 ? ld16m(brow + (size_t)(16 * v) * es, DT, last) : ld16(brow + (size_t)(16 * v) * es, DT);
        for (int i = 0; i < MR; i++) {
            __m512 a = _mm512_set1_ps(A[i * lda + k]);
            for (int v = 0; v < NV; v++)
                acc[i][v] = _mm512_fmadd_ps(a, bv[v], acc[i][v]);
        }
    }
    for (int i = 0; i < MR; i++)
        for (int v = 0; v < NV; v++) {
            if (v == NV - 1)
                _mm512_mask_storeu_ps(C + i * ldc + 16 * v, last, acc[i][v]);
            else
                _mm512_storeu_ps(C + i * ldc + 16 * v, acc[i][v]);
        }
}

TXC_INLINE_AVX512 void nn_blocked512(const int DT, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                                     const char *B, int64_t ldb, float *C, int64_t ldc)
{
    const size_t es = DT == TXC_F32 ? 4 : 2;
    int64_t j = 0;
    for (; j + 64 <= N; j += 64) {
        const char *b = B + (size_t)j * es;
        int64_t i = 0;
        for (; i + 4 <= M; i += 4)
            nn_tile512(4, 4, DT, K, A + i * lda, lda, b, ldb, C + i * ldc + j, ldc, 0xffff);
        for (; i < M; i++)
            nn_tile512(1, 4, DT, K, A + i * lda, lda, b, ldb, C + i * ldc + j, ldc, 0xffff);
    }
    for (; j < N; j += 16) {
        const char *b = B + (size_t)j * es;
        __mmask16 last = N - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (N - j)) - 1u);
        int64_t i = 0;
        for (; i + 4 <= M; i += 4)
            nn_tile512(4, 1, DT, K, A + i * lda, lda, b, ldb, C + i * ldc + j, ldc, last);
        for (; i < M; i++)
            nn_tile512(1, 1, DT, K, A + i * lda, lda, b, ldb, C + i * ldc + j, ldc, last);
    }
}

DT_DISPATCH(TXC_AVX512, nn_avx512, nn_blocked512)
#endif

#if TXC_HAVE_X86
/* The streaming read of txc_kern_read_bytes on AVX-512: the GEMV's loads
 * (whole 64-byte lines) and its prefetch (GEMV_PREFETCH ahead, into L2). */
TXC_AVX512 static uint64_t read_avx512(const char *p, size_t n)
{
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 256 <= n; i += 256) {
        _mm_prefetch(p + i + GEMV_PREFETCH, _MM_HINT_T1);
        _mm_prefetch(p + i + GEMV_PREFETCH + 64, _MM_HINT_T1);
        _mm_prefetch(p + i + GEMV_PREFETCH + 128, _MM_HINT_T1);
        _mm_prefetch(p + i + GEMV_PREFETCH + 192, _MM_HINT_T1);
        a0 = _mm512_add_epi64(a0, _mm512_loadu_si512(p + i));
        a1 = _mm512_add_epi64(a1, _mm512_loadu_si512(p + i + 64));
        a2 = _mm512_add_epi64(a2, _mm512_loadu_si512(p + i + 128));
        a3 = _mm512_add_epi64(a3, _mm512_loadu_si512(p + i + 192));
    }
    uint64_t s = (uint64_t)_mm512_reduce_add_epi64(_mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
    for (; i < n; i++)
        s += (unsigned char)p[i];
    return s;
}
#endif

uint64_t txc_kern_read_bytes(const void *p, size_t n)
{
#if TXC_HAVE_X86
    if (txc_kern_simd_level() >= 2)
        return read_avx512(p, n);
#endif
    const unsigned char *b = p;
    uint64_t a[8] = {0};
    size_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int u = 0; u < 8; u++) {
            uint64_t w;
            memcpy(&w, b + i + 8 * u, 8);
            a[u] += w;
        }
    uint64_t s = a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
    for (; i < n; i++)
        s += b[i];
    return s;
}

/* ---- GEMM entry points ------------------------------------------------------------- */

static void gemm_nt_serial(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const void *B,
                           txc_dtype bdt, int64_t ldb, float *C, int64_t ldc)
{
#if TXC_HAVE_X86
    const int simd = txc_kern_simd_level();
    if (simd >= 2 && M == 1) {
        gemv_avx512(bdt, N, K, A, B, ldb, C);
        return;
    }
    if (simd >= 3 && bdt == TXC_BF16 && M > 4 && txc_kern_gemm_nt_amx(M, N, K, A, lda, B, ldb, C, ldc))
        return;
    if (simd >= 1) {
        void (*nt)(int, int64_t, int64_t, int64_t, const float *, int64_t, const void *, int64_t, float *,
                   int64_t) = simd >= 2 ? nt_avx512 : nt_avx2;
        if (bdt == TXC_F32) {
            nt(TXC_F32, M, N, K, A, lda, B, ldb, C, ldc);
            return;
        }
        /* Half-precision B: convert on the fly for up to 4 rows of A (GEMV
         * and small batches: B is read once per row block anyway); for more
         * rows, convert blocks of B once to f32 and run the f32 tiles. */
        float *tmp = NULL;
        int64_t nb = 0;
        if (M > 4) {
            nb = (int64_t)(128 * 1024 / ((size_t)K * 4)) & ~(int64_t)3;
            if (nb < 4)
                nb = 4;
            if (nb > N)
                nb = N;
            tmp = txc_scratch((size_t)nb * (size_t)K * sizeof(float), TXC_SCRATCH_ROW);
        }
        if (!tmp) {
            nt(bdt, M, N, K, A, lda, B, ldb, C, ldc);
            return;
        }
        for (int64_t n0 = 0; n0 < N; n0 += nb) {
            int64_t n = n0 + nb < N ? nb : N - n0;
            for (int64_t j = 0; j < n; j++)
                txc_kern_to_f32(bdt, (const char *)B + (size_t)((n0 + j) * ldb) * 2, 1, tmp + j * K, K);
            nt(TXC_F32, M, n, K, A, lda, tmp, K, C + n0, ldc);
        }
        return;
    }
#endif
    gemm_nt_generic(M, N, K, A, lda, B, bdt, ldb, C, ldc);
}

static void gemm_nn_serial(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const void *B,
                           txc_dtype bdt, int64_t ldb, float *C, int64_t ldc)
{
#if TXC_HAVE_X86
    const int simd = txc_kern_simd_level();
    if (simd >= 1) {
        (simd >= 2 ? nn_avx512 : nn_avx2)(bdt, M, N, K, A, lda, B, ldb, C, ldc);
        return;
    }
#endif
    gemm_nn_generic(M, N, K, A, lda, B, bdt, ldb, C, ldc);
}

/* ---- threads: the output columns (the weight's rows for NT) in one slice
 * per thread. A column's result does not depend on the slice it is in:
 * slices start at multiples of the kernels' column tiles (4 and the L2
 * blocks' multiples of 4 for NT, 16/64 for NN), so the tiles, and the
 * order of every sum, are those of one thread. ----------------------------------- */

/* Below this many multiply-adds a GEMM runs on the calling thread. */
#define PAR_MIN_MACS (64 * 1024)
/* Row chunks per thread of a parallel GEMV. */
#define GEMV_CHUNKS 8

typedef struct gemm_job {
    bool nn;
    int64_t M, N, K, chunk;
    const float *A;
    int64_t lda, ldb, ldc;
    const char *B;
    txc_dtype bdt;
    float *C;
} gemm_job;

static void gemm_task(void *ctx, int64_t t)
{
    const gemm_job *j = ctx;
    int64_t n0 = t * j->chunk, n = j->N - n0 < j->chunk ? j->N - n0 : j->chunk;
    if (n <= 0)
        return;
    size_t es = bsize(j->bdt);
    if (j->nn)
        gemm_nn_serial(j->M, n, j->K, j->A, j->lda, j->B + (size_t)n0 * es, j->bdt, j->ldb, j->C + n0, j->ldc);
    else
        gemm_nt_serial(j->M, n, j->K, j->A, j->lda, j->B + (size_t)(n0 * j->ldb) * es, j->bdt, j->ldb, j->C + n0,
                       j->ldc);
}

/* ---- grouped GEMV: the parts' rows in one index space, each part padded
 * to a multiple of 16 rows so that chunks (multiples of 16) start on the
 * row tiles a single call would use ------------------------------------------------- */


typedef struct gemv_group_job {
    int n;
    txc_gemv_part parts[TXC_LINEAR_GROUP_MAX];
    int64_t start[TXC_LINEAR_GROUP_MAX + 1]; /* padded row offset of each part */
    int64_t K, chunk;
    const float *A;
} gemv_group_job;

static int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }

static void gemv_group_task(void *ctx, int64_t t)
{
    const gemv_group_job *j = ctx;
    int64_t r0 = t * j->chunk, r1 = r0 + j->chunk;
    for (int i = 0; i < j->n; i++) {
        int64_t lo = r0 > j->start[i] ? r0 : j->start[i];
        int64_t hi = r1 < j->start[i] + j->parts[i].N ? r1 : j->start[i] + j->parts[i].N;
        if (lo >= hi)
            continue;
        const txc_gemv_part *p = &j->parts[i];
        int64_t row = lo - j->start[i];
        gemm_nt_serial(1, hi - lo, j->K, j->A, j->K, (const char *)p->B + (size_t)(row * p->ldb) * bsize(p->bdt),
                       p->bdt, p->ldb, p->C + row, hi - lo);
    }
}

void txc_kern_gemv_group(int n_parts, const txc_gemv_part *parts, int64_t K, const float *A)
{
    int threads = txc_threads_get();
    double macs = 0;
    for (int i = 0; i < n_parts; i++)
        macs += (double)parts[i].N * (double)K;
    if (n_parts > TXC_LINEAR_GROUP_MAX || threads <= 1 || K <= 0 || macs < PAR_MIN_MACS) {
        for (int i = 0; i < n_parts; i++)
            txc_kern_gemm_nt(1, parts[i].N, K, A, K, parts[i].B, parts[i].bdt, parts[i].ldb, parts[i].C,
                             parts[i].N);
        return;
    }
    gemv_group_job j = {.n = n_parts, .K = K, .A = A};
    int64_t rows = 0;
    for (int i = 0; i < n_parts; i++) {
        j.parts[i] = parts[i];
        j.start[i] = rows;
        rows += round16(parts[i].N);
    }
    j.start[n_parts] = rows;
    int64_t chunk = (rows + threads * GEMV_CHUNKS - 1) / (threads * GEMV_CHUNKS);
    j.chunk = round16(chunk);
    txc_parallel_for_dynamic((rows + j.chunk - 1) / j.chunk, gemv_group_task, &j);
}


/* Whether prefill GEMMs of weights of dtype dt run txc_kern_gemm_nt_fma512:
 * float16 at SIMD level 2 and 3, bfloat16 at level 2 without the VDPBF16PS
 * GEMM (level 3's bf16 is AMX's). */
static bool fma512_takes(txc_dtype dt)
{
    const int level = txc_kern_simd_level();
    return (dt == TXC_F16 && level >= 2) || (dt == TXC_BF16 && level == 2 && !txc_kern_avx512bf16());
}

/* rows_invariant false (linear_gemm_nt with batch invariance off): 1 < M <=
 * the bound take the kernels of M above it. */
static void gemm_impl(bool nn, bool rows_invariant, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                      const void *B, txc_dtype bdt, int64_t ldb, float *C, int64_t ldc)
{
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) {
        for (int64_t i = 0; i < M; i++)
            memset(C + i * ldc, 0, (size_t)N * sizeof(float));
        return;
    }
    if (!nn && rows_invariant && M > 1 && M <= TXC_KERN_ROWS_INVARIANT_MAX) { /* every row as M = 1 (kernels.h) */
        txc_kern_gemv_rows(M, N, K, A, lda, B, bdt, ldb, C, ldc);
        return;
    }
    /* Prefill without AVX-512 and AMX: the packed 6 x 16 kernel, threads
     * inside (gemm_avx2.c). */
    if (!nn && (M > TXC_KERN_ROWS_INVARIANT_MAX || (!rows_invariant && M > 1)) && txc_kern_simd_level() == 1 &&
        txc_kern_gemm_nt_avx2_packed(M, N, K, A, lda, B, bdt, ldb, C, ldc))
        return;
    /* bf16 prefill with AVX-512 BF16 and no AMX: VDPBF16PS tiles, threads
     * inside (gemm_bf16dot.c). */
    if (!nn && bdt == TXC_BF16 && (M > TXC_KERN_ROWS_INVARIANT_MAX || (!rows_invariant && M > 1)) &&
        txc_kern_simd_level() == 2 && txc_kern_gemm_nt_bf16dot(M, N, K, A, lda, B, ldb, C, ldc))
        return;
    /* f16 prefill on AVX-512 (AMX multiplies bf16 only), and bf16 at level 2
     * where VDPBF16PS does not run: the same driver on float32 FMA, B widened
     * while packed (gemm_bf16dot.c). */
    if (!nn && fma512_takes(bdt) && (M > TXC_KERN_ROWS_INVARIANT_MAX || (!rows_invariant && M > 1)) &&
        txc_kern_gemm_nt_fma512(M, N, K, A, lda, B, bdt, ldb, C, ldc))
        return;
    const int64_t align = nn ? 64 : 16;
    int threads = txc_threads_get();
    if (!nn && M == 1 && threads > 1 && (double)N * (double)K >= PAR_MIN_MACS && N >= 2 * align) {
        /* The decode GEMV streams the weight once: chunks of rows taken on
         * demand (GEMV_CHUNKS per thread), so a core that shares the memory
         * bus or its time with another process does less of it. Any thread
         * may run any chunk (the portable kernel's scratch row is per thread). */
        int64_t chunk = (N + threads * GEMV_CHUNKS - 1) / (threads * GEMV_CHUNKS);
        chunk = (chunk + align - 1) / align * align;
        gemm_job j = {nn, M, N, K, chunk, A, lda, ldb, ldc, B, bdt, C};
        txc_parallel_for_dynamic((N + chunk - 1) / chunk, gemm_task, &j);
        return;
    }
    if (threads > 1 && (double)M * (double)N * (double)K >= PAR_MIN_MACS && N >= 2 * align) {
        int64_t chunk = (N + threads - 1) / threads;
        chunk = (chunk + align - 1) / align * align;
        int64_t n_tasks = (N + chunk - 1) / chunk;
        if (n_tasks > 1) {
            gemm_job j = {nn, M, N, K, chunk, A, lda, ldb, ldc, B, bdt, C};
            txc_parallel_for(n_tasks, gemm_task, &j);
            return;
        }
    }
    if (nn)
        gemm_nn_serial(M, N, K, A, lda, B, bdt, ldb, C, ldc);
    else
        gemm_nt_serial(M, N, K, A, lda, B, bdt, ldb, C, ldc);
}

bool txc_kern_gemm_rows_invariant(void) { return txc_kern_simd_level() <= 1; }

void txc_kern_gemm_nt(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const void *B,
                      txc_dtype bdt, int64_t ldb, float *C, int64_t ldc)
{
    gemm_impl(false, true, M, N, K, A, lda, B, bdt, ldb, C, ldc);
}

void txc_kern_gemm_nn(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const void *B,
                      txc_dtype bdt, int64_t ldb, float *C, int64_t ldc)
{
    gemm_impl(true, true, M, N, K, A, lda, B, bdt, ldb, C, ldc);
}

/* ---- helpers for the ops ---------------------------------------------------------- */

static bool is_gemm_dtype(txc_dtype dt) { return dt == TXC_F32 || dt == TXC_BF16 || dt == TXC_F16; }

/* Pack a rows x cols strided matrix (element strides rs, cs) of any dtype
 * into contiguous f32. */
static void pack_f32(const char *base, txc_dtype dt, int64_t rows, int64_t cols, int64_t rs, int64_t cs, float *dst)
{
    txc_kern_copy(2, (const int64_t[]){rows, cols}, base, dt, (const int64_t[]){rs, cs}, dst, TXC_F32,
                  (const int64_t[]){cols, 1});
}

/* A work buffer of n floats in this thread's scratch slot `slot`. */
static float *work_f32(int64_t n, int slot)
{
    return txc_scratch((size_t)(n > 0 ? n : 1) * sizeof(float), slot);
}

static txc_status oom(const char *op)
{
    return txc_error(TXC_ERR_NOMEM, "%s: out of memory for a work buffer", op);
}

/* out (rows x cols, contiguous, dtype of out) from an f32 buffer. */
static void store_rows(txc_tensor *out, int64_t elem_off, const float *src, int64_t n)
{
    char *d = (char *)txc_impl_data(out) + (size_t)elem_off * txc_dtype_size(out->dtype);
    txc_kern_from_f32(out->dtype, src, d, n);
}

/* x·Wᵀ of aten::linear: txc_kern_gemm_nt, or with batch invariance off and
 * 1 < M <= TXC_KERN_ROWS_INVARIANT_MAX (the rows of a batched decode step,
 * a short prompt) the kernel of M above the bound: on AVX2 without AVX-512
 * the packed 6 x 16 GEMM (gemm_avx2.c), elsewhere the tiled GEMM of
 * gemm_nt_serial / its parallel split (AMX from 5 rows). Attention's
 * products (one sequence's rows) keep txc_kern_gemm_nt either way. */
static void linear_gemm_nt(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const void *B, txc_dtype bdt,
                           int64_t ldb, float *C, int64_t ldc)
{
    gemm_impl(false, txc_ops_batch_invariant(), M, N, K, A, lda, B, bdt, ldb, C, ldc);
}

/* ---- matmul ----------------------------------------------------------------------- */

/* Batched view of a matmul operand: batch dims (broadcast to the result's),
 * rows x cols with element strides. */
typedef struct mm_operand {
    int64_t rows, cols, rs, cs;
    int64_t bstrides[TXC_MAX_DIMS];
} mm_operand;

static txc_status infer_matmul(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    const txc_tensor *x = in[0], *y = in[1];
    char sx[160], sy[160];
    if (n_in != 2)
        return txc_error(TXC_ERR_INTERNAL, "aten::matmul: expected 2 inputs, got %d", n_in);
    if (x->ndim == 0 || y->ndim == 0)
        return txc_error(TXC_ERR_INVALID, "aten::matmul: both arguments need to be at least 1-D, got shapes %s and %s",
                         txc_kern_shape_str(sx, sizeof sx, x->ndim, x->shape),
                         txc_kern_shape_str(sy, sizeof sy, y->ndim, y->shape));
    if (x->dtype == TXC_BOOL || y->dtype == TXC_BOOL)
        return txc_error(TXC_ERR_UNSUPPORTED, "aten::matmul: not implemented for bool tensors");
    int64_t kx = x->shape[x->ndim - 1], ky = y->ndim == 1 ? y->shape[0] : y->shape[y->ndim - 2];
    if (kx != ky)
        return txc_error(TXC_ERR_INVALID, "aten::matmul: shapes %s and %s cannot be multiplied (%lld vs %lld)",
                         txc_kern_shape_str(sx, sizeof sx, x->ndim, x->shape),
                         txc_kern_shape_str(sy, sizeof sy, y->ndim, y->shape), (long long)kx, (long long)ky);
    m->dtype = txc_promote(x->dtype, y->dtype);
    int nbx = x->ndim > 2 ? x->ndim - 2 : 0, nby = y->ndim > 2 ? y->ndim - 2 : 0, nb;
    int64_t batch[TXC_MAX_DIMS];
    if (txc_broadcast_shapes("aten::matmul", nbx, x->shape, nby, y->shape, &nb, batch) != TXC_OK)
        return TXC_ERR_INVALID;
    m->ndim = 0;
    for (int i = 0; i < nb; i++)
        m->shape[m->ndim++] = batch[i];
    if (x->ndim >= 2)
        m->shape[m->ndim++] = x->shape[x->ndim - 2];
    if (y->ndim >= 2)
        m->shape[m->ndim++] = y->shape[y->ndim - 1];
    return TXC_OK;
}

static void mm_describe(const txc_tensor *t, bool is_left, int nb, const int64_t *batch, mm_operand *o)
{
    if (t->ndim == 1) {
        if (is_left) { /* (1, k) */
            o->rows = 1, o->cols = t->shape[0], o->rs = 0, o->cs = t->strides[0];
        } else { /* (k, 1) */
            o->rows = t->shape[0], o->cols = 1, o->rs = t->strides[0], o->cs = 0;
        }
    } else {
        o->rows = t->shape[t->ndim - 2], o->cols = t->shape[t->ndim - 1];
        o->rs = t->strides[t->ndim - 2], o->cs = t->strides[t->ndim - 1];
    }
    /* Strides of size-1 dims do not matter: make them "contiguous". */
    if (o->cols == 1)
        o->cs = 1;
    if (o->rows == 1)
        o->rs = o->cols;
    int tb = t->ndim > 2 ? t->ndim - 2 : 0;
    for (int i = 0; i < nb; i++) {
        int it = tb - nb + i;
        o->bstrides[i] = (it >= 0 && t->shape[it] == batch[i] && batch[i] != 1) ? t->strides[it] : 0;
    }
}

static txc_status matmul_int(txc_tensor *out, const txc_tensor *x, const txc_tensor *y, const mm_operand *ox,
                             const mm_operand *oy, int nb, const int64_t *batch, int64_t nbatch)
{
    int64_t n = ox->rows, k = ox->cols, p = oy->cols, idx[TXC_MAX_DIMS] = {0};
    const char *bx = txc_impl_data(x), *by = txc_impl_data(y);
    for (int64_t bi = 0; bi < nbatch; bi++) {
        int64_t offx = 0, offy = 0;
        for (int d = 0; d < nb; d++)
            offx += idx[d] * ox->bstrides[d], offy += idx[d] * oy->bstrides[d];
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < p; j++) {
                uint64_t s = 0; /* wraps as torch's integer accumulation */
                for (int64_t q = 0; q < k; q++) {
                    int64_t va = (int64_t)txc_dtype_load(x->dtype, bx, (size_t)(offx + i * ox->rs + q * ox->cs));
                    int64_t vb = (int64_t)txc_dtype_load(y->dtype, by, (size_t)(offy + q * oy->rs + j * oy->cs));
                    if (x->dtype == TXC_I64)
                        va = ((const int64_t *)bx)[offx + i * ox->rs + q * ox->cs];
                    if (y->dtype == TXC_I64)
                        vb = ((const int64_t *)by)[offy + q * oy->rs + j * oy->cs];
                    s += (uint64_t)va * (uint64_t)vb;
                }
                size_t o = (size_t)((bi * n + i) * p + j);
                if (out->dtype == TXC_I64)
                    ((int64_t *)txc_impl_data(out))[o] = (int64_t)s;
                else
                    ((int32_t *)txc_impl_data(out))[o] = (int32_t)(uint32_t)s;
            }
        txc_kern_next_index(idx, nb, batch);
    }
    return TXC_OK;
}

static txc_status cpu_matmul(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    const txc_tensor *x = in[0], *y = in[1];
    int nbx = x->ndim > 2 ? x->ndim - 2 : 0, nby = y->ndim > 2 ? y->ndim - 2 : 0, nb;
    int64_t batch[TXC_MAX_DIMS];
    txc_broadcast_shapes("aten::matmul", nbx, x->shape, nby, y->shape, &nb, batch);
    mm_operand ox, oy;
    mm_describe(x, true, nb, batch, &ox);
    mm_describe(y, false, nb, batch, &oy);
    int64_t nbatch = 1;
    for (int i = 0; i < nb; i++)
        nbatch *= batch[i];
    int64_t n = ox.rows, k = ox.cols, p = oy.cols;
    if (out->numel == 0)
        return TXC_OK;
    if (!txc_dtype_is_float(out->dtype))
        return matmul_int(out, x, y, &ox, &oy, nb, batch, nbatch);

    const char *bx = txc_impl_data(x), *by = txc_impl_data(y);
    size_t esx = txc_dtype_size(x->dtype), esy = txc_dtype_size(y->dtype);
    bool y_bcast = true; /* y the same for every batch: fold the batch into the rows */
    for (int i = 0; i < nb; i++)
        y_bcast = y_bcast && oy.bstrides[i] == 0;
    int64_t M = n, nbl = nbatch;
    if (y_bcast) {
        M = n * nbatch;
        nbl = 1;
    }
    /* A: rows of x as f32 (direct when f32 with unit column stride and the
     * rows evenly spaced, else packed). */
    bool a_direct = x->dtype == TXC_F32 && ox.cs == 1;
    int64_t lda = ox.rs;
    if (y_bcast && nbatch > 1) {
        /* rows of all batches evenly spaced: x contiguous (*, n, k), not broadcast */
        a_direct = a_direct && txc_tensor_is_contiguous(x) && x->ndim - 2 == nb && x->ndim >= 3;
        lda = k;
    }
    /* B: row-major (unit column stride) for NN, or unit row stride for NT. */
    bool b_typed = is_gemm_dtype(y->dtype);
    bool use_nt = b_typed && oy.rs == 1 && (oy.cs != 1 || p < 16);
    bool use_nn = !use_nt && b_typed && oy.cs == 1;
    bool b_pack = !use_nt && !use_nn;

    float *abuf = NULL, *bbuf = NULL, *cbuf = NULL;
    if ((!a_direct && !(abuf = work_f32(M * k, TXC_SCRATCH_GEMM_A))) ||
        (b_pack && !(bbuf = work_f32(k * p, TXC_SCRATCH_GEMM_B))) ||
        (out->dtype != TXC_F32 && !(cbuf = work_f32(M * p, TXC_SCRATCH_GEMM_C))))
        return oom("aten::matmul");
    int64_t idx[TXC_MAX_DIMS] = {0};
    for (int64_t bi = 0; bi < nbl; bi++) {
        int64_t offx = 0, offy = 0;
        for (int d = 0; d < nb; d++)
            offx += idx[d] * ox.bstrides[d], offy += idx[d] * oy.bstrides[d];
        const float *A;
        if (a_direct) {
            A = (const float *)(bx + (size_t)offx * esx);
        } else if (y_bcast) {
            /* pack every batch's n x k block */
            int64_t jdx[TXC_MAX_DIMS] = {0};
            for (int64_t bj = 0; bj < nbatch; bj++) {
                int64_t o = 0;
                for (int d = 0; d < nb; d++)
                    o += jdx[d] * ox.bstrides[d];
                pack_f32(bx + (size_t)o * esx, x->dtype, n, k, ox.rs, ox.cs, abuf + bj * n * k);
                txc_kern_next_index(jdx, nb, batch);
            }
            A = abuf;
            lda = k;
        } else {
            pack_f32(bx + (size_t)offx * esx, x->dtype, n, k, ox.rs, ox.cs, abuf);
            A = abuf;
            lda = k;
        }
        float *C = cbuf ? cbuf : (float *)txc_impl_data(out) + bi * M * p;
        const char *B = by + (size_t)offy * esy;
        if (use_nt) {
            txc_kern_gemm_nt(M, p, k, A, lda, B, y->dtype, oy.cs, C, p);
        } else if (use_nn) {
            txc_kern_gemm_nn(M, p, k, A, lda, B, y->dtype, oy.rs, C, p);
        } else {
            pack_f32(B, y->dtype, k, p, oy.rs, oy.cs, bbuf);
            txc_kern_gemm_nn(M, p, k, A, lda, bbuf, TXC_F32, p, C, p);
        }
        if (cbuf)
            store_rows(out, bi * M * p, cbuf, M * p);
        txc_kern_next_index(idx, nb, batch);
    }
    return TXC_OK;
}

/* ---- linear ------------------------------------------------------------------------- */

static txc_status infer_linear(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    bool has_bias = !(a->flags & TXC_ATTR_NO_BIAS), residual = (a->flags & TXC_ATTR_RESIDUAL) != 0;
    int want = (has_bias ? 3 : 2) + residual;
    if (n_in != want)
        return txc_error(TXC_ERR_INTERNAL, "aten::linear: expected %d inputs, got %d", want, n_in);
    const txc_tensor *x = in[0], *w = in[1];
    char sx[160], sw[160];
    bool wq = txc_dtype_is_quantized(w->dtype); /* a GGUF weight (ops/quant_dot.c) */
    if (!txc_dtype_is_float(x->dtype) || (!txc_dtype_is_float(w->dtype) && !wq))
        return txc_error(TXC_ERR_UNSUPPORTED, "aten::linear: float inputs only (got %s input, %s weight)",
                         txc_dtype_name(x->dtype), txc_dtype_name(w->dtype));
    if (w->ndim != 2 || x->ndim < 1 || x->shape[x->ndim - 1] != w->shape[1])
        return txc_error(TXC_ERR_INVALID,
                         "aten::linear: input %s and weight %s do not match: weight must be (out_features, "
                         "in_features) with in_features the input's last dim",
                         txc_kern_shape_str(sx, sizeof sx, x->ndim, x->shape),
                         txc_kern_shape_str(sw, sizeof sw, w->ndim, w->shape));
    /* a quantized weight computes as float32 (ggml's dequantized weight) */
    m->dtype = txc_promote(x->dtype, wq ? TXC_F32 : w->dtype);
    if (wq && (w->strides[1] != 1 || w->strides[0] != w->shape[1] || w->shape[1] % txc_dtype_block_size(w->dtype)))
        return txc_error(TXC_ERR_UNSUPPORTED, "aten::linear: a %s weight must be whole contiguous rows of blocks",
                         txc_dtype_name(w->dtype));
    if (has_bias) {
        const txc_tensor *b = in[2];
        if (!txc_dtype_is_float(b->dtype))
            return txc_error(TXC_ERR_UNSUPPORTED, "aten::linear: float bias only (got %s)", txc_dtype_name(b->dtype));
        if (b->ndim > 1 || (b->ndim == 1 && b->shape[0] != w->shape[0] && b->shape[0] != 1))
            return txc_error(TXC_ERR_INVALID, "aten::linear: bias %s does not match weight %s (out_features %lld)",
                             txc_kern_shape_str(sx, sizeof sx, b->ndim, b->shape),
                             txc_kern_shape_str(sw, sizeof sw, w->ndim, w->shape), (long long)w->shape[0]);
        m->dtype = txc_promote(m->dtype, b->dtype);
    }
    m->ndim = x->ndim;
    memcpy(m->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    m->shape[x->ndim - 1] = w->shape[0];
    if (residual) {
        const txc_tensor *r = in[n_in - 1];
        if ((m->dtype != TXC_F32 && m->dtype != TXC_BF16 && m->dtype != TXC_F16) || r->dtype != m->dtype ||
            r->ndim != m->ndim || memcmp(r->shape, m->shape, sizeof(int64_t) * (size_t)m->ndim) != 0 ||
            !txc_tensor_is_contiguous(r))
            return txc_error(TXC_ERR_INTERNAL, "aten::linear: the residual must be a contiguous tensor of the "
                                               "result's dtype (float32, bfloat16 or float16) and shape");
    }
    return TXC_OK;
}

/* C (M rows of N) += bias (N, or one value), converted to float32. */
static txc_status add_bias(float *C, int64_t M, int64_t N, const txc_tensor *bias)
{
    /* (the GEMM is done with its ROW slot: the bias row may use it) */
    float bstack[1024], *bv = N <= 1024 ? bstack : work_f32(N, TXC_SCRATCH_ROW);
    if (!bv)
        return oom("aten::linear");
    if (bias->ndim == 0 || bias->shape[0] == 1) {
        float v = (float)txc_dtype_load(bias->dtype, txc_impl_data(bias), 0);
        for (int64_t j = 0; j < N; j++)
            bv[j] = v;
    } else {
        txc_kern_to_f32(bias->dtype, txc_impl_data(bias), bias->strides[0], bv, N);
    }
    for (int64_t i = 0; i < M; i++) {
        float *c = C + i * N;
        for (int64_t j = 0; j < N; j++)
            c[j] += bv[j];
    }
    return TXC_OK;
}

static txc_status cpu_linear(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    const txc_tensor *x = in[0], *w = in[1], *bias = (a->flags & TXC_ATTR_NO_BIAS) ? NULL : in[2];
    int64_t K = w->shape[1], N = w->shape[0], M = K > 0 ? x->numel / K : 1;
    if (K == 0)
        for (int i = 0; i < x->ndim - 1; i++)
            M = i == 0 ? x->shape[0] : M * x->shape[i];
    if (x->ndim == 1)
        M = 1;
    if (M == 0 || N == 0)
        return TXC_OK;

    /* A = x as (M, K) f32 rows: direct when f32, unit inner stride and
     * evenly spaced rows; else packed. */
    const float *A = NULL;
    int64_t lda = K;
    float *abuf = NULL, *cbuf = NULL, *bbuf = NULL;
    if (x->dtype == TXC_F32 && (K <= 1 || x->strides[x->ndim - 1] == 1)) {
        if (txc_tensor_is_contiguous(x) || x->ndim == 1)
            A = txc_impl_data(x), lda = K;
        else if (x->ndim == 2)
            A = txc_impl_data(x), lda = x->strides[0];
    }
    if (!A && M * K > 0) {
        if (!(abuf = work_f32(M * K, TXC_SCRATCH_GEMM_A)))
            return oom("aten::linear");
        /* x (..., K) with any strides, converted */
        int64_t cs[TXC_MAX_DIMS];
        txc_impl_contiguous_strides(x->ndim, x->shape, cs);
        txc_kern_copy(x->ndim, x->shape, txc_impl_data(x), x->dtype, x->strides, abuf, TXC_F32, cs);
        A = abuf;
        lda = K;
    }
    float *C = out->dtype == TXC_F32 ? (float *)txc_impl_data(out) : (cbuf = work_f32(M * N, TXC_SCRATCH_GEMM_C));
    if (!C)
        return oom("aten::linear");
    const char *W = txc_impl_data(w);
    int64_t ws0 = w->strides[0], ws1 = w->strides[1];
    if (K <= 1)
        ws1 = 1;
    if (N == 1)
        ws0 = K;
    if (txc_dtype_is_quantized(w->dtype)) {
        int il = txc_quant_weight_il(w);
        if (il < 0)
            return txc_error(TXC_ERR_UNSUPPORTED, "aten::linear: a view of part of a repacked %s weight",
                             txc_dtype_name(w->dtype));
        txc_status qs = txc_quant_gemm_il(M, N, K, A, lda, W, w->dtype, il, C, N);
        if (qs != TXC_OK)
            return qs;
    } else if (ws1 == 1) {
        linear_gemm_nt(M, N, K, A, lda, W, w->dtype, ws0, C, N);
    } else if (ws0 == 1) {
        /* weight is a transposed view of a row-major (in, out) matrix */
        txc_kern_gemm_nn(M, N, K, A, lda, W, w->dtype, ws1, C, N);
    } else {
        if (!(bbuf = work_f32(N * K, TXC_SCRATCH_GEMM_B)))
            return oom("aten::linear");
        pack_f32(W, w->dtype, N, K, ws0, ws1, bbuf);
        txc_kern_gemm_nt(M, N, K, A, lda, bbuf, TXC_F32, K, C, N);
    }
    if (bias && add_bias(C, M, N, bias) != TXC_OK)
        return TXC_ERR_NOMEM;
    if (a->flags & TXC_ATTR_RESIDUAL) { /* out = linear + r: the add's float addition, element by element */
        const txc_tensor *rt = in[n_in - 1];
        if (rt->dtype == TXC_F32) {
            const float *r = txc_impl_data(rt);
            for (int64_t i = 0; i < M * N; i++)
                C[i] += r[i];
        } else {
            /* a reduced dtype: the linear's result rounded to it (what the unfused linear stores),
             * plus r in float32; store_rows rounds the sum as the add's kernel does */
            const uint16_t *r = txc_impl_data(rt);
            bool bf = rt->dtype == TXC_BF16;
            for (int64_t i = 0; i < M * N; i++)
                C[i] = txc_kern_round_to(rt->dtype, C[i]) + (bf ? txc_bf16_to_f32(r[i]) : txc_f16_to_f32(r[i]));
        }
    }
    if (cbuf)
        store_rows(out, 0, cbuf, M * N);
    return TXC_OK;
}

/* Sibling linears of one input of M > TXC_KERN_ROWS_INVARIANT_MAX rows at
 * SIMD level 1 (where each alone runs the packed AVX2 GEMM), bf16 ones
 * at level 2 with AVX-512 BF16 (each alone the VDPBF16PS GEMM), or ones
 * fma512_takes (each alone the AVX-512 FMA twin): as one packed group, A
 * packed once (the same bits as each alone, gemm_avx2.c, gemm_bf16dot.c),
 * then each bias. False (nothing done) where that does not apply. */
static bool linear_group_packed(int n, txc_tensor *const *outs, txc_tensor *const *const *args,
                                const txc_op_attrs *const *attrs, txc_status *st)
{
    const txc_tensor *x = args[0][0];
    const int64_t K = x->ndim > 0 ? x->shape[x->ndim - 1] : 0, M = K > 0 ? x->numel / K : 0;
    const int level = txc_kern_simd_level();
    if (n > TXC_PACKED_GROUP_MAX || level < 1 || x->ndim < 2 ||
        M <= TXC_KERN_ROWS_INVARIANT_MAX ||
        x->dtype != TXC_F32 || K < 1 || !txc_tensor_is_contiguous(x))
        return false;
    txc_gemv_part parts[TXC_PACKED_GROUP_MAX];
    for (int i = 0; i < n; i++) {
        const txc_tensor *w = args[i][1];
        if (args[i][0] != x || (attrs[i]->flags & TXC_ATTR_RESIDUAL) || outs[i]->dtype != TXC_F32 ||
            !txc_tensor_is_contiguous(outs[i]) || w->ndim != 2 || w->shape[1] != K || w->shape[0] < 1 ||
            (w->shape[0] > 1 && w->strides[1] != 1) || !is_gemm_dtype(w->dtype))
            return false;
        parts[i] = (txc_gemv_part){txc_impl_data(w), w->dtype, w->shape[0], w->shape[0] == 1 ? K : w->strides[0],
                                   (float *)txc_impl_data(outs[i])};
    }
    /* every part on the kernel it would run alone */
    bool all_bf16dot = level == 2 && txc_kern_avx512bf16(), all_fma512 = true;
    for (int i = 0; i < n; i++) {
        all_bf16dot = all_bf16dot && parts[i].bdt == TXC_BF16;
        all_fma512 = all_fma512 && fma512_takes(parts[i].bdt);
    }
    const float *A = txc_impl_data(x);
    if (level == 1 ? !txc_kern_gemm_nt_avx2_packed_group(n, parts, M, K, A, K)
        : all_bf16dot ? !txc_kern_gemm_nt_bf16dot_group(n, parts, M, K, A, K)
        : !all_fma512 || !txc_kern_gemm_nt_fma512_group(n, parts, M, K, A, K))
        return false;
    *st = TXC_OK;
    for (int i = 0; i < n && *st == TXC_OK; i++) {
        const txc_tensor *bias = (attrs[i]->flags & TXC_ATTR_NO_BIAS) ? NULL : args[i][2];
        if (bias && add_bias(parts[i].C, M, parts[i].N, bias) != TXC_OK)
            *st = TXC_ERR_NOMEM;
    }
    return true;
}

txc_status txc_ops_linear_group(int n, txc_tensor *const *outs, txc_tensor *const *const *args,
                                const txc_op_attrs *const *attrs)
{
    const txc_tensor *x = args[0][0];
    int64_t K = x->ndim > 0 ? x->shape[x->ndim - 1] : 0;
    bool fast = n <= TXC_LINEAR_GROUP_MAX && x->dtype == TXC_F32 && x->numel == K && K > 1 &&
                txc_tensor_is_contiguous(x);
    for (int i = 0; fast && i < n; i++) {
        const txc_tensor *w = args[i][1];
        fast = args[i][0] == x && outs[i]->dtype == TXC_F32 && txc_tensor_is_contiguous(outs[i]) && w->ndim == 2 &&
               w->shape[1] == K && w->strides[1] == 1 && w->shape[0] > 1 && is_gemm_dtype(w->dtype);
    }
    txc_status qs;
    if (!fast && linear_group_packed(n, outs, args, attrs, &qs)) /* prefill rows without AVX-512 and AMX */
        return qs;
    if (!fast && txc_quant_linear_group(n, outs, args, attrs, &qs)) /* quantized weights (ops/quant_dot.c) */
        return qs;
    if (!fast) {
        for (int i = 0; i < n; i++) {
            txc_status s = cpu_linear(outs[i], args[i], (attrs[i]->flags & TXC_ATTR_NO_BIAS) ? 2 : 3, attrs[i]);
            if (s != TXC_OK)
                return s;
        }
        return TXC_OK;
    }
    txc_gemv_part parts[TXC_LINEAR_GROUP_MAX] = {{0}};
    for (int i = 0; i < n; i++) {
        const txc_tensor *w = args[i][1];
        parts[i] = (txc_gemv_part){txc_impl_data(w), w->dtype, w->shape[0], w->strides[0],
                                   (float *)txc_impl_data(outs[i])};
    }
    txc_kern_gemv_group(n, parts, K, txc_impl_data(x));
    for (int i = 0; i < n; i++) {
        const txc_tensor *bias = (attrs[i]->flags & TXC_ATTR_NO_BIAS) ? NULL : args[i][2];
        if (bias && add_bias(parts[i].C, 1, parts[i].N, bias) != TXC_OK)
            return TXC_ERR_NOMEM;
    }
    return TXC_OK;
}

void txc_ops_register_linalg(txc_op_def *t)
{
    t[TXC_OP_MATMUL] = (txc_op_def){.infer = infer_matmul, .cpu = cpu_matmul};
    t[TXC_OP_LINEAR] = (txc_op_def){.infer = infer_linear, .cpu = cpu_linear};
}
