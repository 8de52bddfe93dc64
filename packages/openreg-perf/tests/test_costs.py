"""Costs of operator calls, each against a hand count. The calls are records torch.profiler produced
(record_shapes=True, on CPU, torch 2.13: name, shapes, dtypes, concrete inputs), so the parser is
tested on what the profiler really writes; TensorLists are given as structured_input_shapes() does."""

from __future__ import annotations

import pytest
import torch
from openreg_perf.costs import Cost, MatrixShape, OpCall, cost_of
from torch.profiler import ProfilerActivity, profile

F32, F16, BF16, LONG = "float", "c10::Half", "c10::BFloat16", "long int"


def cost(name, shapes, dtypes, concrete=()) -> Cost:
    return cost_of(OpCall(name, shapes, dtypes, concrete))


def check(result: Cost, flops, read, written, kind, known=True):
    assert (result.flops, result.bytes_read, result.bytes_written) == (flops, read, written)
    assert result.kind == kind
    assert result.known is known


# ---------------------------------------------------------------------------------- matrix products

def test_mm():
    result = cost("aten::mm", [[64, 128], [128, 32]], [F32, F32], [None, None])
    check(result, 2 * 64 * 128 * 32, (64 * 128 + 128 * 32) * 4, 64 * 32 * 4, "matmul")
    assert result.matrix == MatrixShape(1, 64, 32, 128)
    assert result.precision == "fp32"


def test_an_empty_product_reads_nothing_and_one_over_nothing_writes_zeros():
    empty = cost("aten::mm", [[0, 4096], [4096, 4096]], [F32, F32], [None, None])
    check(empty, 0, 0, 0, "matmul")
    assert empty.matrix is None
    zeros = cost("aten::addmm", [[32], [64, 0], [0, 32], [], []], [F32, F32, F32, "Scalar", "Scalar"],
                 [None, None, None, 1, 1])
    check(zeros, 64 * 32, 32 * 4, 64 * 32 * 4, "matmul")  # the bias, broadcast


def test_int_mm_is_an_int8_product_with_an_int32_result():
    result = cost("aten::_int_mm", [[64, 128], [128, 32]], ["signed char", "signed char"], [None, None])
    check(result, 2 * 64 * 128 * 32, 64 * 128 + 128 * 32, 64 * 32 * 4, "matmul")
    assert result.precision == "int8" and result.matrix == MatrixShape(1, 64, 32, 128)


def test_addmm_adds_its_bias():
    result = cost("aten::addmm", [[32], [64, 128], [128, 32], [], []], [F32, F32, F32, "Scalar", "Scalar"],
                  [None, None, None, 1, 1])
    check(result, 2 * 64 * 128 * 32 + 64 * 32, (32 + 64 * 128 + 128 * 32) * 4, 64 * 32 * 4, "matmul")


def test_bmm():
    result = cost("aten::bmm", [[2, 3, 4], [2, 4, 5]], [F32, F32], [None, None])
    check(result, 2 * 2 * 3 * 4 * 5, (24 + 40) * 4, 2 * 3 * 5 * 4, "matmul")
    assert result.matrix == MatrixShape(2, 3, 5, 4)


def test_baddbmm():
    result = cost("aten::baddbmm", [[2, 3, 5], [2, 3, 4], [2, 4, 5], [], []], [F32, F32, F32, "Scalar", "Scalar"],
                  [None, None, None, 1, 1])
    check(result, 2 * 2 * 3 * 4 * 5 + 30, (30 + 24 + 40) * 4, 30 * 4, "matmul")


def test_linear_folds_leading_dims_and_reads_weight_as_n_by_k():
    result = cost("aten::linear", [[2, 5, 4], [3, 4], [3]], [F32, F32, F32], [None, None, None])
    check(result, 2 * 10 * 4 * 3 + 30, (40 + 12 + 3) * 4, 30 * 4, "matmul")


def test_mv_and_addmv():
    check(cost("aten::mv", [[3, 4], [4]], [F32, F32]), 2 * 3 * 4, (12 + 4) * 4, 3 * 4, "matmul")
    addmv = cost("aten::addmv", [[3], [3, 4], [4], [], []], [F32, F32, F32, "Scalar", "Scalar"],
                 [None, None, None, 1, 1])
    check(addmv, 2 * 3 * 4 + 3, (3 + 12 + 4) * 4, 3 * 4, "matmul")


def test_dot_products_and_complex_products():
    """torch.dot names its second operand "tensor" (vdot and matmul "other"): v @ v, torch.inner of two
    vectors and tensordot(dims=2) call it. A complex multiply-add is four real multiplies and four adds."""
    check(cost("aten::dot", [[1024], [1024]], [F32, F32]), 2 * 1024, 2 * 1024 * 4, 4, "matmul")
    assert cost("aten::vdot", [[1024], [1024]], [F32, F32]).flops == 2 * 1024
    complex_float = "c10::complex<float>"
    assert cost("aten::mm", [[64, 128], [128, 32]], [complex_float] * 2).flops == 8 * 64 * 128 * 32


def test_a_rule_that_fails_leaves_the_call_to_the_default_rule_with_a_warning(monkeypatch):
    from openreg_perf.costs import registry

    def broken(name, args):
        raise AttributeError("a defect of the rule")

    monkeypatch.setitem(registry._BY_NAME, "mm", broken)
    monkeypatch.setattr(registry, "_FAILED", set())
    with pytest.warns(RuntimeWarning, match=r"cost rule of aten::mm failed .*AttributeError: a defect"):
        result = cost("aten::mm", [[64, 128], [128, 32]], [F32, F32])
    assert result.known is False and result.bytes_read > 0


