/* The prefill GEMM on AVX2+FMA CPUs without AMX: C = A·Bᵀ for float32 A
 * and float32/bfloat16/float16 B, over weight panels converted to float32
 * once per block, in 4 x 3 register tiles, with cache blocking. See
 * ops/kernels.h (txc_kern_gemm_nt_avx2_packed) for the contract.
 *
 * Summation order (why results do not depend on M, the thread count or the
 * blocking). Every C[i,j] is computed exactly as linalg.c's AVX2 dot-product
 * tiles compute it (nt_tile, the kernel of GEMV and M <= 4):
 *   lane l (0..7) of an 8-float accumulator sums A[i,k]·B[j,k] for
 *   k ≡ l (mod 8), k < K8 = K - K%8, in increasing k, one FMA each;
 *   the 8 lanes are added as ((v0+v1)+(v2+v3)) + ((v4+v5)+(v6+v7)) — the
 *   hadd tree of hsum8x4 — for the columns of full groups of 4, and as
 *   ((v0+v4)+(v2+v6)) + ((v1+v5)+(v3+v7)) — hsum8 — for the last N%4
 *   columns of the call (linalg.c's column tail);
 *   the K%8 remainder is summed in scalar (t += A·B from 0, increasing k)
 *   and added last.
 * A K block ends at a multiple of 8 and stores the 8 lanes exactly in a
 * buffer the next block continues from, so cache blocking never reorders a
 * sum; rows and columns are never combined, so each row of C depends only
 * on that row of A (batch invariance), and each column only on its column
 * index within the call (the threads' slices start at multiples of 16).
 *
 * Why this shape. Zen 3 (and Intel since Haswell) issue 2 FMAs a cycle with
 * a 4-5 cycle latency and load two 256-bit vectors a cycle from L1. A 4 x 3
 * tile of dot products holds 12 accumulators, 3 B vectors and one A vector
 * (all 16 ymm registers) and needs 7 loads per 12 FMAs: FMA-bound. linalg.c's
 * 4 x 4 tile wants 16 accumulators plus its operands and spills. B is
 * converted to float32 into a panel laid out in the order the micro-kernel
 * reads it (for each group of 3 columns, for each 8 k, the 3 columns' 8
 * floats: one sequential stream from L2) — once per block, so the half
 * weights are widened once per GEMM and not once per 4 rows of A. Blocks:
 * KC <= 1024 k (a 4-row A panel, 16 KiB at most, stays in L1 while it
 * meets every column group of the block; measured on Zen 3 against KC 512
 * with 8-row panels: 77-87 against 58-74 GFLOP/s per core on the shapes of
 * SmolLM2 and Qwen2.5, a probe of 93), NC columns with NC x KC floats in half of L2
 * (ops/cpu_cache.h; 512 KiB when unknown), MC <= 256 rows per pass over B
 * (the lane buffer of a K-blocked GEMM is MC x NC x 8 floats).
 */
#include "ops/cpu_cache.h"
#include "ops/kernels.h"

#include <string.h>

#if TXC_HAVE_X86

enum { MR = 4, NR = 3, MB = 4, KC_MAX = 1024, MC_MAX = 256 };

/* The two lane orders of the contract above: the sums of a, b, c, d as
 * ((v0+v1)+(v2+v3)) + ((v4+v5)+(v6+v7)) (linalg.c's hsum8x4), and one
 * vector's as ((v0+v4)+(v2+v6)) + ((v1+v5)+(v3+v7)) (its hsum8). */
TXC_INLINE_AVX2 __m128 hsum8x4(__m256 a, __m256 b, __m256 c, __m256 d)
{
    __m256 ab = _mm256_hadd_ps(a, b), cd = _mm256_hadd_ps(c, d);
    __m256 abcd = _mm256_hadd_ps(ab, cd);
    return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

TXC_INLINE_AVX2 float sum_tail(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Columns [j0, j0+nc) of B, k in [k0, k0+kc) (kc a multiple of 8), as
 * float32 panels: group g (columns j0+3g..) step s holds 3 x 8 floats;
 * columns past nc are zeros (never read back into C). */
TXC_INLINE_AVX2 void pack_b(const int DT, const char *B, int64_t ldb, int64_t j0, int64_t nc, int64_t k0, int64_t kc,
                           float *P)
{
    const size_t es = DT == TXC_F32 ? 4 : 2;
    const int64_t steps = kc / 8, groups = (nc + NR - 1) / NR;
    for (int64_t g = 0; g < groups; g++) {
        float *pg = P + g * steps * (NR * 8);
        for (int c = 0; c < NR; c++) {
            int64_t j = g * NR + c;
            float *p = pg + c * 8;
            if (j >= nc) {
                for (int64_t s = 0; s < steps; s++)
                    _mm256_storeu_ps(p + s * (NR * 8), _mm256_setzero_ps());
                continue;
            }
            const char *b = B + (size_t)((j0 + j) * ldb + k0) * es;
            for (int64_t s = 0; s < steps; s++) {
                const char *q = b + (size_t)(s * 8) * es;
                __m256 v;
                if (DT == TXC_F32)
                    v = _mm256_loadu_ps((const float *)q);
                else if (DT == TXC_BF16)
                    v = _mm256_castsi256_ps(
                        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)q)), 16));
                else
                    v = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)q));
                _mm256_storeu_ps(p + s * (NR * 8), v);
            }
        }
    }
}

