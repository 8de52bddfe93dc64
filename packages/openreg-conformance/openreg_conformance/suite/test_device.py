"""Required: the device as torch.accelerator presents it.

The contracts: the device type is the current accelerator; indices below
device_count() are usable and the next one is refused with an error naming
it; set_device_index and device_index() move the current device and restore
it; synchronize() returns only after the work queued before it is done.
"""

from __future__ import annotations

import pytest
import torch
from openreg_conformance.capabilities import device_capability


def test_the_device_is_the_current_accelerator(device_type):
    assert torch.accelerator.is_available(), "contract: torch.accelerator.is_available() is True"
    assert torch.accelerator.current_accelerator().type == device_type, (
        f"contract: torch.accelerator.current_accelerator() is the backend's device type {device_type!r}")


def test_every_index_below_the_count_is_usable(device_type):
    count = torch.accelerator.device_count()
    assert count >= 1, "contract: torch.accelerator.device_count() is at least 1 when the device is available"
    for index in range(count):
        tensor = torch.ones(4, device=f"{device_type}:{index}") * 2
        assert tensor.device == torch.device(device_type, index), f"contract: a tensor made on index {index} is there"
        assert tensor.cpu().tolist() == [2.0] * 4, f"contract: device {index} computes"


def test_an_index_past_the_count_is_refused(device_type):
    # The error's words are the backend's (CUDA's says "invalid device ordinal"); that it raises is the contract.
    count = torch.accelerator.device_count()
    with pytest.raises((RuntimeError, ValueError, AssertionError)):
        torch.empty(1, device=f"{device_type}:{count}")
    with pytest.raises((RuntimeError, ValueError, AssertionError)):
        torch.accelerator.set_device_index(count)
    assert torch.accelerator.current_device_index() == 0, "contract: a refused switch leaves the current device"


def needs_two_devices() -> int:
    """The last index, for a test that switches away from device 0."""
    if torch.accelerator.device_count() < 2:
        pytest.skip("the backend has 1 device; switching needs two")
    return torch.accelerator.device_count() - 1


def test_set_device_index_moves_the_current_device(device_type):
    last = needs_two_devices()
    torch.accelerator.set_device_index(last)
    assert torch.accelerator.current_device_index() == last, (
        f"contract: torch.accelerator.current_device_index() follows set_device_index({last})")
    assert torch.empty(1, device=device_type).device.index == last, (
        "contract: a tensor made without an index lands on the current device")
    torch.accelerator.set_device_index(0)
    assert torch.accelerator.current_device_index() == 0


def test_device_index_context_restores_the_device():
    last = needs_two_devices()
    with torch.accelerator.device_index(last):
        assert torch.accelerator.current_device_index() == last, (
            "contract: inside torch.accelerator.device_index(i), the current device is i")
    assert torch.accelerator.current_device_index() == 0, (
        "contract: torch.accelerator.device_index(i) restores the previous device on exit")


def test_synchronize_waits_for_queued_work(device, work):
    done = torch.Event(device)
    x = work.enqueue(work.ones())
    done.record()
    torch.accelerator.synchronize()
    assert done.query(), ("contract: torch.accelerator.synchronize() returns only once the work queued before it "
                          "has completed (an event recorded after the work is not complete)")
    assert x[0, :4].cpu().tolist() == [1.0] * 4


def test_the_device_module_agrees_with_torch_accelerator(device_type):
    module = torch.get_device_module(device_type)
    assert module.device_count() == torch.accelerator.device_count(), (
        "contract: the device module and torch.accelerator agree on the count")
    assert module.is_available()


def test_device_capability_is_a_mapping():
    capability, unreported = device_capability(0)
    if capability is None:
        pytest.skip(unreported)
    assert isinstance(capability, dict), "contract: get_device_capability() is a dict of what the device supports"
    assert "supported_dtypes" in capability, "contract: the capability names the supported dtypes"
