#!/usr/bin/env python3
"""Write tests/fixtures/ops_nn.json: PyTorch reference results for the linalg,
nn and attention ops (matmul, linear, embedding, rms_norm, layer_norm, cat,
stack, index_select, index_copy, tril, triu, sdpa), checked by
tests/test_ops_nn.c.

Run by hand (needs PyPI torch; CI only reads the committed JSON):
    python3 scripts/gen_op_fixtures_nn.py [--out tests/fixtures/ops_nn.json]

Fixture tensors are {"dtype", "shape", "data"} (row-major), with an optional
"transpose": [d0, d1]: the data is stored for the shape with d0/d1 swapped and
the test transposes it, so the op sees a non-contiguous view (tests/testutil.h).
"""
import argparse
import json
import math
import os

import torch
import torch.nn.functional as F

DT = {
    torch.float32: "float32",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.bool: "bool",
}

F32_TOL = (1e-5, 1e-5)
HALF_TOL = (1e-2, 1e-2)


def short_float(v, dtype):
    """The shortest decimal that reads back (double -> float32 -> dtype, as
    the C loader does) as exactly `v`: keeps the JSON small."""
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    want = torch.tensor(v, dtype=torch.float32).to(dtype)
    for p in range(1, 10):
        s = float(f"{v:.{p}g}")
        if torch.tensor(s, dtype=torch.float32).to(dtype).item() == want.item():
            return s
    return float(f"{v:.9g}")


def enc(t, transpose=None):
    """A fixture tensor. With transpose=(d0, d1), `t` is given as the view the
    op must see; the stored data is t.transpose(d0, d1) made contiguous."""
    t = t.detach()
    is_float = t.dtype.is_floating_point
    out = {"dtype": DT[t.dtype], "shape": list(t.shape)}
    base = t
    if transpose is not None:
        base = t.transpose(*transpose).contiguous()
        out["transpose"] = list(transpose)
    flat = base.reshape(-1)
    if t.dtype == torch.bool:
        data = [bool(v) for v in flat.tolist()]
    elif is_float:
        data = [short_float(v, t.dtype) for v in flat.float().tolist()]
    else:
        data = [int(v) for v in flat.tolist()]
    out["data"] = data
    return out


def tol_for(dtype):
    return HALF_TOL if dtype in (torch.float16, torch.bfloat16) else F32_TOL


cases = []


def add(name, op, inputs, args, expected, tol=None):
    """inputs: list of tensors or (tensor, transpose) pairs."""
    enc_in = []
    for x in inputs:
        if isinstance(x, tuple):
            enc_in.append(enc(x[0], x[1]))
        else:
            enc_in.append(enc(x))
    if tol is None:
        tol = tol_for(expected.dtype)
    cases.append({"name": name, "op": op, "inputs": enc_in, "args": args, "expected": enc(expected),
                  "rtol": tol[0], "atol": tol[1]})


def rn(*shape, dtype=torch.float32):
    """Random normal values rounded to 3 decimals (short in JSON)."""
    return (torch.round(torch.randn(*shape) * 1000) / 1000).to(dtype)


def tview(shape, d0, d1, dtype=torch.float32):
    """A random non-contiguous view of `shape` (a transposed contiguous tensor)."""
    s = list(shape)
    s[d0], s[d1] = s[d1], s[d0]
    base = rn(*s, dtype=dtype)
    return base.transpose(d0, d1)


# ---- matmul -------------------------------------------------------------------------


