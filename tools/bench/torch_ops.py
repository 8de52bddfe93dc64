#!/usr/bin/env python3
"""Benchmark operators and training steps on openreg against the CPU, in one run.

For add, mul, relu, sum, mm, conv2d and softmax at about 1, 1K and 1M
elements, and for one training step of an MLP, a CNN and a Transformer,
prints the median time per call on openreg, the median time of the same
work on the CPU, and the median ratio of paired samples. openreg is timed
as a device is used: a batch of calls is queued, then one synchronisation
waits for all of them, and the total is divided by the number of calls; a
batch lasts about 5 ms (20 ms at 1M elements, see below), or 30 training
steps (a training loop's steady state). openreg and CPU samples come in pairs, 21 of each (11 for training
steps), one pair of every operator of a size (or every model) per round.
Also prints how many operator calls ran natively and how many fell back to
the CPU.

A batch of 1M-element calls lasts 20 ms, not 5 ms: each batch pays one
synchronisation's fixed cost, and at 1M elements that cost is up to one
call's time: the stream's worker starts the first call of the batch on one
thread, and the host, once it waits, runs the rest with its OpenMP team but
must first wait for that call (Note [Who runs queued work] in the runtime's
stream.cpp). Over a 5 ms batch that is a few percent, the whole margin of
the 1M target, and the rows moved by as much from run to run (0.97 and 1.13
for add in two runs); over 20 ms it is a quarter of that, closer to what a
loop of large operators between synchronisations pays.

The CPU anchor runs at its best: the script restarts itself with the C
library's malloc told to keep freed memory (GLIBC_TUNABLES below). With the
defaults, a 4 MiB result freed on the main thread is sometimes handed back
to the OS and faulted in again on the next call, and the CPU's 1M-element
conv2d then takes 5-6 ms instead of 0.5-1 ms. openreg's kernels do not
depend on this setting (their host memory is cached, see the scratch
allocator), so it only makes the comparison harder for openreg.
--glibc-defaults runs without it.

Both modes of the backend are measured, each in a process of its own (the
mode is read when the backend loads), and printed side by side: "fast" is
the default, "plain" is OPENREG_FAST_PATHS=0 (the reference path alone).

    .venv/bin/python tools/bench/torch_ops.py [--glibc-defaults] [--mode fast|plain]
"""

import json
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def seconds_per_call(fn, inner: int, finish, settle=None) -> float:
    if settle is not None:
        settle()  # outside the timing: e.g. wait for the previous sample's device work
    # Let the other side's threads go idle first: the stream workers and
    # the OpenMP teams poll for a while after their last work, and on two
    # cores a poller takes the core the next sample needs.
    time.sleep(0.005)
    start = time.perf_counter()
    for _ in range(inner):
        fn()
    finish()  # openreg: wait for the queued work, inside the timing
    return (time.perf_counter() - start) / inner


def calls_per_sample(cpu_fn, seconds: float = 0.005) -> int:
    """How many calls make one sample of about `seconds` on the CPU.

    After the sleep above, the first calls on either side are slow (on this
    VM an idle core needs tens of microseconds to come back, and openreg has
    two threads to wake: the host and the stream worker). A sample long
    enough to make that a small share measures the steady per-call cost.
    """
    start = time.perf_counter()
    for _ in range(20):
        cpu_fn()
    per_call = (time.perf_counter() - start) / 20
    return max(5, min(5000, round(seconds / per_call)))


def compare(cases: dict, inner: int | None = None, rounds: int = 21, finish=None, settle=None,
            sample_seconds: float = 0.005) -> dict:
    """For each case name -> (openreg fn, CPU fn): the median seconds per call
    on openreg and on the CPU, and their ratio. A sample is inner calls, or
    as many as take sample_seconds on the CPU.

    Other scripts compare two openreg variants through the same pairing,
    with two optional pairs of callables, (openreg side, anchor side):
    finish ends each sample inside its timing, by default
    (torch.openreg.synchronize, None); settle runs before each sample,
    outside its timing (say, waiting for the previous sample's device work
    when only host time is measured).

    The samples come in pairs, one openreg and one CPU, so that both sides
    see the same machine: on a shared VM the speed of the CPU drifts by tens
    of percent within a run, and stays fast or slow for seconds at a time.
    So the ratio is the median of each openreg sample over the CPU sample
    of its pair, not the ratio of two medians that may each come from a
    different phase of the drift. Which side goes first alternates from one
    pair to the next, so a drift within a pair favours neither side. And
    each round takes one pair of every case, so a slow phase of a few
    seconds spoils a few pairs of each case, which the median then ignores,
    rather than every pair of one case.
    """
    finishes = finish or (torch.openreg.synchronize, None)
    settles = settle or (None, None)

    def nothing():
        pass

    calls, samples = {}, {}
    for name, (device_fn, cpu_fn) in cases.items():
        device_fn(), cpu_fn()
        torch.openreg.synchronize()
        calls[name] = inner or calls_per_sample(cpu_fn, sample_seconds)
        samples[name] = ([], [])
    for pair in range(rounds):
        for name, (device_fn, cpu_fn) in cases.items():
            device, cpu = samples[name]
            sides = [(device, device_fn, finishes[0] or nothing, settles[0]),
                     (cpu, cpu_fn, finishes[1] or nothing, settles[1])]
            for taken, fn, end, before in sides if pair % 2 == 0 else reversed(sides):
                taken.append(seconds_per_call(fn, calls[name], end, before))
    results = {}
    for name, (device, cpu) in samples.items():
        ratio = statistics.median(d / c for d, c in zip(device, cpu, strict=True))
        results[name] = (statistics.median(device), statistics.median(cpu), ratio)
    return results


