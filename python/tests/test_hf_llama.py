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
