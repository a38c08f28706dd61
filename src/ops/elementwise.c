/* Elementwise ops: shape/dtype inference and CPU kernels, and the helpers
 * every kernel file shares (declared in ops/kernels.h). See ops/registry.h.
 *
 * Structure (shared by every op here and by reduce.c):
 *
 *   txc_ops_loop     an n-d strided loop over a few operands: drops size-1
 *                    dims, coalesces dims whose strides chain, and calls a
 *                    row function for every run of the innermost dim.
 *   txc_ops_convert  strided dtype conversion of n elements (torch's casts,
 *                    txc_dtype_convert_strided; f16 rows with F16C).
 *   ew_run           the one elementwise driver: for each row, brings every
 *                    input to the op's compute type (float32, int64 or the
 *                    raw result dtype) — pointing straight into memory when
 *                    it already is contiguous in that type, converting a
 *                    chunk into a stack buffer otherwise — calls the op's
 *                    kernel on contiguous arrays (a stride-0 input is passed
 *                    as one "scalar" element), and converts the result back.
 *   kernels          one function per compute type (binary float, binary
 *                    int, unary float, unary int, logical, select), each a
 *                    switch over the op code around plain loops the compiler
 *                    vectorises.
 *
 * So contiguous same-shape float32 runs the kernel over the whole tensor in
 * one call; "inner dim contiguous" broadcasts (x + bias, x * scale[..., 1])
 * coalesce into rows the kernel sees as vector-vector or vector-scalar.
 *
 * Type rules follow torch: float16/bfloat16 are computed in float32 and
 * rounded once; integer arithmetic is done in uint64 (wraps, no UB) and
 * truncated to the result dtype; inputs whose dtype differs from a reduced
 * float common dtype are first rounded to it (torch casts inputs to the
 * common dtype); a python-number scalar keeps its full float precision for
 * add/sub/mul/div on reduced floats (torch's original_scalar_value) and is
 * rounded to the common dtype for the other ops.
 */
#include "ops/kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ==== the strided loop ===================================================== */

void txc_ops_loop(int nops, int ndim, const int64_t *shape, const int64_t (*strides)[TXC_MAX_DIMS],
                  txc_loop_fn fn, void *ctx)
{
    int64_t sh[TXC_MAX_DIMS], st[TXC_LOOP_MAX_OPS][TXC_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 0)
            return;
        if (shape[d] == 1)
            continue;
        bool merge = nd > 0;
        for (int k = 0; merge && k < nops; k++)
            merge = st[k][nd - 1] == strides[k][d] * shape[d];
        if (merge) {
            sh[nd - 1] *= shape[d];
            for (int k = 0; k < nops; k++)
                st[k][nd - 1] = strides[k][d];
        } else {
            sh[nd] = shape[d];
            for (int k = 0; k < nops; k++)
                st[k][nd] = strides[k][d];
            nd++;
        }
    }
    int64_t off[TXC_LOOP_MAX_OPS] = {0}, inner[TXC_LOOP_MAX_OPS] = {0};
    if (nd == 0) {
        fn(ctx, off, inner, 1);
        return;
    }
    int last = nd - 1;
    for (int k = 0; k < nops; k++)
        inner[k] = st[k][last];
    int64_t idx[TXC_MAX_DIMS] = {0};
    for (;;) {
        fn(ctx, off, inner, sh[last]);
        int d = last - 1;
        for (; d >= 0; d--) {
            for (int k = 0; k < nops; k++)
                off[k] += st[k][d];
            if (++idx[d] < sh[d])
                break;
            for (int k = 0; k < nops; k++)
                off[k] -= st[k][d] * sh[d];
            idx[d] = 0;
        }
        if (d < 0)
            return;
    }
}

void txc_ops_loop_rows(int ndim, const int64_t *shape, int dim, const int64_t *in_strides, size_t in_size,
                       const int64_t *out_strides, size_t out_size, txc_loop_fn fn, void *ctx)
{
    int64_t sh[TXC_MAX_DIMS], st[2][TXC_MAX_DIMS];
    int k = 0;
    for (int d = 0; d < ndim; d++) {
        if (d == dim)
            continue;
        sh[k] = shape[d];
        st[0][k] = in_strides[d] * (int64_t)in_size;
        st[1][k] = out_strides[d] * (int64_t)out_size;
        k++;
    }
    txc_ops_loop(2, k, sh, (const int64_t(*)[TXC_MAX_DIMS])st, fn, ctx);
}

/* ==== conversions =========================================================== */

#if TXC_HAVE_X86
TXC_AVX2 static void f16_to_f32_avx2(const uint16_t *s, float *d, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    for (; i < n; i++)
        d[i] = txc_f16_to_f32(s[i]);
}

TXC_AVX2 static void f32_to_f16_avx2(const float *s, uint16_t *d, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        d[i] = txc_f32_to_f16(s[i]);
}
#endif

void txc_ops_convert(txc_dtype sdt, const void *src, int64_t sstride, txc_dtype ddt, void *dst,
                     int64_t dstride, int64_t n)
{
#if TXC_HAVE_X86
    /* f16 <-> f32 contiguous rows: F16C (the portable loop vectorises too,
     * with more instructions) */
    if (n >= 8 && ((sdt == TXC_F16 && ddt == TXC_F32 && sstride == 2 && dstride == 4) ||
                   (sdt == TXC_F32 && ddt == TXC_F16 && sstride == 4 && dstride == 2)) &&
        txc_kern_simd_level() >= 1) {
        if (sdt == TXC_F16)
            f16_to_f32_avx2(src, dst, n);
        else
            f32_to_f16_avx2(src, dst, n);
        return;
    }
#endif
    txc_dtype_convert_strided(sdt, src, sstride, ddt, dst, dstride, n);
}

typedef struct copy_ctx {
    const char *src;
    char *dst;
    txc_dtype sdt, ddt;
} copy_ctx;

static void copy_row(void *vc, const int64_t *off, const int64_t *st, int64_t n)
{
    const copy_ctx *c = vc;
    txc_ops_convert(c->sdt, c->src + off[1], st[1], c->ddt, c->dst + off[0], st[0], n);
}

