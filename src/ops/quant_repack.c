/* Load-time repacking of block-quantized weights into groups of 8
 * interleaved rows, and the portable kernels over that layout (see
 * ops/quant_impl.h for the layout and the order of the sums; the AVX2
 * kernels are in quant_repack_avx2.c). The layout idea is that of ggml-cpu's
 * "repack" buffers (block_q4_0x8 & co.): one contiguous stream per 8 output
 * rows, whose block-b scales and integers sit side by side so that a SIMD
 * register holds the same 4 elements of all 8 rows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/impl.h"
#include "ops/quant_impl.h"
#include "txc/quant.h"
#include "txc/threads.h"

int txc_quant_interleave_for(txc_dtype dt, int64_t rows)
{
    if (rows < TXC_QR8)
        return 0;
    return dt == TXC_Q4_0 || dt == TXC_Q4_1 || dt == TXC_Q8_0 || dt == TXC_Q4_K ? TXC_QR8 : 0;
}

int txc_quant_weight_il(const txc_tensor *w)
{
    const txc_array *a = w->array;
    if (!a->interleave)
        return 0;
    return w->offset == 0 && w->ndim == 2 && a->ndim == 2 && w->shape[0] == a->shape[0] && w->shape[1] == a->shape[1]
               ? a->interleave
               : -1;
}

bool txc_quant_repack_enabled(void)
{
    const char *e = getenv("TXC_QUANT_REPACK");
    return !(e && e[0] == '0' && e[1] == '\0');
}

/* the integer bytes of a block: offset in ggml's block, count */
static void qs_span(txc_dtype dt, size_t *off, size_t *len)
{
    *off = dt == TXC_Q4_1 ? 4 : 2;
    *len = dt == TXC_Q8_0 ? 32 : 16;
}

/* Q4_K, one super-block of the group at o (1152 bytes, ops/quant_impl.h):
 * entry e = 8j + i is row i's sub-block j; its 6-bit scale and min are
 * split into low nibbles (bytes 32.. and 64.., entries e and e + 32 in a
 * byte) and 2-bit highs (bytes 96..: scale e, scale e + 32, min e, min
 * e + 32) */
static void q4k_put(uint8_t *o, int e, uint8_t sc, uint8_t mn)
{
    int k = e & 31, hi = e >> 5;
    o[32 + k] |= (uint8_t)((sc & 15) << (4 * hi));
    o[64 + k] |= (uint8_t)((mn & 15) << (4 * hi));
    o[96 + k] |= (uint8_t)((((sc >> 4) & 3) << (2 * hi)) | (((mn >> 4) & 3) << (4 + 2 * hi)));
}

static void q4k_get(const uint8_t *o, int e, uint8_t *sc, uint8_t *mn)
{
    int k = e & 31, hi = e >> 5;
    *sc = (uint8_t)(((o[32 + k] >> (4 * hi)) & 15) | (((o[96 + k] >> (2 * hi)) & 3) << 4));
    *mn = (uint8_t)(((o[64 + k] >> (4 * hi)) & 15) | (((o[96 + k] >> (4 + 2 * hi)) & 3) << 4));
}

/* One group of 8 plain rows (src, rb bytes each, nb 32-blocks) to the
 * interleaved layout at dst (8 * rb bytes); see ops/quant_impl.h. */
static void pack_group(txc_dtype dt, const uint8_t *src, size_t rb, int64_t nb, uint8_t *dst)
{
    if (dt == TXC_Q4_K) {
        for (int64_t sb = 0; sb < nb / 8; sb++) {
            uint8_t *o = dst + (size_t)sb * 1152;
            memset(o + 32, 0, 96);
            for (int i = 0; i < 8; i++) {
                const uint8_t *blk = src + (size_t)i * rb + (size_t)sb * 144;
                memcpy(o + 2 * i, blk, 2);
                memcpy(o + 16 + 2 * i, blk + 2, 2);
                for (int j = 0; j < 8; j++) {
                    uint8_t sc, mn;
                    txc_quant_scale_min_k4(j, blk + 4, &sc, &mn);
                    q4k_put(o, 8 * j + i, sc, mn);
                }
                for (int c = 0; c < 32; c++)
                    memcpy(o + 128 + 32 * c + 4 * i, blk + 16 + 4 * c, 4);
            }
        }
        return;
    }
    size_t bb = txc_dtype_block_bytes(dt), qo, ql;
    qs_span(dt, &qo, &ql);
    bool min = dt == TXC_Q4_1;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *o = dst + (size_t)b * 8 * bb;
        for (int i = 0; i < 8; i++) {
            const uint8_t *blk = src + (size_t)i * rb + (size_t)b * bb;
            memcpy(o + 2 * i, blk, 2);
            if (min)
                memcpy(o + 16 + 2 * i, blk + 2, 2);
            for (size_t c = 0; c < ql / 4; c++)
                memcpy(o + 8 * qo + c * 32 + 4 * (size_t)i, blk + qo + 4 * c, 4);
        }
    }
}

