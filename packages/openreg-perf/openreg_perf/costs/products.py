"""Matrix products, convolutions and attention: the kernels of the matrix units."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from .call import SCALAR_TYPES, Cost, MatrixShape, Tensor, _Args, _bytes, _cost, broadcast, element_size
from .registry import register, rule

# ----------------------------------------------------------------------------------- matrix products

def _matmul_rule(bias: str | None, left: str, right: str):
    """mm, bmm, addmm, baddbmm, mv, addmv, dot, matmul, linear: [..., m, k] @ [..., k, n] (+ bias), the
    arguments by their schema names."""
    left_name, right_name, bias_name = left, right, bias

    def rule(name: str, args: _Args) -> Cost:
        left, right = args.tensor(left_name), args.tensor(right_name)
        if name == "linear":  # weight is [n, k]
            right = Tensor(tuple(reversed(right.shape)), right.dtype)
        batch_shape, m, k, n = _matrix_dims(left.shape, right.shape)
        batch = math.prod(batch_shape)
        out_numel = batch * m * n
        bias = args.tensor(bias_name) if bias_name is not None else None
        # A complex multiply-add is four real multiplies and four adds.
        per_product = 8 if left.dtype.startswith("c10::complex") else 2
        flops = per_product * batch * m * n * k + (out_numel if bias else 0)
        written = out_numel * element_size(left.dtype)
        if out_numel == 0 or k == 0:  # the library reads nothing: an empty result, or one of zeros (and bias)
            return _cost("matmul", flops, _bytes([bias]) if out_numel else 0, written, left)
        return _cost("matmul", flops, _bytes([left, right, bias]), written, left, MatrixShape(batch, m, n, k))

    return rule


register(["mm", "bmm"], _matmul_rule(None, "self", "mat2"))
register(["matmul", "vdot"], _matmul_rule(None, "self", "other"))
register(["dot"], _matmul_rule(None, "self", "tensor"))
register(["mv"], _matmul_rule(None, "self", "vec"))
register(["addmm"], _matmul_rule("self", "mat1", "mat2"))
register(["baddbmm"], _matmul_rule("self", "batch1", "batch2"))
register(["addmv"], _matmul_rule("self", "mat", "vec"))
register(["linear"], _matmul_rule("bias", "input", "weight"))


def _matrix_dims(left: Sequence[int], right: Sequence[int]):
    """Batch shape, m, k, n of torch.matmul's semantics (1-D operands are a row and a column)."""
    left = (1, *left) if len(left) == 1 else tuple(left)
    right = (*right, 1) if len(right) == 1 else tuple(right)
    return broadcast(left[:-2], right[:-2]), left[-2], left[-1], right[-1]


@rule("_int_mm")
def _int_mm(name: str, args: _Args) -> Cost:
    """_int_mm(self, mat2): an INT8 product with an INT32 result."""
    left, right = args.tensor("self"), args.tensor("mat2")
    m, k, n = left.shape[0], left.shape[1], right.shape[1]
    return _cost("matmul", 2 * m * n * k, _bytes([left, right]), m * n * 4, left, MatrixShape(1, m, n, k))


@rule("_scaled_mm")
def _scaled_mm(name: str, args: _Args) -> Cost:
    """_scaled_mm(a, b, scale_a, scale_b, bias, scale_result, out_dtype, ...): an FP8 product."""
    left, right = args.tensor("self"), args.tensor("mat2")
    m, k, n = left.shape[0], left.shape[1], right.shape[1]
    out_dtype = SCALAR_TYPES.get(args.value("out_dtype"), "c10::BFloat16")
    read = _bytes([left, right, args.tensor("scale_a"), args.tensor("scale_b"), args.tensor("bias")])
    return _cost("matmul", 2 * m * n * k, read, m * n * element_size(out_dtype), left, MatrixShape(1, m, n, k))


