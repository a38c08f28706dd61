#!/usr/bin/env python3
"""Write tests/fixtures/sample_processors.json: transformers' logits
processors as the reference for txc's sampling (tests/test_sample.c).

  - "warpers": a logits row and (temperature, top_k, top_p, min_p); the
    probabilities after transformers' TemperatureLogitsWarper, TopKLogitsWarper,
    TopPLogitsWarper and MinPLogitsWarper, built and ordered as
    GenerationMixin._get_logits_processor does (min_tokens_to_keep = 1),
    then softmax: the distribution torch.multinomial draws from. Zero
    probability = filtered out.
  - "repetition_penalty": a logits row, the ids of the sequence so far and a
    penalty; the row after RepetitionPenaltyLogitsProcessor.
  - "generate": stories260K, greedy search with repetition_penalty (and
    without): the new ids of model.generate() for a repetitive prompt.

Run by hand (needs PyPI torch and transformers; CI only reads the JSON):
    python3 scripts/gen_sample_fixtures.py [--out tests/fixtures/sample_processors.json]
                                           [--model ../shared/models/stories260K]
"""
import argparse
import json
import os

import torch
from transformers import (AutoModelForCausalLM, LogitsProcessorList, MinPLogitsWarper,
                          RepetitionPenaltyLogitsProcessor, TemperatureLogitsWarper, TopKLogitsWarper,
                          TopPLogitsWarper)


def warpers(temperature, top_k, top_p, min_p):
    """As GenerationMixin._get_logits_processor with do_sample=True."""
    p = LogitsProcessorList()
    if temperature != 1.0:
        p.append(TemperatureLogitsWarper(temperature))
    if top_k != 0:
        p.append(TopKLogitsWarper(top_k=top_k, min_tokens_to_keep=1))
    if top_p < 1.0:
        p.append(TopPLogitsWarper(top_p=top_p, min_tokens_to_keep=1))
    if min_p > 0.0:
        p.append(MinPLogitsWarper(min_p=min_p, min_tokens_to_keep=1))
    return p


def floats(t):
    return [float(x) for x in t.reshape(-1).tolist()]


def gen_warpers(g):
    cases = []
    configs = [
        (1.0, 0, 1.0, 0.0),    # plain softmax
        (1.0, 5, 1.0, 0.0),    # top_k
        (1.0, 1, 1.0, 0.0),    # top_k 1 = greedy
        (1.0, 0, 0.9, 0.0),    # top_p
        (1.0, 0, 0.5, 0.0),
        (1.0, 0, 0.0, 0.0),    # top_p 0 keeps the most probable only
        (1.0, 0, 1.0, 0.4),    # min_p
        (1.0, 0, 1.0, 0.2),
        (0.7, 10, 0.8, 0.0),   # the usual mix
        (1.3, 40, 0.95, 0.05), # every warper
        (0.5, 0, 0.9, 0.2),
        (2.0, 8, 0.7, 0.0),
    ]
    for i, (t, k, p, mp) in enumerate(configs):
        V = 48 if i % 2 == 0 else 200
        logits = (torch.randn(V, generator=g) * (0.5 + 0.5 * (i % 3))).float()
        scores = warpers(t, k, p, mp)(torch.zeros(1, 1, dtype=torch.long), logits[None].clone())
        probs = torch.softmax(scores, dim=-1)[0]
        cases.append({"name": f"T{t}_k{k}_p{p}_minp{mp}_V{V}", "temperature": t, "top_k": k, "top_p": p,
                      "min_p": mp, "logits": floats(logits), "probs": floats(probs)})
    # ties at the k-th value: torch keeps every score >= the k-th largest
    logits = torch.tensor([0.5, 2.0, 1.0, 2.0, 1.0, 1.0, -1.0, 0.0], dtype=torch.float32)
    scores = warpers(1.0, 3, 1.0, 0.0)(torch.zeros(1, 1, dtype=torch.long), logits[None].clone())
    cases.append({"name": "top_k ties", "temperature": 1.0, "top_k": 3, "top_p": 1.0, "min_p": 0.0,
                  "logits": floats(logits), "probs": floats(torch.softmax(scores, dim=-1)[0])})
    return cases


def gen_penalty(g):
    cases = []
    for penalty in (1.3, 0.7):
        logits = (torch.randn(32, generator=g) * 3).float()
        logits[5] = 0.0
        ids = [3, 5, 7, 7, 20, 31, 0]
        out = RepetitionPenaltyLogitsProcessor(penalty)(torch.tensor([ids]), logits[None].clone())[0]
        cases.append({"penalty": penalty, "input_ids": ids, "logits": floats(logits), "expected": floats(out)})
    return cases


def gen_generate(model_dir):
    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
    model.eval()
    cases = []
    # "Lily and Ben" and a prompt that invites repetition; ids from stories260K's tokenizer
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(model_dir)
    for prompt in ("Once upon a time", "The cat sat. The cat sat. The cat"):
        ids = tok(prompt, return_tensors="pt").input_ids
        for penalty in (1.0, 1.3):
            with torch.no_grad():
                out = model.generate(ids, do_sample=False, repetition_penalty=penalty, max_new_tokens=40,
                                     eos_token_id=[1, 2], pad_token_id=0)
            cases.append({"prompt": prompt, "input_ids": ids[0].tolist(), "repetition_penalty": penalty,
                          "new_ids": out[0, ids.shape[1]:].tolist()})
    return cases


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "fixtures", "sample_processors.json"))
    ap.add_argument("--model", default=os.path.join(here, "..", "..", "shared", "models", "stories260K"))
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()
    g = torch.Generator().manual_seed(a.seed)
    import transformers
    doc = {
        "generator": "scripts/gen_sample_fixtures.py",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "warpers": gen_warpers(g),
        "repetition_penalty": gen_penalty(g),
        "generate": gen_generate(a.model),
    }
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
