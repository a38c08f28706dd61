/*
 * ops/avx2_dot.h — the AVX2 dot-product tile that linalg.c's GEMV / small-M
 * tiles (nt_tile) and gemv_batch.c's multi-row tiles (rows_tile) share, so
 * that a row of a batch has the bits of the row alone by construction (the
 * row invariance of ops/kernels.h), and the loads and horizontal sums they
 * (and linalg.c's other AVX2 and AVX-512 tiles) use. Not a public header;
 * include after ops/kernels.h, inside #if TXC_HAVE_X86.
 *
 * Per element C[i,j] of a tile: an 8-lane float32 accumulator over k in
 * steps of 8 (_mm256_fmadd_ps, k ascending; lane l sums k ≡ l mod 8), and a
 * scalar tail over the last K % 8 k (multiply, then add: the build is C11
 * without FP contraction), reduced by the caller with hsum8x4 or hsum8 plus
 * the tail.
 */
#ifndef TXC_OPS_AVX2_DOT_H
#define TXC_OPS_AVX2_DOT_H

#include <string.h>

#include "ops/kernels.h"

#if TXC_HAVE_X86
/* 8 elements of dt (float32, bfloat16, float16) at p as float32 (exact). */
TXC_INLINE_AVX2 __m256 ld8(const char *p, const int dt)
{
    if (dt == TXC_F32)
        return _mm256_loadu_ps((const float *)p);
    if (dt == TXC_BF16)
        return _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

/* One element of dt at p as float32. */
TXC_INLINE_AVX2 float ld1(const char *p, const int dt)
{
    uint16_t h;
    if (dt == TXC_F32) {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    memcpy(&h, p, 2);
    return dt == TXC_BF16 ? txc_bf16_to_f32(h) : _cvtsh_ss(h);
}

/* The lanes' sum ((v0+v4)+(v2+v6)) + ((v1+v5)+(v3+v7)). */
TXC_INLINE_AVX2 float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The 4 horizontal sums of a, b, c, d, each ((v0+v1)+(v2+v3)) + ((v4+v5)+(v6+v7)). */
TXC_INLINE_AVX2 __m128 hsum8x4(__m256 a, __m256 b, __m256 c, __m256 d)
{
    __m256 ab = _mm256_hadd_ps(a, b), cd = _mm256_hadd_ps(c, d);
    __m256 abcd = _mm256_hadd_ps(ab, cd);
    return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

/* 16 elements of dt at p (only the lanes in `m` are read; the others are 0). */
TXC_INLINE_AVX512 __m512 ld16m(const char *p, const int dt, __mmask16 m)
{
    if (dt == TXC_F32)
        return _mm512_maskz_loadu_ps(m, (const float *)p);
    __m256i h = _mm256_maskz_loadu_epi16(m, p);
    if (dt == TXC_BF16)
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
}

TXC_INLINE_AVX512 __m512 ld16(const char *p, const int dt)
{
    if (dt == TXC_F32)
        return _mm512_loadu_ps((const float *)p);
    __m256i h = _mm256_loadu_si256((const __m256i *)p);
    if (dt == TXC_BF16)
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
}

TXC_INLINE_AVX512 __m256 fold512(__m512 v)
{
    return _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
}

/* The dot tile: MR rows of A (stride lda) x NR rows of B (b[j]; NR <= 4),
 * K elements: acc[i * NR + j] the 8 lanes over k < K - K % 8, tail[i * NR + j]
 * the scalar sum of the rest. PF: prefetch B PFDIST bytes ahead into L1.
 * MR, NR, DT, PF, PFDIST constants after inlining. */
TXC_INLINE_AVX2 void avx2_dot_tile(const int MR, const int NR, const int DT, const int PF, const int PFDIST, int64_t K,
                                   const float *A, int64_t lda, const char *const *b, __m256 *acc, float *tail)
{
    const size_t es = DT == TXC_F32 ? 4 : 2;
    for (int t = 0; t < MR * NR; t++)
        acc[t] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
        __m256 bv[4];
        for (int j = 0; j < NR; j++) {
            if (PF)
                _mm_prefetch(b[j] + (size_t)k * es + PFDIST, _MM_HINT_T0);
            bv[j] = ld8(b[j] + (size_t)k * es, DT);
        }
        for (int i = 0; i < MR; i++) {
            __m256 a = _mm256_loadu_ps(A + i * lda + k);
            for (int j = 0; j < NR; j++)
                acc[i * NR + j] = _mm256_fmadd_ps(a, bv[j], acc[i * NR + j]);
        }
    }
    for (int t = 0; t < MR * NR; t++)
        tail[t] = 0.0f;
    for (; k < K; k++)
        for (int i = 0; i < MR; i++)
            for (int j = 0; j < NR; j++)
                tail[i * NR + j] += A[i * lda + k] * ld1(b[j] + (size_t)k * es, DT);
}
#endif

#endif
