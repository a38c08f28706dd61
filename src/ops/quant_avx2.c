/* AVX2 dot kernels of the block-quantized types against int8 activation
 * blocks (ops/quant_impl.h): per 32-element block the weight's integers
 * meet the activation's in _mm256_maddubs_epi16 (unsigned x signed bytes,
 * pairs summed to int16, exact: |sum| <= 2*128*127) and
 * _mm256_madd_epi16 (int32 lanes), as ggml's ggml_vec_dot_q4_0_q8_0 & co;
 * the block's eight int32 lanes are converted to float and accumulated
 * with the block's scale product (dw*da) by FMA; a type with a min adds
 * mw * s per block in a scalar sum. Signed weights (Q8_0, Q6_K) go
 * through the sign trick (|w| x sign(a, w)); Q4_0/Q5_0 are read as
 * unsigned q with the min -8*dw / -16*dw. Even and odd blocks go to two
 * accumulators (two FMA chains); their lanes are summed at the end of the
 * row. Each (activation row, weight row) result follows the same
 * operations whatever m and n. */
#include <string.h>

#include "ops/kernels.h"
#include "ops/quant_impl.h"

#if TXC_HAVE_X86

TXC_INLINE_AVX2 float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

TXC_INLINE_AVX2 float f16(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* 16 bytes of nibbles -> 32 bytes: low nibbles (elements 0..15), then high (16..31) */
TXC_INLINE_AVX2 __m256i nibbles16(const uint8_t *q)
{
    __m128i b = _mm_loadu_si128((const __m128i *)q), m = _mm_set1_epi8(15);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
}

/* 32 bits -> 32 bytes 0xff where the bit is set (ggml's bytes_from_bits_32) */
TXC_INLINE_AVX2 __m256i bits32(const uint8_t *p)
{
    uint32_t x;
    memcpy(&x, p, 4);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x), shuf);
    b = _mm256_or_si256(b, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
    return _mm256_cmpeq_epi8(b, _mm256_set1_epi64x(-1));
}

/* unsigned weight bytes u (<= 127 with a <= 127 in size) . signed activation bytes a -> 8 int32 */
TXC_INLINE_AVX2 __m256i dot_u(__m256i u, __m256i a)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), _mm256_set1_epi16(1));
}

#define ACT(r, b) _mm256_loadu_si256((const __m256i *)(a[r].qs + (b) * 32))

/* one block of unsigned weights u with scale dw and min mw (per row r) */
#define BLOCK_U(u, dw, mw, b, ACC)                                                                     \
    for (int r = 0; r < m; r++) {                                                                      \
        __m256 p_ = _mm256_cvtepi32_ps(dot_u(u, ACT(r, b)));                                           \
        ACC[r] = _mm256_fmadd_ps(_mm256_set1_ps((dw) * a[r].d[b]), p_, ACC[r]);                         \
        accm[r] += (mw) * a[r].s[b];                                                                   \
    }

/* one block of signed weights w (scale dw, no min) */
#define BLOCK_S(w, dw, b, ACC)                                                                         \
    do {                                                                                               \
        __m256i ax_ = _mm256_sign_epi8(w, w);                                                          \
        for (int r = 0; r < m; r++) {                                                                  \
            __m256 p_ = _mm256_cvtepi32_ps(dot_u(ax_, _mm256_sign_epi8(ACT(r, b), w)));                \
            ACC[r] = _mm256_fmadd_ps(_mm256_set1_ps((dw) * a[r].d[b]), p_, ACC[r]);                     \
        }                                                                                              \
    } while (0)

