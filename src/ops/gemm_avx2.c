/* The prefill GEMM on AVX2+FMA CPUs without AVX-512 and AMX (AMD Zen 1-3,
 * Intel Haswell..Comet Lake): C = A·Bᵀ for float32 A and float32, bfloat16
 * or float16 B (the weight, rows of stride ldb), in 6 x 16 register tiles
 * over packed operands — the GotoBLAS/BLIS scheme (K. Goto, R. van de
 * Geijn, "Anatomy of high-performance matrix multiplication", ACM TOMS
 * 34(3), 2008; BLIS's haswell sgemm micro-kernel is 6 x 16 too). See
 * ops/kernels.h (txc_kern_gemm_nt_avx2_packed) for the contract.
 *
 * Summation order: every C[i,j] is one fused multiply-add chain in
 * increasing k from 0, c = fma(A[i,k], B[j,k], c) — the same for every M,
 * N, stride, blocking and thread count: a K block continues from the value
 * the previous one stored in C (a float32 store and load are exact), padded
 * rows and columns are computed apart and dropped, rows and columns are
 * never combined. So a row does not depend on the other rows, and the
 * result is bit-identical to the scalar loop with fmaf (tests/
 * test_gemm_avx2.c checks that bit for bit).
 *
 * Why this shape. Zen 3 (and Intel since Haswell) issue 2 FMAs a cycle with
 * a 4-5 cycle latency. The 6 x 16 tile keeps 12 accumulators (independent
 * chains: enough to cover the latency at 2 a cycle), 2 B vectors and one
 * broadcast A value in the 16 ymm registers and needs 8 loads per 12 FMAs
 * (2 a cycle): FMA-bound. B is converted to float32 once per 16 columns and
 * K block into a panel (KC x 16 floats, 16 KiB: stays in L1 while every
 * 6-row tile of the M block meets it); A is packed once per GEMM into 6-row
 * panels (k-major: 6 floats per k), and one K block of it (MC x KC floats,
 * 192 KiB at most) stays in L2 while a thread's columns stream past it.
 * Threads take chunks of columns (multiples of 16) on demand.
 */
#include "ops/avx2_dot.h"
#include "ops/cpu_cache.h"
#include "ops/kernels.h"
#include "txc/threads.h"

#include <string.h>

#if TXC_HAVE_X86

enum { MR = 6, NR = 16, KC_MAX = 256, MC_MAX = 192 };

/* The 6 x 16 tile c (rows of stride ldc) += the kc-step product of the A
 * panel (kc x 6) and the B panel (kc x 16); load: start from c, else from 0. */
