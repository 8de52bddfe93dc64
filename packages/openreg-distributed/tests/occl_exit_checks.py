"""What test_faults.py's exit scenario runs, as `python occl_exit_checks.py RANK PORT`: rank 1
takes part in one all_reduce over IPC and leaves at once (os._exit, no destroy); rank 0 must
still get the sum, which every rank completed. Prints rank 0's result."""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist


def main(rank: int, port: int) -> None:
    os.environ["OCCL_TRANSPORT"] = "ipc"
    dist.init_process_group("cpu:gloo,openreg:occl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2)
    torch.openreg.set_device(0)
    t = torch.full((1024,), float(rank + 1), device="openreg")
    dist.all_reduce(t)
    result = t.cpu()  # this rank has its sum: the collective completed here
    if rank == 1:
        os._exit(0)  # leaves at once, its device memory with it
    print(result[:4].tolist(), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