void txc_kern_copy(int ndim, const int64_t *shape, const void *src, txc_dtype sdt, const int64_t *sstrides,
                   void *dst, txc_dtype ddt, const int64_t *dstrides)
{
    int64_t st[2][TXC_MAX_DIMS];
    int64_t es = (int64_t)txc_dtype_size(sdt), ed = (int64_t)txc_dtype_size(ddt);
    for (int d = 0; d < ndim; d++) {
        st[0][d] = dstrides[d] * ed;
        st[1][d] = sstrides[d] * es;
    }
    copy_ctx c = {.src = src, .dst = dst, .sdt = sdt, .ddt = ddt};
    txc_ops_loop(2, ndim, shape, (const int64_t(*)[TXC_MAX_DIMS])st, copy_row, &c);
}

void txc_kern_round_through(txc_dtype dt, float *x, int64_t n)
{
    if (dt == TXC_BF16)
        for (int64_t i = 0; i < n; i++)
            x[i] = txc_kern_round_to(TXC_BF16, x[i]);
    else if (dt == TXC_F16)
        for (int64_t i = 0; i < n; i++)
            x[i] = txc_kern_round_to(TXC_F16, x[i]);
}

/* ==== vector math =============================================================== */

enum { VM_EXP, VM_SIGMOID, VM_SILU };

/* The portable path: the C library's expf. */
static inline __attribute__((always_inline)) double vm_scalar(const int op, float *y, const float *x, int64_t n,
                                                              float shift)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float v = x[i], r;
        if (op == VM_EXP) {
            r = expf(v - shift);
            sum += r;
        } else {
            float d = 1.0f + expf(-v);
            r = op == VM_SILU ? v / d : 1.0f / d;
        }
        if (y)
            y[i] = r;
    }
    return sum;
}

#if TXC_HAVE_X86
/* Cephes' expf: x = k ln2 + r (Cody-Waite, |r| <= ln2/2), a degree-6
 * polynomial for exp(r), times 2^k. */
#define EXP_LOG2E 1.44269504088896341f
#define EXP_C1 0.693359375f
#define EXP_C2 -2.12194440e-4f
#define EXP_P0 1.9875691500E-4f
#define EXP_P1 1.3981999507E-3f
#define EXP_P2 8.3334519073E-3f
#define EXP_P3 4.1665795894E-2f
#define EXP_P4 1.6666665459E-1f
#define EXP_P5 5.0000001201E-1f

/* 8 lanes. 2^k is applied in two halves so that results below 2^-126 come
 * out subnormal (not 0) and x above 88.72 overflows to inf, as expf. */
TXC_INLINE_AVX2 __m256 exp8(__m256 x)
{
    __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(89.0f));
    __m256 k = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(EXP_LOG2E)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(EXP_C1), xc);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(EXP_C2), r);
    __m256 p = _mm256_set1_ps(EXP_P0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P5));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i ki = _mm256_cvtps_epi32(k), k1 = _mm256_srai_epi32(ki, 1), k2 = _mm256_sub_epi32(ki, k1);
    __m256i bias = _mm256_set1_epi32(127);
    p = _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23)));
    p = _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23)));
    return _mm256_blendv_ps(p, x, nan);
}

TXC_INLINE_AVX2 __m256 vm8(const int op, __m256 x, __m256 shift)
{
    if (op == VM_EXP)
        return exp8(_mm256_sub_ps(x, shift));
    __m256 one = _mm256_set1_ps(1.0f);
    __m256 d = _mm256_add_ps(one, exp8(_mm256_xor_ps(x, _mm256_set1_ps(-0.0f))));
    return _mm256_div_ps(op == VM_SILU ? x : one, d);
}

TXC_INLINE_AVX2 __m256d sum8(__m256d acc, __m256 v)
{
    acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    return _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

TXC_INLINE_AVX2 double vm_loop8(const int op, float *y, const float *x, int64_t n, float shift)
{
    __m256 sh = _mm256_set1_ps(shift);
    __m256d acc = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = vm8(op, _mm256_loadu_ps(x + i), sh);
        if (y)
            _mm256_storeu_ps(y + i, v);
        if (op == VM_EXP)
            acc = sum8(acc, v);
    }
    if (i < n) { /* the tail with masked loads/stores (lanes past n give 0) */
        __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - i)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        __m256 v = _mm256_and_ps(vm8(op, _mm256_maskload_ps(x + i, live), sh), _mm256_castsi256_ps(live));
        if (y)
            _mm256_maskstore_ps(y + i, live, v);
        if (op == VM_EXP)
            acc = sum8(acc, v);
    }
    double s[4];
    _mm256_storeu_pd(s, acc);
    return (s[0] + s[2]) + (s[1] + s[3]);
}

TXC_AVX2 static double vm_avx2(int op, float *y, const float *x, int64_t n, float shift)
{
    switch (op) {
    case VM_EXP: return vm_loop8(VM_EXP, y, x, n, shift);
    case VM_SIGMOID: return vm_loop8(VM_SIGMOID, y, x, n, shift);
    default: return vm_loop8(VM_SILU, y, x, n, shift);
    }
}

/* 16 lanes; scalef applies 2^k with one rounding (subnormals, overflow). */
TXC_INLINE_AVX512 __m512 exp16(__m512 x)
{
    __m512 xc = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(89.0f));
    __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(EXP_LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(EXP_C1), xc);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(EXP_C2), r);
    __m512 p = _mm512_set1_ps(EXP_P0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P5));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    p = _mm512_scalef_ps(p, k);
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), p, x);
}

TXC_INLINE_AVX512 __m512 vm16(const int op, __m512 x, __m512 shift)
{
    if (op == VM_EXP)
        return exp16(_mm512_sub_ps(x, shift));
    __m512 one = _mm512_set1_ps(1.0f);
    __m512 d = _mm512_add_ps(one, exp16(_mm512_castsi512_ps(
                                      _mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u)))));
    return _mm512_div_ps(op == VM_SILU ? x : one, d);
}

TXC_INLINE_AVX512 __m512d sum16(__m512d acc, __m512 v)
{
    acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    return _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));
}