#define ROW_BEGIN                                                                                      \
    for (int64_t j = 0; j < n; j++) {                                                                  \
        const uint8_t *row = w + (size_t)j * rb;                                                       \
        if (j + 1 < n)                                                                                 \
            _mm_prefetch((const char *)(row + rb), _MM_HINT_T0);                                       \
        __m256 acc[TXC_QDOT_M], acc1[TXC_QDOT_M]; /* even and odd blocks: two FMA chains */          \
        float accm[TXC_QDOT_M];                                                                        \
        for (int r = 0; r < m; r++)                                                                    \
            acc[r] = _mm256_setzero_ps(), acc1[r] = _mm256_setzero_ps(), accm[r] = 0.0f;

#define ROW_END                                                                                        \
        for (int r = 0; r < m; r++)                                                                    \
            y[r * ldy + j] = hsum(_mm256_add_ps(acc[r], acc1[r])) + accm[r];                           \
    }

/* The 32-element types share one row loop: even and odd blocks to the two
 * FMA chains, a last odd block to the first. DECODE(p, b, ACC) reads the
 * block at p (block index b) and adds it to ACC with BLOCK_U / BLOCK_S. */
#define K_BLOCKS32(T, BYTES, DECODE)                                                                   \
    TXC_INLINE_AVX2 void k_##T(const uint8_t *w, size_t rb, int64_t n, int64_t nb, const txc_qact *a, int m, \
                               float *y, int64_t ldy)                                                  \
    {                                                                                                  \
        ROW_BEGIN                                                                                      \
        int64_t b = 0;                                                                                 \
        for (; b + 1 < nb; b += 2) {                                                                   \
            { DECODE(row + b * (BYTES), b, acc) }                                                      \
            { DECODE(row + (b + 1) * (BYTES), (b + 1), acc1) }                                         \
        }                                                                                              \
        if (b < nb) {                                                                                  \
            DECODE(row + b * (BYTES), b, acc)                                                          \
        }                                                                                              \
        ROW_END                                                                                        \
    }

/* Q8_0: d, 32 signed bytes */
#define DEC_Q8_0(P, B, ACC)                                                                            \
    const uint8_t *p = P;                                                                              \
    __m256i q = _mm256_loadu_si256((const __m256i *)(p + 2));                                          \
    float dw = f16(p);                                                                                 \
    BLOCK_S(q, dw, B, ACC);
/* Q4_0: d, 16 bytes of nibbles; q - 8 as q with the min -8d */
#define DEC_Q4_0(P, B, ACC)                                                                            \
    const uint8_t *p = P;                                                                              \
    float dw = f16(p);                                                                                 \
    __m256i u = nibbles16(p + 2);                                                                      \
    BLOCK_U(u, dw, -8.0f * dw, B, ACC);
/* Q4_1: d, m, 16 bytes of nibbles */
#define DEC_Q4_1(P, B, ACC)                                                                            \
    const uint8_t *p = P;                                                                              \
    float dw = f16(p), mw = f16(p + 2);                                                                \
    __m256i u = nibbles16(p + 4);                                                                      \
    BLOCK_U(u, dw, mw, B, ACC);
/* Q5_0: d, 32 fifth bits, 16 bytes of nibbles; q - 16 as q with the min -16d */
#define DEC_Q5_0(P, B, ACC)                                                                            \
    const uint8_t *p = P;                                                                              \
    float dw = f16(p);                                                                                 \
    __m256i u = _mm256_or_si256(nibbles16(p + 6), _mm256_and_si256(bits32(p + 2), _mm256_set1_epi8(16))); \
    BLOCK_U(u, dw, -16.0f * dw, B, ACC);
/* Q5_1: d, m, 32 fifth bits, 16 bytes of nibbles */
#define DEC_Q5_1(P, B, ACC)                                                                            \
    const uint8_t *p = P;                                                                              \
    float dw = f16(p), mw = f16(p + 2);                                                                \
    __m256i u = _mm256_or_si256(nibbles16(p + 8), _mm256_and_si256(bits32(p + 4), _mm256_set1_epi8(16))); \
    BLOCK_U(u, dw, mw, B, ACC);

K_BLOCKS32(q8_0, 34, DEC_Q8_0)
K_BLOCKS32(q4_0, 18, DEC_Q4_0)
K_BLOCKS32(q4_1, 20, DEC_Q4_1)
K_BLOCKS32(q5_0, 22, DEC_Q5_0)
K_BLOCKS32(q5_1, 24, DEC_Q5_1)

