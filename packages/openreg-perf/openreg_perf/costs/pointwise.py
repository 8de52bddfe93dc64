"""Elementwise kernels, reductions, softmax and the normalisations."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .call import SCALAR_TYPES, Cost, Tensor, _Args, _bytes, _cost, broadcast, element_size
from .registry import rule

# -------------------------------------------------------------------------------------- elementwise

_UNARY = {"abs", "neg", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos",
          "tan", "tanh", "sigmoid", "relu", "gelu", "silu", "mish", "erf", "erfinv", "reciprocal", "floor",
          "ceil", "round", "trunc", "sign", "clamp", "clamp_min", "clamp_max", "hardtanh", "leaky_relu", "elu",
          "softplus", "logical_not", "bitwise_not", "isnan", "isinf", "isneginf", "isposinf", "isfinite",
          "nan_to_num", "square", "hardsigmoid", "hardswish", "relu6", "threshold", "dropout", "native_dropout",
          "tril", "triu"}
_BINARY = {"add", "sub", "rsub", "mul", "div", "pow", "maximum", "minimum", "fmod", "remainder", "atan2",
           "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "bitwise_and",
           "bitwise_or", "bitwise_xor", "gelu_backward", "silu_backward", "sigmoid_backward", "tanh_backward",
           "threshold_backward", "hardtanh_backward", "leaky_relu_backward", "copysign", "xlogy", "masked_fill",
           "native_dropout_backward", "floor_divide"}
_TERNARY = {"addcmul", "addcdiv", "lerp", "where", "masked_scatter"}
_BOOLEAN_RESULT = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not",
                   "isnan", "isinf", "isneginf", "isposinf", "isfinite"}
# FLOPs per output element where the formula has more than one operation; every other op counts 1.
FLOPS_PER_ELEMENT = {"addcmul": 3, "addcdiv": 3, "lerp": 3, "gelu": 8, "silu": 4, "sigmoid": 4, "tanh": 4,
                     "softplus": 4, "elu": 4, "mish": 6, "gelu_backward": 10, "silu_backward": 6}
# Transcendentals per output element (special-function work, priced apart from FLOPs).
TRANSCENDENTALS_PER_ELEMENT = {"exp": 1, "exp2": 1, "expm1": 1, "log": 1, "log2": 1, "log10": 1, "log1p": 1,
                               "sin": 1, "cos": 1, "tan": 1, "tanh": 1, "sigmoid": 1, "gelu": 1, "silu": 1,
                               "erf": 1, "erfinv": 1, "softplus": 2, "elu": 1, "mish": 3, "pow": 2, "rsqrt": 1,
                               "sqrt": 1, "atan2": 1, "gelu_backward": 2, "silu_backward": 1, "xlogy": 1}
# Writers that read nothing: fills and the random generators.
_WRITE_ONLY = {"fill", "zero", "normal", "uniform", "random", "bernoulli", "exponential", "zeros", "ones",
               "full", "zeros_like", "ones_like", "full_like", "randn", "rand", "randint", "randn_like",
               "rand_like", "new_zeros", "new_ones", "new_full"}


@rule(*(_UNARY | _BINARY | _TERNARY))
def _elementwise(name: str, args: _Args) -> Cost:
    """Unary, binary, ternary with broadcasting. Tensors past the operator's arity are out= results;
    an in-place op (name ends in "_") writes its first input, which it also reads."""
    base = name.removesuffix("_")
    arity = 1 if base in _UNARY else 2 if base in _BINARY else 3
    tensors = [args.tensor(index) for index in range(len(args)) if args.tensor(index)]
    inputs, outputs = tensors[:arity], tensors[arity:]
    shape = broadcast(*(tensor.shape for tensor in inputs))
    out_dtype = "bool" if base in _BOOLEAN_RESULT else inputs[-1 if base == "where" else 0].dtype
    numel = math.prod(shape)
    written = outputs[0].nbytes if outputs else numel * element_size(out_dtype)
    return _cost("elementwise", numel * FLOPS_PER_ELEMENT.get(base, 1), _bytes(inputs), written, inputs[0],
                 transcendentals=numel * TRANSCENDENTALS_PER_ELEMENT.get(base, 0))


@rule(*_WRITE_ONLY)
def _write_only(name: str, args: _Args) -> Cost:
    """fill_, zero_, normal_, random_, zeros_like ... write their tensor; zeros, ones, full, randn,
    randint ... write a new one of the size list they are given, in the dtype that follows it."""
    target = args.tensor("self")
    if target is not None:
        return _cost("elementwise", 0, 0, target.nbytes, target)
    size = args.value("size")
    if size is None:
        return _cost("elementwise", 0, 0, 0, None, known=False)
    dtype = SCALAR_TYPES.get(args.value("dtype"), "float")
    written = Tensor(tuple(size), dtype)
    return _cost("elementwise", 0, 0, written.nbytes, written)


# --------------------------------------------------------------------------------------- reductions

_REDUCTIONS = {"sum", "mean", "amax", "amin", "max", "min", "prod", "var", "std", "var_mean", "std_mean",
               "norm", "linalg_vector_norm", "argmax", "argmin", "logsumexp", "all", "any", "count_nonzero",
               "nansum", "aminmax"}
_REDUCTION_FLOPS = {"var": 3, "std": 3, "var_mean": 3, "std_mean": 3, "norm": 2, "linalg_vector_norm": 2,
                    "logsumexp": 3}
_INDEX_RESULT = {"argmax", "argmin"}


# From this many inputs per output, PyTorch's reduction shares an output between blocks: a sum of all
# 65,536 elements did on the H100 and H200, of 16,384 did not (tools/bench/measured: 7.4 against 3.3 us).
SHARED_OUTPUT_INPUTS = 32768


@rule(*_REDUCTIONS)
def _reduction(name: str, args: _Args) -> Cost:
    """Reads the input once, writes one element per kept position; no dim (or []) reduces everything."""
    if name in ("max", "min", "maximum", "minimum") and args.tensor("other") is not None:
        return _elementwise(name, args)  # max(a, b) is elementwise
    source = args.tensor("self")
    dims = args.value("dim")
    out_numel = source.numel // max(1, _reduced_numel(source.shape, dims))
    out_dtype = "long int" if name in _INDEX_RESULT else "bool" if name in ("all", "any") else source.dtype
    written = out_numel * element_size(out_dtype)
    if name in ("var_mean", "std_mean", "aminmax"):  # two results
        written *= 2
    elif name in ("max", "min") and dims is not None:  # values and their indices
        written += out_numel * element_size("long int")
    flops = source.numel * _REDUCTION_FLOPS.get(name, 1)
    shared = _reduced_numel(source.shape, dims) >= SHARED_OUTPUT_INPUTS  # model.py's Note [Reductions]
    return _cost("reduction", flops, source.nbytes, written, source, role="reduce_shared" if shared else "reduce")


def _reduced_numel(shape: Sequence[int], dims) -> int:
    if dims is None or dims == [] or not shape:
        return math.prod(shape)
    dims = dims if isinstance(dims, list) else [dims]
    return math.prod(shape[dim % len(shape)] for dim in dims)


@rule("cumsum", "cumprod")
def _scan(name: str, args: _Args) -> Cost:
    """cumsum, cumprod: read the input once, write a result of the same size."""
    source = args.tensor("self")
    return _cost("reduction", source.numel, source.nbytes, source.nbytes, source)


# --------------------------------------------------------------------------------- softmax and norms

# A row longer than what one block can keep on chip (48 KiB, CUDA's default shared memory per block)
# is read three times by PyTorch's softmax kernel: for the max, the sum of exponentials, the result.
# The second and third reads come from L2 where the rows in flight fit in it (model.py's Note [Rows
# read again]).
SOFTMAX_ON_CHIP_ROW_BYTES = 48 * 1024
SOFTMAX_LONG_ROW_PASSES = 3
SOFTMAX_FLOPS_PER_ELEMENT = 5  # max, subtract, exp, sum, divide


# LITERALINCLUDE START: SOFTMAX_RULE
@rule("softmax", "_softmax", "log_softmax", "_log_softmax", "_safe_softmax")
def _softmax(name: str, args: _Args) -> Cost:
    """softmax, _softmax, log_softmax, _log_softmax, _safe_softmax (input, dim, ...)."""
    source = args.tensor("self")
    row = source.shape[args.value("dim", -1) % len(source.shape)] if source.shape else 1
    passes = SOFTMAX_LONG_ROW_PASSES if row * element_size(source.dtype) > SOFTMAX_ON_CHIP_ROW_BYTES else 1
    return _cost("norm", SOFTMAX_FLOPS_PER_ELEMENT * source.numel, passes * source.nbytes, source.nbytes, source,
                 transcendentals=source.numel, role="softmax", rows=source.numel // max(row, 1),  # one exp per element
                 reread=(passes - 1) * source.nbytes)
# LITERALINCLUDE END: SOFTMAX_RULE


@rule("_softmax_backward_data", "_log_softmax_backward_data")
def _softmax_backward(name: str, args: _Args) -> Cost:
    """_softmax_backward_data / _log_softmax_backward_data (grad_output, output, dim, input_dtype):
    a row sum of grad*output, then the gradient; long rows read both inputs twice."""
    grad, output = args.tensor("grad_output"), args.tensor("output")
    row = grad.shape[args.value("dim", -1) % len(grad.shape)] if grad.shape else 1
    passes = 2 if row * element_size(grad.dtype) > SOFTMAX_ON_CHIP_ROW_BYTES else 1
    both = _bytes([grad, output])
    return _cost("norm", 4 * grad.numel, passes * both, grad.nbytes, grad, role="softmax_backward",
                 rows=grad.numel // max(row, 1), reread=(passes - 1) * both)


NORM_FLOPS_PER_ELEMENT = 8  # mean, variance, normalise, scale and shift
NORM_BACKWARD_FLOPS_PER_ELEMENT = 12
# name -> what its statistics are kept per. Layer and RMS norm keep a row on chip and read the input
# once; batch norm in training and group norm reduce across rows in one kernel and normalise in a
# second, reading it twice.
_NORMS = {"native_layer_norm": "row", "layer_norm": "row", "_fused_rms_norm": "row", "rms_norm": "row",
          "native_batch_norm": "channel", "_native_batch_norm_legit": "channel", "batch_norm": "channel",
          "native_group_norm": "group", "group_norm": "group"}


@rule(*_NORMS)
def _norm(name: str, args: _Args) -> Cost:
    """Forward norms: read the input (once per pass) and the affine parameters, write the output and an
    FP32 mean and inverse deviation per normalised row, channel or group."""
    per = _NORMS[name]
    source = args.tensor("input")
    two_passes = per == "group" or bool(args.value("training"))
    params = [args.tensor("weight"), args.tensor("bias")]
    read = (2 if two_passes else 1) * source.nbytes + _bytes(params)
    statistics = _statistics_count(name, args, source)
    written = source.nbytes + 2 * statistics * 4
    rows = statistics if per == "row" else 0
    return _cost("norm", NORM_FLOPS_PER_ELEMENT * source.numel, read, written, source, rows=rows)


def _statistics_count(name: str, args: _Args, source: Tensor) -> int:
    per = _NORMS[name]
    if per == "channel":
        return source.shape[1] if len(source.shape) > 1 else 1
    if per == "group":
        return source.shape[0] * (args.value("group") or args.value("num_groups", 1))
    normalized = args.value("normalized_shape", list(source.shape[-1:]))
    return source.numel // max(1, math.prod(normalized))


# name -> (passes over grad_output and input, number of parameter gradients).
_NORM_BACKWARDS = {
    "native_layer_norm_backward": (1, 2),
    "_fused_rms_norm_backward": (1, 1),
    "native_batch_norm_backward": (2, 2),
    "native_group_norm_backward": (2, 2),
}


@rule(*_NORM_BACKWARDS)
def _norm_backward(name: str, args: _Args) -> Cost:
    """Backward norms: read grad_output and input (twice for batch and group norm: a reduction, then
    the gradient) and the saved statistics; write grad_input and the parameter gradients the
    output_mask asks for (each the weight's size)."""
    passes, param_grads = _NORM_BACKWARDS[name]
    grad, source, weight = args.tensor("grad_out"), args.tensor("input"), args.tensor("weight")
    saved = [tensor for tensor in args.tensors()[2:]]
    mask = args.value("output_mask", [True] * (1 + param_grads))
    weight_bytes = weight.nbytes if weight is not None else 0
    written = (source.nbytes if mask[0] else 0) + weight_bytes * sum(bool(flag) for flag in mask[1:])
    read = passes * (grad.nbytes + source.nbytes) + _bytes(saved)
    return _cost("norm", NORM_BACKWARD_FLOPS_PER_ELEMENT * source.numel, read, written, grad)