def test_half_precision_matmul_uses_two_byte_elements():
    result = cost("aten::mm", [[64, 128], [128, 32]], [F16, F16])
    assert (result.bytes_read, result.bytes_written) == ((64 * 128 + 128 * 32) * 2, 64 * 32 * 2)
    assert result.precision == "fp16"


def test_scaled_mm_is_an_fp8_product_with_a_bf16_result():
    result = cost("aten::_scaled_mm", [[64, 128], [128, 32], [], [], [], [], [], []],
                  ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", F32, F32, "", "", "Scalar", "Scalar"],
                  [None, None, None, None, None, None, 15, False])
    check(result, 2 * 64 * 128 * 32, 64 * 128 + 128 * 32 + 4 + 4, 64 * 32 * 2, "matmul")
    assert result.precision == "fp8"


# -------------------------------------------------------------------------------------- convolution

CONV_INPUT, CONV_WEIGHT = [2, 3, 16, 16], [4, 3, 3, 3]
CONV_FLOPS = 2 * (2 * 16 * 16) * 4 * (3 * 3 * 3)  # positions x out channels x (in channels x kernel)


def test_convolution_with_bias_and_padding():
    result = cost("aten::convolution", [CONV_INPUT, CONV_WEIGHT, [4], [], [], [], [], [], []],
                  [F32, F32, F32, "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"],
                  [None, None, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1])
    output = 2 * 4 * 16 * 16
    check(result, CONV_FLOPS + output, (2 * 3 * 256 + 4 * 27 + 4) * 4, output * 4, "conv")
    assert result.matrix == MatrixShape(1, 2 * 256, 4, 27)


def _conv3x3(channels, size, dtype=F32, stride=1):
    return cost("aten::convolution", [[2, channels, size, size], [8, channels, 3, 3], [], [], [], [], [], [], []],
                [dtype, dtype, "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"],
                [None, None, None, [stride, stride], [1, 1], [1, 1], False, [0, 0], 1])


def test_a_3x3_fp32_convolution_with_many_channels_runs_as_winograd():
    """Note [Which convolutions run as Winograd]: 64 input channels, stride 1, FP32. Winograd computes
    whole 4 x 4 blocks of outputs: a 10 x 10 output is 3 x 3 blocks, 144 positions per image."""
    winograd = _conv3x3(64, 10)
    assert winograd.role == "forward_winograd"
    assert winograd.matrix == MatrixShape(1, 2 * 144, 8, 64 * 9)
    assert winograd.flops == 2 * (2 * 100) * 8 * (64 * 9)  # the useful work, as the plain convolution's
    # Few channels, a stride, or matrix units: an implicit GEMM, one row per output position.
    for other, positions in ((_conv3x3(32, 10), 100), (_conv3x3(64, 10, stride=2), 25), (_conv3x3(64, 10, BF16), 100)):
        assert (other.role, other.matrix.m) == ("forward", 2 * positions)