/* Q4_K / Q5_K: super-blocks of 8 sub-blocks of 32 (two per 32 bytes of
 * nibbles), 6-bit scales and mins */
TXC_INLINE_AVX2 void k_qk(bool five, const uint8_t *w, size_t rb, int64_t n, int64_t nb, const txc_qact *a, int m,
                          float *y, int64_t ldy)
{
    const __m256i m4 = _mm256_set1_epi8(15), one = _mm256_set1_epi8(1);
    ROW_BEGIN
    __m256 accmv[TXC_QDOT_M]; /* the mins' sum, eight sub-blocks a lane */
    for (int r = 0; r < m; r++)
        accmv[r] = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < nb / 8; sb++) {
        const uint8_t *p = row + sb * (five ? 176 : 144);
        float d = f16(p), dmin = f16(p + 2), dw[8], mw[8];
        const uint8_t *q = p + 4; /* ggml's get_scale_min_k4, inlined */
        for (int s = 0; s < 4; s++) {
            dw[s] = d * (float)(q[s] & 63);
            mw[s] = -(dmin * (float)(q[s + 4] & 63));
            dw[s + 4] = d * (float)((q[s + 8] & 0xf) | ((q[s] >> 6) << 4));
            mw[s + 4] = -(dmin * (float)((q[s + 8] >> 4) | ((q[s + 4] >> 6) << 4)));
        }
        /* per row: the eight scale products dw*da at once, the mins' terms by one FMA */
        float ds[TXC_QDOT_M][8];
        __m256 dwv = _mm256_loadu_ps(dw), mwv = _mm256_loadu_ps(mw);
        for (int r = 0; r < m; r++) {
            _mm256_storeu_ps(ds[r], _mm256_mul_ps(dwv, _mm256_loadu_ps(a[r].d + sb * 8)));
            accmv[r] = _mm256_fmadd_ps(mwv, _mm256_loadu_ps(a[r].s + sb * 8), accmv[r]);
        }
        const uint8_t *ql = p + (five ? 48 : 16);
        __m256i qh = five ? _mm256_loadu_si256((const __m256i *)(p + 16)) : _mm256_setzero_si256();
        for (int g = 0; g < 4; g++) {
            __m256i bytes = _mm256_loadu_si256((const __m256i *)(ql + 32 * g));
            __m256i lo = _mm256_and_si256(bytes, m4), hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), m4);
            if (five) {
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(qh, one), 4));
                hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 1), one), 4));
                qh = _mm256_srli_epi16(qh, 2);
            }
            int64_t b = sb * 8 + 2 * g;
            for (int r = 0; r < m; r++) {
                __m256 plo = _mm256_cvtepi32_ps(dot_u(lo, ACT(r, b)));
                __m256 phi = _mm256_cvtepi32_ps(dot_u(hi, ACT(r, b + 1)));
                acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(&ds[r][2 * g]), plo, acc[r]);
                acc1[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(&ds[r][2 * g + 1]), phi, acc1[r]);
            }
        }
    }
    for (int r = 0; r < m; r++)
        accm[r] = hsum(accmv[r]);
    ROW_END
}

TXC_INLINE_AVX2 void k_q4_k(const uint8_t *w, size_t rb, int64_t n, int64_t nb, const txc_qact *a, int m, float *y,
                            int64_t ldy)
{
    k_qk(false, w, rb, n, nb, a, m, y, ldy);
}

TXC_INLINE_AVX2 void k_q5_k(const uint8_t *w, size_t rb, int64_t n, int64_t nb, const txc_qact *a, int m, float *y,
                            int64_t ldy)
{
    k_qk(true, w, rb, n, nb, a, m, y, ldy);
}

/* Q6_K: per 32-block the signed q - 32 (sign trick), the two 16-element
 * int8 scales applied to the int16 pair sums by madd */
