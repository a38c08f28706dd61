"""txc's GGUF tokenizer against llama.cpp's tokenizer test vectors.

llama.cpp ships vocabulary-only GGUF files with test inputs and the expected ids
(models/ggml-vocab-NAME.gguf, .gguf.inp: texts separated by "\\n__ggml_vocab_test__\\n",
.gguf.out: the ids of each, one line per text; what its test-tokenizer-0 checks, written by
convert_hf_to_gguf_update.py from the Hugging Face tokenizer). This runs
`txc tokenize --model FILE.gguf --ids --no-special-tokens TEXT` on every text and counts the
equal ones. The files come with llama.cpp's source (bench/compare_llamacpp.sh unpacks the
llama-cpp-python source package into bench/.work/llama-cpp-python/vendor/llama.cpp).

Usage: python3 bench/gguf_vocab_check.py --txc build/txc --models-dir DIR [NAME...]
       (default names: llama-spm gpt-2 llama-bpe qwen2 phi-3); exit 0 when all are equal.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

SEP = "\n__ggml_vocab_test__\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--txc", required=True)
    ap.add_argument("--models-dir", required=True)
    ap.add_argument("names", nargs="*", default=["llama-spm", "gpt-2", "llama-bpe", "qwen2", "phi-3"])
    a = ap.parse_args()
    all_ok = True
    for name in a.names:
        g = os.path.join(a.models_dir, f"ggml-vocab-{name}.gguf")
        texts = open(g + ".inp", encoding="utf-8").read().split(SEP)
        if texts and texts[-1].endswith(SEP.rstrip("\n")):
            texts[-1] = texts[-1][: -len(SEP.rstrip("\n"))]
        want = open(g + ".out", encoding="utf-8").read().split("\n")
        same, bad = 0, []
        for i, text in enumerate(texts):
            p = subprocess.run([a.txc, "tokenize", "--model", g, "--ids", "--no-special-tokens", text],
                               capture_output=True, text=True)
            got = p.stdout.split()
            if p.returncode == 0 and got == want[i].split():
                same += 1
            else:
                bad.append((text[:40], want[i].split()[:12], got[:12], p.stderr.strip()[:200]))
        print(f"{name}: {same}/{len(texts)} texts give llama.cpp's expected ids")
        for b in bad[:5]:
            print("   text %r: expected %s, txc %s %s" % b)
        all_ok = all_ok and not bad
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
