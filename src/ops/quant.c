/* ggml's block-quantized types: dequantization and the reference
 * quantizers (txc/quant.h). Ported from ggml-quants.c (dequantize_row_*,
 * quantize_row_*_ref, make_qkx2_quants, make_qx_quants); the file is built
 * in ISO C mode, so no multiply-add is contracted (bit-exact against
 * gguf.quants, see txc/quant.h). */
#include "txc/quant.h"

#include <float.h>
#include <stdbool.h>
#include <math.h>
#include <string.h>

#include "ops/quant_impl.h"

static inline float h2f(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return txc_f16_to_f32(h);
}

static inline void f2h(uint8_t *p, float f)
{
    uint16_t h = txc_f32_to_f16(f);
    memcpy(p, &h, 2);
}

/* ---- dequantization (dequantize_row_*) ------------------------------------------ */

static void deq_q8_0(const uint8_t *b, float *y)
{
    float d = h2f(b);
    const int8_t *q = (const int8_t *)(b + 2);
    for (int j = 0; j < 32; j++)
        y[j] = (float)q[j] * d;
}

/* Q4_0, Q4_1, Q5_0, Q5_1: one shape (dequantize_row_q4_0 ... q5_1): a float16 d (and m with
 * a min), for the 5-bit types 32 high bits, 16 bytes of nibbles (elements j and j + 16).
 * Without a min the value is (q - offset) * d, with one q * d + m. */
static inline void deq_32(const uint8_t *b, float *y, bool has_min, bool five)
{
    float d = h2f(b), m = has_min ? h2f(b + 2) : 0.0f;
    size_t at = has_min ? 4 : 2;
    uint32_t qh = 0;
    if (five) {
        memcpy(&qh, b + at, 4);
        at += 4;
    }
    const uint8_t *q = b + at;
    int offset = five ? 16 : 8;
    for (int j = 0; j < 16; j++) {
        int x0 = (q[j] & 0x0f) | (int)(((qh >> j) << 4) & 0x10);
        int x1 = (q[j] >> 4) | (int)((qh >> (j + 12)) & 0x10);
        if (has_min) {
            y[j] = (float)x0 * d + m;
            y[j + 16] = (float)x1 * d + m;
        } else {
            y[j] = (float)(x0 - offset) * d;
            y[j + 16] = (float)(x1 - offset) * d;
        }
    }
}

static void deq_q4_0(const uint8_t *b, float *y) { deq_32(b, y, false, false); }
static void deq_q4_1(const uint8_t *b, float *y) { deq_32(b, y, true, false); }
static void deq_q5_0(const uint8_t *b, float *y) { deq_32(b, y, false, true); }
static void deq_q5_1(const uint8_t *b, float *y) { deq_32(b, y, true, true); }

void txc_quant_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m)
{
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

static void deq_q4_k(const uint8_t *b, float *y)
{
    float d = h2f(b), dmin = h2f(b + 2);
    const uint8_t *sc = b + 4, *q = b + 16;
    for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
        uint8_t s, m;
        txc_quant_scale_min_k4(is, sc, &s, &m);
        float d1 = d * s, m1 = dmin * m;
        txc_quant_scale_min_k4(is + 1, sc, &s, &m);
        float d2 = d * s, m2 = dmin * m;
        for (int l = 0; l < 32; l++)
            *y++ = d1 * (float)(q[l] & 0xf) - m1;
        for (int l = 0; l < 32; l++)
            *y++ = d2 * (float)(q[l] >> 4) - m2;
    }
}

static void deq_q5_k(const uint8_t *b, float *y)
{
    float d = h2f(b), dmin = h2f(b + 2);
    const uint8_t *sc = b + 4, *qh = b + 16, *ql = b + 48;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0, is = 0; j < 256; j += 64, is += 2, ql += 32) {
        uint8_t s, m;
        txc_quant_scale_min_k4(is, sc, &s, &m);
        float d1 = d * s, m1 = dmin * m;
        txc_quant_scale_min_k4(is + 1, sc, &s, &m);
        float d2 = d * s, m2 = dmin * m;
        for (int l = 0; l < 32; l++)
            *y++ = d1 * (float)((ql[l] & 0xf) + (qh[l] & u1 ? 16 : 0)) - m1;
        for (int l = 0; l < 32; l++)
            *y++ = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        u1 = (uint8_t)(u1 << 2);
        u2 = (uint8_t)(u2 << 2);
    }
}

