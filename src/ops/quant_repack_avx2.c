/* AVX2 kernels over weights interleaved in groups of 8 rows (ops/
 * quant_impl.h, "Interleaved weights"): a 32-byte register holds the same
 * 4 weight bytes of the group's 8 rows, and meets the activation's same
 * 4 bytes broadcast to every lane (_mm256_maddubs_epi16, then
 * _mm256_madd_epi16): lane i of the int32 result is row i's exact dot over
 * the block, so each block costs one conversion and one FMA for all 8 rows,
 * and there is no horizontal sum. Results: txc_qdot_r8_ref's bits. */
#include <string.h>

#include "ops/kernels.h"
#include "ops/quant_impl.h"

#if TXC_HAVE_X86

TXC_INLINE_AVX2 __m256i bcast4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* Blocks ahead that the interleaved kernels prefetch. */
#define TXC_R8_PF 8
/* Every cache line of the GB-byte block at p into L1. The weight streams
 * once; one prefetch per block (Q4_0's 144 bytes are 2.25 lines) left more
 * than half the lines to the hardware prefetcher, and decode on a Xeon
 * (Emerald Rapids, 2 threads, qwen2.5-0.5b Q4_0) went from 44.6 to 59.5
 * tokens/s with every line (Q8_0 28.2 to 34.5). Results do not change. */
TXC_INLINE_AVX2 void r8_prefetch(const uint8_t *p, size_t GB)
{
    for (size_t o = 0; o < GB; o += 64)
        _mm_prefetch((const char *)(p + o), _MM_HINT_T0);
}

/* sum(q) of activation block b, from the pair layout's iv */
TXC_INLINE_AVX2 int32_t qsum(const txc_qact *a, int64_t b) { return a->iv[8 * (b >> 1) + 4 * (b & 1)]; }

/* Q4_0 / Q4_1: the nibbles as unsigned 0..15 against the signed
 * activation; the 8 maddubs' int16 sums add without overflow (|.| <= 8 * 2
 * * 15 * 127 = 30480), one madd gives the 8 rows' int32 dots; Q4_0's
 * offset 8 comes off as 8 * sum(q_a) (exact). Q8_0: signed weights by the
 * sign trick (|w| x sign(a, w), |.| <= 2 * 128 * 127 per int16), a madd per
 * 4 bytes. */
TXC_INLINE_AVX2 void r8_kernel(txc_dtype dt, const uint8_t *w, size_t rb, int64_t ng, int64_t nb, const txc_qact *a,
                               int m, float *y, int64_t ldy)
{
    const bool Q8 = dt == TXC_Q8_0, MIN = dt == TXC_Q4_1;
    const size_t GB = Q8 ? 272 : MIN ? 160 : 144, QO = MIN ? 32 : 16;
    const __m256i m4 = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
    for (int64_t g = 0; g < ng; g++) {
        const uint8_t *gp = w + (size_t)g * 8 * rb;
        __m256 acc[TXC_QDOT_M], accm[TXC_QDOT_M];
        for (int r = 0; r < m; r++)
            acc[r] = accm[r] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *p = gp + (size_t)b * GB;
            r8_prefetch(p + TXC_R8_PF * GB, GB);
            __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
            if (Q8) {
                __m256i wv[8], ax[8];
                for (int c = 0; c < 8; c++) {
                    wv[c] = _mm256_loadu_si256((const __m256i *)(p + QO + 32 * c));
                    ax[c] = _mm256_sign_epi8(wv[c], wv[c]);
                }
                for (int r = 0; r < m; r++) {
                    const int8_t *q = a[r].qs + b * 32;
                    __m256i s = _mm256_setzero_si256();
                    for (int c = 0; c < 8; c++)
                        s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(
                                                                      ax[c], _mm256_sign_epi8(bcast4(q + 4 * c), wv[c])),
                                                                  ones));
                    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, _mm256_set1_ps(a[r].d[b])),
                                             acc[r]);
                }
            } else {
                __m256i lo[4], hi[4];
                for (int t = 0; t < 4; t++) {
                    __m256i raw = _mm256_loadu_si256((const __m256i *)(p + QO + 32 * t));
                    lo[t] = _mm256_and_si256(raw, m4);
                    hi[t] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
                }
                __m256 mw = MIN ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 16))) : _mm256_setzero_ps();
                for (int r = 0; r < m; r++) {
                    const int8_t *q = a[r].qs + b * 32;
                    __m256i s0 = _mm256_add_epi16(_mm256_maddubs_epi16(lo[0], bcast4(q)),
                                                  _mm256_maddubs_epi16(lo[1], bcast4(q + 4)));
                    __m256i s1 = _mm256_add_epi16(_mm256_maddubs_epi16(lo[2], bcast4(q + 8)),
                                                  _mm256_maddubs_epi16(lo[3], bcast4(q + 12)));
                    __m256i s2 = _mm256_add_epi16(_mm256_maddubs_epi16(hi[0], bcast4(q + 16)),
                                                  _mm256_maddubs_epi16(hi[1], bcast4(q + 20)));
                    __m256i s3 = _mm256_add_epi16(_mm256_maddubs_epi16(hi[2], bcast4(q + 24)),
                                                  _mm256_maddubs_epi16(hi[3], bcast4(q + 28)));
                    __m256i i32 = _mm256_madd_epi16(_mm256_add_epi16(_mm256_add_epi16(s0, s1), _mm256_add_epi16(s2, s3)),
                                                    ones);
                    if (!MIN)
                        i32 = _mm256_sub_epi32(i32, _mm256_set1_epi32(8 * qsum(&a[r], b)));
                    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i32), _mm256_mul_ps(dw, _mm256_set1_ps(a[r].d[b])),
                                             acc[r]);
                    if (MIN)
                        accm[r] = _mm256_fmadd_ps(mw, _mm256_set1_ps(a[r].s[b]), accm[r]);
                }
            }
        }
        for (int r = 0; r < m; r++)
            _mm256_storeu_ps(y + r * ldy + 8 * g, MIN ? _mm256_add_ps(acc[r], accm[r]) : acc[r]);
    }
}

