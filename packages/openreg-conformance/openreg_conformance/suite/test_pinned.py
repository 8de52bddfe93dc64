"""Needs pinned memory: page-locked host memory for the device.

The contracts: pin_memory() gives a tensor is_pinned() reports; a
non_blocking copy from it to the device and back carries the values once the
stream is synchronized.
"""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.conformance_capability("pinned_memory")


def test_pinned_tensors_report_it():
    pinned = torch.arange(8.0).pin_memory()
    assert pinned.is_pinned(), "contract: a tensor from pin_memory() reports is_pinned()"
    assert not torch.arange(8.0).is_pinned(), "contract: ordinary host memory is not pinned"


def test_asynchronous_copies_through_pinned_memory(device):
    source = torch.arange(4096.0).pin_memory()
    on_device = source.to(device, non_blocking=True)
    back = torch.empty(4096).pin_memory()
    back.copy_(on_device * 2, non_blocking=True)
    torch.accelerator.synchronize()
    assert torch.equal(back, torch.arange(4096.0) * 2), (
        "contract: non_blocking copies through pinned memory carry the values once synchronized")


def test_an_empty_pinned_tensor_can_be_made():
    assert torch.empty(16, pin_memory=True).is_pinned(), "contract: torch.empty(..., pin_memory=True) is pinned"