static void deq_q6_k(const uint8_t *b, float *y)
{
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = h2f(b + 208);
    for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8)
        for (int l = 0; l < 32; l++) {
            int is = l / 16;
            int q1 = ((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32;
            int q2 = ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
            int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l] = d * (float)sc[is] * (float)q1;
            y[l + 32] = d * (float)sc[is + 2] * (float)q2;
            y[l + 64] = d * (float)sc[is + 4] * (float)q3;
            y[l + 96] = d * (float)sc[is + 6] * (float)q4;
        }
}

void txc_quant_dequantize_block(txc_dtype dt, const void *block, float *y)
{
    const uint8_t *b = block;
    switch (dt) {
    case TXC_Q8_0: deq_q8_0(b, y); break;
    case TXC_Q4_0: deq_q4_0(b, y); break;
    case TXC_Q4_1: deq_q4_1(b, y); break;
    case TXC_Q5_0: deq_q5_0(b, y); break;
    case TXC_Q5_1: deq_q5_1(b, y); break;
    case TXC_Q4_K: deq_q4_k(b, y); break;
    case TXC_Q5_K: deq_q5_k(b, y); break;
    case TXC_Q6_K: deq_q6_k(b, y); break;
    default: break;
    }
}

static txc_status check_n(txc_dtype dt, int64_t n, const char *what)
{
    if (!txc_dtype_is_quantized(dt) && !txc_dtype_is_float(dt))
        return txc_error(TXC_ERR_UNSUPPORTED, "%s: %s is not a float or quantized dtype", what, txc_dtype_name(dt));
    if (n < 0 || n % txc_dtype_block_size(dt) != 0)
        return txc_error(TXC_ERR_INVALID, "%s: %lld elements are not whole %s blocks of %lld", what, (long long)n,
                         txc_dtype_name(dt), (long long)txc_dtype_block_size(dt));
    return TXC_OK;
}

txc_status txc_quant_dequantize(txc_dtype dt, const void *src, float *dst, int64_t n)
{
    txc_status s = check_n(dt, n, "dequantize");
    if (s != TXC_OK)
        return s;
    if (!txc_dtype_is_quantized(dt)) {
        txc_dtype_convert(dt, src, TXC_F32, dst, (size_t)n);
        return TXC_OK;
    }
    int64_t bs = txc_dtype_block_size(dt);
    size_t bb = txc_dtype_block_bytes(dt);
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / bs; i++)
        txc_quant_dequantize_block(dt, b + (size_t)i * bb, dst + i * bs);
    return TXC_OK;
}

/* ---- reference quantizers (quantize_row_*_ref) ------------------------------------
 * ggml converts floats to integers directly; a value outside the integer's
 * range (only from NaN or infinite inputs) would be undefined behaviour in
 * C, so every conversion goes through to_int, which clamps first and is the
 * plain conversion for the finite values the reference produces. */

static inline int to_int(float v, int lo, int hi)
{
    return v >= (float)hi ? hi : v <= (float)lo ? lo : v == v ? (int)v : 0;
}

static void q8_0_ref(const float *x, uint8_t *y)
{
    float amax = 0.0f;
    for (int j = 0; j < 32; j++)
        amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]); /* MAX(amax, fabsf(v)) */
    float d = amax / 127, id = d != 0.0f ? 1.0f / d : 0.0f;
    f2h(y, d);
    for (int j = 0; j < 32; j++)
        y[2 + j] = (uint8_t)(int8_t)to_int(roundf(x[j] * id), -128, 127);
}

/* amax and the signed value that has it (the first one) */
static float signed_absmax(const float *x, int n)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    return max;
}

static void q4_0_ref(const float *x, uint8_t *y)
{
    float d = signed_absmax(x, 32) / -8, id = d != 0.0f ? 1.0f / d : 0.0f;
    f2h(y, d);
    for (int j = 0; j < 16; j++) {
        int x0 = to_int(x[j] * id + 8.5f, -128, 127), x1 = to_int(x[j + 16] * id + 8.5f, -128, 127);
        x0 = x0 < 15 ? x0 : 15;
        x1 = x1 < 15 ? x1 : 15;
        y[2 + j] = (uint8_t)(x0 | (x1 << 4));
    }
}

static void minmax(const float *x, int n, float *mn, float *mx)
{
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < lo)
            lo = x[j];
        if (x[j] > hi)
            hi = x[j];
    }
    *mn = lo, *mx = hi;
}

static void q4_1_ref(const float *x, uint8_t *y)
{
    float min, max;
    minmax(x, 32, &min, &max);
    float d = (max - min) / 15, id = d != 0.0f ? 1.0f / d : 0.0f;
    f2h(y, d);
    f2h(y + 2, min);
    for (int j = 0; j < 16; j++) {
        int x0 = to_int((x[j] - min) * id + 0.5f, -128, 127), x1 = to_int((x[j + 16] - min) * id + 0.5f, -128, 127);
        x0 = x0 < 15 ? x0 : 15;
        x1 = x1 < 15 ? x1 : 15;
        y[4 + j] = (uint8_t)(x0 | (x1 << 4));
    }
}

