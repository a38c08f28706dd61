/* AVX2 dot kernels of the block-quantized types against int8 activation
 * blocks (ops/quant_impl.h): the weight's integers meet the activation's
 * in _mm256_maddubs_epi16 (unsigned x signed bytes, pairs summed to int16,
 * exact) and _mm256_madd_epi16 (int32 lanes), as ggml's
 * ggml_vec_dot_q4_0_q8_0 & co. Q8_0 and Q6_K: one 32-element block at a
 * time, signed weights through the sign trick (|w| x sign(a, w)), the
 * block's eight int32 lanes converted to float and accumulated with the
 * block's scale product (dw*da) by FMA. Q4_0 ... Q5_1 take two blocks a
 * step against the activation's pair layout, Q4_K/Q5_K a super-block in
 * int32 against one activation scale a super-block (see each kernel).
 * Each (activation row, weight row) result follows the same operations
 * whatever m and n. */
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

/* unsigned weight bytes u (<= 127 with a <= 127 in size) . signed activation bytes a -> 8 int32 */
TXC_INLINE_AVX2 __m256i dot_u(__m256i u, __m256i a)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), _mm256_set1_epi16(1));
}

#define ACT(r, b) _mm256_loadu_si256((const __m256i *)(a[r].qs + (b) * 32))

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
 * block at p (block index b) and adds it to ACC with BLOCK_S. */
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
K_BLOCKS32(q8_0, 34, DEC_Q8_0)

TXC_INLINE_AVX2 uint32_t ld16(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return h;
}

TXC_INLINE_AVX2 uint32_t ld32(const uint8_t *p)
{
    uint32_t h;
    memcpy(&h, p, 4);
    return h;
}

/* the fifth bits of a pair, h = qh_b | qh_b+1 << 32, ORed into its low and
 * high integers as 16: one broadcast of the 64 bits, then for each half a
 * byte shuffle (byte k of the half gets the byte of h that holds its bit:
 * low half, lanes 0-15 from h bits 0-15 and lanes 16-31 from bits 32-47;
 * high half, bits 16-31 and 48-63), the other bits set, a compare with
 * all ones */
TXC_INLINE_AVX2 void bits64_16(uint64_t h, __m256i *lo, __m256i *hi)
{
    const __m256i sel_lo = _mm256_set_epi64x(0x0505050505050505, 0x0404040404040404, 0x0101010101010101, 0);
    const __m256i sel_hi = _mm256_set_epi64x(0x0707070707070707, 0x0606060606060606, 0x0303030303030303,
                                             0x0202020202020202);
    const __m256i other = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe), all = _mm256_set1_epi64x(-1);
    const __m256i sixteen = _mm256_set1_epi8(16);
    __m256i x = _mm256_set1_epi64x((long long)h);
    __m256i bl = _mm256_or_si256(_mm256_shuffle_epi8(x, sel_lo), other);
    __m256i bh = _mm256_or_si256(_mm256_shuffle_epi8(x, sel_hi), other);
    *lo = _mm256_or_si256(*lo, _mm256_and_si256(_mm256_cmpeq_epi8(bl, all), sixteen));
    *hi = _mm256_or_si256(*hi, _mm256_and_si256(_mm256_cmpeq_epi8(bh, all), sixteen));
}

/* Q4_0, Q4_1, Q5_0, Q5_1: two blocks b, b+1 a step. Their nibbles in one
 * register (low nibbles: elements [0,16) of b, then of b+1; high: [16,32))
 * meet the activation's pair layout (ops/quant_impl.h): the two maddubs'
 * int16 sums add without overflow (|.| <= 2*2*31*127), one madd leaves
 * four int32 lanes a block, and the block dots are scaled by one vector
 * (dw_b x4, dw_b+1 x4) * (da_b x4, da_b+1 x4). The offset types (q - 8,
 * q - 16) subtract offset*sum(q_a) from the exact integer dot; the types
 * with a min add m*s by a 4-lane FMA of (d_b, m_b, d_b+1, m_b+1) with
 * (0, s_b, 0, s_b+1). An odd last block pairs with zeros. */
