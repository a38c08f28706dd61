/* The multi-row GEMV: C = A·Bᵀ for a few rows of A (a batched decode
 * step, a short prompt chunk) with every row's bits those of the one-row
 * GEMV, and B read from memory once for all rows. See kernels.h
 * ("row invariance").
 *
 * AVX2 (the one-row path is linalg.c's nt_avx2 in 1 x 4 / 1 x 1 tiles): per
 * element C[i,j], an 8-lane float32 accumulator over k in steps of 8
 * (_mm256_fmadd_ps, k ascending), a scalar tail over the last K % 8 k
 * (separate multiply and add: C11 without FP contraction), then the
 * horizontal sum of the 4-column tiles (hsum8x4: ((a0+a1)+(a2+a3)) +
 * ((a4+a5)+(a6+a7))) for the columns below N - N % 4 and of the 1-column
 * tiles (hsum8: ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7))) for the last N % 4,
 * plus the tail. Here the same per-element arithmetic (ops/avx2_dot.h's
 * avx2_dot_tile, which the one-row kernel runs too) runs in 4 x 2 tiles
 * (4 rows of A, 2 rows of B: 8 accumulators, 2 B vectors, 1 A vector fit
 * the 16 registers), each pair of B rows converted once per 4 rows of A and
 * re-read from L1 by the next 4; with 8..15 rows in 8 x 1 tiles (one B
 * vector converted once for 8 rows: 20% less CPU time than 4 x 2 at 8 rows
 * on qwen2.5-0.5b's up_proj; at 16 rows, where A no longer fits L1, 4 x 2
 * is faster). The reduction picks the formula by the column's tile in the
 * one-row kernel, so the bits are equal.
 *
 * Where A does not fit L1 (4 or more rows and M * K * 4 bytes over
 * ROWS_KB_A_BYTES: qwen2.5-0.5b's down_proj at 8 rows, K = 4864, A 152 KiB)
 * the per-element accumulators are kept across blocks of k instead (rows_kb
 * below): A in blocks of about ROWS_KB_BLOCK_BYTES (M rows x kc k) read
 * from L1 by every column of a block of nc columns, 4 x 3 tiles (12
 * accumulators, 3 B vectors, 4 A vectors loaded once each), each tile's 8
 * lanes stored to a per-thread buffer between blocks of k and loaded again:
 * the same fma chain per lane in k order, so the same bits. The next
 * block of columns of B is prefetched while one is computed.
 *
 * AVX-512 (SIMD levels 2 and 3; the one-row path is linalg.c's
 * gemv_tile512): the same per-element arithmetic as gemv_tile512 (two
 * 16-lane accumulators over k in steps of 32, a masked tail of 16, the
 * reduction of the column's tile: see r512_tile below) in 4 x 2 tiles, 8 x 1
 * from 8 rows, B read once for all rows; where A passes ROWS512_KB_A_BYTES
 * (down_proj's K = 4864 at 8 rows), 4 x 2 tiles over blocks of k with each
 * element's two accumulators kept in a buffer between blocks (r512_kb_tile:
 * the same chain). The portable build: the one-row
 * GEMV per row (its bits by construction; B read once per row).
 *
 * Threads: columns in chunks of 16 (rows_kb: of nc; dynamic); a column's
 * arithmetic does not depend on its chunk. */
#include "ops/avx2_dot.h"
#include "ops/kernels.h"
#include "txc/threads.h"

#include <string.h>

#if TXC_HAVE_X86
/* Lane 0 of hsum8x4(v, ., ., .) (ops/avx2_dot.h): ((v0+v1)+(v2+v3)) + ((v4+v5)+(v6+v7)). */
TXC_INLINE_AVX2 float rows_hsum8x4(__m256 v)
{
    __m256 ab = _mm256_hadd_ps(v, v);
    __m256 abcd = _mm256_hadd_ps(ab, ab);
    return _mm_cvtss_f32(_mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1)));
}

/* Prefetch distance of the weight stream, bytes ahead of the read (the
 * first 4 rows of A only: the others read B from L1). */
