/* Scans along one dim: aten::cumsum (torch.cumsum). See ops/registry.h.
 *
 * As torch's CPU kernel (aten/src/ATen/native/ReduceOps.cpp impl_func_cum_ops
 * and cpu/ReduceOpsKernel.cpp cumsum_cpu_kernel): the input is converted to
 * the result's dtype first, then summed in at::acc_type<result, false> —
 * double for float32, float for float16/bfloat16 (each running sum rounded
 * to the result dtype when stored), int64 for integers (int32 results wrap
 * as the cast does). A 0-d input is copied. */
#include "ops/kernels.h"

#include <string.h>

typedef struct scan_ctx {
    const char *in;
    char *out;
    txc_dtype idt, odt;
    int64_t len, in_stride, out_stride; /* along dim; strides in bytes */
    char *row;                           /* len elements of odt, contiguous */
    float *facc;                         /* f16/bf16: len float32 */
} scan_ctx;

static void scan_one(const scan_ctx *c, const char *src, char *dst)
{
    const int64_t n = c->len;
    const size_t oes = txc_dtype_size(c->odt);
    txc_ops_convert(c->idt, src, c->in_stride, c->odt, c->row, (int64_t)oes, n);
    switch (c->odt) {
    case TXC_F32: {
        const float *x = (const float *)c->row;
        double acc = 0;
        for (int64_t i = 0; i < n; i++) {
            acc += x[i];
            float v = (float)acc;
            memcpy(dst + i * c->out_stride, &v, sizeof v);
        }
        break;
    }
    case TXC_F16:
    case TXC_BF16: {
        txc_kern_to_f32(c->odt, c->row, 1, c->facc, n);
        float acc = 0;
        for (int64_t i = 0; i < n; i++) {
            acc += c->facc[i];
            c->facc[i] = acc;
        }
        txc_ops_convert(TXC_F32, c->facc, 4, c->odt, dst, c->out_stride, n);
        break;
    }
    case TXC_I64: {
        const int64_t *x = (const int64_t *)c->row;
        uint64_t acc = 0; /* wraps as torch's int64 does, without signed overflow */
        for (int64_t i = 0; i < n; i++) {
            acc += (uint64_t)x[i];
            int64_t v = (int64_t)acc;
            memcpy(dst + i * c->out_stride, &v, sizeof v);
        }
        break;
    }
    case TXC_I32: {
        const int32_t *x = (const int32_t *)c->row;
        uint64_t acc = 0;
        for (int64_t i = 0; i < n; i++) {
            acc += (uint64_t)(int64_t)x[i];
            int32_t v = (int32_t)(uint32_t)acc;
            memcpy(dst + i * c->out_stride, &v, sizeof v);
        }
        break;
    }
    default:
        break;
    }
}

static void scan_row(void *vc, const int64_t *off, const int64_t *st, int64_t n)
{
    const scan_ctx *c = vc;
    for (int64_t i = 0; i < n; i++)
        scan_one(c, c->in + off[0] + i * st[0], c->out + off[1] + i * st[1]);
}

static txc_status infer_cumsum_dim(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m, int *dim)
{
    if (n_in != 1)
        return txc_error(TXC_ERR_INTERNAL, "aten::cumsum: expected 1 input, got %d", n_in);
    const txc_tensor *t = in[0];
    if (txc_dtype_is_quantized(t->dtype))
        return txc_error(TXC_ERR_INVALID, "aten::cumsum: not implemented for %s (dequantize first)",
                         txc_dtype_name(t->dtype));
    if (a->dtype == TXC_BOOL || txc_dtype_is_quantized(a->dtype) || (int)a->dtype < 0 ||
        a->dtype >= TXC_DTYPE_COUNT)
        return txc_error(TXC_ERR_INVALID, "aten::cumsum: result dtype %s is not supported (float32, float16, "
                                          "bfloat16, int32, int64)", txc_dtype_name(a->dtype));
    if (a->n_ints != 1)
        return txc_error(TXC_ERR_INVALID, "aten::cumsum: one dim is required");
    if (txc_norm_dim("aten::cumsum", a->ints[0], t->ndim, dim) != TXC_OK)
        return TXC_ERR_INVALID;
    m->dtype = a->dtype;
    m->ndim = t->ndim;
    memcpy(m->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    return TXC_OK;
}

static txc_status infer_cumsum(txc_tensor *const *in, int n_in, const txc_op_attrs *a, txc_meta *m)
{
    int dim;
    return infer_cumsum_dim(in, n_in, a, m, &dim);
}

static txc_status cpu_cumsum(txc_tensor *out, txc_tensor *const *in, int n_in, const txc_op_attrs *a)
{
    const txc_tensor *t = in[0];
    txc_meta m;
    int dim;
    if (infer_cumsum_dim(in, n_in, a, &m, &dim) != TXC_OK)
        return TXC_ERR_INVALID;
    if (t->numel == 0)
        return TXC_OK;
    size_t ies = txc_dtype_size(t->dtype), oes = txc_dtype_size(out->dtype);
    int64_t cs[TXC_MAX_DIMS];
    txc_impl_contiguous_strides(out->ndim, out->shape, cs);
    scan_ctx c = {.in = txc_impl_data(t), .out = txc_impl_data(out), .idt = t->dtype, .odt = out->dtype,
                  .len = t->ndim ? t->shape[dim] : 1, .in_stride = t->ndim ? t->strides[dim] * (int64_t)ies : 0,
                  .out_stride = t->ndim ? cs[dim] * (int64_t)oes : 0};
    bool half = out->dtype == TXC_F16 || out->dtype == TXC_BF16;
    size_t row_bytes = (size_t)c.len * oes;
    size_t bytes = row_bytes + (half ? (size_t)c.len * sizeof(float) + 16 : 0);
    char *scratch = txc_scratch(bytes, TXC_SCRATCH_REDUCE);
    if (!scratch)
        return txc_error(TXC_ERR_NOMEM, "aten::cumsum: out of memory");
    c.row = scratch;
    if (half)
        c.facc = (float *)(scratch + ((row_bytes + 15) & ~(size_t)15));
    txc_ops_loop_rows(t->ndim, t->shape, dim, t->strides, ies, cs, oes, scan_row, &c);
    return TXC_OK;
}

void txc_ops_register_scan(txc_op_def *t)
{
    t[TXC_OP_CUMSUM] = (txc_op_def){.infer = infer_cumsum, .cpu = cpu_cumsum};
}
