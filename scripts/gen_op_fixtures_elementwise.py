#!/usr/bin/env python3
"""Oracle for the elementwise and reduction ops: runs PyTorch (CPU) on small
inputs and writes tests/fixtures/ops_elementwise.json, read by
tests/test_ops_elementwise.c (fixture tensor format: tests/testutil.h).

    python3 scripts/gen_op_fixtures_elementwise.py [--out PATH]

Each case: {"name", "op", "inputs": [tensors], "args": {...}, and either
"expected" + "rtol" + "atol", or "error": true where torch raises (txc must
then fail with TXC_ERR_INVALID)}. Scalars are written as JSON integers when
integral: txc's double scalar follows torch's python int in that case and
python float otherwise (txc_promote_scalar).

Needs torch and numpy (PyPI). Deterministic: fixed seed.
"""
import argparse
import json
import math
import os

import numpy as np
import torch

import sys

# --seed N: another draw of the random inputs (to fuzz txc against torch
# locally; the committed fixture uses the default).
SEED = int(sys.argv[sys.argv.index("--seed") + 1]) if "--seed" in sys.argv else 1234
torch.manual_seed(SEED)

F32, BF16, F16 = torch.float32, torch.bfloat16, torch.float16
I32, I64, BOOL = torch.int32, torch.int64, torch.bool
DTYPES = [F32, BF16, F16, I32, I64, BOOL]
NAMES = {F32: "float32", BF16: "bfloat16", F16: "float16", I32: "int32", I64: "int64", BOOL: "bool"}
SHORT = {F32: "f32", BF16: "bf16", F16: "f16", I32: "i32", I64: "i64", BOOL: "bool"}

cases = []


def num(v, dtype):
    if dtype == BOOL:
        return bool(v)
    if dtype in (I32, I64):
        return int(v)
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    f = float(str(np.float32(v)))  # shortest repr that round-trips as float32
    if f == 0 and math.copysign(1.0, f) < 0:
        return -0.0
    return int(f) if f == int(f) and abs(f) < 2**53 else f


def sarg(v):
    """A scalar argument, exact (python's repr of the double)."""
    v = float(v)
    if math.isnan(v) or math.isinf(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return int(v) if v == int(v) and abs(v) < 2**63 else v


def fx(t, transpose=None):
    """Fixture tensor; with transpose=[d0, d1] the C side builds it as a
    non-contiguous view (data stored for the swapped shape)."""
    d = {"dtype": NAMES[t.dtype], "shape": list(t.shape)}
    src = t
    if transpose is not None:
        src = t.transpose(*transpose)
        d["transpose"] = list(transpose)
    d["data"] = [num(v, t.dtype) for v in src.contiguous().flatten().tolist()]
    return d


def tol(dtype):
    if dtype == F32:
        return 1e-5, 1e-6
    if dtype in (BF16, F16):
        return 1e-2, 1e-5
    return 0.0, 0.0


def rand(shape, dtype, lo=-3.0, hi=3.0):
    if dtype == BOOL:
        return torch.rand(shape) > 0.5
    if dtype in (I32, I64):
        return torch.randint(-5, 6, shape, dtype=dtype)
    x = (torch.rand(shape) * (hi - lo) + lo) * 100
    return (x.round() / 100).to(dtype)


def quarters(shape, dtype, k=12):
    """Short-to-write values: multiples of 1/4 in [-k/4, k/4] (long tensors)."""
    return (torch.randint(-k, k + 1, shape).float() / 4).to(dtype)


def positive(shape, dtype):
    if dtype in (I32, I64):
        return torch.randint(1, 5, shape, dtype=dtype)
    if dtype == BOOL:
        return torch.ones(shape, dtype=BOOL)
    return rand(shape, dtype, 0.1, 3.0)


def add(name, op, inputs, fn, args=None, transposes=None):
    """Run fn on the torch inputs; record the result or the error."""
    transposes = transposes or [None] * len(inputs)
    case = {"name": name, "op": op, "inputs": [fx(t, tr) for t, tr in zip(inputs, transposes)],
            "args": args or {}}
    try:
        r = fn(*inputs)
    except (RuntimeError, TypeError, ValueError, IndexError) as e:
        case["error"] = True
        case["torch_error"] = str(e).split("\n")[0][:48]
        cases.append(case)
        return
    case["expected"] = fx(r)
    case["rtol"], case["atol"] = tol(r.dtype)
    cases.append(case)


def T(shape, transpose):
    """Shape of the stored tensor for a transposed view of `shape`."""
    s = list(shape)
    s[transpose[0]], s[transpose[1]] = s[transpose[1]], s[transpose[0]]
    return s


# ---- binary ops -----------------------------------------------------------------

BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "pow": torch.pow,
    "maximum": torch.maximum, "minimum": torch.minimum, "eq": torch.eq, "ne": torch.ne,
    "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge, "logical_and": torch.logical_and,
}