TXC_INLINE_AVX512 double vm_loop16(const int op, float *y, const float *x, int64_t n, float shift)
{
    __m512 sh = _mm512_set1_ps(shift);
    __m512d acc = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 16) { /* masked: the tail too (lanes past n give 0) */
        __mmask16 live = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
        __m512 v = _mm512_maskz_mov_ps(live, vm16(op, _mm512_maskz_loadu_ps(live, x + i), sh));
        if (y)
            _mm512_mask_storeu_ps(y + i, live, v);
        if (op == VM_EXP)
            acc = sum16(acc, v);
    }
    return _mm512_reduce_add_pd(acc);
}

TXC_AVX512 static double vm_avx512(int op, float *y, const float *x, int64_t n, float shift)
{
    switch (op) {
    case VM_EXP: return vm_loop16(VM_EXP, y, x, n, shift);
    case VM_SIGMOID: return vm_loop16(VM_SIGMOID, y, x, n, shift);
    default: return vm_loop16(VM_SILU, y, x, n, shift);
    }
}
#endif

static double vm_run(int op, float *y, const float *x, int64_t n, float shift)
{
    if (n <= 0)
        return 0.0;
#if TXC_HAVE_X86
    int simd = txc_kern_simd_level();
    if (simd >= 2)
        return vm_avx512(op, y, x, n, shift);
    if (simd >= 1)
        return vm_avx2(op, y, x, n, shift);
#endif
    switch (op) { /* constant op for the compiler */
    case VM_EXP: return vm_scalar(VM_EXP, y, x, n, shift);
    case VM_SIGMOID: return vm_scalar(VM_SIGMOID, y, x, n, shift);
    default: return vm_scalar(VM_SILU, y, x, n, shift);
    }
}

double txc_kern_exp(float *y, const float *x, int64_t n, float shift) { return vm_run(VM_EXP, y, x, n, shift); }
void txc_kern_sigmoid(float *y, const float *x, int64_t n) { vm_run(VM_SIGMOID, y, x, n, 0.0f); }
void txc_kern_silu(float *y, const float *x, int64_t n) { vm_run(VM_SILU, y, x, n, 0.0f); }

#if TXC_HAVE_X86
TXC_AVX2 static float max_avx2(const float *x, int64_t n, bool *nan)
{
    __m256 m = _mm256_set1_ps(-INFINITY), nn = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        nn = _mm256_or_ps(nn, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        m = _mm256_max_ps(v, m); /* a NaN in v gives m */
    }
    float v[8], r = -INFINITY;
    _mm256_storeu_ps(v, m);
    bool any = _mm256_movemask_ps(nn) != 0;
    for (int k = 0; k < 8; k++)
        r = v[k] > r ? v[k] : r;
    for (; i < n; i++) {
        any |= x[i] != x[i];
        r = x[i] > r ? x[i] : r;
    }
    if (nan)
        *nan = any;
    return r;
}
#endif

float txc_kern_max(const float *x, int64_t n, bool *nan)
{
#if TXC_HAVE_X86
    if (txc_kern_simd_level() >= 1)
        return max_avx2(x, n, nan);
#endif
    float mx[8];
    int nn[8] = {0};
    for (int k = 0; k < 8; k++)
        mx[k] = -INFINITY;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) {
            float v = x[i + k];
            nn[k] |= v != v;
            mx[k] = v > mx[k] ? v : mx[k];
        }
    for (; i < n; i++) {
        nn[0] |= x[i] != x[i];
        mx[0] = x[i] > mx[0] ? x[i] : mx[0];
    }
    float r = mx[0];
    int any = nn[0];
    for (int k = 1; k < 8; k++) {
        r = mx[k] > r ? mx[k] : r;
        any |= nn[k];
    }
    if (nan)
        *nan = any != 0;
    return r;
}

/* ==== small helpers ================================================================ */

static bool is_reduced(txc_dtype d) { return d == TXC_F16 || d == TXC_BF16; }

/* Largest finite value of a float dtype (torch's overflow check when a
 * python number is cast to the dtype); +inf for the others. */
static double dtype_max(txc_dtype d)
{
    switch (d) {
    case TXC_F32: return 3.4028234663852886e+38;
    case TXC_F16: return 65504.0;
    case TXC_BF16: return 3.3895313892515355e+38;
    default: return INFINITY;
    }
}

/* ==== the elementwise driver ============================================== */

#define EW_MAX_IN 3
#define EW_CHUNK 512

/* A kernel: n results into `out` (contiguous, of the compute out type) from
 * n_in inputs (contiguous, of their compute types); scalar[j]: input j is
 * one element standing for all n. */
typedef void (*ew_kernel)(const void *ctx, int64_t n, void *out, const void *const *in, const bool *scalar);

typedef struct ew_input {
    const char *base; /* element [0, ..., 0] */
    txc_dtype dtype;  /* as stored */
    txc_dtype ct;     /* compute type the kernel reads */
    txc_dtype via;    /* reduced float to round through first, or ct */
    int64_t strides[TXC_MAX_DIMS]; /* bytes, broadcast to the output shape */
} ew_input;

typedef struct ew_ctx {
    char *out;
    txc_dtype out_dt, out_ct;
    int n_in;
    const ew_input *in;
    ew_kernel k;
    const void *kctx;
} ew_ctx;

static void ew_load(const ew_input *in, const char *p, int64_t stride, int64_t m, void *buf)
{
    txc_ops_convert(in->dtype, p, stride, in->ct, buf, (int64_t)txc_dtype_size(in->ct), m);
    if (in->via != in->ct && in->via != in->dtype)
        txc_kern_round_through(in->via, buf, m);
}

