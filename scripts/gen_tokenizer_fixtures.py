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
    /tmp/tokvenv/bin/python scripts/gen_tokenizer_fixtures.py --unicode-tables

--unicode-tables writes src/tokenizer/tokenizer_unidata.c: the crate's own Unicode
data where it differs from what txc's libraries know. The crate mixes
versions: its regexes (Oniguruma) and Rust's char methods follow Unicode 16,
its normalizers (unicode-normalization-alignments) Unicode 9.0, its
Punctuation (unicode_categories) an older table still. So the tables are
read off the crate itself, one code point at a time (a few minutes): the
Whitespace/single_word word characters, char::is_numeric, Punctuation,
char::to_lowercase, the characters added to each \p{..} class since the
installed PCRE2's Unicode version (found through ctypes), and the code points
assigned in Unicode 9.0 (perl's Unicode::UCD) outside which the normalizers
leave characters alone.

--bench times Tokenizer.encode on the same ~1 MB text test_tokenizer_families
times (the corpus, one string per line, repeated), single-threaded
(RAYON_NUM_THREADS=1), best of 3 after a first (cold-cache) call, and
encode_batch_fast (no offsets) on it.
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


# ---- Unicode tables ----------------------------------------------------------------

# Planes 0-3 and 14 hold every assigned character but the private use planes.
UNI_CPS = [c for c in list(range(0, 0x40000)) + list(range(0xE0000, 0xE1000))
           if not 0xD800 <= c < 0xE000]
# General categories whose \p{..} classes get the crate's newer characters;
# \w is onig's word class, which txc writes as [\p{L}\p{M}\p{N}\p{Pc}...].
UNI_PROPS = "L Lu Ll Lt Lm Lo M Mn Mc Me N Nd Nl No P Pc Pd Ps Pe Pi Pf Po S Sm Sc Sk So Z Zs Zl Zp Cc Cf".split()
ONIG_W_BASE = "[\\p{L}\\p{M}\\p{Nd}\\p{Pc}]"


def ranges_of(cps):
    out = []
    for c in sorted(cps):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return out


def pcre2_set(pattern, cps):
    """Code points the installed PCRE2 matches with ^pattern$ (UTF + UCP)."""
    import ctypes
    import ctypes.util
    lib = ctypes.CDLL(ctypes.util.find_library("pcre2-8") or "libpcre2-8.so.0")
    lib.pcre2_compile_8.restype = ctypes.c_void_p
    lib.pcre2_compile_8.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint32,
                                    ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_size_t),
                                    ctypes.c_void_p]
    lib.pcre2_match_data_create_8.restype = ctypes.c_void_p
    lib.pcre2_match_data_create_8.argtypes = [ctypes.c_uint32, ctypes.c_void_p]
    lib.pcre2_match_8.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t,
                                  ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p]
    err, off = ctypes.c_int(), ctypes.c_size_t()
    pat = ("^" + pattern + "$").encode()
    code = lib.pcre2_compile_8(pat, len(pat), 0x00080000 | 0x00020000, ctypes.byref(err),
                               ctypes.byref(off), None)
    assert code, pattern
    md = lib.pcre2_match_data_create_8(1, None)
    out = set()
    for c in cps:
        b = chr(c).encode("utf-8", "surrogatepass")
        if lib.pcre2_match_8(code, b, len(b), 0, 0, md, None) >= 0:
            out.add(c)
    return out


def crate_set(pretok, cps, test):
    return set(c for c in cps if test(pretok.pre_tokenize_str("a" + chr(c) + "a")))


