#!/usr/bin/env python3
"""Write a model folder with a real checkpoint's config and random bf16
weights: config.json + model.safetensors (what `txc bench --model DIR`,
`--mmap` / `--no-mmap` and the load-time measurements need: weights in a file,
unlike `txc bench --synthetic`, whose weights are made in memory).

    python3 scripts/make_synthetic_folder.py qwen2.5-0.5b OUT_DIR [--seed N]

Names: qwen2.5-0.5b (Qwen/Qwen2.5-0.5B's config, 494M parameters, ~988 MB),
smollm2-135m (HuggingFaceTB/SmolLM2-135M's config, ~270 MB). Weights:
normal(0, 0.02) rounded to bfloat16 (round to nearest even), norms 1, biases
0; tied embeddings as in the checkpoints (no lm_head.weight). Written one
tensor at a time (memory stays ~ the largest tensor). Needs numpy only. No
tokenizer is written: bench it with --prompt-tokens N.
"""
import argparse
import json
import os
import struct

import numpy as np

CONFIGS = {
    "qwen2.5-0.5b": {
        "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
        "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
        "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 24,
        "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2,
        "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": True,
        "torch_dtype": "bfloat16", "use_cache": True, "use_sliding_window": False, "vocab_size": 151936,
    },
    "smollm2-135m": {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "bos_token_id": 0, "eos_token_id": 0,
        "hidden_act": "silu", "hidden_size": 576, "initializer_range": 0.041666666666666664,
        "intermediate_size": 1536, "max_position_embeddings": 8192, "mlp_bias": False, "model_type": "llama",
        "num_attention_heads": 9, "num_hidden_layers": 30, "num_key_value_heads": 3, "rms_norm_eps": 1e-05,
        "rope_scaling": None, "rope_theta": 100000, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
        "use_cache": True, "vocab_size": 49152,
    },
}


def tensors(c):
    """(name, shape, kind) in the order written; kind: w (random), one, zero."""
    h, i, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    d = c.get("head_dim") or h // c["num_attention_heads"]
    q, kv = c["num_attention_heads"] * d, c["num_key_value_heads"] * d
    bias = c["model_type"] == "qwen2" or c.get("attention_bias", False)
    out = [("model.embed_tokens.weight", (v, h), "w")]
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        out += [(p + "input_layernorm.weight", (h,), "one"),
                (p + "self_attn.q_proj.weight", (q, h), "w"),
                (p + "self_attn.k_proj.weight", (kv, h), "w"),
                (p + "self_attn.v_proj.weight", (kv, h), "w")]
        if bias:
            out += [(p + "self_attn.q_proj.bias", (q,), "zero"),
                    (p + "self_attn.k_proj.bias", (kv,), "zero"),
                    (p + "self_attn.v_proj.bias", (kv,), "zero")]
        out += [(p + "self_attn.o_proj.weight", (h, q), "w"),
                (p + "post_attention_layernorm.weight", (h,), "one"),
                (p + "mlp.gate_proj.weight", (i, h), "w"),
                (p + "mlp.up_proj.weight", (i, h), "w"),
                (p + "mlp.down_proj.weight", (h, i), "w")]
    out.append(("model.norm.weight", (h,), "one"))
    if not c["tie_word_embeddings"]:
        out.append(("lm_head.weight", (v, h), "w"))
    return out


def to_bf16(x):
    """float32 array -> uint16 bfloat16 bits, round to nearest even."""
    b = x.astype(np.float32).view(np.uint32)
    b = b + (np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1)))
    return (b >> np.uint32(16)).astype(np.uint16)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name", choices=sorted(CONFIGS))
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    c = CONFIGS[a.name]
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    ts = tensors(c)
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, shape, _ in ts:
        n = int(np.prod(shape)) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    rng = np.random.default_rng(a.seed)
    std = c["initializer_range"]
    with open(os.path.join(a.out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for name, shape, kind in ts:
            if kind == "w":
                x = rng.standard_normal(shape, dtype=np.float32) * np.float32(std)
            else:
                x = np.full(shape, 1.0 if kind == "one" else 0.0, dtype=np.float32)
            f.write(to_bf16(x).tobytes())
    print(f"{a.out}: {a.name}, {off / 1e6:.1f} MB of bf16 weights")


if __name__ == "__main__":
    main()
