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

/* Scalar conversions (round to nearest even, as torch). */
float txc_bf16_to_f32(uint16_t h);
uint16_t txc_f32_to_bf16(float f);
float txc_f16_to_f32(uint16_t h);
uint16_t txc_f32_to_f16(float f);

/* Read element i of a buffer of dtype dt as double / write a double into it
 * (with torch's conversion rules: float->int truncates toward zero,
 * nonzero->bool is true). Slow path for tests and generic kernels. */
double txc_dtype_load(txc_dtype dt, const void *base, size_t i);
void txc_dtype_store(txc_dtype dt, void *base, size_t i, double v);

/* Convert n contiguous elements from one dtype to another. */
void txc_dtype_convert(txc_dtype src_dt, const void *src, txc_dtype dst_dt,
                       void *dst, size_t n);

#ifdef __cplusplus
}
#endif
#endif
