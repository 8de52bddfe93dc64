"""What the ranks run for test_faults.py: collectives that cannot complete.
Each scenario uses its own group on its own device, since a failed
collective leaves its device's sticky error (as a failed NCCL kernel
leaves CUDA's), and reports the error text each rank saw."""

from __future__ import annotations

import os
import signal
from datetime import timedelta

import torch
import torch.distributed as dist

TIMEOUT = timedelta(seconds=3)


def _group(device: int, transport: str):
    os.environ["OCCL_TRANSPORT"] = transport
    try:
        return dist.new_group([0, 1], backend="cpu:gloo,openreg:occl", timeout=TIMEOUT)
    finally:
        del os.environ["OCCL_TRANSPORT"]


def _failure(fn) -> str:
    try:
        fn()
    except RuntimeError as error:
        return str(error)
    return "no error"


def make_fault_groups(rank, world):
    """All ranks make every group, in order (new_group is collective)."""
    global GROUPS
    GROUPS = {name: _group(device, transport) for name, device, transport in (
        ("mismatch", 0, "ipc"), ("absent-ipc", 1, "ipc"), ("absent-gloo", 2, "gloo"), ("killed", 3, "ipc"))}
    return True


def mismatched_shapes(rank, world):
    torch.openreg.set_device(0)
    group = GROUPS["mismatch"]
    t = torch.ones(4 + rank, device="openreg")
    dist.all_reduce(t, group=group)  # returns at once; the device reports the failure
    seen = _failure(torch.openreg.synchronize)
    again = _failure(lambda: dist.all_reduce(torch.ones(4, device="openreg"), group=group))
    return seen, again


def absent_rank(rank, world, name, device):
    """Rank 1 never calls the collective; rank 0 must fail within the timeout."""
    torch.openreg.set_device(device)
    group = GROUPS[name]
    if rank == 1:
        return "skipped"
    t = torch.ones(4, device="openreg")
    work = dist.all_reduce(t, group=group, async_op=True)
    return _failure(work.synchronize)


def killed_rank(rank, world):
    """Rank 1 is killed while rank 0 waits inside the collective."""
    torch.openreg.set_device(3)
    group = GROUPS["killed"]
    if rank == 1:
        dist.all_reduce(torch.zeros(1))  # rank 0 has queued its collective
        os.kill(os.getpid(), signal.SIGKILL)
    work = dist.all_reduce(torch.ones(4, device="openreg"), group=group, async_op=True)
    dist.all_reduce(torch.zeros(1))
    return _failure(work.synchronize)
