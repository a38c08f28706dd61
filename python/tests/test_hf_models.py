"""transformers' own model classes beyond Llama on txc (model.to('txc')): small random configs
built here, the same greedy tokens and last logits as CPU torch at float32, eagerly with a
DynamicCache and a StaticCache, and (for the classes whose decode step traces) under
txc.interop.jax_jit."""
import pytest
import torch

import txc

transformers = pytest.importorskip("transformers")

PROMPT = [[3, 17, 42, 7, 99]]
N = 6
SMALL = dict(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)


def _config(name):
    t = transformers
    if name == "qwen2":
        return t.Qwen2Config(**SMALL, tie_word_embeddings=False)
    if name == "qwen3":
        return t.Qwen3Config(**SMALL, head_dim=16, tie_word_embeddings=True)
    if name == "gemma":
        return t.GemmaConfig(**SMALL, head_dim=16)
    if name == "phi3":
        return t.Phi3Config(**SMALL, pad_token_id=0)
    if name == "gpt2":
        return t.GPT2Config(vocab_size=128, n_positions=128, n_embd=64, n_layer=2, n_head=4)
    raise KeyError(name)


def _model(name):
    torch.manual_seed(0)
    cfg = _config(name)
    cfg._attn_implementation = "sdpa"
    return transformers.AutoModelForCausalLM.from_config(cfg).eval()


def _greedy(model, ids, cache=None):
    kw = {"cache": cache} if cache is not None else {}
    out = model(ids, use_cache=True, **kw)
    cache = cache if cache is not None else out.past_key_values
    tok = out.logits[:, -1].argmax(-1, keepdim=True)
    toks = [tok.cpu()]
    for _ in range(N - 1):
        out = model(tok, cache=cache, use_cache=True)
        tok = out.logits[:, -1].argmax(-1, keepdim=True)
        toks.append(tok.cpu())
    return torch.cat(toks, 1), out.logits.cpu()


MODELS = ["qwen2", "qwen3", "gemma", "phi3", "gpt2"]


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("cache_kind", ["dynamic", "static"])
def test_model_class_matches_cpu(name, cache_kind):
    from transformers import StaticCache
    model = _model(name)
    ids = torch.tensor(PROMPT)
    with torch.no_grad():
        c = StaticCache(config=model.config, max_cache_len=32) if cache_kind == "static" else None
        ref, ref_logits = _greedy(model, ids, c)
        env = txc.default_env()
        with env:
            model.to("txc")
            c = StaticCache(config=model.config, max_cache_len=32) if cache_kind == "static" else None
            got, logits = _greedy(model, ids.to("txc"), c)
    assert got.tolist() == ref.tolist()
    torch.testing.assert_close(logits, ref_logits, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", MODELS)
def test_model_class_jitted_decode(name):
    from transformers import StaticCache
    model = _model(name)
    ids = torch.tensor(PROMPT)
    with torch.no_grad():
        ref, _ = _greedy(model, ids, StaticCache(config=model.config, max_cache_len=32))
    txc.register_static_cache_pytree()

    def decode_one_token(weights, cur_token, cache_position, cache):
        logits, cache = torch.func.functional_call(
            model, weights, (cur_token,),
            dict(cache_position=cache_position, cache=cache, return_dict=False, use_cache=True))
        return torch.argmax(logits[:, -1], dim=-1)[:, None], cache

    env = txc.default_env()
    with env, torch.no_grad():
        model.to("txc")
        weights = dict(model.named_parameters())
        weights.update(model.named_buffers())
        cache = StaticCache(config=model.config, max_cache_len=32)
        out = model(ids.to("txc"), cache=cache, use_cache=True)
        tok = out.logits[:, -1].argmax(-1, keepdim=True)
        toks = [tok.cpu()]
        jitted = txc.interop.jax_jit(decode_one_token)
        for i in range(N - 1):
            tok, cache = jitted(weights, tok, torch.tensor([len(PROMPT[0]) + i]).to("txc"), cache)
            toks.append(tok.cpu())
    assert torch.cat(toks, 1).tolist() == ref.tolist()
    assert jitted.stats["misses"] == 1 and jitted.fast_calls == N - 2
