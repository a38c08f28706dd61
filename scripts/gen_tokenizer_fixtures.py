#!/usr/bin/env python3
"""Reference ids for txc's tokenizer, from the `tokenizers` package (PyPI).

For every tokenizer.json in ../shared/tokenizers (and a few variants of them
that switch on the components no shipped file uses: NFKC, Lowercase, Digits,
Punctuation, Split behaviours, single_word added tokens...), encodes every
string of tests/fixtures/tokenizer_corpus.json with and without special
tokens and decodes the ids with and without skip_special_tokens; writes
tests/fixtures/tokenizer_ids/<name>.json, which tests/test_tokenizer_families.c
compares txc against (CI does not install Python packages).

Installs nothing itself. Run it from a virtual environment outside the repo:

    python3 -m venv /tmp/tokvenv && /tmp/tokvenv/bin/pip install tokenizers
    /tmp/tokvenv/bin/python scripts/gen_tokenizer_fixtures.py            # write fixtures
    /tmp/tokvenv/bin/python scripts/gen_tokenizer_fixtures.py --bench    # encode speed, 1 MB

--bench times Tokenizer.encode on the same ~1 MB text test_tokenizer_families
times (the corpus, one string per line, repeated), single-threaded
(RAYON_NUM_THREADS=1), best of 3 after a first (cold-cache) call.
"""
import argparse
import copy
import json
import os
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "tests", "fixtures", "tokenizer_corpus.json")
OUT = os.path.join(ROOT, "tests", "fixtures", "tokenizer_ids")

# name -> folder under ../shared/tokenizers
FAMILIES = {
    "gpt2": "gpt2",
    "llama3": "llama3",
    "qwen3": "qwen3",
    "deepseek_v3": "deepseek_v3",
    "gptoss": "gptoss",
    "gemma3": "gemma3",
    "tinyllama": "tinyllama-1.1b-chat-v1.0",
    "mistral": "mistral-7b-v0.1",
    "phi3v": "phi-3-vision-128k-instruct",
}


def bl(add_prefix_space=False, use_regex=True):
    return {"type": "ByteLevel", "add_prefix_space": add_prefix_space, "trim_offsets": True,
            "use_regex": use_regex}


def split(pattern, behavior, invert=False, regex=True):
    return {"type": "Split", "pattern": {"Regex" if regex else "String": pattern},
            "behavior": behavior, "invert": invert}


def seq(kind, items):
    key = {"normalizer": "normalizers", "pre_tokenizer": "pretokenizers", "decoder": "decoders"}[kind]
    return {"type": "Sequence", key: items}


def added(content, special=False, lstrip=False, rstrip=False, normalized=True, single_word=False):
    return {"content": content, "single_word": single_word, "lstrip": lstrip, "rstrip": rstrip,
            "normalized": normalized, "special": special}