def operand(shape, device):
    return torch.randn(*shape).to(device)


SIZES = {"1": (1,), "1K": (32, 32), "1M": (1024, 1024)}
MM = {"1": (1, 1), "1K": (32, 32), "1M": (1024, 1024)}
CONV = {"1": (1, 1, 1, 1), "1K": (1, 4, 16, 16), "1M": (1, 16, 256, 256)}


def op_cases(size: str, device: str):
    a, b = operand(SIZES[size], device), operand(SIZES[size], device)
    m1, m2 = operand(MM[size], device), operand(MM[size], device)
    image = operand(CONV[size], device)
    kernel = operand((CONV[size][1], CONV[size][1], 1, 1), device)
    return {
        "add": lambda: a + b,
        "mul": lambda: a * b,
        "relu": lambda: torch.relu(a),
        "sum": lambda: a.sum(),
        "mm": lambda: m1 @ m2,
        "conv2d": lambda: F.conv2d(image, kernel),
        "softmax": lambda: torch.softmax(a, -1),
    }


def training_step(build, make_batch, device: str):
    torch.manual_seed(0)
    model = build().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = (t.to(device) for t in make_batch())

    def step():
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
    return step


MODELS = {
    "MLP": (lambda: nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10)),
            lambda: (torch.randn(64, 256), torch.randint(0, 10, (64,)))),
    "CNN": (lambda: nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 16 * 16, 10)),
            lambda: (torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,)))),
    "Transformer": (lambda: nn.Sequential(
                        nn.TransformerEncoder(nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0,
                                                                         batch_first=True), 2),
                        nn.Flatten(), nn.Linear(64 * 16, 10)),
                    lambda: (torch.randn(8, 16, 64), torch.randint(0, 10, (8,)))),
}


KEEP_FREED_MEMORY = "glibc.malloc.mmap_threshold=268435456:glibc.malloc.trim_threshold=1073741824"


def restart_with_anchor_at_its_best() -> None:
    if "--glibc-defaults" in sys.argv or os.environ.get("GLIBC_TUNABLES") == KEEP_FREED_MEMORY:
        return
    os.environ["GLIBC_TUNABLES"] = KEEP_FREED_MEMORY  # read by the C library at start-up only
    os.execv(sys.executable, [sys.executable, *sys.argv])


def measure() -> dict:
    """One mode's results: name -> [openreg seconds, CPU seconds, ratio, target]."""
    torch.openreg.reset_fallback_counts()
    rows = {}
    for size, target, sample_seconds in (("1", 1.5, 0.005), ("1K", None, 0.005), ("1M", 1.05, 0.02)):
        cpu_cases, device_cases = op_cases(size, "cpu"), op_cases(size, "openreg")
        results = compare({name: (device_cases[name], cpu_cases[name]) for name in cpu_cases},
                          sample_seconds=sample_seconds)
        for name, result in results.items():
            rows[f"{name} {size}"] = [*result, target]
    steps = {name: (training_step(build, make_batch, "openreg"), training_step(build, make_batch, "cpu"))
             for name, (build, make_batch) in MODELS.items()}
    # 30 steps a sample, 11 pairs: long enough for a training loop's steady
    # state, in which the threads of both sides stay busy between steps.
    for name, result in compare(steps, inner=30, rounds=11).items():
        rows[f"training step {name}"] = [*result, 1.15]
    rows["executor calls"] = sum(sum(counts) for counts in torch.openreg.executor_counts().values())
    rows["fallback calls"] = sum(torch.openreg.fallback_counts().values())
    return rows


def run_mode(mode: str) -> dict:
    env = dict(os.environ, OPENREG_FAST_PATHS="0" if mode == "plain" else "1")
    child = subprocess.run([sys.executable, __file__, "--mode", mode, *sys.argv[1:]], env=env, check=True,
                           capture_output=True, text=True)
    return json.loads(child.stdout.splitlines()[-1])


def main() -> None:
    restart_with_anchor_at_its_best()
    if "--mode" in sys.argv:
        print(json.dumps(measure()))
        return
    print(f"GLIBC_TUNABLES={os.environ.get('GLIBC_TUNABLES', '(unset)')}")
    fast, plain = run_mode("fast"), run_mode("plain")
    print(f"{'case':<26}{'fast us':>10}{'ratio':>7}{'plain us':>11}{'ratio':>7}{'cpu us':>10}   target (fast)")
    for name, row in fast.items():
        if not isinstance(row, list):
            continue
        fast_time, cpu_time, fast_ratio, target = row
        plain_time, _, plain_ratio, _ = plain[name]
        goal = f"<= {target}" if target else ""
        print(f"{name:<26}{fast_time * 1e6:10.1f}{fast_ratio:7.2f}{plain_time * 1e6:11.1f}{plain_ratio:7.2f}"
              f"{cpu_time * 1e6:10.1f}   {goal}")
    for mode, rows in (("fast", fast), ("plain", plain)):
        print(f"{mode}: operator calls: {rows['executor calls']} by the device executor, "
              f"{rows['fallback calls']} through the CPU fallback")


if __name__ == "__main__":
    main()
