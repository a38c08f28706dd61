#!/usr/bin/env python3
"""Tiny random models of each architecture txc supports, checked against
transformers (the oracle): writes tests/fixtures/arch/<name>/ with the
model saved by save_pretrained (config.json, model.safetensors,
generation_config.json) and expected.json:

  input_ids   the fixed prompt (ids)
  logits      float32 logits of the whole prompt, one row per position
  new_ids     16 greedy tokens (transformers' generate, its default cache,
              no eos stopping)
  min_margin  the smallest top-1 minus top-2 score over those 16 steps (the
              seed is chosen so that it is not a near tie)
  inv_freq    the rotary embedding's inv_freq buffer at load (RoPE models)
  attention_scaling   the RoPE attention factor (yarn's, longrope's, else 1)
  prefix_logits       (dynamic NTK, longrope) the logits of the first PREFIX_LEN
              tokens alone, a sequence short enough for the unscaled table

Run by hand (not in CI), with PyPI's torch and transformers:
  python3 -m venv --system-site-packages /tmp/venv && /tmp/venv/bin/pip install transformers
  /tmp/venv/bin/python scripts/gen_arch_fixtures.py [names...]
"""
import importlib
import json
import math
import os
import shutil
import sys

import numpy as np
import torch
import transformers
from safetensors import safe_open
from transformers import AutoConfig, AutoModelForCausalLM

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "arch")
N_NEW = 16
PROMPT_LEN = 24
PREFIX_LEN = 12

# Small shapes: hidden 32, 2 layers, vocab 128 (each fixture well under 200 KB).
BASE = dict(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
            bos_token_id=1, eos_token_id=2, pad_token_id=0)

CASES = {
    # RoPE scaling types (llama). Positions past original_max_position_embeddings (16) are in
    # the 24-token prompt; for dynamic the threshold is max_position_embeddings (16 too).
    "llama_linear": dict(model_type="llama", tie_word_embeddings=True,
                         rope_scaling={"rope_type": "linear", "factor": 2.0}),
    "llama_dynamic": dict(model_type="llama", max_position_embeddings=16, _prefix=True,
                          rope_scaling={"rope_type": "dynamic", "factor": 2.0}),
    "llama_llama3": dict(model_type="llama", rope_theta=10000.0, head_dim=16, num_attention_heads=4,
                         rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                       "high_freq_factor": 4.0, "original_max_position_embeddings": 16}),
    "llama_yarn": dict(model_type="llama", head_dim=16,
                       rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16,
                                     "beta_fast": 4.0, "beta_slow": 0.25}),
    "llama_bias": dict(model_type="llama", attention_bias=True, mlp_bias=True),
    "qwen2": dict(model_type="qwen2", tie_word_embeddings=True),
    "qwen2_sliding": dict(model_type="qwen2", use_sliding_window=True, sliding_window=6, max_window_layers=1),
    "qwen3": dict(model_type="qwen3", head_dim=16),
    "mistral": dict(model_type="mistral", sliding_window=7),
    "gemma": dict(model_type="gemma", head_dim=16, hidden_act="gelu_pytorch_tanh"),
    "gemma2": dict(model_type="gemma2", head_dim=16, sliding_window=6, query_pre_attn_scalar=24,
                   attn_logit_softcapping=5.0, final_logit_softcapping=15.0),
    "phi3": dict(model_type="phi3", partial_rotary_factor=0.5, num_attention_heads=2, num_key_value_heads=2,
                 hidden_size=32),
    "phi3_longrope": dict(model_type="phi3", partial_rotary_factor=0.75, num_attention_heads=2,
                          num_key_value_heads=2, original_max_position_embeddings=16, _prefix=True,
                          rope_scaling={"rope_type": "longrope", "short_factor": [1.0, 1.1, 1.3, 1.6, 2.0, 2.5],
                                        "long_factor": [1.0, 1.5, 2.5, 4.0, 6.0, 9.0]}),
    "gpt2": dict(model_type="gpt2", n_embd=32, n_layer=2, n_head=4, n_positions=64, n_inner=64,
                 vocab_size=128, bos_token_id=1, eos_token_id=2),
}


def make_config(spec):
    spec = dict(spec)
    model_type = spec.pop("model_type")
    spec.pop("_prefix", None)
    kw = {} if model_type == "gpt2" else dict(BASE)
    kw.update(spec)
    return AutoConfig.for_model(model_type, **kw)


def init_weights(model, seed):
    g = torch.Generator().manual_seed(seed)
    gemma_norm = model.config.model_type in ("gemma", "gemma2")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or name.split(".")[-2].startswith("ln"):
                if name.endswith("bias"):
                    p.copy_(0.1 * torch.randn(p.shape, generator=g))
                elif gemma_norm:
                    p.copy_(0.2 * torch.randn(p.shape, generator=g))  # RMSNorm scales by (1 + w)
                else:
                    p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
            elif gemma_norm and "embed_tokens" in name:
                # Gemma scales the embeddings by sqrt(hidden_size): keep the tied head from
                # simply repeating the input token
                p.copy_(0.05 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.25 * torch.randn(p.shape, generator=g))


def prompt_ids(vocab):
    return [1] + [(7 * i * i + 13 * i + 5) % (vocab - 3) + 3 for i in range(1, PROMPT_LEN)]


def f32(x):
    return float("%.9g" % float(np.float32(x)))