enum { P_Q4_0, P_Q4_1, P_Q5_0, P_Q5_1 };

TXC_INLINE_AVX2 void pair_step(int T, bool tail, const uint8_t *b0, int64_t p, const txc_qact *a, int m, __m256 *acc,
                               __m128 *accm)
{
    const int BYTES = T == P_Q4_0 ? 18 : T == P_Q4_1 ? 20 : T == P_Q5_0 ? 22 : 24;
    const int QOFF = T == P_Q4_0 ? 2 : T == P_Q4_1 ? 4 : T == P_Q5_0 ? 6 : 8;
    const bool MIN = T == P_Q4_1 || T == P_Q5_1, FIVE = T == P_Q5_0 || T == P_Q5_1;
    const int SHIFT = T == P_Q4_0 ? 3 : 4; /* offset 8 or 16 */
    const __m256i m4 = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
    const uint8_t *b1 = b0 + BYTES;
    __m128i x0 = _mm_loadu_si128((const __m128i *)(b0 + QOFF));
    __m128i x1 = tail ? _mm_setzero_si128() : _mm_loadu_si128((const __m128i *)(b1 + QOFF));
    __m256i raw = _mm256_set_m128i(x1, x0);
    __m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
    if (FIVE) {
        uint64_t h = ld32(b0 + QOFF - 4) | (tail ? 0 : (uint64_t)ld32(b1 + QOFF - 4) << 32);
        bits64_16(h, &lo, &hi);
    }
    __m128 F;
    __m256 dw;
    if (MIN) {
        uint64_t h = ld32(b0) | (tail ? 0 : (uint64_t)ld32(b1) << 32);
        F = _mm_cvtph_ps(_mm_cvtsi64_si128((long long)h));
        dw = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(F), _mm256_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2));
    } else {
        uint32_t h = ld16(b0) | (tail ? 0 : ld16(b1) << 16);
        F = _mm_cvtph_ps(_mm_cvtsi32_si128((int)h));
        dw = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(F), _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
    }
    for (int r = 0; r < m; r++) {
        const int8_t *q = a[r].qp + p * 64;
        __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)q)),
                                       _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(q + 32))));
        __m256i i32 = _mm256_madd_epi16(s16, ones);
        if (!MIN)
            i32 = _mm256_sub_epi32(i32, _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(a[r].iv + p * 8)), SHIFT));
        __m256 sc = _mm256_mul_ps(dw, _mm256_loadu_ps(a[r].dv + p * 8));
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i32), sc, acc[r]);
        if (MIN)
            accm[r] = _mm_fmadd_ps(F, _mm_loadu_ps(a[r].sv + p * 4), accm[r]);
    }
}

