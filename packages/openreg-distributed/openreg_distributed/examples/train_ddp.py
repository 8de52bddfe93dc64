"""A DDP training run on openreg over occl, for torchrun:

    torchrun --nproc_per_node=2 -m openreg_distributed.examples.train_ddp

It ships in openreg-distributed's wheel (torch-openreg[distributed]).

Each rank trains an MLP on its shard of every batch; rank 0 prints the loss
and, at the end, whether every rank holds the same parameters. Not a
benchmark (tools/bench/distributed.py is).
"""

import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

# LITERALINCLUDE START: OCCL_TORCHRUN_SCRIPT
local_rank = int(os.environ["LOCAL_RANK"])
torch.openreg.set_device(local_rank % torch.openreg.device_count())
# No backend named: the device's default, occl. Passing device_id matters in
# torch 2.13: with no argument at all the group also gets occl, but torch
# labels its default backend "gloo", which DDP then fails to find.
dist.init_process_group(device_id=torch.device("openreg", torch.openreg.current_device()))
rank, world = dist.get_rank(), dist.get_world_size()

torch.manual_seed(0)  # the same initial model everywhere (DDP broadcasts rank 0's anyway)
model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)).to("openreg"))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(int(os.environ.get("STEPS", "20"))):
    generator = torch.Generator().manual_seed(step)  # every rank draws the same batch...
    x = torch.randn(64, 16, generator=generator)
    y = x.sum(dim=1, keepdim=True)
    mine = slice(rank * 64 // world, (rank + 1) * 64 // world)  # ...and trains on its shard
    loss = nn.functional.mse_loss(model(x[mine].to("openreg")), y[mine].to("openreg"))
    optimizer.zero_grad()
    loss.backward()  # gradients are averaged over the ranks by occl, on the comm stream
    optimizer.step()
    if rank == 0 and step % 5 == 0:
        print(f"step {step:2d}  loss {loss.item():.4f}", flush=True)
# LITERALINCLUDE END: OCCL_TORCHRUN_SCRIPT

flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
everyone = [torch.empty_like(flat) for _ in range(world)]
dist.all_gather(everyone, flat)
agree = all(torch.equal(everyone[0].cpu(), other.cpu()) for other in everyone)
if rank == 0:
    print(f"{world} ranks over occl ({model.process_group._get_backend(flat.device).transport} transport); "
          f"parameters identical on every rank: {agree}", flush=True)
dist.destroy_process_group()
