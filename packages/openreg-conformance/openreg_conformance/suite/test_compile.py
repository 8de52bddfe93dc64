"""Required: torch.compile's front end (Dynamo) on the device.

The contracts: a compiled model's outputs and gradients equal eager's on
the device, through Dynamo with the eager and aot_eager back ends (which
need nothing but the device's eager kernels).
"""

from __future__ import annotations

import copy

import pytest
import torch


def model_and_input(device):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8)).to(device)
    return model, torch.randn(4, 16, device=device)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_compiled_model_matches_eager(device, backend):
    torch._dynamo.reset()
    model, x = model_and_input(device)
    compiled = torch.compile(copy.deepcopy(model), backend=backend)
    expected, got = model(x), compiled(x)
    assert got.device == device
    torch.testing.assert_close(got.cpu(), expected.cpu(),
                               msg=lambda m: f"contract: torch.compile(backend={backend!r}) matches eager: {m}")
    expected.sum().backward()
    got.sum().backward()
    for a, b in zip(model.parameters(), compiled.parameters(), strict=True):
        torch.testing.assert_close(b.grad.cpu(), a.grad.cpu())


def test_dynamo_traces_device_apis(device, device_type):
    torch._dynamo.reset()

    def step(x):
        return (x * 2).to(device_type).sum()

    compiled = torch.compile(step, backend="eager", fullgraph=True)
    assert compiled(torch.ones(4)).item() == 8.0, (
        "contract: Dynamo traces a function moving tensors to the device without a graph break")
