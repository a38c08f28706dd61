/* Quantized linear and embedding: activation quantization, the portable dot
 * kernels, and the GEMV/GEMM driver (see ops/quant_impl.h for the method
 * and its error bound). */
#include <math.h>
#include <string.h>

#include "core/impl.h"
#include "ops/kernels.h"
#include "ops/quant_impl.h"
#include "txc/quant.h"
#include "txc/threads.h"

/* ---- activations ------------------------------------------------------------------ */

int64_t txc_qact_block(txc_dtype dt)
{
    return dt == TXC_Q4_K || dt == TXC_Q5_K || dt == TXC_Q6_K ? 256 : 32;
}

/* byte offsets of a row's parts (each 32-aligned) */
typedef struct qact_layout {
    size_t d, s, qs, qp, dv, sv, iv, bs, D, total;
} qact_layout;

static size_t al32(size_t x) { return (x + 31) & ~(size_t)31; }

static qact_layout qact_layout_of(int64_t K, int64_t block)
{
    size_t nb = (size_t)(K / 32), np = (nb + 1) / 2, k = (size_t)K;
    qact_layout l = {0};
    l.s = al32(nb * 4);
    l.qs = l.s + al32(nb * 4);
    size_t at = l.qs + k;
    if (block == 256) {
        l.bs = at, at += al32(nb * 2);
        l.D = at, at += al32(nb / 8 * 4);
    } else {
        l.qp = at, at += np * 64;
        l.dv = at, at += np * 32;
        l.sv = at, at += al32(np * 16);
        l.iv = at, at += np * 32;
    }
    l.total = at;
    return l;
}

size_t txc_qact_row_bytes(int64_t K, int64_t block) { return qact_layout_of(K, block).total; }

txc_qact txc_qact_view(const void *buf, int64_t K, int64_t block)
{
    qact_layout l = qact_layout_of(K, block);
    const char *p = buf;
    txc_qact a = {.d = (const float *)(p + l.d), .s = (const float *)(p + l.s), .qs = (const int8_t *)(p + l.qs)};
    if (block == 256) {
        a.bs = (const int16_t *)(p + l.bs);
        a.D = (const float *)(p + l.D);
    } else {
        a.qp = (const int8_t *)(p + l.qp);
        a.dv = (const float *)(p + l.dv);
        a.sv = (const float *)(p + l.sv);
        a.iv = (const int32_t *)(p + l.iv);
    }
    return a;
}

/* nearest-even(x * id), |.| <= 127 (clamped, and NaN made 0, before the
 * cast): _mm256_round_ps(_MM_ROUND_NEAREST) of ggml's x86 quantize_row_q8_0 /
 * q8_1 and nearest_int of quantize_row_q8_K_ref on finite inputs */
static inline int8_t q8(float x, float id)
{
    float r = nearbyintf(x * id);
    return (int8_t)(r >= 127.0f ? 127 : r <= -127.0f ? -127 : r == r ? (int)r : 0);
}

/* One activation block as ggml quantizes it (see ops/quant_impl.h): the
 * multiplier id = 127/amax; the scale d = amax/127 for a block of 32
 * (rounded to float16 by the caller), 1/id for a block of 256 (q8_K's
 * d = 1/iscale, float32). */
static void qact_block_ref(const float *x, int64_t block, int8_t *q, float *d_out, int32_t *sums)
{
    float amax = 0.0f;
    for (int64_t j = 0; j < block; j++) {
        float v = fabsf(x[j]);
        amax = amax > v ? amax : v;
    }
    float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    *d_out = block == 256 ? (amax != 0.0f ? 1.0f / id : 0.0f) : amax / 127.0f;
    for (int64_t b = 0; b < block / 32; b++) {
        int32_t sum = 0;
        for (int j = 0; j < 32; j++) {
            int8_t v = q8(x[b * 32 + j], id);
            q[b * 32 + j] = v;
            sum += v;
        }
        sums[b] = sum;
    }
}

/* v rounded to float16 as ggml stores q8_0's d and q8_1's d and s
 * (GGML_CPU_FP32_TO_FP16: nearest even, subnormals kept), or v itself where
 * float16 would overflow (ggml's inf: its product is then inf or NaN) */
