#!/usr/bin/env python3
"""Fixtures of ggml's block-quantized types for tests/test_quant.c.

For each of q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, q6_K, writes into
tests/fixtures/quant_fixtures.json:
  - "blocks": random blocks (every bit pattern of the quants and scales; the
    float16 fields random finite values) and "dequant": their float32 values
    from gguf.quants.dequantize (the `gguf` package, llama.cpp's gguf-py);
  - "input": random float32 rows (with a few all-zero, constant and
    outlier blocks) and "quant": their quantized bytes from
    gguf.quants.quantize where it implements the type (q8_0 ... q5_1), else
    from ggml's own reference quantizer (ggml_quantize_chunk without an
    importance matrix = quantize_row_q4_K_ref / q5_K / q6_K: what
    llama-quantize does), called through a small C driver linked with a
    built llama.cpp's libggml-base.a (compiled without FMA contraction).
Bytes are hex strings; float32 values are the hex of their little-endian bytes
(bit-exact).

Usage: scripts/gen_quant_fixtures.py [--llama-src DIR] [--llama-build DIR]
  DIR defaults: bench/.work/llama-cpp-python/vendor/llama.cpp and
  bench/.work/llama.cpp-build (what bench/compare_llamacpp.sh builds).
Needs: pip install gguf numpy (0.19.0 was used).
"""
import argparse
import json
import os
import sys
import tempfile

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ggml_driver  # noqa: E402
from ggml_driver import ggml_quantize, hexf  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TYPES = [("q8_0", T.Q8_0), ("q4_0", T.Q4_0), ("q4_1", T.Q4_1), ("q5_0", T.Q5_0), ("q5_1", T.Q5_1),
         ("q4_K", T.Q4_K), ("q5_K", T.Q5_K), ("q6_K", T.Q6_K)]
# byte offsets of the float16 fields of a block (ggml-common.h)
F16_FIELDS = {T.Q8_0: [0], T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2],
              T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208]}

DRIVER = ggml_driver.driver_source(
    "the quantized bytes",
    "    ggml_quantize_chunk((enum ggml_type)type, x, y, 0, 1, n, NULL);")


def build_driver(src, build, tmp):
    return ggml_driver.build_driver("gen_quant_fixtures", DRIVER, src, build, ("libggml-base.a",), tmp)


def random_blocks(rng, qtype, n_blocks):
    bs, ts = quants.GGML_QUANT_SIZES[qtype]
    b = rng.integers(0, 256, size=(n_blocks, ts), dtype=np.uint8)
    for off in F16_FIELDS[qtype]:
        # finite float16 scales across magnitudes and both signs
        v = (rng.standard_normal(n_blocks) * 10.0 ** rng.integers(-6, 2, n_blocks)).astype(np.float16)
        b[:, off:off + 2] = v.view(np.uint8).reshape(n_blocks, 2)
    return b


def test_input(rng, n):
    x = (rng.standard_normal(n) * 0.05).astype(np.float32)
    x[:32] = 0.0                       # an all-zero block
    x[32:64] = 0.25                    # a constant block
    x[64:96] *= 100.0                  # large values
    x[100] = 3.0                       # an outlier
    x[160:192] = np.abs(x[160:192])    # a positive block (min > 0)
    return x


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-src", default=os.path.join(ROOT, "bench/.work/llama-cpp-python/vendor/llama.cpp"))
    ap.add_argument("--llama-build", default=os.path.join(ROOT, "bench/.work/llama.cpp-build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/fixtures/quant_fixtures.json"))
    args = ap.parse_args()
    rng = np.random.default_rng(20261201)
    n = 512  # two super-blocks, 16 blocks of 32
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        exe = build_driver(args.llama_src, args.llama_build, tmp)
        for name, qtype in TYPES:
            bs, ts = quants.GGML_QUANT_SIZES[qtype]
            blocks = random_blocks(rng, qtype, n // bs)
            deq = quants.dequantize(blocks.reshape(-1), qtype).astype(np.float32)
            x = test_input(rng, n)
            try:
                q = quants.quantize(x.reshape(1, n), qtype).tobytes()
                oracle = "gguf.quants.quantize"
                # the ggml driver must agree where both exist
                assert ggml_quantize(exe, qtype, x) == q, name
            except NotImplementedError:
                q = ggml_quantize(exe, qtype, x)
                oracle = "ggml_quantize_chunk (libggml-base)"
            cases.append({"type": name, "n": n, "blocks": blocks.tobytes().hex(), "dequant": hexf(deq),
                          "input": hexf(x), "quant": q.hex(), "quant_oracle": oracle})
    with open(args.out, "w") as f:
        json.dump({"generator": "scripts/gen_quant_fixtures.py", "cases": cases}, f, indent=1)
        f.write("\n")
    print(f"wrote {args.out}: {len(cases)} types")


if __name__ == "__main__":
    main()