/* Row i (0..7) of the interleaved group at g, block b (Q4_K: super-block),
 * back to ggml's block bytes */
static void unpack_block(txc_dtype dt, const uint8_t *g, int64_t b, int i, uint8_t *blk)
{
    if (dt == TXC_Q4_K) {
        const uint8_t *o = g + (size_t)b * 1152;
        memcpy(blk, o + 2 * i, 2);
        memcpy(blk + 2, o + 16 + 2 * i, 2);
        uint8_t *sc = blk + 4; /* quantize_row_q4_K_ref's packing of the 6-bit scales and mins */
        memset(sc, 0, 12);
        for (int j = 0; j < 8; j++) {
            uint8_t ls, lm;
            q4k_get(o, 8 * j + i, &ls, &lm);
            if (j < 4) {
                sc[j] |= ls;
                sc[j + 4] |= lm;
            } else {
                sc[j + 4] = (uint8_t)((ls & 0xf) | ((lm & 0xf) << 4));
                sc[j - 4] |= (uint8_t)((ls >> 4) << 6);
                sc[j] |= (uint8_t)((lm >> 4) << 6);
            }
        }
        for (int c = 0; c < 32; c++)
            memcpy(blk + 16 + 4 * c, o + 128 + 32 * c + 4 * i, 4);
        return;
    }
    size_t bb = txc_dtype_block_bytes(dt), qo, ql;
    qs_span(dt, &qo, &ql);
    const uint8_t *o = g + (size_t)b * 8 * bb;
    memcpy(blk, o + 2 * i, 2);
    if (dt == TXC_Q4_1)
        memcpy(blk + 2, o + 16 + 2 * i, 2);
    for (size_t c = 0; c < ql / 4; c++)
        memcpy(blk + qo + 4 * c, o + 8 * qo + c * 32 + 4 * (size_t)i, 4);
}

typedef struct repack_ctx {
    txc_dtype dt;
    uint8_t *data;
    size_t rb;
    int64_t nb, groups, per;
    int failed;
} repack_ctx;

