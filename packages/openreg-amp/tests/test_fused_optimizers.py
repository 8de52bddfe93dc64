"""torch.optim.Adam/AdamW/SGD(fused=True) on openreg-amp's fused kernels:
they match the foreach implementation for 20 steps and PyTorch's fused CPU
kernels, take GradScaler's grad_scale and found_inf on the device, accept a
tensor learning rate, and refuse inconsistent operands on the host."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn

CONFIGS = {
    "Adam": (torch.optim.Adam, {"lr": 1e-2, "weight_decay": 0.01}),
    "Adam-amsgrad-maximize": (torch.optim.Adam, {"lr": 1e-2, "amsgrad": True, "maximize": True}),
    "AdamW": (torch.optim.AdamW, {"lr": 1e-2, "weight_decay": 0.1}),
    "AdamW-amsgrad": (torch.optim.AdamW, {"lr": 1e-2, "amsgrad": True}),
    "SGD": (torch.optim.SGD, {"lr": 0.05}),
    "SGD-momentum-nesterov": (torch.optim.SGD, {"lr": 0.05, "momentum": 0.9, "nesterov": True,
                                                "weight_decay": 0.01}),
    "SGD-momentum-dampening": (torch.optim.SGD, {"lr": 0.05, "momentum": 0.9, "dampening": 0.1}),
}


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 2))


def _train(model: nn.Module, optimizer, device: str, steps: int, scaler=None, poison_step: int | None = None):
    torch.manual_seed(1)
    batches = [(torch.randn(10, 6), torch.randn(10, 2)) for _ in range(steps)]
    for step, (x, y) in enumerate(batches):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
        (scaler.scale(loss) if scaler else loss).backward()
        if step == poison_step:
            model[0].bias.grad[0] = float("inf")
        if scaler:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()


def _assert_parameters_close(actual: nn.Module, expected: nn.Module, **tolerance) -> None:
    for (name, a), b in zip(actual.named_parameters(), expected.parameters(), strict=True):
        torch.testing.assert_close(a.detach().cpu(), b.detach().cpu(), **tolerance,
                                   msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_fused_matches_foreach_for_20_steps(config):
    optimizer_class, options = CONFIGS[config]
    models = {}
    for implementation in ("foreach", "fused"):
        model = _model().to("openreg")
        optimizer = optimizer_class(model.parameters(), **options, **{implementation: True})
        _train(model, optimizer, "openreg", steps=20)
        models[implementation] = model
    assert not torch.equal(models["fused"][0].weight.cpu(), _model()[0].weight)  # it trained
    _assert_parameters_close(models["fused"], models["foreach"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_fused_matches_the_fused_cpu_kernels(config):
    optimizer_class, options = CONFIGS[config]
    cpu_model, dev_model = _model(), _model().to("openreg")
    for model, device in ((cpu_model, "cpu"), (dev_model, "openreg")):
        _train(model, optimizer_class(model.parameters(), **options, fused=True), device, steps=5)
    _assert_parameters_close(dev_model, cpu_model, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("config", ["Adam", "AdamW", "SGD-momentum-nesterov"])
def test_fused_with_grad_scaler_skips_the_poisoned_step_like_foreach(config):
    optimizer_class, options = CONFIGS[config]
    models, scales = {}, {}
    for implementation in ("foreach", "fused"):
        model = _model().to("openreg")
        scaler = torch.amp.GradScaler("openreg", init_scale=256.0)
        optimizer = optimizer_class(model.parameters(), **options, **{implementation: True})
        _train(model, optimizer, "openreg", steps=6, scaler=scaler, poison_step=2)
        models[implementation], scales[implementation] = model, scaler.get_scale()
    assert scales["fused"] == scales["foreach"] == 128.0  # backed off once, never grew (interval 2000)
    _assert_parameters_close(models["fused"], models["foreach"], rtol=1e-5, atol=1e-6)


def test_tensor_learning_rate_on_the_cpu_and_on_the_device():
    for lr_device in ("cpu", "openreg"):
        params = [torch.ones(4, device="openreg")]
        grads = [torch.full((4,), 0.5, device="openreg")]
        lr = torch.tensor(0.1, device=lr_device)
        torch._fused_sgd_(params, grads, [], weight_decay=0.0, momentum=0.0, lr=lr, dampening=0.0,
                          nesterov=False, maximize=False, is_first_step=True)
        torch.testing.assert_close(params[0].cpu(), torch.full((4,), 0.95))
    model = _model().to("openreg")
    optimizer = torch.optim.AdamW(model.parameters(), lr=torch.tensor(1e-2), fused=True)
    reference = _model()
    _train(model, optimizer, "openreg", steps=3)
    _train(reference, torch.optim.AdamW(reference.parameters(), lr=1e-2, fused=True), "cpu", steps=3)
    _assert_parameters_close(model, reference, rtol=1e-6, atol=1e-7)


def test_fused_kernels_refuse_inconsistent_operands():
    params = [torch.zeros(3, device="openreg"), torch.zeros(2, device="openreg")]
    grads = [torch.ones(3, device="openreg"), torch.ones(2, device="openreg")]
    steps = [torch.ones((), device="openreg") for _ in params]  # the optimizer counts the step before the kernel
    state = [torch.zeros_like(p) for p in params]
    adam = {"lr": 0.1, "beta1": 0.9, "beta2": 0.999, "weight_decay": 0.0, "eps": 1e-8, "amsgrad": False,
            "maximize": False}
    with pytest.raises(RuntimeError, match="one tensor of grads per parameter: got 2 parameters and 1 grads"):
        torch._fused_adam_(params, grads[:1], state, copy.deepcopy(state), [], steps, **adam)
    with pytest.raises(RuntimeError, match=r"expects exp_avgs\[1\] on openreg:0, but it is cpu"):
        torch._fused_adamw_(params, grads, [state[0], state[1].cpu()], copy.deepcopy(state), [], steps, **adam)
    with pytest.raises(RuntimeError, match="with momentum=0 expects an empty momentum_buffer_list, got 2"):
        torch._fused_sgd_(params, grads, state, weight_decay=0.0, momentum=0.0, lr=0.1, dampening=0.0,
                          nesterov=False, maximize=False, is_first_step=True)
    # The parameters are untouched and the device still works.
    torch._fused_adam_(params, grads, state, copy.deepcopy(state), [], steps, **adam)
    assert params[0].cpu().tolist() == pytest.approx([-0.1] * 3, rel=1e-5)
