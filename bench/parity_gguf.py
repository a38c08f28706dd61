"""Greedy continuations of txc and llama.cpp on the same GGUF file, prompt by prompt.

For each prompt, txc's greedy continuation (`txc generate --prompt P --max-new-tokens N`: it
stops at the file's end-of-sequence / end-of-turn token and prints the text without special
tokens) is compared with what llama.cpp's llama-completion prints for the same prompt (--temp 0,
the same number of tokens; it stops at the same end-of-generation tokens and does not print
them either). Neither side ignores the end of sequence: llama.cpp's --ignore-eos sets that
token's logit to -inf, which changes what comes after (txc's bench --ignore-eos goes on past it).

Both sides can be run in several configurations (`--txc-config`, `--llama-config`, repeatable,
each a label=ARGS pair) to show how much each one's own numerics move the result: e.g.
llama.cpp's float16 KV cache (its default) against a float32 one (`-ctk f32 -ctv f32`), txc
compiled against eager (`--no-jit`). Every configuration is compared with the first txc one;
for a difference the first character where the two texts part is printed. Exit 0 when the
first txc and the first llama.cpp configuration agree on every prompt.

Usage: python3 bench/parity_gguf.py --txc build/txc --llama-bin DIR/bin --model FILE.gguf
         [--new-tokens 32] [--threads 2] [--prompts FILE (one per line, \\n for a newline)]
         [--txc-config 'eager=--no-jit']... [--llama-config 'kv-f32=-ctk f32 -ctv f32']...
         [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys

from lib.prompts import CHAT_PROMPTS, PROMPTS as PLAIN_PROMPTS, add_run_args, common_prefix

# Plain text and the model's own chat format (ChatML for SmolLM2); llama.cpp parses the special
# tokens of a prompt as txc does.
PROMPTS = PLAIN_PROMPTS + CHAT_PROMPTS


def run(cmd: list[str]) -> str:
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"parity_gguf: {' '.join(cmd[:3])} ... failed ({p.returncode}): {p.stderr.strip()[-400:]}")
    return p.stdout


def txc_text(a, prompt: str, extra: list[str]) -> str:
    # (txc prints one newline after the text, llama-completion two: trailing newlines are dropped)
    return run([a.txc, "generate", "--model", a.model, "--prompt", prompt, "--max-new-tokens", str(a.new_tokens),
                "--greedy", "--no-compile-cache", "--threads", str(a.threads), *extra]).rstrip("\n")


def llama_text(a, prompt: str, extra: list[str]) -> str:
    return run([os.path.join(a.llama_bin, "llama-completion"), "-m", a.model, "-p", prompt, "-n",
                str(a.new_tokens), "--temp", "0", "-t", str(a.threads), "--no-display-prompt", "-no-cnv",
                "--no-warmup", "-s", "0", *extra]).rstrip("\n").removesuffix(" [end of text]")  # its EOS note


def parse_configs(items: list[str] | None, default: str) -> list[tuple[str, list[str]]]:
    out = []
    for it in items or [default]:
        label, _, args = it.partition("=")
        out.append((label, shlex.split(args)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    add_run_args(ap)
    ap.add_argument("--llama-bin", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompts")
    ap.add_argument("--txc-config", action="append")
    ap.add_argument("--llama-config", action="append")
    a = ap.parse_args()
    prompts = PROMPTS
    if a.prompts:
        prompts = [l.rstrip("\n").replace("\\n", "\n") for l in open(a.prompts) if l.strip()]
    tcfg = [("txc:" + l, "txc", x) for l, x in parse_configs(a.txc_config, "jit=")]
    lcfg = [("llama.cpp:" + l, "llama", x) for l, x in parse_configs(a.llama_config, "default=")]
    configs = tcfg + lcfg
    same = {label: 0 for label, _, _ in configs}
    report = []
    for i, p in enumerate(prompts):
        texts = {}
        for label, side, extra in configs:
            texts[label] = (txc_text if side == "txc" else llama_text)(a, p, extra)
        ref = tcfg[0][0]
        print(f"{i + 1:2d} {p!r}", flush=True)
        for label, _, _ in configs:
            t = texts[label]
            if label == ref:
                print(f"   {label:22s} {t!r}")
                continue
            n = common_prefix(texts[ref], t)
            ok = bool(t) and t == texts[ref]
            same[label] += ok
            print(f"   {label:22s} {'same' if ok else f'parts at char {n}: ' + repr(t[n:n + 40])}")
        report.append({"prompt": p, "texts": texts})
    ref = tcfg[0][0]
    for label, _, _ in configs:
        if label != ref:
            print(f"{label} vs {ref}: {same[label]} of {len(prompts)} prompts give the same {a.new_tokens}-token "
                  "greedy text")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"model": a.model, "new_tokens": a.new_tokens, "prompts": report}, f, indent=1)
    return 0 if same[lcfg[0][0]] == len(prompts) else 1


if __name__ == "__main__":
    sys.exit(main())
