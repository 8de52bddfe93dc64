"""Needs DLPack: tensors exchanged with other libraries through DLPack.

The contracts: __dlpack_device__ names the device and its index; a round
trip through torch.from_dlpack shares the memory (a write through one is
seen through the other) and keeps shape, strides and values.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils import dlpack

pytestmark = pytest.mark.conformance_capability("dlpack")


def test_the_capsule_names_the_device_index(device_type):
    index = torch.accelerator.device_count() - 1
    tensor = torch.ones(3, device=f"{device_type}:{index}")
    _, device_id = tensor.__dlpack_device__()
    assert device_id == index, "contract: __dlpack_device__() gives the tensor's device index"


def test_a_round_trip_shares_memory(device):
    tensor = torch.arange(12.0, device=device).reshape(3, 4)
    again = torch.from_dlpack(dlpack.to_dlpack(tensor))
    assert again.device == device and again.shape == tensor.shape and again.stride() == tensor.stride()
    again[0, 0] = 100.0
    assert tensor[0, 0].item() == 100.0, "contract: a tensor from DLPack shares the exporter's memory"
    assert torch.equal(again.cpu(), tensor.cpu())
