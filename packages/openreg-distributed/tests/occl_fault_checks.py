"""What the ranks run for test_faults.py: collectives that cannot complete.
No consumer of a failed collective's output sees a value (Note [A failed
collective] in csrc/Backend.cpp): wait() and then a copy or synchronisation
through the waiting stream raise, naming the collective, the group and the
ranks. The failure belongs to its group: the device, work that does not
wait for the collective and the other groups on it keep working, which
mismatched_shapes checks on device 0 with a healthy group next to the
failing one. Each scenario reports the error text each rank saw, and
leaves its device as it found it (the group destroyed, the device reset,
its memory back to the baseline)."""

from __future__ import annotations

import os
import signal
import time
from datetime import timedelta

import openreg_runtime
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

TIMEOUT = timedelta(seconds=3)
# For the groups that are aborted or destroyed while a collective waits (an
# abort that returns well before this proves it did not wait for it), and
# those whose failure must not be a timeout.
LONG_TIMEOUT = timedelta(seconds=60)
MAKING_TIMEOUT = timedelta(seconds=60)


def _group(device: int, transport: str, timeout: timedelta = TIMEOUT):
    """A group of both ranks whose collectives time out after `timeout`. It
    is made with a longer one: making it is a rendezvous of its own, which
    one rank may reach seconds after the other on a loaded machine."""
    os.environ["OCCL_TRANSPORT"] = transport
    try:
        group = dist.new_group([0, 1], backend="cpu:gloo,openreg:occl", timeout=max(timeout, MAKING_TIMEOUT))
    finally:
        del os.environ["OCCL_TRANSPORT"]
    group.set_timeout(timeout)
    return group


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
        ("absent-ipc", 1, "ipc"), ("absent-gloo", 2, "gloo"), ("killed", 3, "ipc"), ("killed-ddp", 3, "ipc"),
        ("future", 1, "ipc"))}
    # Groups whose collectives must succeed, or fail otherwise than by a timeout.
    GROUPS["mismatch"] = _group(0, "ipc", LONG_TIMEOUT)
    GROUPS["healthy"] = _group(0, "ipc", LONG_TIMEOUT)
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


def _consumers(t: torch.Tensor) -> dict[str, str]:
    """What each consumer of a collective's output t sees, once the current
    stream was ordered after it (wait()): its value, a synchronisation."""
    return {"cpu": _failure(lambda: t.cpu()), "synchronize": _failure(torch.openreg.synchronize)}


def _independent_work() -> list[float]:
    """Compute that does not wait for the failed collective: on a stream of
    its own, from data made there."""
    side = torch.Stream(device="openreg")
    with torch.openreg.stream(side):
        return (torch.arange(3.0, device="openreg") * 2).cpu().tolist()


def _leave_device(group, before) -> tuple:
    """Destroys the failed group and resets the device (its streams that
    waited for the failure stay failed until then, as a CUDA context
    would); returns the device memory before the scenario and after."""
    dist.destroy_process_group(group)
    dist.all_reduce(torch.zeros(1))  # both ranks destroyed it: the peer closed our memory
    openreg_runtime.device_reset()
    return before, _device_memory()


# Collectives the ranks disagree on, each on a group of its own: what rank
# r calls, and what every rank's message must name.
MISMATCHES = {
    "dtypes": (lambda t, r, g: dist.all_reduce(t.double() if r else t, group=g), "allreduce #0", "Double[4]"),
    "ops": (lambda t, r, g: dist.all_reduce(t, op=dist.ReduceOp.MAX if r else dist.ReduceOp.SUM, group=g),
            "allreduce #0", "ranks disagree"),
    "roots": (lambda t, r, g: dist.broadcast(t, src=dist.get_global_rank(g, r), group=g), "broadcast #0",
              "root 1"),
    "splits": (lambda t, r, g: dist.all_to_all_single(t, t.clone(), [1, 3] if r else [2, 2], [2, 2], group=g),
               "all_to_all_single #0", "which expects"),
}


def mismatched(rank, world, name, transport):
    """The ranks call a collective they disagree on; every consumer of its
    output raises on every rank, and work that does not wait for it goes on."""
    torch.openreg.set_device(0)
    before = _device_memory()
    call, _, _ = MISMATCHES[name]
    # The disagreement is found when both ranks have arrived, never by a
    # timeout: a long one keeps a rank that a loaded machine delays for
    # seconds from turning the disagreement into a timeout.
    group = _group(0, transport, LONG_TIMEOUT)
    t = torch.ones(4, device="openreg")
    launched = _failure(lambda: call(t, rank, group))  # wait() orders the current stream after it
    seen = _consumers(t)
    independent = _independent_work()
    t = None  # freed before the memory is measured
    return {"launched": launched, **seen, "independent": independent, "memory": _leave_device(group, before)}


