"""Between torch and txc: views (zero copy) and the jit (txc.interop.jax_jit)."""
from torch.utils import _pytree as pytree

from . import _C
from .tensor import Tensor


def torch_view(x, env=None):
    """txc arrays (any pytree of them) as txc.Tensors, zero copy: the tensor's `_elem` is the
    very array (torchax's interop.torch_view)."""
    from . import default_env
    env = env or default_env()
    return pytree.tree_map_only(_C.Array, lambda a: Tensor(a, env), x)


def txc_view(x):
    """txc.Tensors (any pytree) as their txc arrays, zero copy (torchax's interop.jax_view)."""
    return pytree.tree_map_only(Tensor, lambda t: t._elem, x)


def jax_jit(fn, kwargs_for_jax_jit=None, fix_for_buffer_donation=False, **kw):
    """Compile a torch function into a cached txc plan (txc/jit.h); see txc.jit.Jit."""
    from ._jit import Jit
    opts = dict(kwargs_for_jax_jit or {})
    opts.update(kw)
    return Jit(fn, **opts)
