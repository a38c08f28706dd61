"""Greedy tokens of txc and llama.cpp on the same GGUF file, prompt by prompt.

For each prompt, txc's greedy continuation (`txc bench --json`'s reference_ids: the first row's
tokens, end-of-sequence ignored) is decoded with txc's tokenizer and compared with what
llama.cpp's llama-completion prints for the same prompt (--temp 0, --ignore-eos, the same number
of tokens). Equal text for every prompt is the pass (exit 0); each prompt's two continuations
are printed.

Usage: python3 bench/parity_gguf.py --txc build/txc --llama-bin DIR/bin --model FILE.gguf
                                    [--new-tokens 32] [--threads 2] [--prompts FILE (one per line)]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

# Plain text and the model's own chat format (ChatML for SmolLM2); llama.cpp parses the special
# tokens of a prompt as txc does.
PROMPTS = [
    "The capital of France is",
    "Once upon a time, there was a little girl who",
    "def fibonacci(n):",
    "The three primary colors are",
    "Water boils at a temperature of",
    "In 1969, the first man to walk on the moon was",
    "Here is a list of fruits: apple, banana,",
    "The quick brown fox",
    "Machine learning is a field of study that",
    "To make a cup of tea, first",
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nWrite a haiku about the sea.<|im_end|>\n<|im_start|>assistant\n",
]


def run(cmd: list[str]) -> str:
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"parity_gguf: {' '.join(cmd[:3])} ... failed ({p.returncode}): {p.stderr.strip()[-400:]}")
    return p.stdout


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--txc", required=True)
    ap.add_argument("--llama-bin", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompts")
    a = ap.parse_args()
    prompts = PROMPTS
    if a.prompts:
        prompts = [l.rstrip("\n").replace("\\n", "\n") for l in open(a.prompts) if l.strip()]
    same = 0
    for i, p in enumerate(prompts):
        j = json.loads(run([a.txc, "bench", "--model", a.model, "--prompt", p, "--new-tokens", str(a.new_tokens),
                            "--modes", "jit-static", "--json", "--no-compile-cache", "--threads", str(a.threads)]))
        ids = [str(t) for t in j["reference_ids"]]
        txc_text = run([a.txc, "tokenize", "--model", a.model, "--decode", "--keep-special", *ids]).rstrip("\n")
        llama_text = run([os.path.join(a.llama_bin, "llama-completion"), "-m", a.model, "-p", p, "-n",
                          str(a.new_tokens), "--temp", "0", "-t", str(a.threads), "--no-display-prompt", "-no-cnv",
                          "--ignore-eos", "--no-warmup", "-s", "0"]).rstrip("\n")
        ok = bool(txc_text) and txc_text == llama_text
        same += ok
        print(f"{i + 1:2d} {'same' if ok else 'DIFFERENT'}: {p!r}\n   txc:       {txc_text!r}\n"
              f"   llama.cpp: {llama_text!r}", flush=True)
    print(f"{same} of {len(prompts)} prompts: the same {a.new_tokens} greedy tokens' text")
    return 0 if same == len(prompts) else 1


if __name__ == "__main__":
    sys.exit(main())
