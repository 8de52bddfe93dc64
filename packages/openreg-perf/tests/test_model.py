"""The time model's properties (launch floor, quantisation, bounds, monotonicity, alpha-beta), its
determinism, and the calibration targets it meets against published measurements."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import openreg_perf
import pytest
from openreg_perf import fit, published
from openreg_perf.collectives import SWITCH_MIN_BYTES, bus_bandwidth_factor, collective_seconds
from openreg_perf.costs import OpCall, cost_of
from openreg_perf.model import (
    copy_seconds,
    error_class,
    kernel_seconds,
    matrix_kernel,
    roofline_seconds,
)
from openreg_perf.profile import Matrix, held_out_errors, list_profiles, load_profile

REPO_ROOT = Path(__file__).resolve().parents[3]
H100 = load_profile("h100-sxm")
A100 = load_profile("a100-sxm-80gb")
HALF = "c10::Half"
BF16 = "c10::BFloat16"


def mm(m, k, n, dtype=HALF):
    return cost_of(OpCall("aten::mm", [[m, k], [k, n]], [dtype, dtype]))


def add(elements, dtype=HALF):
    return cost_of(OpCall("aten::add", [[elements], [elements], []], [dtype, dtype, "Scalar"], [None, None, 1]))


@pytest.mark.parametrize("name", list_profiles())
def test_every_prediction_is_at_least_the_launch_floor(name):
    profile = load_profile(name)
    for cost in (mm(1, 1, 1), mm(4096, 4096, 4096), add(1), add(1 << 26)):
        assert kernel_seconds(cost, None, profile).seconds >= profile.chip.kernel_floor_s


def test_a_tiny_kernel_is_latency_bound():
    prediction = kernel_seconds(add(16), None, H100)
    assert prediction.bound == "latency"
    assert roofline_seconds(add(16), None, H100) < prediction.seconds / 100


def test_a_queued_kernel_occupies_its_stream_for_the_floor_and_a_long_one_hides_it():
    """kernel_floor_s bounds a kernel queued on a stream from below (2.9 us on an H200); beyond it a
    kernel takes its own graph floor plus its work, as replayed from a CUDA graph."""
    chip = H100.chip
    assert chip.graph_floor_s < chip.kernel_floor_s
    assert kernel_seconds(add(16), None, H100).seconds == chip.kernel_floor_s
    long = add(1 << 26)
    replayed = H100.replayed_from_graph()
    assert kernel_seconds(long, None, H100).seconds == kernel_seconds(long, None, replayed).seconds
    assert kernel_seconds(long, None, H100).seconds > 10 * chip.kernel_floor_s


def test_a_profile_without_a_graph_floor_adds_its_floor_to_the_work():
    chip = replace(H100.chip, graph_kernel_floor_s=None)
    plain = replace(H100, chip=chip)
    long = add(1 << 26)
    work = kernel_seconds(long, None, replace(plain, chip=replace(chip, kernel_floor_s=0.0))).seconds
    assert kernel_seconds(long, None, plain).seconds == pytest.approx(work + chip.kernel_floor_s)


def conv(dtype="float", kernel=3, stride=1, channels_last=False, groups=1, backward_mask=None):
    """A batch-32 convolution over 256 channels of 14 x 14 (its backward for a mask of gradients)."""
    shapes = [[32, 256, 14, 14], [256, 256 // groups, kernel, kernel]]
    lists = ["ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"]
    geometry = [[stride, stride], [kernel // 2] * 2, [1, 1], False, [0, 0], groups]
    if backward_mask is None:
        return cost_of(OpCall("aten::convolution", shapes + [[]] * 7, [dtype, dtype, ""] + lists,
                              [None, None, None] + geometry, channels_last=channels_last))
    side = (14 + 2 * (kernel // 2) - kernel) // stride + 1
    return cost_of(OpCall("aten::convolution_backward", [[32, 256, side, side]] + shapes + [[]] * 8,
                          [dtype, dtype, dtype, "ScalarList"] + lists + ["ScalarList"],
                          [None, None, None, None] + geometry + [backward_mask], channels_last=channels_last))


def test_an_nchw_convolution_on_matrix_units_pays_for_its_layout_conversions():
    """Note [Layout conversions]: a 3x3 BF16 convolution of NCHW tensors converts the image (3.2 MB),
    the weight (1.2 MB) and the output (3.2 MB), each a kernel that reads and writes it; a channels-last
    one, a 1x1 stride-1 one (a plain product) and an FP32 one (SIMT kernels read NCHW) convert nothing."""
    image, weight = 32 * 256 * 14 * 14 * 2, 256 * 256 * 9 * 2
    assert conv(BF16).layout_copies == (image, weight, image)
    assert conv(BF16, channels_last=True).layout_copies == conv(BF16, kernel=1).layout_copies == ()
    # Strided: not a plain product, but a 1x1 weight is the same bytes in both layouts.
    assert conv(BF16, kernel=1, stride=2).layout_copies == (image, 32 * 256 * 7 * 7 * 2)
    assert conv(BF16, groups=256).layout_copies == ()  # depthwise: PyTorch's own NCHW kernel
    extra = kernel_seconds(conv(BF16), None, H100).seconds - kernel_seconds(conv(BF16, channels_last=True), None,
                                                                             H100).seconds
    # Three kernels moving 2 x 7.6 MB: more than three kernel floors, less than at a third of the bandwidth.
    assert 3 * H100.chip.kernel_floor_s < extra < 3 * H100.chip.kernel_floor_s + 2 * (2 * image + weight) / (
        H100.memory.bandwidth_bytes_per_s / 3)
    fp32 = conv().as_gemm  # as the H100 runs it (no Winograd)
    assert kernel_seconds(fp32, None, H100).seconds == kernel_seconds(replace(fp32, layout_copies=()), None,
                                                                      H100).seconds
    assert kernel_seconds(fp32, "tf32", H100).seconds > kernel_seconds(replace(fp32, layout_copies=()), "tf32",
                                                                       H100).seconds
    # cuDNN's conversions: not on chips whose convolutions another library runs.
    mi300x = load_profile("mi300x")
    assert kernel_seconds(conv(BF16), None, mi300x) == kernel_seconds(conv(BF16, channels_last=True), None, mi300x)


def test_each_gradient_of_a_convolution_converts_its_own_operands():
    """Note [Layout conversions]: each gradient is a cuDNN call of its own, converting grad_output, its
    other operand and its result; the bias's gradient alone runs no cuDNN product."""
    image, weight = 32 * 256 * 14 * 14 * 2, 256 * 256 * 9 * 2
    assert conv(BF16, backward_mask=[True, False, False]).layout_copies == (image, weight, image)
    assert conv(BF16, backward_mask=[False, True, False]).layout_copies == (image, image, weight)
    assert conv(BF16, backward_mask=[True, True, True]).layout_copies == (image, weight, image, image, image, weight)
    assert conv(BF16, backward_mask=[False, False, True]).layout_copies == ()
    for mask in ([True, True, True], [False, False, True]):  # depthwise: PyTorch's own kernel, either way
        assert conv(BF16, groups=256, backward_mask=mask).layout_copies == ()


