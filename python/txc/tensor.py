"""txc.Tensor and the Environment: torch tensors over txc arrays.

As torchax's Tensor holds a jax.Array (`_elem`) and its Environment (`_env`),
a txc.Tensor is a torch wrapper subclass holding a txc array (txc._C.Array,
a txc_tensor of the C library) and the Environment it belongs to. Entering
the environment (`with env:`) pushes the C env (txc_env_enter) and installs
a TorchDispatchMode that sends every aten op to the C op table through the
mapping of txc/_ops_table.py, and a TorchFunctionMode for the composite
functions that should reach txc whole (F.scaled_dot_product_attention,
F.linear) and for constructors with device='txc'.
"""

import contextlib
import math
import operator
import threading

import torch
import torch.nn.functional as F
import torch.utils.dlpack
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from . import _C
from . import _ops_table

aten = torch.ops.aten

DEVICE_NAME = "txc"

_T2X = {
    torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
    torch.int32: "int32", torch.int64: "int64", torch.bool: "bool",
}
_X2T = {v: k for k, v in _T2X.items()}


class OperatorNotFound(Exception):
    """An aten op that txc's op table does not implement and torch cannot decompose."""


class TxcError(_C.TxcError):
    pass


def t2x_dtype(dt):
    try:
        return _T2X[dt]
    except KeyError:
        raise TypeError(f"txc has no dtype {dt} (float32, float16, bfloat16, int32, int64, bool)") from None


def x2t_dtype(name):
    return _X2T[name]


class Tensor(torch.Tensor):
    """A torch.Tensor whose data is a txc array (`_elem`) of environment `_env`."""

    @staticmethod
    def __new__(cls, elem, env):
        return torch.Tensor._make_wrapper_subclass(
            cls, elem.shape, strides=elem.strides, dtype=x2t_dtype(elem.dtype),
            device="meta", requires_grad=False)

    def __init__(self, elem, env):
        super().__init__()
        self._elem = elem
        self._env = env

    __torch_function__ = torch._C._disabled_torch_function_impl

    @property
    def device(self):
        # The wrapper itself is a meta tensor (no storage, no device guard in torch's C++); to
        # Python code it is on 'txc' (torch's privateuse1 backend, renamed), as torchax's 'jax'.
        return torch.device(DEVICE_NAME, 0)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        # Reached only when no environment's dispatch mode is active. Copying back to the CPU
        # (.cpu(), .to('cpu')) needs no environment; any other op does.
        if func is aten._to_copy.default:
            dev = (kwargs or {}).get("device")
            if dev is not None and torch.device(dev).type == "cpu":
                r = torch.from_dlpack(args[0]._elem).clone()
                dt = (kwargs or {}).get("dtype")
                return r.to(dt) if dt is not None else r
        raise TxcError(
            f"{func}: a txc tensor was used outside its environment; enter it first: "
            f"`with txc.default_env(): ...` (or txc.enable_globally())")

    def __repr__(self, *, tensor_contents=None):
        if self._elem.is_traced:
            return f"txc.Tensor(traced, shape={tuple(self._elem.shape)}, dtype={self._elem.dtype})"
        return f"txc.Tensor({torch.from_dlpack(self._elem)!r})"

    __str__ = __repr__

    def numpy(self, *, force=False):
        import numpy as np
        return np.from_dlpack(self._elem).copy()

    def torch(self):
        """A CPU torch tensor copy of the data."""
        return torch.from_dlpack(self._elem).clone()


class Config:
    """Switches of an Environment (as torchax.config.Configuration)."""

    def __init__(self):
        # check each op against CPU torch; raise on the first that disagrees
        self.debug_accuracy_for_each_op = False
        self.debug_atol = 1e-4
        self.debug_rtol = 1e-4
        # print each aten op dispatched
        self.debug_print_each_op = False


def _name(func):
    return func.name() if hasattr(func, "name") else getattr(func, "__name__", str(func))


class _DispatchMode(TorchDispatchMode):
    def __init__(self, env):
        super().__init__()
        self.env = env

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return self.env.dispatch(func, args, kwargs or {})


class _FunctionMode(torch.overrides.TorchFunctionMode):
    def __init__(self, env):
        super().__init__()
        self.env = env

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        r = self.env.dispatch_function(func, args, kwargs)
        if r is not NotImplemented:
            return r
        return func(*args, **kwargs)