def gen_matmul():
    def mm(name, a, b, ta=None, tb=None, tol=None):
        add(name, "matmul", [(a, ta), (b, tb)], {}, torch.matmul(a, b), tol)

    mm("matmul_1d_1d", rn(5), rn(5))
    mm("matmul_2d_2d", rn(3, 4), rn(4, 5))
    mm("matmul_1d_2d", rn(4), rn(4, 6))
    mm("matmul_2d_1d", rn(3, 4), rn(4))
    mm("matmul_3d_2d_folded", rn(2, 3, 4, 5), rn(5, 6))
    mm("matmul_batch_broadcast", rn(2, 1, 3, 4), rn(1, 5, 4, 2))
    mm("matmul_1d_3d", rn(4), rn(2, 4, 3))
    mm("matmul_3d_1d", rn(2, 3, 4), rn(4))
    mm("matmul_size1_dims", rn(1, 1, 4), rn(3, 4, 1))
    mm("matmul_2d_3d", rn(3, 4), rn(2, 4, 5))
    mm("matmul_tiles_nn", rn(9, 37), rn(37, 21))
    mm("matmul_tiles_wide_nn", rn(6, 19), rn(19, 40))
    mm("matmul_a_transposed", tview((6, 10), 0, 1), rn(10, 7), ta=(0, 1))
    mm("matmul_b_transposed_nt", rn(9, 37), tview((37, 21), 0, 1), tb=(0, 1))
    mm("matmul_batched_b_transposed", rn(2, 3, 5), tview((2, 5, 4), 1, 2), tb=(1, 2))
    mm("matmul_batched_b_transposed_01", rn(3, 2, 5), tview((3, 5, 4), 0, 2), tb=(0, 2))
    mm("matmul_qk_scores", rn(1, 2, 3, 16), tview((1, 2, 16, 7), 2, 3), tb=(2, 3))
    mm("matmul_zero_rows", rn(0, 3), rn(3, 2))
    mm("matmul_zero_inner", rn(2, 0), rn(0, 3))
    mm("matmul_zero_batch", rn(0, 2, 3), rn(3, 4))
    mm("matmul_zero_inner_batched", rn(2, 3, 0), rn(0, 4))
    mm("matmul_bf16", rn(4, 16, dtype=torch.bfloat16), rn(16, 20, dtype=torch.bfloat16))
    mm("matmul_bf16_nt", rn(5, 24, dtype=torch.bfloat16), tview((24, 9), 0, 1, torch.bfloat16), tb=(0, 1))
    mm("matmul_f16", rn(3, 17, dtype=torch.float16), rn(17, 5, dtype=torch.float16))
    mm("matmul_f16_batched", rn(2, 3, 8, dtype=torch.float16), rn(2, 8, 18, dtype=torch.float16))
    a = torch.randint(-5, 5, (3, 4))
    b = torch.randint(-5, 5, (4, 2))
    mm("matmul_int64", a, b)
    mm("matmul_int32_dot", torch.randint(-9, 9, (6,), dtype=torch.int32), torch.randint(-9, 9, (6,), dtype=torch.int32))


# ---- linear -------------------------------------------------------------------------


def gen_linear():
    def lin(name, x, w, b=None, tx=None, tw=None, expected=None, tol=None):
        ins = [(x, tx), (w, tw)] + ([b] if b is not None else [])
        if expected is None:
            expected = F.linear(x, w, b)
        add(name, "linear", ins, {"has_bias": b is not None}, expected, tol)

    lin("linear_gemv_bias", rn(1, 40), rn(24, 40), rn(24))
    lin("linear_tails_nobias", rn(5, 37), rn(19, 37))
    lin("linear_batched_bias", rn(2, 3, 16), rn(8, 16), rn(8))
    lin("linear_1d_input", rn(16), rn(8, 16), rn(8))
    lin("linear_x_transposed", tview((4, 3), 0, 1), rn(5, 3), rn(5), tx=(0, 1))
    lin("linear_x3d_transposed", tview((2, 5, 6), 0, 1), rn(4, 6), tx=(0, 1))
    lin("linear_weight_transposed", rn(3, 10), tview((7, 10), 0, 1), rn(7), tw=(0, 1))
    lin("linear_m8_k40", rn(8, 40), rn(12, 40), rn(12))
    lin("linear_bf16", rn(7, 33, dtype=torch.bfloat16), rn(20, 33, dtype=torch.bfloat16), rn(20, dtype=torch.bfloat16))
    lin("linear_bf16_gemv", rn(1, 67, dtype=torch.bfloat16), rn(13, 67, dtype=torch.bfloat16))
    lin("linear_f16", rn(2, 40, dtype=torch.float16), rn(9, 40, dtype=torch.float16), rn(9, dtype=torch.float16))
    lin("linear_f16_gemv", rn(1, 35, dtype=torch.float16), rn(6, 35, dtype=torch.float16))
    lin("linear_zero_rows", rn(0, 4), rn(3, 4), rn(3))
    lin("linear_zero_in", rn(2, 0), rn(3, 0), rn(3))
    lin("linear_zero_out", rn(2, 4), rn(0, 4))
    # txc accepts a float32 input with half weights (torch requires equal
    # dtypes): the result is float32, as x @ weight.float().T.
    for dt, dn in ((torch.bfloat16, "bf16"), (torch.float16, "f16")):
        for m in (1, 6):
            x, w, b = rn(m, 45), rn(11, 45, dtype=dt), rn(11)
            lin(f"linear_f32_x_{dn}_weight_m{m}", x, w, b, expected=F.linear(x, w.float(), b))


