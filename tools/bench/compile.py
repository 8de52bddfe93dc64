#!/usr/bin/env python3
"""Benchmark torch.compile on openreg, in one run: for the MLP, the CNN and
the Transformer of torch_ops.py, inference and a training step, compiled
openreg against eager openreg and against compiled CPU (Inductor), and
compiled CPU against eager CPU (the speed-up compilation gives the CPU
itself). A training step is timed 30 to a sample, an inference 50.

Not a measure of compilation time: every variant is compiled and run once
before the first sample.

How the samples are taken, so that a MISSED is real and not the machine:
each round takes one sample of all four variants of a case (openreg and
CPU, compiled and eager), back to back, in an order that rotates from one
round to the next, so each variant comes first, second, third and last
equally often; each round takes every case in turn. A ratio is the median
over the rounds of the ratio of two samples of the same round, so a slow
phase of the shared machine spoils a few rounds, which the median ignores,
rather than one side. The spread printed beside each ratio is its
interquartile range over the rounds; every round counts (no best-of). The
load average is printed before and after.

Targets: compiled openreg <= 1.10x compiled CPU; compiled openreg faster
than eager openreg wherever compiled CPU is faster than eager CPU.

openreg runs asynchronously: while the device works through one call, the
host already queues the next, so a call costs about the larger of the two,
and where the device is the larger, compiling away host overhead (the gain
the CPU gets) changes nothing. The table after the ratios says which side
each openreg case is bound by: per call, the host's time to queue (the
timed loop before its final synchronisation) and the device's kernel time
(the runtime's activity records: the sum over kernels of each kernel's
median duration), for compiled and eager openreg. A kernel's duration is
wall time on whichever thread ran it, so it grows with the machine's load.
These are traced samples of their own (a third as many rounds, compiled and
eager alternating), not the ratios' samples, which run untraced.

    .venv/bin/python tools/bench/compile.py [--glibc-defaults] [--rounds N]
"""

import argparse
import collections
import os
import statistics
import tempfile
import time

import openreg_runtime
import torch
import torch.nn.functional as F
from torch_ops import MODELS, restart_with_anchor_at_its_best, seconds_per_call

TRAIN_CALLS, INFER_CALLS = 30, 50
VARIANTS = (("openreg", True), ("openreg", False), ("cpu", True), ("cpu", False))


def compile_alone(fn):
    """torch.compile(fn) as a program that compiles only this model gets it.
    The cases share code objects (nn.Sequential.forward, this module's loss,
    SGD.step), so each later case is a recompilation of the same code, and
    Dynamo's automatic dynamic shapes would compile it for symbolic sizes,
    as if one model had changed shape: the CNN's training step then ran
    generated kernels 1.4 times as slow. dynamic=False keeps every case
    specialised, as its first compilation would be."""
    return torch.compile(fn, dynamic=False)


def inference(build, make_batch, device: str, compiled: bool):
    torch.manual_seed(0)
    model = build().to(device).eval()
    x = make_batch()[0].to(device)
    run = compile_alone(model) if compiled else model

    def infer():
        with torch.no_grad():
            run(x)
    return infer


def training_step(build, make_batch, device: str, compiled: bool):
    """Forward, loss, backward and an SGD step; compiled, the forward with
    its loss (and so the backward) and the optimizer step are compiled."""
    torch.manual_seed(0)
    model = build().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = (t.to(device) for t in make_batch())

    def loss():
        return F.cross_entropy(model(x), y)
    forward, update = (compile_alone(loss), compile_alone(optimizer.step)) if compiled else (loss, optimizer.step)

    def step():
        optimizer.zero_grad()
        forward().backward()
        update()
    return step


def warmed_up(fn):
    """fn, after two calls: compiling (and a recompilation on the second
    call, if any) happens here, not in the first sample."""
    for _ in range(2):
        fn()
    torch.openreg.synchronize()
    return fn


def rotated(items: tuple, round_index: int) -> tuple:
    shift = round_index % len(items)
    return items[shift:] + items[:shift]


def sample_rounds(cases: dict, calls: int, rounds: int) -> dict:
    """case name -> variant -> seconds per call, one per round, the rounds
    interleaved as the module's docstring says. Every sample ends with a
    synchronisation inside its timing (openreg: waiting for the queued
    work; the CPU sides have nothing queued, so it returns at once)."""
    samples = {name: {variant: [] for variant in VARIANTS} for name in cases}
    for round_index in range(rounds):
        for name, fns in cases.items():
            for variant in rotated(VARIANTS, round_index):
                samples[name][variant].append(seconds_per_call(fns[variant], calls, torch.openreg.synchronize))
    return samples


def host_and_device(fn, calls: int) -> tuple:
    """(host seconds to queue a call, device kernel seconds per call) of one
    openreg sample of `calls` calls, traced by the runtime."""
    torch.openreg.synchronize()
    time.sleep(0.005)  # as seconds_per_call does
    openreg_runtime.trace_drain()
    openreg_runtime.trace_enable(True)
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    queued = time.perf_counter() - start
    torch.openreg.synchronize()
    openreg_runtime.trace_enable(False)
    durations = collections.defaultdict(list)
    for record in openreg_runtime.trace_drain():
        if record["kind"] == "kernel":
            durations[record["name"]].append((record["end_ns"] - record["start_ns"]) * 1e-9)
    device = sum(statistics.median(taken) * len(taken) for taken in durations.values())
    return queued / calls, device / calls