_CONSTRUCTORS = {
    "empty.memory_format": "size", "zeros.default": "size", "ones.default": "size", "full.default": "size",
    "scalar_tensor.default": None, "arange.default": None, "arange.start": None, "arange.start_step": None,
    "empty_strided.default": "size",
}
_NEW = {"new_empty.default", "new_zeros.default", "new_ones.default", "new_full.default",
        "new_empty_strided.default"}
_LIKE = {"empty_like.default", "zeros_like.default", "ones_like.default", "full_like.default"}


def _is_txc_device(dev):
    if dev is None:
        return False
    if isinstance(dev, str):  # 'txc', 'txc:0' (without building a torch.device)
        return dev.partition(":")[0] in (DEVICE_NAME, "txc", "privateuseone", "meta")
    return dev.type in (DEVICE_NAME, "txc", "privateuseone", "meta")


class Environment(contextlib.ContextDecorator):
    """Where txc tensors live and their ops go: a C txc_env + torch modes."""

    def __init__(self, c_env=None):
        self._c = c_env if c_env is not None else _C.default_env()
        self._dispatch_mode = _DispatchMode(self)
        self._function_mode = _FunctionMode(self)
        self.config = Config()
        self._overrides = {}
        self._depth = threading.local()
        self._schemas = {}
        self.op_counts = {}

    # ---- entering -------------------------------------------------------
    def __enter__(self):
        self._c.enter()
        self._dispatch_mode.__enter__()
        self._function_mode.__enter__()
        return self

    def __exit__(self, *exc):
        self._function_mode.__exit__(*exc)
        self._dispatch_mode.__exit__(*exc)
        self._c.exit()
        return False

    @property
    def name(self):
        return self._c.name

    # ---- conversions ----------------------------------------------------
    def wrap(self, arr):
        """torch_view: a txc.Tensor over a txc array, zero copy."""
        return Tensor(arr, self)

    def to_txc(self, t, dtype=None):
        """A CPU torch tensor copied into a txc array (`tensor.to('txc')`)."""
        if t.dtype not in _T2X:
            raise TypeError(f"txc has no dtype {t.dtype}")
        src = t.detach()
        with _no_modes():
            return self._to_txc_plain(src, dtype)

    def _to_txc_plain(self, src, dtype=None):
        """to_txc with the torch modes already off: the copy through torch's C DLPack export (its
        capsule, not Tensor.__dlpack__'s Python checks)."""
        if dtype is not None and dtype != src.dtype:
            src = src.to(dtype)
        return Tensor(_C.from_dlpack(_to_dlpack(src.contiguous()), self._c, True), self)

    def to_torch(self, t, dtype=None):
        """A txc.Tensor copied back into a CPU torch tensor (`tensor.to('cpu')`)."""
        with _no_modes():
            r = torch.from_dlpack(t._elem).clone()
            if dtype is not None:
                r = r.to(dtype)
        return r

    # ---- the user's op definitions (torchax's override_op_definition) ----
    def override_op_definition(self, op, impl):
        """Run `impl(*args, **kwargs)` for aten overload `op` (or a torch function) instead of
        txc's mapping; impl sees txc.Tensors and may call torch ops on them."""
        self._overrides[op] = impl

    # ---- dispatch -------------------------------------------------------
    def _schema_names(self, func):
        names = self._schemas.get(func)
        if names is None:
            names = [(a.name, a.default_value if a.has_default_value() else _NODEFAULT, a.kwarg_only)
                     for a in func._schema.arguments]
            self._schemas[func] = names
        return names

    def _bind(self, func, args, kwargs):
        out = {}
        names = self._schema_names(func)
        for i, (n, d, _) in enumerate(names):
            if i < len(args):
                out[n] = args[i]
            elif n in kwargs:
                out[n] = kwargs[n]
            elif d is not _NODEFAULT:
                out[n] = d
        return out

    def _x(self, v, like=None):
        """A txc array for an argument: txc.Tensor -> its array; CPU 0-dim tensor / Python number ->
        a 0-dim txc array (like's dtype for a number of its kind, as torch's wrapped numbers)."""
        if isinstance(v, Tensor):
            if v._env is not self:
                raise TxcError("a txc tensor of another environment: move it with .to('txc') inside this one")
            return v._elem
        if isinstance(v, torch.Tensor):
            if v.dim() == 0 and v.device.type == "cpu":
                return _C.full(self._c, (), v.item(), t2x_dtype(v.dtype))
            raise TxcError(f"an operand is a {v.device.type} tensor of shape {tuple(v.shape)}; move it to txc "
                           f"first (.to('txc'))")
        if isinstance(v, (bool, int, float)):
            if isinstance(v, bool):
                dt = "bool"
            elif isinstance(v, int):
                dt = like if like is not None else "int64"
            else:
                dt = like if like in ("float32", "float16", "bfloat16") else "float32"
            return _C.full(self._c, (), float(v), dt)
        raise TypeError(f"not a tensor operand: {type(v).__name__}")

    def _call_row(self, row, b, fname):
        op, slots = row[0], row[1]
        sig = _C_SIGS[op]
        like = None
        for v in b.values():
            if isinstance(v, Tensor):
                like = v._elem.dtype
                break
        vals = []
        for k, slot in enumerate(slots.split()):
            if slot.startswith("="):
                v = eval(slot[1:])  # literals of the table: ints, floats, bools, []
            else:
                nm, _, conv = slot.partition("|")
                v = b.get(nm)
                if conv.startswith("@"):
                    v = _ops_table.BOUND_CONVERTERS[conv[1:]](v, b)
                elif conv:
                    v = _ops_table.CONVERTERS[conv](v)
            s = sig[k]
            if s in "TO":
                v = None if v is None and s == "O" else self._x(v, like)
            elif s == "L":
                v = [self._x(t, like) for t in v]
            elif s == "y":
                v = t2x_dtype(v)
            vals.append(v)
        return _C.call(op, *vals)

    def _row_applies(self, row, b):
        conds = row[2] if len(row) > 2 else {}
        for k, want in conds.items():
            if k == "@bool":
                if not all(v.dtype == torch.bool for v in b.values() if isinstance(v, torch.Tensor)):
                    return False
            elif k == "@last_dim":  # a norm over the input's last dim only
                ns, x = b.get("normalized_shape"), b.get("input")
                if not (isinstance(x, torch.Tensor) and ns is not None and len(ns) == 1 and x.dim() > 0
                        and int(ns[0]) == x.shape[-1]):
                    return False
            elif b.get(k, want) != want:
                return False
        return True

    def _lookup(self, fname, b, ns="aten"):
        rows = (_ATEN_ROWS if ns == "aten" else _PRIMS_ROWS if ns == "prims" else {}).get(fname)
        if rows is None:
            return None
        for row in rows:
            if self._row_applies(row, b):
                return row
        return None

    def dispatch(self, func, args, kwargs):
        fname = _overload_name(func)
        if self.config.debug_print_each_op:
            print(f"txc dispatch: {fname}")
        self.op_counts[fname] = self.op_counts.get(fname, 0) + 1
        if func in self._overrides:
            with self._dispatch_mode:
                return self._overrides[func](*args, **kwargs)
        if fname in _CONSTRUCTORS or fname in _NEW or fname in _LIKE:
            return self._constructor(func, fname, args, kwargs)
        if fname in ("_to_copy.default", "to.dtype", "to.device", "lift_fresh.default"):
            return self._to_copy(func, args, kwargs)
        flat = pytree.arg_tree_leaves(*args, **kwargs)
        if not any(isinstance(t, Tensor) for t in flat):
            with _no_modes():
                return func(*args, **kwargs)
        if self.config.debug_accuracy_for_each_op:
            return self._checked(func, fname, args, kwargs)
        return self._dispatch_txc(func, fname, args, kwargs)

    def _dispatch_txc(self, func, fname, args, kwargs):
        b = self._bind(func, args, kwargs) if hasattr(func, "_schema") else {}
        ns = getattr(func, "namespace", "aten")
        row = self._lookup(fname, b, ns)
        if row is not None:
            return self.wrap(self._call_row(row, b, fname))
        special = (_PRIMS_SPECIAL if ns == "prims" else _SPECIAL).get(fname)
        if special is not None:
            return special(self, func, b)
        base = fname.split(".")[0]
        if base.endswith("_") and not base.startswith("_") and func._schema.is_mutable:
            return self._inplace(func, fname, args, kwargs)
        return self._decompose(func, fname, args, kwargs)

    def _decompose(self, func, fname, args, kwargs):
        decomp = _decomposition(func)
        if decomp is not None:
            with self._dispatch_mode:
                return decomp(*args, **kwargs)
        r = func.decompose(*args, **kwargs) if hasattr(func, "decompose") else NotImplemented
        if r is not NotImplemented:
            return r
        ns = getattr(func, "namespace", "aten")
        raise OperatorNotFound(f"txc has no lowering for {ns}::{fname} and PyTorch has no decomposition of it")

    def _inplace(self, func, fname, args, kwargs):
        """self.op_(...): the functional op's result written into self (views of self see it)."""
        base, _, overload = fname.partition(".")
        functional = getattr(getattr(aten, base[:-1], None) or _missing(fname), overload, None)
        if functional is None:
            raise OperatorNotFound(f"txc: no functional form of aten::{fname}")
        res = self.dispatch(functional, args, kwargs)
        self_t = args[0]
        _write(self, self_t, self._x(res))
        return self_t

    def _checked(self, func, fname, args, kwargs):
        """debug_accuracy_for_each_op: run on txc and on CPU torch, compare."""
        res = self._dispatch_txc(func, fname, args, kwargs)
        cpu_args, cpu_kwargs = pytree.tree_map_only(Tensor, lambda t: self.to_torch(t), (args, kwargs))
        with _no_modes():
            expect = func(*cpu_args, **cpu_kwargs)
        got_l = pytree.tree_leaves(res)
        exp_l = pytree.tree_leaves(expect)
        for g, e in zip(got_l, exp_l):
            if isinstance(g, Tensor) and isinstance(e, torch.Tensor) and not g._elem.is_traced:
                gt = self.to_torch(g)
                if gt.shape != e.shape or not torch.allclose(gt.to(torch.float32), e.to(torch.float32),
                                                             atol=self.config.debug_atol,
                                                             rtol=self.config.debug_rtol, equal_nan=True):
                    diff = (gt.float() - e.float()).abs().max().item() if gt.shape == e.shape else "shape"
                    raise AccuracyError(f"aten::{fname}: txc and CPU torch disagree (max abs diff {diff}, "
                                        f"txc {tuple(gt.shape)} vs torch {tuple(e.shape)})")
        return res

    def _constructor(self, func, fname, args, kwargs):
        b = self._bind(func, args, kwargs)
        device = b.get("device")
        like = None
        if fname in _NEW or fname in _LIKE:
            like = b["self"]
            if device is None:
                device = like.device
        if not _is_txc_device(device):
            with _no_modes():
                return func(*args, **kwargs)
        dtype = b.get("dtype") or (like.dtype if like is not None else None)
        base = fname.split(".")[0]
        if base.startswith("arange"):
            start, end, step = b.get("start", 0), b.get("end"), b.get("step", 1)
            if dtype is None:
                dtype = torch.int64 if all(isinstance(v, int) for v in (start, end, step)) \
                    else torch.get_default_dtype()
            return self.wrap(_C.arange(self._c, float(start), float(end), float(step), t2x_dtype(dtype)))
        if base == "scalar_tensor":
            return self.wrap(_C.full(self._c, (), float(b["s"]), t2x_dtype(dtype or torch.get_default_dtype())))
        size = b.get("size") if fname not in _LIKE else like.shape
        value = 0.0
        if "ones" in base:
            value = 1.0
        elif "full" in base:
            value = b["fill_value"]
            if dtype is None:
                dtype = torch.int64 if isinstance(value, int) and not isinstance(value, bool) else \
                    (torch.bool if isinstance(value, bool) else torch.get_default_dtype())
        if dtype is None:
            dtype = torch.get_default_dtype()
        return self.wrap(_C.full(self._c, tuple(operator.index(s) for s in size), float(value), t2x_dtype(dtype)))

    def _to_copy(self, func, args, kwargs):
        b = self._bind(func, args, kwargs)
        t = b["self"]
        dtype = b.get("dtype")
        device = b.get("device")
        if isinstance(t, Tensor):
            if device is not None and not _is_txc_device(device):
                r = self.to_torch(t, dtype)
                if torch.device(device).type != "cpu":
                    with _no_modes():
                        r = r.to(device)
                return r
            if dtype is not None and dtype != t.dtype:
                return self.wrap(_C.call("to_dtype", t._elem, t2x_dtype(dtype)))
            if func is aten.lift_fresh.default:
                return t
            return self.wrap(_C.call("clone", t._elem))
        if _is_txc_device(device):
            return self.to_txc(t, dtype)
        with _no_modes():
            return func(*args, **kwargs)

    def dispatch_function(self, func, args, kwargs):
        """The TorchFunctionMode's part: F.scaled_dot_product_attention and F.linear whole, and
        Tensor.to / torch.tensor with device 'txc'; NotImplemented lets torch run the function."""
        if func in self._overrides:
            with self._function_mode:
                return self._overrides[func](*args, **kwargs)
        name = getattr(func, "__name__", None)
        row = _FUNCTION_ROWS.get(func)
        if row is not None:
            op, params, slots = row[0], row[1], row[2]
            b = dict(zip(params.split(), args))
            b.update(kwargs)
            if any(isinstance(v, Tensor) for v in b.values()) and self._row_applies((op, slots, *row[3:]), b):
                if self.config.debug_accuracy_for_each_op:
                    return NotImplemented  # checked per aten op
                try:
                    return self.wrap(self._call_row((op, slots), b, name))
                except (TxcError, _C.TxcError):
                    if any(isinstance(v, torch.Tensor) and not isinstance(v, Tensor) and v.dim() > 0
                           for v in b.values()):
                        raise
                    return NotImplemented
            if func is F.layer_norm:
                r = self._layer_norm_trailing(b)
                if r is not None:
                    return r
            return NotImplemented
        if func is torch.Tensor.to:
            return self._tensor_to(args, kwargs)
        if func is torch.Tensor.cpu and isinstance(args[0], Tensor):
            return self.to_torch(args[0])
        if func in _FACTORIES and _is_txc_device(kwargs.get("device")):
            # made on the CPU by torch, copied into a txc array (torch has no txc device guard)
            kw = dict(kwargs)
            kw["device"] = "cpu"
            with _no_modes():
                cpu = func(*args, **kw)
                if cpu.dtype not in _T2X:
                    raise TypeError(f"txc has no dtype {cpu.dtype}")
                return self._to_txc_plain(cpu)
        return NotImplemented

    def _layer_norm_trailing(self, b):
        """F.layer_norm over several trailing dims (normalized_shape = input.shape[-k:], k > 1)
        as txc's layer_norm over their product: the same mean and variance over the same
        elements (torch's native_layer_norm flattens them the same way), one kernel instead of
        the decomposition's reductions. None when it does not fit (then torch decomposes)."""
        x, ns = b.get("input"), b.get("normalized_shape")
        w, bias = b.get("weight"), b.get("bias")
        if not isinstance(x, Tensor) or ns is None or not (1 < len(ns) <= x.dim()):
            return None
        ns = [int(v) for v in ns]
        if list(x.shape[-len(ns):]) != ns or not all(
                v is None or (isinstance(v, Tensor) and list(v.shape) == ns) for v in (w, bias)):
            return None
        n = math.prod(ns)
        lead = list(x.shape[:-len(ns)])
        flat = lambda t: None if t is None else _C.call("reshape", t._elem, [n])
        eps = _ops_table.CONVERTERS["ln_eps"](b.get("eps"))
        y = _C.call("layer_norm", _C.call("reshape", x._elem, lead + [n]), flat(w), flat(bias), eps)
        return self.wrap(_C.call("reshape", y, list(x.shape)))

    def _tensor_to(self, args, kwargs):
        """Tensor.to(device, dtype, ...) / .to(dtype) / .to(other) (torch's overloads)."""
        t, rest = args[0], list(args[1:])
        device, dtype = kwargs.get("device"), kwargs.get("dtype")
        if rest and isinstance(rest[0], torch.Tensor):
            device, dtype = rest[0].device, rest[0].dtype
        else:
            rest = [a for a in rest if not isinstance(a, bool)]
            for a in rest:
                if isinstance(a, torch.dtype):
                    dtype = a
                elif isinstance(a, (str, torch.device, int)):
                    device = a
        if device is not None and not isinstance(device, torch.device):
            device = torch.device(device)
        if isinstance(t, Tensor):
            if device is not None and not _is_txc_device(device):
                r = self.to_torch(t, dtype)
                if device.type != "cpu":
                    with _no_modes():
                        r = r.to(device)
                return r
            if dtype is not None and dtype != t.dtype:
                return self.wrap(_C.call("to_dtype", t._elem, t2x_dtype(dtype)))
            return t
        if device is not None and _is_txc_device(device):
            return self.to_txc(t, dtype)
        return NotImplemented


