#!/usr/bin/env python3
"""Small GGUF files for the tests and the fuzz corpus, written with the standard library only.

The layout is ggml's gguf.cpp (version 3, alignment 32): header, metadata, tensor infos, padding,
data. The model is a tiny llama (hidden 8, 1 layer, 2 heads, 1 kv head, ffn 16) with float32
weights from a fixed linear congruential generator, and a SentencePiece-style vocabulary of 12
tokens ("llama" tokenizer with scores, bos/eos/unk, byte fallback for the rest). Variants are
written beside it, one defect each (what tests/cli_gguf.sh expects txc to refuse with exit 2).

Usage: scripts/gen_gguf_fixtures.py --corpus           rewrite fuzz/corpus/gguf/
       scripts/gen_gguf_fixtures.py --out DIR          write DIR/good.gguf and DIR/bad_*.gguf
"""
import argparse
import os
import struct
import sys

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
GGML_F32 = 0


def s(x):
    b = x.encode()
    return struct.pack("<Q", len(b)) + b


def value(t, v):
    if t == STR:
        return s(v)
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(value(et, i) for i in items)
    fmt = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f", BOOL: "?", U64: "Q", I64: "q",
           F64: "d"}[t]
    return struct.pack("<" + fmt, v)


def gguf(kvs, tensors, version=3, magic=b"GGUF", offsets=None):
    """kvs: [(key, type, value)]; tensors: [(name, ggml_type, ne list, data bytes)]."""
    out = magic + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for k, t, v in kvs:
        out += s(k) + struct.pack("<I", t) + value(t, v)
    off, offs = 0, []
    for name, typ, ne, data in tensors:
        offs.append(off)
        off += (len(data) + 31) // 32 * 32
    if offsets:
        offs = offsets
    for (name, typ, ne, data), o in zip(tensors, offs):
        out += s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        out += struct.pack("<IQ", typ, o)
    out += b"\0" * (-len(out) % 32)
    for name, typ, ne, data in tensors:
        out += data + b"\0" * (-len(data) % 32)
    return out


