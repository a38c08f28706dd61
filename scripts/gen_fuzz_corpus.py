#!/usr/bin/env python3
"""Writes the seed corpora of the libFuzzer targets: fuzz/corpus/<target>/.

Small made-up inputs (a few KB each) and pieces of the tests' fixtures
(tests/fixtures/): never the real tokenizers or models of the test data,
which fuzz_tokenizer_encode reads at run time. Standard library only.
Usage: scripts/gen_fuzz_corpus.py  (from anywhere; rewrites the folders)
"""
import json
import os
import shutil
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures")
OUT = os.path.join(ROOT, "fuzz", "corpus")
SEP = b"\n=====\n"  # FZ_SEP in fuzz/fuzzutil.h

SIZES = {"F32": 4, "F16": 2, "BF16": 2, "I32": 4, "I64": 8, "BOOL": 1, "F64": 8, "U8": 1}


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def safetensors(tensors, metadata=None, pad=True):
    """tensors: [(name, dtype, shape)]; data bytes are a counting pattern."""
    header, data = {}, b""
    for name, dtype, shape in tensors:
        n = SIZES[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + n]}
        data += bytes((len(data) + i) % 251 for i in range(n))
    if metadata is not None:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def fixture_names(folder):
    """(name, dtype, ndim) of a fixture model's tensors: real checkpoint names."""
    with open(os.path.join(FIX, "arch", folder, "model.safetensors"), "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        h = json.loads(f.read(n))
    return [(k, v["dtype"], len(v["shape"])) for k, v in sorted(h.items()) if k != "__metadata__"]


def gen_safetensors():
    put("safetensors", "f32_2x3", safetensors([("w", "F32", [2, 3])], {"format": "pt"}))
    put("safetensors", "dtypes", safetensors([("a", "F16", [3]), ("b", "BF16", [2, 2]), ("c", "I32", [1]),
                                              ("d", "I64", []), ("e", "BOOL", [4]), ("f", "F32", [0, 5])]))
    put("safetensors", "unpadded", safetensors([("x", "F16", [3]), ("y", "F32", [2])], pad=False))
    put("safetensors", "unsupported", safetensors([("u", "U8", [4]), ("v", "F64", [1])]))
    for folder in ("llama_llama3", "gpt2"):
        # the fixture's names and dtypes, every dim 1 (a few bytes per tensor)
        t = [(k, dt, [1] * nd) for k, dt, nd in fixture_names(folder)]
        put("safetensors", "names_" + folder, safetensors(t[:24], {"format": "pt"}))


def gen_index():
    a = safetensors([("model.embed_tokens.weight", "F32", [4, 2]), ("model.norm.weight", "F32", [2])])
    b = safetensors([("lm_head.weight", "BF16", [4, 2])], {"format": "pt"})
    wm = {"model.embed_tokens.weight": "model-00001-of-00003.safetensors",
          "model.norm.weight": "model-00001-of-00003.safetensors",
          "lm_head.weight": "model-00002-of-00003.safetensors"}
    idx = json.dumps({"metadata": {"total_size": 56}, "weight_map": wm}, indent=2).encode()
    put("safetensors_index", "two_shards", idx + SEP + a + SEP + b)
    idx1 = json.dumps({"weight_map": {"w": "model-00001-of-00003.safetensors"}}).encode()
    put("safetensors_index", "one_shard", idx1 + SEP + safetensors([("w", "F16", [2])]))
    c = safetensors([("z", "I64", [1])])
    wm3 = {"w": "model-00001-of-00003.safetensors", "v": "model-00002-of-00003.safetensors",
           "z": "model-00003-of-00003.safetensors"}
    put("safetensors_index", "three_shards", json.dumps({"weight_map": wm3}).encode() + SEP +
        safetensors([("w", "F32", [1])]) + SEP + safetensors([("v", "F32", [2])]) + SEP + c)


def gen_configs():
    for folder in sorted(os.listdir(os.path.join(FIX, "arch"))):
        for name, target in (("config.json", "config"), ("generation_config.json", "generation_config")):
            p = os.path.join(FIX, "arch", folder, name)
            if os.path.exists(p):
                with open(p, "rb") as f:
                    put(target, folder, f.read())
    put("generation_config", "sampling", json.dumps({
        "bos_token_id": 1, "eos_token_id": [2, 32000], "pad_token_id": None, "do_sample": True,
        "temperature": 0.6, "top_p": 0.9, "top_k": 0, "min_p": 0.05, "repetition_penalty": 1.1,
        "max_length": 4096, "max_new_tokens": 256}))


def bpe_vocab(chars):
    return {c: i for i, c in enumerate(chars)}


def gen_tokenizer_load():
    bl = [chr(c) for c in range(33, 127)] + ["Ġ", "Ċ", "ĉ"]
    v = bpe_vocab(bl)
    merges = []
    for a, b in (("h", "e"), ("l", "l"), ("he", "ll"), ("Ġ", "w"), ("o", "r"), ("Ġw", "or")):
        if a + b not in v:
            v[a + b] = len(v)
        merges.append(a + " " + b)
    byte_level = {
        "version": "1.0",
        "added_tokens": [
            {"id": len(v), "content": "<|endoftext|>", "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True},
            {"id": len(v) + 1, "content": "<tool>", "single_word": True, "lstrip": True, "rstrip": True,
             "normalized": True, "special": False}],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re)|\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+|\\s+"},
             "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                  "vocab": v, "merges": merges}}
    put("tokenizer_load", "byte_level.json", json.dumps(byte_level, ensure_ascii=False, indent=1))

    sp = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] + ["▁", "a", "b", "c", "t", "h", "e"]
    v = bpe_vocab(sp)
    merges = []
    for a, b in (("▁", "t"), ("h", "e"), ("▁t", "he"), ("a", "b")):
        if a + b not in v:
            v[a + b] = len(v)
        merges.append([a, b])
    spm = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, c in enumerate(["<unk>", "<s>", "</s>"])],
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
                                                           {"type": "Replace", "pattern": {"String": " "},
                                                            "content": "▁"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": v, "merges": merges}}
    put("tokenizer_load", "sentencepiece.json", json.dumps(spm, ensure_ascii=False, indent=1))

    meta = dict(spm)
    meta["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "NFKC"}, {"type": "Lowercase"}, {"type": "Strip", "strip_left": True, "strip_right": True},
        {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "}, {"type": "StripAccents"}]}
    meta["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": True},
        {"type": "Digits", "individual_digits": True}, {"type": "Punctuation", "behavior": "Isolated"},
        {"type": "WhitespaceSplit"}, {"type": "CharDelimiterSplit", "delimiter": "x"}]}
    meta["decoder"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": True}
    put("tokenizer_load", "metaspace.json", json.dumps(meta, ensure_ascii=False))
    put("tokenizer_load", "minimal.json", '{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]}}')


TEXTS = [
    "Once upon a time, there was a little girl named Lily.",
    "  two leading spaces, trailing  ",
    "new\nlines\n\n and\r\nCRLF\ttabs\t",
    "digits 0123456789 3.14159 -42 1,000,000",
    "punctuation: !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
    "emoji 😀🦙🚀 👨‍👩‍👧‍👦 ✅ 日本語 Ελληνικά русский ½ ẞ",
    "I'm sure you'll see what we've done, isn't it? 'tis",
    "<s>hello</s> <|endoftext|> <|im_start|>user<|im_end|>",
]


def gen_tokenizer_encode():
    # byte 0: which tokenizer (fuzz_tokenizer_encode.c's order), byte 1: flags
    for fam in range(9):
        for i, t in enumerate(TEXTS[fam % 3::3]):
            put("tokenizer_encode", "t%d_%d" % (fam, i), bytes([fam, i & 1]) + t.encode())
        ids = struct.pack("<8I", 1, 15043, 3186, 29889, 2, 13, 100, 200)
        put("tokenizer_encode", "ids%d" % fam, bytes([fam, 2 | (fam & 1)]) + ids)


def gen_chat_template():
    with open(os.path.join(FIX, "chat_templates.json"), encoding="utf-8") as f:
        fx = json.load(f)
    for case in fx["jinja"]:
        put("chat_template", "jinja_" + case["name"], case["template"])
    for name in sorted(os.listdir(os.path.join(FIX, "chat_templates_extra"))):
        with open(os.path.join(FIX, "chat_templates_extra", name), "rb") as f:
            src = f.read()
        if len(src) <= 8192:
            put("chat_template", name, src + SEP + "a user's {{ text }} {% if %}".encode())


def gen_plan():
    # fuzz_plan's mutator swaps a stale header for the plan this build
    # writes, so these only pick the case.
    put("plan", "case0", b"\x00TXCPLAN\n")
    put("plan", "case1", b"\x01TXCPLAN\n")


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    gen_safetensors()
    gen_index()
    gen_configs()
    gen_tokenizer_load()
    gen_tokenizer_encode()
    gen_chat_template()
    gen_plan()


if __name__ == "__main__":
    main()
