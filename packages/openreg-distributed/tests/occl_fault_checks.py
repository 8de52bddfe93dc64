"""What the ranks run for test_faults.py: collectives that cannot complete.
A failure belongs to its group: the device and the other groups on it
keep working, which mismatched_shapes checks on device 0 with a healthy
group next to the failing one. Each scenario reports the error text each
rank saw."""

from __future__ import annotations

import os
import signal
import time
from datetime import timedelta

import torch
import torch.distributed as dist

TIMEOUT = timedelta(seconds=3)
# For the groups that are aborted or destroyed while a collective waits: an
# abort that returns well before this proves it did not wait for it.
LONG_TIMEOUT = timedelta(seconds=60)


def _group(device: int, transport: str, timeout: timedelta = TIMEOUT):
    os.environ["OCCL_TRANSPORT"] = transport
    try:
        return dist.new_group([0, 1], backend="cpu:gloo,openreg:occl", timeout=timeout)
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
        ("mismatch", 0, "ipc"), ("healthy", 0, "ipc"), ("absent-ipc", 1, "ipc"), ("absent-gloo", 2, "gloo"),
        ("killed", 3, "ipc"), ("future", 1, "ipc"))}
    GROUPS["abort"] = _group(2, "ipc", LONG_TIMEOUT)
    return True


def _device_memory():
    torch.openreg.synchronize()
    torch.openreg.empty_cache()  # the caching allocator's reserve is not occl's
    return torch.openreg.mem_get_info()[0], torch.openreg.memory_allocated()


def _let_go(group, small):
    """Until the group's completion thread has let go of the tensors of its
    earlier collectives: it completes their futures in order, so once the
    future of one more collective (on small, which the caller keeps) is
    done, every earlier one has been completed and dropped."""
    dist.all_reduce(small, group=group, async_op=True).get_future().wait()


def mismatched_shapes(rank, world):
    """A failed collective on one group leaves device 0 usable: tensor ops
    and a collective of another group on it still work, and destroying the
    failed group returns its device memory."""
    torch.openreg.set_device(0)
    flush = torch.ones(1, device="openreg")  # kept throughout: in both measurements
    healthy = torch.ones(4, device="openreg")
    dist.all_reduce(healthy, group=GROUPS["healthy"])  # its own memory, made before the baseline
    del healthy
    _let_go(GROUPS["healthy"], flush)
    before = _device_memory()
    group = GROUPS["mismatch"]
    t = torch.ones(4 + rank, device="openreg")
    work = dist.all_reduce(t, group=group, async_op=True)  # returns at once; the work reports the failure
    seen = _failure(work.synchronize)
    again = _failure(lambda: dist.all_reduce(torch.ones(4, device="openreg"), group=group))
    computed = (torch.arange(4.0, device="openreg") * 2).sum().item()
    healthy = torch.full((4,), float(rank + 1), device="openreg")
    dist.all_reduce(healthy, group=GROUPS["healthy"])
    healthy_values = healthy.cpu().tolist()
    del t, healthy, work  # the work holds its outputs
    _let_go(GROUPS["healthy"], flush)
    dist.destroy_process_group(group)
    dist.all_reduce(torch.zeros(1))  # both ranks destroyed it: the peer closed our memory
    after = _device_memory()
    return {"seen": seen, "again": again, "computed": computed, "healthy": healthy_values,
            "memory": (before, after)}


def _timed_failure(fn) -> tuple[str, float]:
    """The error fn raised and the seconds it took to raise it."""
    start = time.monotonic()
    seen = _failure(fn)
    return seen, time.monotonic() - start


def absent_rank(rank, world, name, device):
    """Rank 1 never calls the collective; rank 0 must fail within the timeout."""
    torch.openreg.set_device(device)
    group = GROUPS[name]
    if rank == 1:
        return "skipped"
    t = torch.ones(4, device="openreg")
    return _timed_failure(lambda: dist.all_reduce(t, group=group, async_op=True).synchronize())


def failed_future(rank, world):
    """Rank 1 never calls the collective: the work's future completes with
    the error, and so does a callback chained on it, as DDP's
    communication hooks are."""
    torch.openreg.set_device(1)
    group = GROUPS["future"]
    if rank == 1:
        return "skipped"
    t = torch.ones(4, device="openreg")
    future = dist.all_reduce(t, group=group, async_op=True).get_future()
    chained = future.then(lambda done: done.value()[0] * 2)
    return _failure(future.wait), _failure(chained.wait)


def aborted(rank, world):
    """Rank 0 aborts a group whose collective waits for rank 1, which never
    calls it: the abort returns without waiting for the group's timeout,
    the work and its future report it, and the device memory the group
    took returns."""
    torch.openreg.set_device(2)
    group = GROUPS["abort"]
    if rank == 1:
        return "skipped"
    before = _device_memory()
    t = torch.ones(1 << 18, device="openreg")  # 1 MiB: the in-place allreduce, which locates t for the peer
    work = dist.all_reduce(t, group=group, async_op=True)
    abort_took = _timed_failure(lambda: dist.distributed_c10d._abort_process_group(group))
    seen, future_seen = _failure(work.synchronize), _failure(work.get_future().wait)
    del t, work
    return {"abort": abort_took, "seen": seen, "future": future_seen, "memory": (before, _device_memory())}


def killed_rank(rank, world):
    """Both ranks run one collective (so each has mapped the other's control
    block), then rank 1 is killed; rank 0 queues the next collective and
    must fail, naming rank 1 as exited, without waiting for the whole
    timeout. Rank 1 dies only once rank 0 has its result: the first
    collective's kernel opens rank 1's memory while it runs, and memory of a
    process already killed cannot be opened (memory opened before the kill
    stays readable), so an earlier kill fails that collective instead."""
    torch.openreg.set_device(3)
    group = GROUPS["killed"]
    store = dist.distributed_c10d._get_default_store()
    before = _device_memory()
    t = torch.ones(4, device="openreg")
    dist.all_reduce(t, group=group)
    assert t.cpu().tolist() == [2.0] * 4
    if rank == 0:
        store.set("killed_rank/first_collective_read", "1")
    else:
        store.wait(["killed_rank/first_collective_read"])
        os.kill(os.getpid(), signal.SIGKILL)
    seen, elapsed = _timed_failure(lambda: dist.all_reduce(t, group=group, async_op=True).synchronize())
    t = None  # freed before the memory is measured
    destroyed = _timed_failure(lambda: dist.destroy_process_group(group))
    return {"seen": seen, "elapsed": elapsed, "destroy": destroyed, "memory": (before, _device_memory())}
