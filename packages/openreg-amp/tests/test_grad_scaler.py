"""torch.amp.GradScaler("openreg") on the device kernels of openreg-amp: the
kernels match PyTorch's CPU kernels and never make the host wait; a step
skips on inf/nan and backs the scale off, the scale grows after
growth_interval clean steps, unscale_ allows clipping, the state round-trips,
and a whole GradScaler step blocks the host exactly once (its found_inf
.item(), as on CUDA)."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn


def _grads(device: str, poison: float | None = None) -> list[torch.Tensor]:
    torch.manual_seed(0)
    grads = [torch.randn(5, 3), torch.randn(7), torch.randn(2, 2).half()]
    if poison is not None:
        grads[1][3] = poison
    return [g.to(device) for g in grads]


@pytest.mark.parametrize("poison", [None, float("inf"), float("-inf"), float("nan")])
def test_unscale_kernel_matches_cpu(poison, count_synchronizations):
    results = {}
    for device in ("cpu", "openreg"):
        grads = _grads(device, poison)
        found_inf = torch.zeros(1, device=device)
        inv_scale = torch.full((1,), 0.25, device=device)
        _, blocked = count_synchronizations(
            lambda grads=grads, found_inf=found_inf, inv_scale=inv_scale:
                torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale))
        if device == "openreg":
            assert blocked == 0  # queued, not waited for
        results[device] = ([g.cpu() for g in grads], found_inf.cpu())
    (cpu_grads, cpu_found), (dev_grads, dev_found) = results["cpu"], results["openreg"]
    assert dev_found.item() == cpu_found.item() == (0.0 if poison is None else 1.0)
    for expected, actual in zip(cpu_grads, dev_grads, strict=True):
        torch.testing.assert_close(actual, expected, equal_nan=True)


def test_update_scale_kernel_matches_cpu_over_a_sequence(count_synchronizations):
    found_sequence = [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0]
    states = {}
    for device in ("cpu", "openreg"):
        scale = torch.full((1,), 1024.0, device=device)
        tracker = torch.zeros(1, dtype=torch.int32, device=device)
        history = []
        for found in found_sequence:
            found_inf = torch.full((1,), found, device=device)
            _, blocked = count_synchronizations(
                lambda scale=scale, tracker=tracker, found_inf=found_inf:
                    torch._amp_update_scale_(scale, tracker, found_inf, 2.0, 0.5, 3))
            assert device == "cpu" or blocked == 0
            history.append((scale.item(), tracker.item()))
        states[device] = history
    # growth_interval 3: two clean steps count up, the third doubles; an inf halves and resets.
    assert states["cpu"] == [(1024.0, 1), (1024.0, 2), (512.0, 0), (512.0, 1), (512.0, 2), (1024.0, 0),
                             (1024.0, 1), (512.0, 0), (256.0, 0), (256.0, 1)]
    assert states["openreg"] == states["cpu"]


def test_kernels_refuse_bad_operands_with_what_to_do():
    grads = _grads("openreg")
    with pytest.raises(RuntimeError, match="found_inf must be a float tensor"):
        torch._amp_foreach_non_finite_check_and_unscale_(grads, torch.zeros(1, device="openreg", dtype=torch.int32),
                                                         torch.ones(1, device="openreg"))
    with pytest.raises(RuntimeError, match="inv_scale must be a 1-element tensor"):
        torch._amp_foreach_non_finite_check_and_unscale_(grads, torch.zeros(1, device="openreg"),
                                                         torch.ones(2, device="openreg"))
    with pytest.raises(RuntimeError, match=r"expects scaled_grads\[1\] on openreg:0, but it is openreg:1"):
        torch._amp_foreach_non_finite_check_and_unscale_([grads[0], grads[1].to("openreg:1")],
                                                         torch.zeros(1, device="openreg"),
                                                         torch.ones(1, device="openreg"))
    with pytest.raises(RuntimeError, match="growth_tracker must be an int tensor"):
        torch._amp_update_scale_(torch.ones(1, device="openreg"), torch.zeros(1, device="openreg"),
                                 torch.zeros(1, device="openreg"), 2.0, 0.5, 3)
    # Nothing was queued by the refused calls, and the device still works.
    found_inf = torch.zeros(1, device="openreg")
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, torch.ones(1, device="openreg"))
    assert found_inf.item() == 0.0


# ----------------------------------------------------- GradScaler's behaviour


def _model_and_batch(device: str):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3)).to(device)
    x, y = torch.randn(8, 6).to(device), torch.randint(0, 3, (8,)).to(device)
    return model, x, y


def _scaled_backward(scaler, model, x, y, device: str) -> None:
    with torch.autocast(device, dtype=torch.float16 if device == "openreg" else torch.bfloat16):
        loss = nn.functional.cross_entropy(model(x), y)
    scaler.scale(loss).backward()


def test_inf_or_nan_in_one_gradient_skips_the_step_and_backs_off_the_scale():
    for poison in (float("inf"), float("nan")):
        model, x, y = _model_and_batch("openreg")
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler("openreg", init_scale=1024.0, backoff_factor=0.25)
        before = copy.deepcopy(model.state_dict())
        _scaled_backward(scaler, model, x, y, "openreg")
        model[2].weight.grad[1, 4] = poison
        scaler.step(optimizer)
        scaler.update()
        assert scaler.get_scale() == 256.0
        for name, value in model.state_dict().items():
            assert torch.equal(value.cpu(), before[name].cpu()), f"{name} changed in a skipped step"
        # The next clean step does update.
        optimizer.zero_grad()
        _scaled_backward(scaler, model, x, y, "openreg")
        scaler.step(optimizer)
        scaler.update()
        assert not torch.equal(model[0].weight.cpu(), before["0.weight"].cpu())
        assert scaler.get_scale() == 256.0


def test_in_timing_only_mode_no_gradient_overflows_and_the_optimizer_steps():
    """Timing-only mode computes no gradient (torch-openreg's Note [Values read in timing-only mode]):
    the non-finite check states found_inf = 0, so GradScaler takes the no-overflow path and steps, as
    a prediction of a mixed-precision training loop needs. Work over found_inf afterwards (the scale
    update) makes the stated value stale: a read then gets NaN."""
    model, x, y = _model_and_batch("openreg")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    steps = []
    step = optimizer.step
    optimizer.step = lambda *args, **kwargs: steps.append(1) or step(*args, **kwargs)
    scaler = torch.amp.GradScaler("openreg")
    torch.openreg.set_timing_only(True)
    try:
        for _ in range(2):
            _scaled_backward(scaler, model, x, y, "openreg")
            scaler.unscale_(optimizer)
            (found,) = scaler._found_inf_per_device(optimizer).values()
            assert found.item() == 0.0
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
        with pytest.warns(UserWarning, match="NaN stands for it"):
            assert found.item() != found.item()  # NaN: the scale update was queued over it
    finally:
        torch.openreg.set_timing_only(False)
    assert len(steps) == 2


def test_scale_grows_after_growth_interval_clean_steps():
    model, x, y = _model_and_batch("openreg")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("openreg", init_scale=16.0, growth_factor=2.0, growth_interval=3)
    scales = []
    for _ in range(7):
        optimizer.zero_grad()
        _scaled_backward(scaler, model, x, y, "openreg")
        scaler.step(optimizer)
        scaler.update()
        scales.append(scaler.get_scale())
    assert scales == [16.0, 16.0, 32.0, 32.0, 32.0, 64.0, 64.0]


def _clipped_steps(device: str, steps: int = 3):
    """SGD steps with unscale_ then gradient clipping, GradScaler on device."""
    model, x, y = _model_and_batch(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    scaler = torch.amp.GradScaler(device, init_scale=2.0**12)
    norms = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)  # float32: the same maths on both devices
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        norms.append(nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.05).item())
        scaler.step(optimizer)
        scaler.update()
    return model, norms


def test_unscale_before_clipping_matches_the_cpu():
    cpu_model, cpu_norms = _clipped_steps("cpu")
    dev_model, dev_norms = _clipped_steps("openreg")
    # The norms are of the unscaled gradients (a scaled norm would be ~4096x larger).
    assert dev_norms == pytest.approx(cpu_norms, rel=1e-5)
    assert max(cpu_norms) < 10.0
    for expected, actual in zip(cpu_model.parameters(), dev_model.parameters(), strict=True):
        torch.testing.assert_close(actual.detach().cpu(), expected.detach(), rtol=1e-5, atol=1e-6)


def test_state_dict_round_trips_and_training_continues_identically():
    model, x, y = _model_and_batch("openreg")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("openreg", init_scale=64.0, growth_interval=2)
    for _ in range(3):
        optimizer.zero_grad()
        _scaled_backward(scaler, model, x, y, "openreg")
        scaler.step(optimizer)
        scaler.update()
    state = scaler.state_dict()
    assert state == {"scale": 128.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2,
                     "_growth_tracker": 1}
    restored = torch.amp.GradScaler("openreg")
    restored.load_state_dict(state)
    assert restored.state_dict() == state
    for current in (scaler, restored):
        optimizer.zero_grad()
        _scaled_backward(current, model, x, y, "openreg")
        current.unscale_(optimizer)  # records a clean inf check, which update() reads
        current.update()
    assert restored.state_dict() == scaler.state_dict() == dict(state, scale=256.0, _growth_tracker=0)


@pytest.mark.parametrize("optimizer_class", ["SGD", "Adam", "AdamW"])
@pytest.mark.parametrize("implementation", ["foreach", "fused"])
def test_a_gradscaler_step_blocks_the_host_once_on_the_foreach_path(optimizer_class, implementation,
                                                                      count_synchronizations):
    model, x, y = _model_and_batch("openreg")
    optimizer = getattr(torch.optim, optimizer_class)(model.parameters(), lr=0.01,
                                                      **{implementation: True})
    scaler = torch.amp.GradScaler("openreg")

    def step():
        optimizer.zero_grad()
        _scaled_backward(scaler, model, x, y, "openreg")
        scaler.step(optimizer)
        scaler.update()

    step()  # the first step creates the scale and the optimizer state
    _, blocked = count_synchronizations(step)
    # foreach: the one found_inf.item() GradScaler makes before stepping, as on
    # CUDA. fused: the optimizer reads found_inf on the device, so GradScaler
    # never asks the host.
    assert blocked == (1 if implementation == "foreach" else 0)