#ifndef ROWS_PREFETCH
#define ROWS_PREFETCH 4096
#endif

/* MR rows of A x NR rows of B (MR <= 8, NR <= 2, MR * NR <= 8; constants after inlining);
 * columns j0.. of the whole C, those >= n4 reduced as 1-column tiles. */
TXC_INLINE_AVX2 void rows_tile(const int PF, const int MR, const int NR, const int DT, int64_t K, const float *A, int64_t lda,
                               const char *B, int64_t ldb, float *C, int64_t ldc, int64_t j0, int64_t n4)
{
    const size_t es = DT == TXC_F32 ? 4 : 2;
    const char *b[2];
    __m256 acc[16];
    float tail[16];
    for (int j = 0; j < NR; j++)
        b[j] = B + (size_t)(j * ldb) * es;
    avx2_dot_tile(MR, NR, DT, PF, ROWS_PREFETCH, K, A, lda, b, acc, tail);
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++)
            C[i * ldc + j] =
                (j0 + j < n4 ? rows_hsum8x4(acc[i * NR + j]) : hsum8(acc[i * NR + j])) + tail[i * NR + j];
}

#define ROWS_TILE_M(NR, DT)                                                                                   \
    do {                                                                                                      \
        int64_t i = 0;                                                                                        \
        for (; NR == 1 && M >= 8 && M < 16 && i + 8 <= M; i += 8)                                             \
            rows_tile(i == 0, 8, NR, DT, K, A + i * lda, lda, b, ldb, C + i * ldc + j, ldc, j, n4);           \
        for (; i + 4 <= M; i += 4)                                                                            \
            rows_tile(i == 0, 4, NR, DT, K, A + i * lda, lda, b, ldb, C + i * ldc + j, ldc, j, n4);                   \
        switch (M - i) {                                                                                      \
        case 3: rows_tile(i == 0, 3, NR, DT, K, A + i * lda, lda, b, ldb, C + i * ldc + j, ldc, j, n4); break;        \
        case 2: rows_tile(i == 0, 2, NR, DT, K, A + i * lda, lda, b, ldb, C + i * ldc + j, ldc, j, n4); break;        \
        case 1: rows_tile(i == 0, 1, NR, DT, K, A + i * lda, lda, b, ldb, C + i * ldc + j, ldc, j, n4); break;        \
        default: break;                                                                                       \
        }                                                                                                     \
    } while (0)

/* Columns [c0, c1) of C (B rows c0.. of the whole B). */
TXC_INLINE_AVX2 void rows_cols(const int DT, int64_t M, int64_t c0, int64_t c1, int64_t n4, int64_t K, const float *A,
                               int64_t lda, const char *B, int64_t ldb, float *C, int64_t ldc)
{
    const size_t es = DT == TXC_F32 ? 4 : 2;
    int64_t j = c0;
    for (; M >= 8 && M < 16 && j < c1; j++) { /* 8..15 rows: 8 x 1 tiles (one B vector, 8 accumulators) */
        const char *b = B + (size_t)(j * ldb) * es;
        ROWS_TILE_M(1, DT);
    }
    for (; j + 2 <= c1; j += 2) {
        const char *b = B + (size_t)(j * ldb) * es;
        ROWS_TILE_M(2, DT);
    }
    for (; j < c1; j++) {
        const char *b = B + (size_t)(j * ldb) * es;
        ROWS_TILE_M(1, DT);
    }
}

TXC_AVX2 static void rows_avx2(txc_dtype dt, int64_t M, int64_t c0, int64_t c1, int64_t n4, int64_t K, const float *A,
                               int64_t lda, const void *B, int64_t ldb, float *C, int64_t ldc)
{
    if (dt == TXC_F32)
        rows_cols(TXC_F32, M, c0, c1, n4, K, A, lda, B, ldb, C, ldc);
    else if (dt == TXC_BF16)
        rows_cols(TXC_BF16, M, c0, c1, n4, K, A, lda, B, ldb, C, ldc);
    else
        rows_cols(TXC_F16, M, c0, c1, n4, K, A, lda, B, ldb, C, ldc);
}

