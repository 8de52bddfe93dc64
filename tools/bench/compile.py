#!/usr/bin/env python3
"""Benchmark torch.compile on openreg, in one run: for the MLP, the CNN and
the Transformer of torch_ops.py, inference and a training step, compiled
openreg against eager openreg and against compiled CPU (Inductor), and
compiled CPU against eager CPU (the speed-up compilation gives the CPU
itself). Samples are paired as torch_ops.compare pairs them; a training
step is timed 30 to a sample, an inference 50.

Targets: compiled openreg <= 1.10x compiled CPU; compiled openreg faster
than eager openreg wherever compiled CPU is faster than eager CPU.

    .venv/bin/python tools/bench/compile.py [--glibc-defaults]
"""

import os
import tempfile

import torch
import torch.nn.functional as F
from torch_ops import MODELS, compare, restart_with_anchor_at_its_best

TRAIN_CALLS, INFER_CALLS = 30, 50


def inference(build, make_batch, device: str, compiled: bool):
    torch.manual_seed(0)
    model = build().to(device).eval()
    x = make_batch()[0].to(device)
    run = torch.compile(model) if compiled else model

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
    forward, update = (torch.compile(loss), torch.compile(optimizer.step)) if compiled else (loss, optimizer.step)

    def step():
        optimizer.zero_grad()
        forward().backward()
        update()
    return step


def warmed_up(fn):
    """fn, after one call: compiling happens here, not in the first sample."""
    fn()
    torch.openreg.synchronize()
    return fn


def measure() -> dict:
    """name -> (ratio compiled openreg / eager openreg, compiled openreg /
    compiled CPU, compiled CPU / eager CPU, compiled openreg seconds)."""
    rows = {}
    for kind, make, calls in (("inference", inference, INFER_CALLS), ("training step", training_step, TRAIN_CALLS)):
        fns = {}
        for name, (build, make_batch) in MODELS.items():
            try:
                fns[name] = {(device, compiled): warmed_up(make(build, make_batch, device, compiled))
                             for device in ("openreg", "cpu") for compiled in (True, False)}
            except Exception as error:  # a case that does not compile is reported, the others measured
                rows[f"{kind} {name}"] = f"{type(error).__name__}: {str(error).splitlines()[0][:80]}"
        against_eager = compare({name: (f["openreg", True], f["openreg", False]) for name, f in fns.items()},
                                inner=calls, rounds=11,
                                finish=(torch.openreg.synchronize, torch.openreg.synchronize))
        against_cpu = compare({name: (f["openreg", True], f["cpu", True]) for name, f in fns.items()},
                              inner=calls, rounds=11)
        # Both sides on the CPU; the openreg synchronisation after each sample finds nothing to wait for.
        cpu_gain = compare({name: (f["cpu", True], f["cpu", False]) for name, f in fns.items()},
                           inner=calls, rounds=11)
        for name in fns:
            rows[f"{kind} {name}"] = (against_eager[name][2], against_cpu[name][2], cpu_gain[name][2],
                                      against_cpu[name][0])
    return rows


def main() -> None:
    restart_with_anchor_at_its_best()
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="openreg-bench-inductor-"))
    print(f"GLIBC_TUNABLES={os.environ.get('GLIBC_TUNABLES', '(unset)')}")
    torch.openreg.reset_fallback_counts()
    rows = measure()
    print(f"{'case':<26}{'compiled us':>12}{'vs eager':>10}{'vs cpu-compiled':>17}{'cpu: compiled/eager':>21}"
          "   targets")
    for name, row in rows.items():
        if isinstance(row, str):
            print(f"{name:<26}compile failed: {row}")
            continue
        vs_eager, vs_cpu, cpu_gain, seconds = row
        met = vs_cpu <= 1.10 and (cpu_gain >= 1.0 or vs_eager < 1.0)
        print(f"{name:<26}{seconds * 1e6:12.1f}{vs_eager:10.2f}{vs_cpu:17.2f}{cpu_gain:21.2f}"
              f"   {'met' if met else 'MISSED'}")
    print(f"operator calls through the CPU fallback: {sum(torch.openreg.fallback_counts().values())}")


if __name__ == "__main__":
    main()
