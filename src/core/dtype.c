/* Element types; see include/txc/dtype.h. */
#include "txc/dtype.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* size: bytes per element (0 for a block type); block: elements per block;
 * bbytes: bytes per block (ggml-common.h's block structs); ggml: the id. */
static const struct {
    const char *name, *st;
    size_t size;
    int64_t block;
    size_t bbytes;
    int ggml;
} info[TXC_DTYPE_COUNT] = {
    [TXC_F32] = {"float32", "F32", 4, 1, 4, 0},   [TXC_F16] = {"float16", "F16", 2, 1, 2, 1},
    [TXC_BF16] = {"bfloat16", "BF16", 2, 1, 2, 30}, [TXC_I32] = {"int32", "I32", 4, 1, 4, 26},
    [TXC_I64] = {"int64", "I64", 8, 1, 8, 27},    [TXC_BOOL] = {"bool", "BOOL", 1, 1, 1, -1},
    [TXC_Q8_0] = {"q8_0", NULL, 0, 32, 34, 8},    [TXC_Q4_0] = {"q4_0", NULL, 0, 32, 18, 2},
    [TXC_Q4_1] = {"q4_1", NULL, 0, 32, 20, 3},    [TXC_Q5_0] = {"q5_0", NULL, 0, 32, 22, 6},
    [TXC_Q5_1] = {"q5_1", NULL, 0, 32, 24, 7},    [TXC_Q4_K] = {"q4_K", NULL, 0, 256, 144, 12},
    [TXC_Q5_K] = {"q5_K", NULL, 0, 256, 176, 13}, [TXC_Q6_K] = {"q6_K", NULL, 0, 256, 210, 14},
};

size_t txc_dtype_size(txc_dtype dt) { return (unsigned)dt < TXC_DTYPE_COUNT ? info[dt].size : 0; }
const char *txc_dtype_name(txc_dtype dt) { return (unsigned)dt < TXC_DTYPE_COUNT ? info[dt].name : "?"; }
bool txc_dtype_is_float(txc_dtype dt) { return dt == TXC_F32 || dt == TXC_F16 || dt == TXC_BF16; }
bool txc_dtype_is_quantized(txc_dtype dt) { return dt >= TXC_Q8_0 && dt < TXC_DTYPE_COUNT; }
int64_t txc_dtype_block_size(txc_dtype dt) { return (unsigned)dt < TXC_DTYPE_COUNT ? info[dt].block : 0; }
size_t txc_dtype_block_bytes(txc_dtype dt) { return (unsigned)dt < TXC_DTYPE_COUNT ? info[dt].bbytes : 0; }

bool txc_dtype_nbytes(txc_dtype dt, int64_t numel, size_t *out)
{
    if ((unsigned)dt >= TXC_DTYPE_COUNT || numel < 0 || numel % info[dt].block != 0)
        return false;
    uint64_t blocks = (uint64_t)(numel / info[dt].block);
    if (blocks > SIZE_MAX / info[dt].bbytes)
        return false;
    *out = (size_t)blocks * info[dt].bbytes;
    return true;
}

size_t txc_dtype_row_bytes(txc_dtype dt, int64_t K)
{
    size_t n;
    return txc_dtype_nbytes(dt, K, &n) ? n : 0;
}

bool txc_dtype_from_ggml(uint32_t ggml_type, txc_dtype *out)
{
    for (int i = 0; i < TXC_DTYPE_COUNT; i++)
        if (info[i].ggml >= 0 && (uint32_t)info[i].ggml == ggml_type) {
            *out = (txc_dtype)i;
            return true;
        }
    return false;
}

int txc_dtype_to_ggml(txc_dtype dt) { return (unsigned)dt < TXC_DTYPE_COUNT ? info[dt].ggml : -1; }

/* ASCII case-insensitive equality ("Q4_K" = "q4_k"). */
static bool eq_nocase(const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        char x = *a >= 'A' && *a <= 'Z' ? (char)(*a + 32) : *a;
        char y = *b >= 'A' && *b <= 'Z' ? (char)(*b + 32) : *b;
        if (x != y)
            return false;
    }
    return *a == *b;
}