def pow_inputs(dt, shape_a, shape_b):
    a = rand(shape_a, dt)
    b = rand(shape_b, dt)
    if dt in (I32, I64):
        b = torch.randint(0, 4, shape_b, dtype=dt)
    elif dt != BOOL:
        a = positive(shape_a, dt)
    return a, b


for op, fn in BINARY.items():
    for dt in DTYPES:
        if op == "pow":
            a, b = pow_inputs(dt, (2, 3), (2, 3))
        else:
            a, b = rand((2, 3), dt), rand((2, 3), dt)
            if op in ("eq", "ne", "le", "ge") and dt != BOOL:
                b[0] = a[0]  # some equal elements
        add(f"{op}_{SHORT[dt]}", op, [a, b], fn)
    # broadcasting (and size-1 dims), float32 and int64
    for dt in (F32, I64):
        if op == "pow":
            a, b = pow_inputs(dt, (2, 1, 3), (4, 1))
        else:
            a, b = rand((2, 1, 3), dt), rand((4, 1), dt)
        add(f"{op}_bcast_{SHORT[dt]}", op, [a, b], fn)
    # non-contiguous: a transposed view and a stride-0 expanded-like operand
    a = positive((3, 4), F32) if op == "pow" else rand((3, 4), F32)
    b = rand((3, 4), F32) if op != "pow" else rand((3, 4), F32, -2, 2)
    add(f"{op}_transposed_f32", op, [a, b], fn, transposes=[[0, 1], None])
    a = positive((2, 3, 2), BF16) if op == "pow" else rand((2, 3, 2), BF16)
    add(f"{op}_transposed_bf16", op, [a, rand((2,), BF16)], fn, transposes=[[0, 2], None])
    # zero-size and 0-d
    add(f"{op}_empty", op, [rand((0, 3), F32), rand((1, 3), F32)], fn)
    add(f"{op}_0d", op, [positive((), F32), rand((3,), F32)], fn)
    add(f"{op}_0d_0d", op, [rand((), I64), torch.randint(0, 3, (), dtype=I64)], fn)
    # incompatible shapes
    add(f"{op}_nobcast", op, [rand((2, 3), F32), rand((4,), F32)], fn)

# mixed dtypes (type promotion)
MIXED = [(I32, F32), (BOOL, I64), (BF16, F16), (I32, BF16), (I64, F16), (BOOL, F32), (I32, I64), (BOOL, BF16),
         (F16, F32)]
for op in ("add", "div", "pow", "maximum", "lt", "logical_and"):
    for da, db in MIXED:
        if op == "pow":
            a = positive((2, 3), da)
            b = torch.randint(0, 3, (2, 3)).to(db)
        else:
            a, b = rand((2, 3), da), rand((2, 3), db)
        add(f"{op}_{SHORT[da]}_{SHORT[db]}", op, [a, b], BINARY[op])
