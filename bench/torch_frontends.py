"""The torchax article's table from PyTorch: txc vs torchax + JAX (CPU) vs plain PyTorch.

Each framework runs transformers' own model class (LlamaForCausalLM, Qwen2ForCausalLM...) in the
article's three modes, greedy, from the same prompt ids:

  dynamic   eager forward, DynamicCache
  static    eager forward, StaticCache (transformers 5.x: layers hold keys, values,
            cumulative_length)
  jit       the decode step compiled: decode_one_token(weights, cur_token, cache_position,
            cache) through torch.func.functional_call, the StaticCache a registered pytree;
            txc: txc.interop.jax_jit; torchax: torchax.interop.jax_jit (the cache registered
            with jax.tree_util too); torch: torch.compile of the same function (inductor, CPU)

    python bench/torch_frontends.py [--models stories260k,smollm2-135m,qwen2.5-0.5b]
        [--dtypes f32,bf16] [--frameworks txc,torchax,torch] [--modes dynamic,static,jit]
        [--tokens N] [--rounds R] [--budget-s S] [--threads T] [--max-cache-len L]
        [--skip FW:MODE,...] [--json FILE]

--frameworks may also name `native`: `build/txc bench` (or $TXC_BIN) on the same model, mode
(eager-dynamic, eager-static, jit-static), dtype, token count and cache length: txc's own C
model code, no Python, for scale (the frontend's jitted step against it is the "adds a call,
not work" target). Its prompt is txc bench's (8 random ids), so its tokens are not compared.

Every (framework, model, dtype, mode) cell is its own process (txc and torchax cannot share
one: each claims torch's privateuse1 backend), and within each round the frameworks of a cell
run one after the other in a rotating order, so load on a shared machine hits them alike; the
table gives each cell's median ms per decode step over the rounds (the first jitted call, which
compiles, is not timed; nor the prefill). A cell stops after --budget-s seconds of decoding
(at least 2 steps): eager torchax needs seconds per step. The models: stories260K from
$TXC_SHARED_DIR/models, the others synthetic (random weights with the real checkpoints'
configs, bench/make_model.py --hf-only, float32, written once to the work folder
$TXC_BENCH_DIR, else bench/.work); bf16 loads them with dtype=torch.bfloat16.

Needs a Python with torch 2.12.x (torchax 0.0.13's import breaks on newer), transformers 5.x,
torchax + jax[cpu], and the txc package (pip install ./python). Prints one line per cell as it
goes, then the table; the exit status is 0 when every cell ran (a cell that fails is reported
with its error and makes it 1).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CPU = []  # the child's CPU seconds (all its threads) per timed step
PROMPT = [1, 403, 407, 261, 378, 300, 310, 291]  # 8 ids, as txc bench's synthetic prompt


# ---- the child: one framework, one model, one dtype, one mode ---------------------------------

def _greedy(model, ids, n, cache, budget_s):
    import torch
    kw = {} if cache is None else {"cache": cache}
    out = model(ids, use_cache=True, **kw)
    cache = out.past_key_values if cache is None else cache
    tok = out.logits[:, -1].argmax(-1, keepdim=True)
    toks, times = [tok], []
    for _ in range(n - 1):
        t0, c0 = time.perf_counter(), time.process_time()
        out = model(tok, cache=cache, use_cache=True)
        tok = out.logits[:, -1].argmax(-1, keepdim=True)
        toks.append(tok)
        times.append(time.perf_counter() - t0)
        CPU.append(time.process_time() - c0)
        if sum(times) > budget_s and len(times) >= 2:
            break
    return [int(t.cpu().reshape(-1)[0]) for t in toks], times


def _decode_fn(model):
    import torch

    def decode_one_token(weights, cur_token, cache_position, cache):
        logits, cache = torch.func.functional_call(
            model, weights, (cur_token,),
            dict(cache_position=cache_position, cache=cache, return_dict=False, use_cache=True))
        return torch.argmax(logits[:, -1], dim=-1)[:, None], cache
    return decode_one_token


def _greedy_jit(model, ids, n, cache, jitted, device, budget_s, sync):
    import torch
    weights = dict(model.named_parameters())
    weights.update(model.named_buffers())
    out = model(ids, cache=cache, use_cache=True)
    tok = out.logits[:, -1].argmax(-1, keepdim=True)
    toks, times, pos = [tok], [], ids.shape[1]
    compile_s = None
    for i in range(n - 1):
        t0, c0 = time.perf_counter(), time.process_time()
        tok, cache = jitted(weights, tok, torch.tensor([pos + i], device=device), cache)
        sync(tok)
        dt = time.perf_counter() - t0
        toks.append(tok)
        if i == 0:
            compile_s = dt  # the first call compiles
            continue
        times.append(dt)
        CPU.append(time.process_time() - c0)
        if sum(times) > budget_s and len(times) >= 2:
            break
    return [int(t.cpu().reshape(-1)[0]) for t in toks], times, compile_s


def _register_jax_static_cache():
    """transformers 5.x StaticCache as a jax pytree (torchax's jax_jit maps jax.tree_util over
    the arguments), the same flattening as txc's torch registration."""
    import jax
    from transformers import cache_utils

    class Aux:
        """The static part, equal for every cache of one layout (jax.jit's cache key compares
        it: a cache object in it would retrace every call); one cache kept as the template."""

        def __init__(self, cache, init):
            self.cache, self.init = cache, init
            self.key = (init, tuple(getattr(l, "max_cache_len", None) for l in cache.layers))

        def __eq__(self, other):
            return isinstance(other, Aux) and self.key == other.key

        def __hash__(self):
            return hash(self.key)

    def flatten(cache):
        init = tuple(bool(getattr(l, "is_initialized", False)) for l in cache.layers)
        children = []
        for l, ok in zip(cache.layers, init):
            if ok:
                children += [l.keys, l.values, l.cumulative_length]
        return children, Aux(cache, init)

    def unflatten(aux, children):
        src, init = aux.cache, aux.init
        new = object.__new__(type(src))
        new.__dict__.update(src.__dict__)
        new.layers, it = [], iter(children)
        for l, ok in zip(src.layers, init):
            nl = object.__new__(type(l))
            nl.__dict__.update(l.__dict__)
            if ok:
                nl.keys, nl.values, nl.cumulative_length = next(it), next(it), next(it)
            new.layers.append(nl)
        return new

    jax.tree_util.register_pytree_node(cache_utils.StaticCache, flatten, unflatten)