static void repack_task(void *ctx, int64_t t)
{
    repack_ctx *c = ctx;
    uint8_t *tmp = malloc(8 * c->rb);
    if (!tmp) {
        __atomic_store_n(&c->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    int64_t g1 = (t + 1) * c->per < c->groups ? (t + 1) * c->per : c->groups;
    for (int64_t g = t * c->per; g < g1; g++) {
        uint8_t *p = c->data + (size_t)g * 8 * c->rb;
        memcpy(tmp, p, 8 * c->rb);
        pack_group(c->dt, tmp, c->rb, c->nb, p);
    }
    free(tmp);
}

txc_status txc_quant_repack(txc_array *a)
{
    txc_dtype dt = a->dtype;
    int il = a->ndim == 2 ? txc_quant_interleave_for(dt, a->shape[0]) : 0;
    if (!il || a->interleave)
        return TXC_OK;
    int64_t K = a->shape[1];
    repack_ctx c = {dt, a->data, txc_dtype_row_bytes(dt, K), K / 32, a->shape[0] / 8, 64, 0};
    int64_t tasks = (c.groups + c.per - 1) / c.per;
    if (tasks > 1 && txc_threads_get() > 1)
        txc_parallel_for(tasks, repack_task, &c);
    else
        for (int64_t t = 0; t < tasks; t++)
            repack_task(&c, t);
    if (c.failed) /* some groups may be packed: the array is no longer usable */
        return txc_error(TXC_ERR_NOMEM, "out of memory (repacking a quantized weight)");
    a->interleave = il;
    return TXC_OK;
}

txc_status txc_quant_rows_il(txc_dtype dt, const void *W, int64_t N, int il, int64_t K, int64_t row, float *dst)
{
    size_t rb = txc_dtype_row_bytes(dt, K);
    const uint8_t *w = W;
    if (!il || row >= N / il * il)
        return txc_quant_dequantize(dt, w + (size_t)row * rb, dst, K);
    const uint8_t *g = w + (size_t)(row / 8) * 8 * rb;
    uint8_t blk[144];
    int64_t bs = txc_dtype_block_size(dt);
    for (int64_t b = 0; b < K / bs; b++) {
        unpack_block(dt, g, b, (int)(row % 8), blk);
        txc_quant_dequantize_block(dt, blk, dst + b * bs);
    }
    return TXC_OK;
}

/* ---- portable kernels in the interleaved order (ops/quant_impl.h) ------------------ */

static inline float h2f(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return txc_f16_to_f32(h);
}

/* ggml's block bytes at blk: integers q[32] (Q4_0 with its offset 8 taken
 * off), scale and min */
static void block_ints(txc_dtype dt, const uint8_t *blk, int32_t *q, float *dw, float *mw)
{
    *dw = h2f(blk);
    *mw = dt == TXC_Q4_1 ? h2f(blk + 2) : 0.0f;
    if (dt == TXC_Q8_0) {
        for (int j = 0; j < 32; j++)
            q[j] = (int8_t)blk[2 + j];
        return;
    }
    const uint8_t *p = blk + (dt == TXC_Q4_1 ? 4 : 2);
    int off = dt == TXC_Q4_0 ? 8 : 0;
    for (int j = 0; j < 16; j++) {
        q[j] = (p[j] & 15) - off;
        q[j + 16] = (p[j] >> 4) - off;
    }
}

/* one row against m activation rows: blocks in order, one fused
 * multiply-add a block into acc (and the min's into accm) */
/* Q4_K: per super-block the exact integers sum_j sc_j dot_j and sum_j
 * m_j sum(q_a over j), one fused multiply-add each (ops/quant_impl.h) */
static void row_ordered_q4k(const uint8_t *g, int i, const uint8_t *plain, int64_t nb, const txc_qact *a, int m,
                            float *y, int64_t ldy)
{
    float acc[TXC_QDOT_M] = {0}, accm[TXC_QDOT_M] = {0};
    for (int64_t sb = 0; sb < nb / 8; sb++) {
        uint8_t tmp[144];
        const uint8_t *blk = plain ? plain + (size_t)sb * 144 : (unpack_block(TXC_Q4_K, g, sb, i, tmp), tmp);
        float d = h2f(blk), dmin = h2f(blk + 2);
        for (int r = 0; r < m; r++) {
            int32_t isum = 0, msum = 0;
            for (int j = 0; j < 8; j++) {
                uint8_t sc, mn;
                txc_quant_scale_min_k4(j, blk + 4, &sc, &mn);
                const uint8_t *q = blk + 16 + (j / 2) * 32;
                const int8_t *qa = a[r].qs + sb * 256 + j * 32;
                int32_t dot = 0;
                for (int k = 0; k < 32; k++)
                    dot += (j & 1 ? q[k] >> 4 : q[k] & 15) * qa[k];
                isum += sc * dot;
                msum += mn * a[r].bs[sb * 8 + j];
            }
            acc[r] = fmaf((float)isum, d * a[r].D[sb], acc[r]);
            accm[r] = fmaf((float)msum, dmin * a[r].D[sb], accm[r]);
        }
    }
    for (int r = 0; r < m; r++)
        y[r * ldy] = acc[r] - accm[r];
}

static void row_ordered(txc_dtype dt, const uint8_t *g, int i, const uint8_t *plain, int64_t nb, const txc_qact *a,
                        int m, float *y, int64_t ldy)
{
    if (dt == TXC_Q4_K) {
        row_ordered_q4k(g, i, plain, nb, a, m, y, ldy);
        return;
    }
    size_t bb = txc_dtype_block_bytes(dt);
    float acc[TXC_QDOT_M] = {0}, accm[TXC_QDOT_M] = {0};
    for (int64_t b = 0; b < nb; b++) {
        uint8_t tmp[34];
        const uint8_t *blk = plain ? plain + (size_t)b * bb : (unpack_block(dt, g, b, i, tmp), tmp);
        int32_t q[32];
        float dw, mw;
        block_ints(dt, blk, q, &dw, &mw);
        for (int r = 0; r < m; r++) {
            const int8_t *qa = a[r].qs + b * 32;
            int32_t isum = 0;
            for (int k = 0; k < 32; k++)
                isum += q[k] * qa[k];
            acc[r] = fmaf((float)isum, dw * a[r].d[b], acc[r]);
            if (dt == TXC_Q4_1)
                accm[r] = fmaf(mw, a[r].s[b], accm[r]);
        }
    }
    for (int r = 0; r < m; r++)
        y[r * ldy] = dt == TXC_Q4_1 ? acc[r] + accm[r] : acc[r];
}

void txc_qdot_r8_ref(txc_dtype dt, const uint8_t *w, size_t rb, int64_t ng, int64_t K, const txc_qact *a, int m,
                     float *y, int64_t ldy)
{
    for (int64_t g = 0; g < ng; g++)
        for (int i = 0; i < 8; i++)
            row_ordered(dt, w + (size_t)g * 8 * rb, i, NULL, K / 32, a, m, y + g * 8 + i, ldy);
}

void txc_qdot_r8_tail(txc_dtype dt, const uint8_t *w, size_t rb, int64_t n, int64_t K, const txc_qact *a, int m,
                      float *y, int64_t ldy)
{
    for (int64_t j = 0; j < n; j++)
        row_ordered(dt, NULL, 0, w + (size_t)j * rb, K / 32, a, m, y + j, ldy);
}