class AccuracyError(AssertionError):
    pass


_NODEFAULT = object()
_to_dlpack = torch.utils.dlpack.to_dlpack
_C_SIGS = _C.op_names()


def _missing(fname):
    raise OperatorNotFound(f"txc: no functional form of aten::{fname}")


def _overload_name(func):
    """'add.Tensor', 'sin.default' (torch's OpOverload.__name__)."""
    return getattr(func, "__name__", None) or str(func)


def _rows(v):
    return v if isinstance(v, list) else [v]


_FACTORIES = {torch.tensor, torch.as_tensor, torch.zeros, torch.ones, torch.full, torch.empty, torch.arange,
              torch.rand, torch.randn, torch.randint, torch.linspace, torch.eye, torch.zeros_like,
              torch.ones_like, torch.full_like, torch.empty_like, torch.tril_indices}
_ATEN_ROWS = {k: _rows(v) for k, v in _ops_table.ATEN.items()}
_PRIMS_ROWS = {k: _rows(v) for k, v in _ops_table.PRIMS.items()}
_FUNCTION_ROWS = {getattr(F, k): v for k, v in _ops_table.FUNCTIONS.items()}
_FUNCTION_ROWS[torch.matmul] = ("matmul", "input other", "input other")

_DECOMP = None


def _decomposition(func):
    """PyTorch's decomposition of an op: the core-aten ones first (they produce aten ops the table
    maps), then any registered one (which may produce prims)."""
    global _DECOMP
    if _DECOMP is None:
        from torch._decomp import core_aten_decompositions, decomposition_table
        _DECOMP = (core_aten_decompositions(), decomposition_table)
    return _DECOMP[0].get(func) or _DECOMP[1].get(func)