def _conv3x3_backward(channels, mask, dtype=F32, stride=1):
    return cost("aten::convolution_backward",
                [[2, 8, 10 // stride, 10 // stride], [2, channels, 10, 10], [8, channels, 3, 3], [], [], [], [], [],
                 [], [], []],
                [dtype, dtype, dtype, "ScalarList", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList",
                 "Scalar", "ScalarList"],
                [None, None, None, [8], [stride, stride], [1, 1], [1, 1], False, [0, 0], 1, mask])


def test_a_weight_gradient_that_can_run_as_winograd_says_so():
    """Note [Which convolutions run as Winograd]: the weight gradient of a convolution that could run as
    Winograd has a role of its own, and its implicit GEMM beside (as_gemm); an input gradient alone has not."""
    both = _conv3x3_backward(64, [True, True, False])
    assert both.role == "input_weight_grad_winograd" and both.as_gemm.role == "input_weight_grad"
    assert (both.flops, both.matrix) == (both.as_gemm.flops, both.as_gemm.matrix)
    assert _conv3x3_backward(64, [False, True, False]).role == "weight_grad_winograd"
    assert _conv3x3_backward(64, [True, False, False]).role == "input_grad"
    for other in (_conv3x3_backward(32, [False, True, False]), _conv3x3_backward(64, [False, True, False], BF16),
                  _conv3x3_backward(64, [False, True, False], stride=2)):
        assert (other.role, other.as_gemm) == ("weight_grad", None)


def test_conv2d_record_gives_the_same_cost():
    conv2d = cost("aten::conv2d", [CONV_INPUT, CONV_WEIGHT, [4], [], [], [], []],
                  [F32, F32, F32, "ScalarList", "ScalarList", "ScalarList", "Scalar"],
                  [None, None, None, [1, 1], [1, 1], [1, 1], 1])
    assert conv2d.flops == CONV_FLOPS + 2 * 4 * 256


def test_strided_grouped_convolution():
    # input [1, 4, 9, 9], weight [6, 2, 3, 3] (groups 2), stride 2, no padding: output [1, 6, 4, 4]
    result = cost("aten::convolution", [[1, 4, 9, 9], [6, 2, 3, 3], [], [], [], [], [], [], []],
                  [F32, F32, "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"],
                  [None, None, None, [2, 2], [0, 0], [1, 1], False, [0, 0], 2])
    check(result, 2 * 16 * 6 * (2 * 9), (4 * 81 + 6 * 18) * 4, 6 * 16 * 4, "conv")
    assert result.matrix == MatrixShape(2, 16, 3, 18)


def test_a_depthwise_convolution_is_a_vector_kernel_at_the_bandwidth():
    """Note [Depthwise convolutions]: 96 channels each convolved alone, 3 x 3: no matrix kernel (as one, a
    column of its tiles; it came out 45 times the time its bytes take), so on an H100 it streams its bytes."""
    from openreg_perf.model import kernel_seconds
    from openreg_perf.profile import load_profile

    source, h100 = [32, 96, 112, 112], load_profile("h100-sxm")
    result = cost("aten::convolution", [source, [96, 1, 3, 3], [], [], [], [], [], [], []],
                  [F32, F32, "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"],
                  [None, None, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 96])
    elements = 32 * 96 * 112 * 112
    check(result, 2 * elements * 9, (elements + 96 * 9) * 4, elements * 4, "conv")
    assert result.matrix is None
    predicted = kernel_seconds(result, None, h100)
    streaming = result.bytes / h100.memory.bandwidth_bytes_per_s
    assert predicted.bound == "memory" and streaming < predicted.seconds < 1.5 * streaming


def test_transposed_convolution():
    # input [1, 2, 4, 4], weight [2, 3, 3, 3] (in, out, kh, kw), stride 2: output 9x9
    result = cost("aten::convolution", [[1, 2, 4, 4], [2, 3, 3, 3], [], [], [], [], [], [], []],
                  [F32, F32, "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"],
                  [None, None, None, [2, 2], [0, 0], [1, 1], True, [0, 0], 1])
    assert result.bytes_written == 3 * 9 * 9 * 4
    assert result.flops == 2 * 16 * 3 * (2 * 9)  # each input position times each kernel tap


def test_convolution_backward_computes_what_the_mask_asks():
    shapes = [[2, 4, 16, 16], CONV_INPUT, CONV_WEIGHT, [], [], [], [], [], [], [], []]
    dtypes = [F32, F32, F32, "ScalarList", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList",
              "Scalar", "ScalarList"]
    values = [None, None, None, [4], [1, 1], [1, 1], [1, 1], False, [0, 0], 1]
    grad, source, weight = 2 * 4 * 256 * 4, 2 * 3 * 256 * 4, 4 * 27 * 4
    every = cost("aten::convolution_backward", shapes, dtypes, values + [[True, True, True]])
    check(every, 2 * CONV_FLOPS + 2 * 4 * 256, 3 * grad + weight + source, source + weight + 4 * 4, "conv")
    weight_only = cost("aten::convolution_backward", shapes, dtypes, values + [[False, True, False]])
    check(weight_only, CONV_FLOPS, grad + source, weight, "conv")


def test_convolution_backward_overrideable_has_no_bias_sizes():
    # As the profiler records it on openreg (PrivateUse1's convolution backward): the same work as
    # convolution_backward, its arguments one position earlier after the weight.
    shapes = [[2, 4, 16, 16], CONV_INPUT, CONV_WEIGHT, [], [], [], [], [], [], []]
    dtypes = [F32, F32, F32, "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar",
              "ScalarList"]
    values = [None, None, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, False]]
    grad, source, weight = 2 * 4 * 256 * 4, 2 * 3 * 256 * 4, 4 * 27 * 4
    check(cost("aten::convolution_backward_overrideable", shapes, dtypes, values),
          2 * CONV_FLOPS, 2 * grad + weight + source, source + weight, "conv")


# ---------------------------------------------------------------------------------------- attention

QKV = [2, 4, 16, 8]  # batch 2, 4 heads, 16 positions, head dim 8
QKV_BYTES = 2 * 4 * 16 * 8 * 4


def test_flash_attention_causal_forward():
    result = cost("aten::_scaled_dot_product_flash_attention_for_cpu", [QKV, QKV, QKV, [], [], [], []],
                  [F32, F32, F32, "Scalar", "Scalar", "", ""], [None, None, None, 0.0, True, None, None])
    pairs = 16 * 17 // 2  # causal: query i sees keys 0..i
    check(result, 2 * 8 * pairs * (8 + 8), 3 * QKV_BYTES, QKV_BYTES + 8 * 16 * 4, "attention")
    assert result.transcendentals == 8 * pairs  # one exponential per score of each of the 8 heads


def test_flash_attention_backward_is_two_and_a_half_forwards():
    result = cost("aten::_scaled_dot_product_flash_attention_for_cpu_backward",
                  [QKV, QKV, QKV, QKV, QKV, [2, 4, 16], [], [], [], []],
                  [F32, F32, F32, F32, F32, F32, "Scalar", "Scalar", "", ""],
                  [None, None, None, None, None, None, 0.0, True, None, None])
    pairs = 16 * 17 // 2
    check(result, 2.5 * 2 * 8 * pairs * 16, 5 * QKV_BYTES + 8 * 16 * 4, 3 * QKV_BYTES, "attention")
    assert result.transcendentals == 8 * pairs  # the backward recomputes the probabilities


