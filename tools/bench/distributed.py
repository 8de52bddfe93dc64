#!/usr/bin/env python3
"""Benchmark occl on 2 ranks against gloo on the CPU, in one run.

    .venv/bin/python tools/bench/distributed.py

- all_reduce of 64 MiB float32: occl over shared device memory (IPC), occl
  over gloo (pinned host staging), and gloo on CPU tensors of the same
  size, timed in alternating rounds (median over rounds); ratios against
  gloo on the CPU (target: IPC >= 1.5x as fast). occl's bus bandwidth
  (2(n-1)/n x bytes / time, NCCL's definition) against this machine's
  memcpy bandwidth (a 64 MiB copy on one rank while the other waits, the
  faster of torch's copy_ and libc's memmove; target >= 0.5).
- A DDP training step of torch_ops.py's MLP on 2 ranks, openreg + occl
  against CPU + gloo, alternating (target: ratio <= 1.0).
Rank 0 prints; the two ranks share this machine's cores.
"""

import multiprocessing
import os
import socket
import statistics
import sys
import time
from datetime import timedelta

MiB = 1 << 20
SIZE = 64 * MiB
ROUNDS = 7
WORLD = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _timed(fn, repeat: int) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - start) / repeat


def _rounds(cases: dict, repeat: int) -> dict:
    """Median seconds per call of each case, the cases alternating in every round."""
    for fn in cases.values():
        fn()  # warm up: buffers, mailboxes, connections
    samples = {name: [] for name in cases}
    for _ in range(ROUNDS):
        for name, fn in cases.items():
            samples[name].append(_timed(fn, repeat))
    return {name: statistics.median(values) for name, values in samples.items()}


def _groups():
    import torch.distributed as dist

    made = {}
    for transport in ("ipc", "gloo"):
        os.environ["OCCL_TRANSPORT"] = transport
        made[transport] = dist.new_group([0, 1], backend="cpu:gloo,openreg:occl")
    del os.environ["OCCL_TRANSPORT"]
    return made


def _all_reduce_cases(groups):
    import torch
    import torch.distributed as dist

    device = torch.ones(SIZE // 4, device="openreg")
    host = torch.ones(SIZE // 4)

    def occl(group):
        def run():
            dist.all_reduce(device, group=group)
            torch.openreg.synchronize()
        return run

    return {"occl ipc": occl(groups["ipc"]), "occl gloo": occl(groups["gloo"]),
            "gloo cpu": lambda: dist.all_reduce(host, group=groups["ipc"])}


def _memcpy_seconds(rank: int) -> float:
    """The machine's memcpy: the faster of torch's copy_ and libc's memmove
    (which bypasses the cache for large sizes, as occl's all-gather does) of
    64 MiB, on rank 0 while rank 1 waits; the anchor is never a handicapped
    copy."""
    import ctypes

    import torch
    import torch.distributed as dist

    seconds = 0.0
    if rank == 0:
        source, target = torch.ones(SIZE // 4), torch.empty(SIZE // 4)
        libc_copy = lambda: ctypes.memmove(target.data_ptr(), source.data_ptr(), SIZE)  # noqa: E731
        torch_copy = lambda: target.copy_(source)  # noqa: E731
        torch_copy()  # first touch of target
        seconds = min(statistics.median(_timed(copy, 5) for _ in range(ROUNDS)) for copy in (torch_copy, libc_copy))
    dist.barrier(device_ids=None)
    return seconds


def _ddp_cases(groups):
    import torch
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_ops import MODELS

    build, make_batch = MODELS["MLP"]

    def step_on(device: str):
        torch.manual_seed(0)
        model = DDP(build().to(device), process_group=groups["ipc"])
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        x, y = (t.to(device) for t in make_batch())

        def step():
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
            if device == "openreg":
                torch.openreg.synchronize()
        return step

    return {"ddp openreg+occl": step_on("openreg"), "ddp cpu+gloo": step_on("cpu")}


def _rank(rank: int, port: int, results) -> None:
    import torch
    import torch.distributed as dist

    torch.openreg.set_device(rank)
    dist.init_process_group("cpu:gloo,openreg:occl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD, timeout=timedelta(seconds=120))
    groups = _groups()
    reduce_times = _rounds(_all_reduce_cases(groups), repeat=3)
    memcpy = _memcpy_seconds(rank)
    ddp_times = _rounds(_ddp_cases(groups), repeat=20)
    if rank == 0:
        results.put((reduce_times, memcpy, ddp_times))
    dist.destroy_process_group()


def main() -> None:
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    port = _free_port()
    ranks = [context.Process(target=_rank, args=(rank, port, results)) for rank in range(WORLD)]
    for process in ranks:
        process.start()
    try:
        reduce_times, memcpy, ddp_times = results.get(timeout=600)
    finally:
        for process in ranks:
            process.join(60)
            if process.is_alive():
                process.kill()
    anchor = reduce_times["gloo cpu"]
    print(f"all_reduce of {SIZE // MiB} MiB float32 on {WORLD} ranks (median of {ROUNDS} rounds):")
    for name, seconds in reduce_times.items():
        print(f"  {name:10s} {seconds * 1e3:8.2f} ms   {anchor / seconds:5.2f}x gloo cpu's speed")
    print(f"  target: occl ipc >= 1.50x gloo cpu's speed: "
          f"{'met' if anchor / reduce_times['occl ipc'] >= 1.5 else 'NOT met'}")
    # NCCL's bus bandwidth of all_reduce: algbw (bytes / time) * 2(n-1)/n,
    # what each rank's link carries; memcpy's: bytes copied / time.
    bus = SIZE / reduce_times["occl ipc"] * 2 * (WORLD - 1) / WORLD
    copy = SIZE / memcpy
    print(f"  occl ipc bus bandwidth {bus / 1e9:.2f} GB/s, memcpy {copy / 1e9:.2f} GB/s: "
          f"{bus / copy:.2f}x (target >= 0.50: {'met' if bus / copy >= 0.5 else 'NOT met'})")
    ratio = ddp_times["ddp openreg+occl"] / ddp_times["ddp cpu+gloo"]
    print(f"DDP step of torch_ops.py's MLP on 2 ranks: openreg+occl "
          f"{ddp_times['ddp openreg+occl'] * 1e3:.2f} ms, cpu+gloo {ddp_times['ddp cpu+gloo'] * 1e3:.2f} ms, "
          f"ratio {ratio:.2f} (target <= 1.00: {'met' if ratio <= 1.0 else 'NOT met'})")


if __name__ == "__main__":
    main()
