"""occl in timing-only mode (Note [Collectives in timing-only mode]): the
metadata a training script exchanges is exact, everything else uncomputed
(ranks: conftest.py's pool)."""

from __future__ import annotations

import math

import occl_timing_only_checks as checks
import pytest


@pytest.mark.parametrize("transport", ["ipc", "gloo"])
def test_collectives_on_known_values_are_exact_and_the_rest_stays_unknown(ranks, transport):
    seen = ranks.run(checks.check_collectives_on_known_values, (transport, 2))
    for me in (0, 1):
        assert seen[me]["broadcast"] == [[4096, 1024], [1024, 1]]
        assert seen[me]["all_reduce"] == [3, 30]
        assert seen[me]["all_gather"] == [0, 0, 1, -1]
        assert seen[me]["broadcast_object_list"] == [{"step": 7, "shards": [0, 1]}, "rank 0's"]
        assert seen[me]["all_gather into views"] == [10, 11]
        assert seen[me]["all_reduce of computed values"] == "refused"
        assert seen[me]["add_ of a number"] == [4, 31]
        assert seen[me]["add_ of computed values"] == "refused"
        assert math.isnan(seen[me]["float of computed values"][0])  # NaN stands for it
        assert seen[me]["after the mode"] == "never computed"
    assert seen[2:] == [None, None]


@pytest.mark.parametrize("transport", ["ipc", "gloo"])
def test_ddp_trains_in_timing_only_mode_on_exchanged_metadata(ranks, transport):
    results = ranks.run(checks.check_ddp_in_timing_only_mode, (transport, 2))
    assert results[0] == {"rebuilt buckets": True, "parameters kept": True, "a different rank": "same"}
    assert results[1] == {"rebuilt buckets": True, "parameters kept": True, "a different rank": "differs"}
    assert results[2:] == [None, None]
