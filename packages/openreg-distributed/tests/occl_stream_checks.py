"""What the ranks run for test_stream_semantics.py: NCCL's stream semantics
of occl, made deterministic by a handshake. Rank 1 joins a collective only
after rank 0 has said so over gloo on the CPU, so whatever rank 0 observes
before that handshake happened while the collective could not have
completed. Not timing: nothing here reads a clock."""

from __future__ import annotations

from datetime import timedelta

import torch
import torch.distributed as dist
from occl_checks import GROUPS


def _handshake(group) -> None:
    """A CPU all_reduce through gloo: both ranks pass it together."""
    dist.all_reduce(torch.zeros(1), group=group)


def check_host_returns_and_wait_orders_the_stream(rank, world, key):
    group = GROUPS.get(tuple(key))
    if group is None or rank > 1:
        return None
    t = torch.full((1000,), float(rank + 1), device="openreg")
    # The executor runs an operator's first call with new dtypes synchronously
    # (Note [Dtypes a CPU kernel does not implement]); torch-openreg's plain
    # path runs t + t there: so once before the collective, as a warm-up.
    (t + t).cpu()
    if rank == 0:
        work = dist.all_reduce(t, group=group, async_op=True)
        # The host returned although rank 1 has not joined yet...
        pending = not work.is_completed()
        # ...and wait() orders the current stream, it does not block the host.
        work.wait()
        still_pending = not work.is_completed()
        # A timeout given to wait() is a host deadline: rank 1 has not
        # joined, so it passes and wait() says so.
        try:
            work.wait(timeout=timedelta(milliseconds=50))
            timed_out = "wait(timeout) returned"
        except RuntimeError as error:
            timed_out = str(error)
        assert "did not complete within the 50 ms given to wait()" in timed_out, timed_out
        # Queued on the current stream, after the collective. (t + t, not
        # t * 2: a CPU scalar operand may take a synchronising path.)
        doubled = t + t
        _handshake(group)
        work.synchronize()
        assert work.is_completed() and work.is_success()
        assert torch.equal(doubled.cpu(), torch.full((1000,), 6.0)), "the current stream did not wait"
        return pending, still_pending
    _handshake(group)
    dist.all_reduce(t, group=group)
    assert torch.equal(t.cpu(), torch.full((1000,), 3.0))
    return True, True


def check_collective_follows_current_stream(rank, world, key):
    group = GROUPS.get(tuple(key))
    if group is None:
        return None
    # Work queued on the current stream just before the collective: the comm
    # stream must wait for it before reading t.
    a = torch.randn(300, 300, device="openreg")
    t = (a @ a).sum(dim=0)
    t.copy_(torch.full_like(t, rank + 1))
    dist.all_reduce(t, group=group)
    size = dist.get_world_size(group)
    expected = size * (size + 1) / 2
    assert torch.equal(t.cpu(), torch.full((300,), expected)), t.cpu()[:4]
    return True


def check_tensors_stay_alive(rank, world, key):
    group = GROUPS.get(tuple(key))
    if group is None or rank > 1:
        return None
    if rank == 0:
        t = torch.ones(4096, device="openreg")
        dist.all_reduce(t, group=group, async_op=True)  # neither the tensor nor the work is kept
        del t
        # Without record_stream, the caching allocator would hand t's block
        # to x, and the collective, still waiting for rank 1, would write it.
        x = torch.full((4096,), 7.0, device="openreg")
        _handshake(group)
        torch.openreg.synchronize()
        return bool(torch.equal(x.cpu(), torch.full((4096,), 7.0)))
    _handshake(group)
    t = torch.ones(4096, device="openreg")
    dist.all_reduce(t, group=group)
    torch.openreg.synchronize()
    return True


def check_future(rank, world, key):
    group = GROUPS.get(tuple(key))
    if group is None:
        return None
    t = torch.full((8,), float(rank), device="openreg")
    work = dist.all_reduce(t, group=group, async_op=True)
    future = work.get_future()
    # As NCCL's, the future is complete when the collective is queued: code
    # written for NCCL reads its value right after wait().
    work.wait()
    assert future.value()[0].data_ptr() == t.data_ptr()  # the output itself
    chained = future.then(lambda f: f.value()[0] * 10)
    size = dist.get_world_size(group)
    total = float(sum(range(size)))
    assert torch.equal(future.wait()[0].cpu(), torch.full((8,), total))
    assert torch.equal(chained.wait().cpu(), torch.full((8,), total * 10))
    return True


def check_device_memory_returns(rank, world, key):
    """A group of its own moves 8 MiB, is destroyed; then every rank's
    device holds what it held before."""
    torch.openreg.synchronize()
    torch.openreg.empty_cache()  # the caching allocator's reserve is not occl's
    before = torch.openreg.mem_get_info()[0], torch.openreg.memory_allocated()
    group = dist.new_group([0, 1], backend="cpu:gloo,openreg:occl")
    if rank <= 1:
        t = torch.ones(2 * 1024 * 1024, device="openreg")
        dist.all_reduce(t, group=group)
        assert t[0].item() == 2.0
        del t
        dist.destroy_process_group(group)
    _handshake(None)  # every rank has destroyed it: peers closed our mailbox
    torch.openreg.synchronize()
    torch.openreg.empty_cache()
    after = torch.openreg.mem_get_info()[0], torch.openreg.memory_allocated()
    return before == after, before, after


def _on_root(rank, attempt):
    def run():
        if rank != 0:
            raise RuntimeError("not the root")
        attempt()
    return run


def check_refusals(rank, world, key):
    """Bad input is refused on the host with what to do, and the group
    still works afterwards."""
    group = GROUPS.get(tuple(key))
    if group is None:
        return None
    messages = []
    attempts = [
        lambda: dist.all_reduce(torch.ones(4, device="openreg").t().expand(4, 4), group=group),
        lambda: dist.all_reduce(torch.ones(4, device="openreg", dtype=torch.int32), op=dist.ReduceOp.AVG,
                                group=group),
        lambda: dist.all_reduce(torch.ones(4, device="openreg"), op=dist.ReduceOp.BAND, group=group),
        lambda: dist.all_reduce(torch.ones(4, device="openreg:1" if torch.openreg.current_device() == 0
                                           else "openreg:0"), group=group),
        # Sizes that disagree within one rank's arguments: refused before
        # the rank meets the others, so nobody waits for it.
        # (gather and scatter check on the root only: the other rank would
        # otherwise queue its part and wait for the root.)
        _on_root(rank, lambda: dist.gather(torch.ones(4, device="openreg"), [
            torch.ones(4, device="openreg"), torch.ones(5, device="openreg")], dst=0, group=group)),
        _on_root(rank, lambda: dist.scatter(torch.ones(4, device="openreg"), [
            torch.ones(4, device="openreg"), torch.ones(6, device="openreg")], src=0,
            group=group)),
        lambda: dist.reduce_scatter(torch.ones(4, device="openreg"),
                                    [torch.ones(3, device="openreg"), torch.ones(3, device="openreg")],
                                    group=group),
    ]
    for attempt in attempts:
        try:
            attempt()
        except (RuntimeError, ValueError) as error:
            messages.append(str(error).split("\n")[0])
    t = torch.ones(4, device="openreg")
    dist.all_reduce(t, group=group)
    assert torch.equal(t.cpu(), torch.full((4,), float(dist.get_world_size(group))))
    return messages
