"""Needs GradScaler: torch.amp.GradScaler on the device.

The contracts: a scaled step gives the parameters of an unscaled one;
a step whose gradients hold an inf is skipped and the scale backs off;
the scale grows after growth_interval clean steps.
"""

from __future__ import annotations

import copy

import pytest
import torch

pytestmark = pytest.mark.conformance_capability("grad_scaler")


def model_on(device):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)).to(device)


def test_a_scaled_step_matches_an_unscaled_one(device, device_type):
    model, x = model_on(device), torch.randn(16, 8, device=device)
    reference = copy.deepcopy(model)
    scaler = torch.amp.GradScaler(device_type, init_scale=2.0 ** 10)
    optimizer, reference_optimizer = (torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, reference))
    scaler.scale(model(x).pow(2).mean()).backward()
    scaler.step(optimizer)
    scaler.update()
    reference(x).pow(2).mean().backward()
    reference_optimizer.step()
    for got, expected in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(got.detach().cpu(), expected.detach().cpu(), atol=1e-6, rtol=1e-5,
                                   msg=lambda m: f"contract: a GradScaler step equals the unscaled step: {m}")
    assert scaler.get_scale() == 2.0 ** 10, "contract: a clean step before growth_interval keeps the scale"


def test_an_inf_gradient_skips_the_step_and_backs_off(device, device_type):
    model = model_on(device)
    before = [p.detach().clone() for p in model.parameters()]
    scaler = torch.amp.GradScaler(device_type, init_scale=2.0 ** 10, backoff_factor=0.5)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler.scale(model(torch.randn(4, 8, device=device)).sum()).backward()
    next(model.parameters()).grad[0, 0] = float("inf")
    scaler.step(optimizer)
    scaler.update()
    for old, parameter in zip(before, model.parameters(), strict=True):
        assert torch.equal(old.cpu(), parameter.detach().cpu()), (
            "contract: GradScaler.step skips optimizer.step when a gradient is not finite")
    assert scaler.get_scale() == 2.0 ** 9, "contract: a skipped step multiplies the scale by backoff_factor"


def test_the_scale_grows_after_growth_interval_clean_steps(device, device_type):
    model = model_on(device)
    scaler = torch.amp.GradScaler(device_type, init_scale=4.0, growth_factor=2.0, growth_interval=2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(2):
        optimizer.zero_grad()
        scaler.scale(model(torch.randn(4, 8, device=device)).sum()).backward()
        scaler.step(optimizer)
        scaler.update()
    assert scaler.get_scale() == 8.0, "contract: growth_interval clean steps multiply the scale by growth_factor"
