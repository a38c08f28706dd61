#!/usr/bin/env python3
"""Encoding speed of txc against the `tokenizers` package (bench/tokenizer_speed.sh runs this).

    tokenizer_speed.py corpus OUT [--bytes N] [--seed S]
        write the bench text (UTF-8, about N bytes, the same bytes for the same N and S)
    tokenizer_speed.py run --txc BIN --tokenizers DIR --text FILE [--runs N] [--only a,b]
        for each folder of DIR holding a tokenizer.json: check that txc and the package give
        identical ids for the whole text, then time both, interleaved, and print a table

The text (see bench/README.md): the committed test corpus tests/fixtures/tokenizer_corpus.json
(English prose, whitespace runs, contractions, code, JSON, URLs, numbers, CJK, Korean, emoji,
Arabic, Hindi, ... 172 strings) cut into words and re-assembled by a seeded random generator into
lines of a ~1 MB text. Words are drawn with Zipf-like frequencies, and about one word in four is
new (two corpus words spliced at a character boundary), so the text has tens of thousands of
distinct words as real text does: a word cache (txc's and the crate's) does not hide the BPE
merge loop. Every tenth line is a corpus string as it is (code blocks, whitespace, emoji
sequences). Only random.Random(seed).random() is used, whose sequence Python keeps stable
across versions.

Timing: both sides encode the whole text as one string with add_special_tokens=False, one
warm-up first; txc through `txc tokenize --bench FILE --repeat 1 --json` (encode time only, the
load excluded), the package through Tokenizer.encode in this process, single-threaded
(RAYON_NUM_THREADS=1, TOKENIZERS_PARALLELISM=false, set before the import). Runs alternate
txc / package so that load from other processes hits both alike; the table gives medians of
the wall time, and the ratio of the CPU times too (the process's CPU time during the encode:
what other load on a shared machine does not inflate).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "tests", "fixtures", "tokenizer_corpus.json")


# ---- the text ------------------------------------------------------------------------------


def make_text(n_bytes, seed):
    import random

    with open(CORPUS, encoding="utf-8") as f:
        corpus = json.load(f)
    rng = random.Random(seed)
    rnd = rng.random

    def pick(seq):
        return seq[int(rnd() * len(seq))]

    # word pool in corpus order, distinct; Zipf-like weights by first appearance
    words, seen = [], set()
    for s in corpus:
        for w in s.split():
            if w not in seen:
                seen.add(w)
                words.append(w)
    # inverse CDF of weights 1/(rank+1)
    cum, tot = [], 0.0
    for i in range(len(words)):
        tot += 1.0 / (i + 1)
        cum.append(tot)

    def zipf_word():
        x = rnd() * tot
        lo, hi = 0, len(cum) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if cum[mid] < x:
                lo = mid + 1
            else:
                hi = mid
        return words[lo]

    def new_word():
        a, b = pick(words), pick(words)
        return a[: 1 + int(rnd() * len(a))] + b[int(rnd() * len(b)):]

    seps = [" "] * 40 + ["  ", "\t", ", ", ". ", "\n"]
    lines, size = [], 0
    while size < n_bytes:
        if rnd() < 0.1:
            line = pick(corpus)
        else:
            k = 3 + int(rnd() * 18)
            parts = []
            for i in range(k):
                parts.append(new_word() if rnd() < 0.25 else zipf_word())
                if i + 1 < k:
                    parts.append(pick(seps))
            line = "".join(parts)
        lines.append(line)
        size += len(line.encode("utf-8")) + 1
    return "\n".join(lines) + "\n"


# ---- running -------------------------------------------------------------------------------


def txc_ids(txc, folder, text):
    p = subprocess.run([txc, "tokenize", "--model", folder, "--ids", "--no-special-tokens", "-"],
                       input=text.encode("utf-8"), capture_output=True)
    if p.returncode != 0:
        raise RuntimeError("txc failed on %s: %s" % (folder, p.stderr.decode(errors="replace").strip()))
    return [int(x) for x in p.stdout.split()]


def txc_time(txc, folder, path):
    p = subprocess.run([txc, "tokenize", "--model", folder, "--no-special-tokens", "--bench", path,
                        "--repeat", "1", "--json"], capture_output=True)
    if p.returncode != 0:
        raise RuntimeError("txc --bench failed on %s: %s" % (folder, p.stderr.decode(errors="replace").strip()))
    j = json.loads(p.stdout)
    return j["median_ms"] / 1e3, j["median_cpu_ms"] / 1e3, j["tokens"]


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def cmd_run(args):
    os.environ["RAYON_NUM_THREADS"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    import tokenizers
    from tokenizers import Tokenizer

    with open(args.text, encoding="utf-8", newline="") as f:
        text = f.read()
    nbytes = len(text.encode("utf-8"))
    mb = nbytes / 1e6
    folders = sorted(d for d in os.listdir(args.tokenizers)
                     if os.path.isfile(os.path.join(args.tokenizers, d, "tokenizer.json")))
    if args.only:
        want = args.only.split(",")
        missing = [w for w in want if w not in folders]
        if missing:
            sys.exit("tokenizer_speed: no tokenizer.json for %s under %s" % (", ".join(missing), args.tokenizers))
        folders = want
    print("text: %s, %d bytes; tokenizers %s single-threaded (Tokenizer.encode) vs txc "
          "(txc tokenize --bench); add_special_tokens=False; %d interleaved runs each, medians"
          % (args.text, nbytes, tokenizers.__version__, args.runs))
    hdr = "%-28s %8s %9s %16s %15s %10s  %s" % ("tokenizer", "tokens", "txc MB/s", "tokenizers MB/s",
                                                "txc/tokenizers", "(CPU time)", "ids")
    if args.batch_fast:
        hdr += "; encode_batch_fast([text]): MB/s, txc/that"
    print(hdr)
    print("-" * len(hdr))
    rows, bad = [], 0
    for name in folders:
        folder = os.path.join(args.tokenizers, name)
        tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        tok.no_truncation()
        tok.no_padding()
        ref = tok.encode(text, add_special_tokens=False).ids  # also the package's warm-up
        got = txc_ids(args.txc, folder, text)
        same = got == ref
        if same:
            verdict = "identical"
        else:
            bad += 1
            i = first_difference(got, ref)
            verdict = ("DIFFER: %d vs %d ids, first difference at %d: txc %s, tokenizers %s"
                       % (len(got), len(ref), i, got[i:i + 4], ref[i:i + 4]))
        t_txc, t_py, t_fast, c_txc, c_py = [], [], [], [], []
        for _ in range(args.runs):
            s, c, n = txc_time(args.txc, folder, args.text)
            if n != len(got):
                raise RuntimeError("txc --bench counted %d tokens, --ids %d" % (n, len(got)))
            t_txc.append(s)
            c_txc.append(c)
            c0, t0 = time.process_time(), time.perf_counter()
            tok.encode(text, add_special_tokens=False)
            t_py.append(time.perf_counter() - t0)
            c_py.append(time.process_time() - c0)
            if args.batch_fast:  # the package's fastest path: no offsets
                t0 = time.perf_counter()
                tok.encode_batch_fast([text], add_special_tokens=False)
                t_fast.append(time.perf_counter() - t0)
        m_txc, m_py = statistics.median(t_txc), statistics.median(t_py)
        row = {"tokenizer": name, "tokens": len(ref), "txc_mb_s": mb / m_txc, "tokenizers_mb_s": mb / m_py,
               "ratio": m_py / m_txc, "cpu_ratio": statistics.median(c_py) / statistics.median(c_txc),
               "ids_identical": same, "txc_s": t_txc, "tokenizers_s": t_py, "txc_cpu_s": c_txc,
               "tokenizers_cpu_s": c_py}
        extra = ""
        if args.batch_fast:
            m_fast = statistics.median(t_fast)
            row.update(fast_mb_s=mb / m_fast, fast_ratio=m_fast / m_txc, fast_s=t_fast)
            extra = "; %.2f MB/s, %.2fx" % (row["fast_mb_s"], row["fast_ratio"])
        rows.append(row)
        print("%-28s %8d %9.2f %16.2f %14.2fx %9.2fx  %s%s" % (
            name, len(ref), row["txc_mb_s"], row["tokenizers_mb_s"], row["ratio"], row["cpu_ratio"],
            verdict, extra))
        sys.stdout.flush()
    if rows:
        print("slowest ratio: %.2fx (%s); ids %s" % (
            min(r["ratio"] for r in rows), min(rows, key=lambda r: r["ratio"])["tokenizer"],
            "identical for every tokenizer" if not bad else "DIFFER for %d tokenizer(s)" % bad))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"text": args.text, "bytes": nbytes, "tokenizers_version": tokenizers.__version__,
                       "runs": args.runs, "rows": rows}, f, indent=1)
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("corpus", help="write the bench text")
    c.add_argument("out")
    c.add_argument("--bytes", type=int, default=1000000)
    c.add_argument("--seed", type=int, default=5)
    r = sub.add_parser("run", help="compare txc and the tokenizers package")
    r.add_argument("--txc", required=True)
    r.add_argument("--tokenizers", required=True, help="folder of tokenizer folders")
    r.add_argument("--text", required=True)
    r.add_argument("--runs", type=int, default=5)
    r.add_argument("--only", help="comma-separated tokenizer folder names")
    r.add_argument("--json", help="also write the numbers here")
    r.add_argument("--batch-fast", action="store_true",
                   help="also time encode_batch_fast([text]) (no offsets: the package's fastest path)")
    args = ap.parse_args()
    if args.cmd == "corpus":
        text = make_text(args.bytes, args.seed)
        with open(args.out, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        print("wrote %s: %d bytes, %d lines, %d distinct whitespace-separated words"
              % (args.out, len(text.encode("utf-8")), text.count("\n"), len(set(text.split()))))
        return 0
    if args.runs < 1:
        ap.error("--runs must be >= 1")
    return cmd_run(args)


if __name__ == "__main__":
    sys.exit(main())
