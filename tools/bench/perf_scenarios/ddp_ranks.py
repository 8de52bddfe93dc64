"""One rank of a 2-rank DistributedDataParallel step (a 67 M-parameter MLP, fp32, a batch of 256 per
rank, 25 MB buckets) over occl on loopback, predicted on h100-sxm, then again at 1, 2, 8 and 64 ranks
(Run.predicted_again). Rank 0 prints JSON: per rank count the step, compute, all-reduce and exposed
all-reduce times with the host as launches alone, and the step with this machine's own host time
(host="this-machine", not the deterministic default). Usage: ddp_ranks.py RANK STORE_FILE. Run by
tools/bench/perf_model.py."""

import json
import sys

import openreg_perf
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

rank, store = int(sys.argv[1]), sys.argv[2]
torch.openreg.set_device(rank)
dist.init_process_group("openreg:occl", init_method="file://" + store, rank=rank, world_size=2)
torch.manual_seed(0)
model = DistributedDataParallel(nn.Sequential(*[nn.Linear(4096, 4096) for _ in range(4)]).to("openreg"))
x = torch.randn(256, 4096, device="openreg")
for _ in range(2):  # DDP rebuilds its buckets after its first step
    model(x).sum().backward()
with openreg_perf.simulate("h100-sxm") as run:
    model(x).sum().backward()
table = {}
for ranks in (1, 2, 8, 64):
    report = run.predicted_again(ranks=ranks, host="launches").report
    measured_host = run.predicted_again(ranks=ranks, host="this-machine").report
    table[ranks] = [report.total_s, report.compute_s, report.communication_s, report.exposed_communication_s,
                    measured_host.total_s]
collectives = sum(1 for kernel in run.kernels if kernel.category == "collective")
if rank == 0:
    print(json.dumps({"ranks": table, "collectives": collectives}))
dist.destroy_process_group()