def test_efficient_attention_not_causal_with_longer_keys():
    query, keys = [1, 2, 16, 8], [1, 2, 32, 8]
    result = cost("aten::_scaled_dot_product_efficient_attention", [query, keys, keys, [], [], [], [], []],
                  [BF16, BF16, BF16, "", "Scalar", "Scalar", "Scalar", ""],
                  [None, None, None, None, True, 0.0, False, None])
    check(result, 2 * 2 * 16 * 32 * 16, (256 + 512 + 512) * 2, 256 * 2 + 2 * 16 * 4, "attention")
    assert result.precision == "bf16"


def test_grouped_query_attention_counts_the_query_heads():
    # enable_gqa: 8 query heads share 2 key and value heads; the work is the query heads', the bytes read
    # the smaller key and value.
    query, keys = [1, 8, 16, 8], [1, 2, 16, 8]
    result = cost("aten::_scaled_dot_product_fused_attention_overrideable", [query, keys, keys, [], [], [], [], []],
                  [BF16, BF16, BF16, "", "Scalar", "Scalar", "Scalar", ""],
                  [None, None, None, None, 0.0, False, False, None])
    check(result, 2 * 8 * 16 * 16 * 16, (1024 + 2 * 256) * 2, 1024 * 2 + 8 * 16 * 4, "attention")


