/*
 * txc/ops.h — ops with PyTorch semantics.
 *
 * Each function here is a thin frontend: it packs its arguments into an op
 * call and hands it to the tensors' environment (txc/env.h), which checks
 * them, infers the result's shape and dtype, and runs the kernel registered
 * for that op in the op table (src/ops/registry.h — one entry per op, named
 * after its aten op). Results follow torch exactly:
 *
 *  - broadcasting: shapes align from the right; size-1 dims stretch;
 *  - type promotion among bool < int32 < int64 < {bfloat16, float16} < float32
 *    (bf16 with f16 promotes to float32), as torch.result_type; a scalar
 *    argument (the *_scalar forms, torch's "wrapped number") does not raise
 *    a float tensor's dtype, and a non-integral scalar makes an integer tensor
 *    float32;
 *  - float16/bfloat16 arithmetic is computed in float32 and rounded once per
 *    op, as torch's CPU kernels do;
 *  - dims may be negative (counted from the end).
 *
 * Ownership: every function returns a new tensor owned by the caller, or by
 * the env's open scope when there is one (see env.h). A NULL input makes the
 * result NULL without overwriting the first recorded error, so a chain of
 * ops can be checked once at the end. On error: NULL and txc_last_error().
 *
 * Views (no copy; they share the input's array): txc_view/reshape (when the
 * strides allow), permute, transpose, narrow, slice, select, expand,
 * unsqueeze, squeeze. Everything else allocates a new contiguous result.
 */
#ifndef TXC_OPS_H
#define TXC_OPS_H

#include <stdbool.h>
#include <stdint.h>
#include "txc/env.h"
#include "txc/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- creation (in `env`, NULL = the active env; on its device) ---------- */

/* torch.zeros / ones / full(shape, value, dtype). */
txc_tensor *txc_zeros(txc_env *env, int ndim, const int64_t *shape, txc_dtype dtype);
txc_tensor *txc_ones(txc_env *env, int ndim, const int64_t *shape, txc_dtype dtype);
txc_tensor *txc_full(txc_env *env, int ndim, const int64_t *shape, double value, txc_dtype dtype);
/* torch.arange(start, end, step, dtype): ceil((end-start)/step) elements;
 * step 0 or a negative count is TXC_ERR_INVALID. */
txc_tensor *txc_arange(txc_env *env, double start, double end, double step, txc_dtype dtype);

/* ---- views (zero copy) --------------------------------------------------- */

/* Tensor.view(shape): one dim may be -1. TXC_ERR_INVALID when numel differs
 * or the strides cannot express it (torch's "view size is not compatible"). */
txc_tensor *txc_view(txc_tensor *t, int ndim, const int64_t *shape);
/* torch.reshape: a view when possible, else a contiguous copy. */
txc_tensor *txc_reshape(txc_tensor *t, int ndim, const int64_t *shape);
/* Tensor.permute(dims): dims is a permutation of 0..ndim-1. */
txc_tensor *txc_permute(txc_tensor *t, const int *dims);
txc_tensor *txc_transpose(txc_tensor *t, int dim0, int dim1);
/* Tensor.narrow(dim, start, length). */
txc_tensor *txc_narrow(txc_tensor *t, int dim, int64_t start, int64_t length);
/* t[..., start:end:step, ...] along dim, with Python's clamping of start/end
 * (negative counted from the end); step >= 1. */
txc_tensor *txc_slice(txc_tensor *t, int dim, int64_t start, int64_t end, int64_t step);
/* Tensor.select(dim, index): removes dim. */
txc_tensor *txc_select(txc_tensor *t, int dim, int64_t index);
/* Tensor.expand(shape): -1 keeps a dim; new leading dims allowed; stride 0. */
txc_tensor *txc_expand(txc_tensor *t, int ndim, const int64_t *shape);
txc_tensor *txc_unsqueeze(txc_tensor *t, int dim);
/* Tensor.squeeze(dim): removes dim if its size is 1, else returns a view
 * equal to t. txc_squeeze_all removes every size-1 dim. */
