#!/usr/bin/env python3
"""Benchmark an AMP training step on openreg against the same step on the CPU, in one run.

The step is torch_ops.py's Transformer (its MODELS entry) trained under
bfloat16 autocast with fused AdamW: openreg's runs openreg-amp's cast policy
and fused kernel, the CPU's runs PyTorch's CPU autocast and fused kernel.
Timing reuses torch_ops.py's paired samples (compare(): 30 steps a sample,
11 pairs, median of the per-pair ratios) and its restart with the CPU anchor
at its best. Target: ratio <= 1.15.

Also counts, through the runtime's tracing, how many times one
GradScaler step (float16 autocast, scale, backward, step, update) blocks
the host: with foreach AdamW (GradScaler's own found_inf.item(), as on
CUDA: target exactly 1) and with fused AdamW (found_inf read on the device).

    .venv/bin/python tools/bench/amp.py [--glibc-defaults]
"""

import os
import sys

import openreg_runtime
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_ops import MODELS, compare, restart_with_anchor_at_its_best  # noqa: E402

TARGET_RATIO = 1.15


def amp_training_step(device: str):
    """One bfloat16 autocast training step of the Transformer with fused AdamW on device."""
    build, make_batch = MODELS["Transformer"]
    torch.manual_seed(0)
    model = build().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    x, y = (t.to(device) for t in make_batch())

    def step():
        optimizer.zero_grad()
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    return step


def synchronizations_per_grad_scaler_step(implementation: str, steps: int = 10) -> float:
    build, make_batch = MODELS["Transformer"]
    torch.manual_seed(0)
    model = build().to("openreg")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, **{implementation: True})
    scaler = torch.amp.GradScaler("openreg")
    x, y = (t.to("openreg") for t in make_batch())

    def step():
        optimizer.zero_grad()
        with torch.autocast("openreg", dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    step()  # creates the scale and the optimizer state
    torch.openreg.synchronize()
    openreg_runtime.trace_enable(True)
    openreg_runtime.trace_drain()
    for _ in range(steps):
        step()
    activity = openreg_runtime.trace_drain()
    openreg_runtime.trace_enable(False)
    return sum(1 for record in activity if record["kind"] == "synchronize") / steps


def main() -> None:
    restart_with_anchor_at_its_best()
    print(f"GLIBC_TUNABLES={os.environ.get('GLIBC_TUNABLES', '(unset)')}")
    print(f"extensions: {torch.openreg.extensions()}")
    torch.openreg.reset_fallback_counts()
    steps = {"Transformer AMP step (bf16, fused AdamW)": (amp_training_step("openreg"), amp_training_step("cpu"))}
    print(f"{'case':<44}{'openreg us':>12}{'cpu us':>10}{'ratio':>7}   target")
    for name, (device_time, cpu_time, ratio) in compare(steps, inner=30, rounds=11).items():
        print(f"{name:<44}{device_time * 1e6:12.1f}{cpu_time * 1e6:10.1f}{ratio:7.2f}   <= {TARGET_RATIO}")
    print(f"operator calls through the CPU fallback: {sum(torch.openreg.fallback_counts().values())}")
    for implementation, target in (("foreach", "exactly 1"), ("fused", "")):
        count = synchronizations_per_grad_scaler_step(implementation)
        print(f"host synchronisations per GradScaler step ({implementation} AdamW): {count:g}"
              + (f"   target {target}" if target else ""))


if __name__ == "__main__":
    main()