/* ---- A blocked by k: accumulators kept across blocks (see the top) ---- */

/* A over this many bytes (and 4 or more rows) takes rows_kb. */
#define ROWS_KB_A_BYTES (32 * 1024)
/* A's block: about this many bytes (M rows x kc k, kc a multiple of 8, at least 64). */
#define ROWS_KB_BLOCK_BYTES (10 * 1024)
/* B's block of nc columns: about this many bytes (nc a multiple of 3 in [3, ROWS_KB_NC_MAX]). */
#define ROWS_KB_B_BYTES (96 * 1024)
#define ROWS_KB_NC_MAX 48

/* MR x NR (MR <= 4, NR <= 3; constants after inlining) over k in [k0, k1)
 * (multiples of 8): element (i, j)'s 8 lanes at acc + (j * M + i) * 8,
 * from zero when first. */
TXC_INLINE_AVX2 void kb_tile(const int MR, const int NR, const int DT, bool first, int64_t k0, int64_t k1,
                             const float *A, int64_t lda, const char *B, int64_t ldb, float *acc, int64_t M)
{
    const size_t es = DT == TXC_F32 ? 4 : 2;
    __m256 c[12];
    const char *b[3];
    for (int j = 0; j < NR; j++)
        b[j] = B + (size_t)(j * ldb) * es;
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++)
            c[i * NR + j] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + (j * M + i) * 8);
    for (int64_t k = k0; k < k1; k += 8) {
        __m256 bv[3];
        for (int j = 0; j < NR; j++)
            bv[j] = ld8(b[j] + (size_t)k * es, DT);
        for (int i = 0; i < MR; i++) {
            __m256 a = _mm256_loadu_ps(A + i * lda + k);
            __asm__("" : "+x"(a)); /* one load of A for the NR columns (not a memory operand of each fma) */
            for (int j = 0; j < NR; j++)
                c[i * NR + j] = _mm256_fmadd_ps(a, bv[j], c[i * NR + j]);
        }
    }
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++)
            _mm256_storeu_ps(acc + (j * M + i) * 8, c[i * NR + j]);
}

/* The M rows in tiles of 4, then the 1..3 left: TILE is kb_tile (AVX2, W = 8
 * floats a lane group) or r512_kb_tile (AVX-512, W = 32: its two 16-lane sums). */
#define KB_TILE_ROWS(TILE, W, NR, DT)                                                                         \
    do {                                                                                                      \
        int64_t i = 0;                                                                                        \
        for (; i + 4 <= M; i += 4)                                                                            \
            TILE(4, NR, DT, first, k0, k1, A + i * lda, lda, bj, ldb, accj + i * (W), M);                     \
        switch (M - i) {                                                                                      \
        case 3: TILE(3, NR, DT, first, k0, k1, A + i * lda, lda, bj, ldb, accj + i * (W), M); break;          \
        case 2: TILE(2, NR, DT, first, k0, k1, A + i * lda, lda, bj, ldb, accj + i * (W), M); break;          \
        case 1: TILE(1, NR, DT, first, k0, k1, A + i * lda, lda, bj, ldb, accj + i * (W), M); break;          \
        default: break;                                                                                       \
        }                                                                                                     \
    } while (0)
#define KB_TILE_M(NR, DT) KB_TILE_ROWS(kb_tile, 8, NR, DT)

