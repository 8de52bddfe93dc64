"""Shared by the distributed tests: two helper modules, occl_workers (a pool
of rank processes) and the occl_*_checks modules (what the ranks run),
which the spawned ranks import too (pytest imports test files with
importlib, so this directory goes on sys.path, which the ranks inherit);
and one pool of 4 ranks for the whole session, so the ranks start once."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from occl_workers import Workers  # noqa: E402


@pytest.fixture(scope="session")
def ranks():
    """4 rank processes in a "cpu:gloo,openreg:occl" world; each has made
    the groups of occl_checks.make_groups (IPC and gloo transports, 2 and 4
    ranks)."""
    import occl_checks

    workers = Workers(4)
    try:
        chosen = workers.run(occl_checks.make_groups)
        # Each group uses the transport it asked for.
        assert chosen[0] == {"ipc2": "ipc", "ipc4": "ipc", "gloo2": "gloo", "gloo4": "gloo"}, chosen
        yield workers
    finally:
        workers.close()
