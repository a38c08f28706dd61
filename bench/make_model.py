"""One random-weight model written twice: a Hugging Face folder for txc and a GGUF for llama.cpp.

The configs are the real checkpoints' config.json (the numbers of src/models/synthetic.c), and
the weights are txc's synthetic weights bit for bit (the counter-based generator of
txc_synthetic_fill, the same seed), rounded to bfloat16 as txc rounds them. So
`txc bench --synthetic NAME --dtype bf16` and `txc bench --model DIR` run the same numbers, and
the GGUF holds them too:

- HF folder: config.json, model.safetensors (every tensor in the chosen dtype), tokenizer.json
  and tokenizer_config.json of a real tokenizer family (a shared-data folder), cut to the
  config's vocab_size when it has more tokens (gpt2's 50257 for SmolLM2's 49152).
- GGUF (written with PyPI's `gguf` package, as llama.cpp's convert_hf_to_gguf.py would write
  it): 2-D weights in the chosen dtype, 1-D tensors (norms, biases) in float32 (exact: they are
  bf16 values); for model_type llama the q/k projection rows permuted as convert_hf_to_gguf's
  LlamaModel.permute does (llama.cpp's llama arch applies rotary embeddings to adjacent pairs,
  Hugging Face's to the two halves); qwen2 needs none (llama.cpp's qwen2 uses the halves too).
  Llama 3's rope_scaling becomes the rope_freqs.weight tensor (LlamaModel.generate_extra_tensors).

Nothing here needs torch; both files are streamed tensor by tensor (peak memory: one tensor).

Usage: python bench/make_model.py NAME OUT_DIR [--dtype bf16|f32] [--seed N] [--shared DIR]
writes OUT_DIR/hf/ and OUT_DIR/model.gguf (skipped when OUT_DIR/.done matches the arguments).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import struct
import sys

import numpy as np

def die(msg: str) -> None:
    print(f"make_model: {msg}", file=sys.stderr)
    sys.exit(2)


# ---- the configs (src/models/synthetic.c, the checkpoints' config.json) -------------------------

CONFIGS = {
    "smollm2-135m": {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "silu", "hidden_size": 576,
        "initializer_range": 0.041666666666666664, "intermediate_size": 1536, "is_llama_config": True,
        "max_position_embeddings": 8192, "model_type": "llama", "num_attention_heads": 9,
        "num_hidden_layers": 30, "num_key_value_heads": 3, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
        "rope_interleaved": False, "rope_scaling": None, "rope_theta": 100000, "tie_word_embeddings": True,
        "torch_dtype": "bfloat16", "transformers_version": "4.40.1", "use_cache": True, "vocab_size": 49152,
    },
    "qwen2.5-0.5b": {
        "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
        "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
        "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 24,
        "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
        "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
        "sliding_window": 32768, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
        "transformers_version": "4.40.1", "use_cache": True, "use_sliding_window": False,
        "vocab_size": 151936,
    },
    "llama-3.2-1b": {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
        "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
        "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "llama",
        "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
        "pretraining_tp": 1, "rms_norm_eps": 1e-05,
        "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "rope_theta": 500000.0, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
        "transformers_version": "4.45.0.dev0", "use_cache": True, "vocab_size": 128256,
    },
    # Small configs for the correctness check (not txc's synthetic names; same generator).
    "tiny-llama3": {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "bos_token_id": 128000,
        "eos_token_id": 128001, "head_dim": 16, "hidden_act": "silu", "hidden_size": 64,
        "initializer_range": 0.25, "intermediate_size": 128, "max_position_embeddings": 131072,
        "mlp_bias": False, "model_type": "llama", "num_attention_heads": 4, "num_hidden_layers": 2,
        "num_key_value_heads": 2, "rms_norm_eps": 1e-05,
        "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "float32",
        "vocab_size": 128256,
    },
    "stories260k": {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 1, "eos_token_id": 2, "head_dim": 8, "hidden_act": "silu", "hidden_size": 64,
        "initializer_range": 0.02, "intermediate_size": 172, "max_position_embeddings": 512,
        "mlp_bias": False, "model_type": "llama", "num_attention_heads": 8, "num_hidden_layers": 5,
        "num_key_value_heads": 4, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": None,
        "rope_theta": 10000.0, "tie_word_embeddings": True, "torch_dtype": "float32",
        "transformers_version": "4.46.3", "use_cache": True, "vocab_size": 512,
    },
    "tiny-qwen2": {
        "architectures": ["Qwen2ForCausalLM"], "bos_token_id": 151643, "eos_token_id": 151643,
        "hidden_act": "silu", "hidden_size": 64, "initializer_range": 0.25, "intermediate_size": 128,
        "max_position_embeddings": 32768, "max_window_layers": 2, "model_type": "qwen2",
        "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2,
        "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768,
        "tie_word_embeddings": True, "torch_dtype": "float32", "use_sliding_window": False,
        "vocab_size": 151936,
    },
}

# The tokenizer (a folder of the shared data) and llama.cpp's name for its pre-tokenizer
# (convert_hf_to_gguf's get_vocab_base_pre for these vocabularies; None: no GGUF, the
# vocabulary is SentencePiece-style, which this writer does not convert).
TOKENIZERS = {
    "smollm2-135m": ("tokenizers/gpt2", "gpt-2"),
    "qwen2.5-0.5b": ("tokenizers/qwen3", "qwen2"),
    "llama-3.2-1b": ("tokenizers/llama3", "llama-bpe"),
    "stories260k": ("models/stories260K", None),
    "tiny-llama3": ("tokenizers/llama3", "llama-bpe"),
    "tiny-qwen2": ("tokenizers/qwen3", "qwen2"),
}

# ---- txc's synthetic weights (src/models/synthetic.c, txc_synthetic_fill) ------------------------

M64 = np.uint64(0xFFFFFFFFFFFFFFFF)
GOLDEN = 0x9E3779B97F4A7C15


def _mix64_int(z: int) -> int:
    z &= 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return z ^ (z >> 31)


def _mix64(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _fnv1a64(s: str) -> int:
    h = 0xCBF29CE484222325
    for b in s.encode():
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def synthetic_fill(seed: int, name: str, std: float, n: int, first: int = 0) -> np.ndarray:
    """float32 values of elements [first, first + n) of tensor `name`, as txc_synthetic_fill."""
    key = _mix64_int(seed ^ _fnv1a64(name))
    scale = np.float32(std * 1.7320508075688772 / 65536.0)
    out = np.empty(n, dtype=np.float32)
    chunk = 1 << 22
    with np.errstate(over="ignore"):
        for at in range(0, n, chunk):
            k = min(chunk, n - at)
            start = (key + (first + at + 1) * GOLDEN) & 0xFFFFFFFFFFFFFFFF
            ctr = np.arange(k, dtype=np.uint64) * np.uint64(GOLDEN) + np.uint64(start)
            x = _mix64(ctr)
            m = np.uint64(0xFFFF)
            s = ((x & m) + ((x >> np.uint64(16)) & m) + ((x >> np.uint64(32)) & m) + (x >> np.uint64(48))).astype(np.int64)
            out[at:at + k] = (s - 131070).astype(np.float32) * scale
    return out


def f32_to_bf16(a: np.ndarray) -> np.ndarray:
    """Round to nearest even, as txc_f32_to_bf16 (no NaNs here)."""
    u = a.view(np.uint32)
    return ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)


def bf16_to_f32(h: np.ndarray) -> np.ndarray:
    return (h.astype(np.uint32) << np.uint32(16)).view(np.float32)


# ---- the tensors ----------------------------------------------------------------------------------

def tensor_list(c: dict) -> list[tuple[str, tuple[int, ...], bool]]:
    """(HF name, shape, is a norm weight) in txc's loader order (synthetic.c list_tensors)."""
    H, V, I = c["hidden_size"], c["vocab_size"], c["intermediate_size"]
    hd = c.get("head_dim") or H // c["num_attention_heads"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    bias = c.get("attention_bias", False) or c["model_type"] == "qwen2"
    t = [("model.embed_tokens.weight", (V, H), False)]
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        t.append((p + "input_layernorm.weight", (H,), True))
        t += [(p + "self_attn.q_proj.weight", (q, H), False), (p + "self_attn.k_proj.weight", (kv, H), False),
              (p + "self_attn.v_proj.weight", (kv, H), False), (p + "self_attn.o_proj.weight", (H, q), False)]
        if bias:
            t += [(p + "self_attn.q_proj.bias", (q,), False), (p + "self_attn.k_proj.bias", (kv,), False),
                  (p + "self_attn.v_proj.bias", (kv,), False)]
        t.append((p + "post_attention_layernorm.weight", (H,), True))
        t += [(p + "mlp.gate_proj.weight", (I, H), False), (p + "mlp.up_proj.weight", (I, H), False),
              (p + "mlp.down_proj.weight", (H, I), False)]
    t.append(("model.norm.weight", (H,), True))
    if not c["tie_word_embeddings"]:
        t.append(("lm_head.weight", (V, H), False))
    return t