txc_tensor *txc_squeeze(txc_tensor *t, int dim);
txc_tensor *txc_squeeze_all(txc_tensor *t);
/* Tensor.contiguous(): t itself (retained) when already contiguous. */
txc_tensor *txc_contiguous(txc_tensor *t);
/* Tensor.to(dtype) (a copy; t itself, retained, when the dtype is the same). */
txc_tensor *txc_to_dtype(txc_tensor *t, txc_dtype dtype);
/* Tensor.clone(): always a new contiguous copy. */
txc_tensor *txc_clone(txc_tensor *t);

/* ---- elementwise ---------------------------------------------------------- */

txc_tensor *txc_add(txc_tensor *a, txc_tensor *b);
txc_tensor *txc_sub(txc_tensor *a, txc_tensor *b);
txc_tensor *txc_mul(txc_tensor *a, txc_tensor *b);
/* torch.div (true division: integer inputs give float32). */
txc_tensor *txc_div(txc_tensor *a, txc_tensor *b);
txc_tensor *txc_pow(txc_tensor *a, txc_tensor *b);
txc_tensor *txc_maximum(txc_tensor *a, txc_tensor *b);
txc_tensor *txc_minimum(txc_tensor *a, txc_tensor *b);
txc_tensor *txc_add_scalar(txc_tensor *a, double s);
txc_tensor *txc_sub_scalar(txc_tensor *a, double s);
txc_tensor *txc_mul_scalar(txc_tensor *a, double s);
txc_tensor *txc_div_scalar(txc_tensor *a, double s);
txc_tensor *txc_pow_scalar(txc_tensor *a, double s);
/* s - a, s / a (torch.rsub, reciprocal * s). */
txc_tensor *txc_rsub_scalar(txc_tensor *a, double s);

/* Unary math. Integer/bool inputs give float32 except neg/abs/relu, which
 * keep the dtype (as torch). */
txc_tensor *txc_neg(txc_tensor *a);
txc_tensor *txc_abs(txc_tensor *a);
txc_tensor *txc_exp(txc_tensor *a);
txc_tensor *txc_log(txc_tensor *a);
txc_tensor *txc_sqrt(txc_tensor *a);
txc_tensor *txc_rsqrt(txc_tensor *a);
txc_tensor *txc_sin(txc_tensor *a);
txc_tensor *txc_cos(txc_tensor *a);
txc_tensor *txc_tanh(txc_tensor *a);
txc_tensor *txc_sigmoid(txc_tensor *a);
/* F.silu: x * sigmoid(x). */
txc_tensor *txc_silu(txc_tensor *a);
/* F.gelu(approximate="none"): x/2 (1 + erf(x/√2)); approximate "tanh":
 * x/2 (1 + tanh(√(2/π)(x + 0.044715 x³))). */
txc_tensor *txc_gelu(txc_tensor *a, bool tanh_approximate);
txc_tensor *txc_relu(txc_tensor *a);

/* Comparisons: bool results, computed in the promoted dtype. */
txc_tensor *txc_eq(txc_tensor *a, txc_tensor *b);
txc_tensor *txc_ne(txc_tensor *a, txc_tensor *b);
txc_tensor *txc_lt(txc_tensor *a, txc_tensor *b);
txc_tensor *txc_le(txc_tensor *a, txc_tensor *b);
txc_tensor *txc_gt(txc_tensor *a, txc_tensor *b);
txc_tensor *txc_ge(txc_tensor *a, txc_tensor *b);
txc_tensor *txc_logical_and(txc_tensor *a, txc_tensor *b);
/* torch.logical_or (and `|` of bool tensors): any dtypes, nonzero is true;
 * a bool result, broadcast as the binary ops. */
txc_tensor *txc_logical_or(txc_tensor *a, txc_tensor *b);
/* torch.bitwise_and / torch.bitwise_or (`&`, `|`): integer and bool tensors
 * (torch.result_type promotes a bool operand to the other's integer dtype:
 * transformers' generate() keeps `unfinished_sequences` (int64) & a bool
 * stopping mask); a result of that dtype, broadcast as the binary ops.
 * TXC_ERR_INVALID for a float operand (torch refuses it too). */
txc_tensor *txc_bitwise_and(txc_tensor *a, txc_tensor *b);
txc_tensor *txc_bitwise_or(txc_tensor *a, txc_tensor *b);
txc_tensor *txc_logical_not(txc_tensor *a);