class Lcg:
    def __init__(self, seed):
        self.x = seed

    def floats(self, n, scale):
        r = []
        for _ in range(n):
            self.x = (self.x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
            r.append(((self.x >> 40) / (1 << 24) - 0.5) * 2 * scale)
        return struct.pack("<%df" % n, *r)


TOKENS = ["<unk>", "<s>", "</s>", "\u2581", "a", "b", "c", "\u2581a", "ab", "\u2581ab", "\u2581b", "bc"]
TYPES = [2, 3, 3] + [1] * 9
H, FF, HEADS, KV, D = 8, 16, 2, 1, 4


def model(arch="llama", tok_model="llama", typ=GGML_F32, version=3):
    g = Lcg(1)
    kvs = [("general.architecture", STR, arch), (arch + ".context_length", U32, 64),
           (arch + ".embedding_length", U32, H), (arch + ".block_count", U32, 1),
           (arch + ".feed_forward_length", U32, FF), (arch + ".attention.head_count", U32, HEADS),
           (arch + ".attention.head_count_kv", U32, KV), (arch + ".attention.layer_norm_rms_epsilon", F32, 1e-5),
           (arch + ".rope.freq_base", F32, 10000.0), (arch + ".rope.dimension_count", U32, D),
           ("tokenizer.ggml.model", STR, tok_model), ("tokenizer.ggml.tokens", ARR, (STR, TOKENS)),
           ("tokenizer.ggml.scores", ARR, (F32, [float(-i) for i in range(len(TOKENS))])),
           ("tokenizer.ggml.token_type", ARR, (I32, TYPES)), ("tokenizer.ggml.bos_token_id", U32, 1),
           ("tokenizer.ggml.eos_token_id", U32, 2), ("tokenizer.ggml.unknown_token_id", U32, 0),
           ("tokenizer.chat_template", STR, "{% for m in messages %}{{ m['content'] }}{% endfor %}")]
    V = len(TOKENS)
    t = [("token_embd.weight", typ, [H, V], g.floats(H * V, 0.5)),
         ("blk.0.attn_norm.weight", GGML_F32, [H], g.floats(H, 1.0)),
         ("blk.0.attn_q.weight", typ, [H, HEADS * D], g.floats(H * HEADS * D, 0.3)),
         ("blk.0.attn_k.weight", typ, [H, KV * D], g.floats(H * KV * D, 0.3)),
         ("blk.0.attn_v.weight", typ, [H, KV * D], g.floats(H * KV * D, 0.3)),
         ("blk.0.attn_output.weight", typ, [HEADS * D, H], g.floats(H * HEADS * D, 0.3)),
         ("blk.0.ffn_norm.weight", GGML_F32, [H], g.floats(H, 1.0)),
         ("blk.0.ffn_gate.weight", typ, [H, FF], g.floats(H * FF, 0.3)),
         ("blk.0.ffn_up.weight", typ, [H, FF], g.floats(H * FF, 0.3)),
         ("blk.0.ffn_down.weight", typ, [FF, H], g.floats(H * FF, 0.3)),
         ("output_norm.weight", GGML_F32, [H], g.floats(H, 1.0))]
    return kvs, t


def variants():
    kvs, t = model()
    good = gguf(kvs, t)
    yield "good", good
    yield "bad_truncated", good[: len(good) // 2]
    yield "bad_magic", b"GGUX" + good[4:]
    yield "bad_version", good[:4] + struct.pack("<I", 1) + good[8:]
    yield "bad_count", good[:16] + struct.pack("<Q", 1 << 40) + good[24:]
    yield "bad_strlen", good[:24] + struct.pack("<Q", 1 << 50) + good[32:]
    yield "bad_overlap", gguf(kvs, t, offsets=[0] * len(t))
    yield "bad_type", gguf(kvs, [(n, 4 if n == "blk.0.ffn_up.weight" else ty, ne, d) for n, ty, ne, d in t])
    kvs2, t2 = model(arch="mamba")
    yield "bad_arch", gguf(kvs2, t2)
    kvs3, t3 = model(tok_model="bert")
    yield "bad_tokenizer", gguf(kvs3, t3)
    # a float the config would have written as null (the default in its place)
    yield "bad_nan_theta", gguf([(k, t, float("nan") if k == "llama.rope.freq_base" else v) for k, t, v in kvs], t)
    # an eos id past the tokens (bos and unk were refused already)
    yield "bad_eos", gguf([(k, ty, len(TOKENS) if k == "tokenizer.ggml.eos_token_id" else v) for k, ty, v in kvs], t)
    # gemma: no attention.key_length (head_dim is n_embd / n_head, as llama.cpp), then a norm
    # stored + 1 in a type the - 1 cannot be done in
    kvs4, t4 = model(arch="gemma")
    yield "good_gemma", gguf(kvs4, t4)
    yield "bad_gemma_norm", gguf(kvs4, [(n, 26 if n == "blk.0.attn_norm.weight" else ty, ne, d) for n, ty, ne, d in t4])


def corpus():
    kvs, t = model()
    yield "tiny_llama", gguf(kvs, t)
    yield "tiny_llama_v2", gguf(kvs, t, version=2)
    nested = [("general.architecture", STR, "gpt2"), ("a.u8", U8, 1), ("a.i8", I8, -1), ("a.u16", U16, 2),
              ("a.i16", I16, -2), ("a.i64", I64, -3), ("a.u64", U64, 3), ("a.f64", F64, 0.5), ("a.bool", BOOL, True),
              ("general.alignment", U32, 64),
              ("a.nested", ARR, (ARR, [(STR, ["x", "yz"]), (F32, [1.0, 2.0]), (ARR, [(U8, [1, 2, 3])])]))]
    yield "nested_values", gguf(nested, [])
    yield "vocab_gpt2", gguf([("general.architecture", STR, "qwen2"), ("tokenizer.ggml.model", STR, "gpt2"),
                              ("tokenizer.ggml.pre", STR, "qwen2"),
                              ("tokenizer.ggml.tokens", ARR, (STR, ["a", "b", "ab", "\u0120", "\u0120a"])),
                              ("tokenizer.ggml.merges", ARR, (STR, ["a b", "\u0120 a"]))], [])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--corpus", action="store_true")
    a = ap.parse_args()
    if a.corpus:
        d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz", "corpus", "gguf")
        os.makedirs(d, exist_ok=True)
        for name, data in corpus():
            open(os.path.join(d, name), "wb").write(data)
    elif a.out:
        os.makedirs(a.out, exist_ok=True)
        for name, data in variants():
            open(os.path.join(a.out, name + ".gguf"), "wb").write(data)
    else:
        ap.error("give --out DIR or --corpus")


if __name__ == "__main__":
    sys.exit(main())
