"""The GGUF, dequantized by transformers and saved as a Hugging Face folder, against txc.

transformers loads a GGUF (`from_pretrained(dir, gguf_file=NAME)`: its weights dequantized with
the gguf package, the llama q/k permutation undone, the tokenizer rebuilt from tokenizer.ggml.*)
and `save_pretrained` writes a float32 folder. For each prompt this prints and compares:

  hf        transformers' own greedy tokens on that model (float32, eager attention)
  folder    txc on the saved folder (float32 weights)
  gguf-f32  txc on the GGUF with --dtype f32 (txc's own dequantization; the same float32
            weights as the folder when both dequantize exactly)
  gguf      txc on the GGUF as stored (block-quantized weights, int8-quantized activations)

and the prompt's ids of transformers' tokenizer against txc's GGUF tokenizer and txc's on the
folder's tokenizer.json.

Usage: python bench/transformers_gguf_check.py --txc build/txc --gguf FILE.gguf --out DIR
           [--new-tokens 32] [--threads 2] [--json OUT.json]
Needs torch, transformers (>= 4.45: GGUF loading) and gguf in the Python running it.
Exit 0 when folder == gguf-f32 == hf for every prompt.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from lib.prompts import PROMPTS, add_run_args, common_prefix

def txc_ids(a, model: str, extra: list[str], prompts: list[str]) -> list[list[int]]:
    pf = os.path.join(a.out, "prompts.txt")
    with open(pf, "w") as f:
        f.write("".join(p + "\n" for p in prompts))
    cmd = [a.txc, "generate", "--model", model, "--prompt-file", pf, "--json", "--max-new-tokens",
           str(a.new_tokens), "--greedy", "--no-compile-cache", "--threads", str(a.threads), "--batch-size", "1",
           *extra]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"transformers_gguf_check: {' '.join(cmd)} failed: {p.stderr.strip()[-400:]}")
    rows = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
    rows.sort(key=lambda r: r["index"])
    return [r["token_ids"] for r in rows]


def txc_prompt_ids(a, model: str, prompt: str) -> list[int]:
    p = subprocess.run([a.txc, "tokenize", "--model", model, prompt], capture_output=True, text=True, check=True)
    return [int(l.split("\t")[0]) for l in p.stdout.splitlines() if l.strip()]


def main() -> int:
    ap = argparse.ArgumentParser()
    add_run_args(ap)
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(a.threads)
    os.makedirs(a.out, exist_ok=True)
    folder = os.path.join(a.out, "hf")
    d, name = os.path.split(os.path.abspath(a.gguf))
    tok = AutoTokenizer.from_pretrained(d, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=name, dtype=torch.float32)
    model.eval()
    if not os.path.exists(os.path.join(folder, "config.json")):
        # save_pretrained refuses a model loaded from a GGUF ("quantized with gguf"), though its
        # weights are dequantized float32 tensors by now: the state dict is written as it is
        # (the tied lm_head left out, as save_pretrained does), the config without
        # quantization_config
        from safetensors.torch import save_file
        os.makedirs(folder, exist_ok=True)
        sd = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
        if getattr(model.config, "tie_word_embeddings", False):
            sd.pop("lm_head.weight", None)
        save_file(sd, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
        cfg = model.config.to_dict()
        cfg.pop("quantization_config", None)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
        model.generation_config.save_pretrained(folder)
        tok.save_pretrained(folder)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}: {a.gguf} -> {folder}", flush=True)
    prompts = PROMPTS
    hf_ids, hf_prompt_ids, dlogit = [], [], []
    for p in prompts:
        enc = tok(p, return_tensors="pt")
        hf_prompt_ids.append(enc.input_ids[0].tolist())
        with torch.no_grad():
            out = model.generate(**enc, max_new_tokens=a.new_tokens, do_sample=False, num_beams=1)
        hf_ids.append(out[0, enc.input_ids.shape[1]:].tolist())
    runs = {"folder": txc_ids(a, folder, [], prompts), "gguf-f32": txc_ids(a, a.gguf, ["--dtype", "f32"], prompts),
            "gguf": txc_ids(a, a.gguf, [], prompts)}
    ok = True
    report = []
    for i, p in enumerate(prompts):
        # txc stops at eos; transformers too (generation_config's eos_token_id): compare as lists
        pid_gguf, pid_folder = txc_prompt_ids(a, a.gguf, p), txc_prompt_ids(a, folder, p)
        same_pid = pid_gguf == pid_folder == hf_prompt_ids[i]
        print(f"{i + 1:2d} {p!r}: prompt ids {'equal' if same_pid else 'DIFFER'} "
              f"(hf {hf_prompt_ids[i]}, txc gguf {pid_gguf}, txc folder {pid_folder})")
        print(f"   hf        {tok.decode(hf_ids[i])!r}")
        row = {"prompt": p, "prompt_ids": {"hf": hf_prompt_ids[i], "gguf": pid_gguf, "folder": pid_folder},
               "ids": {"hf": hf_ids[i]}}
        for k, per_prompt in runs.items():
            ids = per_prompt[i]
            n = common_prefix(ids, hf_ids[i])
            same = ids == hf_ids[i]
            print(f"   {k:9s} {'same as hf' if same else f'parts from hf at token {n}: ' + repr(tok.decode(ids[n:]))}")
            row["ids"][k] = ids
            if k != "gguf" and not same:
                ok = False
        if runs["folder"][i] != runs["gguf-f32"][i]:
            print("   folder and gguf-f32 DIFFER")
            ok = False
        ok = ok and same_pid
        report.append(row)
    for k, v in runs.items():
        n = sum(v[i] == hf_ids[i] for i in range(len(prompts)))
        print(f"txc {k}: {n} of {len(prompts)} prompts give transformers' {a.new_tokens} greedy tokens")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"gguf": a.gguf, "new_tokens": a.new_tokens, "prompts": report}, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
