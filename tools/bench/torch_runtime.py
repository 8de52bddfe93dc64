#!/usr/bin/env python3
"""Benchmark torch-openreg's runtime integration against the CPU, in one run.

Prints, for each figure, the openreg time, the CPU time of the same work, and
their ratio (openreg / CPU for latencies, CPU / openreg for bandwidth), with
the issue's target. Medians of repeated runs; the caching allocator is warm.

    .venv/bin/python tools/bench/torch_runtime.py
"""

import statistics
import time

import torch

MiB = 1 << 20


def median_seconds(fn, repeat: int, inner: int = 1) -> float:
    fn()  # warm up: caches, first-touch pages
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - start) / inner)
    return statistics.median(samples)


def latency(name: str, openreg: float, cpu: float, target: float) -> None:
    print(f"{name:<44} openreg {openreg * 1e6:9.2f} us   cpu {cpu * 1e6:9.2f} us   "
          f"ratio {openreg / cpu:5.2f}   (target <= {target})")


def bandwidth(name: str, openreg: float, cpu: float, target: float) -> None:
    print(f"{name:<44} openreg {64 * MiB / openreg / 1e9:7.2f} GB/s   cpu {64 * MiB / cpu / 1e9:7.2f} GB/s"
          f"   ratio {cpu / openreg:5.2f}   (target >= {target})")


def main() -> None:
    torch.openreg.set_fallback_mode("error")  # nothing here may fall back
    inner = 2000
    latency("torch.empty(1024, device=...)",
            median_seconds(lambda: torch.empty(1024, device="openreg"), 15, inner),
            median_seconds(lambda: torch.empty(1024, device="cpu"), 15, inner), 1.5)

    def alloc_free(device):
        def run():
            a = torch.empty(256 * 1024, device=device)
            b = torch.empty(4 * MiB, dtype=torch.uint8, device=device)
            del a, b
        return run
    latency("allocate + free (1 MiB and 4 MiB)",
            median_seconds(alloc_free("openreg"), 15, inner),
            median_seconds(alloc_free("cpu"), 15, inner), 1.5)

    n = 64 * MiB // 4
    pageable, pinned = torch.rand(n), torch.rand(n).pin_memory()
    pageable_out, pinned_out = torch.empty(n), torch.empty(n).pin_memory()
    device = torch.empty(n, device="openreg")
    cpu_dst = torch.empty(n)

    def cpu_copy():
        cpu_dst.copy_(pageable)

    def h2d(src, non_blocking):
        def run():
            device.copy_(src, non_blocking=non_blocking)
            torch.openreg.synchronize()
        return run

    def d2h(dst, non_blocking):
        def run():
            dst.copy_(device, non_blocking=non_blocking)
            torch.openreg.synchronize()
        return run

    copies = [("64 MiB host-to-device, pageable", h2d(pageable, False)),
              ("64 MiB host-to-device, pinned non_blocking", h2d(pinned, True)),
              ("64 MiB device-to-host, pageable", d2h(pageable_out, False)),
              ("64 MiB device-to-host, pinned non_blocking", d2h(pinned_out, True))]
    for name, copy in copies:
        # Memory bandwidth drifts on a shared machine: time the anchor right
        # before and right after each figure and compare with their mean. (Not
        # in strict alternation: PyTorch's OpenMP threads keep spinning for a
        # while after each CPU copy_ and would steal the copy engine's cores.)
        before = median_seconds(cpu_copy, 15)
        measured = median_seconds(copy, 15)
        after = median_seconds(cpu_copy, 15)
        bandwidth(name, measured, (before + after) / 2, 0.9)
    if torch.openreg.fallback_counts():
        raise SystemExit(f"benchmark fell back to the CPU: {torch.openreg.fallback_counts()}")


if __name__ == "__main__":
    main()