static void q5_0_ref(const float *x, uint8_t *y)
{
    float d = signed_absmax(x, 32) / -16, id = d != 0.0f ? 1.0f / d : 0.0f;
    f2h(y, d);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        int x0 = to_int(x[j] * id + 16.5f, -128, 127), x1 = to_int(x[j + 16] * id + 16.5f, -128, 127);
        x0 = x0 < 31 ? x0 : 31;
        x1 = x1 < 31 ? x1 : 31;
        y[6 + j] = (uint8_t)((x0 & 0x0f) | ((x1 & 0x0f) << 4));
        qh |= (((uint32_t)x0 & 0x10u) >> 4) << j;
        qh |= (((uint32_t)x1 & 0x10u) >> 4) << (j + 16);
    }
    memcpy(y + 2, &qh, 4);
}

static void q5_1_ref(const float *x, uint8_t *y)
{
    float min, max;
    minmax(x, 32, &min, &max);
    float d = (max - min) / 31, id = d != 0.0f ? 1.0f / d : 0.0f;
    f2h(y, d);
    f2h(y + 2, min);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        unsigned x0 = (unsigned)to_int((x[j] - min) * id + 0.5f, 0, 255), x1 = (unsigned)to_int((x[j + 16] - min) * id + 0.5f, 0, 255);
        y[8 + j] = (uint8_t)((x0 & 0x0f) | ((x1 & 0x0f) << 4));
        qh |= ((x0 & 0x10u) >> 4) << j;
        qh |= ((x1 & 0x10u) >> 4) << (j + 16);
    }
    memcpy(y + 4, &qh, 4);
}

/* ggml's nearest_int: round to nearest even by the 1.5*2^23 trick (|v| < 2^22) */
static inline int nearest_int(float v)
{
    float f = v + 12582912.f;
    int32_t i;
    memcpy(&i, &f, 4);
    return (i & 0x007fffff) - 0x00400000;
}

#define GROUP_MAX_EPS 1e-15f
#define IMAX(a, b) ((a) > (b) ? (a) : (b))
#define IMIN(a, b) ((a) < (b) ? (a) : (b))