def test_winograd_runs_only_on_the_architectures_that_have_it():
    """costs/products.py's Note [Which convolutions run as Winograd]: the same FP32 3x3 convolution is a
    Winograd kernel on a V100 and an implicit GEMM on the H100 (cuDNN 9 on the H200 ran none)."""
    v100 = load_profile("v100-pcie-32gb")
    winograd = conv()
    as_gemm = winograd.as_gemm
    assert winograd.role == "forward_winograd" and (as_gemm.role, as_gemm.matrix.m) == ("forward", 32 * 14 * 14)
    assert kernel_seconds(winograd, None, H100) == kernel_seconds(as_gemm, None, H100)
    assert kernel_seconds(winograd, None, v100) != kernel_seconds(as_gemm, None, v100)


def test_a_tf32_convolution_takes_its_own_factor_and_a_tf32_product_does_not():
    slower = replace(H100, efficiency=replace(H100.efficiency, conv_tf32_factor=H100.efficiency.conv_tf32_factor / 2))
    assert kernel_seconds(conv(), "tf32", slower).seconds > 1.5 * kernel_seconds(conv(), "tf32", H100).seconds
    assert kernel_seconds(conv(), None, slower).seconds == kernel_seconds(conv(), None, H100).seconds  # FP32
    product = mm(4096, 4096, 4096, "float")
    assert kernel_seconds(product, "tf32", slower).seconds == kernel_seconds(product, "tf32", H100).seconds


def test_a_skinny_gemm_is_slower_than_the_roofline_says():
    skinny = mm(8192, 64, 64)
    assert kernel_seconds(skinny, None, H100).seconds > 3 * roofline_seconds(skinny, None, H100)


def _one_tile(profile, tile=(128, 128), max_split_k=1):
    """The profile with a matrix library that has one tile and never splits: the hand-worked cases."""
    return replace(profile, matrix=Matrix((tile,), (tile,), max_split_k))


def test_a_gemm_one_tile_row_past_a_full_wave_takes_two_waves():
    """12 x 11 = 132 tiles fill H100's 132 SMs once; 13 x 11 = 143 take two waves, as long as 24 x 11."""
    h100 = _one_tile(H100)
    seconds = [kernel_seconds(mm(rows * 128, 16384, 11 * 128), None, h100) for rows in (12, 13, 24)]
    assert all(prediction.bound == "compute" for prediction in seconds)
    one_wave, one_more_row, two_waves = (prediction.seconds for prediction in seconds)
    assert one_more_row == pytest.approx(two_waves, rel=0.01)
    assert one_more_row > 1.5 * one_wave  # the launch and setup costs are paid once either way


def test_a_tile_computes_all_its_outputs_even_past_the_matrix_edge():
    """With only 128 x 128 tiles, a 1-row product costs as much as a 128-row one."""
    h100 = _one_tile(H100)
    assert matrix_kernel(mm(1, 4096, 128 * 132), None, h100).compute_seconds == pytest.approx(
        matrix_kernel(mm(128, 4096, 128 * 132), None, h100).compute_seconds)


def test_a_menu_is_never_slower_than_its_largest_tile_alone():
    largest = max(H100.matrix.tensor_tiles, key=lambda tile: tile[0] * tile[1])
    for shape in ((8192, 8192, 8192), (64, 12288, 12288), (16, 4096, 4096), (4096, 4096, 128), (128, 65536, 128)):
        cost = mm(*shape, BF16)
        fixed = matrix_kernel(cost, None, _one_tile(H100, largest)).seconds
        assert matrix_kernel(cost, None, H100).seconds <= fixed * (1 + 1e-12), shape
    # and much faster where the fixed tile wastes most of its work
    assert matrix_kernel(mm(16, 4096, 4096, BF16), None, H100).seconds < 0.6 * matrix_kernel(
        mm(16, 4096, 4096, BF16), None, _one_tile(H100, largest)).seconds


def test_hand_worked_tile_choices():
    """Worked by hand on H100's menu (132 SMs): a large square product takes the largest tile and no
    split (2,048 tiles of 256 x 128 are 15.5 waves; smaller tiles lose more at their edges); a product of
    16 rows takes a tile of fewer rows (a 256-row tile would compute 240 rows of nothing; it reads its
    weights at the memory's rate whichever smaller tile it takes) and splits its deep reduction (64 x 64
    tiles of 16 x 4096 are 64 tiles, 512 SM slots: split K to fill them)."""
    large = matrix_kernel(mm(8192, 8192, 8192, BF16), None, H100)
    assert (large.tile_m * large.tile_n, large.split_k) == (256 * 128, 1)
    skinny = matrix_kernel(mm(16, 4096, 4096, BF16), None, H100)
    assert skinny.tile_m < 256 and skinny.split_k > 1
    shallow = matrix_kernel(mm(4096, 64, 4096, BF16), None, H100)
    assert shallow.split_k == 1  # a 64-deep reduction is never split (MIN_SLICE_DEPTH)


def test_a_batched_fp32_product_runs_on_the_librarys_batched_tiles():
    """cuBLAS runs an A100's FP32 bmm on its 128 x 128 SGEMM kernel whatever the shape (NeuSight's
    rows): 100 products of 36 x 4 outputs are 100 tiles of 128 x 128, 3.5x the work of 64 x 64 ones.
    The same product unbatched chooses from the whole menu."""
    a100 = load_profile("a100-pcie-40gb")
    batched = cost_of(OpCall("aten::bmm", [[100, 36, 699], [100, 699, 4]], ["float", "float"]))
    chosen = matrix_kernel(batched, None, a100)
    assert (chosen.tile_m, chosen.tile_n, chosen.split_k) == (128, 128, 1)
    single = matrix_kernel(mm(36, 699, 4, "float"), None, a100)
    assert single.tile_m * single.tile_n < 128 * 128
    # cuBLAS names a tile by the output's columns first (it computes the transpose): the P100's
    # maxwell_sgemm_128x64 covers 64 rows and 128 columns of a bmm's output
    pascal = matrix_kernel(batched, None, load_profile("p100-pcie-16gb"))
    assert (pascal.tile_m, pascal.tile_n) == (64, 128)
    # a chip whose profile names no batched menu chooses from simt_tiles for a bmm too
    whole_menu = replace(a100, matrix=replace(a100.matrix, batched_simt_tiles=()))
    assert matrix_kernel(batched, None, whole_menu).seconds < 0.5 * chosen.seconds


def test_split_k_pays_for_its_partial_results():
    split = matrix_kernel(mm(128, 65536, 128, BF16), None, H100)  # the reduction is a kernel of its own
    assert split.split_k > 1 and split.reduction_seconds >= H100.chip.kernel_floor_s
    assert split.seconds == max(split.compute_seconds, split.memory_seconds) + split.reduction_seconds


def test_a_forward_convolution_is_never_split():
    """cuDNN's implicit-GEMM convolutions reduce over channels x window in one pass: a convolution with
    few outputs and a deep reduction (one image, 1,711 channels in, 24 out: NeuSight's V100 row took
    0.58 ms) runs on few tiles, where a GEMM of its shape would split."""
    v100 = load_profile("v100-pcie-32gb")
    conv = cost_of(OpCall("aten::convolution", [[1, 1711, 27, 27], [24, 1711, 3, 3], [], [], [], [], [], [], []],
                          ["float", "float", "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList",
                           "Scalar"], [None, None, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1]))
    assert matrix_kernel(conv, None, v100).split_k == 1
    shape = conv.matrix
    assert matrix_kernel(mm(shape.m, shape.k, shape.n, "float"), None, v100).split_k > 1
    assert kernel_seconds(conv, None, v100).seconds == pytest.approx(0.58e-3, rel=0.35)


