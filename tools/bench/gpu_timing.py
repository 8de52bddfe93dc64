"""How tools/bench/gpu_calibration.py times a GPU and writes what it measured: CUDA events around
batches of calls (back to back, replayed from a CUDA graph, or with the host ahead of the device), and
the CSV, row by row. Plain PyTorch; the host clock stands in for events without a GPU."""

import csv
import statistics
import time
from pathlib import Path

import torch

SAMPLE_SECONDS = 0.010
SAMPLES = 5
DEVICE_ALONE = ", host ahead"  # the config's suffix of a row timed by Timer.device_per_call


class Timer:
    """Seconds per call of fn: CUDA events on a GPU, the host clock (after a synchronisation) elsewhere."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.cuda = device == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def batch(self, fn, calls: int) -> float:
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3 / calls
        began = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - began) / calls

    def per_call(self, fn, max_calls: int = 2000) -> tuple[float, list[float]]:
        """Median seconds per call over SAMPLES samples of about SAMPLE_SECONDS, and the samples."""
        fn()
        self.sync()
        once = self.batch(fn, 1)
        calls = max(1, min(max_calls, round(SAMPLE_SECONDS / max(once, 1e-7))))
        self.batch(fn, calls)  # warm-up at the sample's length (clocks up, caches and allocator settled)
        samples = [self.batch(fn, calls) for _ in range(SAMPLES)]
        return statistics.median(samples), samples

    def device_per_call(self, fn, eager_seconds: float) -> tuple[float, list[float]]:
        """Median device seconds per call with the host ahead of the device: a spinning kernel holds
        the stream while the host queues the whole sample behind it, so the events around the sample
        see the device's work alone, also where the host takes longer per call than the device (a
        backward through autograd takes 110-300 us of host time on the H200's host). A sample whose
        spin ended before the host had queued it (the host fell behind: a call that synchronises, a
        full launch queue, a spin too short) is refused, and so is a result slower than eager_seconds,
        per_call's figure, which bounds it."""
        calls = max(1, min(2000, round(SAMPLE_SECONDS / eager_seconds)))
        host_began = time.perf_counter()
        for _ in range(calls):
            fn()
        host_per_call = (time.perf_counter() - host_began) / calls
        self.sync()
        spin = 2 * calls * host_per_call + 2e-3
        samples = []
        for _ in range(SAMPLES):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(round(spin * self.cycles_per_second()))
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            if start.query():  # the spin is over: the device may have waited for the host
                raise RuntimeError("the host fell behind the spinning kernel")
            end.synchronize()
            samples.append(start.elapsed_time(end) / 1e3 / calls)
        if statistics.median(samples) > 1.1 * eager_seconds:
            raise RuntimeError("slower with the host ahead than back to back")
        return statistics.median(samples), samples

    def cycles_per_second(self) -> float:
        """The rate of torch.cuda._sleep's cycles, measured once, after a spin that raises the clocks."""
        if not hasattr(self, "_cycles_per_second"):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(10**8)
            start.record()
            torch.cuda._sleep(10**7)
            end.record()
            end.synchronize()
            self._cycles_per_second = 10**7 / (start.elapsed_time(end) / 1e3)
        return self._cycles_per_second

    def graph_per_call(self, fn, kernels_per_graph: int = 100) -> tuple[float, list[float]]:
        """Median seconds per call of fn replayed from a CUDA graph of kernels_per_graph calls."""
        for _ in range(3):  # warm up on a side stream, as graph capture requires
            fn()
        self.sync()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(kernels_per_graph):
                fn()
        seconds, samples = self.per_call(graph.replay, max_calls=200)
        del graph
        return seconds / kernels_per_graph, [s / kernels_per_graph for s in samples]


class Rows:
    """The CSV, written and flushed row by row."""

    FIELDS = ("workload", "config", "precision", "hardware", "metric", "value", "unit", "source", "samples",
              "spread")

    def __init__(self, path: Path, hardware: str, source: str, header: list[str]) -> None:
        self.file = open(path, "w", newline="")
        for line in header:
            self.file.write(f"# {line}\n")
        self.writer = csv.DictWriter(self.file, self.FIELDS)
        self.writer.writeheader()
        self.hardware, self.source, self.count = hardware, source, 0

    def add(self, workload: str, config: str, precision: str, seconds: float, samples: list[float],
            metric: str = "device time", unit: str = "us") -> None:
        scale = {"us": 1e6, "ms": 1e3}[unit]
        spread = f"{min(samples) * scale:.4g}-{max(samples) * scale:.4g}"
        self.writer.writerow(dict(workload=workload, config=config, precision=precision, hardware=self.hardware,
                                  metric=metric, value=f"{seconds * scale:.4g}", unit=unit, source=self.source,
                                  samples=len(samples), spread=spread))
        self.file.flush()
        self.count += 1
        print(f"  {workload:<40} {config:<44} {precision:<9} {seconds * scale:>10.4g} {unit}", flush=True)

    def note(self, text: str) -> None:
        self.file.write(f"# {text}\n")
        self.file.flush()
        print(f"  note: {text}", flush=True)