class _no_modes:
    """Torch's dispatch and function modes off (the txc ones included) inside the block."""
    __slots__ = ("_d", "_f")

    def __enter__(self):
        from torch.utils._python_dispatch import _disable_current_modes
        self._d = _disable_current_modes()
        self._d.__enter__()
        self._f = torch._C.DisableTorchFunction()
        self._f.__enter__()
        return self

    def __exit__(self, *exc):
        self._f.__exit__(*exc)
        return self._d.__exit__(*exc)


# ---- generic handlers for ops whose result is not one txc call ----------------

def _write(env, dst, src):
    """dst[...] = src (broadcast, converted): torch's in-place semantics. Concrete arrays: a strided
    copy into dst's elements. Traced (inside txc.jit): one index_copy_ over dst's elements, which the
    plan keeps as a write into the caller's input (donation)."""
    e = dst._elem
    if not e.is_traced and not src.is_traced:
        e.copy_(src)
        return
    if not e.is_contiguous:
        raise TxcError("txc.jit: an in-place write into a strided view of a traced tensor; only contiguous "
                       "tensors (the cache itself) can be written in place")
    n = math.prod(e.shape)
    s = src if src.dtype == e.dtype else _C.call("to_dtype", src, e.dtype)
    s = _C.call("contiguous", _C.call("expand", s, e.shape))
    s = _C.call("unsqueeze", s, 0) if e.ndim == 0 else _C.call("reshape", s, [n])
    idx = _C.arange(env._c, 0.0, float(n), 1.0, "int64")
    flat = _C.call("unsqueeze", e, 0) if e.ndim == 0 else _C.call("view", e, [n])
    _C.call("index_copy_", flat, 0, idx, s)