def layer_norm(rows, width, dtype="float"):
    return cost_of(OpCall("aten::native_layer_norm", [[rows, width], [], [width], [width], []],
                          [dtype, "ScalarList", dtype, dtype, "Scalar"], [None, [width], None, None, 1e-5]))


def softmax(rows, width, dtype="float"):
    return cost_of(OpCall("aten::_softmax", [[rows, width], [], []], [dtype, "Scalar", "Scalar"], [None, -1, False]))


def total(n, dims=None, dtype="float"):
    """sum of an n-element tensor: over everything, or over rows of 1,024 (dims=[1])."""
    shape = [n] if dims is None else [n // 1024, 1024]
    return cost_of(OpCall("aten::sum", [shape, dims or []], [dtype, "ScalarList" if dims else ""], [None, dims]))


def test_a_reduction_pays_a_fixed_time_and_more_where_its_blocks_share_an_output():
    """Note [Reductions]: every reduction adds reduction_fixed_s to its streaming time; one whose outputs have
    SHARED_OUTPUT_INPUTS inputs or more (a sum of everything over 65,536 elements, not over 16,384, nor rows of
    1,024) adds reduction_global_s; other kernels (an add, a max pooling) neither."""
    efficiency = H100.efficiency
    without = replace(H100, efficiency=replace(efficiency, reduction_fixed_s=0.0, reduction_global_s=0.0))
    assert [total(n).role for n in (1 << 14, 1 << 16)] == ["reduce", "reduce_shared"]
    assert total(1 << 24, [1]).role == "reduce"
    pool = cost_of(OpCall("aten::max_pool2d_with_indices", [[32, 64, 112, 112], [], [], [], [], []],
                          ["float", "ScalarList", "ScalarList", "ScalarList", "ScalarList", "Scalar"],
                          [None, [3, 3], [2, 2], [1, 1], [1, 1], False]))
    assert pool.kind == "reduction"
    for cost, added in ((total(1 << 24), efficiency.reduction_fixed_s + efficiency.reduction_global_s),
                        (total(1 << 24, [1]), efficiency.reduction_fixed_s), (add(1 << 24), 0.0), (pool, 0.0)):
        extra = kernel_seconds(cost, None, H100).seconds - kernel_seconds(cost, None, without).seconds
        assert extra == pytest.approx(added, rel=1e-6, abs=1e-12)
    assert efficiency.reduction_fixed_s > 0 and efficiency.reduction_global_s > 0


def test_a_row_wise_kernel_needs_rows_to_fill_the_device():
    """Note [Row-wise kernels]: a layer norm over few long rows reaches a smaller share of the bandwidth
    than the same bytes in many short rows; at row_half_rows_per_unit rows per compute unit, half. (Without
    Note [Rows of a norm]'s limit of the compute units, which holds short rows.)"""
    h100 = replace(H100, efficiency=replace(H100.efficiency, norm_row_s=0.0, norm_unit_bytes_per_s=math.inf))
    few, many = layer_norm(512, 1 << 14), layer_norm(1 << 14, 512)
    assert (few.rows, many.rows) == (512, 1 << 14)
    assert kernel_seconds(few, None, h100).seconds > 1.5 * kernel_seconds(many, None, h100).seconds
    half = h100.efficiency.row_half_rows_per_unit * h100.chip.compute_units
    at_half = layer_norm(round(half), 1 << 14)
    full = replace(h100, efficiency=replace(h100.efficiency, row_half_rows_per_unit=0.0))
    memory_part = kernel_seconds(at_half, None, h100).seconds - h100.chip.graph_floor_s
    assert memory_part > 1.8 * (kernel_seconds(at_half, None, full).seconds - h100.chip.graph_floor_s)
    add_ = add(1 << 20)
    assert add_.rows == 0 and kernel_seconds(add_, None, full).seconds == kernel_seconds(add_, None, h100).seconds


def test_a_norm_takes_the_longer_of_its_streaming_and_its_compute_units_time_and_softmax_does_not():
    """Note [Rows of a norm]: a layer norm over short rows is held by its compute units, (rows * norm_row_s +
    bytes / norm_unit_bytes_per_s) / compute units; over few long rows, by memory. A softmax over short rows
    (several to a warp) is not held by its units."""
    unlimited = replace(H100, efficiency=replace(H100.efficiency, norm_row_s=0.0, norm_unit_bytes_per_s=math.inf))
    rows, efficiency = 1 << 19, H100.efficiency
    short, long_rows = layer_norm(rows, 128, BF16), layer_norm(64, 1 << 20, BF16)
    units = (rows * efficiency.norm_row_s + short.bytes / efficiency.norm_unit_bytes_per_s) / H100.chip.compute_units
    assert efficiency.norm_row_s > 0 and units > kernel_seconds(short, None, unlimited).seconds
    assert kernel_seconds(short, None, H100).seconds == pytest.approx(H100.chip.graph_floor_s + units, rel=1e-9)
    assert kernel_seconds(long_rows, None, H100).seconds == kernel_seconds(long_rows, None, unlimited).seconds
    short_softmax = softmax(rows, 128, BF16)
    assert kernel_seconds(short_softmax, None, H100).seconds == kernel_seconds(short_softmax, None, unlimited).seconds


def test_softmax_backward_and_batch_norm_pay_no_time_per_row():
    """Only a layer or RMS norm pays Note [Rows of a norm]'s time per row: softmax's backward (rows several to a
    warp, and the norms' memory fraction) and batch norm (statistics per channel, no rows) do not."""
    without = replace(H100, efficiency=replace(H100.efficiency, norm_row_s=0.0))
    other_softmax = replace(H100, efficiency=replace(H100.efficiency, softmax_memory_fraction=0.05))
    rows = 1 << 19
    backward = cost_of(OpCall("aten::_softmax_backward_data", [[rows, 128], [rows, 128], [], []],
                              [BF16, BF16, "Scalar", "Scalar"], [None, None, -1, 15]))
    batch_norm = cost_of(OpCall("aten::native_batch_norm", [[64, 256, 56, 56], [256], [256], [256], [256], [], [], []],
                                [BF16] * 5 + ["Scalar"] * 3, [None] * 5 + [True, 0.1, 1e-5]))
    for cost in (backward, batch_norm):
        assert kernel_seconds(cost, None, H100).seconds == kernel_seconds(cost, None, without).seconds
    assert kernel_seconds(backward, None, other_softmax).seconds == kernel_seconds(backward, None, H100).seconds


def test_attention_adds_its_exponentials_at_the_special_function_rate():
    """Note [Attention's exponentials]: a fused attention's compute time is its products' (the matrix model at
    the attention factor) plus one exponential per score on the special-function units, at the sustained clock;
    a product with the same FLOPs pays no such time."""
    qkv = [1, 32, 8192, 128]
    forward = cost_of(OpCall("aten::_scaled_dot_product_flash_attention", [qkv] * 3 + [[], []],
                             [BF16] * 3 + ["Scalar", "Scalar"], [None] * 3 + [0.0, True]))
    assert forward.transcendentals == 32 * 8192 * 8193 // 2
    without = replace(forward, transcendentals=0.0)
    power_limited = replace(H100, chip=replace(H100.chip, sustained_clock_hz=H100.chip.clock_hz / 2))
    for profile in (H100, power_limited):
        added = kernel_seconds(forward, None, profile).seconds - kernel_seconds(without, None, profile).seconds
        sfu_rate = profile.peak.special_functions_per_s * profile.chip.sustained_clock_hz / profile.chip.clock_hz
        assert added == pytest.approx(forward.transcendentals / sfu_rate, rel=1e-9)
    assert error_class(forward) == "attention"


def test_an_optimizer_step_streams_at_its_own_fraction_and_a_lone_row_has_no_floor():
    """Note [Optimizer steps]: a fused AdamW step (and a _foreach_ kernel) streams at e.optimizer_memory_fraction,
    an add at the elementwise fraction; gpu_calibration.py's one fused AdamW row is the device's (a workload of
    one row has no rig's floor to be near), its foreach twin is not priced."""
    step = published._measured_fused_adamw("8 x 4096 x 4096 FP32 parameters, fused")
    assert step.kind == "optimizer" and step.bytes == 8 * 4096 * 4096 * 4 * 7  # 4 lists read, 3 written
    halved = replace(H100, efficiency=replace(H100.efficiency,
                                              optimizer_memory_fraction=H100.efficiency.optimizer_memory_fraction / 2))
    work = [kernel_seconds(step, None, profile).seconds - H100.chip.graph_floor_s for profile in (H100, halved)]
    assert work[1] == pytest.approx(2 * work[0], rel=0.01)
    foreach = cost_of(OpCall("aten::_foreach_add_", [[[4096, 4096]] * 8, [[4096, 4096]] * 8, []],
                             ["TensorList", "TensorList", "Scalar"], [None, None, 1]))
    assert kernel_seconds(foreach, None, halved).seconds > 1.9 * kernel_seconds(foreach, None, H100).seconds - 1e-5
    assert kernel_seconds(add(1 << 28), None, halved).seconds == kernel_seconds(add(1 << 28), None, H100).seconds
    rows = [{"workload": "AdamW step", "config": f"8 x 4096 x 4096 FP32 parameters, {kind}", "precision": "FP32",
             "hardware": "NVIDIA H200 (132 SMs)", "metric": "device time", "value": value, "unit": "us"}
            for kind, value in (("fused", "1129"), ("foreach", "3096"))]
    (fused,) = published.measured_cases(rows)
    assert fused.fitted and fused.error_class == "elementwise" and fused.floor_seconds == 0.0


def test_a_long_rows_later_passes_come_from_l2_where_the_rows_in_flight_fit():
    """Note [Rows read again]: softmax over rows of 64 KiB reads each row three times; with the rows in flight in
    L2 (an H100's 50 MB) only the first read and the write reach memory, in a 1 MB L2 all four do."""
    long_rows = softmax(1 << 12, 1 << 14)  # FP32 rows of 64 KiB, 256 MiB in all
    assert long_rows.reread_bytes == 2 * long_rows.bytes_written
    small_l2 = replace(H100, chip=replace(H100.chip, l2_bytes=1e6))
    fits = kernel_seconds(long_rows, None, H100).seconds - H100.chip.graph_floor_s
    spills = kernel_seconds(long_rows, None, small_l2).seconds - H100.chip.graph_floor_s
    assert spills / fits == pytest.approx(2.0, rel=0.02)  # 4 x 256 MiB against 2 x 256 MiB
    short_rows = softmax(1 << 16, 1 << 10)  # on chip: read once wherever
    assert short_rows.reread_bytes == 0
    assert kernel_seconds(short_rows, None, small_l2).seconds == kernel_seconds(short_rows, None, H100).seconds
    # The datasheet roofline counts the bytes that reach memory too: never above the model's time.
    assert roofline_seconds(long_rows, None, H100) < kernel_seconds(long_rows, None, H100).seconds
    assert roofline_seconds(long_rows, None, small_l2) == pytest.approx(2 * roofline_seconds(long_rows, None, H100))


def test_a_power_limited_part_runs_compute_bound_work_at_its_sustained_clock():
    half_clock = replace(H100, chip=replace(H100.chip, sustained_clock_hz=H100.chip.clock_hz / 2))
    compute, memory = mm(8192, 8192, 8192, BF16), add(1 << 28)
    assert kernel_seconds(compute, None, half_clock).seconds == pytest.approx(
        2 * kernel_seconds(compute, None, H100).seconds, rel=0.05)
    assert kernel_seconds(memory, None, half_clock).seconds == kernel_seconds(memory, None, H100).seconds


def test_a_power_limited_parts_convolutions_clock_higher_than_its_gemms_up_to_the_boost_clock():
    """Note [Sustained clock]: an FP32 convolution runs at conv_clock_gain times the sustained clock, a GEMM
    and a convolution on the matrix units at it."""
    conv = cost_of(OpCall("aten::convolution", [[64, 256, 56, 56], [256, 256, 1, 1], [], [], [], [], [], [], []],
                          ["float", "float", "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList",
                           "Scalar"], [None, None, None, [1, 1], [1, 1], [0, 0], False, [0, 0], 1]))
    gemm = mm(8192, 8192, 8192, "float")

    def capped(clock_share: float, gain: float):
        return replace(H100, chip=replace(H100.chip, sustained_clock_hz=H100.chip.clock_hz * clock_share),
                       efficiency=replace(H100.efficiency, conv_clock_gain=gain))

    on_matrix_units = kernel_seconds(conv, "tf32", capped(0.25, 2.0)).seconds
    assert on_matrix_units == kernel_seconds(conv, "tf32", capped(0.25, 1.0)).seconds
    for cost in (conv, gemm):
        assert kernel_seconds(cost, None, capped(0.25, 1.0)).seconds == pytest.approx(
            4 * kernel_seconds(cost, None, H100).seconds, rel=0.05)
    assert kernel_seconds(conv, None, capped(0.25, 2.0)).seconds == pytest.approx(
        2 * kernel_seconds(conv, None, H100).seconds, rel=0.05)
    gemm_seconds = kernel_seconds(gemm, None, capped(0.25, 1.0)).seconds
    assert kernel_seconds(gemm, None, capped(0.25, 2.0)).seconds == gemm_seconds
    assert kernel_seconds(conv, None, capped(0.5, 3.0)).seconds == kernel_seconds(conv, None, H100).seconds


def test_a_softmax_takes_at_least_its_cycles_per_element():
    """Note [A softmax's pace]: a softmax's compute units spend e.softmax_element_cycles on each element,
    at the sustained clock, which holds it where its bytes take less; other row-wise kernels are not paced."""
    softmax = cost_of(OpCall("aten::_softmax", [[65536, 1024], [], []], ["c10::BFloat16", "Scalar", "Scalar"],
                             [None, -1, False]))

    def seconds(cost, cycles: float, clock_share: float = 1.0) -> float:
        chip = replace(H100.chip, sustained_clock_hz=H100.chip.clock_hz * clock_share)
        efficiency = replace(H100.efficiency, softmax_element_cycles=cycles)
        return kernel_seconds(cost, None, replace(H100, chip=chip, efficiency=efficiency)).seconds

    paced = 65536 * 1024 * 4.0 / (H100.chip.compute_units * H100.chip.clock_hz)
    assert seconds(softmax, 4.0) == pytest.approx(paced, rel=0.02)
    assert seconds(softmax, 8.0) == pytest.approx(2 * paced, rel=0.02)
    assert seconds(softmax, 4.0, clock_share=0.5) == pytest.approx(2 * paced, rel=0.02)
    assert seconds(softmax, 0.0) == seconds(softmax, 0.001) < seconds(softmax, 4.0)  # its bytes decide
    backward = cost_of(OpCall("aten::_softmax_backward_data", [[65536, 1024]] * 2 + [[], []],
                              ["c10::BFloat16"] * 2 + ["Scalar", "Scalar"], [None, None, -1, 15]))
    layer_norm = cost_of(OpCall("aten::native_layer_norm", [[65536, 1024], [1024], [1024], [1024], []],
                                ["c10::BFloat16", "ScalarList", "c10::BFloat16", "c10::BFloat16", "Scalar"],
                                [None, [1024], None, None, 1e-5]))
    for cost in (backward, layer_norm):
        assert seconds(cost, 0.0) == seconds(cost, 8.0)


def _stem(channels: int, dtype: str):
    """ResNet's 7 x 7, stride-2 stem over an image of `channels` channels, channels-last."""
    shapes = [[32, channels, 224, 224], [64, channels, 7, 7], [], [], [], [], [], [], []]
    dtypes = [dtype, dtype, "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"]
    return cost_of(OpCall("aten::convolution", shapes, dtypes,
                          [None, None, None, [2, 2], [3, 3], [1, 1], False, [0, 0], 1], channels_last=True))


def test_a_matrix_unit_convolution_over_unaligned_channels_runs_its_padded_product_at_its_own_fraction():
    """Note [Unaligned channels]: cuDNN pads a BF16 convolution's input channels to 8 (16 bytes), a TF32
    one's to 4, and runs the padded product at e.conv_unaligned_fraction of the peak; FP32 units and
    other vendors' chips pad nothing."""
    def seconds(cost, dtype=None, profile=H100, fraction=None):
        if fraction is not None:
            profile = replace(profile, efficiency=replace(profile.efficiency, conv_unaligned_fraction=fraction))
        return kernel_seconds(cost, dtype, profile).seconds

    three, five, eight = (_stem(channels, "c10::BFloat16") for channels in (3, 5, 8))
    assert seconds(three) == seconds(five)  # both padded to 8 channels
    assert seconds(three, fraction=0.1) == pytest.approx(2 * seconds(three, fraction=0.2), rel=0.02)
    assert seconds(eight, fraction=0.1) == seconds(eight, fraction=0.2) < seconds(three)  # aligned: its level
    fp32 = _stem(3, "float")
    assert seconds(fp32, "tf32", fraction=0.1) > seconds(fp32, "tf32", fraction=0.2)  # TF32 pads 3 to 4
    assert seconds(_stem(4, "float"), "tf32", fraction=0.1) == seconds(_stem(4, "float"), "tf32", fraction=0.2)
    assert seconds(fp32, "fp32", fraction=0.1) == seconds(fp32, "fp32", fraction=0.2)  # the FP32 units
    mi300x = load_profile("mi300x")
    assert seconds(three, profile=mi300x, fraction=0.1) == seconds(three, profile=mi300x, fraction=0.2)
    weight_gradient = cost_of(OpCall(  # the stem's weight gradient: padded too
        "aten::convolution_backward", [[32, 64, 112, 112], [32, 3, 224, 224], [64, 3, 7, 7]] + [[]] * 8,
        ["c10::BFloat16"] * 3 + ["ScalarList", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList",
                                 "Scalar", "ScalarList"],
        [None] * 3 + [None, [2, 2], [3, 3], [1, 1], False, [0, 0], 1, [False, True, False]], channels_last=True))
    assert seconds(weight_gradient, fraction=0.1) > seconds(weight_gradient, fraction=0.2)
    grouped = cost_of(OpCall("aten::convolution", [[32, 128, 56, 56], [128, 4, 3, 3]] + [[]] * 7,  # unmeasured
                             ["c10::BFloat16"] * 2 + ["", "ScalarList", "ScalarList", "ScalarList", "Scalar",
                                                      "ScalarList", "Scalar"],
                             [None, None, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 32], channels_last=True))
    assert seconds(grouped, fraction=0.1) == seconds(grouped, fraction=0.2)


def test_a_3x3_fp32_weight_gradient_runs_as_winograd_on_every_architecture_but_not_on_the_matrix_units():
    """Note [Which convolutions run as Winograd] in costs/products.py: on a Hopper chip the forward pass
    runs its implicit GEMM, the weight gradient Winograd (conv_weight_grad_winograd_factor); in TF32 both
    run implicit GEMMs on the matrix units."""
    values = [None, None, None, [256], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [False, True, False]]
    wgrad = cost_of(OpCall("aten::convolution_backward",
                           [[32, 256, 14, 14], [32, 256, 14, 14], [256, 256, 3, 3], [], [], [], [], [], [], [], []],
                           ["float"] * 3 + ["ScalarList"] * 4 + ["Scalar", "ScalarList", "Scalar", "ScalarList"],
                           values))
    assert wgrad.role == "weight_grad_winograd"
    fast = replace(H100, efficiency=replace(H100.efficiency, conv_weight_grad_winograd_factor=4.0,
                                            conv_weight_grad_factor=1.0))
    direct = kernel_seconds(wgrad.as_gemm, None, fast).seconds
    assert kernel_seconds(wgrad, None, fast).seconds < direct / 2
    assert kernel_seconds(wgrad, "tf32", fast).seconds == kernel_seconds(wgrad.as_gemm, "tf32", fast).seconds


def test_each_kernel_class_has_its_own_efficiency():
    """A convolution's weight gradient and a GEMM of the same shape and precision differ by the
    profile's factor; transcendentals cost special-function time."""
    slow_conv = replace(H100, efficiency=replace(H100.efficiency, conv_matrix_forward_factor=0.25))
    conv = cost_of(OpCall("aten::convolution", [[64, 256, 56, 56], [256, 256, 3, 3], [], [], [], [], [], [], []],
                          [BF16, BF16, "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"],
                          [None, None, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1]))
    assert conv.role == "forward"
    assert kernel_seconds(conv, None, slow_conv).seconds > 3 * kernel_seconds(conv, None, H100).seconds
    tanh = cost_of(OpCall("aten::tanh", [[1 << 20]], ["float"]))
    assert tanh.transcendentals == 1 << 20
    no_special_units = replace(H100, peak=replace(H100.peak, special_functions_per_s=1e9))
    assert kernel_seconds(tanh, None, no_special_units).seconds > 10 * kernel_seconds(tanh, None, H100).seconds


def test_a_large_gemm_is_compute_bound_below_peak():
    prediction = kernel_seconds(mm(8192, 8192, 8192), None, H100)
    assert prediction.bound == "compute"
    assert 0.5 < prediction.achieved_fraction_of_peak < 1.0


def test_a_large_elementwise_kernel_is_memory_bound():
    prediction = kernel_seconds(add(1 << 28), None, H100)
    assert prediction.bound == "memory"
    assert 0.5 < prediction.achieved_fraction_of_peak <= 1.0


@pytest.mark.parametrize("make", [lambda size: mm(size, size, size), lambda size: add(size * size)])
def test_predictions_grow_with_size(make):
    seconds = [kernel_seconds(make(size), None, H100).seconds for size in (16, 64, 256, 1024, 4096, 16384)]
    assert seconds == sorted(seconds)
    assert seconds[-1] > seconds[0]


def test_views_take_no_time():
    view = cost_of(OpCall("aten::view", [[10, 5], []], ["float", "ScalarList"], [None, [50]]))
    assert kernel_seconds(view, None, H100).seconds == 0


def test_tf32_makes_an_fp32_product_faster_where_the_chip_has_it():
    product = mm(4096, 4096, 4096, "float")
    assert kernel_seconds(product, "tf32", A100).seconds < kernel_seconds(product, None, A100).seconds / 4


def test_a_precision_the_chip_lacks_falls_back_to_fp32():
    product = mm(2048, 2048, 2048, "c10::Float8_e4m3fn")
    assert kernel_seconds(product, None, A100).seconds == kernel_seconds(product, "fp32", A100).seconds


def test_an_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="unknown precision 'fp4'"):
        kernel_seconds(mm(8, 8, 8), "fp4", H100)