TXC_INLINE_AVX2 float hsum128(__m128 s)
{
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* even and odd pairs to two accumulators (two FMA chains), a last odd pair to the first */
TXC_INLINE_AVX2 void k_pair(int T, const uint8_t *w, size_t rb, int64_t n, int64_t nb, const txc_qact *a, int m,
                            float *y, int64_t ldy)
{
    const int BYTES = T == P_Q4_0 ? 18 : T == P_Q4_1 ? 20 : T == P_Q5_0 ? 22 : 24;
    const bool MIN = T == P_Q4_1 || T == P_Q5_1;
    int64_t full = nb / 2;
    for (int64_t j = 0; j < n; j++) {
        const uint8_t *row = w + (size_t)j * rb;
        __m256 acc[TXC_QDOT_M], acc1[TXC_QDOT_M];
        __m128 accm[TXC_QDOT_M], accm1[TXC_QDOT_M];
        for (int r = 0; r < m; r++)
            acc[r] = acc1[r] = _mm256_setzero_ps(), accm[r] = accm1[r] = _mm_setzero_ps();
        int64_t p = 0;
        for (; p + 1 < full; p += 2) {
            pair_step(T, false, row + 2 * p * BYTES, p, a, m, acc, accm);
            pair_step(T, false, row + 2 * (p + 1) * BYTES, p + 1, a, m, acc1, accm1);
        }
        if (p < full)
            pair_step(T, false, row + 2 * p * BYTES, p, a, m, acc, accm), p++;
        if (nb & 1)
            pair_step(T, true, row + 2 * p * BYTES, p, a, m, acc1, accm1);
        for (int r = 0; r < m; r++) {
            float v = hsum(_mm256_add_ps(acc[r], acc1[r]));
            if (MIN)
                v += hsum128(_mm_add_ps(accm[r], accm1[r]));
            y[r * ldy + j] = v;
        }
    }
}

#define K_PAIR(T, E)                                                                                   \
    TXC_INLINE_AVX2 void k_##T(const uint8_t *w, size_t rb, int64_t n, int64_t nb, const txc_qact *a, int m, \
                               float *y, int64_t ldy)                                                  \
    {                                                                                                  \
        k_pair(E, w, rb, n, nb, a, m, y, ldy);                                                         \
    }
K_PAIR(q4_0, P_Q4_0)
K_PAIR(q4_1, P_Q4_1)
K_PAIR(q5_0, P_Q5_0)
K_PAIR(q5_1, P_Q5_1)

/* Q4_K / Q5_K against activations with one scale D a super-block (ggml's
 * q8_K): the eight 6-bit scales and mins unpacked as bytes by 32-bit word
 * operations, widened to int16; per 32-element sub-block the maddubs'
 * int16 pair sums are scaled by the sub-block's integer scale in madd and
 * summed in int32 over the super-block (exact: |.| <= 8*2*2*31*127*63);
 * one FMA adds d*D*sum. The mins: madd of the eight mins with the
 * activation's per-32 integer sums, (dmin*D) * that by a 4-lane FMA,
 * subtracted at the end of the row. */
TXC_INLINE_AVX2 void k_qk(bool five, const uint8_t *w, size_t rb, int64_t n, int64_t nb, const txc_qact *a, int m,
                          float *y, int64_t ldy)
{
    const __m256i m4 = _mm256_set1_epi8(15), one = _mm256_set1_epi8(1);
    const size_t SB = five ? 176 : 144;
    for (int64_t j = 0; j < n; j++) {
        const uint8_t *row = w + (size_t)j * rb;
        __m256 acc[TXC_QDOT_M];
        __m128 accm[TXC_QDOT_M];
        for (int r = 0; r < m; r++)
            acc[r] = _mm256_setzero_ps(), accm[r] = _mm_setzero_ps();
        for (int64_t sb = 0; sb < nb / 8; sb++) {
            const uint8_t *p = row + sb * SB;
            __m128 F = _mm_cvtph_ps(_mm_cvtsi32_si128((int)ld32(p))); /* d, dmin */
            uint32_t q0 = ld32(p + 4), q1 = ld32(p + 8), q2 = ld32(p + 12);
            uint32_t sc_lo = q0 & 0x3f3f3f3fu, mn_lo = q1 & 0x3f3f3f3fu;
            uint32_t sc_hi = (q2 & 0x0f0f0f0fu) | ((q0 >> 2) & 0x30303030u);
            uint32_t mn_hi = ((q2 >> 4) & 0x0f0f0f0fu) | ((q1 >> 2) & 0x30303030u);
            __m256i sm = _mm256_cvtepu8_epi16(_mm_set_epi32((int)mn_hi, (int)mn_lo, (int)sc_hi, (int)sc_lo));
            __m256i scb = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sm));
            __m128i mins = _mm256_extracti128_si256(sm, 1);
            __m256i sumi[TXC_QDOT_M];
            __m128 dd[TXC_QDOT_M];
            for (int r = 0; r < m; r++) {
                dd[r] = _mm_mul_ps(F, _mm_set1_ps(a[r].D[sb]));
                __m128i pm = _mm_madd_epi16(mins, _mm_loadu_si128((const __m128i *)(a[r].bs + sb * 8)));
                accm[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(pm), _mm_shuffle_ps(dd[r], dd[r], 0x55), accm[r]);
                sumi[r] = _mm256_setzero_si256();
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
                /* int16 scale k in every lane: bytes 2k, 2k+1 of each 128-bit half */
                __m256i slo = _mm256_shuffle_epi8(scb, _mm256_set1_epi16((short)(((4 * g + 1) << 8) | (4 * g))));
                __m256i shi = _mm256_shuffle_epi8(scb, _mm256_set1_epi16((short)(((4 * g + 3) << 8) | (4 * g + 2))));
                for (int r = 0; r < m; r++) {
                    const int8_t *q = a[r].qs + sb * 256 + 64 * g;
                    __m256i plo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)q)), slo);
                    __m256i phi =
                        _mm256_madd_epi16(_mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(q + 32))), shi);
                    sumi[r] = _mm256_add_epi32(sumi[r], _mm256_add_epi32(plo, phi));
                }
            }
            for (int r = 0; r < m; r++)
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[r]), _mm256_broadcastss_ps(dd[r]), acc[r]);
        }
        for (int r = 0; r < m; r++)
            y[r * ldy + j] = hsum(acc[r]) - hsum128(accm[r]);
    }
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