def test_scaled_dot_product_attention_prices_like_its_kernel():
    composite = cost("aten::scaled_dot_product_attention", [QKV, QKV, QKV, [], [], [], [], []],
                     [F32, F32, F32, "", "Scalar", "Scalar", "", "Scalar"],
                     [None, None, None, None, 0.0, True, None, False])
    assert composite.flops == 2 * 8 * (16 * 17 // 2) * 16


# -------------------------------------------------------------------------------------- elementwise

def test_add_with_broadcasting():
    result = cost("aten::add", [[8, 1, 32], [4, 1], []], [F32, F32, "Scalar"], [None, None, 1])
    check(result, 8 * 4 * 32, (256 + 4) * 4, 8 * 4 * 32 * 4, "elementwise")


def test_add_out_writes_its_out_argument():
    result = cost("aten::add", [[8, 1, 32], [8, 1, 32], [], [8, 1, 32]], [F32, F32, "Scalar", F32],
                  [None, None, 1, None])
    check(result, 256, 2 * 256 * 4, 256 * 4, "elementwise")


def test_in_place_add_of_a_wrapped_scalar_reads_and_writes_self():
    result = cost("aten::add_", [[8, 1, 32], [], []], [F32, "double", "Scalar"], [None, None, 1])
    check(result, 256, 256 * 4 + 8, 256 * 4, "elementwise")


def test_mul_by_a_python_number():
    result = cost("aten::mul", [[8, 1, 32], []], [F32, "double"], [None, None])
    check(result, 256, 256 * 4 + 8, 256 * 4, "elementwise")


def test_gelu_counts_its_formula():
    check(cost("aten::gelu", [[1024], []], [F16, ""], [None, None]), 8 * 1024, 2048, 2048, "elementwise")


def test_comparison_writes_booleans():
    check(cost("aten::eq", [[10, 5], [10, 5]], [F32, F32]), 50, 400, 50, "elementwise")


def test_fill_and_random_fill_write_only():
    check(cost("aten::fill_", [[1, 1, 1, 1], []], [F32, "Scalar"], [None, 0.0]), 0, 0, 4, "elementwise")
    check(cost("aten::normal_", [[32], [], [], []], [F32, "Scalar", "Scalar", ""], [None, 0.0, 1.0, None]),
          0, 0, 128, "elementwise")


def test_factories_write_the_size_they_are_given():
    zeros = cost("aten::zeros", [[], [], [], [], []], ["ScalarList", "Scalar", "Scalar", "", ""],
                 [[2, 16, 4, 8], 6, 0, None, None])
    check(zeros, 0, 0, 1024 * 4, "elementwise")
    randint = cost("aten::randint", [[], [], [], [], [], [], []],
                   ["Scalar", "Scalar", "ScalarList", "Scalar", "", "", "Scalar"],
                   [0, 100, [4, 7], 4, None, None, False])
    check(randint, 0, 0, 28 * 8, "elementwise")


# --------------------------------------------------------------------------------------- reductions

def test_sum_over_dims():
    result = cost("aten::sum", [[8, 1, 32], [], [], []], [F32, "ScalarList", "Scalar", ""], [None, [0, 2], False, None])
    check(result, 256, 256 * 4, 1 * 4, "reduction")


def test_mean_over_the_last_dim_keeps_one_per_row():
    result = cost("aten::mean", [[8, 1, 32], [], [], []], [F32, "ScalarList", "Scalar", ""], [None, [-1], True, None])
    check(result, 256, 256 * 4, 8 * 4, "reduction")


def test_full_sum_and_norm_without_dims():
    check(cost("aten::sum", [[2, 4, 16, 16], []], [F32, ""], [None, None]), 2048, 2048 * 4, 4, "reduction")
    norm = cost("aten::linalg_vector_norm", [[3, 4], [], [], [], []], [F32, "Scalar", "", "Scalar", ""],
                [None, 2, None, False, None])
    check(norm, 2 * 12, 48, 4, "reduction")


def test_argmax_writes_indices():
    result = cost("aten::argmax", [[8, 1, 32], [], []], [F32, "Scalar", "Scalar"], [None, 0, False])
    check(result, 256, 1024, 32 * 8, "reduction")


def test_max_of_two_tensors_is_elementwise():
    assert cost("aten::max", [[4, 4], [4, 4]], [F32, F32]).kind == "elementwise"


# ------------------------------------------------------------------------------------ softmax, norms

def test_softmax_reads_a_short_row_once():
    check(cost("aten::_softmax", [[4, 10], [], []], [F32, "Scalar", "Scalar"], [None, -1, False]),
          5 * 40, 160, 160, "norm")


def test_softmax_reads_a_long_row_three_times():
    result = cost("aten::_softmax", [[4, 32768], [], []], [F16, "Scalar", "Scalar"], [None, -1, False])
    elements = 4 * 32768
    check(result, 5 * elements, 3 * elements * 2, elements * 2, "norm")
    assert (result.rows, result.reread_bytes, result.role) == (4, 2 * elements * 2, "softmax")


def test_softmax_backward():
    short = cost("aten::_softmax_backward_data", [[4, 10], [4, 10], [], []], [F32, F32, "Scalar", "Scalar"],
                 [None, None, -1, 6])
    check(short, 4 * 40, 2 * 160, 160, "norm")
    assert (short.rows, short.reread_bytes, short.role) == (4, 0, "softmax_backward")
    long_rows = cost("aten::_softmax_backward_data", [[4, 16384], [4, 16384], [], []], [F32, F32, "Scalar", "Scalar"],
                     [None, None, -1, 6])
    both = 2 * 4 * 16384 * 4  # grad and output, read twice
    assert (long_rows.bytes_read, long_rows.reread_bytes) == (2 * both, both)


def test_layer_norm_forward_writes_statistics_per_row():
    result = cost("aten::native_layer_norm", [[4, 6, 10], [], [10], [10], []], [F32, "ScalarList", F32, F32, "Scalar"],
                  [None, [10], None, None, 1e-5])
    check(result, 8 * 240, 240 * 4 + 2 * 10 * 4, 240 * 4 + 2 * 24 * 4, "norm")


def test_layer_norm_backward():
    result = cost("aten::native_layer_norm_backward",
                  [[4, 6, 10], [4, 6, 10], [], [4, 6, 1], [4, 6, 1], [10], [10], []],
                  [F32, F32, "ScalarList", F32, F32, F32, F32, "ScalarList"],
                  [None, None, [10], None, None, None, None, [True, True, True]])
    saved = (24 + 24 + 10 + 10) * 4
    check(result, 12 * 240, 2 * 240 * 4 + saved, 240 * 4 + 2 * 10 * 4, "norm")


def test_batch_norm_in_training_reads_its_input_twice():
    shapes = [[2, 3, 5, 5], [3], [3], [3], [3], [], [], []]
    dtypes = [F32, F32, F32, F32, F32, "Scalar", "Scalar", "Scalar"]
    training = cost("aten::native_batch_norm", shapes, dtypes, [None] * 5 + [True, 0.1, 1e-5])
    check(training, 8 * 150, 2 * 150 * 4 + 2 * 3 * 4, 150 * 4 + 2 * 3 * 4, "norm")
    evaluation = cost("aten::native_batch_norm", shapes, dtypes, [None] * 5 + [False, 0.1, 1e-5])
    assert evaluation.bytes_read == 150 * 4 + 2 * 3 * 4


def test_group_norm_record():
    result = cost("aten::native_group_norm", [[2, 6, 5, 5], [6], [6], [], [], [], [], []],
                  [F32, F32, F32, "Scalar", "Scalar", "Scalar", "Scalar", "Scalar"],
                  [None, None, None, 2, 6, 25, 3, 1e-5])
    check(result, 8 * 300, 2 * 300 * 4 + 2 * 6 * 4, 300 * 4 + 2 * (2 * 3) * 4, "norm")


def test_rms_norm_has_no_bias():
    result = cost("aten::_fused_rms_norm", [[4, 6, 10], [], [10], []], [F32, "ScalarList", F32, ""],
                  [None, [10], None, None])
    check(result, 8 * 240, 240 * 4 + 10 * 4, 240 * 4 + 2 * 24 * 4, "norm")


# ------------------------------------------------------------------------------- embedding and index

def test_embedding_reads_the_rows_it_picks():
    result = cost("aten::embedding", [[100, 16], [4, 7], [], [], []], [F32, LONG, "Scalar", "Scalar", "Scalar"],
                  [None, None, -1, False, False])
    check(result, 0, 28 * 8 + 28 * 16 * 4, 28 * 16 * 4, "index")


def test_embedding_backward_zeroes_the_table_and_adds_rows():
    result = cost("aten::embedding_dense_backward", [[4, 7, 16], [4, 7], [], [], []],
                  [F32, LONG, "Scalar", "Scalar", "Scalar"], [None, None, 100, -1, False])
    check(result, 448, 2 * 448 * 4 + 28 * 8, 100 * 16 * 4 + 448 * 4, "index")


def test_index_select():
    result = cost("aten::index_select", [[10, 5], [], [3]], [F32, "Scalar", LONG], [None, 0, None])
    check(result, 0, 3 * 8 + 15 * 4, 15 * 4, "index")


def test_gather():
    result = cost("aten::gather", [[10, 5], [], [10, 2], []], [F32, "Scalar", LONG, "Scalar"], [None, 1, None, False])
    check(result, 0, 20 * 8 + 20 * 4, 20 * 4, "index")


def test_scatter_add_in_place_accumulates():
    result = cost("aten::scatter_add_", [[3, 5], [], [10, 5], [10, 5]], [F32, "Scalar", LONG, F32],
                  [None, 0, None, None])
    check(result, 50, 50 * 8 + 50 * 4 + 50 * 4, 50 * 4, "index")


def test_index_put_without_recorded_indices_is_an_estimate():
    result = cost("aten::index_put_", [[10, 5], [], [3, 5], []], [F32, "", F32, "Scalar"], [None, None, None, False])
    check(result, 0, 15 * 4, 15 * 4, "index", known=False)


def test_index_with_indices_given():
    result = cost("aten::index", [[10, 5], [[3]]], [F32, ""], [None, None])
    check(result, 0, 3 * 4 + 15 * 4, 15 * 4, "index")  # the index list's dtype is not recorded: FP32 assumed


def test_topk_reads_each_slice_and_writes_k_values_and_indices():
    result = cost("aten::topk", [[8, 64], [], [], [], []], [F32, "Scalar", "Scalar", "Scalar", "Scalar"],
                  [None, 2, -1, True, True])
    check(result, 512 * 6, 512 * 4, 8 * 2 * (4 + 8), "reduction")  # log2(64) = 6 passes


def test_sort_writes_every_value_and_its_index():
    result = cost("aten::sort", [[8, 64], [], []], [F16, "Scalar", "Scalar"], [None, 0, False])
    check(result, 512 * 3, 512 * 2, 512 * (2 + 8), "reduction")  # along dim 0: slices of 8, 3 passes


def test_histc_reads_its_input_and_writes_its_bins():
    result = cost("aten::histc", [[256], [], [], []], [F32, "Scalar", "Scalar", "Scalar"], [None, 8, 0, 7])
    check(result, 256, 256 * 4, 8 * 4, "reduction")


def test_grouped_mm_splits_what_its_offsets_split_among_equal_groups():
    """A Mixture of Experts' layer, 4 experts: tokens [64, 32] through weights [4, 32, 16]; its weight
    gradient [32, 64] @ [64, 16] split along the 64 tokens into [4, 32, 16]."""
    forward = cost("aten::_grouped_mm", [[64, 32], [4, 32, 16], [4], [], []], [BF16, BF16, "int", "", "Scalar"],
                   [None, None, None, None, None])
    check(forward, 2 * 64 * 32 * 16, 2 * (64 * 32 + 4 * 32 * 16) + 16, 2 * 64 * 16, "matmul")
    assert forward.matrix == MatrixShape(4, 16, 16, 32)
    weight_gradient = cost("aten::_grouped_mm", [[32, 64], [64, 16], [4], [], []], [BF16, BF16, "int", "", "Scalar"],
                           [None, None, None, None, None])
    check(weight_gradient, 2 * 32 * 64 * 16, 2 * (32 * 64 + 64 * 16) + 16, 2 * 4 * 32 * 16, "matmul")
    assert weight_gradient.matrix == MatrixShape(4, 32, 16, 16)


def test_nonzero_static_writes_its_stated_size_of_positions():
    result = cost("aten::nonzero_static", [[256, 2], [], []], ["bool", "Scalar", "Scalar"], [None, 64, -1])
    check(result, 512, 512, 64 * 2 * 8, "index")


# ------------------------------------------------------------------------------------------- copies

def test_copy_casts_from_source_to_target_dtype():
    check(cost("aten::copy_", [[10, 5], [10, 5], []], [F16, F32, "Scalar"], [None, None, False]), 0, 200, 100, "copy")


def test_to_copy_into_half():
    result = cost("aten::_to_copy", [[10, 5], [], [], [], [], [], []], [F32, "Scalar", "", "", "", "Scalar", ""],
                  [None, 5, None, None, None, False, None])
    check(result, 0, 200, 100, "copy")


def test_to_its_own_dtype_runs_nothing():
    result = cost("aten::to", [[4, 6, 10], [], [], [], []], [F32, "Scalar", "Scalar", "Scalar", ""],
                  [None, 6, False, False, None])
    check(result, 0, 0, 0, "view")


def test_clone_and_contiguous():
    check(cost("aten::clone", [[10, 5], []], [F32, ""], [None, None]), 0, 200, 200, "copy")
    check(cost("aten::contiguous", [[5, 10], []], [F32, "Scalar"], [None, 0]), 0, 200, 200, "copy")


# --------------------------------------------------------------------------------------- optimizers

PARAMS = [[3, 4], [3]]  # 15 parameters in two tensors


def test_foreach_add_with_structured_shapes():
    result = cost("aten::_foreach_add_", [PARAMS, PARAMS, []], ["TensorList", "TensorList", "Scalar"],
                  [None, None, 0.1])
    check(result, 15, 2 * 15 * 4, 15 * 4, "optimizer")


def test_foreach_without_recorded_shapes_is_unknown():
    result = cost("aten::_foreach_add_", [[], [], []], ["TensorList", "TensorList", "Scalar"], [None, None, 0.1])
    assert result.known is False and result.bytes == 0


def test_fused_adamw_record():
    shapes = [PARAMS, PARAMS, PARAMS, PARAMS, [], [[], []]] + [[]] * 9
    dtypes = ["TensorList"] * 6 + ["Scalar"] * 7 + ["", ""]
    values = [None] * 6 + [0.001, 0.9, 0.999, 0.01, 1e-08, False, False, None, None]
    result = cost("aten::_fused_adamw_", shapes, dtypes, values)
    check(result, 15 * 15, (3 * 15 + 15) * 4, 3 * 15 * 4, "optimizer")


def test_fused_sgd_with_momentum():
    shapes = [PARAMS, PARAMS, PARAMS] + [[]] * 9
    dtypes = ["TensorList"] * 3 + ["Scalar"] * 7 + ["", ""]
    values = [None] * 3 + [0.0, 0.9, 0.1, 0.0, False, False, True, None, None]
    check(cost("aten::_fused_sgd_", shapes, dtypes, values), 4 * 15, 3 * 15 * 4, 2 * 15 * 4, "optimizer")


def test_a_check_for_infinities_writes_booleans():
    """isneginf, which transformers' attention masks of BERT and GPT-2 call, ran at the default cost."""
    check(cost("aten::isneginf", [[4, 8], [4, 8]], [F32, "bool"]), 32, 32 * 4, 32, "elementwise")


def test_grad_scalers_unscale_and_update():
    """GradScaler's two operators, which the guide's fp16 loop ran at the default cost."""
    unscale = cost("aten::_amp_foreach_non_finite_check_and_unscale_", [PARAMS, [], []], ["TensorList", F32, F32])
    check(unscale, 2 * 15, 15 * 4, 15 * 4, "optimizer")
    update = cost("aten::_amp_update_scale_", [[], [], [], [], [], []], [F32, "int", F32, "Scalar", "Scalar", "Scalar"],
                  [None, None, None, 2.0, 0.5, 2000])
    check(update, 2, 3 * 4, 2 * 4, "optimizer")


# -------------------------------------------------------------------------------- views and default

@pytest.mark.parametrize("record", [
    ("aten::view", [[10, 5], []], [F32, "ScalarList"], [None, [50]]),
    ("aten::t", [[10, 5]], [F32], [None]),
    ("aten::transpose", [[10, 5], [], []], [F32, "Scalar", "Scalar"], [None, 0, 1]),
    ("aten::expand", [[10, 5], [], []], [F32, "ScalarList", "Scalar"], [None, [2, 10, 5], False]),
    ("aten::as_strided", [[10, 5], [], [], []], [F32, "ScalarList", "ScalarList", ""], [None, [5, 10], [1, 5], None]),
    ("aten::slice", [[10, 5], [], [], [], []], [F32, "Scalar", "Scalar", "Scalar", "Scalar"], [None, 0, 1, 3, 1]),
    ("aten::select", [[10, 5], [], []], [F32, "Scalar", "Scalar"], [None, 0, 1]),
    ("aten::unsqueeze", [[10, 5], []], [F32, "Scalar"], [None, 0]),
    ("aten::reshape", [[10, 5], []], [F32, "ScalarList"], [None, [5, 10]]),
    ("aten::empty", [[], [], [], [], [], []], ["ScalarList", "Scalar", "Scalar", "", "", ""],
     [[2, 3], 6, 0, None, None, None]),
])
def test_views_and_allocations_cost_nothing(record):
    check(cost(*record), 0, 0, 0, "view")


def test_an_unknown_operator_gets_the_default_estimate():
    result = cost("aten::my_custom_op", [[4, 4], [4], []], [F32, F32, "Scalar"], [None, None, 2])
    check(result, 0, (16 + 4) * 4, 16 * 4, "default", known=False)


def test_an_unknown_in_place_operator_writes_its_first_argument():
    result = cost("aten::my_custom_op_", [[4], [4, 4]], [F32, F32])
    check(result, 0, (4 + 16) * 4, 4 * 4, "default", known=False)


def test_an_unknown_operator_writes_what_the_recording_says_it_returned():
    """A recording notes each call's outputs: an operator no rule knows that returns something other
    than its arguments' shape (a pairwise distance: n x m from n x d and m x d) is priced by them."""
    call = OpCall("aten::my_pairwise_op", [[64, 8], [32, 8]], [F32, F32], [], [[64, 32]], [F32])
    check(cost_of(call), 0, (64 + 32) * 8 * 4, 64 * 32 * 4, "default", known=False)


# ------------------------------------------------------------------------------- the live profiler

def test_every_event_of_a_profiled_training_step_is_priced():
    """What this torch's profiler records for a small training step parses, and mm matches a hand count."""
    layers = [torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32), torch.nn.Linear(32, 4)]
    model = torch.nn.Sequential(*layers)
    optimizer = torch.optim.AdamW(model.parameters(), fused=True)
    inputs = torch.randn(8, 16)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        model(inputs).softmax(-1).sum().backward()
        optimizer.step()
        torch.mm(torch.randn(64, 128), torch.randn(128, 32))
    events = [event for event in prof.profiler.kineto_results.events() if event.name().startswith("aten::")]
    costs = {}
    for event in events:
        call = OpCall(event.name(), event.structured_input_shapes(), event.dtypes(), event.concrete_inputs())
        costs.setdefault(event.name(), []).append(cost_of(call))
    assert all(result.flops >= 0 and result.bytes >= 0 for results in costs.values() for result in results)
    assert any(result.flops == 2 * 64 * 128 * 32 for result in costs["aten::mm"])
    assert {"aten::addmm", "aten::gelu", "aten::native_layer_norm", "aten::_fused_adamw_"} <= set(costs)
    assert all(result.known for result in costs["aten::_fused_adamw_"])