/* The same sums with AVX-512 VNNI on 256-bit registers (vpdpbusd: the
 * four u8 x s8 products of each int32 lane added into it, exact, no int16
 * step): the same integers, so the same bits as r8_kernel. */
#define TXC_VNNI_TARGET "avx512f,avx512vl,avx512bw,avx512vnni,avx2,fma,f16c"
static inline __attribute__((always_inline, target(TXC_VNNI_TARGET))) void
r8_kernel_vnni(txc_dtype dt, const uint8_t *w, size_t rb, int64_t ng, int64_t nb, const txc_qact *a, int m, float *y,
               int64_t ldy)
{
    const bool Q8 = dt == TXC_Q8_0, MIN = dt == TXC_Q4_1;
    const size_t GB = Q8 ? 272 : MIN ? 160 : 144, QO = MIN ? 32 : 16;
    const __m256i m4 = _mm256_set1_epi8(15);
    for (int64_t g = 0; g < ng; g++) {
        const uint8_t *gp = w + (size_t)g * 8 * rb;
        __m256 acc[TXC_QDOT_M], accm[TXC_QDOT_M];
        for (int r = 0; r < m; r++)
            acc[r] = accm[r] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *p = gp + (size_t)b * GB;
            r8_prefetch(p + TXC_R8_PF * GB, GB);
            __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
            if (Q8) {
                __m256i wv[8], ax[8];
                for (int c = 0; c < 8; c++) {
                    wv[c] = _mm256_loadu_si256((const __m256i *)(p + QO + 32 * c));
                    ax[c] = _mm256_sign_epi8(wv[c], wv[c]);
                }
                for (int r = 0; r < m; r++) {
                    const int8_t *q = a[r].qs + b * 32;
                    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
                    for (int c = 0; c < 8; c += 2) {
                        s0 = _mm256_dpbusd_epi32(s0, ax[c], _mm256_sign_epi8(bcast4(q + 4 * c), wv[c]));
                        s1 = _mm256_dpbusd_epi32(s1, ax[c + 1], _mm256_sign_epi8(bcast4(q + 4 * c + 4), wv[c + 1]));
                    }
                    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1)),
                                             _mm256_mul_ps(dw, _mm256_set1_ps(a[r].d[b])), acc[r]);
                }
            } else {
                __m256i lo[4], hi[4];
                for (int t = 0; t < 4; t++) {
                    __m256i raw = _mm256_loadu_si256((const __m256i *)(p + QO + 32 * t));
                    lo[t] = _mm256_and_si256(raw, m4);
                    hi[t] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
                }
                __m256 mw = MIN ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 16))) : _mm256_setzero_ps();
                for (int r = 0; r < m; r++) {
                    const int8_t *q = a[r].qs + b * 32;
                    __m256i s0 = MIN ? _mm256_setzero_si256() : _mm256_set1_epi32(-8 * qsum(&a[r], b));
                    __m256i s1 = _mm256_setzero_si256();
                    for (int t = 0; t < 4; t += 2) {
                        s0 = _mm256_dpbusd_epi32(s0, lo[t], bcast4(q + 4 * t));
                        s1 = _mm256_dpbusd_epi32(s1, lo[t + 1], bcast4(q + 4 * t + 4));
                        s0 = _mm256_dpbusd_epi32(s0, hi[t], bcast4(q + 16 + 4 * t));
                        s1 = _mm256_dpbusd_epi32(s1, hi[t + 1], bcast4(q + 20 + 4 * t));
                    }
                    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1)),
                                             _mm256_mul_ps(dw, _mm256_set1_ps(a[r].d[b])), acc[r]);
                    if (MIN)
                        accm[r] = _mm256_fmadd_ps(mw, _mm256_set1_ps(a[r].s[b]), accm[r]);
                }
            }
        }
        for (int r = 0; r < m; r++)
            _mm256_storeu_ps(y + r * ldy + 8 * g, MIN ? _mm256_add_ps(acc[r], accm[r]) : acc[r]);
    }
}

