"""ONNX translations, written with onnxscript, for the custom operators that
torch-openreg defines (torch.ops.openreg.*). The exporter translates every
aten operator itself; only these are openreg's own. Not a kernel: a
translation builds ONNX nodes that compute what the device kernel computes.

Each translation is a plain Python function that the exporter traces with
its inputs as ONNX values of known dtype and shape. The values it creates
have no dtype yet while it traces, so every Python number is made a
constant of the input's dtype explicitly (op.CastLike), never left to be
guessed as float32.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
from onnxscript import ir
from onnxscript import opset18 as op

__all__ = ["translation_table"]


# LITERALINCLUDE START: ONNX_TRANSLATIONS
# openreg::swish (C++, CustomOps.cpp): x * sigmoid(x).
def swish(x):
    return op.Mul(x, op.Sigmoid(x))


# openreg::swish_backward: d/dx [x * s] = s * (1 + x * (1 - s)), s = sigmoid(x).
def swish_backward(grad_output, x):
    s, one = op.Sigmoid(x), op.CastLike(1.0, x)
    return op.Mul(grad_output, op.Mul(s, op.Add(one, op.Mul(x, op.Sub(one, s)))))


# openreg::softclip (Python, torch.library.custom_op): limit * tanh(x / limit).
# limit is a float argument of the operator, so a constant of the graph.
def softclip(x, limit: float):
    limit = op.CastLike(limit, x)
    return op.Mul(op.Tanh(op.Div(x, limit)), limit)


# openreg::softclip_backward: grad * (1 - tanh(x / limit)^2).
def softclip_backward(grad, x, limit: float):
    t = op.Tanh(op.Div(x, op.CastLike(limit, x)))
    return op.Mul(grad, op.Sub(op.CastLike(1.0, x), op.Mul(t, t)))


# openreg::all_finite (C++ fragment, Fragment.cpp): a 0-dim bool. x - x is 0
# for every finite value and NaN for inf and NaN, and NaN != NaN; this holds
# for integer tensors too (always finite), and counting the misses makes an
# empty tensor all finite, as torch's all() does.
def all_finite(x):
    difference = op.Sub(x, x)
    misses = op.Cast(op.Not(op.Equal(difference, difference)), to=ir.DataType.INT64)
    return op.Equal(op.ReduceSum(misses, keepdims=0), op.Constant(value_int=0))


# openreg::scaled_add (Python fragment added to the openreg namespace):
# x + alpha * y, with torch's type promotion, which ONNX does not do.
def scaled_add(x, y, alpha: float = 1.0):
    dtype = _promoted(x, y)
    x, y = op.Cast(x, to=dtype), op.Cast(y, to=dtype)
    return op.Add(x, op.Mul(y, op.CastLike(alpha, x)))
# LITERALINCLUDE END: ONNX_TRANSLATIONS


def _promoted(x: ir.Value, y: ir.Value) -> ir.DataType:
    """The ONNX dtype of torch.result_type(x, y), for values of known dtype and
    rank (rank matters: a 0-dim tensor does not promote a dimensioned one)."""
    def example(value: ir.Value) -> torch.Tensor:
        return torch.empty((1,) * len(value.shape), dtype=_TORCH_DTYPES[value.dtype])

    return _ONNX_DTYPES[torch.result_type(example(x), example(y))]


_TORCH_DTYPES = {
    ir.DataType.FLOAT16: torch.float16, ir.DataType.BFLOAT16: torch.bfloat16,
    ir.DataType.FLOAT: torch.float32, ir.DataType.DOUBLE: torch.float64,
}
_ONNX_DTYPES = {torch_dtype: onnx_dtype for onnx_dtype, torch_dtype in _TORCH_DTYPES.items()}

# Operator name in torch.ops.openreg -> its translation.
_TRANSLATIONS: dict[str, Callable] = {
    "swish": swish,
    "swish_backward": swish_backward,
    "softclip": softclip,
    "softclip_backward": softclip_backward,
    "all_finite": all_finite,
    "scaled_add": scaled_add,
}


# LITERALINCLUDE START: TRANSLATION_TABLE
def translation_table() -> dict[torch._ops.OpOverload, Callable]:
    """openreg's translations as torch.onnx.export's ``custom_translation_table``:
    ``torch.onnx.export(model, args, custom_translation_table=translation_table())``.

    Only operators registered in this process are listed: without torch-openreg
    loaded (TORCH_DEVICE_BACKEND_AUTOLOAD=0 and no ``import torch_openreg``, or a
    torch-openreg built for another torch) the table is empty and a warning
    says why, so exporting models that do not use openreg still works."""
    table = {}
    for name, translation in _TRANSLATIONS.items():
        packet = getattr(torch.ops.openreg, name, None)
        if packet is not None:
            table[packet.default] = translation
    if not table:
        warnings.warn("openreg's operators are not registered in this process (torch_openreg is not "
                      "loaded), so openreg_onnx has no translations to add; `import torch_openreg` "
                      "first to export models that use them", RuntimeWarning, stacklevel=2)
    return table
# LITERALINCLUDE END: TRANSLATION_TABLE