TXC_INLINE_AVX2 float ld1(const int DT, const char *p)
{
    uint16_t h;
    if (DT == TXC_F32) {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    memcpy(&h, p, 2);
    return DT == TXC_BF16 ? txc_bf16_to_f32(h) : _cvtsh_ss(h);
}

/* One mr x nr tile (rows A, k from 0; columns jg.. of the call) over the K
 * block [k0, k0 + 8 steps) of panel P. first: start from 0, else from the
 * lanes saved in L; last: reduce into C (adding the remainder k8 <= k < K
 * from A's and B's rows), else save the lanes to L. */
TXC_INLINE_AVX2 void tile(const int mr, const int nr, const int DT, int64_t steps, const float *A, int64_t lda,
                          int64_t k0, const float *P, float *L, int64_t ldl, bool first, bool last, int64_t jg,
                          int64_t n4, int64_t k8, int64_t K, const char *B, int64_t ldb, float *C, int64_t ldc)
{
    __m256 acc[MR][NR];
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++)
            acc[i][j] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(L + i * ldl + j * 8);
    for (int64_t s = 0; s < steps; s++) {
        const float *p = P + s * (NR * 8);
        __m256 b[NR];
        for (int j = 0; j < nr; j++)
            b[j] = _mm256_loadu_ps(p + j * 8);
        for (int i = 0; i < mr; i++) {
            __m256 a = _mm256_loadu_ps(A + i * lda + k0 + s * 8);
            for (int j = 0; j < nr; j++)
                acc[i][j] = _mm256_fmadd_ps(a, b[j], acc[i][j]);
        }
    }
    if (!last) {
        for (int i = 0; i < mr; i++)
            for (int j = 0; j < nr; j++)
                _mm256_storeu_ps(L + i * ldl + j * 8, acc[i][j]);
        return;
    }
    /* The rows' sums side by side (the hadd tree; independent, so their
     * latencies overlap), then the exceptions: the call's last N%4 columns
     * (the other lane order) and the K%8 remainder. */
    __m128 s4[MR];
    for (int i = 0; i < mr; i++)
        s4[i] = hsum8x4(acc[i][0], acc[i][nr > 1 ? 1 : 0], acc[i][nr > 2 ? 2 : 0], acc[i][0]);
    if (k8 == K && jg + nr <= n4) { /* (stored from registers: no store-to-load round trip) */
        for (int i = 0; i < mr; i++) {
            float *c = C + i * ldc;
            if (nr == 1)
                _mm_store_ss(c, s4[i]);
            else
                _mm_storel_pi((__m64 *)c, s4[i]);
            if (nr == 3)
                _mm_store_ss(c + 2, _mm_movehl_ps(s4[i], s4[i]));
        }
        return;
    }
    float sum[MR][4];
    for (int i = 0; i < mr; i++)
        _mm_storeu_ps(sum[i], s4[i]);
    const size_t es = DT == TXC_F32 ? 4 : 2;
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            const float *arow = A + i * lda;
            const char *brow = B + (size_t)((jg + j) * ldb) * es;
            float t = 0.0f;
            for (int64_t k = k8; k < K; k++)
                t += arow[k] * ld1(DT, brow + (size_t)k * es);
            float v = jg + j < n4 ? sum[i][j] : sum_tail(acc[i][j]);
            C[i * ldc + j] = v + t;
        }
}

/* Dispatch of the tile shapes (constants after inlining). */
#define TILE_CASE(MRV, NRV)                                                                                   \
    tile(MRV, NRV, DT, steps, A, lda, k0, P, L, ldl, first, last, jg, n4, k8, K, B, ldb, C, ldc)

TXC_INLINE_AVX2 void tile_any(const int DT, int mr, int nr, int64_t steps, const float *A, int64_t lda, int64_t k0,
                              const float *P, float *L, int64_t ldl, bool first, bool last, int64_t jg, int64_t n4, int64_t k8,
                              int64_t K, const char *B, int64_t ldb, float *C, int64_t ldc)
{
    switch (mr * 4 + nr) {
    case 4 * 4 + 3: TILE_CASE(4, 3); break;
    case 4 * 4 + 2: TILE_CASE(4, 2); break;
    case 4 * 4 + 1: TILE_CASE(4, 1); break;
    case 3 * 4 + 3: TILE_CASE(3, 3); break;
    case 3 * 4 + 2: TILE_CASE(3, 2); break;
    case 3 * 4 + 1: TILE_CASE(3, 1); break;
    case 2 * 4 + 3: TILE_CASE(2, 3); break;
    case 2 * 4 + 2: TILE_CASE(2, 2); break;
    case 2 * 4 + 1: TILE_CASE(2, 1); break;
    case 1 * 4 + 3: TILE_CASE(1, 3); break;
    case 1 * 4 + 2: TILE_CASE(1, 2); break;
    default: TILE_CASE(1, 1); break;
    }
}

