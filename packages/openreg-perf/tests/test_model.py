"""The time model's properties (launch floor, quantisation, bounds, monotonicity, alpha-beta), its
determinism, and the calibration targets it meets against published measurements."""

from __future__ import annotations

import pytest
from openreg_perf import fit
from openreg_perf.costs import OpCall, cost_of
from openreg_perf.model import (
    bus_bandwidth_factor,
    collective_seconds,
    copy_seconds,
    kernel_seconds,
    roofline_seconds,
)
from openreg_perf.profile import list_profiles, load_profile

H100 = load_profile("h100-sxm")
A100 = load_profile("a100-sxm-80gb")
HALF = "c10::Half"


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


def test_a_skinny_gemm_is_slower_than_the_roofline_says():
    skinny = mm(8192, 64, 64)
    assert kernel_seconds(skinny, None, H100).seconds > 3 * roofline_seconds(skinny, None, H100)


def test_a_gemm_one_tile_row_past_a_full_wave_takes_two_waves():
    """12 x 11 = 132 tiles fill H100's 132 SMs once; 13 x 11 = 143 take two waves, as long as 24 x 11."""
    tile = H100.chip.matrix_tile_m
    seconds = [kernel_seconds(mm(rows * tile, 4096, 11 * tile), None, H100) for rows in (12, 13, 24)]
    assert all(prediction.bound == "compute" for prediction in seconds)
    one_wave, one_more_row, two_waves = (prediction.seconds for prediction in seconds)
    assert one_more_row == pytest.approx(two_waves, rel=0.01)
    assert one_more_row > 1.5 * one_wave  # the launch and setup costs are paid once either way


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
        each = [collective_seconds("all_reduce", size, 8, H100, name) for name in ("ring", "tree", "switch")]
        assert chosen == min(each)


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

TARGETS_MET = ["compute", "memory", "launch", "links"]


@pytest.mark.parametrize("name", TARGETS_MET)
def test_calibration_targets_are_met(calibration, perf_bench, name):
    """At most 15 % mean absolute error per class, and at least 2x better than the datasheet roofline."""
    summary = calibration.classes[name]
    assert summary.model_mape <= perf_bench.TARGET_MAPE
    assert summary.roofline_mape >= perf_bench.TARGET_RATIO * summary.model_mape


def test_collectives_held_out_keep_the_error_they_have(calibration):
    # The 15 % target is not met for collectives held out one device at a time (30 % when this was
    # written): the NCCL latencies of one generation and harness (A100, nccl-tests -g 8) do not predict
    # another's (H200, NCCL 2.27 under torch.distributed), see fit.py. This keeps it from getting worse.
    assert calibration.classes["collectives"].model_mape <= 0.32


def test_collectives_are_still_better_than_the_roofline(calibration):
    summary = calibration.classes["collectives"]
    assert summary.model_mape < summary.roofline_mape
    assert summary.fitted_mape <= 0.05  # with every row seen, the model reproduces them


def test_the_fit_is_deterministic(calibration, perf_bench):
    again = fit.fit(fit.cases_of(fit.read_rows(perf_bench.CALIBRATION_CSV)))
    assert again == calibration.full_fit


@pytest.mark.parametrize("name", list_profiles())
def test_bundled_profiles_carry_the_fitted_parameters(calibration, name):
    """The [efficiency] and [collectives] values are the fit's (tools/bench/perf_model.py --write-profiles)."""
    profile = load_profile(name)
    for key, value in fit.profile_parameters(calibration.full_fit, name).items():
        section = profile.efficiency if hasattr(profile.efficiency, key) else profile.collectives
        if hasattr(section, key):
            assert getattr(section, key) == pytest.approx(value, rel=1e-3), key