static void ew_row(void *vctx, const int64_t *off, const int64_t *st, int64_t n)
{
    const ew_ctx *c = vctx;
    _Alignas(64) unsigned char tmp[EW_MAX_IN + 1][EW_CHUNK * 8];
    size_t osz = txc_dtype_size(c->out_dt);
    bool direct_out = c->out_dt == c->out_ct;
    bool direct[EW_MAX_IN], sc[EW_MAX_IN];
    bool chunked = !direct_out;
    for (int j = 0; j < c->n_in; j++) {
        const ew_input *in = &c->in[j];
        sc[j] = st[j + 1] == 0;
        direct[j] = in->dtype == in->ct && (in->via == in->ct || in->via == in->dtype) &&
                    st[j + 1] == (int64_t)txc_dtype_size(in->ct);
        if (sc[j])
            ew_load(in, in->base + off[j + 1], 0, 1, tmp[j]);
        else if (!direct[j])
            chunked = true;
    }
    int64_t step = chunked ? EW_CHUNK : n;
    for (int64_t i0 = 0; i0 < n; i0 += step) {
        int64_t m = n - i0 < step ? n - i0 : step;
        const void *ins[EW_MAX_IN];
        for (int j = 0; j < c->n_in; j++) {
            const char *p = c->in[j].base + off[j + 1] + i0 * st[j + 1];
            if (sc[j])
                ins[j] = tmp[j];
            else if (direct[j])
                ins[j] = p;
            else {
                ew_load(&c->in[j], p, st[j + 1], m, tmp[j]);
                ins[j] = tmp[j];
            }
        }
        char *o = c->out + off[0] + i0 * (int64_t)osz;
        c->k(c->kctx, m, direct_out ? (void *)o : (void *)tmp[EW_MAX_IN], ins, sc);
        if (!direct_out)
            txc_ops_convert(c->out_ct, tmp[EW_MAX_IN], (int64_t)txc_dtype_size(c->out_ct), c->out_dt, o,
                            (int64_t)osz, m);
    }
}

/* Set up input j of a run: a tensor broadcast to out's shape. */
static void ew_tensor_input(ew_input *in, const txc_tensor *t, const txc_tensor *out, txc_dtype ct, txc_dtype via)
{
    in->base = txc_impl_data(t);
    in->dtype = t->dtype;
    in->ct = ct;
    in->via = via;
    txc_broadcast_strides(t, out->ndim, out->shape, in->strides);
    size_t es = txc_dtype_size(t->dtype);
    for (int d = 0; d < out->ndim; d++)
        in->strides[d] *= (int64_t)es;
}

/* A constant input (stride 0 everywhere), already in its compute type. */
static void ew_const_input(ew_input *in, const void *value, txc_dtype ct)
{
    memset(in, 0, sizeof *in);
    in->base = value;
    in->dtype = in->ct = in->via = ct;
}

static txc_status ew_run(txc_tensor *out, txc_dtype out_ct, int n_in, const ew_input *in, ew_kernel k,
                         const void *kctx)
{
    ew_ctx c = {.out = txc_impl_data(out), .out_dt = out->dtype, .out_ct = out_ct, .n_in = n_in, .in = in,
                .k = k, .kctx = kctx};
    int64_t strides[EW_MAX_IN + 1][TXC_MAX_DIMS];
    int64_t cs[TXC_MAX_DIMS];
    txc_impl_contiguous_strides(out->ndim, out->shape, cs);
    for (int d = 0; d < out->ndim; d++)
        strides[0][d] = cs[d] * (int64_t)txc_dtype_size(out->dtype);
    for (int j = 0; j < n_in; j++)
        memcpy(strides[j + 1], in[j].strides, sizeof strides[0]);
    txc_ops_loop(n_in + 1, out->ndim, out->shape, (const int64_t(*)[TXC_MAX_DIMS])strides, ew_row, &c);
    return TXC_OK;
}

/* ==== kernels =============================================================== */

typedef struct ew_op {
    txc_op_id op;
    unsigned flags;
    txc_dtype common; /* binary ops: the common dtype of the inputs */
} ew_op;

#define BIN_LOOP(TO, TI, EXPR)                                                         \
    do {                                                                               \
        TO *restrict o_ = out;                                                         \
        const TI *restrict a_ = in[0], *restrict b_ = in[1];                           \
        if (!sc[0] && !sc[1]) {                                                        \
            for (int64_t i = 0; i < n; i++) {                                          \
                TI x = a_[i], y = b_[i];                                               \
                o_[i] = (TO)(EXPR);                                                    \
            }                                                                          \
        } else if (!sc[0]) {                                                           \
            TI y = b_[0];                                                              \
            for (int64_t i = 0; i < n; i++) {                                          \
                TI x = a_[i];                                                          \
                o_[i] = (TO)(EXPR);                                                    \
            }                                                                          \
        } else if (!sc[1]) {                                                           \
            TI x = a_[0];                                                              \
            for (int64_t i = 0; i < n; i++) {                                          \
                TI y = b_[i];                                                          \
                o_[i] = (TO)(EXPR);                                                    \
            }                                                                          \
        } else {                                                                       \
            TI x = a_[0], y = b_[0];                                                   \
            TO r_ = (TO)(EXPR);                                                        \
            for (int64_t i = 0; i < n; i++)                                            \
                o_[i] = r_;                                                            \
        }                                                                              \
    } while (0)

#define UN_LOOP(TO, TI, EXPR)                                                          \
    do {                                                                               \
        TO *restrict o_ = out;                                                         \
        const TI *restrict a_ = in[0];                                                 \
        if (!sc[0]) {                                                                  \
            for (int64_t i = 0; i < n; i++) {                                          \
                TI x = a_[i];                                                          \
                o_[i] = (TO)(EXPR);                                                    \
            }                                                                          \
        } else {                                                                       \
            TI x = a_[0];                                                              \
            TO r_ = (TO)(EXPR);                                                        \
            for (int64_t i = 0; i < n; i++)                                            \
                o_[i] = r_;                                                            \
        }                                                                              \
    } while (0)

/* NaN-propagating max/min (torch.maximum/minimum). */
static inline float fmax_nan(float x, float y) { return x != x ? x : (y != y ? y : (x > y ? x : y)); }
static inline float fmin_nan(float x, float y) { return x != x ? x : (y != y ? y : (x < y ? x : y)); }

#define U64(x) ((uint64_t)(x))
#define WRAP(x) ((int64_t)(x))

/* torch's powi (integer pow, exponent a tensor): negative exponents give 0
 * except for bases 1 and -1. Wraps like repeated multiplication. */
static int64_t ipow(int64_t base, int64_t e)
{
    if (e < 0) {
        if (base == 1)
            return 1;
        if (base == -1)
            return (e & 1) ? -1 : 1;
        return 0;
    }
    uint64_t r = 1, b = U64(base);
    while (e) {
        if (e & 1)
            r *= b;
        b *= b;
        e >>= 1;
    }
    return WRAP(r);
}

