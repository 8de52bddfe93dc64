"""One rank of the DDP cross-package tests (tests/test_distributed_layers.py):
trains the shared model on its shard of the batch over the "occl" backend,
on loopback, and saves the trained parameters. Not a test by itself.

    python tests/ddp_worker.py {amp|compile} RANK WORLD_SIZE PORT OUTPUT
"""

from __future__ import annotations

import datetime
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

STEPS = 5


def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return torch.randn(16, 8, generator=generator), torch.randn(16, 2, generator=generator)


def train(scenario: str, rank: int, world_size: int) -> tuple[torch.nn.Module, float | None]:
    """The trained module and, under AMP, GradScaler's final scale."""
    device = torch.device("openreg", rank)
    torch.openreg.set_device(device)
    module = model().to(device)
    ddp = DistributedDataParallel(module, device_ids=[rank])
    step_model = torch.compile(ddp) if scenario == "compile" else ddp
    inputs, targets = (t.chunk(world_size)[rank].to(device) for t in batch())
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    # A scale small enough that float16 gradients never overflow here: no
    # step is skipped, so the CPU reference (which skips none) stays valid.
    scaler = torch.amp.GradScaler("openreg", init_scale=256.0, enabled=scenario == "amp")
    for _ in range(STEPS):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("openreg", dtype=torch.float16, enabled=scenario == "amp"):
            loss = torch.nn.functional.mse_loss(step_model(inputs).float(), targets)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    return module, scaler.get_scale() if scenario == "amp" else None


def main() -> None:
    scenario, rank, world_size, port, output = sys.argv[1], *map(int, sys.argv[2:5]), sys.argv[5]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("occl", rank=rank, world_size=world_size, timeout=datetime.timedelta(seconds=60))
    try:
        trained, scale = train(scenario, rank, world_size)
        torch.save({"parameters": {name: p.detach().cpu() for name, p in trained.named_parameters()},
                    "scale": scale}, output)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