# ---- embedding ---------------------------------------------------------------------


def gen_embedding():
    w = rn(10, 6)
    ids = torch.tensor([[1, 9, 0], [3, 3, 7]])
    add("embedding_2d_ids", "embedding", [w, ids], {}, F.embedding(ids, w))
    w = rn(7, 5, dtype=torch.bfloat16)
    ids = torch.tensor([6, 0, 2, 6], dtype=torch.int32)
    add("embedding_bf16_int32", "embedding", [w, ids], {}, F.embedding(ids, w))
    w = rn(4, 3)
    ids = torch.tensor(2)
    add("embedding_0d_id", "embedding", [w, ids], {}, F.embedding(ids, w))
    w = tview((6, 4), 0, 1)
    ids = torch.tensor([5, 1])
    add("embedding_weight_transposed", "embedding", [(w, (0, 1)), ids], {}, F.embedding(ids, w))
    w = rn(4, 3)
    ids = torch.zeros(0, dtype=torch.int64)
    add("embedding_empty_ids", "embedding", [w, ids], {}, F.embedding(ids, w))


# ---- norms -----------------------------------------------------------------------------


def llama_rms_norm(x, w, eps):
    dt = x.dtype
    h = x.to(torch.float32)
    var = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(var + eps)
    h = h.to(dt)
    return w * h if w is not None else h


def gen_norms():
    def rms(name, x, w, eps, tx=None):
        ins = [(x, tx)] + ([w] if w is not None else [])
        add(name, "rms_norm", ins, {"eps": eps, "has_weight": w is not None}, llama_rms_norm(x, w, eps))

    rms("rms_norm_f32", rn(2, 3, 16), rn(16), 1e-6)
    rms("rms_norm_no_weight", rn(4, 7), None, 1e-5)
    rms("rms_norm_bf16", rn(3, 32, dtype=torch.bfloat16), rn(32, dtype=torch.bfloat16), 1e-5)
    rms("rms_norm_bf16_x_f32_weight", rn(3, 32, dtype=torch.bfloat16), rn(32), 1e-5)
    rms("rms_norm_f16", rn(2, 8, dtype=torch.float16), rn(8, dtype=torch.float16), 1e-6)
    rms("rms_norm_transposed", tview((5, 6), 0, 1), rn(6), 1e-6, tx=(0, 1))
    rms("rms_norm_large_eps", rn(2, 4) * 1e-3, rn(4), 1e-2)

    def ln(name, x, w, b, eps, tx=None):
        ins = [(x, tx)] + ([w] if w is not None else []) + ([b] if b is not None else [])
        add(name, "layer_norm", ins, {"eps": eps, "has_weight": w is not None, "has_bias": b is not None},
            F.layer_norm(x, (x.shape[-1],), w, b, eps))

    ln("layer_norm_f32", rn(2, 5, 12), rn(12), rn(12), 1e-5)
    ln("layer_norm_no_affine", rn(3, 9) * 3 + 1, None, None, 1e-5)
    ln("layer_norm_weight_only", rn(3, 9), rn(9), None, 1e-6)
    ln("layer_norm_bias_only", rn(3, 9), None, rn(9), 1e-6)
    ln("layer_norm_bf16", rn(4, 16, dtype=torch.bfloat16), rn(16, dtype=torch.bfloat16),
       rn(16, dtype=torch.bfloat16), 1e-5)
    ln("layer_norm_transposed", tview((6, 5), 0, 1), rn(5), rn(5), 1e-5, tx=(0, 1))


# ---- cat / stack ------------------------------------------------------------------------