def unicode_tables(path):
    import subprocess
    import tokenizers
    from tokenizers import Regex, normalizers, pre_tokenizers as P
    t0 = time.time()
    word = crate_set(P.Whitespace(), UNI_CPS, lambda r: len(r) == 1)
    numeric = crate_set(P.Digits(individual_digits=True), UNI_CPS, lambda r: len(r) == 3)
    punct = crate_set(P.Punctuation(), UNI_CPS, lambda r: len(r) == 3)
    low = normalizers.Lowercase()
    lower = []
    for c in UNI_CPS:
        r = low.normalize_str(chr(c))
        if r != chr(c):
            lower.append((c, [ord(x) for x in r]))
    assert all(len(v) <= 2 for _, v in lower)
    print("classes read off the crate in %.0f s" % (time.time() - t0))
    props = []
    for name in UNI_PROPS + ["w"]:
        pat = "\\w" if name == "w" else "\\p{%s}" % name
        split = P.Split(Regex("^" + pat + "$"), "removed")
        crate = set(c for c in UNI_CPS if not split.pre_tokenize_str(chr(c)))
        mine = pcre2_set(ONIG_W_BASE if name == "w" else pat, UNI_CPS)
        add, remove = crate - mine, mine - crate
        props.append((name, ranges_of(add)))
        print("%-5s +%d -%d" % (pat, len(add), len(remove)))
    perl = subprocess.run(["perl", "-MUnicode::UCD=prop_invlist", "-e",
                           'print join(",", prop_invlist("In=9.0"))'],
                          capture_output=True, text=True, check=True).stdout
    inv = [int(x) for x in perl.split(",")]
    in9 = [[inv[i], (inv[i + 1] if i + 1 < len(inv) else 0x110000) - 1] for i in range(0, len(inv), 2)]

    def table(name, rs, what):
        body = ",\n".join("    {0x%X, 0x%X}" % (a, b) for a, b in rs)
        return ("/* %s */\nconst tk_urange %s[] = {\n%s,\n};\nconst size_t %s_n = %d;\n\n"
                % (what, name, body, name, len(rs)))

    with open(path, "w", encoding="utf-8") as f:
        f.write("/*\n * Generated by scripts/gen_tokenizer_fixtures.py --unicode-tables from the\n"
                " * tokenizers package %s; do not edit. The crate's Unicode data where txc's\n"
                " * libraries differ (see tokenizer_impl.h).\n */\n"
                '#include "tokenizer/tokenizer_impl.h"\n\n' % tokenizers.__version__)
        f.write(table("tk_ud_word", ranges_of(word),
                      "Word characters of the Rust regex crate's \\w (Whitespace, single_word)"))
        f.write(table("tk_ud_numeric", ranges_of(numeric), "char::is_numeric (Digits)"))
        f.write(table("tk_ud_punct", ranges_of(punct), "The Punctuation pre-tokenizer's is_punc"))
        f.write(table("tk_ud_in9", in9, "Code points assigned in Unicode 9.0: the normalizers' world"))
        f.write("/* char::to_lowercase where it changes the character (second code point or 0) */\n"
                "const tk_ulower tk_ud_lower[] = {\n%s,\n};\nconst size_t tk_ud_lower_n = %d;\n\n"
                % (",\n".join("    {0x%X, {0x%X, 0x%X}}" % (c, v[0], v[1] if len(v) > 1 else 0)
                              for c, v in lower), len(lower)))
        f.write("/* Characters of each class that onig (Unicode 16) has and PCRE2 lacks */\n"
                "const tk_uprop tk_ud_props[] = {\n")
        for name, rs in props:
            frag = "".join(("\\\\x{%X}" % a) if a == b else ("\\\\x{%X}-\\\\x{%X}" % (a, b)) for a, b in rs)
            f.write('    {"%s", "%s"},\n' % (name, frag))
        f.write("};\nconst size_t tk_ud_props_n = %d;\n" % len(props))
    print("wrote %s (%.0f s)" % (path, time.time() - t0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--bench", action="store_true", help="time encode on ~1 MB instead")
    ap.add_argument("--unicode-tables", action="store_true",
                    help="write src/tokenizer/tokenizer_unidata.c instead")
    args = ap.parse_args()
    try:
        import tokenizers
    except ImportError:
        sys.exit("needs the `tokenizers` package: python3 -m venv /tmp/tokvenv && "
                 "/tmp/tokvenv/bin/pip install tokenizers")
    if args.unicode_tables:
        unicode_tables(os.path.join(ROOT, "src", "tokenizer", "tokenizer_unidata.c"))
        return
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
            fast = float("inf")  # without offsets, the package's fastest path
            for _ in range(3):
                t0 = time.perf_counter()
                tok.encode_batch_fast([text])
                fast = min(fast, time.perf_counter() - t0)
            mb = len(text.encode()) / 1e6
            print("%-12s encode %7.1f ms cold, %7.1f ms warm (%.2f MB/s); encode_batch_fast %7.1f ms "
                  "(%.2f MB/s); %d tokens" % (name, cold * 1e3, best * 1e3, mb / best, fast * 1e3,
                                              mb / fast, n))
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
