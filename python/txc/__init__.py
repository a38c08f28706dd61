"""txc for PyTorch: torch tensors over txc arrays, every op run by txc's C op table.

    import torch, txc
    env = txc.default_env()
    with env:
        x = torch.ones((4, 4)).to('txc')
        print(torch.matmul(x, x))

As torchax makes JAX a PyTorch backend, this makes the txc C runtime one: a
txc.Tensor (a torch wrapper subclass) holds a txc array (`_elem`) and its
environment (`_env`); inside `with env:` a TorchDispatchMode maps each aten
op to the C op table (txc/_ops_table.py); txc.jit (txc.interop.jax_jit)
traces a torch function into a compiled txc plan.
"""
import operator
import threading

import torch

from . import _C
from .tensor import AccuracyError, Environment, OperatorNotFound, Tensor, TxcError  # noqa: F401
from . import device_module as _device_module
from . import interop  # noqa: F401

__version__ = "0.1.0"

from . import tensor as _tensor

# torch has one privateuse1 backend per process: 'txc' unless another package (torchax's 'jax')
# took it first, then txc tensors report that name and `.to(name)` moves to txc
if torch._C._get_privateuse1_backend_name() == "privateuseone":
    torch.utils.rename_privateuse1_backend("txc")
    torch._register_device_module("txc", _device_module)
_tensor.DEVICE_NAME = torch._C._get_privateuse1_backend_name()

Array = _C.Array

_env = None
_env_lock = threading.Lock()


def default_env():
    """The process's default Environment (over txc_env_default())."""
    global _env
    if _env is None:
        with _env_lock:
            if _env is None:
                _env = Environment()
    return _env


def enable_globally():
    default_env().__enter__()


def disable_globally():
    default_env().__exit__(None, None, None)


def _shape(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = size[0]
    # torch's rules: sizes are integers (operator.index: a float is a TypeError), none negative
    shape = tuple(operator.index(s) for s in size)
    if any(d < 0 for d in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension "
                           f"{min(shape)}: {list(shape)}")
    return shape


def _dt(dtype):
    from .tensor import t2x_dtype
    return t2x_dtype(dtype if dtype is not None else torch.get_default_dtype())


def full(size, value, dtype=None, env=None):
    """A txc array of `size` filled with `value` (txc_full)."""
    env = env or default_env()
    return _C.full(env._c, tuple(size), float(value), _dt(dtype))


def zeros(*size, dtype=None, env=None):
    return full(_shape(size), 0.0, dtype, env)


def ones(*size, dtype=None, env=None):
    return full(_shape(size), 1.0, dtype, env)


def arange(start, end=None, step=1, dtype=None, env=None):
    env = env or default_env()
    if end is None:
        start, end = 0, start
    if dtype is None:
        dtype = torch.int64 if all(isinstance(v, int) for v in (start, end, step)) else torch.get_default_dtype()
    return _C.arange(env._c, float(start), float(end), float(step), _dt(dtype))


def from_dlpack(x, env=None, copy=False):
    """A txc array over any DLPack producer's CPU memory (zero copy unless `copy` or strided)."""
    env = env or default_env()
    return _C.from_dlpack(x, env._c, bool(copy))


def jit(fn, **kw):
    """txc.interop.jax_jit."""
    return interop.jax_jit(fn, **kw)


def register_static_cache_pytree():
    """Register transformers' StaticCache (5.x: layers holding keys, values and cumulative_length)
    as a pytree node, as the article registers it for torchax: its tensors become the leaves (jit
    inputs, updated in place by the plan), the config and sizes static. Idempotent."""
    from .hf import register_static_cache
    register_static_cache()