def test_predictions_are_deterministic():
    cost = mm(1000, 3000, 500)
    assert kernel_seconds(cost, None, H100) == kernel_seconds(cost, None, H100)
    assert collective_seconds("all_reduce", 1e8, 8, H100) == collective_seconds("all_reduce", 1e8, 8, H100)


# ----------------------------------------------------------------------------------- copies

def test_pinned_copies_beat_pageable_ones_and_approach_the_link_rate():
    size = 1 << 30
    pinned, pageable = copy_seconds(size, "h2d", True, H100), copy_seconds(size, "h2d", False, H100)
    assert pinned < pageable
    assert size / pinned < H100.links.host_pinned_bytes_per_s
    assert size / pinned > 0.5 * H100.links.host_pinned_bytes_per_s


def test_a_peer_copy_on_a_mesh_uses_one_link():
    mi300x = load_profile("mi300x")
    size = 1 << 30
    one_link = mi300x.links.device_link_bytes_per_s / (mi300x.links.devices_per_node - 1)
    assert size / copy_seconds(size, "p2p", True, mi300x) < one_link


def test_a_copy_within_the_device_reads_and_writes_memory():
    size = 1 << 30
    assert copy_seconds(size, "d2d", True, H100) > 2 * size / H100.memory.bandwidth_bytes_per_s


