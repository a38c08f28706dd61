#!/usr/bin/env python3
"""Fixtures of ggml's activation quantization for tests/test_quant.c (test_qact_ggml).

A quantized linear in llama.cpp's CPU backend quantizes each float32 activation row to the weight
type's vec_dot_type before the integer dots: q8_0 (for Q8_0, Q4_0, Q5_0), q8_1 (Q4_1, Q5_1) and
q8_K (the K-quants). The row quantizers it runs are its CPU backend's `from_float` (the x86 AVX2
quantize_row_q8_0 / q8_1 — not the scalar *_ref ones that gguf.quants mirrors, which round halves
away from zero with the scale 1/d — and quantize_row_q8_K_ref). This script calls those very
functions, ggml_get_type_traits_cpu(type)->from_float, through a small C driver linked with a
built llama.cpp's libggml-cpu.a and libggml-base.a, and writes into tests/fixtures/qact_fixtures.json:
  - "rows": float32 activation rows (random, with an all-zero block, exact halves of x*127/amax,
    tiny values whose scale is a float16 subnormal or rounds to 0, a negative largest value,
    large values), each as the hex of its little-endian float32 bytes;
  - per type ("q8_0", "q8_1", "q8_K"): the hex of ggml's quantized bytes of every row.
The rows stay inside float16's range for the q8_0/q8_1 scales (amax/127 and d*sum(q) below 65504),
where txc follows ggml exactly (ops/quant_impl.h).

Usage: scripts/gen_qact_fixtures.py [--llama-src DIR] [--llama-build DIR] [--out FILE]
  DIR defaults: bench/.work/llama-cpp-python/vendor/llama.cpp and bench/.work/llama.cpp-build
  (what bench/compare_llamacpp.sh builds, for this machine: GGML_NATIVE on x86 with AVX2).
Needs: numpy.
"""
import argparse
import json
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ggml_driver  # noqa: E402
from ggml_driver import ggml_quantize, hexf  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# ggml_type ids (ggml.h)
TYPES = [("q8_0", 8), ("q8_1", 9), ("q8_K", 15)]
# bytes of one block of QK elements: q8_0 34/32, q8_1 36/32, q8_K 292/256 (ggml-common.h)
BLOCK = {"q8_0": (32, 34), "q8_1": (32, 36), "q8_K": (256, 292)}

DRIVER = ggml_driver.driver_source(
    "the row as the CPU backend's from_float quantizes it",
    """    ggml_cpu_init();
    const struct ggml_type_traits_cpu *t = ggml_get_type_traits_cpu((enum ggml_type)type);
    if (!t || !t->from_float) return 3;
    t->from_float(x, y, n);""",
    includes='#include "ggml-cpu.h"')


def build_driver(src, build, tmp):
    return ggml_driver.build_driver("gen_qact_fixtures", DRIVER, src, build, ("libggml-cpu.a", "libggml-base.a"), tmp)


def rows(rng, n):
    out = []
    # 1: random activations with an all-zero block, an outlier, a positive block and large values
    x = (rng.standard_normal(n) * 0.7).astype(np.float32)
    x[32:64] = 0.0
    x[100] = 9.0
    x[160:192] = np.abs(x[160:192])
    x[300:332] *= 40.0
    out.append(x)
    # 2: exact halves of x*127/amax (amax 127: x*id is x) and near-halves; a block led by a
    # negative largest value (q8_K takes the scale's sign from it)
    x = (rng.standard_normal(n) * 10.0).astype(np.float32)
    x[0:9] = [127.0, 2.5, -2.5, 0.5, -0.5, 0.49999997, -126.5, 3.5, 1.5000001]
    x[256] = -150.0
    out.append(x)
    # 3: blocks at every scale: tiny (the float16 scale subnormal, or rounding to 0) to large
    x = rng.standard_normal(n).astype(np.float32)
    for b in range(n // 32):
        x[b * 32:(b + 1) * 32] *= np.float32(10.0 ** (b % 15 - 11))
    out.append(x.astype(np.float32))
    # 4: hidden-state-like values (a few large channels, the rest small), 4 more random rows
    for k in range(5):
        x = (rng.standard_normal(n) * (0.05 if k == 0 else rng.uniform(0.01, 4.0))).astype(np.float32)
        if k == 0:
            x[rng.integers(0, n, 6)] = rng.uniform(-60, 60, 6).astype(np.float32)
        out.append(x)
    for x in out:  # inside float16's range (see above)
        for b in x.reshape(-1, 32):
            d = np.float32(np.abs(b).max()) / np.float32(127)
            assert d < 65504 and (d == 0 or abs(d * np.round(b / d).sum()) < 65504)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-src", default=os.path.join(ROOT, "bench/.work/llama-cpp-python/vendor/llama.cpp"))
    ap.add_argument("--llama-build", default=os.path.join(ROOT, "bench/.work/llama.cpp-build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/fixtures/qact_fixtures.json"))
    args = ap.parse_args()
    rng = np.random.default_rng(20261202)
    n = 512  # two super-blocks, 16 blocks of 32
    xs = rows(rng, n)
    out = {"generator": "scripts/gen_qact_fixtures.py",
           "oracle": "ggml_get_type_traits_cpu(type)->from_float (libggml-cpu, x86 AVX2)",
           "n": n, "rows": [hexf(x) for x in xs], "quant": {}}
    with tempfile.TemporaryDirectory() as tmp:
        exe = build_driver(args.llama_src, args.llama_build, tmp)
        for name, tid in TYPES:
            qk, ts = BLOCK[name]
            qs = []
            for x in xs:
                q = ggml_quantize(exe, tid, x)
                assert len(q) == n // qk * ts, (name, len(q))
                qs.append(q.hex())
            out["quant"][name] = qs
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"wrote {args.out}: {len(xs)} rows x {len(TYPES)} types")


if __name__ == "__main__":
    main()
