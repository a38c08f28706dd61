"""The one mapping from aten overloads to txc's C op table.

Each row: aten overload name -> (txc op frontend, argument slots[, conditions]).
The txc op is a frontend of include/txc/ops.h, called through txc._C.call;
its signature (txc._C.op_names()) says what each slot must be. A slot is an
argument name of the aten schema, optionally with a converter after '|' (one
named '@name' also sees the other bound arguments: a default that depends on
the input's dtype), or a literal after '='. Conditions name schema arguments that must have the given
value for the row to apply ("@bool": every tensor argument is bool; "@last_dim": a
norm's normalized_shape is the input's last dim); a list
of rows is tried in order. When no row applies the op falls back to
PyTorch's decomposition, as an op txc lacks does.

In-place overloads (add_.Tensor, mul_.Scalar...) are not listed: they run
their functional row and write the result into self (torch semantics: views
of self see the change). The few ops whose result is not one txc call
(constructors, _to_copy, copy_, detach/alias, item, max.dim's pair) have
generic handlers in txc/tensor.py.
"""

INT64_MAX = (1 << 63) - 1

# converters named in slots
CONVERTERS = {
    "dims": lambda v: [] if v is None else ([v] if isinstance(v, int) else list(v)),
    "start": lambda v: 0 if v is None else int(v),
    "end": lambda v: INT64_MAX if v is None else int(v),
    "tanh": lambda v: v == "tanh",
    "scale": lambda v: float("nan") if v is None else float(v),
    "float": float,
    "ln_eps": lambda v: 1e-5 if v is None else float(v),  # F.layer_norm's default
    "int": int,
    "one": lambda v: v if isinstance(v, int) else (v[0] if len(v) == 1 else _several(v)),
}


# converters of the form '@name': they see the bound arguments too (f(value, bound))
BOUND_CONVERTERS = {
    # torch.cumsum / torch.sum's dtype=None: int64 for bool and integer inputs, else the input's
    "sum_dtype": lambda v, b: v if v is not None else (
        b["self"].dtype if b["self"].dtype.is_floating_point else __import__("torch").int64),
}


def _several(v):
    raise ValueError(f"txc: a reduction over several dims {list(v)}")

_UNARY = ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "silu", "relu",
          "logical_not"]
_BINARY = ["maximum", "minimum", "logical_and"]
_COMPARE = ["eq", "ne", "lt", "le", "gt", "ge"]