def test_an_unknown_copy_kind_is_refused():
    with pytest.raises(ValueError, match="unknown copy kind 'h2h'"):
        copy_seconds(1, "h2h", True, H100)


# ------------------------------------------------------------------------------------ collectives

@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all"])
def test_collective_time_grows_with_size(op):
    seconds = [collective_seconds(op, size, 8, H100) for size in (1 << 10, 1 << 20, 1 << 25, 1 << 30)]
    assert seconds == sorted(seconds) and seconds[-1] > 10 * seconds[0]


def test_ring_all_reduce_doubling_ranks_follows_alpha_beta():
    """Large messages: time scales with the bus traffic 2(n-1)/n. Small ones: with the 2(n-1) steps."""
    large = [collective_seconds("all_reduce", 1 << 34, ranks, A100, "ring") for ranks in (2, 4)]
    assert large[1] / large[0] == pytest.approx((2 * 3 / 4) / (2 * 1 / 2), rel=0.01)
    small = [collective_seconds("all_reduce", 8, ranks, A100, "ring") for ranks in (2, 4)]
    assert small[1] / small[0] == pytest.approx(6 / 2, rel=0.01)


def test_bus_bandwidth_convention_of_nccl_tests():
    assert bus_bandwidth_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    assert bus_bandwidth_factor("all_gather", 8) == pytest.approx(7 / 8)
    assert bus_bandwidth_factor("broadcast", 8) == 1.0


