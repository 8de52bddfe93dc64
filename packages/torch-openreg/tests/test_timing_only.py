"""Timing-only mode from PyTorch (torch.openreg.set_timing_only; the runtime's Note [Timing-only
mode]): programs run for their shapes, allocations and kernels, never for their values; whatever needs
a value raises, naming the operator and the mode; a device of any capacity exists on this machine, and
running out of it raises torch.OutOfMemoryError where the caching allocator would."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F


@pytest.fixture
def timing_only():
    torch.openreg.set_timing_only(True)
    try:
        yield
    finally:
        torch.openreg.set_timing_only(False)


def test_a_training_step_runs_for_its_shapes_and_kernels(timing_only):
    assert torch.openreg.is_timing_only()
    with torch.device("openreg"):
        model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    optimizer = torch.optim.AdamW(model.parameters())
    x, y = torch.randn(8, 32, device="openreg"), torch.randint(0, 4, (8,), device="openreg")
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    assert loss.shape == () and model[0].weight.grad.shape == (64, 32)
    assert len(optimizer.state) == 4 and optimizer.state[model[0].weight]["exp_avg"].device.type == "openreg"
    torch.openreg.synchronize()


@pytest.mark.parametrize("needs_a_value, names", [
    (lambda t: t.item(), "aten::_local_scalar_dense (.item()"),
    (lambda t: bool(t), "aten::_local_scalar_dense (.item(), or bool()"),
    (lambda t: t.cpu(), "a copy from an openreg tensor to the CPU"),
    (lambda t: print(t), "timing-only mode"),  # printing first looks for non-finite values
    (lambda t: torch.nonzero(t), "aten::nonzero (its output shape depends on the data"),
    (lambda t: t[t > 0], "(its output shape depends on the data"),
], ids=["item", "bool", "cpu", "print", "nonzero", "boolean index"])
def test_what_needs_a_value_raises_and_names_it(timing_only, needs_a_value, names):
    t = torch.ones(1, device="openreg")
    with pytest.raises(RuntimeError, match="timing-only mode") as failure:
        needs_a_value(t)
    assert names in str(failure.value) and "values of device memory" in str(failure.value)


def test_the_cpu_fallback_needs_values_too(timing_only):
    t = torch.ones(2, device="openreg")
    torch.openreg.set_device_executor_enabled(False)  # every operator without a kernel takes the fallback
    try:
        with pytest.raises(RuntimeError, match="aten::erfinv.*, which has no openreg kernel .* timing-only mode"):
            torch.erfinv(t)
    finally:
        torch.openreg.set_device_executor_enabled(True)


def test_switching_back_computes_values_again():
    torch.openreg.set_timing_only(True)
    skipped = torch.ones(4, device="openreg") * 3  # queued in timing-only mode: never computed
    torch.openreg.set_timing_only(False)
    computed = torch.ones(4, device="openreg") * 3
    assert computed.cpu().tolist() == [3.0] * 4
    del skipped


def test_a_device_of_a_profile_s_capacity_runs_out_where_the_allocator_would(python):
    # 80 GiB on this machine: parameters and activations are reserved, never touched; the allocator's
    # rounding and caching decide where it runs out, and the message gives capacity and usage.
    code = """
import resource, torch
held = [torch.empty(10 << 30, dtype=torch.uint8, device="openreg") for _ in range(7)]  # 70 GiB
try:
    torch.empty(12 << 30, dtype=torch.uint8, device="openreg")
except torch.OutOfMemoryError as error:
    message = str(error)
    print("OOM", "total capacity of 80 GiB" in message and "70 GiB is allocated" in message or message)
print(torch.openreg.memory_allocated() >> 30, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 20)
"""
    result = python.run(code, env={"OPENREG_TIMING_ONLY": "1", "OPENREG_DEVICE_MEMORY": "80GiB"})
    lines = result.stdout.split("\n")
    assert lines[0] == "OOM True", result.stdout
    allocated, resident_gib = map(int, lines[1].split())
    assert allocated == 70 and resident_gib < 2