static inline float f16_round(float v)
{
    float r = txc_f16_to_f32(txc_f32_to_f16(v));
    return isinf(r) && !isinf(v) ? v : r;
}

txc_qact txc_qact_quantize(const float *x, int64_t K, int64_t block, void *buf)
{
    qact_layout l = qact_layout_of(K, block);
    char *p = buf;
    float *d = (float *)(p + l.d), *s = (float *)(p + l.s);
    int8_t *qs = (int8_t *)(p + l.qs);
    int64_t nb = K / 32, per = block / 32;
    txc_qact_block_fn fn = qact_block_ref;
#if TXC_HAVE_X86
    if (txc_kern_simd_level() >= 1 && txc_qact_block_avx2())
        fn = txc_qact_block_avx2();
#endif
    for (int64_t B = 0; B < nb; B += per) {
        float db;
        int32_t sums[8];
        fn(x + B * 32, block, qs + B * 32, &db, sums);
        for (int64_t b = B; b < B + per; b++) {
            /* q8_1's s is d * sum(q) with d before its rounding */
            d[b] = block == 256 ? db : f16_round(db);
            s[b] = block == 256 ? db * (float)sums[b - B] : f16_round(db * (float)sums[b - B]);
            if (block == 256)
                ((int16_t *)(p + l.bs))[b] = (int16_t)sums[b - B];
        }
        if (block == 256)
            ((float *)(p + l.D))[B / 8] = db;
    }
    if (block != 256) { /* the pairs */
        int8_t *qp = (int8_t *)(p + l.qp);
        float *dv = (float *)(p + l.dv), *sv = (float *)(p + l.sv);
        int32_t *iv = (int32_t *)(p + l.iv);
        for (int64_t pr = 0; pr < (nb + 1) / 2; pr++) {
            for (int h = 0; h < 2; h++) {
                int64_t b = 2 * pr + h;
                int8_t *o = qp + pr * 64 + h * 16;
                float *dd = dv + pr * 8 + h * 4;
                int32_t *ii = iv + pr * 8 + h * 4;
                sv[pr * 4 + 2 * h] = 0.0f;
                memset(ii, 0, 16);
                if (b < nb) {
                    memcpy(o, qs + b * 32, 16);
                    memcpy(o + 32, qs + b * 32 + 16, 16);
                    int sum = 0;
                    for (int j = 0; j < 32; j++)
                        sum += qs[b * 32 + j];
                    dd[0] = dd[1] = dd[2] = dd[3] = d[b];
                    sv[pr * 4 + 2 * h + 1] = s[b];
                    ii[0] = sum;
                } else {
                    memset(o, 0, 16);
                    memset(o + 32, 0, 16);
                    dd[0] = dd[1] = dd[2] = dd[3] = 0.0f;
                    sv[pr * 4 + 2 * h + 1] = 0.0f;
                }
            }
        }
    }
    return txc_qact_view(buf, K, block);
}

/* ---- portable dot kernels ----------------------------------------------------------
 * Per 32-element block of a weight row: integer weights q[32], a float
 * scale dw and (types with a min) mw, so that w = dw*q + mw (Q6_K: the
 * 16-element scales folded into the integers, dw = d). */

typedef struct wblock {
    int16_t q[32];
    float dw, mw;
} wblock;

