"""transformers' caches as pytrees (torch.utils._pytree), for txc.jit."""
from torch.utils import _pytree as pytree

_done = False


class _Aux:
    """A StaticCache's static part: which layers are allocated, the cache's length; equal for
    two caches of one layout (so the jit reuses its plan). Holds one cache as the template that
    unflatten copies its non-tensor attributes from."""

    def __init__(self, cache, init):
        self.template = cache
        self.init = init
        self.key = (type(cache).__name__, init, getattr(cache, "max_cache_len", None),
                    tuple(getattr(l, "max_cache_len", None) for l in cache.layers))

    def __eq__(self, other):
        return isinstance(other, _Aux) and self.key == other.key

    def __hash__(self):
        return hash(self.key)

    def __repr__(self):
        return f"StaticCache{self.key}"


def register_static_cache():
    global _done
    if _done:
        return
    from transformers import cache_utils

    def flatten(cache):
        layers = cache.layers
        init = tuple(bool(getattr(l, "is_initialized", False)) for l in layers)
        children = []
        for l, ok in zip(layers, init):
            if ok:
                children += [l.keys, l.values, l.cumulative_length]
        return children, _Aux(cache, init)

    def unflatten(children, aux):
        src, init = aux.template, aux.init
        new = object.__new__(type(src))
        new.__dict__.update(src.__dict__)
        new.layers = []
        it = iter(children)
        for l, ok in zip(src.layers, init):
            nl = object.__new__(type(l))
            nl.__dict__.update(l.__dict__)
            if ok:
                nl.keys, nl.values, nl.cumulative_length = next(it), next(it), next(it)
            new.layers.append(nl)
        return new

    def flatten_with_keys(cache):
        children, aux = flatten(cache)
        keys = []
        for i, ok in enumerate(aux.init):
            if ok:
                keys += [pytree.GetAttrKey(f"layers[{i}].{n}") for n in ("keys", "values", "cumulative_length")]
        return list(zip(keys, children)), aux

    pytree.register_pytree_node(cache_utils.StaticCache, flatten, unflatten,
                                flatten_with_keys_fn=flatten_with_keys,
                                serialized_type_name="transformers.cache_utils.StaticCache")
    _done = True
