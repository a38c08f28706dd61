"""txc serve and llama-server under the same streaming load (run by bench/serve_load.sh).

Both servers run at once on 127.0.0.1 (idle while the other is measured) with the same threads,
slots and context per slot. For each client count C, `pairs` alternated runs of each: C threads
each send `requests` streaming /v1/completions one after the other (greedy, max_tokens tokens,
ignore_eos so every request makes them all; each request its own prompt, so no prefix is
shared), and the run's numbers are:
  aggregate tok/s   completion tokens of all requests / the run's wall time
  TTFT              request sent -> first token's chunk (all requests of the run)
  ITL               gaps between a request's consecutive token chunks
Printed: per C the medians over the runs of tok/s and of the runs' p50/p99, and txc/llama
ratios (tok/s: higher is better for txc; TTFT/ITL: lower is).
Standard library only.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

p = argparse.ArgumentParser()
p.add_argument("--txc", required=True)
p.add_argument("--llama-server", default=None, help="absent: txc serve alone (next to txc generate at 1 client)")
p.add_argument("--hf", required=True)
p.add_argument("--gguf", default=None)
p.add_argument("--threads", type=int, default=2)
p.add_argument("--parallel", type=int, default=8)
p.add_argument("--clients", default="1,4,8,16")
p.add_argument("--pairs", type=int, default=3)
p.add_argument("--requests", type=int, default=2)
p.add_argument("--max-tokens", type=int, default=64)
p.add_argument("--prompt-words", type=int, default=32)
p.add_argument("--ctx", type=int, default=512, help="context per slot")
p.add_argument("--json", default=None)
a = p.parse_args()
clients = [int(x) for x in a.clients.split(",")]

WORDS = ("time little girl named Lily loved play outside park sun tree dog ball friend happy "
         "mom said day went saw big red house bird cat jump run water food").split()


def prompt(i):
    return f"Story {i}: " + " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(a.prompt_words))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_ready(port, proc, name, timeout=600):
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        if proc.poll() is not None:
            sys.exit(f"serve_load: {name} exited with {proc.returncode}")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit(f"serve_load: {name} not ready after {timeout} s")


def one(port, i, out):
    body = {"prompt": prompt(i), "max_tokens": a.max_tokens, "temperature": 0, "stream": True,
            "ignore_eos": True, "stream_options": {"include_usage": True}, "cache_prompt": False}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.monotonic()
    c.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"status {r.status}: {r.read()[:200]!r}")
    times, usage = [], None
    while True:
        line = r.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data: "):
            continue
        if line == b"data: [DONE]":
            break
        ev = json.loads(line[6:])
        if ev.get("usage"):
            usage = ev["usage"]["completion_tokens"]
        for ch in ev.get("choices", []):
            if ch.get("text"):
                times.append(time.monotonic())
    c.close()
    n = usage if usage is not None else len(times)
    out.append({"ttft": (times[0] - t0) * 1e3 if times else None,
                "itl": [(y - x) * 1e3 for x, y in zip(times, times[1:])], "tokens": n})


def run(port, n_clients, base):
    results, errors = [], []

    def client(k):
        for j in range(a.requests):
            try:
                one(port, base + k * a.requests + j, results)
            except Exception as e:  # noqa: BLE001
                errors.append(str(e))

    t0 = time.monotonic()
    th = [threading.Thread(target=client, args=(k,)) for k in range(n_clients)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    wall = time.monotonic() - t0
    if errors:
        sys.exit(f"serve_load: errors: {errors[:3]}")
    ttft = sorted(r["ttft"] for r in results if r["ttft"] is not None)
    itl = sorted(x for r in results for x in r["itl"])

    def pct(v, q):
        return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")

    return {"tok_s": sum(r["tokens"] for r in results) / wall, "ttft_p50": pct(ttft, 0.5),
            "ttft_p99": pct(ttft, 0.99), "itl_p50": pct(itl, 0.5), "itl_p99": pct(itl, 0.99), "wall_s": wall}


env = dict(os.environ, TXC_THREADS=str(a.threads))
tmp = tempfile.mkdtemp()
pt, pl = free_port(), free_port()
txc = subprocess.Popen([a.txc, "serve", "--model", a.hf, "--port", str(pt), "--parallel", str(a.parallel),
                        "--max-cache-len", str(a.ctx), "--threads", str(a.threads)],
                       stderr=open(os.path.join(tmp, "txc.err"), "w"), env=env)
# llama.cpp's OpenMP threads wait passively, as bench/compare_llamacpp.sh's llama-bench by default
# (bench/README.md: on a machine shared with other jobs libgomp's spinning decides the numbers);
# OMP_WAIT_POLICY in the caller's environment (set, or set empty: libgomp's default) wins
llama_env = dict(os.environ)
llama_env.setdefault("OMP_WAIT_POLICY", "passive")
if not llama_env["OMP_WAIT_POLICY"]:
    del llama_env["OMP_WAIT_POLICY"]
llama = None if not a.llama_server else subprocess.Popen([a.llama_server, "-m", a.gguf, "--host", "127.0.0.1", "--port", str(pl), "-t", str(a.threads),
                          "-tb", str(a.threads), "-np", str(a.parallel), "-c", str(a.ctx * a.parallel), "-cb",
                          "--no-warmup"],
                         stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "llama.err"), "w"), env=llama_env)


def generate(i):
    """txc generate over the same prompt: new tokens / (prefill + decode) wall time, the ttft"""
    out = subprocess.run([a.txc, "generate", "--model", a.hf, "--prompt", prompt(i), "--max-new-tokens",
                          str(a.max_tokens), "--greedy", "--max-cache-len", str(a.ctx), "--threads", str(a.threads),
                          "--verbose"], capture_output=True, text=True, env=env, check=True).stderr
    pre = float(re.search(r"^prefill: ([0-9.]+) ms", out, re.M).group(1))
    m = re.search(r"^decode: [0-9.]+ tokens/s \(([0-9]+) tokens in ([0-9.]+) ms\)", out, re.M)
    n, dec = int(m.group(1)), float(m.group(2))
    return {"tok_s": (n + 1) / ((pre + dec) / 1e3), "ttft_p50": pre, "ttft_p99": pre,
            "itl_p50": dec / max(n, 1), "itl_p99": float("nan"), "wall_s": (pre + dec) / 1e3}


sides = [("txc", pt)] + ([("llama", pl)] if llama else [])
try:
    wait_ready(pt, txc, "txc serve")
    if llama:
        wait_ready(pl, llama, "llama-server")
    # warm-up: both compile / allocate what a run needs (txc's plans per batch bucket)
    for n in clients:
        for _, port in sides:
            run(port, n, 10 ** 6)
    rows, runs = [], []
    base = 0
    for n in clients:
        per = {name: [] for name, _ in sides}
        if not llama and n == 1:
            per["generate"] = []
        for k in range(a.pairs):
            order = sides if k % 2 == 0 else sides[::-1]
            for name, port in order:
                r = run(port, n, base)  # the same prompts for both sides of a pair
                per[name].append(r)
                runs.append(dict(r, server=name, clients=n, pair=k))
            if "generate" in per:
                r = generate(base)
                per["generate"].append(r)
                runs.append(dict(r, server="generate", clients=1, pair=k))
            base += n * a.requests
        med = {s: {k: statistics.median(r[k] for r in per[s]) for k in per[s][0]} for s in per}
        rows.append((n, med))
finally:
    for proc in (txc, llama):
        if proc is None:
            continue
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()

cpu = ""
try:
    cpu = re.search(r"model name\s*:\s*(.*)", open("/proc/cpuinfo").read()).group(1)
except (OSError, AttributeError):
    pass
if not llama:
    print(f"txc serve alone: {os.path.basename(os.path.dirname(a.hf))}, {a.threads} threads, {a.parallel} slots, "
          f"{a.max_tokens} tokens per request, {a.requests} requests per client, median of {a.pairs} runs; {cpu}")
    print("| clients | txc serve tok/s | TTFT p50 / p99 ms | ITL p50 / p99 ms |")
    print("|---|---|---|---|")
    for n, m in rows:
        t = m["txc"]
        print(f"| {n} | {t['tok_s']:.1f} | {t['ttft_p50']:.0f} / {t['ttft_p99']:.0f} "
              f"| {t['itl_p50']:.1f} / {t['itl_p99']:.1f} |")
        if "generate" in m:
            g = m["generate"]
            print(f"| txc generate (1 sequence) | {g['tok_s']:.1f} | prefill {g['ttft_p50']:.0f} "
                  f"| {g['itl_p50']:.1f} (mean) |")
            print(f"| serve / generate at 1 client | {t['tok_s'] / g['tok_s']:.2f}x | | |")
    if a.json:
        json.dump({"runs": runs}, open(a.json, "w"), indent=1)
    sys.exit(0)
print(f"txc serve vs llama-server: {os.path.basename(os.path.dirname(a.hf))}, {a.threads} threads, {a.parallel} slots, "
      f"{a.max_tokens} tokens per request, {a.requests} requests per client, median of {a.pairs} alternated runs; {cpu}")
hdr = ("clients", "txc tok/s", "llama tok/s", "ratio", "TTFT p50 txc/llama ms", "TTFT p99 txc/llama ms",
       "ITL p50 txc/llama ms", "ITL p99 txc/llama ms")
print("| " + " | ".join(hdr) + " |")
print("|" + "---|" * len(hdr))
summary = []
for n, m in rows:
    t, l = m["txc"], m["llama"]
    print(f"| {n} | {t['tok_s']:.1f} | {l['tok_s']:.1f} | {t['tok_s'] / l['tok_s']:.2f}x "
          f"| {t['ttft_p50']:.0f} / {l['ttft_p50']:.0f} | {t['ttft_p99']:.0f} / {l['ttft_p99']:.0f} "
          f"| {t['itl_p50']:.1f} / {l['itl_p50']:.1f} | {t['itl_p99']:.1f} / {l['itl_p99']:.1f} |")
    summary.append({"clients": n, "txc": t, "llama": l, "tok_s_ratio": t["tok_s"] / l["tok_s"],
                    "ttft_p99_ratio": t["ttft_p99"] / l["ttft_p99"]})
print(f"llama-server environment: OMP_WAIT_POLICY={llama_env.get('OMP_WAIT_POLICY', '(unset)')}")
print(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
      + (" (other processes wanted these cores: the numbers then depend on how each side's threads wait)"
         if os.getloadavg()[0] > a.threads + 0.5 else ""))
if a.json:
    json.dump({"runs": runs, "summary": summary}, open(a.json, "w"), indent=1)