# int + reduced float: the int is rounded to the common dtype first (257 -> 256 in bf16)
add("add_i32_bf16_rounding", "add", [torch.tensor([257, 513, -1025, 7], dtype=I32),
                                    torch.tensor([1.0, 1.0, -1.0, 0.5], dtype=BF16)], torch.add)
add("eq_i64_f16_rounding", "eq", [torch.tensor([2049, 2048, 3], dtype=I64),
                                 torch.tensor([2048.0, 2048.0, 3.0], dtype=F16)], torch.eq)

# special float values
sp = torch.tensor([float("nan"), 1.0, float("inf"), -float("inf"), 0.0, -0.0, 2.0, float("nan")])
sp2 = torch.tensor([1.0, float("nan"), 2.0, float("inf"), -0.0, 0.0, float("-inf"), float("nan")])
for op in ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "ge", "logical_and"):
    add(f"{op}_special_f32", op, [sp, sp2], BINARY[op])
add("maximum_special_bf16", "maximum", [sp.to(BF16), sp2.to(BF16)], torch.maximum)
add("minimum_special_f16", "minimum", [sp.to(F16), sp2.to(F16)], torch.minimum)

# integer wrap-around and true division of integers
big32 = torch.tensor([2**31 - 1, -2**31, 65536, -3], dtype=I32)
add("add_i32_wrap", "add", [big32, torch.tensor([1, -1, 65536, 5], dtype=I32)], torch.add)
add("mul_i32_wrap", "mul", [big32, torch.tensor([2, 3, 65536, -7], dtype=I32)], torch.mul)
add("sub_i32_wrap", "sub", [big32, torch.tensor([-1, 1, 0, 2], dtype=I32)], torch.sub)
add("mul_i64_wrap", "mul", [torch.tensor([2**40, -2**40, 3], dtype=I64), torch.tensor([2**30, 2**24, 5], dtype=I64)],
    torch.mul)
add("pow_i32_wrap", "pow", [torch.tensor([3, -2, 7, 2], dtype=I32), torch.tensor([25, 31, 12, 40], dtype=I32)],
    torch.pow)
add("pow_i64_negative_exp", "pow", [torch.tensor([0, 1, -1, 2, -1, 5], dtype=I64),
                                    torch.tensor([-1, -3, -3, -1, -2, 0], dtype=I64)], torch.pow)
add("div_i64_by_zero", "div", [torch.tensor([1, 0, -1, 7], dtype=I64), torch.tensor([0, 0, 0, 2], dtype=I64)],
    torch.div)

# ---- binary with a python scalar ------------------------------------------------------

SCALAR = {"add_scalar": torch.add, "sub_scalar": torch.sub, "mul_scalar": torch.mul, "div_scalar": torch.div,
          "pow_scalar": torch.pow, "rsub_scalar": torch.rsub}
for op, fn in SCALAR.items():
    for dt in DTYPES:
        for s in (2, -1.5, 0.1, -2, 0.5):
            if op == "pow_scalar":
                x = positive((2, 3), dt) if dt != BOOL else rand((2, 3), dt)
            else:
                x = rand((2, 3), dt)
            if op != "pow_scalar" and s in (0.5, -2, -1.5):
                continue
            add(f"{op}_{SHORT[dt]}_{s}", op, [x], lambda t, s=s, fn=fn: fn(t, s), {"scalar": s})
    add(f"{op}_transposed", op, [rand((3, 4), F32)], lambda t, fn=fn: fn(t, 3), {"scalar": 3}, [[0, 1]])
    add(f"{op}_0d", op, [positive((), BF16)], lambda t, fn=fn: fn(t, 0.25), {"scalar": 0.25})
    add(f"{op}_empty", op, [rand((2, 0), I32)], lambda t, fn=fn: fn(t, 2), {"scalar": 2})
# pow with special exponents (torch's sqrt / rsqrt / reciprocal / square paths)
for s in (2, 3, 0.5, -0.5, -1, -2, 1.5):
    add(f"pow_scalar_special_{s}", "pow_scalar", [sp], lambda t, s=s: torch.pow(t, s), {"scalar": s})
