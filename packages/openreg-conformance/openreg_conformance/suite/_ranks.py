"""One rank of the distributed group's checks: python _ranks.py SCENARIO RANK WORLD STORE_FILE DEVICE_TYPE OUT.

Joins a process group on the device's default c10d backend
(dist.get_default_backend_for_device), runs the scenario's checks and writes
{check: failure message or ""} as JSON to OUT. Expected values come from
the CPU: computed here from the same inputs, never from the backend.
"""

from __future__ import annotations

import json
import sys
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist


def rank_tensor(rank: int, device, size: int = 8) -> torch.Tensor:
    return (torch.arange(size, dtype=torch.float32) + 100 * rank).to(device)


def collective_checks(rank: int, world: int, device) -> dict:
    inputs = [rank_tensor(r, "cpu") for r in range(world)]
    mine = rank_tensor(rank, device)
    checks = {}

    def check(name, got, expected):
        if not torch.equal(got.cpu(), expected):
            checks[name] = f"{name} on rank {rank}: got {got.cpu().tolist()}, the CPU computes {expected.tolist()}"
        else:
            checks[name] = ""

    t = mine.clone()
    dist.all_reduce(t)
    check("all_reduce sum", t, sum(inputs))
    t = mine.clone()
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    check("all_reduce max", t, torch.stack(inputs).max(0).values)
    t = mine.clone()
    dist.broadcast(t, src=1)
    check("broadcast", t, inputs[1])
    gathered = torch.empty(world * 8, device=device)
    dist.all_gather_into_tensor(gathered, mine)
    check("all_gather_into_tensor", gathered, torch.cat(inputs))
    pieces = [torch.empty(8, device=device) for _ in range(world)]
    dist.all_gather(pieces, mine)
    check("all_gather", torch.cat(pieces), torch.cat(inputs))
    big = torch.cat([rank_tensor(rank, "cpu") * (r + 1) for r in range(world)]).to(device)
    out = torch.empty(8, device=device)
    dist.reduce_scatter_tensor(out, big)
    check("reduce_scatter_tensor", out, sum(inputs) * (rank + 1))
    out = torch.empty(world * 8, device=device)
    dist.all_to_all_single(out, torch.cat([mine + r for r in range(world)]))
    check("all_to_all_single", out, torch.cat([inputs[r] + rank for r in range(world)]))
    outs = [torch.empty(8, device=device) for _ in range(world)]
    dist.all_to_all(outs, [mine + r for r in range(world)])
    check("all_to_all", torch.cat(outs), torch.cat([inputs[r] + rank for r in range(world)]))
    out = torch.empty(8, device=device)
    dist.reduce_scatter(out, [mine * (r + 1) for r in range(world)])
    check("reduce_scatter", out, sum(inputs) * (rank + 1))
    t = mine.clone()
    dist.reduce(t, dst=0)
    if rank == 0:
        check("reduce", t, sum(inputs))
    gathered = [torch.empty(8, device=device) for _ in range(world)] if rank == 0 else None
    dist.gather(mine, gathered, dst=0)
    if rank == 0:
        check("gather", torch.cat(gathered), torch.cat(inputs))
    out = torch.empty(8, device=device)
    dist.scatter(out, [rank_tensor(r, device) * 5 for r in range(world)] if rank == 0 else None, src=0)
    check("scatter", out, inputs[rank] * 5)
    if rank == 0:
        dist.send(mine * 3, dst=1)
    elif rank == 1:
        received = torch.empty(8, device=device)
        dist.recv(received, src=0)
        check("send and recv", received, inputs[0] * 3)
    dist.barrier()
    return checks


def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def batch(rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(10 + rank)
    return torch.randn(4, 8, generator=generator), torch.randn(4, 4, generator=generator)


def reference_step(world: int) -> torch.nn.Module:
    """The step on the CPU, one process: every rank's batch, the mean of the ranks' mean losses."""
    reference = model()
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    loss = sum(torch.nn.functional.mse_loss(reference(x), y) for x, y in map(batch, range(world))) / world
    loss.backward()
    optimizer.step()
    return reference


def parameters_check(name: str, got: list[torch.Tensor], expected: torch.nn.Module) -> str:
    for value, (parameter_name, reference) in zip(got, expected.named_parameters(), strict=True):
        if not torch.allclose(value.cpu(), reference.detach(), atol=1e-5, rtol=1e-4):
            return f"{name}: after one step, {parameter_name} differs from the CPU's step over every rank's batch"
    return ""


def ddp_checks(rank: int, world: int, device) -> dict:
    from torch.nn.parallel import DistributedDataParallel

    ddp = DistributedDataParallel(model().to(device), device_ids=[device.index])
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    x, y = batch(rank)
    torch.nn.functional.mse_loss(ddp(x.to(device)), y.to(device)).backward()
    optimizer.step()
    return {"DDP step": parameters_check("DDP", [p.detach() for p in ddp.parameters()], reference_step(world))}


def fsdp2_checks(rank: int, world: int, device) -> dict:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device.type, (world,))
    sharded = model().to(device)
    for layer in sharded:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(sharded, mesh=mesh)
    optimizer = torch.optim.SGD(sharded.parameters(), lr=0.1)
    x, y = batch(rank)
    torch.nn.functional.mse_loss(sharded(x.to(device)), y.to(device)).backward()
    optimizer.step()
    full = [p.full_tensor().detach() for p in sharded.parameters()]
    return {"FSDP2 step": parameters_check("FSDP2", full, reference_step(world))}


SCENARIOS = {"collectives": collective_checks, "ddp": ddp_checks, "fsdp2": fsdp2_checks}


def main() -> None:
    scenario, rank, world, store_file, device_type, out = sys.argv[1:]
    rank, world = int(rank), int(world)
    device = torch.device(device_type, rank % torch.accelerator.device_count())
    torch.accelerator.set_device_index(device.index)
    try:
        dist.init_process_group(dist.get_default_backend_for_device(device_type), init_method=f"file://{store_file}",
                                rank=rank, world_size=world, timeout=timedelta(seconds=60))
        results = SCENARIOS[scenario](rank, world, device)
        dist.destroy_process_group()
    except Exception:  # the parent reports it: the rank's traceback is the message
        results = {"rank": f"rank {rank} raised:\n{traceback.format_exc()}"}
    with open(out, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