TXC_INLINE_AVX2 void micro_6x16(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                                bool load)
{
    __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    if (load) {
        c00 = _mm256_loadu_ps(c + 0 * ldc), c01 = _mm256_loadu_ps(c + 0 * ldc + 8);
        c10 = _mm256_loadu_ps(c + 1 * ldc), c11 = _mm256_loadu_ps(c + 1 * ldc + 8);
        c20 = _mm256_loadu_ps(c + 2 * ldc), c21 = _mm256_loadu_ps(c + 2 * ldc + 8);
        c30 = _mm256_loadu_ps(c + 3 * ldc), c31 = _mm256_loadu_ps(c + 3 * ldc + 8);
        c40 = _mm256_loadu_ps(c + 4 * ldc), c41 = _mm256_loadu_ps(c + 4 * ldc + 8);
        c50 = _mm256_loadu_ps(c + 5 * ldc), c51 = _mm256_loadu_ps(c + 5 * ldc + 8);
    } else {
        c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_ps();
    }
    /* The k loop in assembly: with intrinsics GCC spills two accumulators
     * every 4 steps (16 live vectors), which puts a store and a load into
     * two of the FMA chains. The 12 accumulators are operands; B's two
     * vectors and A's broadcasts take ymm12-15. vfmadd231ps
     * x, y, acc: acc = y * x + acc, one rounding (the contract's fmaf). */
    if (kc > 0) {
        int64_t n = kc;
        __asm__ volatile("1:\n\t"
                         "vmovaps (%[b]), %%ymm12\n\t"
                         "vmovaps 32(%[b]), %%ymm13\n\t"
                         "vbroadcastss (%[a]), %%ymm14\n\t"
                         "vbroadcastss 4(%[a]), %%ymm15\n\t"
                         "vfmadd231ps %%ymm12, %%ymm14, %[c00]\n\t"
                         "vfmadd231ps %%ymm13, %%ymm14, %[c01]\n\t"
                         "vbroadcastss 8(%[a]), %%ymm14\n\t"
                         "vfmadd231ps %%ymm12, %%ymm15, %[c10]\n\t"
                         "vfmadd231ps %%ymm13, %%ymm15, %[c11]\n\t"
                         "vbroadcastss 12(%[a]), %%ymm15\n\t"
                         "vfmadd231ps %%ymm12, %%ymm14, %[c20]\n\t"
                         "vfmadd231ps %%ymm13, %%ymm14, %[c21]\n\t"
                         "vbroadcastss 16(%[a]), %%ymm14\n\t"
                         "vfmadd231ps %%ymm12, %%ymm15, %[c30]\n\t"
                         "vfmadd231ps %%ymm13, %%ymm15, %[c31]\n\t"
                         "vbroadcastss 20(%[a]), %%ymm15\n\t"
                         "vfmadd231ps %%ymm12, %%ymm14, %[c40]\n\t"
                         "vfmadd231ps %%ymm13, %%ymm14, %[c41]\n\t"
                         "vfmadd231ps %%ymm12, %%ymm15, %[c50]\n\t"
                         "vfmadd231ps %%ymm13, %%ymm15, %[c51]\n\t"
                         "addq $24, %[a]\n\t"
                         "addq $64, %[b]\n\t"
                         "decq %[n]\n\t"
                         "jnz 1b\n\t"
                         : [c00] "+x"(c00), [c01] "+x"(c01), [c10] "+x"(c10), [c11] "+x"(c11), [c20] "+x"(c20),
                           [c21] "+x"(c21), [c30] "+x"(c30), [c31] "+x"(c31), [c40] "+x"(c40), [c41] "+x"(c41),
                           [c50] "+x"(c50), [c51] "+x"(c51),
                           [a] "+r"(a), [b] "+r"(b), [n] "+r"(n)
                         :
                         : "cc", "memory", "xmm12", "xmm13", "xmm14", "xmm15");
    }
    _mm256_storeu_ps(c + 0 * ldc, c00), _mm256_storeu_ps(c + 0 * ldc + 8, c01);
    _mm256_storeu_ps(c + 1 * ldc, c10), _mm256_storeu_ps(c + 1 * ldc + 8, c11);
    _mm256_storeu_ps(c + 2 * ldc, c20), _mm256_storeu_ps(c + 2 * ldc + 8, c21);
    _mm256_storeu_ps(c + 3 * ldc, c30), _mm256_storeu_ps(c + 3 * ldc + 8, c31);
    _mm256_storeu_ps(c + 4 * ldc, c40), _mm256_storeu_ps(c + 4 * ldc + 8, c41);
    _mm256_storeu_ps(c + 5 * ldc, c50), _mm256_storeu_ps(c + 5 * ldc + 8, c51);
}

/* An mr x nr corner (mr <= 6, nr <= 16; the panels padded with zeros):
 * the full tile on a copy, its mr x nr part written back. */
TXC_INLINE_AVX2 void micro_edge(int mr, int nr, int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                                bool load)
{
    float t[MR * NR];
    memset(t, 0, sizeof t);
    if (load)
        for (int i = 0; i < mr; i++)
            memcpy(t + i * NR, c + i * ldc, (size_t)nr * sizeof(float));
    micro_6x16(kc, a, b, t, NR, true);
    for (int i = 0; i < mr; i++)
        memcpy(c + i * ldc, t + i * NR, (size_t)nr * sizeof(float));
}

/* Transpose the 8 x 8 block r[0..7] in place. */
TXC_INLINE_AVX2 void transpose8(__m256 r[8])
{
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xee);
    __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xee);
    __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xee);
    __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xee);
    r[0] = _mm256_permute2f128_ps(s0, s4, 0x20), r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    r[2] = _mm256_permute2f128_ps(s2, s6, 0x20), r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    r[4] = _mm256_permute2f128_ps(s0, s4, 0x31), r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    r[6] = _mm256_permute2f128_ps(s2, s6, 0x31), r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