add("add_scalar_i32_wrap", "add_scalar", [big32], lambda t: torch.add(t, 2**33 + 1), {"scalar": 2**33 + 1})
add("pow_scalar_f16_overflow", "pow_scalar", [positive((2,), F16)], lambda t: t ** 1e6, {"scalar": 1e6})
add("pow_scalar_i32_overflow", "pow_scalar", [positive((2,), I32)], lambda t: t ** 2**40, {"scalar": 2**40})
add("add_scalar_i32_big_int", "add_scalar", [big32], lambda t: t + 10**19, {"scalar": 10**19})
add("add_scalar_i64_2p63", "add_scalar", [torch.tensor([1, -5], dtype=I64)], lambda t: t + 2**63, {"scalar": 2**63})
add("mul_scalar_bf16_keeps_float_scalar", "mul_scalar", [torch.tensor([3.0, 100.0, -7.0], dtype=BF16)],
    lambda t: t * 0.1, {"scalar": 0.1})

# ---- unary ops --------------------------------------------------------------------------

UNARY = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt, "sin": torch.sin, "cos": torch.cos, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
    "silu": torch.nn.functional.silu, "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh"), "relu": torch.relu,
    "logical_not": torch.logical_not,
}
special_unary = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-30, -88.0, 89.0, 20.0, -20.0])
for name, fn in UNARY.items():
    op = "gelu" if name.startswith("gelu") else name
    args = {"approximate": "tanh" if name == "gelu_tanh" else "none"} if op == "gelu" else {}
    for dt in DTYPES:
        x = positive((2, 4), dt) if name in ("log", "sqrt", "rsqrt") and dt != BOOL else rand((2, 4), dt)
        add(f"{name}_{SHORT[dt]}", op, [x], fn, args)
    add(f"{name}_log_domain", op, [rand((5,), F32)], fn, args)
    add(f"{name}_transposed", op, [rand((2, 2, 3), F32)], fn, args, [[0, 2]])
    add(f"{name}_transposed_f16", op, [rand((2, 3), F16)], fn, args, [[0, 1]])
    add(f"{name}_0d", op, [rand((), BF16)], fn, args)
    add(f"{name}_empty", op, [rand((0, 4), F32)], fn, args)
    sv = special_unary
    if name == "gelu":  # torch's vectorised erf gives nan for +inf, its scalar path inf: skip +inf
        sv = sv[torch.isinf(sv).logical_not() | (sv < 0)]
    add(f"{name}_special", op, [sv], fn, args)
add("neg_i32_min", "neg", [torch.tensor([-2**31, 2**31 - 1, 0], dtype=I32)], torch.neg)
add("abs_i64_big", "abs", [torch.tensor([-2**40, 5, 0], dtype=I64)], torch.abs)
# a larger contiguous float32 tensor (fast path, with a tail)
add("silu_f32_long", "silu", [rand((67,), F32)], torch.nn.functional.silu)
# chunked paths (rows longer than the kernels' 512-element chunks)
add("neg_bf16_long", "neg", [quarters((1, 530), BF16, 8)], torch.neg)
add("add_bf16_i32_long", "add", [quarters((1, 530), BF16, 8), torch.randint(-3, 4, (530,), dtype=I32)], torch.add)
add("add_f32_long", "add", [rand((3, 37), F32), rand((3, 37), F32)], torch.add)
add("mul_f32_rowbcast_long", "mul", [rand((3, 37), F32), rand((3, 1), F32)], torch.mul)

# ---- where / masked_fill -------------------------------------------------------------------

for da, db in [(F32, F32), (BF16, BF16), (F16, F16), (I32, I32), (I64, I64), (BOOL, BOOL), (I32, F32), (BF16, F16),
               (BOOL, I64), (I64, BF16)]:
    add(f"where_{SHORT[da]}_{SHORT[db]}", "where", [rand((2, 3), BOOL), rand((2, 3), da), rand((2, 3), db)],
        torch.where)