def test_the_fastest_algorithm_is_chosen_by_default():
    for size in (1 << 12, 1 << 24, 1 << 34):
        chosen = collective_seconds("all_reduce", size, 8, H100)
        algorithms = ("ring", "switch") if size >= SWITCH_MIN_BYTES else ("ring",)
        assert chosen == min(collective_seconds("all_reduce", size, 8, H100, name) for name in algorithms)
        across = collective_seconds("all_reduce", size, 16, H100)
        assert across == min(collective_seconds("all_reduce", size, 16, H100, name) for name in ("ring", "tree"))


def test_a_group_across_nodes_sends_through_the_nics_of_its_ranks_on_each_node():
    """Note [Collectives across nodes]: 16 ranks, 8 a node, run their rings through every NIC of a node (a
    DGX H100's eight give 400 GB/s); a data-parallel group of pipelines, one rank a node, has one NIC each;
    an all_to_all sends what goes to the other node through each rank's own NIC."""
    size, links, fraction = 1 << 34, H100.links, H100.collectives.simple_fraction

    def bus_bandwidth(ranks, ranks_per_node=None, op="all_reduce"):
        seconds = collective_seconds(op, size, ranks, H100, "ring", ranks_per_node=ranks_per_node)
        return bus_bandwidth_factor(op, ranks) * size / seconds

    nodes = min(links.device_link_bytes_per_s, 8 * links.network_bytes_per_s)
    assert bus_bandwidth(16) == pytest.approx(nodes * fraction, rel=0.01)
    assert 0.95 * nodes * fraction < bus_bandwidth(64) < nodes * fraction  # less its 126 steps' latency
    assert bus_bandwidth(16, ranks_per_node=1) == pytest.approx(links.network_bytes_per_s * fraction, rel=0.01)
    assert bus_bandwidth(8) == pytest.approx(links.device_link_bytes_per_s * fraction, rel=0.01)  # one node
    half_leaves = collective_seconds("all_to_all", size, 16, H100)
    assert half_leaves == pytest.approx(size / 2 / (links.network_bytes_per_s * fraction), rel=0.01)
    with pytest.raises(ValueError, match="ranks_per_node must be between 1 and 8"):
        collective_seconds("all_reduce", size, 16, H100, ranks_per_node=16)


def test_nccl_s_tree_spans_nodes_only():
    """NCCL's tree is a tree of nodes; within one node it chains the GPUs, and NCCL runs a ring there
    (nccl-tests' 1 MiB all-reduce over 8 A100s: 102 us, a ring's 14 steps, not a tree's 6)."""
    with pytest.raises(ValueError, match="'tree' cannot run all_reduce on a100-sxm-80gb over 8 ranks"):
        collective_seconds("all_reduce", 1 << 20, 8, A100, "tree")
    assert collective_seconds("all_reduce", 1 << 20, 16, A100, "tree") > 0