# Variants: a base tokenizer with some top-level fields replaced ("override");
# "added_tokens+" appends to added_tokens. The C test builds the same file.
VARIANTS = {
    "v_nfkc_lower_punct": ("gpt2", {
        "normalizer": seq("normalizer", [{"type": "NFKC"}, {"type": "Lowercase"}]),
        "pre_tokenizer": seq("pre_tokenizer", [
            {"type": "WhitespaceSplit"}, {"type": "Punctuation"},
            {"type": "Digits", "individual_digits": True}, bl(False, False)]),
    }),
    "v_nfd_strip_ws": ("gpt2", {
        "normalizer": seq("normalizer", [
            {"type": "NFD"}, {"type": "StripAccents"},
            {"type": "Strip", "strip_left": True, "strip_right": True},
            {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "}]),
        "pre_tokenizer": seq("pre_tokenizer", [
            {"type": "Whitespace"}, {"type": "Digits", "individual_digits": False}, bl(True, False)]),
    }),
    "v_split_behaviors": ("gpt2", {
        "normalizer": {"type": "NFKD"},
        "pre_tokenizer": seq("pre_tokenizer", [
            split("[0-9]+", "Contiguous", invert=True),
            split("e", "MergedWithNext", regex=False),
            split("[,.!?]", "MergedWithPrevious"),
            split("\u2581\u2581", "Removed", regex=False),
            bl(True, True)]),
    }),
    "v_punct_contig_delim": ("gpt2", {
        "normalizer": seq("normalizer", [{"type": "NFC"}, {"type": "Lowercase"},
                                         {"type": "Replace", "pattern": {"String": "\t"}, "content": "    "}]),
        "pre_tokenizer": seq("pre_tokenizer", [
            {"type": "Punctuation", "behavior": "Contiguous"},
            {"type": "CharDelimiterSplit", "delimiter": "o"},
            split("\\s+", "Isolated", invert=True),
            split("(?i:ab|x)\\h?", "MergedWithPrevious"),
            bl(False, True)]),
        "decoder": seq("decoder", [bl(), {"type": "Replace", "pattern": {"Regex": "o+"}, "content": "0"}]),
    }),
    "v_added_tokens": ("gpt2", {
        "normalizer": {"type": "Lowercase"},
        "added_tokens+": [
            added("hello world"),
            added("<mask>", special=True, lstrip=True, rstrip=True, normalized=False, single_word=True),
            added("ing", single_word=True),
            added("ZZ", lstrip=True, normalized=False),
            added("[SEP]", special=True, rstrip=True, normalized=False),
            added("\u0130x"),
            added("caf\u00e9", single_word=True),
        ],
    }),
    "v_metaspace_split": ("tinyllama-1.1b-chat-v1.0", {
        "normalizer": {"type": "NFKC"},
        "pre_tokenizer": seq("pre_tokenizer", [
            {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
            {"type": "Digits", "individual_digits": True}]),
        "decoder": seq("decoder", [{"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always",
                                    "split": True}, {"type": "ByteFallback"}, {"type": "Fuse"}]),
    }),
    "v_metaspace_first": ("mistral-7b-v0.1", {
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                          "split": True},
    }),
    "v_llama3_bos": ("llama3", {
        "post_processor": {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
            {"type": "TemplateProcessing",
             "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                        {"Sequence": {"id": "A", "type_id": 0}}],
             "pair": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                      {"Sequence": {"id": "A", "type_id": 0}},
                      {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}},
                      {"Sequence": {"id": "B", "type_id": 1}}],
             "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [128000],
                                                      "tokens": ["<|begin_of_text|>"]}}}]},
    }),
    "v_prefix_space": ("gpt2", {
        "pre_tokenizer": bl(True, True),
    }),
}


def resolve_override(j, override):
    """The override with ids for "added_tokens+" (tokenizer.json gives each
    added token one: the vocab's, or the next free one)."""
    override = copy.deepcopy(override)
    if "added_tokens+" in override:
        toks = j.get("added_tokens") or []
        vocab = j["model"]["vocab"]
        nxt = max([len(vocab) - 1] + [t["id"] for t in toks]) + 1
        for t in override["added_tokens+"]:
            if t["content"] in vocab:
                t["id"] = vocab[t["content"]]
            else:
                t["id"], nxt = nxt, nxt + 1
    return override


def apply_override(j, override):
    j = copy.deepcopy(j)
    for k, v in override.items():
        if k == "added_tokens+":
            j["added_tokens"] = list(j.get("added_tokens") or []) + v
        else:
            j[k] = v
    return j


def load(shared, folder, override=None):
    """(Tokenizer, the override as applied: added tokens with their ids)."""
    from tokenizers import Tokenizer
    path = os.path.join(shared, "tokenizers", folder, "tokenizer.json")
    if override is None:
        tok = Tokenizer.from_file(path)
    else:
        with open(path, encoding="utf-8") as f:
            j = json.load(f)
        override = resolve_override(j, override)
        tok = Tokenizer.from_str(json.dumps(apply_override(j, override)))
    # transformers turns these off unless a call asks for them; so does txc
    tok.no_truncation()
    tok.no_padding()
    return tok, override