/* Q4_K: a super-block of a group (1152 bytes) a step. Its 64 scales and
 * mins (entry 8j + i: row i's sub-block j) back to bytes from their
 * nibble and 2-bit parts; per sub-block j the 8 rows' dots (lane i) times
 * the 8 rows' integer scales (vpmulld), summed in int32 over the
 * super-block; the mins times the activation's per-32 sums likewise; one
 * FMA each with d*D and dmin*D. */
#define Q4K_SCALES(p, sc, mn)                                                                            \
    do {                                                                                                 \
        const __m256i k4_ = _mm256_set1_epi8(15), k3_ = _mm256_set1_epi8(3);                             \
        __m256i A_ = _mm256_loadu_si256((const __m256i *)((p) + 32));                                    \
        __m256i B_ = _mm256_loadu_si256((const __m256i *)((p) + 64));                                    \
        __m256i H_ = _mm256_loadu_si256((const __m256i *)((p) + 96));                                    \
        _mm256_store_si256((__m256i *)(sc), _mm256_or_si256(_mm256_and_si256(A_, k4_),                   \
                                                            _mm256_slli_epi16(_mm256_and_si256(H_, k3_), 4))); \
        _mm256_store_si256((__m256i *)((sc) + 32),                                                       \
                           _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(A_, 4), k4_),              \
                                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H_, 2), k3_), 4))); \
        _mm256_store_si256((__m256i *)(mn),                                                              \
                           _mm256_or_si256(_mm256_and_si256(B_, k4_),                                    \
                                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H_, 4), k3_), 4))); \
        _mm256_store_si256((__m256i *)((mn) + 32),                                                       \
                           _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(B_, 4), k4_),              \
                                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H_, 6), k3_), 4))); \
    } while (0)

#define U8X8(p) _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p)))

/* the body, DOT(acc_lo, acc_hi, lo, hi, q) adding a chunk's two sub-block dots (lo: sub-block 2gq, hi: 2gq+1)
 * into the per-row accumulators, FINISH(x) their int32 dots */
