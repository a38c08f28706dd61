/*
 * txc/dtype.h — element types and their conversions.
 *
 * The dtypes of torch that txc supports: float32, float16, bfloat16, int32,
 * int64, bool. Conversions follow torch: f32 -> bf16/f16 round to nearest
 * even; NaN stays NaN; bool is 0/1 stored in one byte.
 *
 * And ggml's block-quantized weight types (GGUF files, llama.cpp): Q8_0,
 * Q4_0, Q4_1, Q5_0, Q5_1 (blocks of 32 elements) and the k-quants Q4_K,
 * Q5_K, Q6_K (super-blocks of 256), with ggml's byte layout of a block
 * (ggml-common.h: block_q8_0, block_q4_0, ..., block_q6_K). An array of a
 * block dtype is a weight of shape (rows, K) laid out as ggml's (ne0 = K
 * contiguous): each row is K / block_size blocks, so K must be a multiple
 * of the block size (txc_array_new / txc_array_from_storage refuse anything
 * else), and a row takes txc_dtype_row_bytes(dt, K) bytes. Such arrays are
 * read by the linear and embedding ops only (src/ops/quant*.c); other ops
 * refuse them.
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
    /* block-quantized (ggml): elements per block / bytes per block */
    TXC_Q8_0 = 6, /*  32 /  34: f16 d, int8 qs[32]; x = d*q */
    TXC_Q4_0 = 7, /*  32 /  18: f16 d, qs[16] (low nibbles: 0..15, high: 16..31); x = d*(q-8) */
    TXC_Q4_1 = 8, /*  32 /  20: f16 d, f16 m, qs[16]; x = d*q + m */
    TXC_Q5_0 = 9, /*  32 /  22: f16 d, qh[4] (5th bits), qs[16]; x = d*(q-16) */
    TXC_Q5_1 = 10, /* 32 /  24: f16 d, f16 m, qh[4], qs[16]; x = d*q + m */
    TXC_Q4_K = 11, /* 256 / 144: f16 d, f16 dmin, scales[12] (8 x 6-bit scale+min), qs[128] */
    TXC_Q5_K = 12, /* 256 / 176: f16 d, f16 dmin, scales[12], qh[32], qs[128] */
    TXC_Q6_K = 13, /* 256 / 210: ql[128], qh[64], int8 scales[16], f16 d */
    TXC_DTYPE_COUNT
} txc_dtype;

/* Bytes per element (4, 2, 2, 4, 8, 1); 0 for a block-quantized dtype
 * (whose elements are not whole bytes: use txc_dtype_nbytes). */
size_t txc_dtype_size(txc_dtype dt);
/* torch's name: "float32", "float16", "bfloat16", "int32", "int64", "bool";
 * ggml's for the quantized ones: "q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
 * "q4_K", "q5_K", "q6_K" (ggml_type_name). */
const char *txc_dtype_name(txc_dtype dt);
/* True for Q8_0 ... Q6_K. */
bool txc_dtype_is_quantized(txc_dtype dt);
/* Elements per block: 32 (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1), 256 (Q4_K, Q5_K,
 * Q6_K), 1 for the other dtypes (ggml_blck_size). 0 for a bad dtype. */
int64_t txc_dtype_block_size(txc_dtype dt);
/* Bytes per block: 34, 18, 20, 22, 24, 144, 176, 210; txc_dtype_size for
 * the other dtypes (ggml_type_size). 0 for a bad dtype. */
size_t txc_dtype_block_bytes(txc_dtype dt);
/* Bytes of `numel` elements: numel / block_size * block_bytes. Returns
 * false (and leaves *out) when numel is negative, not a multiple of the
 * block size, or the product overflows size_t. */
bool txc_dtype_nbytes(txc_dtype dt, int64_t numel, size_t *out);
/* Bytes of one row of K elements (ggml_row_size); 0 when K is negative or
 * not a multiple of the block size. */
size_t txc_dtype_row_bytes(txc_dtype dt, int64_t K);

/* ggml's tensor type ids (enum ggml_type in ggml.h, the numbers stored in a
 * GGUF file's tensor infos): F32=0, F16=1, Q4_0=2, Q4_1=3, Q5_0=6, Q5_1=7,
 * Q8_0=8, Q4_K=12, Q5_K=13, Q6_K=14, I32=26, I64=27, BF16=30. */
/* ggml type id -> txc dtype; false for a type txc does not read (Q2_K,
 * IQ*, I8, F64, ...) or an unknown id. */
bool txc_dtype_from_ggml(uint32_t ggml_type, txc_dtype *out);
/* txc dtype -> ggml type id; -1 for bool (which ggml has not). */
int txc_dtype_to_ggml(txc_dtype dt);
/* (ggml's names of every type id: txc_ggml_type_name, txc/gguf.h.) */
/* True for f32/f16/bf16. */
bool txc_dtype_is_float(txc_dtype dt);
/* safetensors' dtype string ("F32", "F16", "BF16", "I32", "I64", "BOOL") to
 * a dtype; returns false for anything else (e.g. "F64", "I8"). */
bool txc_dtype_from_safetensors(const char *s, txc_dtype *out);
/* torch's name or safetensors' ("float32", "bf16", "F16"...) or ggml's
 * (any case: "q4_0", "Q4_K", "q4_k") to a dtype. */
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
 * nonzero->bool is true). Slow path for tests and generic kernels. Not for
 * the block-quantized dtypes (load gives 0, store does nothing). */
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
/* (The bulk conversions do nothing for a block-quantized dtype: those go
 * through txc_quant_dequantize / txc_quant_quantize, txc/quant.h.) */

#ifdef __cplusplus
}
#endif
#endif