add("where_bcast3", "where", [rand((2, 1, 3), BOOL), rand((4, 1), F32), rand((3,), F32)], torch.where)
add("where_transposed", "where", [rand((3, 4), BOOL), rand((3, 4), F32), rand((4,), F32)], torch.where,
    transposes=[[0, 1], [0, 1], None])
add("where_0d", "where", [torch.tensor(True), rand((), F16), rand((2,), F16)], torch.where)
add("where_empty", "where", [rand((0, 2), BOOL), rand((1, 2), F32), rand((2,), F32)], torch.where)
add("where_cond_not_bool", "where", [rand((2, 3), I64), rand((2, 3), F32), rand((2, 3), F32)], torch.where)
add("where_nobcast", "where", [rand((2, 3), BOOL), rand((3, 2), F32), rand((2, 3), F32)], torch.where)

for dt in DTYPES:
    for v in (float("-inf"), 1.5, 0, -3):
        if dt in (I32, I64) and math.isinf(v):
            continue
        add(f"masked_fill_{SHORT[dt]}_{v}", "masked_fill", [rand((2, 3), dt), rand((2, 3), BOOL)],
            lambda t, m, v=v: t.masked_fill(m, v), {"value": sarg(v)})
add("masked_fill_bcast_mask", "masked_fill", [rand((2, 3, 4), BF16), rand((3, 1), BOOL)],
    lambda t, m: t.masked_fill(m, -1e4), {"value": -1e4})
add("masked_fill_bcast_both", "masked_fill", [rand((3,), F32), rand((2, 3), BOOL)],
    lambda t, m: t.masked_fill(m, 7), {"value": 7})
add("masked_fill_0d_mask", "masked_fill", [rand((2, 2), F32), torch.tensor(True)],
    lambda t, m: t.masked_fill(m, -2.5), {"value": -2.5})
add("masked_fill_transposed", "masked_fill", [rand((3, 4), F32), rand((3, 4), BOOL)],
    lambda t, m: t.masked_fill(m, 0.25), {"value": 0.25}, [[0, 1], [0, 1]])
add("masked_fill_causal_finfo_min", "masked_fill", [rand((1, 1, 3, 3), F32), torch.ones(3, 3, dtype=BOOL).triu(1)],
    lambda t, m: t.masked_fill(m, torch.finfo(F32).min), {"value": float(torch.finfo(F32).min)})
for dt, v in ((F16, 1e6), (BF16, 3.4028234663852886e+38), (F32, 1e300), (I32, 2.0**31), (I64, float("nan")),
              (BF16, 1e6), (F16, float("nan")), (BOOL, 1e300)):
    add(f"masked_fill_overflow_{SHORT[dt]}_{v}", "masked_fill", [rand((2,), dt), torch.tensor([True, False])],
        lambda t, m, v=v: t.masked_fill(m, v), {"value": sarg(v)})
add("masked_fill_mask_not_bool", "masked_fill", [rand((2, 3), F32), rand((2, 3), F32)],
    lambda t, m: t.masked_fill(m, 1.0), {"value": 1.0})
add("masked_fill_nobcast", "masked_fill", [rand((2, 3), F32), rand((2,), BOOL)],
    lambda t, m: t.masked_fill(m, 1.0), {"value": 1.0})

# ---- reductions ---------------------------------------------------------------------------------


def sum_like(fn):
    def run(x, dims, keepdim):
        if dims == []:
            if keepdim and x.dim() > 0:
                return fn(x, dim=tuple(range(x.dim())), keepdim=True)
            return fn(x)
        return fn(x, dim=dims, keepdim=keepdim)
    return run