TXC_INLINE_AVX2 void k_q6_k(const uint8_t *w, size_t rb, int64_t n, int64_t nb, const txc_qact *a, int m, float *y,
                            int64_t ldy)
{
    const __m256i m4 = _mm256_set1_epi8(15), m3 = _mm256_set1_epi8(3), o32 = _mm256_set1_epi8(32);
    ROW_BEGIN
    for (int64_t sb = 0; sb < nb / 8; sb++) {
        const uint8_t *p = row + sb * 210;
        float d = f16(p + 208);
        const int8_t *sc = (const int8_t *)(p + 192);
        for (int half = 0; half < 2; half++) {
            __m256i l0 = _mm256_loadu_si256((const __m256i *)(p + half * 64));
            __m256i l1 = _mm256_loadu_si256((const __m256i *)(p + half * 64 + 32));
            __m256i h = _mm256_loadu_si256((const __m256i *)(p + 128 + half * 32));
            for (int k = 0; k < 4; k++) {
                __m256i lo = k & 1 ? l1 : l0;
                lo = k >= 2 ? _mm256_and_si256(_mm256_srli_epi16(lo, 4), m4) : _mm256_and_si256(lo, m4);
                __m256i hb = _mm256_and_si256(_mm256_srli_epi16(h, 2 * k), m3);
                __m256i q = _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hb, 4)), o32);
                const int8_t *s2 = sc + half * 8 + 2 * k;
                __m256i scv = _mm256_set_m128i(_mm_set1_epi16(s2[1]), _mm_set1_epi16(s2[0]));
                __m256i ax = _mm256_sign_epi8(q, q);
                int64_t b = sb * 8 + half * 4 + k;
                for (int r = 0; r < m; r++) {
                    __m256i pr = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(ACT(r, b), q));
                    __m256 pf = _mm256_cvtepi32_ps(_mm256_madd_epi16(pr, scv));
                    if (k & 1)
                        acc1[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * a[r].d[b]), pf, acc1[r]);
                    else
                        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * a[r].d[b]), pf, acc[r]);
                }
            }
        }
    }
    ROW_END
}

/* the entry points: m (1..4) made a constant in each instance */
#define ENTRY(T)                                                                                        \
    TXC_AVX2 static void qdot_##T(txc_dtype dt, const uint8_t *w, size_t rb, int64_t n, int64_t K,        \
                                  const txc_qact *a, int m, float *y, int64_t ldy)                      \
    {                                                                                                   \
        (void)dt;                                                                                       \
        switch (m) {                                                                                    \
        case 1: k_##T(w, rb, n, K / 32, a, 1, y, ldy); break;                                           \
        case 2: k_##T(w, rb, n, K / 32, a, 2, y, ldy); break;                                           \
        case 3: k_##T(w, rb, n, K / 32, a, 3, y, ldy); break;                                           \
        default: k_##T(w, rb, n, K / 32, a, 4, y, ldy); break;                                          \
        }                                                                                               \
    }

ENTRY(q8_0)
ENTRY(q4_0)
ENTRY(q4_1)
ENTRY(q5_0)
ENTRY(q5_1)
ENTRY(q4_k)
ENTRY(q5_k)
ENTRY(q6_k)

txc_qdot_fn txc_qdot_avx2_for(txc_dtype dt)
{
    switch (dt) {
    case TXC_Q8_0: return qdot_q8_0;
    case TXC_Q4_0: return qdot_q4_0;
    case TXC_Q4_1: return qdot_q4_1;
    case TXC_Q5_0: return qdot_q5_0;
    case TXC_Q5_1: return qdot_q5_1;
    case TXC_Q4_K: return qdot_q4_k;
    case TXC_Q5_K: return qdot_q5_k;
    case TXC_Q6_K: return qdot_q6_k;
    default: return NULL;
    }
}

#else
txc_qdot_fn txc_qdot_avx2_for(txc_dtype dt)
{
    (void)dt;
    return NULL;
}
#endif
