"""Needs Inductor: torch.compile with the backend's Inductor registration.

The contracts: a model compiled by Inductor for the device computes what
eager computes, forward and backward, and its outputs stay on the device.
"""

from __future__ import annotations

import copy

import pytest
import torch

pytestmark = pytest.mark.conformance_capability("inductor")


def test_inductor_matches_eager(device):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)).to(device)
    x = torch.randn(4, 16, device=device)
    compiled = torch.compile(copy.deepcopy(model))
    expected, got = model(x), compiled(x)
    assert got.device == device
    torch.testing.assert_close(got.cpu(), expected.cpu(), msg=lambda m: f"contract: Inductor matches eager: {m}")
    expected.sum().backward()
    got.sum().backward()
    for a, b in zip(model.parameters(), compiled.parameters(), strict=True):
        torch.testing.assert_close(b.grad.cpu(), a.grad.cpu(), msg=lambda m: f"contract: gradients match: {m}")