/* Columns [c0, c1) in blocks of nc, A in blocks of kc k; acc: nc * M * 8 floats. */
TXC_INLINE_AVX2 void kb_cols(const int DT, int64_t M, int64_t c0, int64_t c1, int64_t n4, int64_t K, const float *A,
                             int64_t lda, const char *B, int64_t ldb, float *C, int64_t ldc, float *acc, int64_t nc,
                             int64_t kc)
{
    const size_t es = DT == TXC_F32 ? 4 : 2;
    const int64_t K8 = K - K % 8, row_bytes = K * (int64_t)es;
    for (int64_t jb = c0; jb < c1; jb += nc) {
        const int64_t je = jb + nc < c1 ? jb + nc : c1;
        /* the next block's rows of B, prefetched a few lines after each tile */
        const char *pf_row = B + (size_t)(je * ldb) * es;
        int64_t pf_off = 0, pf_rows = je + nc < c1 ? nc : c1 - je;
        const int64_t tiles = ((K8 + kc - 1) / kc) * ((je - jb + 2) / 3);
        const int64_t per = tiles ? (pf_rows * ((row_bytes + 63) / 64) + tiles - 1) / tiles : 0;
        for (int64_t k0 = 0; k0 < K8; k0 += kc) {
            const int64_t k1 = k0 + kc < K8 ? k0 + kc : K8;
            const bool first = k0 == 0;
            for (int64_t j = jb; j < je; j += 3) {
                const char *bj = B + (size_t)(j * ldb) * es;
                float *accj = acc + (j - jb) * M * 8;
                switch (je - j) {
                case 1: KB_TILE_M(1, DT); break;
                case 2: KB_TILE_M(2, DT); break;
                default: KB_TILE_M(3, DT); break;
                }
                for (int64_t p = 0; p < per && pf_rows > 0; p++) {
                    _mm_prefetch(pf_row + pf_off, _MM_HINT_T0);
                    pf_off += 64;
                    if (pf_off >= row_bytes) {
                        pf_off = 0;
                        pf_row += (size_t)ldb * es;
                        pf_rows--;
                    }
                }
            }
        }
        /* the one-row kernel's reduction of each element, plus its scalar tail */
        for (int64_t j = jb; j < je; j++) {
            const char *bj = B + (size_t)(j * ldb) * es;
            for (int64_t i = 0; i < M; i++) {
                __m256 v = K8 ? _mm256_loadu_ps(acc + ((j - jb) * M + i) * 8) : _mm256_setzero_ps();
                float t = 0.0f;
                for (int64_t k = K8; k < K; k++)
                    t += A[i * lda + k] * ld1(bj + (size_t)k * es, DT);
                C[i * ldc + j] = (j < n4 ? rows_hsum8x4(v) : hsum8(v)) + t;
            }
        }
    }
}

TXC_AVX2 static void kb_avx2(txc_dtype dt, int64_t M, int64_t c0, int64_t c1, int64_t n4, int64_t K, const float *A,
                             int64_t lda, const void *B, int64_t ldb, float *C, int64_t ldc, float *acc, int64_t nc,
                             int64_t kc)
{
    if (dt == TXC_F32)
        kb_cols(TXC_F32, M, c0, c1, n4, K, A, lda, B, ldb, C, ldc, acc, nc, kc);
    else if (dt == TXC_BF16)
        kb_cols(TXC_BF16, M, c0, c1, n4, K, A, lda, B, ldb, C, ldc, acc, nc, kc);
    else
        kb_cols(TXC_F16, M, c0, c1, n4, K, A, lda, B, ldb, C, ldc, acc, nc, kc);
}

/* ---- AVX-512: linalg.c's one-row gemv_tile512 order, in MR x NR tiles ----
 * Per element C[i,j]: two 16-lane accumulators, s0 over k in [32t, 32t + 16)
 * and s1 over [32t + 16, 32t + 32) for k below K - K % 32 (_mm512_fmadd_ps, k
 * ascending), then the rest in steps of 16 into s0 (A and B loaded under the
 * mask of the lanes left, the others zero: fma(0, 0, s0)); then s0 + s1,
 * reduced as fold512 then hsum8x4's lane for the columns below N - N % 4
 * (the one-row kernel's 4-column tiles) and _mm512_reduce_add_ps for the last
 * N % 4. The tile reads its NR rows of B side by side (rows of up to a few
 * thousand elements: as fast as in turn, linalg.c's note on gemv_tile512). */

/* Prefetch distance of the weight stream into L2 (as linalg.c's GEMV_PREFETCH). */
#ifndef ROWS512_PREFETCH
#define ROWS512_PREFETCH 8192
#endif
#ifndef ROWS512_HINT
#define ROWS512_HINT _MM_HINT_T1
#endif

