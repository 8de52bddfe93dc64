"""Needs graphs: torch.accelerator.Graph capture and replay.

The contracts: work captured into a graph does not run at capture; each
replay runs it again, on the tensors captured, reading their current values.
"""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.conformance_capability("graphs")


def test_replay_runs_the_captured_work(device):
    x = torch.ones(8, device=device)
    torch.accelerator.synchronize()
    graph = torch.accelerator.Graph()
    with torch.Stream(device), graph:
        x.mul_(3)
    torch.accelerator.synchronize()
    assert x.cpu().tolist() == [1.0] * 8, "contract: captured work does not run at capture"
    graph.replay()
    graph.replay()
    torch.accelerator.synchronize()
    assert x.cpu().tolist() == [9.0] * 8, "contract: each replay runs the captured work again"
    graph.reset()


def test_replay_reads_the_captured_inputs(device):
    static_input = torch.zeros(4, device=device)
    graph = torch.accelerator.Graph()
    torch.accelerator.synchronize()
    with torch.Stream(device), graph:
        static_output = static_input * 2 + 1
    for value in (1.0, 5.0):
        static_input.fill_(value)
        graph.replay()
        torch.accelerator.synchronize()
        assert static_output.cpu().tolist() == [2 * value + 1] * 4, (
            "contract: a replay computes from the captured input tensor's current values")
    graph.reset()
