"""Groups made, destroyed and made again in one job never meet an earlier
group's state, and subgroups of a group bound to a device (device_id) work
on every rank. One pool of 2 ranks; each scenario makes its groups on a
store of its own."""

from __future__ import annotations

import occl_lifecycle_checks as checks
import pytest
from occl_workers import Workers


@pytest.fixture(scope="module")
def pair():
    workers = Workers(2)
    try:
        yield workers
    finally:
        workers.close(timeout_s=20)


def test_a_default_group_made_again_on_the_same_store_sums_right(pair):
    # Before each group had keys of its own, the new group found the old
    # one's control blocks in the store and returned each rank's own value
    # (or a reduction with an old contribution), with no error.
    rounds = 3
    for result in pair.run(checks.reinit_on_one_store, rounds, timeout_s=120):
        assert result["sums"] == [[3.0 + 20 * r] * 4 for r in range(rounds)]
    rank0 = pair.run(checks.reinit_on_one_store, 1, timeout_s=120, ranks=[0, 1])[0]
    assert rank0["received"] == [[0.0, 0.0]]  # the new group's message, not an earlier group's


def test_subgroups_of_a_group_bound_to_a_device(pair):
    rank0, rank1 = pair.run(checks.splits_of_a_bound_group, timeout_s=120)
    assert rank0 == {"pair": [3.0] * 3, "alone": [5.0] * 3, "own subgroup": [1.0] * 3}
    assert rank1 == {"pair": [3.0] * 3, "own subgroup": [2.0] * 3}