/* pow(tensor, python number): torch's special cases for common exponents
 * (pow_tensor_scalar_optimized_kernel, sqrt/rsqrt/reciprocal); for bfloat16
 * torch computes x*x in bfloat16 there (dt: the tensor's dtype). */
void txc_kern_pow_scalar_f32(int64_t n, float *restrict o, const float *restrict x, float e, txc_dtype dt)
{
    if (dt == TXC_BF16 && (e == 3.0f || e == -2.0f)) {
        for (int64_t i = 0; i < n; i++) {
            float sq = txc_kern_round_to(TXC_BF16, x[i] * x[i]);
            o[i] = e == 3.0f ? sq * x[i] : 1.0f / sq;
        }
    } else if (e == 2.0f)
        for (int64_t i = 0; i < n; i++) o[i] = x[i] * x[i];
    else if (e == 3.0f)
        for (int64_t i = 0; i < n; i++) o[i] = x[i] * x[i] * x[i];
    else if (e == 0.5f)
        for (int64_t i = 0; i < n; i++) o[i] = sqrtf(x[i]);
    else if (e == -0.5f)
        for (int64_t i = 0; i < n; i++) o[i] = 1.0f / sqrtf(x[i]);
    else if (e == -1.0f)
        for (int64_t i = 0; i < n; i++) o[i] = 1.0f / x[i];
    else if (e == -2.0f)
        for (int64_t i = 0; i < n; i++) o[i] = 1.0f / (x[i] * x[i]);
    else
        for (int64_t i = 0; i < n; i++) o[i] = powf(x[i], e);
}

static void k_binary_f32(const void *ctx, int64_t n, void *out, const void *const *in, const bool *sc)
{
    switch (((const ew_op *)ctx)->op) {
    case TXC_OP_ADD: BIN_LOOP(float, float, x + y); break;
    case TXC_OP_SUB: BIN_LOOP(float, float, x - y); break;
    case TXC_OP_RSUB: BIN_LOOP(float, float, y - x); break;
    case TXC_OP_MUL: BIN_LOOP(float, float, x * y); break;
    case TXC_OP_DIV: BIN_LOOP(float, float, x / y); break;
    case TXC_OP_POW:
        if ((((const ew_op *)ctx)->flags & TXC_ATTR_SCALAR_RHS) && !sc[0])
            txc_kern_pow_scalar_f32(n, out, in[0], *(const float *)in[1], ((const ew_op *)ctx)->common);
        else
            BIN_LOOP(float, float, powf(x, y));
        break;
    case TXC_OP_MAXIMUM: BIN_LOOP(float, float, fmax_nan(x, y)); break;
    case TXC_OP_MINIMUM: BIN_LOOP(float, float, fmin_nan(x, y)); break;
    case TXC_OP_EQ: BIN_LOOP(uint8_t, float, x == y); break;
    case TXC_OP_NE: BIN_LOOP(uint8_t, float, x != y); break;
    case TXC_OP_LT: BIN_LOOP(uint8_t, float, x < y); break;
    case TXC_OP_LE: BIN_LOOP(uint8_t, float, x <= y); break;
    case TXC_OP_GT: BIN_LOOP(uint8_t, float, x > y); break;
    case TXC_OP_GE: BIN_LOOP(uint8_t, float, x >= y); break;
    default: break;
    }
}

static void k_binary_i64(const void *ctx, int64_t n, void *out, const void *const *in, const bool *sc)
{
    switch (((const ew_op *)ctx)->op) {
    case TXC_OP_ADD: BIN_LOOP(int64_t, int64_t, WRAP(U64(x) + U64(y))); break;
    case TXC_OP_SUB: BIN_LOOP(int64_t, int64_t, WRAP(U64(x) - U64(y))); break;
    case TXC_OP_RSUB: BIN_LOOP(int64_t, int64_t, WRAP(U64(y) - U64(x))); break;
    case TXC_OP_MUL: BIN_LOOP(int64_t, int64_t, WRAP(U64(x) * U64(y))); break;
    case TXC_OP_POW: BIN_LOOP(int64_t, int64_t, ipow(x, y)); break;
    case TXC_OP_MAXIMUM: BIN_LOOP(int64_t, int64_t, x > y ? x : y); break;
    case TXC_OP_MINIMUM: BIN_LOOP(int64_t, int64_t, x < y ? x : y); break;
    case TXC_OP_EQ: BIN_LOOP(uint8_t, int64_t, x == y); break;
    case TXC_OP_NE: BIN_LOOP(uint8_t, int64_t, x != y); break;
    case TXC_OP_LT: BIN_LOOP(uint8_t, int64_t, x < y); break;
    case TXC_OP_LE: BIN_LOOP(uint8_t, int64_t, x <= y); break;
    case TXC_OP_GT: BIN_LOOP(uint8_t, int64_t, x > y); break;
    case TXC_OP_GE: BIN_LOOP(uint8_t, int64_t, x >= y); break;
    case TXC_OP_BITWISE_AND: BIN_LOOP(int64_t, int64_t, x & y); break;
    case TXC_OP_BITWISE_OR: BIN_LOOP(int64_t, int64_t, x | y); break;
    default: break;
    }
}

static void k_logical(const void *ctx, int64_t n, void *out, const void *const *in, const bool *sc)
{
    switch (((const ew_op *)ctx)->op) {
    case TXC_OP_LOGICAL_AND: BIN_LOOP(uint8_t, uint8_t, x && y); break;
    case TXC_OP_LOGICAL_OR: BIN_LOOP(uint8_t, uint8_t, x || y); break;
    case TXC_OP_BITWISE_AND: BIN_LOOP(uint8_t, uint8_t, x & y); break; /* bool: 0/1 */
    case TXC_OP_BITWISE_OR: BIN_LOOP(uint8_t, uint8_t, x | y); break;
    case TXC_OP_LOGICAL_NOT: UN_LOOP(uint8_t, uint8_t, !x); break;
    default: break;
    }
}

#define SQRT_1_2 0.70710678118654752440f
#define SQRT_2_PI 0.79788456080286535588f

static inline float gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * SQRT_1_2)); }
static inline float gelu_tanh(float x)
{
    float inner = SQRT_2_PI * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(inner));
}

/* A vector-math kernel CALL(y, x, m) over the rows, or once for a scalar
 * operand (the same function either way: equal bits). */