ATEN = {
    # views
    "view.default": ("view", "self size"),
    "_unsafe_view.default": ("reshape", "self size"),
    "reshape.default": ("reshape", "self shape"),
    "permute.default": ("permute", "self dims"),
    "transpose.int": ("transpose", "self dim0 dim1"),
    "t.default": ("transpose", "self =0 =1"),
    "slice.Tensor": ("slice", "self dim start|start end|end step"),
    "narrow.default": ("narrow", "self dim start length"),
    "select.int": ("select", "self dim index"),
    "expand.default": ("expand", "self size"),
    "unsqueeze.default": ("unsqueeze", "self dim"),
    "squeeze.dim": ("squeeze", "self dim"),
    "squeeze.default": ("squeeze_all", "self"),
    # copies
    "clone.default": ("clone", "self"),
    # arithmetic
    "add.Tensor": ("add", "self other", {"alpha": 1}),
    "add.Scalar": ("add_scalar", "self other|float", {"alpha": 1}),
    "sub.Tensor": ("sub", "self other", {"alpha": 1}),
    "sub.Scalar": ("sub_scalar", "self other|float", {"alpha": 1}),
    "rsub.Scalar": ("rsub_scalar", "self other|float", {"alpha": 1}),
    "mul.Tensor": ("mul", "self other"),
    "mul.Scalar": ("mul_scalar", "self other|float"),
    "div.Tensor": ("div", "self other"),
    "div.Scalar": ("div_scalar", "self other|float"),
    "pow.Tensor_Tensor": ("pow", "self exponent"),
    "pow.Tensor_Scalar": ("pow_scalar", "self exponent|float"),
    "gelu.default": ("gelu", "self approximate|tanh"),
    # selection
    "where.self": ("where", "condition self other"),
    "masked_fill.Scalar": ("masked_fill", "self mask value|float"),
    # reductions
    "sum.dim_IntList": ("sum", "self dim|dims keepdim", {"dtype": None}),
    "sum.default": ("sum", "self =[] =False", {"dtype": None}),
    "mean.dim": ("mean", "self dim|dims keepdim", {"dtype": None}),
    "mean.default": ("mean", "self =[] =False", {"dtype": None}),
    "amax.default": ("max", "self dim|one keepdim"),
    "argmax.default": [("argmax_all", "self", {"dim": None}), ("argmax", "self dim keepdim")],
    "max.default": ("max_all", "self"),
    "_softmax.default": ("softmax", "self dim", {"half_to_float": False}),
    "_log_softmax.default": ("log_softmax", "self dim", {"half_to_float": False}),
    # linear algebra, nn
    "mm.default": ("matmul", "self mat2"),
    "bmm.default": ("matmul", "self mat2"),
    "matmul.default": ("matmul", "self other"),
    "linear.default": ("linear", "input weight bias"),
    "embedding.default": ("embedding", "weight indices"),
    "rms_norm.default": ("rms_norm", "input weight eps|float"),
    "cat.default": ("cat", "tensors dim"),
    "stack.default": ("stack", "tensors dim"),
    "index_select.default": ("index_select", "self dim index"),
    "index_copy.default": ("index_copy", "self dim index source"),
    "index_copy_.default": ("index_copy_", "self dim index source"),
    "tril.default": ("tril", "self diagonal"),
    "triu.default": ("triu", "self diagonal"),
    "scaled_dot_product_attention.default": (
        "scaled_dot_product_attention", "query key value attn_mask is_causal scale|scale", {"dropout_p": 0.0}),
}
for _n in _UNARY:
    ATEN[_n + ".default"] = (_n, "self")
for _n in _BINARY:
    ATEN[_n + ".default"] = (_n, "self other")
for _n in _COMPARE:
    ATEN[_n + ".Tensor"] = (_n, "self other")
    ATEN[_n + ".Scalar"] = (_n, "self other")
# `&` / `|`: integer and bool tensors (generate()'s int64 unfinished_sequences & a bool mask)
ATEN["bitwise_and.Tensor"] = ("bitwise_and", "self other")
ATEN["bitwise_or.Tensor"] = ("bitwise_or", "self other")
ATEN["logical_or.default"] = ("logical_or", "self other")
ATEN["cumsum.default"] = ("cumsum", "self dim dtype|@sum_dtype")
ATEN["bitwise_not.default"] = ("logical_not", "self", {"@bool": True})

# torch functions intercepted before they reach aten (the TorchFunctionMode):
# composite ops that would otherwise decompose into several aten calls.
# name -> (txc op, positional argument names of the torch function, slots[, conditions])
FUNCTIONS = {
    "scaled_dot_product_attention": (
        "scaled_dot_product_attention",
        "query key value attn_mask dropout_p is_causal scale enable_gqa",
        "query key value attn_mask is_causal scale|scale", {"dropout_p": 0.0}),
    "linear": ("linear", "input weight bias", "input weight bias"),
    # GPT-2's LayerNorm: over the last dim ("@last_dim": normalized_shape is one size); over several
    # trailing dims it is txc/tensor.py's _layer_norm_trailing (the same op over their product)
    "layer_norm": ("layer_norm", "input normalized_shape weight bias eps", "input weight bias eps|ln_eps",
                   {"@last_dim": True}),
}

# prims (what some of PyTorch's decompositions produce: torch._refs), same txc ops
PRIMS = {"where.default": ("where", "pred a b"), "convert_element_type.default": ("to_dtype", "a dtype"),
         "sum.default": ("sum", "inp dims|dims =False", {"output_dtype": None})}
# prims::var (var, var_mean, std, native_layer_norm's decomposition) is txc/tensor.py's _var:
# mean, sub, mul, sum
for _n in _UNARY[:-1]:
    PRIMS[_n + ".default"] = (_n, "self")
for _n in _BINARY[:2] + _COMPARE + ["add", "sub", "mul", "div", "pow"]:
    PRIMS[_n + ".default"] = (_n, "self other")