/* torch.where(cond, a, b): cond is bool; a, b promote; all broadcast. */
txc_tensor *txc_where(txc_tensor *cond, txc_tensor *a, txc_tensor *b);
/* Tensor.masked_fill(mask, value): mask is bool, broadcast to t's shape. */
txc_tensor *txc_masked_fill(txc_tensor *t, txc_tensor *mask, double value);

/* ---- reductions ------------------------------------------------------------ */

/* torch.sum(t, dims, keepdim): n_dims = 0 reduces over all dims. Bool/int
 * inputs sum into int64; floats into their dtype (accumulated in float32
 * / double). Dims must be distinct. */
txc_tensor *txc_sum(txc_tensor *t, int n_dims, const int *dims, bool keepdim);
/* torch.mean: float inputs only (TXC_ERR_INVALID for integers, as torch). */
txc_tensor *txc_mean(txc_tensor *t, int n_dims, const int *dims, bool keepdim);
/* torch.max(t, dim, keepdim).values / torch.argmax (int64; first index of
 * the maximum; NaN counts as the maximum, as torch). Empty reductions are
 * TXC_ERR_INVALID. txc_max_all / txc_argmax_all: over the flattened tensor. */
txc_tensor *txc_max(txc_tensor *t, int dim, bool keepdim);
txc_tensor *txc_argmax(txc_tensor *t, int dim, bool keepdim);
txc_tensor *txc_max_all(txc_tensor *t);
txc_tensor *txc_argmax_all(txc_tensor *t);
/* F.softmax / F.log_softmax along dim (float inputs; computed in float32,
 * result in the input dtype). */
txc_tensor *txc_softmax(txc_tensor *t, int dim);
txc_tensor *txc_log_softmax(txc_tensor *t, int dim);
/* torch.cumsum(t, dim, dtype): running sums along dim (negative dims count
 * from the end; a 0-d tensor is its own sum). The result has t's shape and
 * dtype `dtype` (any non-quantized dtype; torch's default when dtype=None is
 * int64 for bool/int inputs, the input's own for floats: pass that).
 * Accumulation as torch's CPU kernel
 * (aten/src/ATen/native/cpu/ReduceOpsKernel.cpp cumsum_cpu_kernel, acc_type):
 * double for float32, float for float16/bfloat16 (rounded per element on
 * output), int64 for integers. Errors: TXC_ERR_INVALID for a dim out of
 * range or a quantized input. transformers' generate() derives position_ids
 * from the attention mask with it. */
txc_tensor *txc_cumsum(txc_tensor *t, int dim, txc_dtype dtype);

/* ---- linear algebra and nn -------------------------------------------------- */

/* torch.matmul: 1-D·1-D dot, 2-D mm, batched with broadcasting of the batch
 * dims, 1-D operands promoted and the added dim removed. f32 accumulation. */
txc_tensor *txc_matmul(txc_tensor *a, txc_tensor *b);
/* F.linear(x, weight, bias): x (*, in) · weight (out, in)ᵀ + bias (out) ->
 * (*, out). bias may be NULL (no bias: not an error). */
txc_tensor *txc_linear(txc_tensor *x, txc_tensor *weight, txc_tensor *bias);
/* F.embedding(ids, weight): weight (num_embeddings, dim), ids int32/int64 of
 * any shape -> (*ids.shape, dim). An id out of range is TXC_ERR_INVALID
 * naming the id (torch raises IndexError). */
txc_tensor *txc_embedding(txc_tensor *weight, txc_tensor *ids);
/* F.rms_norm over the last dim: x / sqrt(mean(x², -1) + eps) * weight,
 * computed in float32 and cast back to x's dtype before the multiply by
 * weight, as transformers' LlamaRMSNorm. weight (dim) may be NULL. */
txc_tensor *txc_rms_norm(txc_tensor *x, txc_tensor *weight, double eps);
/* F.layer_norm over the last dim (biased variance); weight/bias may be NULL. */
txc_tensor *txc_layer_norm(txc_tensor *x, txc_tensor *weight, txc_tensor *bias, double eps);

/* torch.cat(tensors, dim) (same ndim; other dims equal; dtypes promote;
 * 1-D empty tensors are skipped as torch does). n at most 64. */
txc_tensor *txc_cat(txc_tensor *const *tensors, int n, int dim);
/* torch.stack(tensors, dim): new dim; all shapes equal. */
txc_tensor *txc_stack(txc_tensor *const *tensors, int n, int dim);
/* torch.index_select(t, dim, index): index is a 1-D int32/int64 tensor;
 * out-of-range indices are TXC_ERR_INVALID. */