static void unpack(txc_dtype dt, const uint8_t *row, int64_t b, wblock *o)
{
    uint16_t h;
    switch (dt) {
    case TXC_Q8_0: {
        const uint8_t *p = row + b * 34;
        memcpy(&h, p, 2);
        o->dw = txc_f16_to_f32(h), o->mw = 0;
        for (int j = 0; j < 32; j++)
            o->q[j] = (int8_t)p[2 + j];
        break;
    }
    case TXC_Q4_0: case TXC_Q4_1: {
        bool m = dt == TXC_Q4_1;
        const uint8_t *p = row + b * (m ? 20 : 18), *q = p + (m ? 4 : 2);
        memcpy(&h, p, 2);
        o->dw = txc_f16_to_f32(h);
        memcpy(&h, p + 2, 2);
        o->mw = m ? txc_f16_to_f32(h) : 0;
        for (int j = 0; j < 16; j++) {
            o->q[j] = (int16_t)((q[j] & 15) - (m ? 0 : 8));
            o->q[j + 16] = (int16_t)((q[j] >> 4) - (m ? 0 : 8));
        }
        break;
    }
    case TXC_Q5_0: case TXC_Q5_1: {
        bool m = dt == TXC_Q5_1;
        const uint8_t *p = row + b * (m ? 24 : 22), *q = p + (m ? 8 : 6);
        uint32_t qh;
        memcpy(&h, p, 2);
        o->dw = txc_f16_to_f32(h);
        memcpy(&h, p + 2, 2);
        o->mw = m ? txc_f16_to_f32(h) : 0;
        memcpy(&qh, p + (m ? 4 : 2), 4);
        for (int j = 0; j < 16; j++) {
            int x0 = (q[j] & 15) | (int)(((qh >> j) & 1) << 4), x1 = (q[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            o->q[j] = (int16_t)(x0 - (m ? 0 : 16));
            o->q[j + 16] = (int16_t)(x1 - (m ? 0 : 16));
        }
        break;
    }
    case TXC_Q4_K: case TXC_Q5_K: {
        bool five = dt == TXC_Q5_K;
        const uint8_t *p = row + (b / 8) * (five ? 176 : 144);
        int sub = (int)(b % 8); /* sub-block: 64-element group sub/2, low or high nibbles */
        uint16_t hd, hm;
        memcpy(&hd, p, 2);
        memcpy(&hm, p + 2, 2);
        uint8_t sc, mn;
        txc_quant_scale_min_k4(sub, p + 4, &sc, &mn);
        o->dw = txc_f16_to_f32(hd) * sc;
        o->mw = -(txc_f16_to_f32(hm) * mn);
        const uint8_t *ql = p + (five ? 48 : 16) + (sub / 2) * 32, *qh = p + 16;
        for (int j = 0; j < 32; j++) {
            int v = sub & 1 ? ql[j] >> 4 : ql[j] & 15;
            if (five)
                v += (qh[j] >> sub) & 1 ? 16 : 0;
            o->q[j] = (int16_t)v;
        }
        break;
    }
    case TXC_Q6_K: {
        const uint8_t *p = row + (b / 8) * 210;
        int sub = (int)(b % 8), half = sub / 4, k = sub % 4; /* 128-element half, quarter k */
        const uint8_t *ql = p + half * 64, *qh = p + 128 + half * 32;
        const int8_t *sc = (const int8_t *)(p + 192) + half * 8;
        memcpy(&h, p + 208, 2);
        o->dw = txc_f16_to_f32(h), o->mw = 0;
        for (int l = 0; l < 32; l++) {
            int lo = k & 1 ? ql[l + 32] : ql[l];
            lo = k >= 2 ? lo >> 4 : lo & 15;
            int v = (lo | (((qh[l] >> (2 * k)) & 3) << 4)) - 32;
            o->q[l] = (int16_t)(v * sc[l / 16 + 2 * k]);
        }
        break;
    }
    default: memset(o, 0, sizeof *o); break;
    }
}

void txc_qdot_ref(txc_dtype dt, const uint8_t *w, size_t row_bytes, int64_t n, int64_t K, const txc_qact *a, int m,
                  float *y, int64_t ldy)
{
    int64_t nb = K / 32;
    for (int64_t j = 0; j < n; j++) {
        const uint8_t *row = w + (size_t)j * row_bytes;
        float acc[TXC_QDOT_M] = {0}, accm[TXC_QDOT_M] = {0};
        for (int64_t b = 0; b < nb; b++) {
            wblock wb;
            unpack(dt, row, b, &wb);
            for (int r = 0; r < m; r++) {
                const int8_t *qa = a[r].qs + b * 32;
                int32_t isum = 0;
                for (int k = 0; k < 32; k++)
                    isum += wb.q[k] * qa[k];
                acc[r] += (wb.dw * a[r].d[b]) * (float)isum;
                accm[r] += wb.mw * a[r].s[b];
            }
        }
        for (int r = 0; r < m; r++)
            y[r * ldy + j] = acc[r] + accm[r];
    }
}

/* ---- the driver ---------------------------------------------------------------------- */

/* Weight rows per block of the GEMM (their bytes stay in L1/L2 while every
 * activation tile passes over them). */
#define QGEMM_NB 16
/* Row chunks per thread of a parallel GEMV (taken on demand). */
#define QGEMV_CHUNKS 8
/* Below this many multiply-adds the product runs on the calling thread. */
#define QPAR_MIN_MACS (64 * 1024)

typedef struct qjob {
    txc_dtype dt;
    int il;
    int64_t M, N, K, chunk;
    const uint8_t *W;
    size_t row_bytes;
    const char *qa;
    size_t qa_bytes;
    int64_t qa_block;
    float *C;
    int64_t ldc;
} qjob;

static txc_qdot_fn pick(txc_dtype dt)
{
#if TXC_HAVE_X86
    if (txc_kern_simd_level() >= 1) {
        txc_qdot_fn f = txc_qdot_avx2_for(dt);
        if (f)
            return f;
    }
#endif
    return txc_qdot_ref;
}

static txc_qdot_fn pick_r8(txc_dtype dt)
{
#if TXC_HAVE_X86
    if (txc_kern_simd_level() >= 2) {
        txc_qdot_fn f = txc_qdot_r8_vnni_for(dt);
        if (f)
            return f;
    }
    if (txc_kern_simd_level() >= 1) {
        txc_qdot_fn f = txc_qdot_r8_avx2_for(dt);
        if (f)
            return f;
    }
#endif
    return txc_qdot_r8_ref;
}

/* Rows [j0, j0 + n) of an N-row weight W of interleave il into y[r*ldy +
 * j - j0]. With il, j0 is a multiple of 8 and j0 + n one too or N (the
 * callers cut the rows at multiples of 16): whole groups, then the tail
 * rows in ggml's layout. */
static void qdot_rows(txc_dtype dt, int il, const uint8_t *W, int64_t N, size_t rb, int64_t j0, int64_t n,
                      int64_t K, const txc_qact *a, int m, float *y, int64_t ldy)
{
    if (!il) {
        pick(dt)(dt, W + (size_t)j0 * rb, rb, n, K, a, m, y, ldy);
        return;
    }
    int64_t full = N / il * il, j1 = j0 + n, jg = j1 < full ? j1 : full;
    if (jg > j0)
        pick_r8(dt)(dt, W + (size_t)j0 * rb, rb, (jg - j0) / il, K, a, m, y, ldy);
    int64_t t0 = jg > j0 ? jg : j0;
    if (j1 > t0)
        txc_qdot_r8_tail(dt, W + (size_t)t0 * rb, rb, j1 - t0, K, a, m, y + (t0 - j0), ldy);
}

static void qjob_rows(const qjob *j, int64_t n0, int64_t n1)
{
    for (int64_t jb = n0; jb < n1; jb += QGEMM_NB) {
        int64_t nb = n1 - jb < QGEMM_NB ? n1 - jb : QGEMM_NB;
        for (int64_t i = 0; i < j->M; i += TXC_QDOT_M) {
            int m = j->M - i < TXC_QDOT_M ? (int)(j->M - i) : TXC_QDOT_M;
            txc_qact a[TXC_QDOT_M];
            for (int r = 0; r < m; r++)
                a[r] = txc_qact_view(j->qa + (size_t)(i + r) * j->qa_bytes, j->K, j->qa_block);
            qdot_rows(j->dt, j->il, j->W, j->N, j->row_bytes, jb, nb, j->K, a, m, j->C + i * j->ldc + jb, j->ldc);
        }
    }
}

static void qjob_task(void *ctx, int64_t t)
{
    const qjob *j = ctx;
    int64_t n0 = t * j->chunk, n1 = n0 + j->chunk < j->N ? n0 + j->chunk : j->N;
    if (n0 < n1)
        qjob_rows(j, n0, n1);
}

txc_status txc_quant_gemm(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const void *W,
                          txc_dtype dt, float *C, int64_t ldc)
{
    return txc_quant_gemm_il(M, N, K, A, lda, W, dt, 0, C, ldc);
}

txc_status txc_quant_gemm_il(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const void *W,
                             txc_dtype dt, int il, float *C, int64_t ldc)
{
    if (M <= 0 || N <= 0)
        return TXC_OK;
    if (K % txc_dtype_block_size(dt) != 0 || K <= 0)
        return txc_error(TXC_ERR_INVALID, "aten::linear: in_features %lld is not a multiple of %s's block of %lld",
                         (long long)K, txc_dtype_name(dt), (long long)txc_dtype_block_size(dt));
    int64_t block = txc_qact_block(dt);
    size_t qb = txc_qact_row_bytes(K, block);
    char *qa = txc_scratch(qb * (size_t)M, TXC_SCRATCH_GEMM_B);
    if (!qa)
        return txc_error(TXC_ERR_NOMEM, "aten::linear: out of memory (quantized activations)");
    for (int64_t i = 0; i < M; i++)
        txc_qact_quantize(A + i * lda, K, block, qa + (size_t)i * qb);
    qjob j = {dt, il, M, N, K, N, W, txc_dtype_row_bytes(dt, K), qa, qb, block, C, ldc};
    int threads = txc_threads_get();
    double macs = (double)M * (double)N * (double)K;
    if (threads > 1 && macs >= QPAR_MIN_MACS && N >= 2 * QGEMM_NB) {
        /* chunks of whole row blocks, taken on demand (the GEMV streams the
         * weight once; a core that shares its time does less of it) */
        int64_t per = M == 1 ? threads * QGEMV_CHUNKS : threads * 2;
        int64_t chunk = (N + per - 1) / per;
        j.chunk = (chunk + QGEMM_NB - 1) / QGEMM_NB * QGEMM_NB;
        txc_parallel_for_dynamic((N + j.chunk - 1) / j.chunk, qjob_task, &j);
        return TXC_OK;
    }
    qjob_rows(&j, 0, N);
    return TXC_OK;
}

txc_status txc_quant_rows(txc_dtype dt, const void *W, int64_t K, int64_t row, float *dst)
{
    return txc_quant_rows_il(dt, W, row + 1, 0, K, row, dst);
}

/* ---- grouped GEMV: sibling projections of one row (q/k/v, gate/up) as one
 * parallel job over their rows laid end to end; each row's result is the
 * one txc_quant_gemm gives (the same kernel on the same activation row) -- */

typedef struct qgroup_job {
    int n;
    txc_qgemv_part parts[TXC_QGEMV_GROUP_MAX];
    int64_t task0[TXC_QGEMV_GROUP_MAX + 1]; /* part i's chunks are tasks [task0[i], task0[i+1]) */
    int64_t K, chunk;
    const char *qa[2]; /* the row quantized for activation blocks of 32 and 256 */
} qgroup_job;

static void qgroup_task(void *ctx, int64_t t)
{
    const qgroup_job *j = ctx;
    int i = 0;
    while (t >= j->task0[i + 1])
        i++;
    const txc_qgemv_part *p = &j->parts[i];
    int64_t lo = (t - j->task0[i]) * j->chunk, hi = lo + j->chunk < p->N ? lo + j->chunk : p->N;
    txc_qact a = j->qa[txc_qact_block(p->dt) == 256] ? txc_qact_view(j->qa[txc_qact_block(p->dt) == 256], j->K,
                                                                      txc_qact_block(p->dt))
                                                     : (txc_qact){0};
    qdot_rows(p->dt, p->il, p->W, p->N, txc_dtype_row_bytes(p->dt, j->K), lo, hi - lo, j->K, &a, 1, p->C + lo, 0);
}

txc_status txc_quant_gemv_group(int n, const txc_qgemv_part *parts, int64_t K, const float *A)
{
    int threads = txc_threads_get();
    if (n > TXC_QGEMV_GROUP_MAX || threads <= 1) {
        for (int i = 0; i < n; i++) {
            txc_status s = txc_quant_gemm_il(1, parts[i].N, K, A, K, parts[i].W, parts[i].dt, parts[i].il, parts[i].C,
                                             parts[i].N);
            if (s != TXC_OK)
                return s;
        }
        return TXC_OK;
    }
    for (int i = 0; i < n; i++)
        if (K <= 0 || K % txc_dtype_block_size(parts[i].dt) != 0)
            return txc_error(TXC_ERR_INVALID, "aten::linear: in_features %lld is not a multiple of %s's block",
                             (long long)K, txc_dtype_name(parts[i].dt));
    bool want[2] = {false, false};
    for (int i = 0; i < n; i++)
        want[txc_qact_block(parts[i].dt) == 256] = true;
    size_t b32 = want[0] ? txc_qact_row_bytes(K, 32) : 0, b256 = want[1] ? txc_qact_row_bytes(K, 256) : 0;
    char *qa = txc_scratch(b32 + b256, TXC_SCRATCH_GEMM_B);
    if (!qa)
        return txc_error(TXC_ERR_NOMEM, "aten::linear: out of memory (quantized activations)");
    qgroup_job j = {.n = n, .K = K};
    if (want[0])
        txc_qact_quantize(A, K, 32, qa), j.qa[0] = qa;
    if (want[1])
        txc_qact_quantize(A, K, 256, qa + b32), j.qa[1] = qa + b32;
    int64_t rows = 0;
    for (int i = 0; i < n; i++)
        rows += parts[i].N;
    /* chunks of whole 16-row blocks within each part (an interleaved
     * weight's groups stay whole), about QGEMV_CHUNKS a thread */
    int64_t chunk = (rows + threads * QGEMV_CHUNKS - 1) / (threads * QGEMV_CHUNKS);
    j.chunk = (chunk + 15) / 16 * 16;
    j.task0[0] = 0;
    for (int i = 0; i < n; i++) {
        j.parts[i] = parts[i];
        j.task0[i + 1] = j.task0[i] + (parts[i].N + j.chunk - 1) / j.chunk;
    }
    txc_parallel_for_dynamic(j.task0[n], qgroup_task, &j);
    return TXC_OK;
}

bool txc_quant_linear_group(int n, txc_tensor *const *outs, txc_tensor *const *const *args,
                            const txc_op_attrs *const *attrs, txc_status *status)
{
    const txc_tensor *x = args[0][0];
    int64_t K = x->ndim > 0 ? x->shape[x->ndim - 1] : 0;
    if (n < 2 || n > TXC_QGEMV_GROUP_MAX || x->dtype != TXC_F32 || x->numel != K || K <= 0 ||
        !txc_tensor_is_contiguous(x))
        return false;
    txc_qgemv_part parts[TXC_QGEMV_GROUP_MAX];
    for (int i = 0; i < n; i++) {
        const txc_tensor *w = args[i][1];
        if (args[i][0] != x || (attrs[i]->flags & TXC_ATTR_RESIDUAL) || outs[i]->dtype != TXC_F32 ||
            !txc_tensor_is_contiguous(outs[i]) || !txc_dtype_is_quantized(w->dtype) || w->ndim != 2 ||
            w->shape[1] != K || w->strides[1] != 1 || w->strides[0] != K)
            return false;
        int il = txc_quant_weight_il(w);
        if (il < 0)
            return false; /* linear refuses it, with its message */
        parts[i] = (txc_qgemv_part){txc_impl_data(w), w->dtype, w->shape[0], (float *)txc_impl_data(outs[i]), il};
    }
    *status = txc_quant_gemv_group(n, parts, K, txc_impl_data(x));
    for (int i = 0; *status == TXC_OK && i < n; i++) {
        const txc_tensor *b = (attrs[i]->flags & TXC_ATTR_NO_BIAS) ? NULL : args[i][2];
        if (!b)
            continue;
        int64_t N = parts[i].N;
        float *row = txc_scratch((size_t)N * sizeof(float), TXC_SCRATCH_ROW);
        if (!row) {
            *status = txc_error(TXC_ERR_NOMEM, "aten::linear: out of memory (bias)");
            break;
        }
        if (b->ndim == 0 || b->shape[0] == 1) {
            float v = (float)txc_dtype_load(b->dtype, txc_impl_data(b), 0);
            for (int64_t j = 0; j < N; j++)
                row[j] = v;
        } else {
            txc_kern_to_f32(b->dtype, txc_impl_data(b), b->strides[0], row, N);
        }
        for (int64_t j = 0; j < N; j++)
            parts[i].C[j] += row[j];
    }
    return true;
}
