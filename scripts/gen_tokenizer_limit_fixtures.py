#!/usr/bin/env python3
"""Reference ids for tests/test_tokenizer_limits.c, from the `tokenizers` package.

Writes tests/fixtures/tokenizer_limits.json: small tokenizer.json objects
with the texts to encode and the ids the package gives, for
  - a word none of whose characters is in the vocab, with no unk_token and no
    byte fallback (the characters are dropped);
  - an added token listed again with other flags, then as first listed (the
    crate skips a token only when it equals the latest token of its id);
  - many added tokens (the test builds the same tokenizer: TINY plus N tokens
    "<extra_i>", special when i % 3 == 0, normalized when i % 2 == 0).

Installs nothing itself. Run it from a virtual environment outside the repo:

    python3 -m venv /tmp/tokvenv && /tmp/tokvenv/bin/pip install tokenizers
    /tmp/tokvenv/bin/python scripts/gen_tokenizer_limit_fixtures.py
"""
import copy
import json
import os

import tokenizers

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "fixtures", "tokenizer_limits.json")

TINY = {
    "version": "1.0",
    "truncation": None,
    "padding": None,
    "added_tokens": [],
    "normalizer": None,
    "pre_tokenizer": None,
    "post_processor": None,
    "decoder": None,
    "model": {
        "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
        "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
        "vocab": {"a": 0, "b": 1, "ab": 2, " ": 3},
        "merges": ["a b"],
    },
}

N_EXTRA = 100000
EXTRA_TEXT = "ab<extra_0> <extra_99999>b<extra_12345>a <extra_7>"


def added(content, **flags):
    t = {"id": 0, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": False}
    t.update(flags)
    return t


def encode(tok_json, texts):
    tok = tokenizers.Tokenizer.from_str(json.dumps(tok_json))
    return [{"text": s, "ids": tok.encode(s, add_special_tokens=False).ids} for s in texts]


def main():
    cases = []
    ws = copy.deepcopy(TINY)
    ws["pre_tokenizer"] = {"type": "Whitespace"}
    cases.append({"name": "unknown characters, no unk_token", "tokenizer": ws,
                  "cases": encode(ws, ["zz", "zz ab", "ab zz ab", "xaxb q", "zz", "\u00e9\u00e9 zz"])})
    for name, toks in [("added token relisted: latest flags win",
                        [added("<x>"), added("<x>", lstrip=True), added("<x>")]),
                       ("added token relisted once",
                        [added("<x>"), added("<x>", lstrip=True)])]:
        t = copy.deepcopy(TINY)
        t["added_tokens"] = toks
        cases.append({"name": name, "tokenizer": t, "cases": encode(t, ["a  <x>b", "<x>  <x>"])})
    many = copy.deepcopy(TINY)
    many["added_tokens"] = [added(f"<extra_{i}>", special=i % 3 == 0, normalized=i % 2 == 0)
                            for i in range(N_EXTRA)]
    extra = {"n_extra": N_EXTRA, "cases": encode(many, [EXTRA_TEXT])}
    with open(OUT, "w") as f:
        json.dump({"generator": f"tokenizers {tokenizers.__version__}", "tiny": TINY, "sets": cases,
                   "many_added": extra}, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
