/* Element types; see include/txc/dtype.h. */
#include "txc/dtype.h"

#include <math.h>
#include <string.h>

static const struct {
    const char *name, *st;
    size_t size;
} info[TXC_DTYPE_COUNT] = {
    [TXC_F32] = {"float32", "F32", 4},  [TXC_F16] = {"float16", "F16", 2},
    [TXC_BF16] = {"bfloat16", "BF16", 2}, [TXC_I32] = {"int32", "I32", 4},
    [TXC_I64] = {"int64", "I64", 8},    [TXC_BOOL] = {"bool", "BOOL", 1},
};

size_t txc_dtype_size(txc_dtype dt) { return (unsigned)dt < TXC_DTYPE_COUNT ? info[dt].size : 0; }
const char *txc_dtype_name(txc_dtype dt) { return (unsigned)dt < TXC_DTYPE_COUNT ? info[dt].name : "?"; }
bool txc_dtype_is_float(txc_dtype dt) { return dt == TXC_F32 || dt == TXC_F16 || dt == TXC_BF16; }

bool txc_dtype_from_safetensors(const char *s, txc_dtype *out)
{
    for (int i = 0; i < TXC_DTYPE_COUNT; i++)
        if (strcmp(s, info[i].st) == 0) {
            *out = (txc_dtype)i;
            return true;
        }
    return false;
}

bool txc_dtype_parse(const char *s, txc_dtype *out)
{
    static const struct { const char *alias; txc_dtype dt; } aliases[] = {
        {"f32", TXC_F32}, {"fp32", TXC_F32}, {"float", TXC_F32},
        {"f16", TXC_F16}, {"fp16", TXC_F16}, {"half", TXC_F16},
        {"bf16", TXC_BF16}, {"i32", TXC_I32}, {"i64", TXC_I64}, {"long", TXC_I64},
    };
    for (int i = 0; i < TXC_DTYPE_COUNT; i++)
        if (strcmp(s, info[i].name) == 0 || strcmp(s, info[i].st) == 0) {
            *out = (txc_dtype)i;
            return true;
        }
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(s, aliases[i].alias) == 0) {
            *out = aliases[i].dt;
            return true;
        }
    return false;
}

float txc_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t txc_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet NaN */
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

float txc_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do { e++; man <<= 1; } while (!(man & 0x400u));
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t txc_f32_to_f16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return sign | 0x7e00u; /* NaN */
    if (a >= 0x477ff000u)     /* rounds to >= 65520: inf */
        return sign | 0x7c00u;
    if (a < 0x38800000u) { /* below 2^-14: subnormal or zero */
        if (a < 0x33000000u) /* below 2^-25: rounds to zero */
            return sign;
        uint32_t e = a >> 23, man = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e; /* 14..24 */
        uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1u)))
            half++;
        return sign | (uint16_t)half;
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u); /* round to nearest even */
    return sign | (uint16_t)((r - 0x38000000u) >> 13);
}

double txc_dtype_load(txc_dtype dt, const void *base, size_t i)
{
    switch (dt) {
    case TXC_F32: return ((const float *)base)[i];
    case TXC_F16: return txc_f16_to_f32(((const uint16_t *)base)[i]);
    case TXC_BF16: return txc_bf16_to_f32(((const uint16_t *)base)[i]);
    case TXC_I32: return ((const int32_t *)base)[i];
    case TXC_I64: return (double)((const int64_t *)base)[i];
    case TXC_BOOL: return ((const uint8_t *)base)[i] ? 1.0 : 0.0;
    default: return 0.0;
    }
}

/* float -> integer as torch: truncate toward zero; NaN/out of range -> 0
 * here (torch leaves it unspecified; C makes it undefined, we must not). */
static int64_t to_i64(double v, double lo, double hi)
{
    if (!(v >= lo && v <= hi))
        return 0;
    return (int64_t)v;
}

void txc_dtype_store(txc_dtype dt, void *base, size_t i, double v)
{
    switch (dt) {
    case TXC_F32: ((float *)base)[i] = (float)v; break;
    case TXC_F16: ((uint16_t *)base)[i] = txc_f32_to_f16((float)v); break;
    case TXC_BF16: ((uint16_t *)base)[i] = txc_f32_to_bf16((float)v); break;
    case TXC_I32: ((int32_t *)base)[i] = (int32_t)to_i64(v, -2147483648.0, 2147483647.0); break;
    case TXC_I64: ((int64_t *)base)[i] = to_i64(v, -9223372036854775808.0, 9223372036854774784.0); break;
    case TXC_BOOL: ((uint8_t *)base)[i] = v != 0.0; break;
    default: break;
    }
}

void txc_dtype_convert(txc_dtype src_dt, const void *src, txc_dtype dst_dt, void *dst, size_t n)
{
    if (src_dt == dst_dt) {
        memmove(dst, src, n * txc_dtype_size(src_dt));
        return;
    }
    if (dst_dt == TXC_F32 && src_dt == TXC_BF16) {
        for (size_t i = 0; i < n; i++)
            ((float *)dst)[i] = txc_bf16_to_f32(((const uint16_t *)src)[i]);
        return;
    }
    if (dst_dt == TXC_F32 && src_dt == TXC_F16) {
        for (size_t i = 0; i < n; i++)
            ((float *)dst)[i] = txc_f16_to_f32(((const uint16_t *)src)[i]);
        return;
    }
    if (src_dt == TXC_I64 && dst_dt != TXC_F32 && dst_dt != TXC_F16 && dst_dt != TXC_BF16) {
        for (size_t i = 0; i < n; i++) { /* exact for large integers */
            int64_t v = ((const int64_t *)src)[i];
            if (dst_dt == TXC_I32) ((int32_t *)dst)[i] = (int32_t)(uint32_t)(uint64_t)v;
            else ((uint8_t *)dst)[i] = v != 0;
        }
        return;
    }
    for (size_t i = 0; i < n; i++)
        txc_dtype_store(dst_dt, dst, i, txc_dtype_load(src_dt, src, i));
}
