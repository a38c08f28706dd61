/*
 * txc/dtype.h — element types and their conversions.
 *
 * The dtypes of torch that txc supports: float32, float16, bfloat16, int32,
 * int64, bool. Conversions follow torch: f32 -> bf16/f16 round to nearest
 * even; NaN stays NaN; bool is 0/1 stored in one byte.
 */
#ifndef TXC_DTYPE_H
#define TXC_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum txc_dtype {
    TXC_F32 = 0,
    TXC_F16 = 1,
    TXC_BF16 = 2,
    TXC_I32 = 3,
    TXC_I64 = 4,
    TXC_BOOL = 5,
    TXC_DTYPE_COUNT
} txc_dtype;

/* Bytes per element (4, 2, 2, 4, 8, 1). */
size_t txc_dtype_size(txc_dtype dt);
/* torch's name: "float32", "float16", "bfloat16", "int32", "int64", "bool". */
const char *txc_dtype_name(txc_dtype dt);
/* True for f32/f16/bf16. */
bool txc_dtype_is_float(txc_dtype dt);
/* safetensors' dtype string ("F32", "F16", "BF16", "I32", "I64", "BOOL") to
 * a dtype; returns false for anything else (e.g. "F64", "I8"). */
bool txc_dtype_from_safetensors(const char *s, txc_dtype *out);
/* torch's name or safetensors' ("float32", "bf16", "F16"...) to a dtype. */
bool txc_dtype_parse(const char *s, txc_dtype *out);

/* Scalar conversions (round to nearest even, as torch; NaN stays NaN).
 * C99 inline definitions, branch-free so that loops over them vectorise;
 * src/core/dtype.c emits the exported copies (for callers that take their
 * address or build without optimisation). */
inline float txc_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

inline uint16_t txc_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16; /* round to nearest even */
    uint32_t q = (u >> 16) | 0x40u;                       /* NaN: keep it a quiet NaN */
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? q : r);
}

inline float txc_f16_to_f32(uint16_t h)
{
    uint32_t em = (uint32_t)(h & 0x7fffu) << 13; /* exponent and mantissa at their f32 place */
    uint32_t e = em & 0x0f800000u;
    uint32_t n = em + (e == 0x0f800000u ? 0x70000000u : 0x38000000u); /* normal; inf/NaN */
    uint32_t zu = em + 0x38800000u; /* zero/subnormal: 2^-14 * (1 + m/1024) - 2^-14, exact */
    float z;
    memcpy(&z, &zu, 4);
    z -= 6.103515625e-05f;
    memcpy(&zu, &z, 4);
    uint32_t sub = 0u - (uint32_t)(e == 0); /* a mask, not ?: (see txc_f32_to_f16) */
    uint32_t u = (zu & sub) | (n & ~sub) | ((uint32_t)(h & 0x8000u) << 16);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

inline uint16_t txc_f32_to_f16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    /* normal: rebias 127 -> 15 and round the 13 dropped bits to nearest even
     * (a carry into exponent 31 gives inf) */
    uint32_t r = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;
    /* below 2^-14: adding 0.5 lines the 10 subnormal bits up at the bottom of
     * the float and the FPU rounds them to nearest even */
    float af, s;
    memcpy(&af, &a, 4);
    s = af + 0.5f;
    uint32_t su;
    memcpy(&su, &s, 4);
    /* selects by masks, not ?: (which the compiler may turn into branches
     * and then not vectorise the float addition under them) */
    uint32_t sub = 0u - (uint32_t)(a < 0x38800000u);
    uint32_t inf = 0u - (uint32_t)(a >= 0x47800000u); /* >= 65536: inf */
    uint32_t nan = 0u - (uint32_t)(a > 0x7f800000u);
    r = ((su - 0x3f000000u) & sub) | (r & ~sub);
    r = (0x7c00u & inf) | (r & ~inf);
    r = (0x7e00u & nan) | (r & ~nan);
    return (uint16_t)(sign | r);
}

/* Read element i of a buffer of dtype dt as double / write a double into it
 * (with torch's conversion rules: float->int truncates toward zero,
 * nonzero->bool is true). Slow path for tests and generic kernels. */
double txc_dtype_load(txc_dtype dt, const void *base, size_t i);
void txc_dtype_store(txc_dtype dt, void *base, size_t i, double v);

/* Convert n contiguous elements from one dtype to another, with torch's
 * casts: float -> integer truncates toward zero (NaN and values outside
 * int64 give 0; int32 wraps as int64 -> int32 does), integer -> float rounds
 * once (int64 -> float32 directly, not through double), nonzero -> true. */
void txc_dtype_convert(txc_dtype src_dt, const void *src, txc_dtype dst_dt,
                       void *dst, size_t n);
/* The same over strided elements: strides in bytes, n elements. */
void txc_dtype_convert_strided(txc_dtype src_dt, const void *src, int64_t src_stride,
                               txc_dtype dst_dt, void *dst, int64_t dst_stride, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