for op, tfn in (("sum", torch.sum), ("mean", torch.mean)):
    run = sum_like(tfn)
    for dt in DTYPES:
        x = rand((2, 3, 4), dt)
        variants = (([1], False), ([], False), ([-1], True), ([2, 0], True), ([], True))
        if op == "mean" and dt in (I32, I64, BOOL):
            variants = variants[1:2]  # an error: one case is enough
        for dims, keep in variants:
            add(f"{op}_{SHORT[dt]}_{dims}_{keep}", op, [x], lambda t, d=dims, k=keep: run(t, d, k),
                {"dims": dims, "keepdim": keep})
    x = rand((4, 3, 5), F32)
    add(f"{op}_transposed_dim0", op, [x], lambda t: run(t, [0], False), {"dims": [0], "keepdim": False},
        [[0, 2]])
    add(f"{op}_transposed_dim2", op, [x], lambda t: run(t, [2], True), {"dims": [2], "keepdim": True}, [[0, 2]])
    add(f"{op}_vertical", op, [quarters((3, 30), F32)], lambda t: run(t, [0], False), {"dims": [0], "keepdim": False})
    add(f"{op}_long_bf16", op, [quarters((1, 1030), BF16, 8)], lambda t: run(t, [1], False),
        {"dims": [1], "keepdim": False})
    add(f"{op}_empty_reduced", op, [rand((0, 3), F32)], lambda t: run(t, [0], False), {"dims": [0], "keepdim": False})
    add(f"{op}_empty_kept", op, [rand((0, 3), F32)], lambda t: run(t, [1], True), {"dims": [1], "keepdim": True})
    add(f"{op}_0d", op, [rand((), F32)], lambda t: run(t, [0], False), {"dims": [0], "keepdim": False})
    add(f"{op}_size1_dims", op, [rand((1, 3, 1), F16)], lambda t: run(t, [0, 2], False),
        {"dims": [0, 2], "keepdim": False})
add("sum_i32_large", "sum", [torch.tensor([2**31 - 1, 2**31 - 1, 5], dtype=I32)], lambda t: torch.sum(t),
    {"dims": [], "keepdim": False})
add("sum_special", "sum", [torch.tensor([[1.0, float("inf")], [float("nan"), 2.0], [float("inf"), -float("inf")]])],
    lambda t: torch.sum(t, 1), {"dims": [1], "keepdim": False})

ties = torch.tensor([[1.0, 5.0, 5.0, 2.0], [float("nan"), 3.0, float("nan"), 9.0], [-float("inf")] * 4,
                     [0.0, -1.0, 4.0, 4.0]])
for op in ("max", "argmax"):
    def fn_dim(t, d, k, op=op):
        return torch.max(t, d, k).values if op == "max" else torch.argmax(t, d, k)

    def fn_all(t, op=op):
        return torch.max(t) if op == "max" else torch.argmax(t)

    for dt in DTYPES:
        x = rand((3, 4), dt)
        for d, k in ((0, False), (1, True), (-1, False)):
            add(f"{op}_{SHORT[dt]}_{d}_{k}", op, [x], lambda t, d=d, k=k: fn_dim(t, d, k), {"dim": d, "keepdim": k})
        add(f"{op}_{SHORT[dt]}_all", op, [x], fn_all)
    add(f"{op}_ties_nan", op, [ties], lambda t: fn_dim(t, 1, False), {"dim": 1, "keepdim": False})
    add(f"{op}_ties_nan_dim0", op, [ties], lambda t: fn_dim(t, 0, False), {"dim": 0, "keepdim": False})
    add(f"{op}_ties_bf16", op, [ties.to(BF16)], lambda t: fn_dim(t, 1, True), {"dim": 1, "keepdim": True})
    add(f"{op}_all_ties", op, [torch.tensor([[3, 7], [7, 1]], dtype=I64)], fn_all)
    add(f"{op}_all_nan", op, [ties], fn_all)
    add(f"{op}_transposed", op, [rand((3, 4, 5), F32)], lambda t: fn_dim(t, 1, False), {"dim": 1, "keepdim": False},
        [[0, 2]])
    add(f"{op}_vertical", op, [quarters((4, 25), F32)], lambda t: fn_dim(t, 0, False), {"dim": 0, "keepdim": False})
    add(f"{op}_long", op, [quarters((1, 1030), F32, 40)], lambda t: fn_dim(t, 1, False), {"dim": 1, "keepdim": False})
    add(f"{op}_0d", op, [rand((), F32)], lambda t: fn_dim(t, 0, False), {"dim": 0, "keepdim": False})
    add(f"{op}_0d_all", op, [rand((), I32)], fn_all)
    add(f"{op}_empty_dim", op, [rand((0, 3), F32)], lambda t: fn_dim(t, 0, False), {"dim": 0, "keepdim": False})
    add(f"{op}_empty_kept", op, [rand((0, 3), F32)], lambda t: fn_dim(t, 1, False), {"dim": 1, "keepdim": False})
    add(f"{op}_empty_all", op, [rand((0, 3), F32)], fn_all)
    add(f"{op}_bad_dim", op, [rand((2, 3), F32)], lambda t: fn_dim(t, 2, False), {"dim": 2, "keepdim": False})