def test_the_operators_a_llama_step_runs_besides_the_matrix_products():
    # As the profiler records them on openreg for a transformers Llama (timing-only run of 7B).
    copy = cost("aten::_copy_from", [[4, 8], [4, 8], []], [F32, "c10::BFloat16", "Scalar"], [None, None, False])
    check(copy, 0, 4 * 8 * 4, 4 * 8 * 2, "copy")
    cat = cost("aten::cat", [[[2, 3], [2, 5]], []], ["TensorList", "Scalar"], [None, -1])
    check(cat, 0, 2 * 8 * 4, 2 * 8 * 4, "copy")
    arange = cost("aten::arange", [[], [], [], [], [], []], ["Scalar", "Scalar", "", "", "", ""], [0, 512])
    check(arange, 512, 0, 512 * 8, "elementwise")
    loss = cost("aten::nll_loss_forward", [[6, 10], [6], [], [], []], [F32, "long int", "", "Scalar", "Scalar"],
                [None, None, None, 1, -100])
    check(loss, 6, 6 * 4 + 6 * 8, 4 + 4, "reduction")
    backward = cost("aten::nll_loss_backward", [[], [6, 10], [6], [], [], [], []],
                    [F32, F32, "long int", "", "Scalar", "Scalar", F32], [None, None, None, None, 1, -100, None])
    check(backward, 60, 6 * 8, 60 * 4, "elementwise")
    assert cost("aten::tril", [[4, 4], []], [F32, "Scalar"], [None, 0]).bytes == 2 * 16 * 4