def _same(env, func, b):
    t = b["self"]
    return Tensor(t._elem, env)


def _copy_(env, func, b):
    dst, src = b["self"], b["src"]
    s = env._x(src, dst._elem.dtype) if isinstance(src, Tensor) else env._x(
        src.to(dst.dtype) if isinstance(src, torch.Tensor) and src.dim() > 0 else src, dst._elem.dtype)
    if isinstance(src, torch.Tensor) and not isinstance(src, Tensor) and src.dim() > 0:
        s = _C.from_dlpack(src.contiguous(), env._c, True)
    _write(env, dst, s)
    return dst


def _fill_(env, func, b):
    t = b["self"]
    v = b["value"]
    v = v.item() if isinstance(v, torch.Tensor) else v
    _write(env, t, _C.full(env._c, (), float(v), t._elem.dtype))
    return t


def _zero_(env, func, b):
    t = b["self"]
    _write(env, t, _C.full(env._c, (), 0.0, t._elem.dtype))
    return t


def _item(env, func, b):
    return b["self"]._elem.item()


def _add_alpha(env, func, b):
    """add/sub with alpha != 1: self + alpha * other."""
    op = "add" if func.__name__.startswith("add") else "sub"
    o = b["other"]
    scaled = _C.call("mul_scalar", env._x(o, b["self"]._elem.dtype), float(b["alpha"]))
    return env.wrap(_C.call(op, env._x(b["self"]), scaled))


