"""txc next to llama.cpp: the runs, interleaved, and their medians (called by compare_llamacpp.sh).

Per model, `--pairs` rounds; each round runs, in separate processes, with the bandwidth probe
(`txc bench --membw`) before every run and once at the end:

    txc bench --model HF --dtype bf16 --threads T --prompt-tokens P --new-tokens N
              --modes jit-static --json --no-compile-cache
    llama-bench -m model.gguf -t T -p P -n N -r 1 -o json -lm mmap      (and/or -lm none)

in the order txc, llama.cpp... in even rounds and llama.cpp..., txc in odd ones (so a drift of
the machine's speed within a round does not favour either side). Each round gives one ratio
txc / llama.cpp for decode tokens/s and for prefill tokens/s; the summary is the median of those
ratios (and their range), next to each side's median, min and max, the probe's median, and each
side's fraction of the bandwidth while decoding (bytes read per token x tokens/s / bandwidth,
with the bandwidth the mean of the probes just before and after that run).

What is compared:
- txc's decode tokens/s without the compilation of the decode plan (`decode_tok_s_excl_compile`),
  its prefill tokens/s = P / (prefill ms - the prefill plan's compile ms): llama-bench reports
  steady-state numbers after a warm-up run, so txc's one-time compilation is left out of both
  (it is in the JSON: `decode_tok_s`, `prefill_ms` as measured).
- llama-bench's pp<P> (prefill of P tokens from an empty cache) and tg<N> (N tokens decoded one
  by one, from an empty cache; txc decodes after the P prompt tokens: the attention over 128 more
  keys is a small part of a token's work at these sizes).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_model  # noqa: E402

DEFAULT_MODELS = "qwen2.5-0.5b,smollm2-135m,llama-3.2-1b"
TARGET_DECODE, TARGET_PREFILL = 1.1, 1.0


def run(cmd: list[str], timeout: float = 3600, env: dict | None = None) -> str:
    t0 = time.time()
    if env is not None:
        env = {k: v for k, v in {**os.environ, **env}.items() if v != ""}
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if p.returncode != 0:
        sys.stderr.write(p.stderr[-3000:])
        raise SystemExit(f"compare_llamacpp: failed (exit {p.returncode}, {time.time() - t0:.0f} s): {' '.join(cmd)}")
    return p.stdout


def probe(a) -> float:
    out = run([a.txc, "bench", "--membw", "--json", "--threads", str(a.threads)])
    return float(json.loads(out)["machine"]["membw_gbps"])


def kv_bytes_per_token(c: dict, keys: float, elem: int) -> float:
    hd = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    return 2.0 * c["num_hidden_layers"] * c["num_key_value_heads"] * hd * elem * keys


def run_txc(a, hf: str, cfg: dict) -> dict:
    dtype = [] if hf.endswith(".gguf") else ["--dtype", a.dtype]  # a GGUF runs as stored
    out = run([a.txc, "bench", "--model", hf, *dtype, "--threads", str(a.threads),
               "--prompt-tokens", str(a.prompt_tokens), "--new-tokens", str(a.new_tokens),
               "--modes", "jit-static", "--json", "--no-compile-cache"])
    j = json.loads(out)
    r = j["rows"][0]
    n_dec = r["new_tokens"] - 1
    dec_steady = r["decode_tok_s_excl_compile"] or r["decode_tok_s"]
    dec_compile_ms = max(0.0, r["decode_ms"] - n_dec * 1e3 / dec_steady) if dec_steady > 0 else 0.0
    pre_compile_ms = max(0.0, r["compile_ms"] - dec_compile_ms)
    pre_ms = max(1e-6, r["prefill_ms"] - pre_compile_ms)
    return {
        "decode_tok_s": dec_steady,
        "prefill_tok_s": a.prompt_tokens * 1e3 / pre_ms,
        "decode_tok_s_incl_compile": r["decode_tok_s"],
        "prefill_ms_incl_compile": r["prefill_ms"],
        "compile_ms": r["compile_ms"],
        "bytes_per_token": r["bytes_per_token"],
        "weights_in_memory": j.get("weights_in_memory"),
        "weights": r.get("weights"),  # txc's load: copy (anonymous memory, the default) or mmap
        "cache_resident": r.get("cache_resident"),  # the weights fit in the last-level cache
    }


LOAD_MODES = {"llama.cpp mmap": "mmap", "llama.cpp no-mmap": "none"}  # llama-bench -lm (--load-mode)


def run_llama(a, gguf: str, cfg: dict, side: str) -> dict:
    out = run([os.path.join(a.llama_bin, "llama-bench"), "-m", gguf, "-t", str(a.threads),
               "-p", str(a.prompt_tokens), "-n", str(a.new_tokens), "-r", "1", "-o", "json",
               "-lm", LOAD_MODES[side]], env={**a.llama_env, **{k: "" for k in a.llama_unset}})
    res = {"load_mode": LOAD_MODES[side], "env": a.llama_env}
    for e in json.loads(out):
        if e.get("n_prompt") == a.prompt_tokens and e.get("n_gen", 0) == 0:
            res["prefill_tok_s"] = e["avg_ts"]
        elif e.get("n_gen") == a.new_tokens and e.get("n_prompt", 0) == 0:
            res["decode_tok_s"] = e["avg_ts"]
        for k in ("build_commit", "cpu_info", "type_k", "flash_attn", "n_threads", "model_type", "model_size"):
            if k in e:
                res.setdefault(k, e[k])
    if "prefill_tok_s" not in res or "decode_tok_s" not in res:
        raise SystemExit(f"compare_llamacpp: llama-bench printed no pp{a.prompt_tokens}/tg{a.new_tokens}: {out[:500]}")
    return res


def stats(v: list[float]) -> dict:
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)} if v else {}


def fmt(s: dict, unit: str = "", digits: int = 1) -> str:
    if not s:
        return "-"
    return f"{s['median']:.{digits}f}{unit} [{s['min']:.{digits}f}..{s['max']:.{digits}f}]"


def bench_model(a, name: str, folder: str) -> dict:
    cfg = make_model.CONFIGS[name]
    hf, gguf = os.path.join(folder, "hf"), os.path.join(folder, "model.gguf")
    if a.quant:  # --quant T: both sides on the one GGUF that `txc quantize` writes
        gguf = os.path.join(folder, f"model.{a.quant}.gguf")
        if not os.path.exists(gguf):
            run([a.txc, "quantize", hf, gguf, "--type", a.quant, "--threads", str(a.threads)])
        hf = gguf
    sides = ["txc"] + a.llama_sides
    runs: list[dict] = []
    probes = [probe(a)]
    for i in range(a.pairs):
        order = sides if i % 2 == 0 else sides[1:] + sides[:1]
        rnd = {}
        for side in order:
            t0 = time.time()
            load0 = os.getloadavg()[0]
            if side == "txc":
                r = run_txc(a, hf, cfg)
            else:
                r = run_llama(a, gguf, cfg, side)
            r["side"], r["pair"], r["wall_s"] = side, i, round(time.time() - t0, 2)
            r["loadavg"] = round((load0 + os.getloadavg()[0]) / 2, 2)  # 1-minute load average around the run
            r["membw_before"] = probes[-1]
            probes.append(probe(a))
            r["membw_after"] = probes[-1]
            rnd[side] = r
            runs.append(r)
            print(f"  {name} pair {i + 1}/{a.pairs} {side:18s} decode {r['decode_tok_s']:8.2f} tok/s  "
                  f"prefill {r['prefill_tok_s']:8.2f} tok/s  membw {r['membw_before']:.1f}/{r['membw_after']:.1f} GB/s"
                  f"  load {r['loadavg']:.1f}",
                  file=sys.stderr, flush=True)
    # bytes per decode token: txc's own count (weights + its float32 KV over P + N/2 keys); llama.cpp
    # reads the same weights and a float16 KV over N/2 keys (llama-bench's tg starts empty).
    for r in runs:
        if r["side"] == "txc":
            r["bytes_per_token_est"] = r["bytes_per_token"]
        else:
            txc_b = next(x["bytes_per_token"] for x in runs if x["side"] == "txc")
            w = txc_b - kv_bytes_per_token(cfg, a.prompt_tokens + a.new_tokens / 2, 4)
            r["bytes_per_token_est"] = w + kv_bytes_per_token(cfg, a.new_tokens / 2, 2)
        bw = (r["membw_before"] + r["membw_after"]) / 2
        r["decode_bw_fraction"] = r["bytes_per_token_est"] * r["decode_tok_s"] / 1e9 / bw
    summary = {"model": name, "sides": {}, "ratios": {}, "membw_gbps": stats(probes),
               "loadavg": stats([r["loadavg"] for r in runs]), "cores": os.cpu_count()}
    for side in sides:
        mine = [r for r in runs if r["side"] == side]
        summary["sides"][side] = {k: stats([r[k] for r in mine]) for k in ("decode_tok_s", "prefill_tok_s", "decode_bw_fraction")}
    for side in sides[1:]:
        d, p = [], []
        for i in range(a.pairs):
            t = next(r for r in runs if r["pair"] == i and r["side"] == "txc")
            l = next(r for r in runs if r["pair"] == i and r["side"] == side)
            d.append(t["decode_tok_s"] / l["decode_tok_s"])
            p.append(t["prefill_tok_s"] / l["prefill_tok_s"])
        summary["ratios"][side] = {"decode": stats(d), "prefill": stats(p)}
    return {"summary": summary, "runs": runs, "probes": probes}


def print_summary(a, res: dict) -> None:
    s = res["summary"]
    print(f"\n{s['model']} ({make_model_checkpoint(s['model'])}, {a.dtype}, {a.threads} threads, "
          f"prompt {a.prompt_tokens}, {a.new_tokens} new tokens, {a.pairs} pairs; median [min..max])")
    print(f"  {'':20s} {'decode tok/s':>26s} {'prefill tok/s':>28s} {'decode bw fraction':>26s}")
    for side, v in s["sides"].items():
        print(f"  {side:20s} {fmt(v['decode_tok_s']):>26s} {fmt(v['prefill_tok_s']):>28s} "
              f"{fmt(v['decode_bw_fraction'], digits=3):>26s}")
    for side, v in s["ratios"].items():
        dm, pm = v["decode"]["median"], v["prefill"]["median"]
        print(f"  txc / {side:14s} decode {fmt(v['decode'], 'x', 2):>22s} "
              f"({'meets' if dm >= TARGET_DECODE else 'below'} {TARGET_DECODE:.1f}x)   "
              f"prefill {fmt(v['prefill'], 'x', 2):>22s} ({'meets' if pm >= TARGET_PREFILL else 'below'} {TARGET_PREFILL:.1f}x)")
    print(f"  membw (txc bench --membw, {len(res['probes'])} probes): {fmt(s['membw_gbps'], ' GB/s', 2)}")
    env = " ".join(f"{k}={v}" for k, v in a.llama_env.items()) or "none"
    print(f"  llama-bench environment: {env}{''.join(' ' + k + ' unset' for k in a.llama_unset)}")
    la = s["loadavg"]
    print(f"  load average (1 min) around the runs: {fmt(la)} on {s['cores']} cores")
    if la and s["cores"] and la["max"] > s["cores"] - a.threads + 0.5:
        print(f"  note: other processes wanted these cores during the runs: the numbers then depend on how"
              f" each side's threads wait for each other (bench/README.md)")


def make_model_checkpoint(name: str) -> str:
    return {"smollm2-135m": "HuggingFaceTB/SmolLM2-135M", "qwen2.5-0.5b": "Qwen/Qwen2.5-0.5B",
            "llama-3.2-1b": "meta-llama/Llama-3.2-1B"}.get(name, "tiny config")


# ---- the correctness check ------------------------------------------------------------------------

CHECK_PROMPT = "Once upon a time there was a"


def check(a) -> bool:
    """Greedy tokens of txc and llama.cpp on tiny float32 models (llama arch with its q/k permute
    and llama3 rope factors, qwen2 arch with biases): the same continuation text expected."""
    ok = True
    for name in ("tiny-llama3", "tiny-qwen2"):
        folder = os.path.join(a.work, "models", f"{name}-f32")
        make_model.write_model(name, folder, "f32", 0, a.shared)
        hf, gguf = os.path.join(folder, "hf"), os.path.join(folder, "model.gguf")
        n = 16
        j = json.loads(run([a.txc, "bench", "--model", hf, "--prompt", CHECK_PROMPT, "--new-tokens", str(n),
                            "--modes", "jit-static", "--json", "--no-compile-cache", "--threads", str(a.threads)]))
        ids = [str(i) for i in j["reference_ids"]]
        txc_text = run([a.txc, "tokenize", "--model", hf, "--decode", "--keep-special", *ids]).rstrip("\n")
        out = run([os.path.join(a.llama_bin, "llama-completion"), "-m", gguf, "-p", CHECK_PROMPT, "-n", str(n),
                   "--temp", "0", "-t", str(a.threads), "--no-display-prompt", "-no-cnv", "--ignore-eos",
                   "--no-warmup", "-s", "0"])
        llama_text = out.rstrip("\n")
        same = bool(txc_text) and llama_text == txc_text
        print(f"check {name}: {'same' if same else 'DIFFERENT'} continuation\n  txc:       {txc_text!r}\n"
              f"  llama.cpp: {llama_text!r}")
        ok = ok and same
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--shared", required=True)
    ap.add_argument("--txc", required=True)
    ap.add_argument("--llama-bin", required=True)
    ap.add_argument("--models", default=DEFAULT_MODELS)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--quant", default="", help="q8_0, q4_0, q4_1, q4_k...: compare on the GGUF txc quantize writes")
    ap.add_argument("--mmap", default="both", choices=["both", "on", "off"])
    ap.add_argument("--json")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--llama-env", action="append", default=[], metavar="VAR=VALUE")
    ap.add_argument("--setup-only", action="store_true")
    a = ap.parse_args(argv)
    a.llama_sides = {"both": ["llama.cpp mmap", "llama.cpp no-mmap"], "on": ["llama.cpp mmap"],
                     "off": ["llama.cpp no-mmap"]}[a.mmap]
    # GNU OpenMP's threads (llama.cpp's default build) spin while waiting; on a machine whose
    # cores other processes also want, that costs llama.cpp up to 20x (bench/README.md), so they
    # sleep by default here. --llama-env OMP_WAIT_POLICY= gives back libgomp's own default.
    env = {"OMP_WAIT_POLICY": "passive"}
    for kv in a.llama_env:
        if "=" not in kv or not kv.split("=", 1)[0]:
            print(f"compare_llamacpp: --llama-env expects VAR=VALUE, got '{kv}'", file=sys.stderr)
            return 2
        env[kv.split("=", 1)[0]] = kv.split("=", 1)[1]
    a.llama_env = {k: v for k, v in env.items() if v != ""}
    a.llama_unset = [k for k, v in env.items() if v == ""]
    models = [m.strip() for m in a.models.split(",") if m.strip()]
    for m in models:
        known = [k for k, v in make_model.TOKENIZERS.items() if v[1] is not None]
        if m not in known:
            print(f"compare_llamacpp: unknown model '{m}' (known: {', '.join(known)})", file=sys.stderr)
            return 2
    if a.pairs < 1 or a.threads < 1 or a.prompt_tokens < 1 or a.new_tokens < 2:
        print("compare_llamacpp: --pairs, --threads, --prompt-tokens must be >= 1, --new-tokens >= 2", file=sys.stderr)
        return 2
    folders = {}
    for m in models:
        folders[m] = os.path.join(a.work, "models", f"{m}-{a.dtype}")
        print(f"compare_llamacpp: model {m} ({a.dtype}) in {folders[m]}", file=sys.stderr, flush=True)
        make_model.write_model(m, folders[m], a.dtype, 0, a.shared)
    if a.setup_only:
        return 0
    check_ok = check(a) if a.check else None
    results = []
    t0 = time.time()
    for m in models:
        results.append(bench_model(a, m, folders[m]))
    for r in results:
        print_summary(a, r)
    print(f"\n{len(models)} models x {a.pairs} pairs in {time.time() - t0:.0f} s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"settings": {k: getattr(a, k) for k in ("models", "pairs", "threads", "prompt_tokens",
                                                              "new_tokens", "dtype", "mmap", "llama_env")},
                       "check_ok": check_ok, "results": results}, f, indent=1)
    return 0 if check_ok in (None, True) else 1


if __name__ == "__main__":
    sys.exit(main())
