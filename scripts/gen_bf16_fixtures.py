#!/usr/bin/env python3
"""Write tests/fixtures/stories260k_bf16.json: transformers' LlamaForCausalLM
for stories260K with bfloat16 weights, the reference for txc with bf16
weights (tests/test_bf16.c), two ways:
  "logits_bf16_weights": the 2-d weights (matrices, embeddings) rounded to
      bf16, computed in float32 (what txc computes with --dtype bf16: bf16
      matrices, f32 norm weights, activations and sums);
  "logits_bf16": the model run entirely in bfloat16 (model.to(torch.bfloat16):
      weights, activations and logits bf16, PyTorch's CPU kernels). Its
      logits are themselves ~0.5-2% (L2) from the float32 model's.

For each prompt: input_ids, and the logits (as float) of the last `keep`
positions of one forward over the whole prompt.

Run by hand (needs PyPI torch and transformers; CI only reads the JSON):
    python3 scripts/gen_bf16_fixtures.py [--model ../shared/models/stories260K]
                                         [--out tests/fixtures/stories260k_bf16.json]
"""
import argparse
import json
import os

import torch
from transformers import AutoModelForCausalLM


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(here, "..", "..", "shared", "models", "stories260K"))
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "fixtures", "stories260k_bf16.json"))
    args = ap.parse_args()
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16)
    model.eval()
    model_w = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    model_w.eval()
    with torch.no_grad():
        for p in model_w.parameters():
            if p.dim() >= 2:  # as txc's --dtype bf16: matrices and embeddings; norm weights stay f32
                p.copy_(p.bfloat16().float())
    V = model.config.vocab_size
    g = torch.Generator().manual_seed(1234)
    prompts = [
        [1, 403, 407, 261, 378],  # short: below txc's AMX threshold (M > 4)
        [1] + torch.randint(3, V, (36,), generator=g).tolist(),
        [1] + torch.randint(3, V, (100,), generator=g).tolist(),
    ]
    keep = 4
    cases = []
    with torch.no_grad():
        for ids in prompts:
            full = model(torch.tensor([ids]), use_cache=False).logits[0, -keep:].float()
            weights = model_w(torch.tensor([ids]), use_cache=False).logits[0, -keep:]
            cases.append({"input_ids": ids, "keep": keep,
                          "logits_bf16": [[round(float(x), 5) for x in row] for row in full],
                          "logits_bf16_weights": [[round(float(x), 5) for x in row] for row in weights]})
    doc = {"model": "stories260K", "dtype": "bfloat16", "torch": torch.__version__,
           "semantics": "forward over the prompt; logits of the last `keep` positions: logits_bf16 = "
                        "LlamaForCausalLM.to(torch.bfloat16); logits_bf16_weights = weights rounded to bf16, float32 compute",
           "cases": cases}
    with open(args.out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {args.out}: {len(cases)} prompts")


if __name__ == "__main__":
    main()