def gen_cat_stack():
    def cat(name, ts, dim, trs=None):
        trs = trs or [None] * len(ts)
        add(name, "cat", list(zip(ts, trs)), {"dim": dim}, torch.cat(ts, dim))

    cat("cat_dim1", [rn(2, 3), rn(2, 4)], 1)
    cat("cat_dim0_three", [rn(1, 3), rn(2, 3), rn(3, 3)], 0)
    cat("cat_promote_int32_f32", [torch.randint(-3, 3, (2, 2), dtype=torch.int32), rn(1, 2)], 0)
    cat("cat_skip_1d_empty", [torch.zeros(0), rn(2, 3), torch.zeros(0)], 1)
    cat("cat_skip_1d_empty_int_promotes", [torch.zeros(0, dtype=torch.int64), torch.randint(0, 5, (2, 3),
                                                                                              dtype=torch.int32)], 0)
    cat("cat_all_1d_empty", [torch.zeros(0), torch.zeros(0)], 0)
    cat("cat_negative_dim_transposed", [tview((2, 3, 4), 0, 2), rn(2, 3, 2)], -1, [(0, 2), None])
    cat("cat_bf16_f16_promote", [rn(2, 2, dtype=torch.bfloat16), rn(2, 2, dtype=torch.float16)], 1)
    cat("cat_bool", [torch.tensor([[True, False]]), torch.tensor([[False, False]])], 0)
    cat("cat_zero_along_dim", [rn(2, 0), rn(2, 3)], 1)
    cat("cat_kv_append", [rn(1, 2, 4, 8), rn(1, 2, 1, 8)], 2)

    def stack(name, ts, dim, trs=None):
        trs = trs or [None] * len(ts)
        add(name, "stack", list(zip(ts, trs)), {"dim": dim}, torch.stack(ts, dim))

    stack("stack_dim0", [rn(2, 3), rn(2, 3), rn(2, 3)], 0)
    stack("stack_dim2", [rn(2, 3), rn(2, 3)], 2)
    stack("stack_dim_neg", [rn(2, 3), rn(2, 3)], -2)
    stack("stack_promote", [torch.ones(2, dtype=torch.int32), rn(2)], 0)
    stack("stack_transposed", [tview((3, 2), 0, 1), rn(3, 2)], 1, [(0, 1), None])
    stack("stack_0d", [torch.tensor(1.5), torch.tensor(-2.0)], 0)


# ---- index_select / index_copy -------------------------------------------------------------


def gen_index():
    t = rn(5, 4)
    idx = torch.tensor([4, 0, 2, 2])
    add("index_select_dim0", "index_select", [t, idx], {"dim": 0}, torch.index_select(t, 0, idx))
    t = tview((3, 6), 0, 1)
    idx = torch.tensor([5, 1], dtype=torch.int32)
    add("index_select_dim1_transposed", "index_select", [(t, (0, 1)), idx], {"dim": 1}, torch.index_select(t, 1, idx))
    t = rn(2, 3, 4)
    idx = torch.tensor([3, 3, 0])
    add("index_select_last_dim", "index_select", [t, idx], {"dim": -1}, torch.index_select(t, -1, idx))
    idx = torch.zeros(0, dtype=torch.int64)
    add("index_select_empty", "index_select", [t, idx], {"dim": 1}, torch.index_select(t, 1, idx))
    t = rn(4, 3, dtype=torch.bfloat16)
    idx = torch.tensor([1])
    add("index_select_bf16", "index_select", [t, idx], {"dim": 0}, torch.index_select(t, 0, idx))

    def ic(name, s, dim, idx, src, inplace, ts=None):
        add(name, "index_copy", [s, idx, (src, ts)], {"dim": dim, "inplace": inplace},
            s.index_copy(dim, idx.long(), src))  # torch wants int64 indices; txc also takes int32

    ic("index_copy_dim0", rn(5, 3), 0, torch.tensor([4, 1]), rn(2, 3), False)
    ic("index_copy_kv_cache_inplace", torch.zeros(1, 2, 6, 4), 2, torch.tensor([2, 3]), rn(1, 2, 2, 4), True)
    ic("index_copy_kv_cache_decode_inplace", rn(2, 2, 5, 3), 2, torch.tensor([4]), rn(2, 2, 1, 3), True)
    ic("index_copy_dim1_transposed_src", rn(3, 5), 1, torch.tensor([0, 3, 1], dtype=torch.int32),
       tview((3, 3), 0, 1), False, (0, 1))
    ic("index_copy_bf16_inplace", rn(4, 2, dtype=torch.bfloat16), 0, torch.tensor([3]),
       rn(1, 2, dtype=torch.bfloat16), True)
    ic("index_copy_empty_index", rn(3, 2), 0, torch.zeros(0, dtype=torch.int64), rn(0, 2), True)


