"""Required: torch.save and torch.load of tensors on the device.

The contracts: a tensor saved on the device loads there with its values;
map_location moves it to the CPU or to another index; views of one storage
still share it after loading; and, when the backend keeps metadata of its
own on tensors (torch._utils.set_tensor_metadata), it survives the round trip.
"""

from __future__ import annotations

import io

import pytest
import torch


def round_trip(value, **load_args):
    buffer = io.BytesIO()
    torch.save(value, buffer)
    buffer.seek(0)
    return torch.load(buffer, **load_args)


def test_a_tensor_loads_on_its_device_with_its_values(device):
    original = torch.arange(64.0, device=device).reshape(8, 8)
    loaded = round_trip(original)
    assert loaded.device == device, "contract: torch.load puts a tensor back on the device it was saved from"
    assert torch.equal(loaded.cpu(), original.cpu()), "contract: the loaded tensor has the saved values"


def test_map_location_moves_the_tensor(device, device_type):
    original = torch.arange(10.0, device=device)
    on_cpu = round_trip(original, map_location="cpu")
    assert on_cpu.device.type == "cpu" and torch.equal(on_cpu, torch.arange(10.0)), (
        "contract: map_location='cpu' loads a device tensor on the CPU")
    from_cpu = round_trip(torch.arange(10.0), map_location=device)
    assert from_cpu.device == device, "contract: map_location=device loads a CPU tensor on the device"
    if torch.accelerator.device_count() > 1:
        other = round_trip(original, map_location=f"{device_type}:1")
        assert other.device.index == 1, "contract: map_location names the index the tensor lands on"


def test_views_of_one_storage_still_share_it(device):
    base = torch.zeros(16, device=device)
    loaded_base, loaded_view = round_trip([base, base[4:8]])
    loaded_view.fill_(3)
    assert loaded_base[4:8].cpu().tolist() == [3.0] * 4, (
        "contract: two views of one storage, saved together, share one storage after loading")


def test_a_module_state_dict_round_trips(device):
    model = torch.nn.Linear(4, 3).to(device)
    state = round_trip(model.state_dict())
    fresh = torch.nn.Linear(4, 3).to(device)
    fresh.load_state_dict(state)
    for name, value in model.state_dict().items():
        assert torch.equal(fresh.state_dict()[name].cpu(), value.cpu()), f"contract: {name} survives save and load"


# The fields PyTorch's own tests of backend metadata set (test_openreg.py).
METADATA = {"version_number": True, "format_number": True}


def test_backend_metadata_survives_save_and_load(device):
    tensor = torch.ones(4, device=device)
    torch._utils.set_tensor_metadata(tensor, METADATA)
    kept = torch._utils.get_tensor_metadata(tensor)
    if not kept:
        pytest.skip("the backend keeps no metadata of its own on tensors (torch._utils.set_tensor_metadata)")
    assert kept == METADATA, f"contract: get_tensor_metadata gives back what set_tensor_metadata set; got {kept}"
    loaded = round_trip(tensor)
    assert torch._utils.get_tensor_metadata(loaded) == METADATA, (
        "contract: the backend's tensor metadata is saved with the tensor and restored by torch.load "
        f"(saved {METADATA}, loaded {torch._utils.get_tensor_metadata(loaded)})")