def test_nccl_reduces_in_the_switch_only_from_its_threshold_up():
    with pytest.raises(ValueError, match="'switch' cannot run all_reduce on h100-sxm"):
        collective_seconds("all_reduce", SWITCH_MIN_BYTES // 2, 8, H100, "switch")
    assert collective_seconds("all_reduce", SWITCH_MIN_BYTES, 8, H100, "switch") > 0


def test_in_switch_reduction_needs_a_switch_that_reduces():
    with pytest.raises(ValueError, match="'switch' cannot run all_reduce on a100-sxm-80gb"):
        collective_seconds("all_reduce", 1 << 20, 8, A100, "switch")


def test_crossing_nodes_is_slower_than_staying_in_one():
    per_rank = 1 << 30
    assert collective_seconds("all_reduce", per_rank, 16, H100) > collective_seconds("all_reduce", per_rank, 8, H100)


def test_one_rank_needs_no_collective():
    assert collective_seconds("all_reduce", 1 << 20, 1, H100) == 0


def test_an_unknown_collective_is_refused():
    with pytest.raises(ValueError, match="unknown collective 'gossip'"):
        collective_seconds("gossip", 1, 8, H100)


# ------------------------------------------------------------------------------------- calibration
# The calibration fixture is tools/bench/perf_model.py's table: every published row predicted by a fit
# that never saw its device (leave one device out), per kernel class.

TARGETS_MET = ["elementwise", "links"]


@pytest.mark.parametrize("name", TARGETS_MET)
def test_calibration_targets_are_met_held_out(calibration, name):
    """At most 12 % mean absolute error held out, bias within 5 %, 2.5x better than the roofline."""
    assert calibration.classes[name].met, calibration.classes[name]


def test_every_report_states_the_benchmarks_held_out_errors(calibration):
    """profiles/_defaults.toml's [held_out_error] (what each summary quotes) is what the benchmark
    computes from the shipped rows and code (perf_model.py --write-profiles writes it)."""
    written = held_out_errors()
    for name, summary in calibration.classes.items():
        if name in ("launch", "overall"):
            continue
        assert written[name][0] == pytest.approx(summary.model_mape, abs=5e-4), name
        assert written[name][1] == pytest.approx(summary.model_bias, abs=5e-4), name


def test_the_model_beats_the_roofline_where_it_is_not_said_otherwise(calibration):
    """Convolutions are the exception: cuDNN's Winograd kernels on NeuSight's 3x3 rows do less work than
    a GEMM of their shape, which one factor per device does not capture (docs/modules/perf.md)."""
    for name, summary in calibration.classes.items():
        if name != "conv":
            assert summary.model_mape < summary.roofline_mape, name


def test_writing_the_fitted_profiles_takes_a_users_profile_too(perf_bench, calibration, tmp_path, monkeypatch):
    """--write-profiles rewrites the source tree's profiles and a user's in $OPENREG_PERF_HOME/profiles (it
    looked for the user's among the bundled ones, and stopped)."""
    import shutil

    source = tmp_path / "source"
    shutil.copytree(perf_bench.SOURCE_PROFILES, source)
    (tmp_path / "home" / "profiles").mkdir(parents=True)
    mine = tmp_path / "home" / "profiles" / "acme-x1.toml"
    mine.write_text(Path(load_profile("h100-sxm").path).read_text().replace('name = "h100-sxm"', 'name = "acme-x1"')
                    .replace("gemm_fp32_fraction = ", "gemm_fp32_fraction = 0.123 #"))
    monkeypatch.setattr(perf_bench, "SOURCE_PROFILES", source)
    monkeypatch.setenv("OPENREG_PERF_HOME", str(tmp_path / "home"))
    perf_bench.write_profiles(calibration)
    assert load_profile(mine).efficiency.gemm_fp32_fraction != 0.123  # the device-independent value, written
    assert (source / "h100-sxm.toml").read_text() == Path(load_profile("h100-sxm").path).read_text()


def test_a_datasheet_only_profile_given_fitted_sections_still_loads(perf_bench, tmp_path, monkeypatch):
    """A vendor's datasheet-only profile whose chip gets rows takes the defaults' [efficiency] and
    [collectives] (the fit's values go in next), never the architectures' levels beside them in
    _defaults.toml, which made the profile fail to load; writing values leaves those tables alone."""
    import shutil

    source = tmp_path / "source"
    shutil.copytree(perf_bench.SOURCE_PROFILES, source)
    monkeypatch.setattr(perf_bench, "SOURCE_PROFILES", source)
    mine = tmp_path / "acme-x1.toml"
    mine.write_text(Path(load_profile("l4").path).read_text().replace('name = "l4"', 'name = "acme-x1"'))
    perf_bench._add_fitted_sections(mine)
    perf_bench._write_values(mine, {"gemm_16bit_fraction": 0.5}, {"gemm_16bit": "fitted: 30 rows"})
    profile = load_profile(mine)
    assert profile.efficiency.gemm_16bit_fraction == 0.5 and "[architecture." not in mine.read_text()
    before = (source / "_defaults.toml").read_text().splitlines()
    perf_bench._write_values(source / "_defaults.toml", {"gemm_16bit_fraction": 0.5}, None)
    after = (source / "_defaults.toml").read_text().splitlines()
    changed = [(old, new) for old, new in zip(before, after, strict=True) if old != new]
    assert [new for _, new in changed] == ["gemm_16bit_fraction = 0.5"], changed  # [efficiency]'s, no architecture's


FIT_TWO_DEVICES = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("bench", sys.argv[1])
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
from openreg_perf import fit
cases, _ = bench.calibration_cases()
print(repr(fit.fit([case for case in cases if case.device in ("h100-sxm", "mi325x")])))
"""


def test_the_fit_is_the_same_in_every_process():
    """Two processes, each with its own iteration order of sets of strings (PYTHONHASHSEED), fit the same
    rows to the same parameters, to the last bit. (The bundled profiles, written by another process,
    carry the full fit: test_bundled_profiles_carry_the_fitted_parameters.)"""
    path = str(REPO_ROOT / "tools" / "bench" / "perf_model.py")
    importable = str(Path(openreg_perf.__file__).parents[1])  # this source tree, or the installed package
    fits = [subprocess.run([sys.executable, "-c", FIT_TWO_DEVICES, path], capture_output=True, text=True,
                           check=True, timeout=300,
                           env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": importable}).stdout
            for seed in ("1", "2")]
    assert fits[0] == fits[1] and fits[0].startswith("Fit(")


def test_a_chip_no_row_informs_takes_its_architectures_levels(calibration):
    """Held out, the MI300X is predicted with the CDNA 3 chips' levels (the MI325X's, drawn towards every
    device's median as far as ARCHITECTURE_PRIOR devices pull), where the NVIDIA chips' matrix units
    reach a larger share of their peak."""
    mi300x = [row for row in calibration.rows if row.case.device == "mi300x" and row.case.error_class == "gemm_tensor"]
    without = mi300x[0].held_out_fit
    cdna3, anyone = without.unseen("cdna3"), without.unseen("")
    sibling, everyone = without.per_device["mi325x"]["gemm_16bit_fraction"], anyone["gemm_16bit_fraction"]
    weight = 1 / (1 + fit.ARCHITECTURE_PRIOR)
    assert cdna3["gemm_16bit_fraction"] == pytest.approx(sibling ** weight * everyone ** (1 - weight))
    assert sibling < cdna3["gemm_16bit_fraction"] < everyone
    assert all(row.predicted_seconds == fit.predicted_seconds(row.case, cdna3) for row in mi300x)
    # A chip of an architecture no row informs (the MI250X, CDNA 2) takes the device-independent levels.
    assert load_profile("mi250x").efficiency.gemm_16bit_fraction == pytest.approx(
        calibration.full_fit.shared["gemm_16bit_fraction"], rel=1e-3)


def test_a_power_limited_chips_convolutions_fit_the_clock_gain_not_a_factor_of_their_own(calibration):
    """fit.py's TIED_LEVELS: the P4 and the T4 take their architecture's convolution factors, and their
    rows fit conv_clock_gain, so that each, held out, is predicted with the gain the other's rows fitted."""
    full = calibration.full_fit
    for capped in ("p4", "t4"):
        assert "conv_forward_factor" not in full.per_device[capped]
        architecture = published.device_profile(capped).architecture
        assert full.parameters(capped)["conv_forward_factor"] == full.unseen(architecture)["conv_forward_factor"]
        held_out = next(row.held_out_fit for row in calibration.rows if row.case.device == capped)
        assert held_out.shared["conv_clock_gain"] > 1.2
    assert "conv_forward_factor" in full.per_device["v100-pcie-32gb"]


def test_every_calibration_row_names_a_profiled_chip(calibration):
    assert calibration.left_out == []


def test_calibration_takes_any_hardware_name(tmp_path):
    """A vendor's row for a chip it has just profiled: the row's hardware names it, and the fit finds it
    by the profile's hardware_names, not by a list in published.py."""
    assert published.chip_of("Tesla T4 (our lab)") == "t4"
    assert published.chip_of("an accelerator nobody profiled") is None
    rows = [{"workload": "GEMM torch.matmul", "config": "M=64 K=12288 N=12288", "precision": "FP16",
             "hardware": "Acme X1", "metric": "latency", "value": "0.2", "unit": "ms", "source": "ours"}]
    cases, unknown = published.cases_of(rows)
    assert cases == [] and unknown == ["Acme X1"]


def _measured(config, value, precision="BF16"):
    return {"workload": "GEMM torch.matmul", "config": config, "precision": precision,
            "hardware": "NVIDIA H200 (132 SMs)", "metric": "device time", "value": str(value), "unit": "us"}


def test_a_row_the_host_lengthened_measures_the_host_and_its_twin_the_device():
    """gpu_calibration.py's rows timed with the host ahead of the device take their fastest run (the host
    can only lengthen them); their back-to-back twin counts as the host's where it is more than a tenth
    slower, and stays a device row where it is not."""
    ahead = published.DEVICE_ALONE
    rows = [_measured("M=128 K=128 N=128", 19.9), _measured("M=128 K=128 N=128" + ahead, 3.0),
            _measured("M=128 K=128 N=128" + ahead, 9.0),
            _measured("M=8192 K=8192 N=8192", 1480.0), _measured("M=8192 K=8192 N=8192" + ahead, 1470.0)]
    cases = {case.label.split(" | ")[1]: case for case in published.measured_cases(rows)}
    assert cases["M=128 K=128 N=128" + ahead].published_seconds == pytest.approx(3.0e-6)
    assert cases["M=128 K=128 N=128" + ahead].fitted
    assert cases["M=128 K=128 N=128"].host_bound and cases["M=128 K=128 N=128"].error_class == "launch"
    assert cases["M=8192 K=8192 N=8192"].fitted and cases["M=8192 K=8192 N=8192"].error_class == "gemm_tensor"


def test_neusight_rows_add_a_share_of_their_rigs_floor_to_the_kernel():
    """Note [NeuSight's rig]: a NeuSight row is predicted as the fitted share of its rig's floor (the fastest
    row of its device and file) plus the kernel, and never under the floor; each group of files has its share."""
    def row(op, latency_ms, sizes):
        return {"op": op, "Device": "Tesla V100-PCIE-32GB", "Latency": str(latency_ms), "B": str(sizes[0]),
                "H": str(sizes[1])}
    rows = [row("add", 0.03, (128, 128)), row("add", 0.5, (8192, 8192)), row("ln", 0.05, (64, 512))]
    (small, large, norm), unknown = published.neusight_cases(rows)
    assert not unknown and small.host_bound and large.fitted
    assert (large.floor_seconds, large.rig_share, norm.rig_share) == (3e-5, "neusight_vector_share",
                                                                      "neusight_rows_share")
    parameters = fit.fit([]).parameters("v100-pcie-32gb")
    kernel = large.predict(published.with_parameters(published.device_profile("v100-pcie-32gb"), parameters))
    for share in (0.0, 0.5):
        predicted = fit.predicted_seconds(large, {**parameters, "neusight_vector_share": share})
        assert predicted == pytest.approx(max(3e-5, share * 3e-5 + kernel))
    assert fit.predicted_seconds(small, {**parameters, "neusight_vector_share": 0.5}) >= 3e-5


def test_measured_attention_rows_are_the_flash_kernels_of_their_shape():
    """gpu_calibration.py's attention rows: the forward alone is FlashAttention's forward kernel; forward +
    backward adds its backward (two and a half forwards' FLOPs); both are the attention class, and the
    smallest shape of each workload (at its rig's floor) measures the host."""
    def row(workload, config, value):
        return {"workload": workload, "config": config, "precision": "BF16", "hardware": "NVIDIA H200 (132 SMs)",
                "metric": "device time", "value": str(value), "unit": "us"}
    forward, both = "scaled_dot_product_attention forward", "scaled_dot_product_attention forward + backward"
    small, large = "B=8 H=16 S=512 D=64 causal=False", "B=1 H=32 S=8192 D=128 causal=True"
    rows = [row(forward, small, 34), row(both, small, 159), row(forward, large, 915), row(both, large, 3553)]
    small_forward, small_both, large_forward, large_both = published.measured_cases(rows)
    assert small_forward.host_bound and small_both.host_bound
    assert large_forward.fitted and large_forward.error_class == large_both.error_class == "attention"
    costs = published._measured_attention("B=1 H=32 S=8192 D=128 causal=True", BF16, backward=True)
    pairs = 32 * 8192 * 8193 // 2
    assert [cost.flops for cost in costs] == [2 * pairs * 256, 2.5 * 2 * pairs * 256]
    assert [cost.role for cost in costs] == ["forward", "backward"]
    assert large_both.predict(H100) == pytest.approx(sum(kernel_seconds(cost, None, H100).seconds for cost in costs))


def test_a_graph_replay_row_is_priced_at_the_graph_floor():
    tiny = [{"workload": "kernel: add (out=)", "config": config, "precision": "FP32",
             "hardware": "NVIDIA H200 (132 SMs)", "metric": "device time", "value": "1.0", "unit": "us"}
            for config in ("1024 elements, graph replay", "1024 elements, eager back to back")]
    replayed, eager = published.measured_cases(tiny)
    h200 = load_profile("h200")
    assert replayed.predict(h200) < h200.chip.kernel_floor_s <= eager.predict(h200)
    assert replayed.predict(h200) == eager.predict(h200.replayed_from_graph())


@pytest.mark.parametrize("name", [name for name in list_profiles() if name != "host"])
def test_bundled_profiles_carry_the_fitted_parameters(calibration, name):
    """The [efficiency] and [collectives] values are the fit's (tools/bench/perf_model.py
    --write-profiles): the chip's own where its rows fitted them, the device-independent ones otherwise."""
    profile = load_profile(name)
    for key, value in fit.profile_parameters(calibration.full_fit, name).items():
        section = profile.efficiency if hasattr(profile.efficiency, key) else profile.collectives
        if hasattr(section, key):
            assert getattr(section, key) == pytest.approx(value, rel=1e-3), key