txc_tensor *txc_index_select(txc_tensor *t, int dim, txc_tensor *index);
/* Tensor.index_copy(dim, index, source), functional (a new tensor), and the
 * in-place form index_copy_ that writes into `self` (which must be
 * contiguous and writable): self[..., index[i], ...] = source[..., i, ...]. */
txc_tensor *txc_index_copy(txc_tensor *self, int dim, txc_tensor *index, txc_tensor *source);
txc_status txc_index_copy_(txc_tensor *self, int dim, txc_tensor *index, txc_tensor *source);
/* torch.tril / triu over the last two dims, with `diagonal` offset. */
txc_tensor *txc_tril(txc_tensor *t, int64_t diagonal);
txc_tensor *txc_triu(txc_tensor *t, int64_t diagonal);

/* F.scaled_dot_product_attention(q, k, v, attn_mask, is_causal, scale,
 * enable_gqa=True):
 *   q (B, Hq, L, E), k (B, Hkv, S, E), v (B, Hkv, S, Ev) -> (B, Hq, L, Ev);
 *   Hq must be a multiple of Hkv (grouped-query heads: query head h reads
 *   kv head h / (Hq/Hkv), torch's repeat_interleave).
 *   attn_mask (NULL or broadcastable to (B, Hq, L, S)): bool (true = attend)
 *   or float (added to the scores). is_causal: torch's top-left causal mask
 *   tril(ones(L, S)); not allowed together with attn_mask.
 *   scale: NaN for the default 1/sqrt(E).
 * Scores and softmax in float32 whatever the input dtype. A row with no
 * allowed position gives zeros, as torch 2.x's CPU kernels. Row
 * invariance: every output row is bit-identical whatever the number of
 * query rows in the call (one decode row or a prefill, padded or not),
 * the batch, the row's place and the thread count — it depends only on
 * its query and the keys, values and mask entries it sees (the softmax in
 * fixed blocks of 128 keys merged in key order, flash attention's
 * rescaling; src/ops/attention.c). */
txc_tensor *txc_scaled_dot_product_attention(txc_tensor *q, txc_tensor *k, txc_tensor *v,
                                             txc_tensor *attn_mask, bool is_causal, double scale);
/* txc::causal_attention: scaled_dot_product_attention with transformers'
 * causal mask over absolute positions — key j is visible to query row i
 * iff j <= cache_position[i] — without materialising the mask. Keys past
 * max(cache_position) are never read, so attention over a StaticCache of
 * max_cache_len costs what its valid prefix costs (FlashAttention's
 * cache_seqlens). q (B, Hq, L, E), k/v (B, Hkv, S, E/Ev), cache_position
 * int64 (L) with values in [0, S) (else TXC_ERR_CAPACITY at run time);
 * scale NaN = 1/sqrt(E). Same numerics as txc_scaled_dot_product_attention. */
txc_tensor *txc_causal_attention(txc_tensor *q, txc_tensor *k, txc_tensor *v, txc_tensor *cache_position,
                                 double scale);
/* txc::rotary_embedding: transformers' apply_rotary_pos_emb for one tensor,
 * x * cos + rotate_half(x) * sin with rotate_half(x) = cat(-x[..., d/2:],
 * x[..., :d/2]) (Su et al. 2021, RoFormer; the half-split layout of the
 * Hugging Face checkpoints), in one kernel. x (..., d) float, d even; cos
 * and sin float, broadcastable to x's shape (e.g. (B, 1, L, d) for x
 * (B, H, L, d)); result x's shape in the promoted dtype, computed in
 * float32 with each product rounded to that dtype as the separate torch
 * ops round it (the bits of x * cos + rotate_half(x) * sin).
 * Errors: TXC_ERR_INVALID for an odd last dim, non-float inputs, or cos/sin
 * that do not broadcast to x. */
txc_tensor *txc_rotary_embedding(txc_tensor *x, txc_tensor *cos, txc_tensor *sin);

/* ---- sampling ---------------------------------------------------------------- */