# ------------------------------------------------------------------------------------------ pooling

def test_max_pool2d_with_indices_reads_once_and_writes_values_and_indices():
    """ResNet's stem pooling: 3x3 windows, stride 2, padding 1 on 56x56 -> 28x28."""
    result = cost("aten::max_pool2d_with_indices", [[8, 64, 56, 56], [], [], [], [], []],
                  [F32, "ScalarList", "ScalarList", "ScalarList", "ScalarList", "Scalar"],
                  [None, [3, 3], [2, 2], [1, 1], [1, 1], False])
    out = 8 * 64 * 28 * 28
    check(result, out * 9, 8 * 64 * 56 * 56 * 4, out * 4 + out * 8, "reduction")


def test_max_pool2d_backward_writes_the_inputs_gradient():
    out, full = [8, 64, 28, 28], [8, 64, 56, 56]
    result = cost("aten::max_pool2d_with_indices_backward", [out, full, [], [], [], [], [], out],
                  [F32, F32, "ScalarList", "ScalarList", "ScalarList", "ScalarList", "Scalar", LONG],
                  [None, None, [3, 3], [2, 2], [1, 1], [1, 1], False, None])
    check(result, 8 * 64 * 28 * 28, 8 * 64 * 28 * 28 * (4 + 8), 8 * 64 * 56 * 56 * 4, "reduction")