@rule("_grouped_mm")
def _grouped_mm(name: str, args: _Args) -> Cost:
    """_grouped_mm(self, mat2, offs, bias, out_dtype): a group of products in one kernel (a Mixture of
    Experts' layer). offs splits what is shared: 2-D self [T, K] with 3-D mat2 [G, K, N] splits the T rows
    among the groups, 3-D with 2-D splits the columns, 2-D with 2-D (the weight gradient, [G, M, N]) the
    shared K; 3-D with 3-D is a batch. The offsets are data: each group is taken to get an equal share."""
    left, right, offs = args.tensor("self"), args.tensor("mat2"), args.tensor("offs")
    three_d = left if len(left.shape) == 3 else right if len(right.shape) == 3 else None
    groups = three_d.shape[0] if three_d else offs.shape[0]
    m, k, n = left.shape[-2], left.shape[-1], right.shape[-1]
    if len(left.shape) == 2 and len(right.shape) == 3:
        m = math.ceil(m / groups)
    elif len(left.shape) == 3 and len(right.shape) == 2:
        n = math.ceil(n / groups)
    elif len(left.shape) == 2:
        k = math.ceil(k / groups)
    written = groups * m * n * element_size(SCALAR_TYPES.get(args.value("out_dtype"), left.dtype))
    return _cost("matmul", 2 * groups * m * n * k, _bytes([left, right, offs, args.tensor("bias")]), written, left,
                 MatrixShape(groups, m, n, k))


# -------------------------------------------------------------------------------------- convolution