/* MR rows of A x NR rows of B (2 * MR * NR accumulators <= 16; constants
 * after inlining); columns j0.. of the whole C, those >= n4 reduced as the
 * one-row kernel's 1-column tiles. PF: prefetch B (the first rows of A). */
TXC_INLINE_AVX512 void r512_tile(const int PF, const int MR, const int NR, const int DT, int64_t K, const float *A,
                                 int64_t lda, const char *B, int64_t ldb, float *C, int64_t ldc, int64_t j0,
                                 int64_t n4)
{
    const size_t es = DT == TXC_F32 ? 4 : 2;
    const char *b[2];
    __m512 s0[8], s1[8];
    for (int j = 0; j < NR; j++)
        b[j] = B + (size_t)(j * ldb) * es;
    for (int t = 0; t < MR * NR; t++)
        s0[t] = s1[t] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) {
        __m512 b0[2], b1[2];
        for (int j = 0; j < NR; j++) {
            const char *p = b[j] + (size_t)k * es;
            if (PF)
                for (size_t o = 0; o < 32 * es; o += 64)
                    _mm_prefetch(p + ROWS512_PREFETCH + o, ROWS512_HINT);
            b0[j] = ld16(p, DT);
            b1[j] = ld16(p + 16 * es, DT);
        }
        for (int i = 0; i < MR; i++) {
            __m512 a0 = _mm512_loadu_ps(A + i * lda + k), a1 = _mm512_loadu_ps(A + i * lda + k + 16);
            for (int j = 0; j < NR; j++) {
                s0[i * NR + j] = _mm512_fmadd_ps(a0, b0[j], s0[i * NR + j]);
                s1[i * NR + j] = _mm512_fmadd_ps(a1, b1[j], s1[i * NR + j]);
            }
        }
    }
    for (; k < K; k += 16) {
        __mmask16 m = K - k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (K - k)) - 1u);
        __m512 bv[2];
        for (int j = 0; j < NR; j++)
            bv[j] = ld16m(b[j] + (size_t)k * es, DT, m);
        for (int i = 0; i < MR; i++) {
            __m512 a = _mm512_maskz_loadu_ps(m, A + i * lda + k);
            for (int j = 0; j < NR; j++)
                s0[i * NR + j] = _mm512_fmadd_ps(a, bv[j], s0[i * NR + j]);
        }
    }
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) {
            __m512 v = _mm512_add_ps(s0[i * NR + j], s1[i * NR + j]);
            C[i * ldc + j] = j0 + j < n4 ? rows_hsum8x4(fold512(v)) : _mm512_reduce_add_ps(v);
        }
}

#define R512_TILE_M(NR, DT)                                                                                   \
    do {                                                                                                      \
        int64_t i = 0;                                                                                        \
        for (; NR == 1 && i + 8 <= M; i += 8)                                                                 \
            r512_tile(i == 0, 8, NR, DT, K, A + i * lda, lda, b, ldb, C + i * ldc + j, ldc, j, n4);           \
        for (; i + 4 <= M; i += 4)                                                                            \
            r512_tile(i == 0, 4, NR, DT, K, A + i * lda, lda, b, ldb, C + i * ldc + j, ldc, j, n4);           \
        switch (M - i) {                                                                                      \
        case 3: r512_tile(i == 0, 3, NR, DT, K, A + i * lda, lda, b, ldb, C + i * ldc + j, ldc, j, n4); break; \
        case 2: r512_tile(i == 0, 2, NR, DT, K, A + i * lda, lda, b, ldb, C + i * ldc + j, ldc, j, n4); break; \
        case 1: r512_tile(i == 0, 1, NR, DT, K, A + i * lda, lda, b, ldb, C + i * ldc + j, ldc, j, n4); break; \
        default: break;                                                                                       \
        }                                                                                                     \
    } while (0)

#ifndef R512_NR1_MIN
#define R512_NR1_MIN 8
#endif