bool txc_dtype_from_safetensors(const char *s, txc_dtype *out)
{
    for (int i = 0; i < TXC_DTYPE_COUNT; i++)
        if (info[i].st && strcmp(s, info[i].st) == 0) {
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
        if (strcmp(s, info[i].name) == 0 || (info[i].st && strcmp(s, info[i].st) == 0) ||
            (txc_dtype_is_quantized((txc_dtype)i) && eq_nocase(s, info[i].name))) {
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

/* The exported copies of the inline conversions in txc/dtype.h. */
extern inline float txc_bf16_to_f32(uint16_t h);
extern inline uint16_t txc_f32_to_bf16(float f);
extern inline float txc_f16_to_f32(uint16_t h);
extern inline uint16_t txc_f32_to_f16(float f);

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

/* ---- bulk conversion ---------------------------------------------------------
 * One loop per (source, destination) pair, the element conversion inlined,
 * so contiguous runs vectorise (f32 <-> bf16/f16 included). */

/* float -> int64 as torch's cast (truncation); NaN / out of range give 0
 * (undefined in C, unspecified in torch). */
static inline int64_t f2i64(double v)
{
    return (v >= -9223372036854775808.0 && v < 9223372036854775808.0) ? (int64_t)v : 0;
}

#define TO_I64(x) _Generic((x), float: f2i64(x), double: f2i64(x), default: (int64_t)(x))
#define WR_F32(x) ((float)(x))
#define WR_F16(x) txc_f32_to_f16((float)(x))
#define WR_BF16(x) txc_f32_to_bf16((float)(x))
#define WR_I64(x) TO_I64(x)
#define WR_I32(x) ((int32_t)(uint32_t)(uint64_t)TO_I64(x))
#define WR_BOOL(x) ((uint8_t)((x) != 0))

#define CVT_LOOP(ST, DT, EXPR)                                                         \
    do {                                                                               \
        if (sstride == (int64_t)sizeof(ST) && dstride == (int64_t)sizeof(DT)) {        \
            const ST *restrict s_ = src;                                               \
            DT *restrict d_ = dst;                                                     \
            for (int64_t i = 0; i < n; i++) {                                          \
                ST v = s_[i];                                                          \
                d_[i] = (DT)(EXPR);                                                    \
            }                                                                          \
        } else {                                                                       \
            const char *s_ = src;                                                      \
            char *d_ = dst;                                                            \
            for (int64_t i = 0; i < n; i++, s_ += sstride, d_ += dstride) {            \
                ST v;                                                                  \
                memcpy(&v, s_, sizeof v);                                              \
                DT r_ = (DT)(EXPR);                                                    \
                memcpy(d_, &r_, sizeof r_);                                            \
            }                                                                          \
        }                                                                              \
    } while (0)

#define CVT_FROM(DT, WR)                                                               \
    switch (sdt) {                                                                     \
    case TXC_F32: CVT_LOOP(float, DT, WR(v)); break;                                   \
    case TXC_F16: CVT_LOOP(uint16_t, DT, WR(txc_f16_to_f32(v))); break;                \
    case TXC_BF16: CVT_LOOP(uint16_t, DT, WR(txc_bf16_to_f32(v))); break;              \
    case TXC_I32: CVT_LOOP(int32_t, DT, WR(v)); break;                                 \
    case TXC_I64: CVT_LOOP(int64_t, DT, WR(v)); break;                                 \
    case TXC_BOOL: CVT_LOOP(uint8_t, DT, WR((uint8_t)(v != 0))); break;                \
    default: break;                                                                    \
    }

void txc_dtype_convert_strided(txc_dtype sdt, const void *src, int64_t sstride, txc_dtype ddt, void *dst,
                               int64_t dstride, int64_t n)
{
    if (n <= 0 || txc_dtype_is_quantized(sdt) || txc_dtype_is_quantized(ddt))
        return;
    if (sdt == ddt) {
        size_t es = txc_dtype_size(sdt);
        if (sstride == (int64_t)es && dstride == (int64_t)es) {
            memmove(dst, src, (size_t)n * es);
            return;
        }
        const char *s = src;
        char *d = dst;
        for (int64_t i = 0; i < n; i++, s += sstride, d += dstride)
            memcpy(d, s, es);
        return;
    }
    switch (ddt) {
    case TXC_F32: CVT_FROM(float, WR_F32); break;
    case TXC_F16: CVT_FROM(uint16_t, WR_F16); break;
    case TXC_BF16: CVT_FROM(uint16_t, WR_BF16); break;
    case TXC_I32: CVT_FROM(int32_t, WR_I32); break;
    case TXC_I64: CVT_FROM(int64_t, WR_I64); break;
    case TXC_BOOL: CVT_FROM(uint8_t, WR_BOOL); break;
    default: break;
    }
}

void txc_dtype_convert(txc_dtype src_dt, const void *src, txc_dtype dst_dt, void *dst, size_t n)
{
    txc_dtype_convert_strided(src_dt, src, (int64_t)txc_dtype_size(src_dt), dst_dt, dst,
                              (int64_t)txc_dtype_size(dst_dt), (int64_t)n);
}
