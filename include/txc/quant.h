/*
 * txc/quant.h — ggml's block-quantized weight types: conversion to and
 * from float32.
 *
 * The types and their block layouts are those of txc/dtype.h (TXC_Q8_0 ...
 * TXC_Q6_K, ggml-common.h's block_q8_0 ... block_q6_K). The arithmetic is
 * ggml's reference C (ggml-quants.c) evaluated in float32 without fused
 * multiply-adds, which is what the `gguf` Python package's gguf.quants
 * computes with numpy:
 *   - dequantization is bit-exact against gguf.quants.dequantize (tests/
 *     test_quant.c, fixtures from scripts/gen_quant_fixtures.py);
 *   - quantization of Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 is bit-exact against
 *     gguf.quants.quantize (= ggml's quantize_row_*_ref); Q4_K, Q5_K and
 *     Q6_K (which gguf.quants does not quantize) follow quantize_row_q4_K_ref,
 *     quantize_row_q5_K_ref, quantize_row_q6_K_ref (make_qkx2_quants /
 *     make_qx_quants, no importance matrix: what llama-quantize does without
 *     --imatrix) and are bit-exact against ggml-quants.c compiled with
 *     -ffp-contract=off. A llama.cpp built with contraction (GCC's default
 *     in GNU C mode, with FMA) may round a few ties differently.
 */
#ifndef TXC_QUANT_H
#define TXC_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "txc/array.h"
#include "txc/dtype.h"
#include "txc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* n elements of quantized `dt` at src (n / block_size blocks, ggml's
 * layout) to n float32 at dst (ggml's dequantize_row_*). Also accepts
 * F32/F16/BF16 sources (a conversion). Errors: TXC_ERR_INVALID when n is
 * negative or not a multiple of the block size, TXC_ERR_UNSUPPORTED for
 * an integer or bool dtype. */
txc_status txc_quant_dequantize(txc_dtype dt, const void *src, float *dst, int64_t n);

/* n float32 at src to n elements of `dt` at dst (txc_dtype_nbytes(dt, n)
 * bytes; ggml's quantize_row_*_ref, see above). Also F32/F16/BF16
 * destinations (round to nearest even). Errors as txc_quant_dequantize. */
txc_status txc_quant_quantize(txc_dtype dt, const float *src, void *dst, int64_t n);

/* Load-time repacking (ops/quant_repack.c): a 2-d Q4_0, Q4_1, Q8_0 or Q4_K
 * weight of 8 rows or more has its rows interleaved in groups of 8, in
 * place (the same bytes, the same size; the array must be writable and not
 * yet shared), and is marked so that linear and embedding read it in that
 * layout (ops/quant_impl.h gives the layout and the kernels' summation
 * order: a float32 order other than the row layout's, within the same
 * error bound). The layout idea is ggml-cpu's repacked block_q4_0x8.
 * Any other array is left as it is (TXC_OK). Errors: TXC_ERR_NOMEM (the
 * array is then unusable). */
txc_status txc_quant_repack(txc_array *a);
/* 8 when a (rows, K) weight of `dt` is repacked by txc_quant_repack, else 0. */
int txc_quant_interleave_for(txc_dtype dt, int64_t rows);
/* Whether model loading repacks (the default; TXC_QUANT_REPACK=0 keeps
 * ggml's row layout, for comparisons). */
bool txc_quant_repack_enabled(void);

#ifdef __cplusplus
}
#endif
#endif
