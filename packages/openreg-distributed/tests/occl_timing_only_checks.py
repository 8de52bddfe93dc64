"""What the ranks run for test_timing_only.py: occl in timing-only mode, where
collectives on values the host knows run on the host too (Note [Collectives
in timing-only mode]), so the metadata training scripts exchange is exact and
everything else stays uncomputed."""

from __future__ import annotations

from contextlib import contextmanager

import torch
import torch.distributed as dist
import torch.nn as nn
from occl_checks import GROUPS
from occl_training_checks import STEPS, mlp
from torch.nn.parallel import DistributedDataParallel as DDP


@contextmanager
def timing_only():
    torch.openreg.set_timing_only(True)
    try:
        yield
    finally:
        torch.openreg.set_timing_only(False)


def _read(tensor: torch.Tensor):
    """What reading tensor gives the host: its values, or "refused" (an integer the mode never computed)."""
    try:
        return tensor.tolist()
    except RuntimeError as error:
        if "runs in timing-only mode, which computes none" not in str(error):
            raise
        return "refused"


def check_collectives_on_known_values(rank, world, key):
    """Per rank, what reads give after each collective, in timing-only mode."""
    group = GROUPS.get(tuple(key))
    if group is None:
        return None
    me = dist.get_group_rank(group, rank)
    seen = {}
    with timing_only():
        # The root's values come from the host; the others' tensor was never written.
        shapes = torch.tensor([[4096, 1024], [1024, 1]], device="openreg") if me == 0 else \
            torch.empty(2, 2, dtype=torch.long, device="openreg")
        dist.broadcast(shapes, group_src=0, group=group)
        seen["broadcast"] = _read(shapes)
        counts = torch.tensor([me + 1, 10 * (me + 1)], device="openreg")
        dist.all_reduce(counts, group=group)
        seen["all_reduce"] = _read(counts)
        gathered = torch.empty(2 * dist.get_world_size(group), dtype=torch.int32, device="openreg")
        dist.all_gather_into_tensor(gathered, torch.tensor([me, -me], dtype=torch.int32, device="openreg"),
                                    group=group)
        seen["all_gather"] = _read(gathered)
        objects = [{"step": 7, "shards": [0, 1]}, "rank 0's"] if me == 0 else [None, None]
        dist.broadcast_object_list(objects, group_src=0, group=group, device=torch.device("openreg"))
        seen["broadcast_object_list"] = objects
        # all_gather_object's sizes: an all_gather into views of one tensor the host knows (zeros).
        sizes = torch.zeros(2, dtype=torch.long, device="openreg")
        dist.all_gather([sizes[0:1], sizes[1:2]], torch.tensor([10 + me], device="openreg"), group=group)
        seen["all_gather into views"] = _read(sizes)
        # Values computed on the device are not known: their collective leaves them unknown on every rank.
        computed = torch.randint(1, 5, (2,), device="openreg")
        dist.all_reduce(computed, group=group)
        seen["all_reduce of computed values"] = _read(computed)
        # Work over known values alone is computed on the host; with any other operand, it is not.
        counts.add_(1)
        seen["add_ of a number"] = _read(counts)
        counts.add_(torch.randint_like(counts, 2))
        seen["add_ of computed values"] = _read(counts)
        losses = torch.rand(1, device="openreg")  # a random fill: not known
        dist.all_reduce(losses, group=group)
        seen["float of computed values"] = _read(losses)
    # The device memory was never written: once the mode ends, the values are refused.
    try:
        shapes.sum().item()
        seen["after the mode"] = "read"
    except RuntimeError as error:
        seen["after the mode"] = "never computed" if "never computed" in str(error) else str(error)
    return seen


def check_ddp_in_timing_only_mode(rank, world, key):
    """DDP built and trained for STEPS steps in timing-only mode, as openreg_perf.simulate(execute=False)
    runs it: its parameter check and its bucket rebuild run on shapes and indices the ranks exchange on the
    host. Returns whether the buckets were rebuilt, whether the parameters kept their computed values, and
    what DDP's own check says of a rank whose parameters differ."""
    group = GROUPS.get(tuple(key))
    if group is None:
        return None
    me = dist.get_group_rank(group, rank)
    model = mlp().to("openreg")
    before = [p.detach().cpu().clone() for p in model.parameters()]
    with timing_only():
        ddp = DDP(model, process_group=group)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
        for _ in range(STEPS):
            x = torch.randn(4, 8, device="openreg")
            loss = nn.functional.mse_loss(ddp(x), torch.zeros(4, 4, device="openreg"))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        rebuilt = ddp._has_rebuilt_buckets
        differing = [torch.empty(8, 16 if me == 0 else 17, device="openreg")]
        try:
            dist._verify_params_across_processes(group, differing)
            verdict = "same"
        except RuntimeError as error:
            verdict = "differs" if "appears not to match sizes of the same param in process 0" in str(error) \
                else str(error)
    # The steps ran without computing: the parameters hold the values they had.
    kept = all(torch.equal(p.detach().cpu(), b) for p, b in zip(model.parameters(), before, strict=True))
    return {"rebuilt buckets": rebuilt, "parameters kept": kept, "a different rank": verdict}