#define R8_Q4K_BODY(ACC_T, ZERO, DOT, FINISH)                                                            \
    const __m256i m4 = _mm256_set1_epi8(15);                                                             \
    for (int64_t g = 0; g < ng; g++) {                                                                   \
        const uint8_t *gp = w + (size_t)g * 8 * rb;                                                      \
        __m256 acc[TXC_QDOT_M], accm[TXC_QDOT_M];                                                        \
        for (int r = 0; r < m; r++)                                                                      \
            acc[r] = accm[r] = _mm256_setzero_ps();                                                      \
        for (int64_t sb = 0; sb < nsb; sb++) {                                                           \
            const uint8_t *p = gp + (size_t)sb * 1152;                                                   \
            _Alignas(32) uint8_t sc[64], mn[64];                                                         \
            Q4K_SCALES(p, sc, mn);                                                                       \
            __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));                            \
            __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 16)));                     \
            __m256i isum[TXC_QDOT_M], msum[TXC_QDOT_M];                                                  \
            for (int r = 0; r < m; r++)                                                                  \
                isum[r] = msum[r] = _mm256_setzero_si256();                                              \
            for (int j = 0; j < 8; j++) {                                                                \
                __m256i M = U8X8(mn + 8 * j);                                                            \
                for (int r = 0; r < m; r++)                                                              \
                    msum[r] = _mm256_add_epi32(msum[r],                                                  \
                                               _mm256_mullo_epi32(M, _mm256_set1_epi32(a[r].bs[sb * 8 + j]))); \
            }                                                                                            \
            for (int gq = 0; gq < 4; gq++) {                                                             \
                ACC_T slo[TXC_QDOT_M], shi[TXC_QDOT_M];                                                  \
                for (int r = 0; r < m; r++)                                                              \
                    slo[r] = shi[r] = ZERO;                                                              \
                for (int c = 0; c < 8; c++) {                                                            \
                    __m256i raw = _mm256_loadu_si256((const __m256i *)(p + 128 + 32 * (8 * gq + c)));    \
                    __m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4); \
                    for (int r = 0; r < m; r++) {                                                        \
                        const int8_t *q = a[r].qs + sb * 256 + gq * 64 + 4 * c;                          \
                        DOT(slo[r], shi[r], lo, hi, q);                                                  \
                    }                                                                                    \
                }                                                                                        \
                __m256i Slo = U8X8(sc + 16 * gq), Shi = U8X8(sc + 16 * gq + 8);                          \
                for (int r = 0; r < m; r++)                                                              \
                    isum[r] = _mm256_add_epi32(isum[r], _mm256_add_epi32(_mm256_mullo_epi32(FINISH(slo[r]), Slo), \
                                                                         _mm256_mullo_epi32(FINISH(shi[r]), Shi))); \
            }                                                                                            \
            for (int r = 0; r < m; r++) {                                                                \
                __m256 D = _mm256_set1_ps(a[r].D[sb]);                                                   \
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_mul_ps(dw, D), acc[r]);     \
                accm[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum[r]), _mm256_mul_ps(dm, D), accm[r]);   \
            }                                                                                            \
        }                                                                                                \
        for (int r = 0; r < m; r++)                                                                      \
            _mm256_storeu_ps(y + r * ldy + 8 * g, _mm256_sub_ps(acc[r], accm[r]));                       \
    }

/* AVX2: int16 sums of the maddubs pairs over a sub-block's 8 chunks (|.| <= 8 * 2 * 15 * 127), then madd */
#define DOT_AVX2(SL, SH, LO, HI, Q)                                                                      \
    SL = _mm256_add_epi16(SL, _mm256_maddubs_epi16(LO, bcast4(Q))),                                      \
    SH = _mm256_add_epi16(SH, _mm256_maddubs_epi16(HI, bcast4((Q) + 32)))
#define FIN_AVX2(X) _mm256_madd_epi16(X, _mm256_set1_epi16(1))
#define DOT_VNNI(SL, SH, LO, HI, Q)                                                                      \
    SL = _mm256_dpbusd_epi32(SL, LO, bcast4(Q)), SH = _mm256_dpbusd_epi32(SH, HI, bcast4((Q) + 32))
#define FIN_VNNI(X) (X)

TXC_INLINE_AVX2 void r8_q4k(const uint8_t *w, size_t rb, int64_t ng, int64_t nsb, const txc_qact *a, int m, float *y,
                            int64_t ldy)
{
    R8_Q4K_BODY(__m256i, _mm256_setzero_si256(), DOT_AVX2, FIN_AVX2)
}

static inline __attribute__((always_inline, target(TXC_VNNI_TARGET))) void
r8_q4k_vnni(const uint8_t *w, size_t rb, int64_t ng, int64_t nsb, const txc_qact *a, int m, float *y, int64_t ldy)
{
    R8_Q4K_BODY(__m256i, _mm256_setzero_si256(), DOT_VNNI, FIN_VNNI)
}

TXC_AVX2 static void qdot_r8_q4_k(txc_dtype dt, const uint8_t *w, size_t rb, int64_t ng, int64_t K, const txc_qact *a,
                                  int m, float *y, int64_t ldy)
{
    (void)dt;
    switch (m) {
    case 1: r8_q4k(w, rb, ng, K / 256, a, 1, y, ldy); break;
    case 2: r8_q4k(w, rb, ng, K / 256, a, 2, y, ldy); break;
    case 3: r8_q4k(w, rb, ng, K / 256, a, 3, y, ldy); break;
    default: r8_q4k(w, rb, ng, K / 256, a, 4, y, ldy); break;
    }
}