#define UN_VM(CALL)                                                                    \
    do {                                                                               \
        float *y = out;                                                                \
        const float *x = in[0];                                                        \
        int64_t m = sc[0] ? 1 : n;                                                     \
        CALL;                                                                          \
        for (int64_t i = m; i < n; i++)                                                \
            y[i] = y[0];                                                               \
    } while (0)

static void k_unary_f32(const void *ctx, int64_t n, void *out, const void *const *in, const bool *sc)
{
    const ew_op *e = ctx;
    switch (e->op) {
    case TXC_OP_NEG: UN_LOOP(float, float, -x); break;
    case TXC_OP_ABS: UN_LOOP(float, float, fabsf(x)); break;
    case TXC_OP_EXP: UN_VM(txc_kern_exp(y, x, m, 0.0f)); break;
    case TXC_OP_LOG: UN_LOOP(float, float, logf(x)); break;
    case TXC_OP_SQRT: UN_LOOP(float, float, sqrtf(x)); break;
    case TXC_OP_RSQRT: UN_LOOP(float, float, 1.0f / sqrtf(x)); break;
    case TXC_OP_SIN: UN_LOOP(float, float, sinf(x)); break;
    case TXC_OP_COS: UN_LOOP(float, float, cosf(x)); break;
    case TXC_OP_TANH: UN_LOOP(float, float, tanhf(x)); break;
    /* (the vector exp of txc_kern_exp, as the JIT's fused kernels: fused
     * and eager results stay bit for bit equal) */
    case TXC_OP_SIGMOID: UN_VM(txc_kern_sigmoid(y, x, m)); break;
    case TXC_OP_SILU: UN_VM(txc_kern_silu(y, x, m)); break;
    case TXC_OP_GELU:
        if (e->flags & TXC_ATTR_TANH)
            UN_LOOP(float, float, gelu_tanh(x));
        else
            UN_LOOP(float, float, gelu_erf(x));
        break;
    case TXC_OP_RELU: UN_LOOP(float, float, x < 0.0f ? 0.0f : x); break;
    default: break;
    }
}

static void k_unary_i64(const void *ctx, int64_t n, void *out, const void *const *in, const bool *sc)
{
    switch (((const ew_op *)ctx)->op) {
    case TXC_OP_NEG: UN_LOOP(int64_t, int64_t, WRAP(0 - U64(x))); break;
    case TXC_OP_ABS: UN_LOOP(int64_t, int64_t, x < 0 ? WRAP(0 - U64(x)) : x); break;
    case TXC_OP_RELU: UN_LOOP(int64_t, int64_t, x < 0 ? 0 : x); break;
    default: break;
    }
}

/* out = in[0] ? in[1] : in[2], raw elements of the result dtype. */
#define SEL_LOOP(T)                                                                    \
    do {                                                                               \
        T *restrict o_ = out;                                                          \
        const uint8_t *c_ = in[0];                                                     \
        const T *x_ = in[1], *y_ = in[2];                                              \
        int64_t ci = !sc[0], xi = !sc[1], yi = !sc[2];                                 \
        for (int64_t i = 0; i < n; i++)                                                \
            o_[i] = c_[i * ci] ? x_[i * xi] : y_[i * yi];                              \
    } while (0)

static void k_select(const void *ctx, int64_t n, void *out, const void *const *in, const bool *sc)
{
    switch (*(const size_t *)ctx) {
    case 1: SEL_LOOP(uint8_t); break;
    case 2: SEL_LOOP(uint16_t); break;
    case 4: SEL_LOOP(uint32_t); break;
    default: SEL_LOOP(uint64_t); break;
    }
}

/* ==== binary ops ============================================================= */

typedef union scalar_val {
    float f;
    int64_t i;
    uint8_t b;
    uint64_t raw;
} scalar_val;

typedef struct bin_plan {
    txc_dtype common; /* torch.result_type of the inputs */
    txc_dtype ct;     /* compute type of the inputs */
    txc_dtype out;    /* result dtype */
    txc_dtype out_ct; /* compute type of the result */
    scalar_val s;     /* the scalar operand (SCALAR_RHS), in ct */
} bin_plan;

static bool is_compare(txc_op_id op) { return op >= TXC_OP_EQ && op <= TXC_OP_GE; }

static txc_status bin_plan_make(txc_op_id op, txc_tensor *const *in, int n_in, const txc_op_attrs *a, bin_plan *p)
{
    const char *name = txc_op_name(op);
    bool scalar = a->flags & TXC_ATTR_SCALAR_RHS;
    if (n_in != (scalar ? 1 : 2))
        return txc_error(TXC_ERR_INTERNAL, "%s: expected %d tensor inputs, got %d", name, scalar ? 1 : 2, n_in);
    double s = a->f[0];
    txc_dtype da = in[0]->dtype, db = scalar ? da : in[1]->dtype;
    p->common = scalar ? txc_promote_scalar(da, s) : txc_promote(da, db);
    bool fl = txc_dtype_is_float(p->common);
    if ((op == TXC_OP_SUB || op == TXC_OP_RSUB) && (da == TXC_BOOL || db == TXC_BOOL))
        return txc_error(TXC_ERR_INVALID,
                         "%s: subtraction with a bool tensor is not supported (as torch); "
                         "to invert a mask use txc_logical_not()", name);
    bool bitwise = op == TXC_OP_BITWISE_AND || op == TXC_OP_BITWISE_OR;
    if (bitwise && fl)
        return txc_error(TXC_ERR_INVALID, "%s: not implemented for %s (as torch: integer and bool tensors only)",
                         name, txc_dtype_name(p->common));
    if (op == TXC_OP_POW && p->common == TXC_BOOL)
        return txc_error(TXC_ERR_INVALID, "%s: pow is not implemented for bool (as torch)", name);
    /* An integral scalar is a python int: torch takes up to 2^64 (wrapping). */
    if (scalar && !fl && !(s >= -9223372036854775808.0 && s < 18446744073709551616.0))
        return txc_error(TXC_ERR_INVALID, "%s: scalar %g cannot be converted to %s without overflow", name, s,
                         txc_dtype_name(p->common));
    if (op == TXC_OP_POW && scalar) {
        /* torch casts the exponent to the tensor's dtype, checking overflow */
        if (!fl && s < 0)
            return txc_error(TXC_ERR_INVALID, "%s: integers to negative integer powers are not allowed "
                                              "(tensor of %s, exponent %g); use a float tensor", name,
                             txc_dtype_name(da), s);
        if ((p->common == TXC_I32 && s > 2147483647.0) || (isfinite(s) && fabs(s) > dtype_max(p->common)))
            return txc_error(TXC_ERR_INVALID, "%s: exponent %g cannot be converted to %s without overflow", name, s,
                             txc_dtype_name(p->common));
    }
    if (op == TXC_OP_LOGICAL_AND || op == TXC_OP_LOGICAL_OR || (bitwise && p->common == TXC_BOOL))
        p->ct = TXC_BOOL;
    else if (fl || op == TXC_OP_DIV)
        p->ct = TXC_F32;
    else
        p->ct = TXC_I64;
    if (is_compare(op) || op == TXC_OP_LOGICAL_AND || op == TXC_OP_LOGICAL_OR) {
        p->out = p->out_ct = TXC_BOOL;
    } else {
        p->out = (op == TXC_OP_DIV && !fl) ? TXC_F32 : p->common;
        p->out_ct = p->ct;
    }
    if (scalar) {
        p->s.raw = 0;
        if (p->ct == TXC_BOOL) {
            p->s.b = s != 0;
        } else if (p->ct == TXC_I64) {
            p->s.i = s < 9223372036854775808.0 ? (int64_t)s : (int64_t)(uint64_t)s;
        } else {
            p->s.f = (float)s;
            /* mul/div read the python number in float (torch's
             * original_scalar_value); other ops see it cast to the common
             * dtype (checked bit for bit against torch on f16/bf16). */
            bool keep = op == TXC_OP_MUL || op == TXC_OP_DIV;
            if (!keep)
                txc_kern_round_through(p->common, &p->s.f, 1);
        }
    }
    return TXC_OK;
}

