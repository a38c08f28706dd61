"""txc.jit (txc.interop.jax_jit): torch functions traced into cached txc plans."""
import pytest
import torch

import txc


def test_jit_matches_eager_and_caches(env):
    def f(a, b):
        return torch.softmax(a @ b.t(), dim=-1) * 2 + 1, a.sum(-1)

    a, b = torch.randn(3, 4), torch.randn(5, 4)
    want = f(a, b)
    jf = txc.jit(f)
    xa, xb = a.to("txc"), b.to("txc")
    got = jf(xa, xb)
    for g_, w_ in zip(got, want):
        assert isinstance(g_, txc.Tensor)
        torch.testing.assert_close(g_.cpu(), w_, atol=1e-5, rtol=1e-5)
    s = jf.stats
    assert s["misses"] == 1 and s["hits"] == 0 and s["last_recompile_reason"] == "first call"
    first = got[0].cpu()
    got2 = jf(xa, xb)
    assert jf.stats["hits"] == 1
    assert torch.equal(got[0].cpu(), first)        # outputs are copies: the next call does not clobber them
    assert torch.equal(got2[0].cpu(), first)
    # a new shape recompiles, and says why
    jf(torch.randn(2, 4).to("txc"), xb)
    assert jf.stats["misses"] == 2
    assert "shape" in jf.last_recompile_reason and "[3, 4]" in jf.last_recompile_reason


def test_jit_pytree_inputs_and_statics(env):
    def f(d, scale):
        return {"y": d["x"] * scale + d["w"][0]}

    x, w = torch.randn(4), torch.randn(4)
    jf = txc.interop.jax_jit(f)
    out = jf({"x": x.to("txc"), "w": [w.to("txc")]}, 3.0)
    torch.testing.assert_close(out["y"].cpu(), x * 3.0 + w)
    jf({"x": x.to("txc"), "w": [w.to("txc")]}, 3.0)
    assert jf.stats["hits"] == 1
    out = jf({"x": x.to("txc"), "w": [w.to("txc")]}, 5.0)   # a static changed: a new plan
    assert jf.stats["misses"] == 2
    torch.testing.assert_close(out["y"].cpu(), x * 5.0 + w)


def test_jit_donates_in_place_writes(env):
    def step(cache, counter, pos, v):
        cache.index_copy_(0, pos, v)   # the StaticCache's update
        counter.add_(1)                # cumulative_length.add_
        return cache.sum()

    cache = torch.zeros(4, 2).to("txc")
    counter = torch.tensor(0).to("txc")
    js = txc.jit(step)
    for i in range(3):
        total = js(cache, counter, torch.tensor([i]).to("txc"), torch.full((1, 2), float(i + 1)).to("txc"))
    want = torch.zeros(4, 2)
    want[0], want[1], want[2] = 1, 2, 3
    assert torch.equal(cache.cpu(), want)          # written in the caller's array
    assert counter.item() == 3
    assert total.item() == 12.0
    assert js.stats["misses"] == 1 and js.stats["hits"] == 2


def test_jit_refuses_item_while_tracing(env):
    def f(x):
        return x * x.sum().item()

    with pytest.raises(RuntimeError, match="traced"):
        txc.jit(f)(torch.ones(3).to("txc"))


def test_jit_refuses_cpu_inputs(env):
    with pytest.raises(TypeError, match="to\\('txc'\\)"):
        txc.jit(lambda x: x + 1)(torch.ones(3))


def test_jit_constants_made_while_tracing(env):
    # torch.arange / torch.ones with device='txc' inside the traced function are made eagerly
    # (a copy into a txc array) and captured as constants of the plan; the array must stay alive
    # after the trace's scope ends (it was released with it once: the constant read garbage)
    c = torch.tensor(2).to("txc")
    j = txc.jit(lambda c: torch.arange(3, device=c.device) + c)
    assert j(c).cpu().tolist() == [2, 3, 4]
    assert j(c).cpu().tolist() == [2, 3, 4]
    j2 = txc.jit(lambda c: torch.ones(3, device=c.device) * 5 + c)
    assert j2(c).cpu().tolist() == [7.0, 7.0, 7.0]


def test_jit_fast_path_sees_replaced_weights_and_layout_changes(env, monkeypatch):
    """After the first call of a layout the inputs are gathered without re-flattening the tree
    (txc.jit's _Layout); a weight replaced in the dict, a weight written in place, a new dict
    key, a changed static, are each still seen, as explicit inputs under JAX's semantics."""
    calls = {"n": 0}
    real = torch.utils._pytree.tree_flatten_with_path

    def counting(*a, **k):
        calls["n"] += 1
        return real(*a, **k)

    monkeypatch.setattr(torch.utils._pytree, "tree_flatten_with_path", counting)

    def f(w, x, scale):
        return x @ w["a"] * scale + w["b"]

    a, b, x = torch.randn(4, 3), torch.randn(3), torch.randn(2, 4)
    w = {"a": a.to("txc"), "b": b.to("txc")}
    jf = txc.jit(f)
    xx = x.to("txc")
    torch.testing.assert_close(jf(w, xx, 2.0).cpu(), x @ a * 2 + b)
    torch.testing.assert_close(jf(w, xx, 2.0).cpu(), x @ a * 2 + b)
    assert calls["n"] == 1 and jf.fast_calls == 1
    a2 = torch.randn(4, 3)
    w["a"] = a2.to("txc")                      # replaced: the new tensor is the input
    torch.testing.assert_close(jf(w, xx, 2.0).cpu(), x @ a2 * 2 + b)
    w["b"].add_(1.0)                           # written in place: read at the next call
    torch.testing.assert_close(jf(w, xx, 2.0).cpu(), x @ a2 * 2 + b + 1)
    a3 = torch.randn(4, 3)
    torch.utils.swap_tensors(w["a"], a3.to("txc"))  # same object, new array (as Module.to swaps)
    torch.testing.assert_close(jf(w, xx, 2.0).cpu(), x @ a3 * 2 + b + 1)
    assert calls["n"] == 1 and jf.fast_calls == 4 and jf.stats["misses"] == 1
    torch.testing.assert_close(jf(w, xx, 3.0).cpu(), x @ a3 * 3 + b + 1)   # a static changed
    assert calls["n"] == 2 and jf.stats["misses"] == 2
    w2 = dict(w, c=torch.zeros(1).to("txc"))   # one more key: another tree
    torch.testing.assert_close(jf(w2, xx, 3.0).cpu(), x @ a3 * 3 + b + 1)
    assert calls["n"] == 3 and jf.stats["misses"] == 3
    with pytest.raises(TypeError, match="to\\('txc'\\)"):   # a CPU tensor where a txc one was
        jf(w, x, 3.0)


def test_jit_returns_the_donated_input_itself(env):
    """An output that is an input written in place is not copied: the caller's own tensor comes
    back (and a pytree argument returned whole is the caller's object)."""
    def step(state, v):
        state["k"].index_copy_(0, v[1], v[0])
        return v[0].sum(), state, state["k"]

    k = torch.zeros(4, 2).to("txc")
    state = {"k": k}
    js = txc.jit(step)
    for i in range(2):
        total, st, kk = js(state, (torch.full((1, 2), float(i + 1)).to("txc"), torch.tensor([i]).to("txc")))
    assert st is state and kk is k
    assert k.cpu()[:2].tolist() == [[1.0, 1.0], [2.0, 2.0]] and total.item() == 4.0