# ---- tril / triu -------------------------------------------------------------------------------


def gen_tri():
    t = rn(4, 5)
    for d in (0, 1, -1, 10, -10):
        add(f"tril_diag{d}", "tril", [t], {"diagonal": d}, torch.tril(t, d))
        add(f"triu_diag{d}", "triu", [t], {"diagonal": d}, torch.triu(t, d))
    t = rn(2, 3, 3)
    add("tril_batched", "tril", [t], {"diagonal": 0}, torch.tril(t))
    b = torch.ones(3, 4, dtype=torch.bool)
    add("tril_bool", "tril", [b], {"diagonal": 0}, torch.tril(b))
    i = torch.randint(1, 9, (3, 3))
    add("triu_int64", "triu", [i], {"diagonal": 1}, torch.triu(i, 1))
    t = tview((3, 4), 0, 1)
    add("triu_transposed", "triu", [(t, (0, 1))], {"diagonal": 0}, torch.triu(t))
    add("tril_empty", "tril", [rn(0, 3)], {"diagonal": 0}, torch.tril(rn(0, 3)))


# ---- sdpa -----------------------------------------------------------------------------------


def gen_sdpa():
    def sd(name, q, k, v, mask=None, causal=False, scale=None, tq=None, tk=None, tv=None, tol=None):
        ins = [(q, tq), (k, tk), (v, tv)] + ([mask] if mask is not None else [])
        gqa = q.shape[1] != k.shape[1]
        exp = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=scale, enable_gqa=gqa)
        add(name, "sdpa", ins, {"is_causal": causal, "scale": scale, "has_mask": mask is not None}, exp, tol)

    sd("sdpa_f32_basic", rn(2, 2, 3, 8), rn(2, 2, 5, 8), rn(2, 2, 5, 8))
    sd("sdpa_gqa_8_2", rn(1, 8, 4, 16), rn(1, 2, 6, 16), rn(1, 2, 6, 16))
    sd("sdpa_causal_square", rn(1, 4, 5, 8), rn(1, 4, 5, 8), rn(1, 4, 5, 8), causal=True)
    sd("sdpa_causal_l_lt_s", rn(1, 2, 3, 8), rn(1, 2, 7, 8), rn(1, 2, 7, 8), causal=True)
    sd("sdpa_causal_l_gt_s", rn(1, 2, 6, 8), rn(1, 2, 3, 8), rn(1, 2, 3, 8), causal=True)
    sd("sdpa_causal_gqa", rn(2, 8, 5, 8), rn(2, 2, 5, 8), rn(2, 2, 5, 8), causal=True)
    m = torch.rand(4, 6) > 0.3
    m[:, 0] = True
    sd("sdpa_bool_mask_2d", rn(2, 2, 4, 8), rn(2, 2, 6, 8), rn(2, 2, 6, 8), mask=m)
    m = torch.rand(2, 1, 3, 5) > 0.4
    m[1, 0, 1, :] = False  # a fully masked row: zeros, as torch
    m[0, 0, :, 2] = True
    sd("sdpa_bool_mask_fully_masked_row", rn(2, 4, 3, 8), rn(2, 2, 5, 8), rn(2, 2, 5, 8), mask=m)
    fm = torch.randn(2, 1, 3, 5)
    fm[0, 0, 0, 1] = float("-inf")
    fm[1, 0, 2, :] = float("-inf")
    sd("sdpa_float_mask", rn(2, 2, 3, 8), rn(2, 2, 5, 8), rn(2, 2, 5, 8), mask=fm)
    fm = torch.zeros(1, 4, 2, 6)
    fm[..., 4:] = torch.finfo(torch.float32).min
    sd("sdpa_float_mask_per_head_finfo_min", rn(1, 4, 2, 8), rn(1, 4, 6, 8), rn(1, 4, 6, 8), mask=fm)
    sd("sdpa_scale", rn(1, 2, 3, 8), rn(1, 2, 4, 8), rn(1, 2, 4, 8), scale=0.3)
    sd("sdpa_ev_ne_e", rn(1, 2, 3, 8), rn(1, 2, 4, 8), rn(1, 2, 4, 12))
    sd("sdpa_q_transposed", tview((1, 4, 3, 16), 1, 2), rn(1, 4, 5, 16), rn(1, 4, 5, 16), tq=(1, 2))
    sd("sdpa_kv_transposed", rn(1, 2, 3, 8), tview((1, 2, 6, 8), 2, 3), tview((1, 2, 6, 8), 1, 2), tk=(2, 3),
       tv=(1, 2))
    sd("sdpa_decode_gqa_e64", rn(1, 4, 1, 64), rn(1, 1, 19, 64), rn(1, 1, 19, 64))
    sd("sdpa_prefill_e40_causal", rn(1, 2, 9, 40), rn(1, 1, 9, 40), rn(1, 1, 9, 40), causal=True)
    sd("sdpa_empty_keys", rn(1, 2, 3, 4), rn(1, 2, 0, 4), rn(1, 2, 0, 4))
    bf = torch.bfloat16
    fm = torch.zeros(1, 1, 3, 6, dtype=bf)
    fm[..., 5] = float("-inf")
    sd("sdpa_bf16_gqa_float_mask", rn(1, 4, 3, 16, dtype=bf), rn(1, 2, 6, 16, dtype=bf), rn(1, 2, 6, 16, dtype=bf),
       mask=fm)
    sd("sdpa_bf16_causal", rn(1, 2, 4, 32, dtype=bf), rn(1, 2, 4, 32, dtype=bf), rn(1, 2, 4, 32, dtype=bf),
       causal=True)
    h = torch.float16
    sd("sdpa_f16", rn(2, 2, 3, 16, dtype=h), rn(2, 2, 5, 16, dtype=h), rn(2, 2, 5, 16, dtype=h))