def _max_dim(env, func, b):
    t, dim, keep = env._x(b["self"]), b["dim"], b.get("keepdim", False)
    return (env.wrap(_C.call("max", t, dim, keep)), env.wrap(_C.call("argmax", t, dim, keep)))


def _squeeze_dims(env, func, b):
    e = b["self"]._elem
    for d in sorted((d % max(e.ndim, 1) for d in b["dim"]), reverse=True):
        e = _C.call("squeeze", e, d)
    return env.wrap(e)


def _split_with_sizes(env, func, b):
    t = b["self"]._elem
    dim = b.get("dim", 0)
    out, start = [], 0
    for s in b["split_sizes"]:
        out.append(env.wrap(_C.call("narrow", t, dim, start, s)))
        start += s
    return out


def _split(env, func, b):
    t = b["self"]._elem
    dim = b.get("dim", 0)
    n = t.shape[dim]
    size = b["split_size"]
    return [env.wrap(_C.call("narrow", t, dim, s, min(size, n - s))) for s in range(0, n, size)]


def _var(env, func, b):
    """prims::var (what torch's decompositions of var, var_mean, std and native_layer_norm
    produce): sum((x - mean(x))^2) / (N - correction) over `dims` (None: all), in txc's mean,
    sub, mul and sum; torch.var's definition."""
    x = b["inp"]._elem
    dims = b.get("dims")
    dims = list(range(x.ndim)) if dims is None else [int(d) % max(x.ndim, 1) for d in dims]
    corr = b.get("correction")
    corr = 1.0 if corr is None else float(corr)
    n = math.prod(x.shape[d] for d in dims) if dims else 1
    d = _C.call("sub", x, _C.call("mean", x, dims, True))
    s = _C.call("sum", _C.call("mul", d, d), dims, False)
    out = _C.call("mul_scalar", s, 1.0 / (n - corr) if n > corr else float("nan"))
    dt = b.get("output_dtype")
    return env.wrap(out if dt is None or t2x_dtype(dt) == out.dtype else _C.call("to_dtype", out, t2x_dtype(dt)))


def _broadcast_in_dim(env, func, b):
    """prims::broadcast_in_dim(a, shape, broadcast_dimensions): a's dim i becomes dim
    broadcast_dimensions[i] of `shape`, the others size 1, then expanded (torch._refs)."""
    x, shape, bd = b["a"]._elem, [int(v) for v in b["shape"]], [int(v) for v in b["broadcast_dimensions"]]
    mid = [1] * len(shape)
    for i, d in enumerate(bd):
        mid[d] = x.shape[i]
    return env.wrap(_C.call("expand", _C.call("reshape", x, mid), shape))


_SPECIAL = {
    "detach.default": _same, "alias.default": _same,
    "copy_.default": _copy_, "fill_.Scalar": _fill_, "zero_.default": _zero_,
    "_local_scalar_dense.default": _item,
    "max.dim": _max_dim, "add.Tensor": _add_alpha, "sub.Tensor": _add_alpha, "squeeze.dims": _squeeze_dims,
    "split_with_sizes.default": _split_with_sizes, "split.Tensor": _split,
}
_PRIMS_SPECIAL = {"var.default": _var, "broadcast_in_dim.default": _broadcast_in_dim}