TXC_INLINE_AVX512 void r512_cols(const int DT, int64_t M, int64_t c0, int64_t c1, int64_t n4, int64_t K,
                                 const float *A, int64_t lda, const char *B, int64_t ldb, float *C, int64_t ldc)
{
    const size_t es = DT == TXC_F32 ? 4 : 2;
    int64_t j = c0;
    for (; M >= R512_NR1_MIN && j < c1; j++) {
        const char *b = B + (size_t)(j * ldb) * es;
        R512_TILE_M(1, DT);
    }
    for (; j + 2 <= c1; j += 2) {
        const char *b = B + (size_t)(j * ldb) * es;
        R512_TILE_M(2, DT);
    }
    for (; j < c1; j++) {
        const char *b = B + (size_t)(j * ldb) * es;
        R512_TILE_M(1, DT);
    }
}

/* A over this many bytes (and 4 or more rows) takes the k-blocked AVX-512
 * tiles below (qwen2.5-0.5b's down_proj, K = 4864, from 4 rows; K = 896
 * keeps the register tiles up to 16 rows). */
#ifndef ROWS512_KB_A_BYTES
#define ROWS512_KB_A_BYTES (64 * 1024)
#endif
/* Its block of A (M rows x kc k, kc a multiple of 32) and of B's columns, bytes. */
#ifndef ROWS512_KB_BLOCK_BYTES
#define ROWS512_KB_BLOCK_BYTES (10 * 1024)
#endif
#ifndef ROWS512_KB_B_BYTES
#define ROWS512_KB_B_BYTES (96 * 1024)
#endif

/* k-blocked AVX-512 (as rows_kb for AVX2): MR x NR (MR <= 4, NR <= 2) over k
 * in [k0, k1) (multiples of 32, below K - K % 32): element (i, j)'s s0 and s1
 * at acc + (j * M + i) * 32 (16 floats each), from zero when first: the
 * same fma chain per lane in k order as r512_tile. */
TXC_INLINE_AVX512 void r512_kb_tile(const int MR, const int NR, const int DT, bool first, int64_t k0, int64_t k1,
                                    const float *A, int64_t lda, const char *B, int64_t ldb, float *acc, int64_t M)
{
    const size_t es = DT == TXC_F32 ? 4 : 2;
    const char *b[2];
    __m512 s0[8], s1[8];
    for (int j = 0; j < NR; j++)
        b[j] = B + (size_t)(j * ldb) * es;
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) {
            float *e = acc + (j * M + i) * 32;
            s0[i * NR + j] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(e);
            s1[i * NR + j] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(e + 16);
        }
    for (int64_t k = k0; k < k1; k += 32) {
        __m512 b0[2], b1[2];
        for (int j = 0; j < NR; j++) {
            const char *p = b[j] + (size_t)k * es;
            b0[j] = ld16(p, DT);
            b1[j] = ld16(p + 16 * es, DT);
        }
        for (int i = 0; i < MR; i++) {
            __m512 a0 = _mm512_loadu_ps(A + i * lda + k), a1 = _mm512_loadu_ps(A + i * lda + k + 16);
            for (int j = 0; j < NR; j++) {
                s0[i * NR + j] = _mm512_fmadd_ps(a0, b0[j], s0[i * NR + j]);
                s1[i * NR + j] = _mm512_fmadd_ps(a1, b1[j], s1[i * NR + j]);
            }
        }
    }
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) {
            float *e = acc + (j * M + i) * 32;
            _mm512_storeu_ps(e, s0[i * NR + j]);
            _mm512_storeu_ps(e + 16, s1[i * NR + j]);
        }
}

#define R512_KB_TILE_M(NR, DT) KB_TILE_ROWS(r512_kb_tile, 32, NR, DT)

/* Columns [c0, c1) in blocks of nc, A in blocks of kc k (multiples of 32);
 * acc: nc * M * 32 floats. Then each element's tail (r512_tile's masked steps
 * of 16 into s0) and reduction. */