# ---- rotary embedding ------------------------------------------------------------------


def rotate_half(x):
    """transformers' modeling_llama.rotate_half."""
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def gen_rope():
    def rope(name, x, cos, sin, tx=None):
        add(name, "rotary_embedding", [(x, tx), cos, sin], {}, x * cos + rotate_half(x) * sin)

    def cos_sin(L, d, base=10000.0, dtype=torch.float32):
        inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
        emb = torch.cat((torch.outer(torch.arange(L, dtype=torch.float32) + 3, inv_freq),) * 2, dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)

    c, s = cos_sin(5, 8)
    rope("rope_f32", rn(2, 3, 5, 8), c[None, None], s[None, None])
    rope("rope_f32_per_batch_cos", rn(2, 3, 5, 8), c.expand(2, 1, 5, 8).clone(), s.expand(2, 1, 5, 8).clone())
    rope("rope_cos_2d", rn(1, 2, 5, 8), c, s)
    rope("rope_transposed_x", tview((1, 2, 5, 8), 1, 2), c[None, None], s[None, None], tx=(1, 2))
    c6, s6 = cos_sin(1, 6)
    rope("rope_decode_d6", rn(1, 4, 1, 6), c6[None, None], s6[None, None])
    rope("rope_bf16_x", rn(1, 2, 5, 8, dtype=torch.bfloat16), c[None, None], s[None, None])
    cb, sb = cos_sin(5, 8, dtype=torch.bfloat16)
    rope("rope_bf16", rn(1, 2, 5, 8, dtype=torch.bfloat16), cb[None, None], sb[None, None])


def main():
    ap = argparse.ArgumentParser()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--out", default=os.path.join(root, "tests", "fixtures", "ops_nn.json"))
    args = ap.parse_args()
    torch.manual_seed(0)
    gen_matmul()
    gen_linear()
    gen_embedding()
    gen_norms()
    gen_cat_stack()
    gen_index()
    gen_tri()
    gen_sdpa()
    gen_rope()
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"generator": "scripts/gen_op_fixtures_nn.py", "torch": torch.__version__, "cases": cases}, f,
                  separators=(",", ":"))
        f.write("\n")
    print(f"wrote {len(cases)} cases to {args.out} ({os.path.getsize(args.out)} bytes)")


if __name__ == "__main__":
    main()
