"""txc.jit / txc.interop.jax_jit: a torch function compiled into a cached txc plan.

The call's arguments are flattened with torch.utils._pytree (so a
transformers cache registered with pytree.register_pytree_node crosses the
boundary as its tensors, as in torchax); the txc tensors among the leaves are
the plan's inputs (weights too, when passed through
torch.func.functional_call), every other leaf and the tree's structure are
static: they select the plan (txc_jit_call's static bytes carry the index of
the (structure, static leaves) pair), and a new pair traces again.

Tracing runs the torch function once on traced txc tensors (shape and dtype,
no data) under the environment: every aten op goes through the same mapping
to the C op table, which records it (the env's trace hook, src/jit/). The C
jit then runs its passes, plans memory and caches the plan by signature
(dtypes, shapes, strides of the inputs + the static key); the reason of each
recompilation is kept (`last_recompile_reason`). An in-place write into an
input (the StaticCache's index_copy_) is kept by the plan as a write into
the caller's array: the cache is donated, not copied.

What cannot be traced raises: `.item()` of a traced tensor (data-dependent
Python control flow), copy_ into a traced tensor other than index_copy_.
"""
import os
import sys

import torch
from torch.utils import _pytree as pytree

from . import _C
from .tensor import Tensor


_DEBUG = bool(os.environ.get("TXC_JIT_DEBUG"))


class Jit:
    def __init__(self, fn, name=None, compile_cache=None, clone_outputs=True, env=None):
        from . import default_env
        self.fn = fn
        self.env = env or default_env()
        self.name = name or getattr(fn, "__name__", "fn")
        self._c = _C.Jit(self.env._c, self._trace, self.name)
        self._keys = []  # (in_spec, static leaves, tensor positions)
        self._out = {}   # key -> (out_spec, template)
        self._clone = clone_outputs
        if compile_cache:
            self._c.set_compile_cache(str(compile_cache))

    def _key(self, spec, statics, tpos):
        for i, (s, st, tp) in enumerate(self._keys):
            if tp == tpos and s == spec and len(st) == len(statics) and all(
                    type(a) is type(b) and a == b for a, b in zip(st, statics)):
                return i
        self._keys.append((spec, statics, tpos))
        return len(self._keys) - 1

    def __call__(self, *args, **kwargs):
        try:
            flat, _ = pytree.tree_flatten_with_path((args, kwargs))
        except ValueError:  # a node registered without key paths
            leaves = pytree.tree_leaves((args, kwargs))
            flat = [((pytree.SequenceKey(i),), v) for i, v in enumerate(leaves)]
        leaves = [v for _, v in flat]
        tpos, arrays, names, statics = [], [], [], []
        for i, (path, v) in enumerate(flat):
            if isinstance(v, Tensor):
                tpos.append(i)
                arrays.append(v._elem)
                names.append(pytree.keystr(path))
            elif isinstance(v, torch.Tensor):
                raise TypeError(f"txc.jit({self.name}): input {pytree.keystr(path)} is a {v.device.type} "
                                f"tensor; move it with .to('txc')")
            else:
                statics.append(v)
        tree = pytree.tree_structure((args, kwargs))
        key = self._key(tree, statics, tuple(tpos))
        with self.env:
            outs = self._c.call(arrays, names, key, self._clone)
        out_spec, template = self._out[key]
        res = [Tensor(outs[v], self.env) if isinstance(v, _Slot) else v for v in template]
        del leaves
        return pytree.tree_unflatten(res, out_spec)

    def _trace(self, arrays, key):
        spec, statics, tpos = self._keys[key]
        n = len(tpos) + len(statics)
        leaves, ai, si = [None] * n, 0, 0
        tset = set(tpos)
        for i in range(n):
            if i in tset:
                leaves[i] = Tensor(arrays[ai], self.env)
                ai += 1
            else:
                leaves[i] = statics[si]
                si += 1
        args, kwargs = pytree.tree_unflatten(leaves, spec)
        res = self.fn(*args, **kwargs)
        out_leaves, out_spec = pytree.tree_flatten(res)
        template, outs = [], []
        for v in out_leaves:
            if isinstance(v, Tensor):
                template.append(_Slot(len(outs)))
                outs.append(v._elem)
            elif isinstance(v, torch.Tensor):
                raise TypeError(f"txc.jit({self.name}): an output is a {v.device.type} tensor, not a txc one")
            else:
                template.append(v)
        self._out[key] = (out_spec, template)
        if _DEBUG: print("txc.jit: traced", len(arrays), "inputs", len(outs), "outputs", file=sys.stderr)
        return outs

    @property
    def stats(self):
        """txc_jit_get_stats: calls, hits, misses, compile_ms, n_plans, nodes_traced/compiled..."""
        return self._c.stats()

    @property
    def last_recompile_reason(self):
        return self._c.stats()["last_recompile_reason"]

    @property
    def compile_cache_message(self):
        return self._c.compile_cache_message()


class _Slot(int):
    """An output position in a plan's result list."""
