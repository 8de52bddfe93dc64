"""The cost of one ATen operator call: FLOPs, bytes read and written, and the kind of kernel it is.

Input is an operator call as torch.profiler records it with record_shapes=True, which is how
torch.openreg.record_activity() describes it too (name, shapes, dtypes, concrete inputs);
output sizes are not recorded, so each rule derives them from the operator's semantics. Not timing
(model.py turns a Cost into seconds) and not capture (which calls to price is the caller's choice).

Conventions. A multiply-add counts 2 FLOPs. Bytes are what the kernel moves to and from device memory,
each operand counted once (caches are the time model's business), at the dtype's element size.
cost_of prices the work a call does: for a composite operator (linear, matmul, conv2d, layer_norm,
scaled_dot_product_attention, zeros, to ...) that is also the work its children report, so a caller
prices either a call or its children, never both. Views and allocations cost nothing: no kernel runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

# Profiler dtype name -> (element bytes, precision key of the profile's peak rates).
DTYPES = {
    "double": (8, "fp64"),
    "float": (4, "fp32"),
    "c10::Half": (2, "fp16"),
    "c10::BFloat16": (2, "bf16"),
    "c10::Float8_e4m3fn": (1, "fp8"),
    "c10::Float8_e5m2": (1, "fp8"),
    "c10::Float8_e4m3fnuz": (1, "fp8"),
    "c10::Float8_e5m2fnuz": (1, "fp8"),
    "signed char": (1, "int8"),
    "unsigned char": (1, "int8"),
    "bool": (1, "fp32"),
    "short int": (2, "fp32"),
    "int": (4, "fp32"),
    "long int": (8, "fp32"),
    "c10::complex<float>": (8, "fp32"),
    "c10::complex<double>": (16, "fp64"),
}
# c10::ScalarType codes, as a `dtype=` argument appears among the concrete inputs.
SCALAR_TYPES = {0: "unsigned char", 1: "signed char", 2: "short int", 3: "int", 4: "long int", 5: "c10::Half",
                6: "float", 7: "double", 9: "c10::complex<float>", 10: "c10::complex<double>", 11: "bool",
                15: "c10::BFloat16", 23: "c10::Float8_e5m2", 24: "c10::Float8_e4m3fn"}
# A TensorList's dtype is not recorded; optimizer state is FP32 in the common (mixed-precision) case.
TENSOR_LIST_DTYPE = "float"

KINDS = ("matmul", "conv", "attention", "elementwise", "reduction", "norm", "copy", "index", "optimizer",
         "view", "default")


@dataclass(frozen=True)
class OpCall:
    """One operator call as the profiler records it; one entry per argument in each list.

    shapes: a tensor's sizes, [] for a non-tensor (and for a 0-dim tensor: its dtype tells them apart),
    a list of sizes for a TensorList (the profiler's structured_input_shapes()).
    dtypes: "float", "c10::Half", ... for a tensor; "Scalar", "ScalarList", "TensorList" or "" otherwise.
    concrete_inputs: the value of each scalar or int-list argument, None or "" for tensors.
    """

    name: str
    shapes: Sequence = ()
    dtypes: Sequence = ()
    concrete_inputs: Sequence = ()


@dataclass(frozen=True)
class MatrixShape:
    """The matrix product a matmul, convolution or attention kernel tiles: batch x (m x k) @ (k x n)."""

    batch: int
    m: int
    n: int
    k: float  # reduction depth; for attention the depth that makes 2*batch*m*n*k its FLOPs


@dataclass(frozen=True)
class Cost:
    flops: float
    bytes_read: float
    bytes_written: float
    kind: str
    known: bool = True  # False when no rule knew the operator and the default estimate was used
    precision: str = "fp32"  # which of the profile's peak rates applies
    matrix: MatrixShape | None = field(default=None, compare=False)
    transcendentals: float = 0.0  # exp, log, tanh, erf, ...: counted apart from FLOPs (special-function units)
    role: str = ""  # a matrix kernel's pass: "forward", "backward", "input_grad", "weight_grad", "input_weight_grad"

    @property
    def bytes(self) -> float:
        return self.bytes_read + self.bytes_written


def cost_of(call: OpCall) -> Cost:
    """FLOPs and bytes of one operator call; the default rule (known=False) for operators without one."""
    name = call.name.removeprefix("aten::")
    rule = _RULES.get(name) or _RULES.get(name.removesuffix("_"))
    if rule is None and name.startswith("_foreach_"):
        rule = _foreach
    if rule is None and name.startswith(COMPILED_KERNEL_PREFIX):
        rule = _compiled_kernel
    return (rule or _default)(name, _Args(call))


# ----------------------------------------------------------------------------------------- arguments

@dataclass(frozen=True)
class Tensor:
    shape: tuple[int, ...]
    dtype: str

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * element_size(self.dtype)


def element_size(dtype: str) -> int:
    return DTYPES.get(dtype, (4, "fp32"))[0]


def precision_of(dtype: str) -> str:
    """The profile peak that applies to a profiler dtype name ("c10::Half" -> "fp16")."""
    return DTYPES.get(dtype, (4, "fp32"))[1]


class _Args:
    """Positional view of a call: tensor or list of tensors or value at each argument position."""

    def __init__(self, call: OpCall):
        self.name = call.name.removeprefix("aten::")
        self.shapes = list(call.shapes)
        self.dtypes = list(call.dtypes)
        self.values = list(call.concrete_inputs) + [None] * (len(self.shapes) - len(call.concrete_inputs))
        plain = [dtype for dtype in self.dtypes if dtype in DTYPES]
        self.list_dtype = plain[0] if plain else TENSOR_LIST_DTYPE

    def __len__(self) -> int:
        return len(self.shapes)

    def tensor(self, index: int) -> Tensor | None:
        if index < len(self.dtypes) and self.dtypes[index] in DTYPES:
            return Tensor(tuple(self.shapes[index]), self.dtypes[index])
        return None

    def tensor_list(self, index: int) -> list[Tensor]:
        """A TensorList (or a list of optional tensors, recorded with dtype "") given as a list of shapes."""
        if index >= len(self.dtypes) or self.dtypes[index] not in ("TensorList", ""):
            return []
        shapes = self.shapes[index]
        if not all(isinstance(shape, list | tuple) for shape in shapes):
            return []
        return [Tensor(tuple(shape), self.list_dtype) for shape in shapes]

    def tensors(self) -> list[Tensor]:
        """Every tensor argument, in order, lists flattened."""
        found = []
        for index in range(len(self)):
            single = self.tensor(index)
            found.extend([single] if single else self.tensor_list(index))
        return found

    def value(self, index: int, default=None):
        value = self.values[index] if index < len(self.values) else None
        return default if value in (None, "") else value


def message_bytes(call: OpCall) -> int:
    """The size of a collective's message as nccl-tests counts it, from the collective operator's
    arguments: its largest tensor argument (a list of tensors counts as their sum): the buffer of an
    all_reduce or broadcast, the gathered output of an all_gather, the input of a reduce_scatter."""
    args = _Args(call)
    sizes = [_bytes([args.tensor(i)]) if args.tensor(i) else _bytes(args.tensor_list(i)) for i in range(len(args))]
    return max(sizes, default=0)


def _bytes(tensors) -> int:
    return sum(tensor.nbytes for tensor in tensors if tensor is not None)


def broadcast(*shapes: Sequence[int]) -> tuple[int, ...]:
    rank = max((len(shape) for shape in shapes), default=0)
    padded = [(1,) * (rank - len(shape)) + tuple(shape) for shape in shapes]
    return tuple(max(sizes) if min(sizes) != 0 else 0 for sizes in zip(*padded, strict=True))


def _cost(kind, flops, read, written, first: Tensor | None, matrix=None, known=True, transcendentals=0,
          role="") -> Cost:
    precision = precision_of(first.dtype) if first else "fp32"
    return Cost(float(flops), float(read), float(written), kind, known, precision, matrix, float(transcendentals),
                role)


# ----------------------------------------------------------------------------------- matrix products

def _matmul_rule(bias_at: int | None, left_at: int, right_at: int):
    """mm, bmm, addmm, baddbmm, mv, addmv, dot, matmul, linear: [..., m, k] @ [..., k, n] (+ bias)."""

    def rule(name: str, args: _Args) -> Cost:
        left, right = args.tensor(left_at), args.tensor(right_at)
        if name == "linear":  # weight is [n, k]
            right = Tensor(tuple(reversed(right.shape)), right.dtype)
        batch_shape, m, k, n = _matrix_dims(left.shape, right.shape)
        batch = math.prod(batch_shape)
        out_numel = batch * m * n
        bias = args.tensor(bias_at) if bias_at is not None else None
        flops = 2 * batch * m * n * k + (out_numel if bias else 0)
        written = out_numel * element_size(left.dtype)
        return _cost("matmul", flops, _bytes([left, right, bias]), written, left, MatrixShape(batch, m, n, k))

    return rule


def _matrix_dims(left: Sequence[int], right: Sequence[int]):
    """Batch shape, m, k, n of torch.matmul's semantics (1-D operands are a row and a column)."""
    left = (1, *left) if len(left) == 1 else tuple(left)
    right = (*right, 1) if len(right) == 1 else tuple(right)
    return broadcast(left[:-2], right[:-2]), left[-2], left[-1], right[-1]


def _scaled_mm(name: str, args: _Args) -> Cost:
    """_scaled_mm(a, b, scale_a, scale_b, bias, scale_result, out_dtype, ...): an FP8 product."""
    left, right = args.tensor(0), args.tensor(1)
    m, k, n = left.shape[0], left.shape[1], right.shape[1]
    out_dtype = SCALAR_TYPES.get(args.value(6), "c10::BFloat16")
    read = _bytes([left, right, args.tensor(2), args.tensor(3), args.tensor(4)])
    return _cost("matmul", 2 * m * n * k, read, m * n * element_size(out_dtype), left, MatrixShape(1, m, n, k))


# -------------------------------------------------------------------------------------- convolution

# Argument positions of stride, padding, dilation, transposed, output_padding, groups (None: absent).
_CONV_ARGS = {
    "convolution": (3, 4, 5, 6, 7, 8),
    "_convolution": (3, 4, 5, 6, 7, 8),
    "convolution_overrideable": (3, 4, 5, 6, 7, 8),
    "conv1d": (3, 4, 5, None, None, 6),
    "conv2d": (3, 4, 5, None, None, 6),
    "conv3d": (3, 4, 5, None, None, 6),
}


@dataclass(frozen=True)
class _Conv:
    batch: int
    in_channels: int
    out_channels: int
    in_spatial: tuple[int, ...]
    out_spatial: tuple[int, ...]
    kernel: tuple[int, ...]
    groups: int
    transposed: bool

    def matrix(self, gemms: int = 1) -> MatrixShape:
        """Implicit GEMM: each output (input, if transposed) position is a row of the product."""
        positions = math.prod(self.in_spatial if self.transposed else self.out_spatial)
        depth = self.in_channels // self.groups * math.prod(self.kernel)
        return MatrixShape(self.groups * gemms, self.batch * positions, self.out_channels // self.groups, depth)

    @property
    def flops(self) -> int:
        shape = self.matrix()
        return 2 * shape.batch * shape.m * shape.n * shape.k

    @property
    def out_shape(self) -> tuple[int, ...]:
        return (self.batch, self.out_channels, *self.out_spatial)


def _conv_geometry(input_shape, weight_shape, values, transposed) -> _Conv:
    stride, padding, dilation, output_padding, groups = values
    spatial = len(input_shape) - 2
    kernel = tuple(weight_shape[2:])
    stride, padding, dilation, output_padding = (_per_dim(v, spatial, d) for v, d in
                                                  ((stride, 1), (padding, 0), (dilation, 1), (output_padding, 0)))
    if transposed:
        out_channels = weight_shape[1] * groups
        out = tuple((i - 1) * s - 2 * p + d * (k - 1) + o + 1 for i, s, p, d, k, o in
                    zip(input_shape[2:], stride, padding, dilation, kernel, output_padding, strict=True))
    else:
        out_channels = weight_shape[0]
        out = tuple((i + 2 * p - d * (k - 1) - 1) // s + 1 for i, s, p, d, k in
                    zip(input_shape[2:], stride, padding, dilation, kernel, strict=True))
    return _Conv(input_shape[0], input_shape[1], out_channels, tuple(input_shape[2:]), out, kernel, groups,
                 transposed)


def _per_dim(value, spatial: int, default: int) -> tuple[int, ...]:
    if value in (None, ""):
        return (default,) * spatial
    values = list(value) if isinstance(value, list | tuple) else [value]
    return tuple(values) * spatial if len(values) == 1 else tuple(values)


def _conv_values(name: str, args: _Args, offset: int = 0):
    positions = _CONV_ARGS[name]
    stride, padding, dilation, transposed, output_padding, groups = (
        args.value(position + offset) if position is not None else None for position in positions)
    return (stride, padding, dilation, output_padding, groups or 1), bool(transposed)


def _convolution(name: str, args: _Args) -> Cost:
    """conv1d/2d/3d, convolution, _convolution, convolution_overrideable (input, weight, bias, ...)."""
    source, weight, bias = args.tensor(0), args.tensor(1), args.tensor(2)
    values, transposed = _conv_values(name, args)
    conv = _conv_geometry(source.shape, weight.shape, values, transposed)
    out_numel = math.prod(conv.out_shape)
    flops = conv.flops + (out_numel if bias else 0)
    written = out_numel * element_size(source.dtype)
    return _cost("conv", flops, _bytes([source, weight, bias]), written, source, conv.matrix(), role="forward")


def _convolution_backward(name: str, args: _Args) -> Cost:
    """convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
    output_padding, groups, output_mask): one product per gradient the mask asks for, plus the bias sum."""
    grad, source, weight = args.tensor(0), args.tensor(1), args.tensor(2)
    # convolution_backward_overrideable has no bias_sizes argument: everything after weight moves up one.
    at = 4 if name == "convolution_backward" else 3
    values = (args.value(at), args.value(at + 1), args.value(at + 2), args.value(at + 4), args.value(at + 5) or 1)
    conv = _conv_geometry(source.shape, weight.shape, values, bool(args.value(at + 3)))
    want_input, want_weight, want_bias = args.value(at + 6, [True, True, True])
    flops = read = written = 0
    if want_input:  # grad_output (x) weight -> grad_input
        flops, read, written = flops + conv.flops, read + grad.nbytes + weight.nbytes, written + source.nbytes
    if want_weight:  # grad_output (x) input -> grad_weight
        flops, read, written = flops + conv.flops, read + grad.nbytes + source.nbytes, written + weight.nbytes
    if want_bias:  # sum of grad_output over batch and positions
        flops, read = flops + grad.numel, read + grad.nbytes
        written += conv.out_channels * element_size(grad.dtype)
    gemms = max(1, int(bool(want_input)) + int(bool(want_weight)))
    role = "input_weight_grad" if want_input and want_weight else "input_grad" if want_input else "weight_grad"
    return _cost("conv", flops, read, written, grad, conv.matrix(gemms), role=role)


# ---------------------------------------------------------------------------------------- attention

# Operator -> (index of the query among the arguments, index of is_causal, backward?).
_ATTENTION = {
    "scaled_dot_product_attention": (0, 5, False),
    "_scaled_dot_product_attention_math": (0, 5, False),
    "_scaled_dot_product_flash_attention": (0, 4, False),
    "_scaled_dot_product_flash_attention_for_cpu": (0, 4, False),
    "_scaled_dot_product_efficient_attention": (0, 6, False),
    "_scaled_dot_product_cudnn_attention": (0, 6, False),
    "_scaled_dot_product_fused_attention_overrideable": (0, 5, False),  # a PrivateUse1 device's (openreg's)
    "_scaled_dot_product_flash_attention_backward": (1, 11, True),
    "_scaled_dot_product_flash_attention_for_cpu_backward": (1, 7, True),
    "_scaled_dot_product_efficient_attention_backward": (1, 11, True),
    "_scaled_dot_product_cudnn_attention_backward": (1, 14, True),
    "_scaled_dot_product_fused_attention_overrideable_backward": (1, 13, True),
}
# FlashAttention-2's backward recomputes the scores and runs five products for the forward's two.
ATTENTION_BACKWARD_FLOPS_RATIO = 2.5


def _attention(name: str, args: _Args) -> Cost:
    """Query [..., L, E], key [..., S, E], value [..., S, Ev]: 2*L*S*(E+Ev) FLOPs per head, fewer if causal."""
    query_at, causal_at, backward = _ATTENTION[name]
    query, key, value = (args.tensor(query_at + offset) for offset in range(3))
    heads = math.prod(broadcast(query.shape[:-2], key.shape[:-2]))
    length, depth = query.shape[-2], query.shape[-1]
    source_length, value_depth = key.shape[-2], value.shape[-1]
    pairs = _attended_pairs(length, source_length, bool(args.value(causal_at)))
    flops = 2 * heads * pairs * (depth + value_depth)
    out = Tensor((*query.shape[:-1], value_depth), query.dtype)
    logsumexp_bytes = heads * length * 4  # FP32, one per query row
    if backward:
        flops *= ATTENTION_BACKWARD_FLOPS_RATIO
        read = _bytes(args.tensors())  # grad_out, q, k, v, out, logsumexp (and any bias)
        written = _bytes([query, key, value])
    else:
        read = _bytes(args.tensors())
        written = out.nbytes + logsumexp_bytes
    matrix = MatrixShape(heads, length, value_depth, flops / (2 * heads * length * value_depth))
    return _cost("attention", flops, read, written, query, matrix, role="backward" if backward else "forward")


def _attended_pairs(length: int, source_length: int, causal: bool) -> int:
    """Query-key pairs that are computed; causal is PyTorch's top-left mask (row i sees keys 0..i)."""
    if not causal:
        return length * source_length
    full_rows = max(0, length - source_length)  # rows past the last key see every key
    counted = min(length, source_length)
    return counted * (counted + 1) // 2 + full_rows * source_length


# -------------------------------------------------------------------------------------- elementwise

_UNARY = {"abs", "neg", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos",
          "tan", "tanh", "sigmoid", "relu", "gelu", "silu", "mish", "erf", "erfinv", "reciprocal", "floor",
          "ceil", "round", "trunc", "sign", "clamp", "clamp_min", "clamp_max", "hardtanh", "leaky_relu", "elu",
          "softplus", "logical_not", "bitwise_not", "isnan", "isinf", "nan_to_num", "square", "hardsigmoid",
          "hardswish", "relu6", "threshold", "dropout", "native_dropout", "tril", "triu"}
_BINARY = {"add", "sub", "rsub", "mul", "div", "pow", "maximum", "minimum", "fmod", "remainder", "atan2",
           "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "bitwise_and",
           "bitwise_or", "bitwise_xor", "gelu_backward", "silu_backward", "sigmoid_backward", "tanh_backward",
           "threshold_backward", "hardtanh_backward", "leaky_relu_backward", "copysign", "xlogy", "masked_fill",
           "native_dropout_backward", "floor_divide"}
_TERNARY = {"addcmul", "addcdiv", "lerp", "where", "masked_scatter"}
_BOOLEAN_RESULT = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not",
                   "isnan", "isinf"}
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


def _write_only(name: str, args: _Args) -> Cost:
    """fill_, zero_, normal_, random_, zeros_like ... write their tensor; zeros, ones, full, randn,
    randint ... write a new one of the size list they are given, in the dtype that follows it."""
    target = args.tensor(0)
    if target is not None:
        return _cost("elementwise", 0, 0, target.nbytes, target)
    size_at = args.dtypes.index("ScalarList") if "ScalarList" in args.dtypes else None
    if size_at is None:
        return _cost("elementwise", 0, 0, 0, None, known=False)
    dtype_at = size_at + (2 if name.startswith("full") else 1)  # full(size, fill_value, dtype, ...)
    dtype = SCALAR_TYPES.get(args.value(dtype_at), "float")
    written = Tensor(tuple(args.value(size_at, [])), dtype)
    return _cost("elementwise", 0, 0, written.nbytes, written)


# --------------------------------------------------------------------------------------- reductions

_REDUCTIONS = {"sum", "mean", "amax", "amin", "max", "min", "prod", "var", "std", "var_mean", "std_mean",
               "norm", "linalg_vector_norm", "argmax", "argmin", "logsumexp", "all", "any", "count_nonzero",
               "nansum", "aminmax"}
_DIM_AT = {"norm": 2, "linalg_vector_norm": 2}
_REDUCTION_FLOPS = {"var": 3, "std": 3, "var_mean": 3, "std_mean": 3, "norm": 2, "linalg_vector_norm": 2,
                    "logsumexp": 3}
_INDEX_RESULT = {"argmax", "argmin"}


def _reduction(name: str, args: _Args) -> Cost:
    """Reads the input once, writes one element per kept position; no dim (or []) reduces everything."""
    if name in ("max", "min", "maximum", "minimum") and args.tensor(1) is not None:
        return _elementwise(name, args)  # max(a, b) is elementwise
    source = args.tensor(0)
    dims = args.value(_DIM_AT.get(name, 1))
    out_numel = source.numel // max(1, _reduced_numel(source.shape, dims))
    out_dtype = "long int" if name in _INDEX_RESULT else "bool" if name in ("all", "any") else source.dtype
    written = out_numel * element_size(out_dtype)
    if name in ("var_mean", "std_mean", "aminmax"):  # two results
        written *= 2
    elif name in ("max", "min") and dims is not None:  # values and their indices
        written += out_numel * element_size("long int")
    flops = source.numel * _REDUCTION_FLOPS.get(name, 1)
    return _cost("reduction", flops, source.nbytes, written, source)


def _reduced_numel(shape: Sequence[int], dims) -> int:
    if dims is None or dims == [] or not shape:
        return math.prod(shape)
    dims = dims if isinstance(dims, list) else [dims]
    return math.prod(shape[dim % len(shape)] for dim in dims)


def _scan(name: str, args: _Args) -> Cost:
    """cumsum, cumprod: read the input once, write a result of the same size."""
    source = args.tensor(0)
    return _cost("reduction", source.numel, source.nbytes, source.nbytes, source)


# --------------------------------------------------------------------------------- softmax and norms

# A row longer than what one block can keep on chip (48 KiB, CUDA's default shared memory per block)
# is read three times by PyTorch's softmax kernel: for the max, the sum of exponentials, the result.
SOFTMAX_ON_CHIP_ROW_BYTES = 48 * 1024
SOFTMAX_LONG_ROW_PASSES = 3
SOFTMAX_FLOPS_PER_ELEMENT = 5  # max, subtract, exp, sum, divide


def _softmax(name: str, args: _Args) -> Cost:
    """softmax, _softmax, log_softmax, _log_softmax, _safe_softmax (input, dim, ...)."""
    source = args.tensor(0)
    row = source.shape[args.value(1, -1) % len(source.shape)] if source.shape else 1
    passes = SOFTMAX_LONG_ROW_PASSES if row * element_size(source.dtype) > SOFTMAX_ON_CHIP_ROW_BYTES else 1
    return _cost("norm", SOFTMAX_FLOPS_PER_ELEMENT * source.numel, passes * source.nbytes, source.nbytes, source,
                 transcendentals=source.numel)  # one exp per element


def _softmax_backward(name: str, args: _Args) -> Cost:
    """_softmax_backward_data / _log_softmax_backward_data (grad_output, output, dim, input_dtype):
    a row sum of grad*output, then the gradient; long rows read both inputs twice."""
    grad, output = args.tensor(0), args.tensor(1)
    row = grad.shape[args.value(2, -1) % len(grad.shape)] if grad.shape else 1
    passes = 2 if row * element_size(grad.dtype) > SOFTMAX_ON_CHIP_ROW_BYTES else 1
    return _cost("norm", 4 * grad.numel, passes * _bytes([grad, output]), grad.nbytes, grad)


NORM_FLOPS_PER_ELEMENT = 8  # mean, variance, normalise, scale and shift
NORM_BACKWARD_FLOPS_PER_ELEMENT = 12
# name -> (index of weight, index of bias or None, index of `training` or None, statistics per ...).
# Layer and RMS norm keep a row on chip and read the input once; batch norm in training and group norm
# reduce across rows in one kernel and normalise in a second, reading it twice.
_NORM_ARGS = {
    "native_layer_norm": (2, 3, None, "row"),
    "layer_norm": (2, 3, None, "row"),
    "_fused_rms_norm": (2, None, None, "row"),
    "rms_norm": (2, None, None, "row"),
    "native_batch_norm": (1, 2, 5, "channel"),
    "_native_batch_norm_legit": (1, 2, 5, "channel"),
    "batch_norm": (1, 2, 5, "channel"),
    "native_group_norm": (1, 2, None, "group"),
    "group_norm": (2, 3, None, "group"),
}


def _norm(name: str, args: _Args) -> Cost:
    """Forward norms: read the input (once per pass) and the affine parameters, write the output and an
    FP32 mean and inverse deviation per normalised row, channel or group."""
    weight_at, bias_at, training_at, per = _NORM_ARGS[name]
    source = args.tensor(0)
    two_passes = per == "group" or (training_at is not None and bool(args.value(training_at)))
    params = [args.tensor(weight_at), args.tensor(bias_at) if bias_at is not None else None]
    read = (2 if two_passes else 1) * source.nbytes + _bytes(params)
    written = source.nbytes + 2 * _statistics_count(name, args, source) * 4
    return _cost("norm", NORM_FLOPS_PER_ELEMENT * source.numel, read, written, source)


def _statistics_count(name: str, args: _Args, source: Tensor) -> int:
    per = _NORM_ARGS[name][3]
    if per == "channel":
        return source.shape[1] if len(source.shape) > 1 else 1
    if per == "group":
        groups = args.value(6) if name == "native_group_norm" else args.value(1, 1)
        return source.shape[0] * groups
    normalized = args.value(1, list(source.shape[-1:]))
    return source.numel // max(1, math.prod(normalized))


# name -> (passes over grad_output and input, index of weight, number of parameter gradients).
_NORM_BACKWARD_ARGS = {
    "native_layer_norm_backward": (1, 5, 2),
    "_fused_rms_norm_backward": (1, 4, 1),
    "native_batch_norm_backward": (2, 2, 2),
    "native_group_norm_backward": (2, 4, 2),
}


def _norm_backward(name: str, args: _Args) -> Cost:
    """Backward norms: read grad_output and input (twice for batch and group norm: a reduction, then
    the gradient) and the saved statistics; write grad_input and the parameter gradients the
    output_mask asks for (each the weight's size)."""
    passes, weight_at, param_grads = _NORM_BACKWARD_ARGS[name]
    grad, source, weight = args.tensor(0), args.tensor(1), args.tensor(weight_at)
    saved = [tensor for tensor in args.tensors()[2:]]
    mask = args.value(len(args) - 1, [True] * (1 + param_grads))
    weight_bytes = weight.nbytes if weight is not None else 0
    written = (source.nbytes if mask[0] else 0) + weight_bytes * sum(bool(flag) for flag in mask[1:])
    read = passes * (grad.nbytes + source.nbytes) + _bytes(saved)
    return _cost("norm", NORM_BACKWARD_FLOPS_PER_ELEMENT * source.numel, read, written, grad)


# ---------------------------------------------------------------------------------- embedding, index

def _embedding(name: str, args: _Args) -> Cost:
    """embedding(weight [V, D], indices): read the indices and the rows they pick, write those rows."""
    weight, indices = args.tensor(0), args.tensor(1)
    rows = indices.numel * weight.shape[-1] * element_size(weight.dtype)
    return _cost("index", 0, indices.nbytes + rows, rows, weight)


def _embedding_backward(name: str, args: _Args) -> Cost:
    """embedding_dense_backward(grad [..., D], indices, num_weights, ...): zero a [V, D] gradient,
    then add each grad row into the row its index names."""
    grad, indices = args.tensor(0), args.tensor(1)
    num_weights = args.value(2, 0)
    table = num_weights * grad.shape[-1] * element_size(grad.dtype)
    return _cost("index", grad.numel, grad.nbytes + indices.nbytes + grad.nbytes, table + grad.nbytes, grad)


def _index_select(name: str, args: _Args) -> Cost:
    """index_select(self, dim, index [n]): the result is self with size n along dim."""
    source, index = args.tensor(0), args.tensor(2)
    dim = args.value(1, 0) % max(1, len(source.shape))
    picked = source.numel // max(1, source.shape[dim] if source.shape else 1) * index.numel
    picked_bytes = picked * element_size(source.dtype)
    return _cost("index", 0, index.nbytes + picked_bytes, picked_bytes, source)


def _gather(name: str, args: _Args) -> Cost:
    """gather(self, dim, index): the result has the index's shape."""
    source, index = args.tensor(0), args.tensor(2)
    picked_bytes = index.numel * element_size(source.dtype)
    return _cost("index", 0, index.nbytes + picked_bytes, picked_bytes, source)


def _scatter(name: str, args: _Args) -> Cost:
    """scatter, scatter_add, scatter_reduce (self, dim, index, src|value, ...): each index position
    writes one element (reading it first when it accumulates); out-of-place also copies self."""
    target, index, source = args.tensor(0), args.tensor(2), args.tensor(3)
    touched = index.numel * element_size(target.dtype)
    accumulates = "add" in name or "reduce" in name
    read = index.nbytes + (touched if source is not None else 0) + (touched if accumulates else 0)
    written = touched
    if not name.endswith("_"):
        read, written = read + target.nbytes, written + target.nbytes
    return _cost("index", index.numel if accumulates else 0, read, written, target)


def _index(name: str, args: _Args) -> Cost:
    """index(self, indices): the result is the broadcast index shape followed by the unindexed dims."""
    source = args.tensor(0)
    indices = args.tensor_list(1) or ([args.tensor(1)] if args.tensor(1) else [])
    if not indices:  # indices not recorded (flat profiler events): price like a copy of self
        return _cost("index", 0, source.nbytes, source.nbytes, source, known=False)
    index_shape = broadcast(*(index.shape for index in indices))
    picked = math.prod(index_shape) * math.prod(source.shape[len(indices):])
    picked_bytes = picked * element_size(source.dtype)
    return _cost("index", 0, _bytes(indices) + picked_bytes, picked_bytes, source)


def _index_put(name: str, args: _Args) -> Cost:
    """index_put_, _index_put_impl_ (self, indices, values, accumulate): each value lands on one place."""
    target, values = args.tensor(0), args.tensor(2)
    indices = args.tensor_list(1)
    accumulate = bool(args.value(3))
    read = _bytes(indices) + values.nbytes + (values.nbytes if accumulate else 0)
    written = values.nbytes
    if not name.endswith("_"):
        read, written = read + target.nbytes, written + target.nbytes
    return _cost("index", values.numel if accumulate else 0, read, written, target, known=bool(indices))


def _index_add(name: str, args: _Args) -> Cost:
    """index_add(self, dim, index, source, alpha): source rows added into the rows index names."""
    target, index, source = args.tensor(0), args.tensor(2), args.tensor(3)
    read, written = index.nbytes + 2 * source.nbytes, source.nbytes  # source, and the rows it lands on
    if not name.endswith("_"):
        read, written = read + target.nbytes, written + target.nbytes
    return _cost("index", source.numel, read, written, target)


# ------------------------------------------------------------------------------------------ pooling

def _pool_output(source: Tensor, args: _Args, kernel_at: int) -> tuple[tuple[int, ...], int]:
    """Output shape and window size of max_pool2d / avg_pool2d (self, kernel_size, stride, padding,
    [dilation,] ceil_mode ...): PyTorch's formula, stride defaulting to the kernel."""
    spatial = len(source.shape) - 2 if len(source.shape) == 4 else len(source.shape) - 1
    kernel = _per_dim(args.value(kernel_at), spatial, 1)
    stride = _per_dim(args.value(kernel_at + 1) or list(kernel), spatial, 1)
    padding = _per_dim(args.value(kernel_at + 2), spatial, 0)
    dilation = _per_dim(args.value(kernel_at + 3), spatial, 1) if "max" in args.name else (1,) * spatial
    ceil = bool(args.value(kernel_at + 4 if "max" in args.name else kernel_at + 3))
    rounding = math.ceil if ceil else math.floor
    out = tuple(rounding((size + 2 * p - d * (k - 1) - 1) / st) + 1 for size, k, st, p, d in
                zip(source.shape[-spatial:], kernel, stride, padding, dilation, strict=True))
    return (*source.shape[:-spatial], *out), math.prod(kernel)


def _pool(name: str, args: _Args) -> Cost:
    """max_pool2d_with_indices / avg_pool2d: read the input once, one comparison or addition per window
    element; write the output (and max pooling's int64 indices)."""
    source = args.tensor(0)
    shape, window = _pool_output(source, args, 1)
    out = Tensor(shape, source.dtype)
    written = out.nbytes + (out.numel * element_size("long int") if "max" in name else 0)
    return _cost("reduction", out.numel * window, source.nbytes, written, source)


def _pool_backward(name: str, args: _Args) -> Cost:
    """max_pool2d_with_indices_backward (grad_output, self, ..., indices) / avg_pool2d_backward
    (grad_output, self, ...): write a gradient of self's size, reading grad_output (and the indices)."""
    grad, source = args.tensor(0), args.tensor(1)
    indices = args.tensor(len(args) - 1) if "max" in name else None
    read = grad.nbytes + (indices.nbytes if indices is not None else 0)
    return _cost("reduction", grad.numel, read, source.numel * element_size(grad.dtype), grad)


def _adaptive_average(name: str, args: _Args) -> Cost:
    """_adaptive_avg_pool2d (self, output_size): each output the mean of its window of the input."""
    source = args.tensor(0)
    size = list(args.value(1, [1, 1]))
    out = Tensor((*source.shape[: len(source.shape) - len(size)], *size), source.dtype)
    return _cost("reduction", source.numel, source.nbytes, out.nbytes, source)


def _adaptive_average_backward(name: str, args: _Args) -> Cost:
    """_adaptive_avg_pool2d_backward (grad_output, self): spread each gradient over its window."""
    grad, source = args.tensor(0), args.tensor(1)
    return _cost("reduction", source.numel, grad.nbytes, source.numel * element_size(grad.dtype), grad)


# ------------------------------------------------------------------------------------------- copies

def _copy(name: str, args: _Args) -> Cost:
    """copy_(self, src): read src in its dtype, write self in its own."""
    target, source = args.tensor(0), args.tensor(1)
    return _cost("copy", 0, source.nbytes, target.nbytes, source)


def _to_copy(name: str, args: _Args) -> Cost:
    """_to_copy / to / type_as (self, dtype or other, ...): a cast, or a plain copy when no dtype is given.
    `to` and `type_as` into the tensor's own dtype return self and run nothing (a change of device shows
    up as their _to_copy and copy_ children)."""
    source, other = args.tensor(0), args.tensor(1)
    dtype = SCALAR_TYPES.get(args.value(1), source.dtype) if args.dtypes[1:2] == ["Scalar"] else source.dtype
    if name == "type_as" and other is not None:
        dtype = other.dtype
    if name in ("to", "type_as") and dtype == source.dtype:
        return _free(name, args)
    return _cost("copy", 0, source.nbytes, source.numel * element_size(dtype), source)


def _copy_from(name: str, args: _Args) -> Cost:
    """_copy_from(self, dst, non_blocking): copy_ as a backend implements it, source first."""
    source, target = args.tensor(0), args.tensor(1)
    return _cost("copy", 0, source.nbytes, target.nbytes, source)


def _cat(name: str, args: _Args) -> Cost:
    """cat(tensors, dim): read every tensor once, write them side by side."""
    parts = args.tensor_list(0)
    if not parts:
        return _default(name, args)
    return _cost("copy", 0, _bytes(parts), _bytes(parts), parts[0])


def _arange(name: str, args: _Args) -> Cost:
    """arange(end) / arange(start, end[, step]) ...: write one element per step; the dtype follows the
    bounds (int64 unless one is a float)."""
    numbers = [args.value(index) for index in range(len(args)) if args.dtypes[index] == "Scalar"]
    bounds = [number for number in numbers[:3] if isinstance(number, int | float) and not isinstance(number, bool)]
    if not bounds:
        return _default(name, args)
    start, end, step = (0, bounds[0], 1) if len(bounds) == 1 else (bounds[0], bounds[1], bounds[2] if
                                                                   len(bounds) > 2 else 1)
    count = max(0, math.ceil((end - start) / step)) if step else 0
    dtype = "float" if any(isinstance(b, float) for b in bounds) else "long int"
    written = Tensor((count,), dtype)
    return _cost("elementwise", count, 0, written.nbytes, written)


def _nll_loss(name: str, args: _Args) -> Cost:
    """nll_loss_forward(self, target, weight, reduction, ignore_index): read one score per row and the
    targets; write the loss (per row without reduction) and the total weight."""
    scores, target = args.tensor(0), args.tensor(1)
    rows = target.numel if target else 1
    written = (rows if args.value(3) == 0 else 1) * element_size(scores.dtype) + element_size(scores.dtype)
    return _cost("reduction", rows, rows * element_size(scores.dtype) + (target.nbytes if target else 0), written,
                 scores)


def _nll_loss_backward(name: str, args: _Args) -> Cost:
    """nll_loss_backward(grad_output, self, target, ...): write a gradient of self's size (zeros, and one
    element per row), read the targets."""
    scores, target = args.tensor(1), args.tensor(2)
    return _cost("elementwise", scores.numel, target.nbytes if target else 0, scores.nbytes, scores)


def _clone(name: str, args: _Args) -> Cost:
    """clone, contiguous (self): read and write the tensor once."""
    source = args.tensor(0)
    return _cost("copy", 0, source.nbytes, source.nbytes, source)


def _scalar_read(name: str, args: _Args) -> Cost:
    """item / _local_scalar_dense: one element read back to the host."""
    source = args.tensor(0)
    return _cost("copy", 0, element_size(source.dtype), 0, source)


# ---------------------------------------------------------------------------------------- optimizers

def _foreach(name: str, args: _Args) -> Cost:
    """_foreach_<op>[_] over TensorLists: the elementwise rule per tensor, summed; in-place ones write
    the first list. _foreach_norm is a reduction to one value per tensor."""
    lists = [args.tensor_list(index) for index in range(len(args)) if args.dtypes[index] == "TensorList"]
    first = lists[0] if lists else []
    op = name.removeprefix("_foreach_").removesuffix("_")
    numel = sum(tensor.numel for tensor in first)
    read = sum(_bytes(tensors) for tensors in lists)
    if op == "norm":
        return _cost("optimizer", 2 * numel, read, len(first) * 4, first[0] if first else None, known=bool(first))
    flops = numel * FLOPS_PER_ELEMENT.get(op, 1)
    return _cost("optimizer", flops, read, _bytes(first), first[0] if first else None, known=bool(first))


# FLOPs per parameter of one fused step: Adam(W) updates two moments, corrects their bias, takes a
# square root and a division, and decays the weight; SGD with momentum updates one buffer.
ADAM_FLOPS_PER_PARAMETER = 15
SGD_FLOPS_PER_PARAMETER = 4


def _fused_adam(name: str, args: _Args) -> Cost:
    """_fused_adam_ / _fused_adamw_ (params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps,
    lr, beta1, beta2, weight_decay, eps, amsgrad, ...): reads params, grads and both moments (and the
    running maxima with amsgrad); writes params and the moments."""
    params, grads, averages, squares, maxima = (args.tensor_list(index) for index in range(5))
    amsgrad = bool(args.value(11))
    state = [params, averages, squares] + ([maxima] if amsgrad else [])
    read = sum(_bytes(tensors) for tensors in state) + _bytes(grads)
    written = sum(_bytes(tensors) for tensors in state)
    flops = ADAM_FLOPS_PER_PARAMETER * sum(tensor.numel for tensor in params)
    return _cost("optimizer", flops, read, written, params[0] if params else None, known=bool(params))


def _fused_sgd(name: str, args: _Args) -> Cost:
    """_fused_sgd_ (params, grads, momentum_buffers, weight_decay, momentum, lr, ...): with momentum
    the buffers are read and written too."""
    params, grads, buffers = (args.tensor_list(index) for index in range(3))
    momentum = bool(args.value(4))
    state = [params] + ([buffers] if momentum else [])
    read = sum(_bytes(tensors) for tensors in state) + _bytes(grads)
    flops = (SGD_FLOPS_PER_PARAMETER if momentum else 2) * sum(tensor.numel for tensor in params)
    written = sum(_bytes(tensors) for tensors in state)
    return _cost("optimizer", flops, read, written, params[0] if params else None, known=bool(params))


# ---------------------------------------------------------------------------------- compiled kernels

# torch.compile's kernels for openreg (Inductor's C++ code generation) are named after the operators
# they fuse, "cpp_fused_add_gelu_mul_sum_0"; torch-openreg describes each launch as a call of that
# name whose arguments are the kernel's buffers.
COMPILED_KERNEL_PREFIX = "cpp_fused_"
_FUSED_REDUCTIONS = {"sum", "mean", "amax", "amin", "max", "min", "var", "std", "prod", "argmax", "argmin", "any",
                     "all", "logsumexp"}
_FUSED_NORMS = {"softmax", "norm", "layer", "batch", "group", "rms"}


def _compiled_kernel(name: str, args: _Args) -> Cost:
    """One fused group: each of its buffers moved once (Inductor passes outputs after inputs: the last
    buffer is written, the others read), and the arithmetic of the operators its name lists, per
    element of its largest buffer (transcendentals apart). A reduction or a norm in the group makes it
    one of those kernels."""
    tensors = args.tensors()
    if not tensors:
        return _cost("elementwise", 0, 0, 0, None, known=False)
    ops = name.removeprefix(COMPILED_KERNEL_PREFIX).split("_")
    numel = max(tensor.numel for tensor in tensors)
    flops = numel * sum(FLOPS_PER_ELEMENT.get(op, 1) for op in ops if not op.isdigit())
    transcendentals = numel * sum(TRANSCENDENTALS_PER_ELEMENT.get(op, 0) for op in ops)
    kind = "norm" if _FUSED_NORMS & set(ops) else "reduction" if _FUSED_REDUCTIONS & set(ops) else "elementwise"
    read, written = _bytes(tensors[:-1]), tensors[-1].nbytes
    return _cost(kind, flops, read, written, tensors[0], transcendentals=transcendentals)


# ------------------------------------------------------------------------------- free and default

_FREE = {"view", "_unsafe_view", "reshape", "_reshape_alias", "t", "transpose", "permute", "expand", "expand_as",
         "as_strided", "slice", "select", "unsqueeze", "squeeze", "flatten", "unflatten", "narrow", "alias",
         "detach", "lift_fresh", "view_as", "unbind", "split", "split_with_sizes", "chunk", "diagonal",
         "movedim", "swapaxes", "numpy_T", "mT", "resolve_conj", "resolve_neg", "empty", "empty_like",
         "empty_strided", "new_empty", "new_empty_strided", "resize", "set", "result_type", "size", "stride",
         "is_contiguous", "is_nonzero", "_has_compatible_shallow_copy_type", "record_stream", "unfold"}


def _free(name: str, args: _Args) -> Cost:
    """Views and allocations: metadata only, no kernel."""
    first = next(iter(args.tensors()), None)
    return _cost("view", 0, 0, 0, first)


def _default(name: str, args: _Args) -> Cost:
    """Any other operator: read every tensor argument, write as much as the largest of them (the usual
    same-shaped result; an in-place op writes its first argument). No FLOPs counted; known=False."""
    tensors = args.tensors()
    if not tensors:
        return _cost("default", 0, 0, 0, None, known=False)
    written = tensors[0].nbytes if name.endswith("_") else max(tensor.nbytes for tensor in tensors)
    return _cost("default", 0, _bytes(tensors), written, tensors[0], known=False)


def _table() -> dict[str, Callable[[str, _Args], Cost]]:
    rules: dict[str, Callable[[str, _Args], Cost]] = {}

    def add(names, rule):
        rules.update(dict.fromkeys(names, rule))

    add(["mm", "bmm", "matmul", "dot", "vdot", "mv"], _matmul_rule(None, 0, 1))
    add(["addmm", "baddbmm", "addmv"], _matmul_rule(0, 1, 2))
    add(["linear"], _matmul_rule(2, 0, 1))
    add(["_scaled_mm"], _scaled_mm)
    add(_CONV_ARGS, _convolution)
    add(["convolution_backward", "convolution_backward_overrideable"], _convolution_backward)
    add(_ATTENTION, _attention)
    add(_UNARY | _BINARY | _TERNARY, _elementwise)
    add(_WRITE_ONLY, _write_only)
    add(_REDUCTIONS, _reduction)
    add(["cumsum", "cumprod"], _scan)
    add(["softmax", "_softmax", "log_softmax", "_log_softmax", "_safe_softmax"], _softmax)
    add(["_softmax_backward_data", "_log_softmax_backward_data"], _softmax_backward)
    add(_NORM_ARGS, _norm)
    add(_NORM_BACKWARD_ARGS, _norm_backward)
    add(["embedding"], _embedding)
    add(["embedding_dense_backward", "embedding_backward"], _embedding_backward)
    add(["index_select"], _index_select)
    add(["gather"], _gather)
    add(["scatter", "scatter_add", "scatter_reduce"], _scatter)
    add(["index", "_unsafe_index"], _index)
    add(["index_put", "_index_put_impl"], _index_put)
    add(["index_add"], _index_add)
    add(["copy"], _copy)
    add(["_to_copy", "to", "type_as"], _to_copy)
    add(["clone", "contiguous"], _clone)
    add(["_copy_from", "_copy_from_and_resize"], _copy_from)
    add(["cat"], _cat)
    add(["max_pool2d_with_indices", "max_pool2d", "avg_pool2d"], _pool)
    add(["max_pool2d_with_indices_backward", "avg_pool2d_backward"], _pool_backward)
    add(["_adaptive_avg_pool2d", "adaptive_avg_pool2d"], _adaptive_average)
    add(["_adaptive_avg_pool2d_backward"], _adaptive_average_backward)
    add(["arange"], _arange)
    add(["nll_loss_forward", "nll_loss", "nll_loss2d_forward"], _nll_loss)
    add(["nll_loss_backward", "nll_loss2d_backward"], _nll_loss_backward)
    add(["item", "_local_scalar_dense"], _scalar_read)
    add(["_fused_adam", "_fused_adamw"], _fused_adam)
    add(["_fused_sgd"], _fused_sgd)
    add(_FREE, _free)
    return rules


_RULES = _table()
