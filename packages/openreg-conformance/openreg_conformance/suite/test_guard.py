"""Needs two devices: the device guard, seen from Python.

The contracts: an operation on tensors of device 1 runs there without
changing the current device; device_index() switches and restores, nested;
each device has its own current stream; operands on two devices are
refused with an error naming both.
"""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.conformance_capability("multiple_devices")


def test_work_on_another_device_leaves_the_current_one(device_type):
    x = torch.ones(8, device=f"{device_type}:1")
    y = (x + 1).sum()
    assert y.device.index == 1, "contract: a result lands on its operands' device"
    assert y.item() == 16.0
    assert torch.accelerator.current_device_index() == 0, (
        "contract: the guard switches to the operands' device for the operation and switches back")


def test_nested_device_contexts_restore_each_level(device_type):
    torch.accelerator.set_device_index(1)
    with torch.accelerator.device_index(0):
        assert torch.accelerator.current_device_index() == 0
        with torch.accelerator.device_index(1):
            assert torch.accelerator.current_device_index() == 1
        assert torch.accelerator.current_device_index() == 0, "contract: the inner context restores the outer device"
    assert torch.accelerator.current_device_index() == 1, (
        "contract: leaving device_index(0) restores the device set before it (1)")


def test_each_device_has_its_own_current_stream(device_type):
    zero, one = torch.device(device_type, 0), torch.device(device_type, 1)
    stream, previous = torch.Stream(one), torch.accelerator.current_stream(one)
    torch.accelerator.set_stream(stream)
    try:
        assert torch.accelerator.current_stream(one) == stream, "contract: set_stream sets the stream of its device"
        assert torch.accelerator.current_device_index() == 1, (
            "contract: set_stream makes the stream's device current (torch.accelerator.set_stream's note)")
        assert torch.accelerator.current_stream(zero).device == zero, (
            "contract: setting device 1's stream leaves device 0's current stream on device 0")
    finally:
        torch.accelerator.set_stream(previous)
        torch.accelerator.set_device_index(0)


def test_operands_on_two_devices_are_refused(device_type):
    a, b = torch.ones(2, device=f"{device_type}:0"), torch.ones(2, device=f"{device_type}:1")
    with pytest.raises(RuntimeError, match="device"):
        a + b
    assert torch.accelerator.current_device_index() == 0


def test_copies_between_devices_carry_the_values(device_type):
    source = torch.arange(16.0, device=f"{device_type}:0")
    moved = source.to(f"{device_type}:1")
    assert moved.device.index == 1
    assert torch.equal(moved.cpu(), torch.arange(16.0)), "contract: a copy between devices carries every value"
