"""transformers' own LlamaForCausalLM on txc (model.to('txc')): the same greedy tokens as CPU torch."""
import pytest
import torch

import txc

transformers = pytest.importorskip("transformers")
from transformers import LlamaForCausalLM, StaticCache  # noqa: E402

PROMPT = [[1, 403, 407, 261, 378]]
N = 12


def greedy(model, ids, cache=None):
    kw = {"cache": cache} if cache is not None else {}
    out = model(ids, use_cache=True, **kw)
    cache = cache if cache is not None else out.past_key_values
    tok = out.logits[:, -1].argmax(-1, keepdim=True)
    toks = [tok]
    for _ in range(N - 1):
        out = model(tok, cache=cache, use_cache=True)
        tok = out.logits[:, -1].argmax(-1, keepdim=True)
        toks.append(tok)
    return torch.cat(toks, 1), out.logits


@pytest.fixture(scope="module")
def model_and_ref(request):
    from conftest import SHARED
    p = SHARED / "models" / "stories260K"
    if not (p / "model.safetensors").exists():
        pytest.skip("no stories260K")
    model = LlamaForCausalLM.from_pretrained(p, dtype=torch.float32).eval()
    with torch.no_grad():
        ref, ref_logits = greedy(model, torch.tensor(PROMPT))
    return model, ref, ref_logits


@pytest.mark.parametrize("cache_kind", ["dynamic", "static"])
def test_greedy_tokens_match_cpu(model_and_ref, cache_kind):
    model, ref, ref_logits = model_and_ref
    env = txc.default_env()
    try:
        with env, torch.no_grad():
            model.to("txc")
            assert isinstance(model.model.embed_tokens.weight, txc.Tensor)
            cache = StaticCache(config=model.config, max_cache_len=64) if cache_kind == "static" else None
            env.op_counts.clear()
            got, logits = greedy(model, torch.tensor(PROMPT).to("txc"), cache)
            if cache_kind == "static":
                assert env.op_counts.get("index_copy_.default", 0) > 0  # the StaticCache's update
                assert isinstance(cache.layers[0].keys, txc.Tensor)
    finally:
        model.to("cpu")
    assert got.cpu().tolist() == ref.tolist()
    torch.testing.assert_close(logits.cpu(), ref_logits, atol=1e-4, rtol=1e-4)


def test_jitted_decode_step_matches_cpu(model_and_ref):
    """The article's section 5: jax_jit(decode_one_token), weights through functional_call, the
    StaticCache a registered pytree; one compilation for every position."""
    model, ref, _ = model_and_ref
    txc.register_static_cache_pytree()

    def decode_one_token(weights, cur_token, cache_position, cache):
        logits, cache = torch.func.functional_call(
            model, weights, (cur_token,),
            dict(cache_position=cache_position, cache=cache, return_dict=False, use_cache=True))
        return torch.argmax(logits[:, -1], dim=-1)[:, None], cache

    env = txc.default_env()
    try:
        with env, torch.no_grad():
            model.to("txc")
            weights = dict(model.named_parameters())
            weights.update(model.named_buffers())
            cache = StaticCache(config=model.config, max_cache_len=64)
            ids = torch.tensor(PROMPT).to("txc")
            out = model(ids, cache=cache, use_cache=True)
            tok = out.logits[:, -1].argmax(-1, keepdim=True)
            toks = [tok.cpu()]
            jitted = txc.interop.jax_jit(decode_one_token)
            first = cache
            for i in range(N - 1):
                tok, cache = jitted(weights, tok, torch.tensor([len(PROMPT[0]) + i]).to("txc"), cache)
                toks.append(tok.cpu())
            s = jitted.stats
            # the cache written in place comes back as the caller's own object (no copy, no rewrap),
            # and every call after the first gathered its inputs without flattening the tree again
            assert cache is first and isinstance(cache.layers[0].keys, txc.Tensor)
            assert jitted.fast_calls == N - 2
    finally:
        model.to("cpu")
    assert torch.cat(toks, 1).tolist() == ref.tolist()
    assert s["misses"] == 1 and s["hits"] == N - 2, s
    assert s["last_recompile_reason"] == "first call"


@pytest.mark.parametrize("cache_implementation", [None, "static"])
def test_generate_matches_cpu(model_and_ref, cache_implementation):
    """transformers' own model.generate() end to end on txc (greedy, with an attention mask:
    position ids from its cumsum, the stopping criteria's int64 & bool mask), eager with its
    DynamicCache and with cache_implementation="static" (a StaticCache generate() makes):
    the same tokens as generate() on CPU torch."""
    model, _, _ = model_and_ref
    ids = torch.tensor(PROMPT)
    mask = torch.ones_like(ids)
    kw = dict(max_new_tokens=N, do_sample=False)
    if cache_implementation is not None:
        kw["cache_implementation"] = cache_implementation
    with torch.no_grad():
        want = model.generate(ids, attention_mask=mask, **kw)
    env = txc.default_env()
    try:
        with env, torch.no_grad():
            model.to("txc")
            got = model.generate(ids.to("txc"), attention_mask=mask.to("txc"), **kw)
            assert isinstance(got, txc.Tensor)
    finally:
        model.to("cpu")
    assert want.shape[1] == len(PROMPT[0]) + N
    assert got.cpu().tolist() == want.tolist()