def bench_text(corpus):
    unit = "".join(s + "\n" for s in corpus)
    parts, n = [], 0
    while n < 1000000:
        parts.append(unit)
        n += len(unit.encode("utf-8"))
    return "".join(parts)


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def ids_digest(ids):
    """FNV-1a 64 over the ids as little-endian uint32 (hex string)."""
    import struct
    return "%016x" % fnv1a64(struct.pack("<%dI" % len(ids), *ids))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--bench", action="store_true", help="time encode on ~1 MB instead")
    args = ap.parse_args()
    try:
        import tokenizers
    except ImportError:
        sys.exit("needs the `tokenizers` package: python3 -m venv /tmp/tokvenv && "
                 "/tmp/tokvenv/bin/pip install tokenizers")
    with open(CORPUS, encoding="utf-8") as f:
        corpus = json.load(f)

    if args.bench:
        text = bench_text(corpus)
        print("tokenizers %s, %d bytes, single-threaded" % (tokenizers.__version__, len(text.encode())))
        for name, folder in FAMILIES.items():
            tok, _ = load(args.shared, folder)
            t0 = time.perf_counter()
            n = len(tok.encode(text).ids)
            cold = time.perf_counter() - t0
            best = float("inf")
            for _ in range(3):
                t0 = time.perf_counter()
                tok.encode(text)
                best = min(best, time.perf_counter() - t0)
            print("%-12s encode %7.1f ms cold, %7.1f ms warm (%.2f MB/s), %d tokens"
                  % (name, cold * 1e3, best * 1e3, len(text.encode()) / 1e6 / best, n))
        return

    os.makedirs(OUT, exist_ok=True)
    jobs = [(name, folder, None) for name, folder in FAMILIES.items()]
    jobs += [(name, base, ov) for name, (base, ov) in VARIANTS.items()]
    total = 0
    for name, folder, override in jobs:
        tok, override = load(args.shared, folder, override)
        cases = []
        for i, text in enumerate(corpus):
            ids = tok.encode(text, add_special_tokens=False).ids
            ids_sp = tok.encode(text, add_special_tokens=True).ids
            case = {"i": i, "ids": ids}
            if ids_sp != ids:
                case["ids_special"] = ids_sp
            case["decode_skip"] = tok.decode(ids_sp, skip_special_tokens=True)
            keep = tok.decode(ids_sp, skip_special_tokens=False)
            if keep != case["decode_skip"]:
                case["decode_keep"] = keep
            cases.append(case)
        doc = {"tokenizer": folder, "override": override, "tokenizers_version": tokenizers.__version__,
               "corpus": "tests/fixtures/tokenizer_corpus.json", "cases": cases}
        path = os.path.join(OUT, name + ".json")
        with open(path, "w", encoding="utf-8") as f:
            f.write("{\n")
            head = {k: v for k, v in doc.items() if k != "cases"}
            for k, v in head.items():
                f.write(" %s: %s,\n" % (json.dumps(k), json.dumps(v, ensure_ascii=False)))
            f.write(' "cases": [\n')
            f.write(",\n".join("  " + json.dumps(c, ensure_ascii=False, separators=(",", ":"))
                               for c in cases))
            f.write("\n ]\n}\n")
        size = os.path.getsize(path)
        total += size
        print("%-22s %3d cases, %7d bytes" % (name, len(cases), size))
    # the ~1 MB bench text: token count and digests of the ids and of decode
    text = bench_text(corpus)
    big = {"text": "the corpus, one string per line, repeated up to >= 1000000 bytes",
           "digest": "FNV-1a 64 of the ids as little-endian uint32 / of the decoded UTF-8",
           "tokenizers_version": tokenizers.__version__, "families": {}}
    for name, folder in FAMILIES.items():
        tok, _ = load(args.shared, folder)
        ids = tok.encode(text, add_special_tokens=True).ids
        dec = tok.decode(ids, skip_special_tokens=False)
        big["families"][name] = {"tokenizer": folder, "n_ids": len(ids), "ids_fnv": ids_digest(ids),
                                 "decode_fnv": "%016x" % fnv1a64(dec.encode("utf-8"))}
    path = os.path.join(OUT, "bench_1mb.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(big, f, indent=1)
        f.write("\n")
    print("bench_1mb: %s" % ", ".join("%s %d" % (k, v["n_ids"]) for k, v in big["families"].items()))
    print("total %d bytes" % total)


if __name__ == "__main__":
    main()