/* Random numbers come from an explicit state, an int64 tensor (2) =
 * [seed, counter] (jax.random's keys, not torch's hidden generator): the
 * numbers are a pure function of (seed, counter + i) (splitmix64), so eager
 * code and a compiled plan that take the same state draw the same numbers.
 * The state is advanced in place (txc_rng_advance_), which a compiled plan
 * keeps as a write into its input (donation, like the StaticCache). */

/* A new state [seed, 0] (caller-owned, or the open scope's). */
txc_tensor *txc_rng_state(txc_env *env, uint64_t seed);
/* txc::rng_uniform: n float32 uniforms in [0, 1) (24 random bits each) at
 * counters counter .. counter + n - 1. Does not change the state. */
txc_tensor *txc_rng_uniform(txc_tensor *rng_state, int64_t n);
/* txc::rng_advance_: counter += n, in place (the state must be contiguous
 * and writable). */
txc_status txc_rng_advance_(txc_tensor *rng_state, int64_t n);
/* txc::sample: the next token, int64 (1), from logits (V) or (1, V) (any
 * float dtype, already processed: repetition penalty, temperature) and u,
 * float32 (1) in [0, 1). transformers' warpers in transformers' order, each
 * on the survivors of the one before, keeping at least one token:
 *   top_k > 0:  keep the scores >= the k-th largest (TopKLogitsWarper);
 *   top_p < 1:  keep the smallest set of most probable tokens whose
 *               probability sums to >= top_p (TopPLogitsWarper);
 *   min_p > 0:  keep the tokens with prob >= min_p * max prob (MinPLogitsWarper);
 * then softmax over the survivors and an inverse-CDF draw: the first kept
 * token, in vocabulary order, whose cumulative probability exceeds u. The
 * distribution is torch.multinomial's; its random stream is not reproduced.
 * top_k >= 0 (0: off), top_p and min_p in [0, 1]; logits that are all -inf
 * or NaN are TXC_ERR_INVALID at run time. */
txc_tensor *txc_sample(txc_tensor *logits, txc_tensor *u, int64_t top_k, double top_p, double min_p);

/* txc::causal_attention with transformers' sliding window and Gemma 2's
 * attention soft-capping: key j is visible to query row i iff
 * cache_position[i] - sliding_window < j <= cache_position[i]
 * (sliding_window_causal_mask_function; 0 = no window), and the scaled
 * scores s become tanh(s / softcap) * softcap before the mask and softmax
 * (0 = none). Keys before a row's window are not read. Negative values
 * are TXC_ERR_INVALID. With both 0 it is txc_causal_attention. */
txc_tensor *txc_causal_attention_ext(txc_tensor *q, txc_tensor *k, txc_tensor *v, txc_tensor *cache_position,
                                     double scale, int64_t sliding_window, double softcap);

/* ---- batch invariance ------------------------------------------------------------ */

/* Batch invariance of aten::linear with float32/bfloat16/float16 weights,
 * process-wide, on by default: a linear of M <= 32 rows gives every row the
 * bits of that row alone (M = 1), so a batched decode step gives each
 * sequence the logits it gets alone, whatever else is in the batch
 * (txc/batch.h). Off, 1 < M <= 32 rows take the kernel M > 32 takes (on
 * AVX2 without AVX-512: the packed 6 x 16 GEMM, each element one fused
 * multiply-add chain in k order instead of the one-row GEMV's 8 lanes;
 * elsewhere the tiled GEMM), so a row's last bits depend on whether it ran
 * alone — the mode vLLM (VLLM_BATCH_INVARIANT=1) and SGLang
 * (--enable-deterministic-inference) make optional, the other way round.
 * Linears of more than 32 rows (long prefills) take the fastest kernel for
 * M either way; quantized weights and attention (one sequence's rows) are
 * not affected. Set it before the ops run, not while another thread runs
 * them. Source: src/ops/linalg.c (linear_gemm_nt). */
void txc_ops_set_batch_invariant(bool on);
bool txc_ops_batch_invariant(void);

/* ---- threads that run ops ------------------------------------------------------ */

/* Free the calling thread's kernel scratch buffers (thread-local, kept
 * between ops so that a call allocates nothing). A thread of the caller's
 * that ran ops and ends (txc serve's scheduler thread) calls it last; the
 * pool's workers do it themselves. The next op on the thread allocates them
 * again. */
void txc_ops_thread_release(void);

#ifdef __cplusplus
}
#endif
#endif