__attribute__((target(TXC_VNNI_TARGET))) static void qdot_r8v_q4_k(txc_dtype dt, const uint8_t *w, size_t rb,
                                                                   int64_t ng, int64_t K, const txc_qact *a, int m,
                                                                   float *y, int64_t ldy)
{
    (void)dt;
    switch (m) {
    case 1: r8_q4k_vnni(w, rb, ng, K / 256, a, 1, y, ldy); break;
    case 2: r8_q4k_vnni(w, rb, ng, K / 256, a, 2, y, ldy); break;
    case 3: r8_q4k_vnni(w, rb, ng, K / 256, a, 3, y, ldy); break;
    default: r8_q4k_vnni(w, rb, ng, K / 256, a, 4, y, ldy); break;
    }
}

#define R8_ENTRY(T, DT)                                                                                  \
    TXC_AVX2 static void qdot_r8_##T(txc_dtype dt, const uint8_t *w, size_t rb, int64_t ng, int64_t K,     \
                                     const txc_qact *a, int m, float *y, int64_t ldy)                    \
    {                                                                                                    \
        (void)dt;                                                                                        \
        switch (m) {                                                                                     \
        case 1: r8_kernel(DT, w, rb, ng, K / 32, a, 1, y, ldy); break;                                   \
        case 2: r8_kernel(DT, w, rb, ng, K / 32, a, 2, y, ldy); break;                                   \
        case 3: r8_kernel(DT, w, rb, ng, K / 32, a, 3, y, ldy); break;                                   \
        default: r8_kernel(DT, w, rb, ng, K / 32, a, 4, y, ldy); break;                                  \
        }                                                                                                \
    }

#define R8_ENTRY_VNNI(T, DT)                                                                             \
    __attribute__((target(TXC_VNNI_TARGET))) static void qdot_r8v_##T(                                   \
        txc_dtype dt, const uint8_t *w, size_t rb, int64_t ng, int64_t K, const txc_qact *a, int m, float *y, \
        int64_t ldy)                                                                                     \
    {                                                                                                    \
        (void)dt;                                                                                        \
        switch (m) {                                                                                     \
        case 1: r8_kernel_vnni(DT, w, rb, ng, K / 32, a, 1, y, ldy); break;                              \
        case 2: r8_kernel_vnni(DT, w, rb, ng, K / 32, a, 2, y, ldy); break;                              \
        case 3: r8_kernel_vnni(DT, w, rb, ng, K / 32, a, 3, y, ldy); break;                              \
        default: r8_kernel_vnni(DT, w, rb, ng, K / 32, a, 4, y, ldy); break;                             \
        }                                                                                                \
    }

R8_ENTRY(q4_0, TXC_Q4_0)
R8_ENTRY(q4_1, TXC_Q4_1)
R8_ENTRY(q8_0, TXC_Q8_0)
R8_ENTRY_VNNI(q4_0, TXC_Q4_0)
R8_ENTRY_VNNI(q4_1, TXC_Q4_1)
R8_ENTRY_VNNI(q8_0, TXC_Q8_0)

txc_qdot_fn txc_qdot_r8_vnni_for(txc_dtype dt)
{
    if (!__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("avx512vl"))
        return NULL;
    switch (dt) {
    case TXC_Q4_0: return qdot_r8v_q4_0;
    case TXC_Q4_1: return qdot_r8v_q4_1;
    case TXC_Q8_0: return qdot_r8v_q8_0;
    case TXC_Q4_K: return qdot_r8v_q4_k;
    default: return NULL;
    }
}

txc_qdot_fn txc_qdot_r8_avx2_for(txc_dtype dt)
{
    switch (dt) {
    case TXC_Q4_0: return qdot_r8_q4_0;
    case TXC_Q4_1: return qdot_r8_q4_1;
    case TXC_Q8_0: return qdot_r8_q8_0;
    case TXC_Q4_K: return qdot_r8_q4_k;
    default: return NULL;
    }
}

#else
txc_qdot_fn txc_qdot_r8_avx2_for(txc_dtype dt)
{
    (void)dt;
    return NULL;
}
txc_qdot_fn txc_qdot_r8_vnni_for(txc_dtype dt)
{
    (void)dt;
    return NULL;
}
#endif