for op, fn in (("softmax", torch.softmax), ("log_softmax", torch.log_softmax)):
    for dt in DTYPES:
        x = rand((2, 5), dt)
        for d in (1, 0, -1):
            add(f"{op}_{SHORT[dt]}_{d}", op, [x], lambda t, d=d, fn=fn: fn(t, d), {"dim": d})
    masked = torch.tensor([[1.0, -float("inf"), 2.0], [-float("inf")] * 3, [1.0, float("nan"), 0.0],
                           [1000.0, 0.0, -1000.0]])
    add(f"{op}_special", op, [masked], lambda t, fn=fn: fn(t, -1), {"dim": -1})
    add(f"{op}_transposed", op, [rand((3, 4, 5), F32)], lambda t, fn=fn: fn(t, 1), {"dim": 1}, [[1, 2]])
    add(f"{op}_transposed_last", op, [rand((4, 6), BF16)], lambda t, fn=fn: fn(t, -1), {"dim": -1}, [[0, 1]])
    add(f"{op}_long", op, [quarters((1, 64), F32, 40)], lambda t, fn=fn: fn(t, 1), {"dim": 1})
    add(f"{op}_size1", op, [rand((3, 1), F32)], lambda t, fn=fn: fn(t, 1), {"dim": 1})
    add(f"{op}_0d", op, [rand((), F32)], lambda t, fn=fn: fn(t, 0), {"dim": 0})
    add(f"{op}_empty", op, [rand((0, 4), F32)], lambda t, fn=fn: fn(t, 1), {"dim": 1})
    add(f"{op}_bad_dim", op, [rand((2, 3), F32)], lambda t, fn=fn: fn(t, -3), {"dim": -3})

sum_run = sum_like(torch.sum)
add("sum_dup_dims", "sum", [rand((2, 3), F32)], lambda t: sum_run(t, [0, -2], False), {"dims": [0, -2], "keepdim": False})
add("sum_bad_dim", "sum", [rand((2, 3), F32)], lambda t: sum_run(t, [2], False), {"dims": [2], "keepdim": False})
add("mean_bad_dim", "mean", [rand((2, 3), F32)], lambda t: torch.mean(t, -3), {"dims": [-3], "keepdim": False})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--out", default=os.path.join(root, "tests", "fixtures", "ops_elementwise.json"))
    ap.add_argument("--seed", type=int, default=1234, help="seed of the random inputs (default 1234)")
    args = ap.parse_args()
    names = [c["name"] for c in cases]
    assert len(names) == len(set(names)), "duplicate case names"
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"generator": "scripts/gen_op_fixtures_elementwise.py", "torch": torch.__version__,
                   "cases": cases}, f, separators=(",", ":"))
        f.write("\n")
    n_err = sum(1 for c in cases if c.get("error"))
    print(f"wrote {len(cases)} cases ({n_err} expect an error) to {args.out} ({os.path.getsize(args.out)} bytes)")


if __name__ == "__main__":
    main()
