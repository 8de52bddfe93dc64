"""What the ranks run for test_training.py: DDP, FSDP2 and DTensor on openreg
over occl, each compared step by step with one process computing the same
thing on the full batch on the CPU."""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist
import torch.nn as nn
from occl_checks import GROUPS
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = 3


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def cnn() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 4))


class Branchy(nn.Module):
    """A layer that only some steps use: DDP must be told (find_unused_parameters)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.used = nn.Linear(8, 4)
        self.sometimes = nn.Linear(8, 4)

    def forward(self, x, step=0):
        return self.used(x) + (self.sometimes(x) if step % 2 else 0)


def _batch(kind: str, step: int, size: int = 8):
    generator = torch.Generator().manual_seed(100 + step)
    shape = (size, 1, 8, 8) if kind == "cnn" else (size, 8)
    return torch.randn(shape, generator=generator), torch.randn(size, 4, generator=generator)


def _assert_params_equal(actual: nn.Module, expected: nn.Module, what: str) -> None:
    for (name, a), (_, e) in zip(actual.named_parameters(), expected.named_parameters(), strict=True):
        torch.testing.assert_close(a.detach().cpu(), e.detach(), rtol=1e-4, atol=1e-5,
                                   msg=lambda m, name=name: f"{what}, parameter {name}: {m}")


def check_ddp(rank, world, key, kind, variant):
    """kind: "mlp", "cnn" or "branchy"; variant: "plain", "hook" (fp16
    compression hook), "unused" (find_unused_parameters) or "no_sync"
    (two micro-batches accumulated per step)."""
    group = GROUPS.get(tuple(key))
    if group is None:
        return None
    size, me = dist.get_world_size(group), dist.get_group_rank(group, rank)
    reference = {"mlp": mlp, "cnn": cnn, "branchy": Branchy}[kind]()
    model = DDP(copy.deepcopy(reference).to("openreg"), process_group=group,
                find_unused_parameters=variant == "unused")
    if variant == "hook":
        model.register_comm_hook(group, default_hooks.fp16_compress_hook)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for step in range(STEPS):
        x, y = _batch("cnn" if kind == "cnn" else "mlp", step)
        forward = {"step": step} if kind == "branchy" else {}
        # The reference: one process, the full batch.
        reference_optimizer.zero_grad()
        nn.functional.mse_loss(reference(x, **forward), y).backward()
        reference_optimizer.step()
        # This rank's shard of the batch (in two micro-batches for no_sync).
        shard = slice(me * len(x) // size, (me + 1) * len(x) // size)
        xs, ys = x[shard].to("openreg"), y[shard].to("openreg")
        optimizer.zero_grad()
        if variant == "no_sync":
            half = len(xs) // 2
            with model.no_sync():
                (nn.functional.mse_loss(model(xs[:half]), ys[:half]) / 2).backward()
            (nn.functional.mse_loss(model(xs[half:]), ys[half:]) / 2).backward()
        else:
            nn.functional.mse_loss(model(xs, **forward), ys).backward()
        optimizer.step()
        tolerance_note = f"{kind} {variant} step {step}"
        if variant == "hook":  # fp16 gradients: compare loosely
            for a, e in zip(model.module.parameters(), reference.parameters(), strict=True):
                torch.testing.assert_close(a.detach().cpu(), e.detach(), rtol=1e-2, atol=1e-3)
        else:
            _assert_params_equal(model.module, reference, tolerance_note)
    return STEPS


def check_fsdp2(rank, world):
    """fully_shard over the "dp" dimension (2 ranks) of a 2x2 openreg mesh:
    forward, backward and optimizer step match the unsharded model."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("openreg", (2, 2), mesh_dim_names=("dp", "tp"))
    dp = mesh["dp"]
    reference = mlp()
    model = copy.deepcopy(reference).to("openreg")
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=dp)
    fully_shard(model, mesh=dp)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    reference_optimizer = torch.optim.Adam(reference.parameters(), lr=0.01)
    me, size = dp.get_local_rank(), dp.size()
    for step in range(STEPS):
        x, y = _batch("mlp", step)
        reference_optimizer.zero_grad()
        reference_loss = nn.functional.mse_loss(reference(x), y)
        reference_loss.backward()
        reference_optimizer.step()
        shard = slice(me * len(x) // size, (me + 1) * len(x) // size)
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x[shard].to("openreg")), y[shard].to("openreg"))
        loss.backward()
        optimizer.step()
        for (name, a), (_, e) in zip(model.named_parameters(), reference.named_parameters(), strict=True):
            torch.testing.assert_close(a.full_tensor().cpu(), e.detach(), rtol=1e-4, atol=1e-5,
                                       msg=lambda m, name=name, step=step: f"FSDP2 step {step} {name}: {m}")
    return STEPS


def check_dtensor(rank, world):
    """A 2x2 openreg mesh: DTensor operations and functional collectives
    against the same computation on full CPU tensors."""
    import torch.distributed._functional_collectives as funcol
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("openreg", (2, 2), mesh_dim_names=("dp", "tp"))
    generator = torch.Generator().manual_seed(5)
    a, b = torch.randn(8, 6, generator=generator), torch.randn(6, 4, generator=generator)
    da = distribute_tensor(a.to("openreg"), mesh, [Shard(0), Shard(1)])
    db = distribute_tensor(b.to("openreg"), mesh, [Replicate(), Shard(0)])
    product = (da @ db).full_tensor()
    torch.testing.assert_close(product.cpu(), a @ b, rtol=1e-5, atol=1e-5)
    total = da.sum().full_tensor()
    torch.testing.assert_close(total.cpu(), a.sum(), rtol=1e-5, atol=1e-5)
    resharded = da.redistribute(mesh, [Replicate(), Shard(0)]).to_local()
    torch.testing.assert_close(resharded.cpu(), a[mesh.get_local_rank("tp") * 4:][:4], rtol=0, atol=0)
    # Functional collectives over one dimension of the mesh.
    tp = mesh["tp"]
    mine = torch.full((2, 3), float(rank), device="openreg")
    peers = [dist.get_global_rank(tp.get_group(), r) for r in range(tp.size())]
    gathered = funcol.all_gather_tensor(mine, gather_dim=0, group=tp)
    expected = torch.cat([torch.full((2, 3), float(p)) for p in peers])
    torch.testing.assert_close(gathered.cpu(), expected, rtol=0, atol=0)
    scattered = funcol.reduce_scatter_tensor(expected.to("openreg"), "sum", scatter_dim=0, group=tp)
    torch.testing.assert_close(scattered.cpu(), expected[2 * tp.get_local_rank():][:2] * tp.size(), rtol=0, atol=0)
    reduced = funcol.all_reduce(mine, "sum", group=tp)
    torch.testing.assert_close(reduced.cpu(), torch.full((2, 3), float(sum(peers))), rtol=0, atol=0)
    return True