def child(a):
    import torch
    torch.set_num_threads(a.threads)
    from transformers import AutoModelForCausalLM, StaticCache
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[a.dtype]
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=dtype).eval()
    ids = torch.tensor([PROMPT])
    n, L = a.tokens, a.max_cache_len
    res = {"framework": a.framework, "mode": a.mode}
    t_load = time.perf_counter()
    with torch.no_grad():
        if a.framework == "torch":
            if a.mode == "jit":
                cache = StaticCache(config=model.config, max_cache_len=L)
                fn = torch.compile(_decode_fn(model), fullgraph=True)
                toks, times, comp = _greedy_jit(model, ids, n, cache, fn, "cpu", a.budget_s, lambda t: None)
                res["compile_s"] = comp
            else:
                cache = StaticCache(config=model.config, max_cache_len=L) if a.mode == "static" else None
                toks, times = _greedy(model, ids, n, cache, a.budget_s)
        elif a.framework == "txc":
            import txc
            env = txc.default_env()
            with env:
                model.to("txc")
                x = ids.to("txc")
                if a.mode == "jit":
                    txc.register_static_cache_pytree()
                    cache = StaticCache(config=model.config, max_cache_len=L)
                    fn = txc.interop.jax_jit(_decode_fn(model))
                    toks, times, comp = _greedy_jit(model, x, n, cache, fn, "txc", a.budget_s, lambda t: None)
                    res["compile_s"] = comp
                    res["jit"] = {k: fn.stats[k] for k in ("misses", "hits", "nodes_traced", "nodes_compiled", "linear_groups")}
                else:
                    cache = StaticCache(config=model.config, max_cache_len=L) if a.mode == "static" else None
                    toks, times = _greedy(model, x, n, cache, a.budget_s)
        elif a.framework == "torchax":
            import torchax
            env = torchax.default_env()
            with env:
                model.to("jax")
                x = ids.to("jax")
                if a.mode == "jit":
                    _register_jax_static_cache()
                    from torch.utils import _pytree as pytree  # noqa: F401
                    cache = StaticCache(config=model.config, max_cache_len=L)
                    fn = torchax.interop.jax_jit(_decode_fn(model))

                    def sync(t):
                        t._elem.block_until_ready()
                    toks, times, comp = _greedy_jit(model, x, n, cache, fn, "jax", a.budget_s, sync)
                    res["compile_s"] = comp
                else:
                    cache = StaticCache(config=model.config, max_cache_len=L) if a.mode == "static" else None
                    toks, times = _greedy(model, x, n, cache, a.budget_s)
        else:
            raise SystemExit(f"unknown framework {a.framework}")
    res["wall_s"] = time.perf_counter() - t_load
    res["tokens"] = toks
    res["steps"] = len(times)
    res["ms_per_step"] = 1e3 * statistics.median(times) if times else None
    res["cpu_ms_per_step"] = 1e3 * statistics.median(CPU) if CPU else None
    print(json.dumps(res))