GGUF_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def gguf_name(hf: str) -> str:
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    parts = hf.split(".")  # model.layers.N.rest
    return f"blk.{parts[2]}." + GGUF_NAMES[".".join(parts[3:])]


def llama_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """convert_hf_to_gguf LlamaModel.permute: per head, the two halves' rows interleaved."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_factors(c: dict) -> np.ndarray:
    """convert_hf_to_gguf LlamaModel.generate_extra_tensors for rope_type llama3."""
    rs = c["rope_scaling"]
    base = c.get("rope_theta", 10000.0)
    dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    factor, lo, hi = rs.get("factor", 8.0), rs.get("low_freq_factor", 1.0), rs.get("high_freq_factor", 4.0)
    old = rs.get("original_max_position_embeddings", 8192)
    lo_wl, hi_wl = old / lo, old / hi
    out = []
    for f in freqs:
        wl = 2 * math.pi / f
        if wl < hi_wl:
            out.append(1.0)
        elif wl > lo_wl:
            out.append(factor)
        else:
            smooth = (old / wl - lo) / (hi - lo)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


# ---- the tokenizer ---------------------------------------------------------------------------------

def load_tokenizer(shared: str, family: str, vocab_size: int):
    """tokenizer.json and tokenizer_config.json of `family`, cut to vocab_size ids when larger.
    Returns (tokenizer.json object, tokenizer_config object, tokens by id (None: no token))."""
    folder = os.path.join(shared, family)
    if not os.path.isfile(os.path.join(folder, "tokenizer.json")):
        die(f"no tokenizer.json in {folder} (give the shared data folder with --shared or TXC_SHARED_DIR)")
    with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    with open(os.path.join(folder, "tokenizer_config.json"), encoding="utf-8") as f:
        tc = json.load(f)
    model = tj["model"]
    if model.get("type") != "BPE":
        die(f"{family}: only BPE tokenizers are handled")
    vocab = {t: i for t, i in model["vocab"].items() if i < vocab_size}
    added = [a for a in tj.get("added_tokens", []) if a["id"] < vocab_size]
    if len(vocab) != len(model["vocab"]) or len(added) != len(tj.get("added_tokens", [])):
        merges = []
        for m in model["merges"]:
            a, b = m.split(" ", 1) if isinstance(m, str) else m
            if a in vocab and b in vocab and a + b in vocab:
                merges.append(m)
        model["vocab"], model["merges"], tj["added_tokens"] = vocab, merges, added
        dec = tc.get("added_tokens_decoder")
        if isinstance(dec, dict):
            tc["added_tokens_decoder"] = {k: v for k, v in dec.items() if int(k) < vocab_size}
        # special tokens that were cut: none
        for key in ("bos_token", "eos_token", "unk_token", "pad_token"):
            v = tc.get(key)
            name = v.get("content") if isinstance(v, dict) else v
            if isinstance(name, str) and name not in vocab and all(a["content"] != name for a in added):
                tc[key] = None
    tokens: list = [None] * vocab_size
    types = [1] * vocab_size  # gguf TokenType: NORMAL 1, UNUSED 5, CONTROL 3, USER_DEFINED 4
    for t, i in vocab.items():
        tokens[i] = t
    for a in added:
        tokens[a["id"]] = a["content"]
        types[a["id"]] = 3 if a.get("special", False) else 4
    for i in range(vocab_size):
        if tokens[i] is None:
            tokens[i] = f"[PAD{i}]"
            types[i] = 5
    return tj, tc, tokens, types


def merges_as_strings(tj) -> list[str]:
    return [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]


# ---- writing ---------------------------------------------------------------------------------------

def write_model(name: str, out: str, dtype: str = "bf16", seed: int = 0, shared: str = "",
                hf_only: bool = False) -> None:
    """Write out/hf/ and (unless hf_only) out/model.gguf; nothing when out/.done says they are there."""
    if name not in CONFIGS:
        die(f"unknown model '{name}' (known: {', '.join(CONFIGS)})")
    if dtype not in ("bf16", "f32"):
        die(f"--dtype expects bf16 or f32, got '{dtype}'")
    family, pre = TOKENIZERS[name]
    if pre is None:
        hf_only = True
    stamp = json.dumps({"name": name, "dtype": dtype, "seed": seed, "gguf": not hf_only, "version": 1})
    done = os.path.join(out, ".done")
    if os.path.exists(done) and open(done).read() == stamp:
        return
    c = dict(CONFIGS[name])
    c["torch_dtype"] = "bfloat16" if dtype == "bf16" else "float32"
    tj, tc, tokens, types = load_tokenizer(shared, family, c["vocab_size"])

    hf = os.path.join(out, "hf")
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(hf)
    with open(os.path.join(hf, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    tc["add_bos_token"] = False  # the same prompt ids on both sides (llama.cpp adds none either, below)
    with open(os.path.join(hf, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False)
    with open(os.path.join(hf, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tc, f, ensure_ascii=False, indent=2)

    tensors = tensor_list(c)
    is_llama = c["model_type"] == "llama"
    H, nh, nkv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    esize = 2 if dtype == "bf16" else 4

    # safetensors header (offsets known from the shapes)
    st_dtype = "BF16" if dtype == "bf16" else "F32"
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for tname, shape, _ in tensors:
        nbytes = int(np.prod(shape)) * esize
        header[tname] = {"dtype": st_dtype, "shape": list(shape), "data_offsets": [off, off + nbytes]}
        off += nbytes
    hbytes = json.dumps(header, separators=(",", ":")).encode()
    hbytes += b" " * ((64 - (8 + len(hbytes)) % 64) % 64)  # the data 64-byte aligned

    w = None if hf_only else gguf_begin(c, name, out, dtype, pre, tokens, types, tj)
    with open(os.path.join(hf, "model.safetensors"), "wb") as st:
        st.write(struct.pack("<Q", len(hbytes)))
        st.write(hbytes)
        for tname, shape, ones in tensors:
            n = int(np.prod(shape))
            vals = np.ones(n, dtype=np.float32) if ones else synthetic_fill(seed, tname, c["initializer_range"], n)
            raw = f32_to_bf16(vals) if dtype == "bf16" else vals
            raw.tofile(st)
            if w is None:
                continue
            if len(shape) == 1:  # float32 in the GGUF, as convert_hf_to_gguf keeps 1-D tensors
                w.write_tensor_data(bf16_to_f32(raw) if dtype == "bf16" else raw)
                continue
            g = raw.reshape(shape)
            if is_llama and tname.endswith("q_proj.weight"):
                g = llama_permute(g, nh)
            elif is_llama and tname.endswith("k_proj.weight"):
                g = llama_permute(g, nkv)
            w.write_tensor_data(np.ascontiguousarray(g))
    if w is not None:
        for arr in extra_tensors(c).values():
            w.write_tensor_data(arr)
        w.close()
    with open(done, "w") as f:
        f.write(stamp)


def extra_tensors(c: dict) -> dict:
    if isinstance(c.get("rope_scaling"), dict) and c["rope_scaling"].get("rope_type") == "llama3":
        return {"rope_freqs.weight": llama3_rope_factors(c)}
    return {}


def gguf_begin(c: dict, name: str, out: str, dtype: str, pre: str, tokens, types, tj):
    """A GGUFWriter with the metadata and tensor infos written, ready for the tensors' data in
    tensor_list order, then extra_tensors (convert_hf_to_gguf's LlamaModel / Qwen2Model
    set_gguf_parameters and _set_vocab_gpt2)."""
    import gguf  # PyPI's gguf (the writer llama.cpp's converter uses)

    is_llama = c["model_type"] == "llama"
    H, nh, nkv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    hd = c.get("head_dim") or H // nh
    esize = 2 if dtype == "bf16" else 4
    arch = "llama" if is_llama else "qwen2"
    w = gguf.GGUFWriter(os.path.join(out, "model.gguf"), arch)
    w.add_name(f"txc synthetic {name}")
    w.add_block_count(c["num_hidden_layers"])
    w.add_context_length(c["max_position_embeddings"])
    w.add_embedding_length(H)
    w.add_feed_forward_length(c["intermediate_size"])
    w.add_head_count(nh)
    w.add_head_count_kv(nkv)
    w.add_rope_freq_base(float(c["rope_theta"]))
    w.add_layer_norm_rms_eps(c["rms_norm_eps"])
    if "head_dim" in c:
        w.add_key_length(hd)
        w.add_value_length(hd)
    if is_llama:
        w.add_vocab_size(c["vocab_size"])
        w.add_rope_dimension_count(hd)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16 if dtype == "bf16" else gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges_as_strings(tj))
    bos, eos = c.get("bos_token_id"), c.get("eos_token_id")
    if isinstance(bos, int) and bos < c["vocab_size"]:
        w.add_bos_token_id(bos)
    if isinstance(eos, int) and eos < c["vocab_size"]:
        w.add_eos_token_id(eos)
    w.add_add_bos_token(False)

    gtype = gguf.GGMLQuantizationType.BF16 if dtype == "bf16" else gguf.GGMLQuantizationType.F32
    gdt = np.uint16 if dtype == "bf16" else np.float32
    for tname, shape, _ in tensor_list(c):
        n = int(np.prod(shape))
        if len(shape) == 1:
            w.add_tensor_info(gguf_name(tname), shape, np.dtype(np.float32), n * 4)
        else:
            w.add_tensor_info(gguf_name(tname), shape, np.dtype(gdt), n * esize, raw_dtype=gtype)
    for ename, arr in extra_tensors(c).items():
        w.add_tensor_info(ename, arr.shape, arr.dtype, arr.nbytes)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    return w


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("name", help=", ".join(CONFIGS))
    ap.add_argument("out")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shared", default=os.environ.get("TXC_SHARED_DIR", ""))
    ap.add_argument("--hf-only", action="store_true", help="no GGUF (no gguf package needed)")
    a = ap.parse_args(argv)
    if not a.shared:
        print("make_model: give --shared DIR (the folder holding tokenizers/) or set TXC_SHARED_DIR", file=sys.stderr)
        return 2
    write_model(a.name, a.out, a.dtype, a.seed, a.shared, a.hf_only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