typedef struct blocking {
    int64_t kc, nc, mc;
} blocking;

static blocking choose_blocks(int64_t M, int64_t N, int64_t K8)
{
    blocking b;
    int64_t nkb = K8 > 0 ? (K8 + KC_MAX - 1) / KC_MAX : 1;
    b.kc = K8 > 0 ? ((K8 + nkb - 1) / nkb + 7) / 8 * 8 : 8;
    size_t l2 = txc_cpu_caches_get()->l2_bytes;
    if (l2 < (size_t)128 << 10 || l2 > (size_t)4 << 20)
        l2 = (size_t)512 << 10;
    b.nc = (int64_t)(l2 / 2 / ((size_t)b.kc * sizeof(float))) / (NR * 4) * (NR * 4);
    if (b.nc < NR * 4)
        b.nc = NR * 4;
    if (b.nc > N)
        b.nc = N;
    b.mc = M < MC_MAX ? M : MC_MAX;
    return b;
}

TXC_INLINE_AVX2 bool gemm_dt(const int DT, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const char *B,
                             int64_t ldb, float *C, int64_t ldc)
{
    const int64_t k8 = K / 8 * 8, n4 = N - N % 4;
    blocking bl = choose_blocks(M, N, k8);
    const int64_t nkb = k8 > 0 ? (k8 + bl.kc - 1) / bl.kc : 1;
    float *P = txc_scratch((size_t)((bl.nc + NR - 1) / NR * NR) * (size_t)bl.kc * sizeof(float), TXC_SCRATCH_GEMM_PACK);
    float *L = NULL;
    if (P && nkb > 1)
        L = txc_scratch((size_t)bl.mc * (size_t)bl.nc * 8 * sizeof(float), TXC_SCRATCH_ROW);
    if (!P || (nkb > 1 && !L))
        return false;
    const int64_t ldl = bl.nc * 8;
    for (int64_t m0 = 0; m0 < M; m0 += bl.mc) {
        const int64_t mc = M - m0 < bl.mc ? M - m0 : bl.mc;
        for (int64_t j0 = 0; j0 < N; j0 += bl.nc) {
            const int64_t nc = N - j0 < bl.nc ? N - j0 : bl.nc;
            for (int64_t kb = 0; kb < nkb; kb++) {
                const int64_t k0 = kb * bl.kc, kc = k8 - k0 < bl.kc ? k8 - k0 : bl.kc;
                const bool first = kb == 0, last = kb == nkb - 1;
                if (kc > 0)
                    pack_b(DT, B, ldb, j0, nc, k0, kc, P);
                const int64_t steps = kc / 8;
                for (int64_t ib = 0; ib < mc; ib += MB)
                    for (int64_t j = 0; j < nc; j += NR) {
                        const int nr = nc - j < NR ? (int)(nc - j) : NR;
                        for (int64_t i = ib; i < mc && i < ib + MB; i += MR) {
                            const int mr = mc - i < MR ? (int)(mc - i) : MR;
                            tile_any(DT, mr, nr, steps, A + (m0 + i) * lda, lda, k0, P + (j / NR) * steps * (NR * 8),
                                     L ? L + i * ldl + j * 8 : NULL, ldl, first, last, j0 + j, n4, k8, K, B, ldb,
                                     C + (m0 + i) * ldc + j0 + j, ldc);
                        }
                    }
            }
        }
    }
    return true;
}

TXC_AVX2 static bool gemm_avx2(txc_dtype bdt, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                               const void *B, int64_t ldb, float *C, int64_t ldc)
{
    if (bdt == TXC_F32)
        return gemm_dt(TXC_F32, M, N, K, A, lda, B, ldb, C, ldc);
    if (bdt == TXC_BF16)
        return gemm_dt(TXC_BF16, M, N, K, A, lda, B, ldb, C, ldc);
    return gemm_dt(TXC_F16, M, N, K, A, lda, B, ldb, C, ldc);
}
#endif

bool txc_kern_gemm_nt_avx2_packed(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const void *B,
                                  txc_dtype bdt, int64_t ldb, float *C, int64_t ldc)
{
#if TXC_HAVE_X86
    if (M <= 0 || N <= 0 || K < 0 || txc_kern_simd_level() < 1 ||
        (bdt != TXC_F32 && bdt != TXC_BF16 && bdt != TXC_F16))
        return false;
    return gemm_avx2(bdt, M, N, K, A, lda, B, ldb, C, ldc);
#else
    (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)bdt, (void)ldb, (void)C, (void)ldc;
    return false;
#endif
}
