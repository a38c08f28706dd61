/* The attention scores kernel: S = Q·Kᵀ with every score's arithmetic fixed
 * by its own query row and key row alone (see kernels.h,
 * txc_kern_attn_scores), so that attention's rows do not depend on the
 * chunk they are computed in.
 *
 * AVX2 (SIMD level >= 1): per score, an 8-lane float32 accumulator over the
 * head dim in steps of 8 (_mm256_fmadd_ps, ascending; lane l sums
 * e ≡ l mod 8) and a scalar tail over the last E % 8 (multiply, then add),
 * reduced as ((a0+a1)+(a2+a3)) + ((a4+a5)+(a6+a7)) plus the tail — the
 * per-element arithmetic of ops/avx2_dot.h's tile, in 4 x 2 tiles (4 query
 * rows x 2 keys: each key vector loaded once for 4 rows), and the same
 * reduction formula for every score whatever its tile (the GEMV's tiles
 * reduce the last N % 4 columns with another formula, which is why attention
 * has a kernel of its own). Portable: a float32 multiply-add loop in e
 * order. */
#include "ops/kernels.h"
#include "ops/avx2_dot.h"

#if TXC_HAVE_X86
/* Lane 0 of hsum8x4(v, ., ., .): ((v0+v1)+(v2+v3)) + ((v4+v5)+(v6+v7)). */
TXC_INLINE_AVX2 float hsum_one(__m256 v)
{
    __m256 ab = _mm256_hadd_ps(v, v);
    __m256 abcd = _mm256_hadd_ps(ab, ab);
    return _mm_cvtss_f32(_mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1)));
}

/* MR query rows x NR keys (constants after inlining). */
TXC_INLINE_AVX2 void scores_tile(const int MR, const int NR, const int DT, int64_t E, const float *Q, int64_t ldq,
                                 const char *K, int64_t ldk, float *S, int64_t lds)
{
    const size_t es = DT == TXC_F32 ? 4 : 2;
    const char *b[2];
    __m256 acc[8];
    float tail[8], sum[8];
    for (int j = 0; j < NR; j++)
        b[j] = K + (size_t)(j * ldk) * es;
    avx2_dot_tile(MR, NR, DT, 0, 0, E, Q, ldq, b, acc, tail);
    int t = 0;
    for (; t + 4 <= MR * NR; t += 4) /* the same formula as hsum_one, lane by lane */
        _mm_storeu_ps(sum + t, hsum8x4(acc[t], acc[t + 1], acc[t + 2], acc[t + 3]));
    for (; t < MR * NR; t++)
        sum[t] = hsum_one(acc[t]);
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++)
            S[i * lds + j] = sum[i * NR + j] + tail[i * NR + j];
}

TXC_INLINE_AVX2 void scores_cols(const int NR, const int DT, int64_t M, int64_t E, const float *Q, int64_t ldq,
                                 const char *K, int64_t ldk, float *S, int64_t lds)
{
    int64_t i = 0;
    for (; i + 4 <= M; i += 4)
        scores_tile(4, NR, DT, E, Q + i * ldq, ldq, K, ldk, S + i * lds, lds);
    switch (M - i) {
    case 3: scores_tile(3, NR, DT, E, Q + i * ldq, ldq, K, ldk, S + i * lds, lds); break;
    case 2: scores_tile(2, NR, DT, E, Q + i * ldq, ldq, K, ldk, S + i * lds, lds); break;
    case 1: scores_tile(1, NR, DT, E, Q + i * ldq, ldq, K, ldk, S + i * lds, lds); break;
    default: break;
    }
}

TXC_INLINE_AVX2 void scores_dt(const int DT, int64_t M, int64_t N, int64_t E, const float *Q, int64_t ldq,
                               const char *K, int64_t ldk, float *S, int64_t lds)
{
    const size_t es = DT == TXC_F32 ? 4 : 2;
    int64_t j = 0;
    for (; j + 2 <= N; j += 2)
        scores_cols(2, DT, M, E, Q, ldq, K + (size_t)(j * ldk) * es, ldk, S + j, lds);
    if (j < N)
        scores_cols(1, DT, M, E, Q, ldq, K + (size_t)(j * ldk) * es, ldk, S + j, lds);
}

TXC_AVX2 static void scores_avx2(txc_dtype kdt, int64_t M, int64_t N, int64_t E, const float *Q, int64_t ldq,
                                 const void *K, int64_t ldk, float *S, int64_t lds)
{
    if (kdt == TXC_F32)
        scores_dt(TXC_F32, M, N, E, Q, ldq, K, ldk, S, lds);
    else if (kdt == TXC_BF16)
        scores_dt(TXC_BF16, M, N, E, Q, ldq, K, ldk, S, lds);
    else
        scores_dt(TXC_F16, M, N, E, Q, ldq, K, ldk, S, lds);
}
#endif

void txc_kern_attn_scores(int64_t M, int64_t N, int64_t E, const float *Q, int64_t ldq, const void *K,
                          txc_dtype kdt, int64_t ldk, float *S, int64_t lds)
{
    if (M <= 0 || N <= 0)
        return;
#if TXC_HAVE_X86
    if (txc_kern_simd_level() >= 1) {
        scores_avx2(kdt, M, N, E, Q, ldq, K, ldk, S, lds);
        return;
    }
#endif
    const size_t es = txc_dtype_size(kdt);
    for (int64_t j = 0; j < N; j++) {
        const char *kr = (const char *)K + (size_t)(j * ldk) * es;
        for (int64_t i = 0; i < M; i++) {
            const float *q = Q + i * ldq;
            float s = 0.0f;
            if (kdt == TXC_F32)
                for (int64_t e = 0; e < E; e++)
                    s += q[e] * ((const float *)kr)[e];
            else
                for (int64_t e = 0; e < E; e++)
                    s += q[e] * (float)txc_dtype_load(kdt, kr, (size_t)e);
            S[i * lds + j] = s;
        }
    }
}