def waited_after_it_failed(rank, world, transport):
    """The ranks disagree on the reduce op, and the collective has already
    failed when wait() is called: wait() raises, and the consumers after it
    fail all the same (wait() orders the stream before it raises)."""
    torch.openreg.set_device(0)
    before = _device_memory()
    group = _group(0, transport, LONG_TIMEOUT)
    t = torch.ones(4, device="openreg")
    work = dist.all_reduce(t, op=dist.ReduceOp.MAX if rank else dist.ReduceOp.SUM, group=group, async_op=True)
    deadline = time.monotonic() + LONG_TIMEOUT.total_seconds()
    while not work.is_completed() and time.monotonic() < deadline:
        time.sleep(0.001)
    launched = _failure(work.wait)
    seen = _consumers(t)
    t = work = None  # freed before the memory is measured
    return {"launched": launched, **seen, "memory": _leave_device(group, before)}


def recv_without_send(rank, world):
    """Rank 0 receives from rank 1, which sends nothing: the receive fails
    within the group's timeout, and its buffer is never read as received."""
    torch.openreg.set_device(0)
    group = _group(0, "ipc")  # both ranks are here: made within the timeout
    before = _device_memory()
    if rank == 1:
        return "skipped", _leave_device(group, before)
    t = torch.zeros(4, device="openreg")
    work = dist.irecv(t, src=1, group=group)
    launched = _failure(work.wait)
    seen = _consumers(t)
    t = work = None  # freed before the memory is measured
    return {"launched": launched, **seen, "independent": _independent_work(), "memory": _leave_device(group, before)}


def _timed_failure(fn) -> tuple[str, float]:
    """The error fn raised and the seconds it took to raise it."""
    start = time.monotonic()
    seen = _failure(fn)
    return seen, time.monotonic() - start


def absent_rank(rank, world, name, device):
    """Rank 1 never calls the collective (it stalls, or raised before it);
    rank 0 must fail within the timeout."""
    torch.openreg.set_device(device)
    group = GROUPS[name]
    before = _device_memory()
    if rank == 1:
        return "skipped", _leave_device(group, before)
    t = torch.ones(4, device="openreg")
    timed = _timed_failure(lambda: dist.all_reduce(t, group=group, async_op=True).synchronize())
    t = None  # freed before the memory is measured
    return timed, _leave_device(group, before)


def failed_future(rank, world):
    """Rank 1 never calls the collective. The work's future is complete at
    once, as NCCL's is; whoever reads its value through it (future.wait()
    orders the current stream after the collective), or through a callback
    chained on it as DDP's communication hooks are, raises."""
    torch.openreg.set_device(1)
    group = GROUPS["future"]
    before = _device_memory()
    if rank == 1:
        return "skipped", _leave_device(group, before)
    t = torch.ones(4, device="openreg")
    future = dist.all_reduce(t, group=group, async_op=True).get_future()
    chained = future.then(lambda done: done.value()[0] * 2)
    seen = _failure(lambda: future.wait()[0].cpu()), _failure(lambda: chained.wait().cpu())
    t = future = chained = None  # freed before the memory is measured
    return seen, _leave_device(group, before)


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
    seen, future_seen = _failure(work.synchronize), _failure(lambda: work.get_future().wait()[0].cpu())
    t = work = None
    openreg_runtime.device_reset()  # the stream that waited through the future failed
    return {"abort": abort_took, "seen": seen, "future": future_seen, "memory": (before, _device_memory())}


def killed_rank(rank, world):
    """Both ranks run one collective on each of two groups (so each has
    mapped the other's control blocks), then rank 1 is killed. On rank 0:
    a DistributedDataParallel made on one group fails naming rank 1; the
    next all_reduce on the other, waited for as DDP and NCCL code wait, and
    then a synchronisation or a copy of its output raise naming rank 1 as
    exited, without waiting for the whole timeout, instead of handing out
    rank 0's own value. Rank 1 dies only once rank 0 has its results: a
    collective's kernel opens rank 1's memory while it runs, and memory of a
    process already killed cannot be opened (memory opened before the kill
    stays readable), so an earlier kill fails that collective instead."""
    torch.openreg.set_device(3)
    group, ddp_group = GROUPS["killed"], GROUPS["killed-ddp"]
    store = dist.distributed_c10d._get_default_store()
    before = _device_memory()
    t = torch.ones(4, device="openreg")
    for g in (group, ddp_group):
        dist.all_reduce(t, group=g)
    assert t.cpu().tolist() == [4.0] * 4
    if rank == 0:
        store.set("killed_rank/first_collective_read", "1")
    else:
        store.wait(["killed_rank/first_collective_read"])
        os.kill(os.getpid(), signal.SIGKILL)
    model = torch.nn.Linear(4, 2).to("openreg")
    ddp = _timed_failure(lambda: DistributedDataParallel(model, process_group=ddp_group))
    openreg_runtime.device_reset()  # DDP waited for the failed collective on the current stream
    start = time.monotonic()
    t = torch.ones(4, device="openreg")
    launched = _failure(lambda: dist.all_reduce(t, group=group))
    seen = {"launched": launched, **_consumers(t), "elapsed": time.monotonic() - start}
    t = model = None  # freed before the memory is measured
    destroyed = _timed_failure(lambda: (dist.destroy_process_group(group), dist.destroy_process_group(ddp_group)))
    openreg_runtime.device_reset()
    return {"ddp": ddp, "seen": seen, "destroy": destroyed, "independent": _independent_work(),
            "memory": (before, _device_memory())}
