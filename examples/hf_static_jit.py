"""A Hugging Face model on txc from PyTorch, as torchax runs it on JAX: three decode modes.

  1. eager, DynamicCache: the model's own forward, every op dispatched to txc;
  2. eager, StaticCache (transformers 5.x: layers hold keys, values, cumulative_length);
  3. tx.interop.jax_jit(decode_one_token): the decode step traced once into a txc plan, the
     weights passed through torch.func.functional_call, the StaticCache a registered pytree.

    python examples/hf_static_jit.py --model DIR [--tokens 32] [--prompt-ids 1,403,407]

Prints each mode's tokens (all three must agree with CPU torch's greedy tokens) and a table of
time per decode step.
"""
import argparse
import time

import torch
from torch.utils import _pytree as pytree  # noqa: F401  (the StaticCache is registered below)
from transformers import AutoModelForCausalLM, StaticCache

import txc as tx


def greedy_dynamic(model, ids, n):
    out = model(ids, use_cache=True)
    cache = out.past_key_values
    tok = out.logits[:, -1].argmax(-1, keepdim=True)
    toks, t0 = [tok], time.perf_counter()
    for _ in range(n - 1):
        out = model(tok, cache=cache, use_cache=True)
        tok = out.logits[:, -1].argmax(-1, keepdim=True)
        toks.append(tok)
    return torch.cat([t.cpu() for t in toks], 1), (time.perf_counter() - t0) / max(n - 1, 1)


def greedy_static(model, ids, n, max_cache_len):
    cache = StaticCache(config=model.config, max_cache_len=max_cache_len)
    out = model(ids, cache=cache, use_cache=True)
    tok = out.logits[:, -1].argmax(-1, keepdim=True)
    toks, t0 = [tok], time.perf_counter()
    for _ in range(n - 1):
        out = model(tok, cache=cache, use_cache=True)
        tok = out.logits[:, -1].argmax(-1, keepdim=True)
        toks.append(tok)
    return torch.cat([t.cpu() for t in toks], 1), (time.perf_counter() - t0) / max(n - 1, 1)


def greedy_jit(model, ids, n, max_cache_len, device):
    tx.register_static_cache_pytree()
    weights = dict(model.named_parameters())
    weights.update(model.named_buffers())

    def decode_one_token(weights, cur_token, cache_position, cache):
        logits, cache = torch.func.functional_call(
            model, weights, (cur_token,),
            dict(cache_position=cache_position, cache=cache, return_dict=False, use_cache=True))
        new_token = torch.argmax(logits[:, -1], dim=-1)[:, None]
        return new_token, cache

    jitted = tx.interop.jax_jit(decode_one_token)
    cache = StaticCache(config=model.config, max_cache_len=max_cache_len)
    out = model(ids, cache=cache, use_cache=True)
    tok = out.logits[:, -1].argmax(-1, keepdim=True)
    toks = [tok]
    pos = ids.shape[1]
    t0 = time.perf_counter()
    for i in range(n - 1):
        if i == 1:  # the first call compiles: time the steady state
            t0 = time.perf_counter()
        tok, cache = jitted(weights, tok, torch.tensor([pos + i], device=device), cache)
        toks.append(tok)
    per = (time.perf_counter() - t0) / max(n - 2, 1)
    return torch.cat([t.cpu() for t in toks], 1), per, jitted.stats


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--prompt-ids", default="1,403,407,261,378")
    ap.add_argument("--max-cache-len", type=int, default=256)
    ap.add_argument("--skip-jit", action="store_true")
    a = ap.parse_args()
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32).eval()
    ids = torch.tensor([[int(x) for x in a.prompt_ids.split(",")]])
    rows = []
    with torch.no_grad():
        ref, t = greedy_dynamic(model, ids, a.tokens)
        rows.append(("torch (CPU), eager, DynamicCache", t, True))
        ref_s, t = greedy_static(model, ids, a.tokens, a.max_cache_len)
        rows.append(("torch (CPU), eager, StaticCache", t, torch.equal(ref_s, ref)))
        env = tx.default_env()
        with env:
            model.to("txc")
            x = ids.to("txc")
            got, t = greedy_dynamic(model, x, a.tokens)
            rows.append(("txc, eager, DynamicCache", t, torch.equal(got, ref)))
            got, t = greedy_static(model, x, a.tokens, a.max_cache_len)
            rows.append(("txc, eager, StaticCache", t, torch.equal(got, ref)))
            if not a.skip_jit:
                got, t, stats = greedy_jit(model, x, a.tokens, a.max_cache_len, "txc")
                rows.append(("txc, jax_jit(decode_one_token)", t, torch.equal(got, ref)))
                print(f"jit: {stats['misses']} compilation(s), {stats['hits']} hits, "
                      f"{stats['nodes_traced']} ops traced -> {stats['nodes_compiled']} kernels")
    print("tokens:", ref[0].tolist())
    print(f"| {'mode':40s} | {'ms / decode step':>16s} | same tokens as torch |")
    print(f"|{'-' * 42}|{'-' * 18}|{'-' * 22}|")
    for name, t, same in rows:
        print(f"| {name:40s} | {t * 1e3:16.2f} | {'yes' if same else 'NO':20s} |")


if __name__ == "__main__":
    main()
