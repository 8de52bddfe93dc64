"""Every collective of occl, reduce op and dtype against the same collective
through gloo on CPU copies, on 2 and 4 ranks, over both transports. One
pool of 4 rank processes (conftest.py's ranks) serves them all: each rank
made four occl groups (IPC and gloo transports, 2 and 4 ranks) once."""

from __future__ import annotations

import occl_checks as checks
import pytest

GROUPS = [("ipc", 2), ("ipc", 4), ("gloo", 2), ("gloo", 4)]
IDS = [f"{transport}-{size}ranks" for transport, size in GROUPS]
ALL_DTYPES = list(checks.DTYPES)


def _ran(results, size):
    """The ranks of the group ran the check; the others stood aside."""
    assert all(r is not None for r in results[:size]) and all(r is None for r in results[size:]), results
    return results[0]


@pytest.mark.parametrize("group", GROUPS, ids=IDS)
def test_all_reduce_every_op_and_dtype(ranks, group):
    cases = _ran(ranks.run(checks.check_all_reduce, group, ALL_DTYPES), group[1])
    assert cases == sum(len(checks.ops_for(d)) for d in ALL_DTYPES)


@pytest.mark.parametrize("group", GROUPS, ids=IDS)
def test_large_all_reduce(ranks, group):
    assert _ran(ranks.run(checks.check_large_all_reduce, group), group[1]) == 7


@pytest.mark.parametrize("group", GROUPS, ids=IDS)
def test_broadcast_and_reduce(ranks, group):
    assert _ran(ranks.run(checks.check_broadcast_and_reduce, group, ALL_DTYPES), group[1]) == len(ALL_DTYPES)


@pytest.mark.parametrize("group", GROUPS, ids=IDS)
def test_gathers_and_scatter(ranks, group):
    assert _ran(ranks.run(checks.check_gathers, group, ALL_DTYPES), group[1]) == len(ALL_DTYPES)


@pytest.mark.parametrize("group", GROUPS, ids=IDS)
def test_reduce_scatters(ranks, group):
    dtypes = ["float32", "float64", "bfloat16", "float16", "int32", "int64"]
    assert _ran(ranks.run(checks.check_reduce_scatters, group, dtypes), group[1]) == len(dtypes)


@pytest.mark.parametrize("group", GROUPS, ids=IDS)
def test_all_to_all(ranks, group):
    assert _ran(ranks.run(checks.check_all_to_all, group, ALL_DTYPES), group[1]) == len(ALL_DTYPES)


@pytest.mark.parametrize("group", GROUPS, ids=IDS)
def test_point_to_point(ranks, group):
    assert _ran(ranks.run(checks.check_point_to_point, group), group[1]) is True


@pytest.mark.parametrize("group", GROUPS, ids=IDS)
def test_coalesced_and_barrier(ranks, group):
    assert _ran(ranks.run(checks.check_coalesced, group), group[1]) is True


@pytest.mark.parametrize("transport", ["ipc", "gloo"])
def test_split_group(ranks, transport):
    assert ranks.run(checks.check_split, (transport, 4)) == [transport] * 4