static txc_status infer_binary(txc_op_id op, txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    bin_plan p = {0};
    if (bin_plan_make(op, in, n_in, a, &p) != TXC_OK)
        return TXC_ERR_INVALID;
    m->dtype = p.out;
    if (a->flags & TXC_ATTR_SCALAR_RHS) {
        m->ndim = in[0]->ndim;
        memcpy(m->shape, in[0]->shape, sizeof(int64_t) * (size_t)in[0]->ndim);
        return TXC_OK;
    }
    return txc_broadcast_shapes(txc_op_name(op), in[0]->ndim, in[0]->shape, in[1]->ndim, in[1]->shape, &m->ndim,
                                m->shape);
}

static txc_status cpu_binary(txc_op_id op, txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    bin_plan p = {0};
    if (bin_plan_make(op, in, n_in, a, &p) != TXC_OK)
        return TXC_ERR_INVALID;
    txc_dtype via = (p.ct == TXC_F32 && is_reduced(p.common)) ? p.common : p.ct;
    ew_input ins[2];
    ew_tensor_input(&ins[0], in[0], out, p.ct, via);
    if (a->flags & TXC_ATTR_SCALAR_RHS)
        ew_const_input(&ins[1], &p.s, p.ct);
    else
        ew_tensor_input(&ins[1], in[1], out, p.ct, via);
    ew_op e = {op, a->flags, p.common};
    ew_kernel k = p.ct == TXC_F32 ? k_binary_f32 : p.ct == TXC_I64 ? k_binary_i64 : k_logical;
    return ew_run(out, p.out_ct, 2, ins, k, &e);
}

/* ==== unary ops ============================================================== */

typedef struct un_plan {
    txc_dtype ct, out, out_ct;
} un_plan;

static txc_status un_plan_make(txc_op_id op, txc_tensor *const *in, int n_in, un_plan *p)
{
    const char *name = txc_op_name(op);
    if (n_in != 1)
        return txc_error(TXC_ERR_INTERNAL, "%s: expected 1 input, got %d", name, n_in);
    txc_dtype d = in[0]->dtype;
    bool fl = txc_dtype_is_float(d);
    switch (op) {
    case TXC_OP_NEG:
    case TXC_OP_ABS:
    case TXC_OP_RELU:
        if (d == TXC_BOOL)
            return txc_error(TXC_ERR_INVALID, "%s: bool inputs are not supported (as torch)%s", name,
                             op == TXC_OP_NEG ? "; to invert a mask use txc_logical_not()" : "");
        p->out = d;
        p->ct = p->out_ct = fl ? TXC_F32 : TXC_I64;
        break;
    case TXC_OP_SILU:
    case TXC_OP_GELU:
        if (!fl)
            return txc_error(TXC_ERR_INVALID, "%s: not implemented for %s (float inputs only, as torch)", name,
                             txc_dtype_name(d));
        p->out = d;
        p->ct = p->out_ct = TXC_F32;
        break;
    case TXC_OP_LOGICAL_NOT:
        p->out = p->ct = p->out_ct = TXC_BOOL;
        break;
    default: /* float math: integer and bool inputs give float32 */
        p->out = fl ? d : TXC_F32;
        p->ct = p->out_ct = TXC_F32;
        break;
    }
    return TXC_OK;
}

static txc_status infer_unary(txc_op_id op, txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    un_plan p = {0};
    if (un_plan_make(op, in, n_in, &p) != TXC_OK)
        return TXC_ERR_INVALID;
    m->dtype = p.out;
    m->ndim = in[0]->ndim;
    memcpy(m->shape, in[0]->shape, sizeof(int64_t) * (size_t)in[0]->ndim);
    return TXC_OK;
}

static txc_status cpu_unary(txc_op_id op, txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    un_plan p = {0};
    if (un_plan_make(op, in, n_in, &p) != TXC_OK)
        return TXC_ERR_INVALID;
    ew_input x;
    ew_tensor_input(&x, in[0], out, p.ct, p.ct);
    ew_op e = {op, a->flags, p.out};
    ew_kernel k = p.ct == TXC_F32 ? k_unary_f32 : p.ct == TXC_I64 ? k_unary_i64 : k_logical;
    return ew_run(out, p.out_ct, 1, &x, k, &e);
}

/* ==== where / masked_fill ===================================================== */