def run_case(name, spec):
    cfg = make_config(spec)
    for seed in range(1, 50):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager", dtype=torch.float32)
        model.eval()
        init_weights(model, seed)
        ids = torch.tensor([prompt_ids(cfg.vocab_size)])
        rot = getattr(getattr(model, "model", None), "rotary_emb", None)
        inv_freq = rot.inv_freq.clone() if rot is not None else None
        scaling = float(rot.attention_scaling) if rot is not None else None
        with torch.no_grad():
            # the prefix first: a fresh dynamic-NTK model has not grown its table yet
            prefix = model(ids[:, :PREFIX_LEN]).logits[0].float() if spec.get("_prefix") else None
            logits = model(ids).logits[0].float()
            out = model.generate(ids, max_new_tokens=N_NEW, min_new_tokens=N_NEW, do_sample=False,
                                 eos_token_id=None, pad_token_id=0, output_scores=True,
                                 return_dict_in_generate=True)
        new_ids = out.sequences[0, ids.shape[1]:].tolist()
        margins = []
        for s in out.scores:
            top = torch.topk(s[0].float(), 2).values
            margins.append(float(top[0] - top[1]) / max(1.0, float(top[0].abs())))
        distinct = len(set(new_ids))
        if min(margins) > 1e-3 and distinct >= 6:
            break
    else:
        raise SystemExit(f"{name}: no seed gives clear greedy margins")
    out_dir = os.path.join(ROOT, name)
    shutil.rmtree(out_dir, ignore_errors=True)
    model.save_pretrained(out_dir)
    with safe_open(os.path.join(out_dir, "model.safetensors"), "pt") as f:
        keys = list(f.keys())
    expected = {
        "model_type": cfg.model_type,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "seed": seed,
        "tensors": sorted(keys),
        "input_ids": ids[0].tolist(),
        "new_ids": new_ids,
        "min_margin": f32(min(margins)),
        "logits": [[f32(v) for v in row] for row in logits.tolist()],
    }
    if prefix is not None:
        expected["prefix_logits"] = [[f32(v) for v in row] for row in prefix.tolist()]
    if inv_freq is not None:
        expected["inv_freq"] = [float(np.float32(v)) for v in inv_freq.tolist()]
        expected["attention_scaling"] = scaling
    with open(os.path.join(out_dir, "expected.json"), "w") as f:
        json.dump(expected, f, separators=(",", ":"))
        f.write("\n")
    size = sum(os.path.getsize(os.path.join(out_dir, x)) for x in os.listdir(out_dir))
    print(f"{name}: seed {seed}, {size // 1024} KB, new_ids {new_ids}, min margin {min(margins):.4f}, "
          f"tensors {len(keys)}")


# RoPE tables of real checkpoints' configs (no weights): the inv_freq buffer and
# attention scaling transformers computes at load, in tests/fixtures/arch/rope_tables.json.
ROPE_CONFIGS = {
    "Llama-3.2-1B": dict(model_type="llama", hidden_size=2048, num_attention_heads=32, num_key_value_heads=8,
                         head_dim=64, max_position_embeddings=131072, rope_theta=500000.0,
                         rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                       "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
    "Llama-3.1-8B": dict(model_type="llama", hidden_size=4096, num_attention_heads=32, num_key_value_heads=8,
                         max_position_embeddings=131072, rope_theta=500000.0,
                         rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                       "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
    "Qwen2.5-7B-yarn": dict(model_type="qwen2", hidden_size=3584, num_attention_heads=28, num_key_value_heads=4,
                            max_position_embeddings=131072, rope_theta=1000000.0,
                            rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                          "original_max_position_embeddings": 32768}),
    "yarn-mscale": dict(model_type="llama", hidden_size=2048, num_attention_heads=16, max_position_embeddings=163840,
                        rope_theta=10000.0,
                        rope_scaling={"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096,
                                      "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 0.707}),
    "linear-codellama": dict(model_type="llama", hidden_size=4096, num_attention_heads=32, rope_theta=1000000.0,
                             max_position_embeddings=16384, rope_scaling={"rope_type": "linear", "factor": 4.0}),
    "SmolLM2-135M": dict(model_type="llama", hidden_size=576, num_attention_heads=9, num_key_value_heads=3,
                         max_position_embeddings=8192, rope_theta=100000.0),
    "Phi-3-mini-128k": dict(model_type="phi3", hidden_size=3072, num_attention_heads=32, max_position_embeddings=131072,
                            original_max_position_embeddings=4096, rope_theta=10000.0,
                            rope_scaling={"type": "longrope",
                                          "short_factor": [1.0 + 0.05 * i for i in range(48)],
                                          "long_factor": [1.0 + 0.9 * i for i in range(48)]}),
}


def rope_tables():
    out = {}
    for name, spec in ROPE_CONFIGS.items():
        spec = dict(spec)
        mt = spec.pop("model_type")
        kw = dict(vocab_size=256, intermediate_size=64, num_hidden_layers=1, pad_token_id=0)
        kw.update(spec)
        cfg = AutoConfig.for_model(mt, **kw)
        module = importlib.import_module(f"transformers.models.{mt}.modeling_{mt}")
        rot_cls = next(getattr(module, n) for n in dir(module) if n.endswith("RotaryEmbedding"))
        rot = rot_cls(cfg)
        cfg_dict = json.loads(cfg.to_json_string(use_diff=True))
        out[name] = {"config": cfg_dict, "inv_freq": [float(np.float32(v)) for v in rot.inv_freq.tolist()],
                     "attention_scaling": float(rot.attention_scaling)}
        print(f"rope table {name}: {len(out[name]['inv_freq'])} entries, scaling {rot.attention_scaling}")
    with open(os.path.join(ROOT, "rope_tables.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


def main():
    names = sys.argv[1:] or list(CASES) + ["rope_tables"]
    for n in names:
        if n == "rope_tables":
            rope_tables()
        else:
            run_case(n, CASES[n])


if __name__ == "__main__":
    main()