static float make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                              uint8_t *Laux, float rmin, float rdelta, int nstep)
{
    float min = x[0], max = x[0], sum_w = weights[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min)
            min = x[i];
        if (x[i] > max)
            max = x[i];
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0)
        min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i)
            L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min), scale = 1 / iscale, best_error = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)IMAX(0, IMIN(nmax, l));
        float diff = scale * L[i] + min - x[i];
        best_error += weights[i] * (diff * diff);
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * (x[i] - min));
            l = IMAX(0, IMIN(nmax, l));
            Laux[i] = (uint8_t)l;
            float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                cur_error += weights[i] * (diff * diff);
            }
            if (cur_error < best_error) {
                memcpy(L, Laux, (size_t)n);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* make_qx_quants with rmse_type 1 and no importance weights (Q6_K's call) */
static float make_qx_quants(int n, int nmax, const float *x, int8_t *L)
{
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; ++i)
            L[i] = 0;
        return 0.f;
    }
    float iscale = -nmax / max, sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = IMAX(-nmax, IMIN(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f, best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0)
            continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * x[i]);
            l = IMAX(-nmax, IMIN(nmax - 1, l));
            float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                int l = nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + IMAX(-nmax, IMIN(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins (nmax 15 or 31) */
static void qk_scales_mins(const float *x, int nmax, uint8_t *y, uint8_t *L)
{
    uint8_t Laux[32];
    float weights[32], mins[8], scales[8], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l)
            sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; ++l)
            weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = nmax == 15 ? make_qkx2_quants(32, 15, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -1.f, 0.1f, 20)
                               : make_qkx2_quants(32, 31, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -0.5f, 0.1f, 15);
        if (scales[j] > max_scale)
            max_scale = scales[j];
        if (mins[j] > max_min)
            max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f, inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    uint8_t *sc = y + 4;
    memset(sc, 0, 12);
    for (int j = 0; j < 8; ++j) {
        uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[j]), lm = (uint8_t)nearest_int(inv_min * mins[j]);
        ls = ls < 63 ? ls : 63;
        lm = lm < 63 ? lm : 63;
        if (j < 4) {
            sc[j] = ls;
            sc[j + 4] = lm;
        } else {
            sc[j + 4] = (uint8_t)((ls & 0xf) | ((lm & 0xf) << 4));
            sc[j - 4] |= (uint8_t)((ls >> 4) << 6);
            sc[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    f2h(y, max_scale / 63.f);
    f2h(y + 2, max_min / 63.f);
    for (int j = 0; j < 8; ++j) {
        uint8_t s, m;
        txc_quant_scale_min_k4(j, sc, &s, &m);
        float d = h2f(y) * s;
        if (d == 0.0f)
            continue;
        float dm = h2f(y + 2) * m;
        for (int ii = 0; ii < 32; ++ii) {
            int l = nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = (uint8_t)IMAX(0, IMIN(nmax, l));
        }
    }
}

static void q4_k_ref(const float *x, uint8_t *y)
{
    uint8_t L[256];
    qk_scales_mins(x, 15, y, L);
    uint8_t *q = y + 16;
    for (int j = 0; j < 256; j += 64, q += 32)
        for (int l = 0; l < 32; ++l)
            q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
}

static void q5_k_ref(const float *x, uint8_t *y)
{
    uint8_t L[256];
    qk_scales_mins(x, 31, y, L);
    uint8_t *qh = y + 16, *ql = y + 48;
    memset(qh, 0, 32);
    uint8_t m1 = 1, m2 = 2;
    for (int n = 0; n < 256; n += 64, ql += 32) {
        for (int j = 0; j < 32; ++j) {
            int l1 = L[n + j], l2 = L[n + j + 32];
            if (l1 > 15) {
                l1 -= 16;
                qh[j] |= m1;
            }
            if (l2 > 15) {
                l2 -= 16;
                qh[j] |= m2;
            }
            ql[j] = (uint8_t)(l1 | (l2 << 4));
        }
        m1 = (uint8_t)(m1 << 2);
        m2 = (uint8_t)(m2 << 2);
    }
}

static void q6_k_ref(const float *x, uint8_t *y)
{
    int8_t L[256];
    float scales[16], max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < 16; ++ib) {
        float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
        scales[ib] = scale;
        if (fabsf(scale) > max_abs_scale) {
            max_abs_scale = fabsf(scale);
            max_scale = scale;
        }
    }
    if (max_abs_scale < GROUP_MAX_EPS) {
        memset(y, 0, 210);
        return;
    }
    uint8_t *ql = y, *qh = y + 128;
    int8_t *sc = (int8_t *)(y + 192);
    float iscale = -128.f / max_scale;
    f2h(y + 208, 1 / iscale);
    for (int ib = 0; ib < 16; ++ib)
        sc[ib] = (int8_t)IMIN(127, nearest_int(iscale * scales[ib]));
    for (int j = 0; j < 16; ++j) {
        float d = h2f(y + 208) * sc[j];
        if (d == 0.0f)
            continue;
        for (int ii = 0; ii < 16; ++ii) {
            int l = nearest_int(x[16 * j + ii] / d);
            L[16 * j + ii] = (int8_t)(IMAX(-32, IMIN(31, l)) + 32);
        }
    }
    for (int j = 0; j < 256; j += 128, ql += 64, qh += 32)
        for (int l = 0; l < 32; ++l) {
            uint8_t q1 = L[j + l] & 0xf, q2 = L[j + l + 32] & 0xf, q3 = L[j + l + 64] & 0xf, q4 = L[j + l + 96] & 0xf;
            ql[l] = (uint8_t)(q1 | (q3 << 4));
            ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
            qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                              ((L[j + l + 96] >> 4) << 6));
        }
}

txc_status txc_quant_quantize(txc_dtype dt, const float *src, void *dst, int64_t n)
{
    txc_status s = check_n(dt, n, "quantize");
    if (s != TXC_OK)
        return s;
    if (!txc_dtype_is_quantized(dt)) {
        txc_dtype_convert(TXC_F32, src, dt, dst, (size_t)n);
        return TXC_OK;
    }
    void (*f)(const float *, uint8_t *) = NULL;
    switch (dt) {
    case TXC_Q8_0: f = q8_0_ref; break;
    case TXC_Q4_0: f = q4_0_ref; break;
    case TXC_Q4_1: f = q4_1_ref; break;
    case TXC_Q5_0: f = q5_0_ref; break;
    case TXC_Q5_1: f = q5_1_ref; break;
    case TXC_Q4_K: f = q4_k_ref; break;
    case TXC_Q5_K: f = q5_k_ref; break;
    case TXC_Q6_K: f = q6_k_ref; break;
    default: break;
    }
    int64_t bs = txc_dtype_block_size(dt);
    size_t bb = txc_dtype_block_bytes(dt);
    uint8_t *y = dst;
    for (int64_t i = 0; i < n / bs; i++)
        f(src + i * bs, y + (size_t)i * bb);
    return TXC_OK;
}