TXC_INLINE_AVX512 void r512_kb_cols(const int DT, int64_t M, int64_t c0, int64_t c1, int64_t n4, int64_t K,
                                    const float *A, int64_t lda, const char *B, int64_t ldb, float *C, int64_t ldc,
                                    float *acc, int64_t nc, int64_t kc)
{
    const size_t es = DT == TXC_F32 ? 4 : 2;
    const int64_t K32 = K - K % 32;
    for (int64_t jb = c0; jb < c1; jb += nc) {
        const int64_t je = jb + nc < c1 ? jb + nc : c1;
        for (int64_t k0 = 0; k0 < K32; k0 += kc) {
            const int64_t k1 = k0 + kc < K32 ? k0 + kc : K32;
            const bool first = k0 == 0;
            for (int64_t j = jb; j < je; j += 2) {
                const char *bj = B + (size_t)(j * ldb) * es;
                float *accj = acc + (j - jb) * M * 32;
                if (je - j == 1)
                    R512_KB_TILE_M(1, DT);
                else
                    R512_KB_TILE_M(2, DT);
            }
        }
        for (int64_t j = jb; j < je; j++) {
            const char *bj = B + (size_t)(j * ldb) * es;
            for (int64_t i = 0; i < M; i++) {
                const float *e = acc + ((j - jb) * M + i) * 32;
                __m512 s0 = K32 ? _mm512_loadu_ps(e) : _mm512_setzero_ps();
                __m512 s1 = K32 ? _mm512_loadu_ps(e + 16) : _mm512_setzero_ps();
                for (int64_t k = K32; k < K; k += 16) {
                    __mmask16 m = K - k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (K - k)) - 1u);
                    s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, A + i * lda + k), ld16m(bj + (size_t)k * es, DT, m),
                                         s0);
                }
                __m512 v = _mm512_add_ps(s0, s1);
                C[i * ldc + j] = j < n4 ? rows_hsum8x4(fold512(v)) : _mm512_reduce_add_ps(v);
            }
        }
    }
}

TXC_AVX512 static void kb_avx512(txc_dtype dt, int64_t M, int64_t c0, int64_t c1, int64_t n4, int64_t K,
                                 const float *A, int64_t lda, const void *B, int64_t ldb, float *C, int64_t ldc,
                                 float *acc, int64_t nc, int64_t kc)
{
    if (dt == TXC_F32)
        r512_kb_cols(TXC_F32, M, c0, c1, n4, K, A, lda, B, ldb, C, ldc, acc, nc, kc);
    else if (dt == TXC_BF16)
        r512_kb_cols(TXC_BF16, M, c0, c1, n4, K, A, lda, B, ldb, C, ldc, acc, nc, kc);
    else
        r512_kb_cols(TXC_F16, M, c0, c1, n4, K, A, lda, B, ldb, C, ldc, acc, nc, kc);
}

TXC_AVX512 static void rows_avx512(txc_dtype dt, int64_t M, int64_t c0, int64_t c1, int64_t n4, int64_t K,
                                   const float *A, int64_t lda, const void *B, int64_t ldb, float *C, int64_t ldc)
{
    if (dt == TXC_F32)
        r512_cols(TXC_F32, M, c0, c1, n4, K, A, lda, B, ldb, C, ldc);
    else if (dt == TXC_BF16)
        r512_cols(TXC_BF16, M, c0, c1, n4, K, A, lda, B, ldb, C, ldc);
    else
        r512_cols(TXC_F16, M, c0, c1, n4, K, A, lda, B, ldb, C, ldc);
}

typedef struct rows_job {
    int64_t M, N, K, lda, ldb, ldc, chunk;
    int64_t nc, kc; /* rows_kb's blocks; 0: the 4 x 2 / 8 x 1 tiles */
    bool avx512;    /* the AVX-512 tiles (the one-row GEMV's order at SIMD level 2 and 3) */
    const float *A;
    const void *B;
    txc_dtype bdt;
    float *C;
} rows_job;

