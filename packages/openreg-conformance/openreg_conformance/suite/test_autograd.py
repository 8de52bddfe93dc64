"""Required: autograd on the device.

The contracts: a model's gradients on the device match the CPU's; gradients
are usable right after backward() without a synchronization of the user's;
torch.autograd.grad and double backward work.
"""

from __future__ import annotations

import copy

import torch


def model_and_input():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                                torch.nn.Linear(32, 4))
    return model, torch.randn(8, 16)


def test_gradients_match_the_cpu(device):
    model, x = model_and_input()
    on_device = copy.deepcopy(model).to(device)
    model(x).pow(2).mean().backward()
    on_device(x.to(device)).pow(2).mean().backward()
    for (name, cpu_parameter), parameter in zip(model.named_parameters(), on_device.parameters(), strict=True):
        torch.testing.assert_close(parameter.grad.cpu(), cpu_parameter.grad, atol=1e-5, rtol=1e-4,
                                   msg=lambda m, name=name: f"contract: the gradient of {name} matches the CPU's: {m}")


def test_an_optimizer_step_matches_the_cpu(device):
    model, x = model_and_input()
    on_device = copy.deepcopy(model).to(device)
    for m, inputs in ((model, x), (on_device, x.to(device))):
        optimizer = torch.optim.AdamW(m.parameters(), lr=0.01)
        for _ in range(3):
            optimizer.zero_grad()
            m(inputs).pow(2).mean().backward()
            optimizer.step()
    for cpu_parameter, parameter in zip(model.parameters(), on_device.parameters(), strict=True):
        torch.testing.assert_close(parameter.detach().cpu(), cpu_parameter.detach(), atol=1e-5, rtol=1e-4)


def test_autograd_grad_and_double_backward(device):
    x = torch.linspace(-1, 1, 9, device=device, requires_grad=True)
    (first,) = torch.autograd.grad(x.pow(3).sum(), x, create_graph=True)
    (second,) = torch.autograd.grad(first.sum(), x)
    expected = 6 * torch.linspace(-1, 1, 9)
    torch.testing.assert_close(second.cpu(), expected, msg=lambda m: f"contract: double backward computes: {m}")