def bound_by(cases: dict, calls: int, rounds: int) -> dict:
    """case name -> compiled -> (host, device) seconds per call of openreg,
    each the median over rounds in which compiled and eager take turns going
    first, every case in each round."""
    taken = {name: {compiled: [] for compiled in (True, False)} for name in cases}
    for round_index in range(rounds):
        for name, fns in cases.items():
            for compiled in (True, False) if round_index % 2 == 0 else (False, True):
                taken[name][compiled].append(host_and_device(fns["openreg", compiled], calls))
    return {name: {compiled: tuple(statistics.median(side) for side in zip(*pairs, strict=True))
                   for compiled, pairs in by_mode.items()}
            for name, by_mode in taken.items()}


def paired_ratio(numerators: list, denominators: list) -> tuple:
    """(median, first quartile, third quartile) of the per-round ratios."""
    ratios = [n / d for n, d in zip(numerators, denominators, strict=True)]
    low, _, high = statistics.quantiles(ratios, n=4)
    return statistics.median(ratios), low, high


def measure(rounds: int) -> dict:
    """case -> dict of its ratios (each a (median, q1, q3)) and its
    compiled openreg microseconds, or the error that stopped it compiling."""
    rows = {}
    for kind, make, calls in (("inference", inference, INFER_CALLS), ("training step", training_step, TRAIN_CALLS)):
        cases = {}
        for name, (build, make_batch) in MODELS.items():
            try:
                cases[name] = {(device, compiled): warmed_up(make(build, make_batch, device, compiled))
                               for device, compiled in VARIANTS}
            except Exception as error:  # a case that does not compile is reported, the others measured
                rows[f"{kind} {name}"] = f"{type(error).__name__}: {str(error).splitlines()[0][:80]}"
        bounds = bound_by(cases, calls, max(3, rounds // 3))
        for name, s in sample_rounds(cases, calls, rounds).items():
            compiled, eager = s["openreg", True], s["openreg", False]
            cpu_compiled, cpu_eager = s["cpu", True], s["cpu", False]
            rows[f"{kind} {name}"] = {
                "us": statistics.median(compiled) * 1e6,
                "vs eager": paired_ratio(compiled, eager),
                "vs cpu-compiled": paired_ratio(compiled, cpu_compiled),
                "cpu: compiled/eager": paired_ratio(cpu_compiled, cpu_eager),
                "bound": bounds[name],
            }
    return rows


def target_met(row: dict) -> bool:
    vs_eager, vs_cpu, cpu_gain = (row[key][0] for key in ("vs eager", "vs cpu-compiled", "cpu: compiled/eager"))
    return vs_cpu <= 1.10 and (cpu_gain >= 1.0 or vs_eager < 1.0)


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def print_table(rows: dict) -> None:
    ratios = ("vs eager", "vs cpu-compiled", "cpu: compiled/eager")
    print(f"{'case':<26}{'compiled us':>12}" + "".join(f"{key:>26}" for key in ratios) + "   targets")
    for name, row in rows.items():
        if isinstance(row, str):
            print(f"{name:<26}compile failed: {row}")
            continue
        cells = "".join(f"{median:>12.2f} [{low:.2f}-{high:.2f}]" for median, low, high in (row[k] for k in ratios))
        print(f"{name:<26}{row['us']:12.1f}{cells}   {'met' if target_met(row) else 'MISSED'}")
    print("ratio = median over rounds of paired samples [interquartile range]")
    print()
    print(f"{'openreg, us per call':<26}{'compiled: host':>15}{'device':>9}{'eager: host':>13}{'device':>9}")
    for name, row in rows.items():
        if isinstance(row, str):
            continue
        (compiled_host, compiled_device), (eager_host, eager_device) = row["bound"][True], row["bound"][False]
        print(f"{name:<26}{compiled_host * 1e6:15.1f}{compiled_device * 1e6:9.1f}"
              f"{eager_host * 1e6:13.1f}{eager_device * 1e6:9.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--glibc-defaults", action="store_true", help="see tools/bench/torch_ops.py")
    parser.add_argument("--rounds", type=int, default=15, help="samples of each variant of each case")
    args = parser.parse_args()
    restart_with_anchor_at_its_best()
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="openreg-bench-inductor-"))
    print(f"GLIBC_TUNABLES={os.environ.get('GLIBC_TUNABLES', '(unset)')}")
    print(f"OPENREG_FAST_PATHS={os.environ.get('OPENREG_FAST_PATHS', '(unset: on)')}, rounds={args.rounds}")
    print(f"load average before: {load_average()}")
    torch.openreg.reset_fallback_counts()
    rows = measure(args.rounds)
    print_table(rows)
    print(f"load average after: {load_average()}")
    print(f"operator calls through the CPU fallback: {sum(torch.openreg.fallback_counts().values())}")


if __name__ == "__main__":
    main()