# ---- the parent: models, rounds, the table ----------------------------------------------------

def model_dir(name, work):
    if name == "stories260k":
        shared = os.environ.get("TXC_SHARED_DIR", os.path.join(ROOT, "..", "shared"))
        return os.path.join(shared, "models", "stories260K")
    out = os.path.join(work, f"{name}-f32")
    sys.path.insert(0, HERE)
    import make_model
    make_model.write_model(name, out, dtype="f32", shared=os.environ.get(
        "TXC_SHARED_DIR", os.path.join(ROOT, "..", "shared")), hf_only=True)
    return os.path.join(out, "hf")


NATIVE_MODES = {"dynamic": "eager-dynamic", "static": "eager-static", "jit": "jit-static"}


def run_native(a, model, mdir, dtype, mode):
    """txc's own C model code (`txc bench`), the same decode loop without Python: the scale."""
    txc = os.environ.get("TXC_BIN", os.path.join(ROOT, "build", "txc"))
    src = ["--model", mdir] if model == "stories260k" else ["--synthetic", model]
    cmd = [txc, "bench", *src, "--dtype", dtype, "--threads", str(a.threads), "--modes", NATIVE_MODES[mode],
           "--new-tokens", str(a.tokens), "--max-cache-len", str(a.max_cache_len), "--no-compile-cache", "--json"]
    # (no CPU time per step: a difference of two runs' CPU times was dominated by their
    # loads' variance, even negative)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.cell_timeout)
    try:
        row = json.loads(p.stdout)["rows"][0]
        tok_s = row["decode_tok_s_excl_compile"] if mode == "jit" else row["decode_tok_s"]
        return {"framework": "native", "mode": mode, "ms_per_step": 1e3 / tok_s, "steps": row["new_tokens"] - 1}
    except (ValueError, KeyError, IndexError, ZeroDivisionError):
        err = (p.stderr.strip().splitlines() or ["exit status %d" % p.returncode])[-1]
        return {"framework": "native", "mode": mode, "error": err[:200]}


