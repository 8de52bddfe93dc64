#!/usr/bin/env python3
"""Benchmark: host time per MLP training step replayed from a
torch.accelerator.Graph, against launching the same step eagerly, on
openreg, in one run. Prints the median host time per step of each and the
median ratio of paired samples (target: <= 0.5).

Host time: the time the calling thread spends queueing 20 steps; each
sample starts after the previous one's device work has finished (outside
the timing), so the stream worker does not compete for the core. Samples
come in pairs through torch_ops.compare (see its docstring).

    .venv/bin/python tools/bench/graph_replay.py
"""

import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_ops import MODELS, compare  # noqa: E402


def mlp_step():
    """One MLP training step over static tensors (gradients are zeroed in
    place, so the captured step keeps writing the same memory)."""
    build, make_batch = MODELS["MLP"]
    torch.manual_seed(0)
    model = build().to("openreg")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = (t.to("openreg") for t in make_batch())

    def step():
        optimizer.zero_grad(set_to_none=False)
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
    for _ in range(2):  # warm-up: gradients, optimizer state, every operator run once
        step()
    return step


def main() -> None:
    eager = mlp_step()
    graph = torch.accelerator.Graph()
    side = torch.Stream(device="openreg")
    side.wait_stream(torch.openreg.current_stream())
    with side:
        captured = mlp_step()
        with graph:
            captured()
    torch.openreg.current_stream().wait_stream(side)  # replays read what the warm-up wrote
    results = compare({"MLP training step": (graph.replay, eager)}, inner=20, rounds=21,
                      finish=(None, None), settle=(torch.openreg.synchronize, torch.openreg.synchronize))
    for name, (replayed, launched, ratio) in results.items():
        print(f"{name}: replayed {replayed * 1e6:.1f} us, eager {launched * 1e6:.1f} us of host time, "
              f"ratio {ratio:.3f} (target <= 0.5)")
    torch.openreg.synchronize()
    graph.reset()


if __name__ == "__main__":
    main()