static void rows_task(void *ctx, int64_t t)
{
    const rows_job *j = ctx;
    int64_t c0 = t * j->chunk, c1 = c0 + j->chunk < j->N ? c0 + j->chunk : j->N;
    if (c0 >= c1)
        return;
    if (j->avx512) {
        float *acc = j->nc ? txc_scratch((size_t)(j->nc * j->M * 32) * sizeof(float), TXC_SCRATCH_GEMM_PACK) : NULL;
        if (acc)
            kb_avx512(j->bdt, j->M, c0, c1, j->N - j->N % 4, j->K, j->A, j->lda, j->B, j->ldb, j->C, j->ldc, acc,
                      j->nc, j->kc);
        else /* (no memory for the accumulators, or A within ROWS512_KB_A_BYTES: the register tiles) */
            rows_avx512(j->bdt, j->M, c0, c1, j->N - j->N % 4, j->K, j->A, j->lda, j->B, j->ldb, j->C, j->ldc);
        return;
    }
    float *acc = j->nc ? txc_scratch((size_t)(j->nc * j->M * 8) * sizeof(float), TXC_SCRATCH_GEMM_PACK) : NULL;
    if (acc)
        kb_avx2(j->bdt, j->M, c0, c1, j->N - j->N % 4, j->K, j->A, j->lda, j->B, j->ldb, j->C, j->ldc, acc, j->nc,
                j->kc);
    else /* (no memory for the accumulators: the tiles that keep them in registers) */
        rows_avx2(j->bdt, j->M, c0, c1, j->N - j->N % 4, j->K, j->A, j->lda, j->B, j->ldb, j->C, j->ldc);
}
#endif

/* Below this many multiply-adds the rows run on the calling thread (as
 * linalg.c's PAR_MIN_MACS). */
#define ROWS_PAR_MIN_MACS (64 * 1024)
/* Column chunks per thread (taken on demand, as the one-row GEMV's). */
#define ROWS_CHUNKS 8

void txc_kern_gemv_rows(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const void *B, txc_dtype bdt,
                        int64_t ldb, float *C, int64_t ldc)
{
    if (M <= 0 || N <= 0)
        return;
#if TXC_HAVE_X86
    const int simd = txc_kern_simd_level();
    if (simd >= 1 && K > 0) {
        rows_job j = {M, N, K, lda, ldb, ldc, N, 0, 0, simd >= 2, A, B, bdt, C};
        if (!j.avx512 && M >= 4 && (double)M * (double)K * sizeof(float) > ROWS_KB_A_BYTES) {
            const int64_t es = bdt == TXC_F32 ? 4 : 2;
            j.kc = ROWS_KB_BLOCK_BYTES / (M * (int64_t)sizeof(float)) / 8 * 8;
            j.kc = j.kc < 64 ? 64 : j.kc;
            j.nc = ROWS_KB_B_BYTES / (K * es) / 3 * 3;
            j.nc = j.nc < 3 ? 3 : j.nc > ROWS_KB_NC_MAX ? ROWS_KB_NC_MAX : j.nc;
        }
        if (j.avx512 && M >= 4 && (double)M * (double)K * sizeof(float) > ROWS512_KB_A_BYTES && K >= 32) {
            const int64_t es = bdt == TXC_F32 ? 4 : 2;
            j.kc = ROWS512_KB_BLOCK_BYTES / (M * (int64_t)sizeof(float)) / 32 * 32;
            j.kc = j.kc < 64 ? 64 : j.kc;
            j.nc = ROWS512_KB_B_BYTES / (K * es) / 2 * 2;
            j.nc = j.nc < 2 ? 2 : j.nc > ROWS_KB_NC_MAX ? ROWS_KB_NC_MAX : j.nc;
        }
        int threads = txc_threads_get();
        if (threads > 1 && (double)M * (double)N * (double)K >= ROWS_PAR_MIN_MACS && N >= 32) {
            int64_t chunk = (N + threads * ROWS_CHUNKS - 1) / (threads * ROWS_CHUNKS), align = j.nc ? j.nc : 16;
            j.chunk = (chunk + align - 1) / align * align;
            txc_parallel_for_dynamic((N + j.chunk - 1) / j.chunk, rows_task, &j);
        } else {
            rows_task(&j, 0);
        }
        return;
    }
#endif
    for (int64_t i = 0; i < M; i++)
        txc_kern_gemm_nt(1, N, K, A + i * lda, lda, B, bdt, ldb, C + i * ldc, ldc);
}
