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

The per-call path is short: the first call of a layout (how many positional
arguments, which keyword ones) flattens the whole tree and remembers, per
top-level argument, how it flattened (_Layout); later calls only check each
argument against that (a dict's keys, a pytree node's context, the statics)
and gather the leaves' arrays in C, so a call with ~400 weight and cache
tensors costs tens of microseconds of Python. Outputs that are inputs (the
donated cache) are not copied: the plan says which input each one is, and an
output that is the caller's own argument with the same leaves (the
StaticCache returned by the step) is handed back as that very object.

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

# how one top-level argument of a call becomes plan inputs on the fast path
_TENSOR, _DICT, _SEQ, _NODE, _STATIC = range(5)


class _Layout:
    """The fast path of one call layout (number of positional arguments, names of the keyword
    ones): per top-level argument, how it was flattened (a txc.Tensor; a dict, list or tuple of
    them; a registered pytree node whose children are txc.Tensors, e.g. the StaticCache; a static
    leaf), where its arrays go in the plan's input list, the plan key and the inputs' names.
    A later call with the same layout is checked against it argument by argument (same dict keys,
    same node context, same statics; every leaf a txc.Tensor) and its arrays gathered in C
    (gather_elems), instead of re-flattening the whole tree with key paths. The leaves are
    compared with the previous call's (a snapshot per argument: the tensor object and its
    array): an unchanged weight costs two pointer comparisons, a replaced or swapped one is
    picked up (weights are explicit inputs), and a tensor written in place is read by the plan
    at its next run anyway. The input list is kept between calls and updated where leaves
    changed."""

    __slots__ = ("guards", "n", "key", "names", "arrays")

    def __init__(self, guards, n, key, names):
        self.guards, self.n, self.key, self.names = guards, n, key, names
        self.arrays = [None] * n

    def gather(self, values):
        arrays = self.arrays
        gather = _C.gather_elems
        for (kind, data, start, n, snap), v in zip(self.guards, values):
            if kind is _TENSOR:
                if not isinstance(v, Tensor):
                    return None
                arrays[start] = v._elem
            elif kind is _DICT:
                if type(v) is not dict or not gather(v, data, Tensor, arrays, start, n, snap):
                    return None
            elif kind is _NODE:
                typ, flatten, ctx = data
                if type(v) is not typ:
                    return None
                children, c = flatten(v)
                if not (c == ctx) or not gather(children if type(children) in (list, tuple) else list(children),
                                                None, Tensor, arrays, start, n, snap):
                    return None
            elif kind is _SEQ:
                if type(v) is not data or not gather(v, None, Tensor, arrays, start, n, snap):
                    return None
            else:  # _STATIC
                if type(v) is not type(data) or not (v == data):
                    return None
        return arrays


def _guard(v):
    """(kind, data, n leaves) of one top-level argument, None when only the slow path fits it."""
    t = type(v)
    if isinstance(v, Tensor):
        return _TENSOR, None, 1
    if isinstance(v, torch.Tensor):
        return None
    if t is dict:
        if all(isinstance(x, Tensor) for x in v.values()):
            return _DICT, tuple(v), len(v)
        return None
    if t in (list, tuple):
        if all(isinstance(x, Tensor) for x in v):
            return _SEQ, t, len(v)
        return None
    node = pytree.SUPPORTED_NODES.get(t)
    if node is not None:
        children, ctx = node.flatten_fn(v)
        if all(isinstance(x, Tensor) for x in children):
            return _NODE, (t, node.flatten_fn, ctx), len(children)
        return None
    if pytree.tree_is_leaf(v) and isinstance(v, (bool, int, float, str, type(None), torch.dtype, torch.device)):
        return _STATIC, v, 0
    return None