/* One activation block (32 or 256 floats) as txc_qact_quantize's portable
 * loop computes it, bit for bit on finite inputs: amax by max (order-free),
 * id = 127/amax and d in scalar, x*id rounded to nearest even (ggml's x86
 * quantize_row_q8_0/q8_1), NaN made 0, clamped to +-127; the per-32 sums
 * in int32. */
TXC_AVX2 static void qact_block_avx2(const float *x, int64_t block, int8_t *q, float *d_out, int32_t *sums)
{
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 mx = _mm256_setzero_ps();
    for (int64_t j = 0; j < block; j += 8)
        mx = _mm256_max_ps(mx, _mm256_and_ps(_mm256_loadu_ps(x + j), absm));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    float amax = _mm_cvtss_f32(m4);
    float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    *d_out = block == 256 ? (amax != 0.0f ? 1.0f / id : 0.0f) : amax / 127.0f;
    const __m256 vid = _mm256_set1_ps(id);
    const __m256 lim = _mm256_set1_ps(127.0f), nlim = _mm256_set1_ps(-127.0f);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t b = 0; b < block / 32; b++) {
        __m256i iv[4];
        for (int k = 0; k < 4; k++) {
            __m256 p = _mm256_mul_ps(_mm256_loadu_ps(x + b * 32 + k * 8), vid);
            __m256 r = _mm256_round_ps(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            r = _mm256_and_ps(r, _mm256_cmp_ps(p, p, _CMP_ORD_Q));
            r = _mm256_min_ps(_mm256_max_ps(r, nlim), lim);
            iv[k] = _mm256_cvttps_epi32(r);
        }
        __m256i q16a = _mm256_packs_epi32(iv[0], iv[1]), q16b = _mm256_packs_epi32(iv[2], iv[3]);
        __m256i q8v = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(q16a, q16b), perm);
        _mm256_storeu_si256((__m256i *)(q + b * 32), q8v);
        __m256i s32 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q8v), _mm256_set1_epi16(1));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
        sums[b] = _mm_cvtsi128_si32(s4);
    }
}

txc_qact_block_fn txc_qact_block_avx2(void) { return qact_block_avx2; }

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
txc_qact_block_fn txc_qact_block_avx2(void) { return NULL; }
#endif
