"""occl's NCCL semantics with respect to openreg streams: the host returns at
once, Work.wait() orders the current stream without blocking the host,
synchronize() blocks, futures complete with the outputs, tensors of an
in-flight collective stay alive, device memory returns to its baseline, and
bad arguments are refused with what to do."""

from __future__ import annotations

import occl_stream_checks as checks
import pytest

GROUPS = [("ipc", 2), ("gloo", 2)]
IDS = ["ipc", "gloo"]


@pytest.mark.parametrize("group", GROUPS, ids=IDS)
def test_host_returns_at_once_and_wait_orders_the_current_stream(ranks, group):
    results = ranks.run(checks.check_host_returns_and_wait_orders_the_stream, group)
    pending_after_launch, pending_after_wait = results[0]
    assert pending_after_launch, "the collective completed before its peer joined"
    assert pending_after_wait, "Work.wait() blocked the host until the collective completed"


@pytest.mark.parametrize("group", [("ipc", 4), ("gloo", 4)], ids=IDS)
def test_collective_is_ordered_after_the_current_stream(ranks, group):
    assert ranks.run(checks.check_collective_follows_current_stream, group) == [True] * 4


@pytest.mark.parametrize("group", GROUPS, ids=IDS)
def test_tensors_of_an_in_flight_collective_stay_alive(ranks, group):
    assert ranks.run(checks.check_tensors_stay_alive, group)[0] is True


@pytest.mark.parametrize("group", [("ipc", 4), ("gloo", 4)], ids=IDS)
def test_future_completes_with_the_outputs(ranks, group):
    assert ranks.run(checks.check_future, group) == [True] * 4


def test_destroyed_group_returns_device_memory(ranks):
    for same, before, after in ranks.run(checks.check_device_memory_returns, None):
        assert same, f"device memory before the group {before}, after destroying it {after}"


def test_bad_arguments_are_refused_with_what_to_do(ranks):
    messages = ranks.run(checks.check_refusals, ("ipc", 2), timeout_s=30)[0]
    assert len(messages) == 7, messages
    non_contiguous, avg_on_ints, band_on_floats, other_device, gather, scatter, reduce_scatter = messages
    assert "contiguous" in non_contiguous
    assert "AVG" in avg_on_ints and "SUM" in avg_on_ints
    assert "BAND" in band_on_floats and "integer" in band_on_floats
    assert "set_device" in other_device
    assert "gather needs output tensors of the input's dtype and number of elements" in gather, gather
    assert "output tensors 1 is Float with 5 elements" in gather, gather
    assert "scatter needs input tensors of the output's dtype" in scatter and "6 elements" in scatter, scatter
    assert "reduce_scatter needs input tensors of the output's dtype" in reduce_scatter, reduce_scatter