static txc_status check_bool(const char *name, const char *what, const txc_tensor *t)
{
    if (t->dtype != TXC_BOOL)
        return txc_error(TXC_ERR_INVALID, "%s: expected %s to be a bool tensor, got %s", name, what,
                         txc_dtype_name(t->dtype));
    return TXC_OK;
}

static txc_status infer_where(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    const char *name = txc_op_name(TXC_OP_WHERE);
    if (n_in != 3)
        return txc_error(TXC_ERR_INTERNAL, "%s: expected 3 inputs, got %d", name, n_in);
    if (check_bool(name, "the condition", in[0]) != TXC_OK)
        return TXC_ERR_INVALID;
    int nd;
    int64_t sh[TXC_MAX_DIMS];
    if (txc_broadcast_shapes(name, in[0]->ndim, in[0]->shape, in[1]->ndim, in[1]->shape, &nd, sh) != TXC_OK ||
        txc_broadcast_shapes(name, nd, sh, in[2]->ndim, in[2]->shape, &m->ndim, m->shape) != TXC_OK)
        return TXC_ERR_INVALID;
    m->dtype = txc_promote(in[1]->dtype, in[2]->dtype);
    return TXC_OK;
}

static txc_status cpu_where(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    ew_input ins[3];
    ew_tensor_input(&ins[0], in[0], out, TXC_BOOL, TXC_BOOL);
    ew_tensor_input(&ins[1], in[1], out, out->dtype, out->dtype);
    ew_tensor_input(&ins[2], in[2], out, out->dtype, out->dtype);
    size_t es = txc_dtype_size(out->dtype);
    return ew_run(out, out->dtype, 3, ins, k_select, &es);
}

static txc_status infer_masked_fill(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    const char *name = txc_op_name(TXC_OP_MASKED_FILL);
    if (n_in != 2)
        return txc_error(TXC_ERR_INTERNAL, "%s: expected 2 inputs, got %d", name, n_in);
    if (check_bool(name, "the mask", in[1]) != TXC_OK)
        return TXC_ERR_INVALID;
    txc_dtype d = in[0]->dtype;
    double v = a->f[0];
    if ((d == TXC_I32 && !(v > -2147483649.0 && v < 2147483648.0)) ||
        (d == TXC_I64 && !(v >= -9223372036854775808.0 && v < 9223372036854775808.0)) ||
        (isfinite(v) && fabs(v) > dtype_max(d)))
        return txc_error(TXC_ERR_INVALID, "%s: value %g cannot be converted to %s without overflow", name, v,
                         txc_dtype_name(d));
    m->dtype = d;
    /* torch broadcasts self and mask together (expand_outplace). */
    return txc_broadcast_shapes(name, in[0]->ndim, in[0]->shape, in[1]->ndim, in[1]->shape, &m->ndim, m->shape);
}

static txc_status cpu_masked_fill(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    scalar_val v = {.raw = 0};
    if (out->dtype == TXC_I64)
        v.i = (int64_t)a->f[0];
    else
        txc_dtype_store(out->dtype, &v, 0, a->f[0]);
    ew_input ins[3];
    ew_tensor_input(&ins[0], in[1], out, TXC_BOOL, TXC_BOOL);
    ew_const_input(&ins[1], &v, out->dtype);
    ew_tensor_input(&ins[2], in[0], out, out->dtype, out->dtype);
    size_t es = txc_dtype_size(out->dtype);
    return ew_run(out, out->dtype, 3, ins, k_select, &es);
}

/* ==== registration ============================================================= */

#define EW_DEF(KIND, OP)                                                                             \
    static txc_status infer_##OP(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)  \
    {                                                                                                \
        return infer_##KIND(TXC_OP_##OP, in, n_in, a, m);                                            \
    }                                                                                                \
    static txc_status cpu_##OP(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a) \
    {                                                                                                \
        return cpu_##KIND(TXC_OP_##OP, out, in, n_in, a);                                            \
    }

EW_DEF(binary, ADD)
EW_DEF(binary, SUB)
EW_DEF(binary, MUL)
EW_DEF(binary, DIV)
EW_DEF(binary, POW)
EW_DEF(binary, MAXIMUM)
EW_DEF(binary, MINIMUM)
EW_DEF(binary, RSUB)
EW_DEF(binary, EQ)
EW_DEF(binary, NE)
EW_DEF(binary, LT)
EW_DEF(binary, LE)
EW_DEF(binary, GT)
EW_DEF(binary, GE)
EW_DEF(binary, LOGICAL_AND)
EW_DEF(binary, LOGICAL_OR)
EW_DEF(binary, BITWISE_AND)
EW_DEF(binary, BITWISE_OR)
EW_DEF(unary, NEG)
EW_DEF(unary, ABS)
EW_DEF(unary, EXP)
EW_DEF(unary, LOG)
EW_DEF(unary, SQRT)
EW_DEF(unary, RSQRT)
EW_DEF(unary, SIN)
EW_DEF(unary, COS)
EW_DEF(unary, TANH)
EW_DEF(unary, SIGMOID)
EW_DEF(unary, SILU)
EW_DEF(unary, GELU)
EW_DEF(unary, RELU)
EW_DEF(unary, LOGICAL_NOT)

#define REG(OP) t[TXC_OP_##OP] = (txc_op_def){.infer = infer_##OP, .cpu = cpu_##OP}

void txc_ops_register_elementwise(txc_op_def *t)
{
    REG(ADD); REG(SUB); REG(MUL); REG(DIV); REG(POW); REG(MAXIMUM); REG(MINIMUM); REG(RSUB);
    REG(EQ); REG(NE); REG(LT); REG(LE); REG(GT); REG(GE); REG(LOGICAL_AND); REG(LOGICAL_OR);
    REG(BITWISE_AND); REG(BITWISE_OR);
    REG(NEG); REG(ABS); REG(EXP); REG(LOG); REG(SQRT); REG(RSQRT); REG(SIN); REG(COS); REG(TANH);
    REG(SIGMOID); REG(SILU); REG(GELU); REG(RELU); REG(LOGICAL_NOT);
    t[TXC_OP_WHERE] = (txc_op_def){.infer = infer_where, .cpu = cpu_where};
    t[TXC_OP_MASKED_FILL] = (txc_op_def){.infer = infer_masked_fill, .cpu = cpu_masked_fill};
}