class Jit:
    def __init__(self, fn, name=None, compile_cache=None, clone_outputs=True, env=None):
        from . import default_env
        self.fn = fn
        self.env = env or default_env()
        self.name = name or getattr(fn, "__name__", "fn")
        self._c = _C.Jit(self.env._c, self._trace, self.name)
        self._keys = []  # (in_spec, static leaves, tensor positions)
        self._out = {}   # key -> output recipe (_trace)
        self._layouts = {}  # (n args, kwarg names) -> _Layout
        self._clone = clone_outputs
        self.fast_calls = 0  # calls whose inputs were gathered by a _Layout (no full flatten)
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
        lk = (len(args), tuple(kwargs)) if kwargs else len(args)
        values = args + tuple(kwargs.values()) if kwargs else args
        lay = self._layouts.get(lk)
        if lay is not None:
            arrays = lay.gather(values)
            if arrays is not None:
                self.fast_calls += 1
                return self._run(lay.key, arrays, lay.names, values)
        return self._slow(args, kwargs, lk, values)

    def _slow(self, args, kwargs, lk, values):
        try:
            flat, _ = pytree.tree_flatten_with_path((args, kwargs))
        except ValueError:  # a node registered without key paths
            leaves = pytree.tree_leaves((args, kwargs))
            flat = [((pytree.SequenceKey(i),), v) for i, v in enumerate(leaves)]
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
        self._remember(lk, values, key, names, len(arrays))
        return self._run(key, arrays, names, values)

    def _remember(self, lk, values, key, names, n):
        """A _Layout for this call's layout, when every top-level argument has a fast form."""
        guards, start = [], 0
        for v in values:
            g = _guard(v)
            if g is None:
                self._layouts.pop(lk, None)
                return
            kind, data, k = g
            guards.append((kind, data, start, k, [None] * k if kind in (_DICT, _NODE, _SEQ) else None))
            start += k
        if start != n:  # the parts do not add up to the flattened tree: keep the slow path
            self._layouts.pop(lk, None)
            return
        lay = _Layout(guards, n, key, names)
        if lay.gather(values) is not None:  # fills the input list and the snapshots
            self._layouts[lk] = lay
        else:
            self._layouts.pop(lk, None)

    def _run(self, key, arrays, names, values):
        outs = self._c.call(arrays, names, key, self._clone)
        parts, single = self._out[key]
        env = self.env
        callers = []

        def leaf(v):
            if isinstance(v, _Slot):
                o = outs[v]
                if type(o) is not int:
                    return Tensor(o, env)
                if not callers:  # an input returned inside a new tree: the caller's tensor itself
                    callers.extend(t for t in pytree.tree_leaves(values) if isinstance(t, Tensor))
                return callers[o]
            return v

        res = []
        for kind, data, slots in parts:
            if kind == "input" and all(type(outs[s]) is int for s in slots):
                res.append(values[data[0]])  # the caller's own object: its leaves were written in place
            else:
                spec, template = data if kind == "tree" else data[1]
                res.append(pytree.tree_unflatten([leaf(v) for v in template], spec))
        return res[0] if single is None else single(res)

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
        with self.env:
            res = self.fn(*args, **kwargs)
        inputs = list(args) + list(kwargs.values())
        outs = []
        single = type(res) if type(res) in (tuple, list) else None
        parts = [self._part(x, inputs, outs) for x in (res if single is not None else [res])]
        self._out[key] = (parts, single)
        if _DEBUG: print("txc.jit: traced", len(arrays), "inputs", len(outs), "outputs", file=sys.stderr)
        return outs

    def _part(self, x, inputs, outs):
        """The recipe of one top-level output: ("input", (i, (spec, template)), slots) when it is the traced call's own
        argument i with the same leaves (the cache the function updated in place: the caller gets
        its object back; (spec, template) rebuild it should the plan
        not alias them), else ("tree", (spec, template), slots), rebuilt from the outputs."""
        out_leaves, out_spec = pytree.tree_flatten(x)
        template, slots = [], []
        for v in out_leaves:
            if isinstance(v, Tensor):
                slots.append(len(outs))
                template.append(_Slot(len(outs)))
                outs.append(v._elem)
            elif isinstance(v, torch.Tensor):
                raise TypeError(f"txc.jit({self.name}): an output is a {v.device.type} tensor, not a txc one")
            else:
                template.append(v)
        for i, inp in enumerate(inputs):
            if x is inp and not isinstance(x, (bool, int, float, str, type(None))):
                in_leaves = pytree.tree_leaves(inp)
                if len(in_leaves) == len(out_leaves) and all(a is b for a, b in zip(in_leaves, out_leaves)):
                    return ("input", (i, (out_spec, template)), slots)
                break
        return ("tree", (out_spec, template), slots)

    @property
    def stats(self):
        """txc_jit_get_stats: calls, hits, misses, compile_ms, n_plans, nodes_traced/compiled..."""
        return self._c.stats()

    def set_profile(self, on=True):
        """Time every kernel launch of the following calls (txc_jit_set_profile; counts restart)."""
        self._c.set_profile(bool(on))

    @property
    def profile(self):
        """Kernel time per op kind while profiling: [(op, calls, ms)], most time first."""
        return self._c.profile()

    @property
    def gemm_profile(self):
        """Kernel time per GEMM shape while profiling (txc_jit_get_gemm_profile):
        [(op, M, N, K, parts, calls, ms)], most time first; M the rows, N the output features
        (a linear group's summed over its `parts` linears), K the inner dim."""
        return self._c.gemm_profile()

    def dump_graph(self):
        """Print the last compiled plan's graph, after the passes, on stderr (txc_jit_dump_last_graph):
        one line per kernel node (fused programs marked `fused:`), the views and inputs."""
        self._c.dump_graph()

    @property
    def last_recompile_reason(self):
        return self._c.stats()["last_recompile_reason"]

    @property
    def compile_cache_message(self):
        return self._c.compile_cache_message()


class _Slot(int):
    """An output position in a plan's result list."""