/* The B panel of columns j0..j0+nc-1 (nc <= 16; the rest zeros) and k in
 * [k0, k0+kc): P[k * 16 + c] = B[j0 + c, k0 + k] as float32. */
TXC_INLINE_AVX2 void pack_b(const int DT, const char *B, int64_t ldb, int64_t j0, int nc, int64_t k0, int64_t kc,
                           float *P)
{
    const size_t es = DT == TXC_F32 ? 4 : 2;
    for (int g = 0; g < NR / 8; g++) {
        const char *row[8];
        int live = 0;
        for (int r = 0; r < 8; r++) {
            int c = g * 8 + r;
            row[r] = c < nc ? B + (size_t)((j0 + c) * ldb + k0) * es : NULL;
            live += c < nc;
        }
        float *p = P + g * 8;
        if (live == 0) {
            for (int64_t k = 0; k < kc; k++)
                _mm256_store_ps(p + k * NR, _mm256_setzero_ps());
            continue;
        }
        int64_t k = 0;
        for (; k + 8 <= kc; k += 8) {
            __m256 v[8];
            for (int r = 0; r < 8; r++)
                v[r] = row[r] ? ld8(row[r] + (size_t)k * es, DT) : _mm256_setzero_ps();
            transpose8(v);
            for (int q = 0; q < 8; q++)
                _mm256_store_ps(p + (k + q) * NR, v[q]);
        }
        for (; k < kc; k++)
            for (int r = 0; r < 8; r++)
                p[k * NR + r] = row[r] ? ld1(row[r] + (size_t)k * es, DT) : 0.0f;
    }
}

/* Rows [0, mc) of A (stride lda), all K, as 6-row panels: panel t holds
 * P[t * K * 6 + k * 6 + r] = A[6t + r, k], rows past mc zeros. */
TXC_INLINE_AVX2 void pack_a(int64_t mc, int64_t K, const float *A, int64_t lda, float *P)
{
    for (int64_t t = 0; t * MR < mc; t++) {
        float *p = P + t * K * MR;
        const int rows = mc - t * MR < MR ? (int)(mc - t * MR) : MR;
        const float *a[MR];
        for (int r = 0; r < rows; r++)
            a[r] = A + (t * MR + r) * lda;
        for (int64_t k = 0; k < K; k++)
            for (int r = 0; r < MR; r++)
                p[k * MR + r] = r < rows ? a[r][k] : 0.0f;
    }
}

typedef struct packed_job {
    int64_t mc, N, K, kc, ncb, ldb, ldc, chunk;
    const float *Ap; /* pack_a of the M block */
    const char *B;
    txc_dtype bdt;
    float *C; /* row 0 of the M block */
} packed_job;

TXC_INLINE_AVX2 void cols_dt(const int DT, const packed_job *j, int64_t c0, int64_t c1)
{
    _Alignas(32) float Bp[KC_MAX * NR];
    const int64_t K = j->K;
    for (int64_t g0 = c0; g0 < c1; g0 += j->ncb) { /* the C block stays in L2 over the K blocks */
        const int64_t g1 = g0 + j->ncb < c1 ? g0 + j->ncb : c1;
        for (int64_t k0 = 0; k0 < K; k0 += j->kc) {
            const int64_t kc = K - k0 < j->kc ? K - k0 : j->kc;
            const bool load = k0 > 0;
            for (int64_t n = g0; n < g1; n += NR) {
                const int nr = g1 - n < NR ? (int)(g1 - n) : NR;
                pack_b(DT, j->B, j->ldb, n, nr, k0, kc, Bp);
                for (int64_t i = 0; i < j->mc; i += MR) {
                    const int mr = j->mc - i < MR ? (int)(j->mc - i) : MR;
                    const float *a = j->Ap + i * K + k0 * MR; /* panel i / 6 */
                    float *c = j->C + i * j->ldc + n;
                    if (mr == MR && nr == NR)
                        micro_6x16(kc, a, Bp, c, j->ldc, load);
                    else
                        micro_edge(mr, nr, kc, a, Bp, c, j->ldc, load);
                }
            }
        }
    }
}

