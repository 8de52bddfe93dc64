#!/usr/bin/env python3
"""Benchmark: one MLP training step on openreg while torch.profiler records
CPU and openreg (PrivateUse1) activity, against the same step with no
profiler, in one run. Prints the median time per step of each side and the
median ratio of paired samples: the profiler's overhead (aim: <= 1.5).

Samples come in pairs through torch_ops.compare (see its docstring): 30
steps then one synchronisation per sample, as a training loop runs. The
profiler is switched on before each profiled sample and off before each
unprofiled one, outside the timing (stopping includes processing the trace,
which a training run pays once, not per step).

    .venv/bin/python tools/bench/profiler_overhead.py
"""

import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_ops import MODELS, compare, training_step  # noqa: E402


class Switch:
    """Turns one profiler on and off between samples."""

    def __init__(self) -> None:
        self.profiler = None

    def on(self) -> None:
        torch.openreg.synchronize()
        if self.profiler is None:
            self.profiler = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])
            self.profiler.start()

    def off(self) -> None:
        torch.openreg.synchronize()
        if self.profiler is not None:
            self.profiler.stop()
            self.profiler = None


def main() -> None:
    build, make_batch = MODELS["MLP"]
    step = training_step(build, make_batch, "openreg")
    switch = Switch()
    results = compare({"MLP training step": (step, step)}, inner=30, rounds=11,
                      finish=(torch.openreg.synchronize, torch.openreg.synchronize),
                      settle=(switch.on, switch.off))
    switch.off()
    for name, (profiled, plain, ratio) in results.items():
        print(f"{name}: profiled {profiled * 1e6:.0f} us, not profiled {plain * 1e6:.0f} us, "
              f"overhead ratio {ratio:.2f} (aim <= 1.5)")


if __name__ == "__main__":
    main()