CONVOLUTIONS = ("convolution", "_convolution", "convolution_overrideable", "conv1d", "conv2d", "conv3d")


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

    def matrix(self, gemms: int = 1, winograd: bool = False) -> MatrixShape:
        """Implicit GEMM: each output (input, if transposed) position is a row of the product. Winograd
        computes whole WINOGRAD_TILE x WINOGRAD_TILE blocks of outputs, also where the image ends inside one."""
        positions = math.prod(self.in_spatial if self.transposed else self.out_spatial)
        if winograd:
            positions = math.prod(math.ceil(side / WINOGRAD_TILE) * WINOGRAD_TILE for side in self.out_spatial)
        depth = self.in_channels // self.groups * math.prod(self.kernel)
        return MatrixShape(self.groups * gemms, self.batch * positions, self.out_channels // self.groups, depth)

    @property
    def ungrouped_channels(self) -> int:
        """The input channels where the convolution is ungrouped (model.py's Note [Unaligned channels]), else 0."""
        return self.in_channels if self.groups == 1 else 0

    @property
    def depthwise(self) -> bool:
        """Note [Depthwise convolutions]: each channel convolved alone (groups == input channels)."""
        return self.groups > 1 and self.groups == self.in_channels

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


def _conv_values(args: _Args):
    """(stride, padding, dilation, output_padding, groups) and transposed, by their schema names (conv2d
    has no transposed or output_padding)."""
    values = tuple(args.value(name) for name in ("stride", "padding", "dilation", "output_padding"))
    return (*values, args.value("groups") or 1), bool(args.value("transposed"))


# Note [Which convolutions run as Winograd]
# cuDNN computes a 3x3, stride-1, ungrouped FP32 convolution with a Winograd algorithm, which does up to
# 4x fewer multiplications than the direct product, when the input has enough channels to amortise
# its transforms; otherwise it runs an implicit GEMM. NeuSight's 3x3 stride-1 rows on the P100, P4, T4
# and V100 show it: with 64 input channels or more, 83 % of 4,776 ran Winograd kernels; with fewer,
# 25 % of 1,224 did. The two get their own factors on the FP32 GEMM level (conv_winograd_factor,
# conv_forward_factor). Matrix-unit convolutions run implicit GEMMs, and so do cuDNN 9's FP32 forward
# passes on an H200 (tools/bench/measured/kernels/2026-11-30_nvidia-h200_conv_kernels.csv: Ampere's
# sm80_xmma FFMA kernels, once an FFT, never Winograd): model.py runs the forward pass's implicit GEMM
# (Cost.as_gemm) on NVIDIA chips from Ampere on (NO_FP32_WINOGRAD). The weight gradients of those
# convolutions did run Winograd there (winograd_nonfused's WgradData, WgradDelta and WgradOutput around a
# cuBLAS SGEMM), in 27-36 % of the direct forward pass's time from 14 x 14 positions down: a weight
# gradient that runs as Winograd has its own factor (conv_weight_grad_winograd_factor), fitted to the
# H200's and H100's rows, on every chip. On the matrix units (TF32) every pass is an implicit GEMM.
# Note [Depthwise convolutions]
# A depthwise convolution (MobileNet's, ConvNeXt's 7 x 7) is as many products as channels, each one output
# channel deep and kernel-size long (3 x 3: 9): as a matrix kernel it would fill one column of 128 in each
# tile. Neither PyTorch's own depthwise kernels (FP32, BF16) nor cuDNN's (FP16) run it so: each thread
# computes outputs from the input and the few weights it reads, on the vector units. It is priced as a
# vector kernel: its FLOPs at the vector rate, its bytes at the elementwise bandwidth, whichever is longer.
WINOGRAD_MIN_CHANNELS = 64
WINOGRAD_TILE = 4  # cuDNN's F(4x4, 3x3): each block of 4 x 4 outputs is computed from 6 x 6 inputs


def _every_side(conv: _Conv, value, side: int) -> bool:  # stride, padding...: side in every dimension
    return all(each == side for each in _per_dim(value, len(conv.kernel), side))


def _runs_as_winograd(conv: _Conv, values, dtype: str) -> bool:
    stride, _, dilation, _, groups = values
    return (conv.kernel == (3, 3) and not conv.transposed and groups == 1 and _every_side(conv, stride, 1)
            and _every_side(conv, dilation, 1) and conv.in_channels >= WINOGRAD_MIN_CHANNELS and dtype == "float")


@rule(*CONVOLUTIONS)
def _convolution(name: str, args: _Args) -> Cost:
    """conv1d/2d/3d, convolution, _convolution, convolution_overrideable (input, weight, bias, ...)."""
    source, weight, bias = args.tensor("input"), args.tensor("weight"), args.tensor("bias")
    values, transposed = _conv_values(args)
    conv = _conv_geometry(source.shape, weight.shape, values, transposed)
    out_numel = math.prod(conv.out_shape)
    flops = conv.flops + (out_numel if bias else 0)
    written = out_numel * element_size(source.dtype)
    layout = _layout_copies(conv, values, args, [source, weight, Tensor(conv.out_shape, source.dtype)])
    gemm = _cost("conv", flops, _bytes([source, weight, bias]), written, source, conv.matrix(), role="forward",
                 layout=layout, channels=conv.ungrouped_channels)
    if conv.depthwise:
        return replace(gemm, matrix=None)
    if not _runs_as_winograd(conv, values, source.dtype):
        return gemm
    return replace(gemm, matrix=conv.matrix(winograd=True), role="forward_winograd", as_gemm=gemm)


@rule("convolution_backward", "convolution_backward_overrideable")
def _convolution_backward(name: str, args: _Args) -> Cost:
    """convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
    output_padding, groups, output_mask): one product per gradient the mask asks for, plus the bias sum."""
    grad, source, weight = args.tensor("grad_output"), args.tensor("input"), args.tensor("weight")
    values, transposed = _conv_values(args)
    conv = _conv_geometry(source.shape, weight.shape, values, transposed)
    want_input, want_weight, want_bias = args.value("output_mask", [True, True, True])
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
    # Each gradient is a cuDNN call of its own, which converts grad_output, its other operand and its result.
    converted = [grad, weight, source] * bool(want_input) + [grad, source, weight] * bool(want_weight)
    layout = _layout_copies(conv, values, args, converted)
    direct = _cost("conv", flops, read, written, grad, conv.matrix(gemms), role=role, layout=layout,
                   channels=conv.ungrouped_channels)
    if conv.depthwise:
        return replace(direct, matrix=None)
    if not (want_weight and _runs_as_winograd(conv, values, grad.dtype)):
        return direct
    return replace(direct, role=f"{role}_winograd", as_gemm=direct)


def _layout_copies(conv: _Conv, values, args: _Args, tensors: list[Tensor]) -> list[int]:
    """model.py's Note [Layout conversions]: the bytes of each tensor cuDNN converts between NCHW and NHWC
    around a matrix-unit kernel. None for channels-last tensors; for a convolution that is a matrix
    product of NCHW tensors as they are (1 x 1 kernel, stride 1, no padding, ungrouped); for a
    depthwise one in BF16 or FP32, which PyTorch runs with its own NCHW kernel, not cuDNN's; nor for
    a tensor whose two layouts are the same bytes (one channel, or one position: a 1 x 1 weight)."""
    stride, padding, _, _, groups = values
    product = (_every_side(conv, conv.kernel, 1) and _every_side(conv, stride, 1) and _every_side(conv, padding, 0)
               and groups == 1)
    depthwise = groups > 1 and groups == conv.in_channels and args.tensor("input").dtype != "c10::Half"
    if args.channels_last or product or depthwise:
        return []
    return [tensor.nbytes for tensor in tensors if tensor.shape[1] > 1 and math.prod(tensor.shape[2:]) > 1]


# ---------------------------------------------------------------------------------------- attention

# The fused attention operators, forward and backward (each reads query, key, value and is_causal by name).
ATTENTION_FORWARD = ("scaled_dot_product_attention", "_scaled_dot_product_attention_math",
                     "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_for_cpu",
                     "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
                     "_scaled_dot_product_fused_attention_overrideable")  # the last: a PrivateUse1 device's
ATTENTION_BACKWARD = tuple(f"{name}_backward" for name in ATTENTION_FORWARD[2:])
# FlashAttention-2's backward recomputes the scores and runs five products for the forward's two.
ATTENTION_BACKWARD_FLOPS_RATIO = 2.5


@rule(*ATTENTION_FORWARD, *ATTENTION_BACKWARD)
def _attention(name: str, args: _Args) -> Cost:
    """Query [..., L, E], key [..., S, E], value [..., S, Ev]: 2*L*S*(E+Ev) FLOPs per head, fewer if causal."""
    backward = name in ATTENTION_BACKWARD
    query, key, value = args.tensor("query"), args.tensor("key"), args.tensor("value")
    # Batch and heads as broadcast, where grouped-query attention (enable_gqa) has more query heads
    # than key heads, each key head serving a group of them: the query's count is the work.
    heads = math.prod(max(q, k) for q, k in zip(query.shape[:-2], key.shape[:-2], strict=True)) \
        if len(query.shape) == len(key.shape) else math.prod(broadcast(query.shape[:-2], key.shape[:-2]))
    length, depth = query.shape[-2], query.shape[-1]
    source_length, value_depth = key.shape[-2], value.shape[-1]
    pairs = _attended_pairs(length, source_length, bool(args.value("is_causal")))
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
    # One exponential per score, in the forward and again in the backward, which recomputes the
    # probabilities (model.py's Note [Attention's exponentials]).
    return _cost("attention", flops, read, written, query, matrix, transcendentals=heads * pairs,
                 role="backward" if backward else "forward")


def _attended_pairs(length: int, source_length: int, causal: bool) -> int:
    """Query-key pairs that are computed; causal is PyTorch's top-left mask (row i sees keys 0..i)."""
    if not causal:
        return length * source_length
    full_rows = max(0, length - source_length)  # rows past the last key see every key
    counted = min(length, source_length)
    return counted * (counted + 1) // 2 + full_rows * source_length