TXC_AVX2 static void cols_task(void *ctx, int64_t t)
{
    const packed_job *j = ctx;
    const int64_t c0 = t * j->chunk, c1 = c0 + j->chunk < j->N ? c0 + j->chunk : j->N;
    if (c0 >= c1)
        return;
    if (j->bdt == TXC_F32)
        cols_dt(TXC_F32, j, c0, c1);
    else if (j->bdt == TXC_BF16)
        cols_dt(TXC_BF16, j, c0, c1);
    else
        cols_dt(TXC_F16, j, c0, c1);
}

TXC_AVX2 static void pack_a_avx2(int64_t mc, int64_t K, const float *A, int64_t lda, float *P)
{
    pack_a(mc, K, A, lda, P);
}

/* Below this many multiply-adds the columns run on the calling thread (as
 * linalg.c's PAR_MIN_MACS). */
#define PACKED_PAR_MIN_MACS (64 * 1024)
/* Column chunks per thread (taken on demand). */
#define PACKED_CHUNKS 4

static bool gemm_packed(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const void *B, txc_dtype bdt,
                        int64_t ldb, float *C, int64_t ldc)
{
    /* M blocks of at most MC_MAX rows, as even as multiples of 6 allow. */
    const int64_t nmb = (M + MC_MAX - 1) / MC_MAX;
    const int64_t mcb = ((M + nmb - 1) / nmb + MR - 1) / MR * MR;
    /* K blocks of at most KC_MAX, as even as possible. */
    const int64_t nkb = (K + KC_MAX - 1) / KC_MAX;
    const int64_t kc = (K + nkb - 1) / nkb;
    if ((uint64_t)mcb * (uint64_t)K > SIZE_MAX / sizeof(float))
        return false;
    float *Ap = txc_scratch((size_t)mcb * (size_t)K * sizeof(float), TXC_SCRATCH_GEMM_PACK);
    if (!Ap)
        return false;
    /* Column blocks whose C (mcb x ncb floats) takes a quarter of L2. */
    size_t l2 = txc_cpu_caches_get()->l2_bytes;
    if (l2 < ((size_t)128 << 10) || l2 > ((size_t)8 << 20))
        l2 = (size_t)512 << 10;
    int64_t ncb = (int64_t)(l2 / 4 / ((size_t)mcb * sizeof(float))) / NR * NR;
    if (ncb < NR)
        ncb = NR;
    const int threads = txc_threads_get();
    for (int64_t m0 = 0; m0 < M; m0 += mcb) {
        const int64_t mc = M - m0 < mcb ? M - m0 : mcb;
        pack_a_avx2(mc, K, A + m0 * lda, lda, Ap);
        packed_job j = {mc, N, K, kc, ncb, ldb, ldc, N, Ap, B, bdt, C + m0 * ldc};
        if (threads > 1 && (double)mc * (double)N * (double)K >= PACKED_PAR_MIN_MACS && N > NR) {
            int64_t chunk = (N + threads * PACKED_CHUNKS - 1) / (threads * PACKED_CHUNKS);
            j.chunk = (chunk + NR - 1) / NR * NR;
            txc_parallel_for_dynamic((N + j.chunk - 1) / j.chunk, cols_task, &j);
        } else {
            cols_task(&j, 0);
        }
    }
    return true;
}
#endif

bool txc_kern_gemm_nt_avx2_packed(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const void *B,
                                  txc_dtype bdt, int64_t ldb, float *C, int64_t ldc)
{
#if TXC_HAVE_X86
    if (M <= 0 || N <= 0 || K <= 0 || txc_kern_simd_level() < 1 ||
        (bdt != TXC_F32 && bdt != TXC_BF16 && bdt != TXC_F16))
        return false;
    return gemm_packed(M, N, K, A, lda, B, bdt, ldb, C, ldc);
#else
    (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)bdt, (void)ldb, (void)C, (void)ldc;
    return false;
#endif
}