def run_cell(a, fw, mdir, dtype, mode, model=None):
    if fw == "native":
        return run_native(a, model, mdir, dtype, mode)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--framework", fw, "--model", mdir,
           "--dtype", dtype, "--mode", mode, "--tokens", str(a.tokens), "--budget-s", str(a.budget_s),
           "--threads", str(a.threads), "--max-cache-len", str(a.max_cache_len)]
    env = dict(os.environ, TXC_THREADS=str(a.threads), OMP_NUM_THREADS=str(a.threads),
               XLA_FLAGS=os.environ.get("XLA_FLAGS", ""), JAX_PLATFORMS="cpu",
               TOKENIZERS_PARALLELISM="false")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=a.cell_timeout)
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    err = (p.stderr.strip().splitlines() or ["exit status %d" % p.returncode])[-1]
    return {"framework": fw, "mode": mode, "error": err[:200]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--framework")
    ap.add_argument("--model")
    ap.add_argument("--mode")
    ap.add_argument("--dtype", default="f32")
    ap.add_argument("--models", default="stories260k,smollm2-135m,qwen2.5-0.5b")
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("--frameworks", default="txc,torchax,torch")
    ap.add_argument("--modes", default="dynamic,static,jit")
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=20.0)
    ap.add_argument("--cell-timeout", type=float, default=900.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-cache-len", type=int, default=128)
    ap.add_argument("--skip", default="", help="cells left out, as framework:mode,... (torchax:dynamic: "
                    "eager torchax takes seconds per step)")
    ap.add_argument("--json")
    a = ap.parse_args()
    if a.child:
        return child(a)
    work = os.environ.get("TXC_BENCH_DIR", os.path.join(HERE, ".work"))
    fws = a.frameworks.split(",")
    skip = set(x for x in a.skip.split(",") if x)
    cells, results = [], {}
    for m in a.models.split(","):
        mdir = model_dir(m, work)
        for d in a.dtypes.split(","):
            for mode in a.modes.split(","):
                cells.append((m, mdir, d, mode))
    for r in range(a.rounds):
        for ci, (m, mdir, d, mode) in enumerate(cells):
            k = (r + ci) % len(fws)
            for fw in fws[k:] + fws[:k]:
                if f"{fw}:{mode}" in skip:
                    continue
                res = run_cell(a, fw, mdir, d, mode, m)
                results.setdefault((m, d, mode, fw), []).append(res)
                ms = res.get("ms_per_step")
                print(f"round {r + 1} {m} {d} {mode:7s} {fw:8s} "
                      + (f"{ms:10.2f} ms/step ({res['steps']} steps), CPU {res.get('cpu_ms_per_step') or 0:.2f} ms/step"
                         if ms is not None else
                         f"FAILED: {res.get('error')}"), flush=True)
    ok = True
    print()
    hdr = f"| {'model':13s} | {'dtype':5s} | {'mode':7s} |" + "".join(f" {fw + ' ms':>11s} |" for fw in fws)
    if "txc" in fws:
        hdr += "".join(f" {fw + '/txc':>12s} |" for fw in fws if fw != "txc")
    print(hdr + " tokens")
    print("|" + "|".join("-" * (len(c) + 0) for c in hdr.split("|")[1:-1]) + "|")
    table = []
    for m, _, d, mode in cells:
        med, same = {}, []
        for fw in fws:
            rs = results.get((m, d, mode, fw), [])
            vals = [x["ms_per_step"] for x in rs if x.get("ms_per_step") is not None]
            if not vals and f"{fw}:{mode}" not in skip:
                ok = False
            med[fw] = statistics.median(vals) if vals else None
        toks = {fw: next((x["tokens"] for x in results.get((m, d, mode, fw), []) if "tokens" in x), None)
                for fw in fws}
        ref = toks.get("torch")
        for fw in fws:
            if fw != "torch" and ref is not None and toks[fw] is not None:
                k = min(len(ref), len(toks[fw]))
                same.append(f"{fw} {'=' if toks[fw][:k] == ref[:k] else '!='} torch")
        line = f"| {m:13s} | {d:5s} | {mode:7s} |" + "".join(
            f" {med[fw]:11.2f} |" if med[fw] is not None else f" {'-':>11s} |" for fw in fws)
        if "txc" in fws:
            for fw in fws:
                if fw == "txc":
                    continue
                if med[fw] is not None and med["txc"]:
                    line += f" {med[fw] / med['txc']:11.2f}x |"
                else:
                    line += f" {'-':>12s} |"
        print(line + " " + ", ".join(same))
        table.append({"model": m, "dtype": d, "mode": mode, "ms_per_step": med,
                      "runs": {fw: results.get((m, d, mode, fw), []) for fw in fws}})
    print()
    print("CPU time per decode step (ms, all threads of the Python process; median):")
    for m, _, d, mode in cells:
        vals = {}
        for fw in fws:
            v = [x["cpu_ms_per_step"] for x in results.get((m, d, mode, fw), []) if x.get("cpu_ms_per_step")]
            vals[fw] = f"{statistics.median(v):.2f}" if v else "-"
        print(f"  {m} {d} {mode}: " + ", ".join(f"{fw} {v}" for fw, v in vals.items()))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(table, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