def test_adaptive_average_pooling_reads_its_input_once():
    result = cost("aten::_adaptive_avg_pool2d", [[8, 512, 7, 7], []], [F32, "ScalarList"], [None, [1, 1]])
    check(result, 8 * 512 * 49, 8 * 512 * 49 * 4, 8 * 512 * 4, "reduction")


# ---------------------------------------------------------------------------------- compiled kernels

def test_a_compiled_kernel_moves_each_buffer_once():
    """Inductor's fused group gelu(x @ w).mul(2).add(1).sum(-1) after the matmul: reads the product
    once, writes the row sums once; its name lists the operators it fuses."""
    result = cost("cpp_fused_add_gelu_mul_sum_0", [[1024, 1024], [1024]], [F32, F32])
    elements = 1024 * 1024
    check(result, elements * (1 + 8 + 1 + 1), elements * 4, 1024 * 4, "reduction")
    assert result.transcendentals == elements  # gelu's


# ------------------------------------------------------------------------------- arguments by name

def test_rules_read_arguments_by_their_schema_names():
    """Note [Arguments by name]: _scaled_dot_product_flash_attention.quantized puts three descale
    tensors in front of is_causal; the rule reads is_causal by name in both overloads."""
    qkv, scalars = [[1, 8, 1024, 64]] * 3, ["Scalar", "Scalar", "Scalar", ""]
    plain = cost("aten::_scaled_dot_product_flash_attention", qkv + [[]] * 4, [BF16] * 3 + scalars,
                 [None] * 3 + [0.0, True, False, None])
    quantized = cost("aten::_scaled_dot_product_flash_attention", qkv + [[]] * 7, [BF16] * 3 + [""] * 3 + scalars,
                     [None] * 6 + [0.0, True, False, None])
    not_causal = cost("aten::_scaled_dot_product_flash_attention", qkv + [[]] * 4, [BF16] * 3 + scalars,
                      [None] * 3 + [0.0, False, False, None])
    assert quantized.flops == plain.flops < 0.6 * not_causal.flops


def test_an_overload_is_chosen_by_the_kinds_of_its_arguments():
    """sum(self, dtype) reduces everything; sum(self, dim, keepdim, dtype) the dims it names: by
    position both read their second argument, by name only the second is a dim."""
    everything = cost("aten::sum", [[8, 32], []], [F32, "Scalar"], [None, 6])
    rows = cost("aten::sum", [[8, 32], [], [], []], [F32, "ScalarList", "Scalar", ""], [None, [1], False, None])
    assert everything.bytes_written == 4 and rows.bytes_written == 8 * 4
