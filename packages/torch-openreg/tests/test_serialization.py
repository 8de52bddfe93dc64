"""torch.save / torch.load of openreg tensors, modules and optimizer state,
every form of map_location, the backend meta (layout tag) and DLPack."""

from __future__ import annotations

import io

import pytest
import torch
import torch_openreg._C as _C
from torch.utils.dlpack import from_dlpack, to_dlpack


def _round_trip(obj, **load_kwargs):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, **load_kwargs)


def _saved(obj) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def _load(data: bytes, **kwargs):
    return torch.load(io.BytesIO(data), **kwargs)


def test_tensor_round_trip_keeps_device_and_values():
    cpu = torch.randn(4, 5)
    for device in ("openreg:0", "openreg:1"):
        loaded = _round_trip(cpu.to(device))
        assert loaded.device == torch.device(device)
        assert torch.equal(loaded.cpu(), cpu)


def test_views_and_shared_storage_survive():
    base = torch.arange(20, dtype=torch.float32).to("openreg")
    view = base[5:15:2]
    loaded_base, loaded_view = _round_trip((base, view))
    assert torch.equal(loaded_view.cpu(), view.cpu())
    assert loaded_view.stride() == view.stride()
    assert loaded_view.untyped_storage().data_ptr() == loaded_base.untyped_storage().data_ptr()
    loaded_base.copy_(torch.zeros(20))
    assert torch.equal(loaded_view.cpu(), torch.zeros(5))


def test_many_dtypes():
    tensors = {str(dtype): torch.arange(6).to(dtype).reshape(2, 3).to("openreg:1")
               for dtype in (torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.bool,
                             torch.complex64, torch.int64)}
    loaded = _round_trip(tensors)
    for key, tensor in tensors.items():
        assert loaded[key].dtype == tensor.dtype and loaded[key].device == tensor.device
        assert torch.equal(loaded[key].cpu(), tensor.cpu())


def test_map_location_forms():
    cpu = torch.randn(3, 3)
    data = _saved(cpu.to("openreg:0"))
    as_string = _load(data, map_location="openreg:1")
    as_device = _load(data, map_location=torch.device("openreg", 1))
    as_dict = _load(data, map_location={"openreg:0": "openreg:1"})
    as_callable = _load(data, map_location=lambda storage, location: storage.openreg(1))
    to_cpu = _load(data, map_location="cpu")
    to_cpu_device = _load(data, map_location=torch.device("cpu"))
    for loaded in (as_string, as_device, as_dict, as_callable):
        assert loaded.device == torch.device("openreg", 1)
        assert torch.equal(loaded.cpu(), cpu)
    for loaded in (to_cpu, to_cpu_device):
        assert loaded.device.type == "cpu" and torch.equal(loaded, cpu)
    # A dict that does not mention the location leaves the tensor where it was.
    untouched = _load(data, map_location={"openreg:1": "cpu"})
    assert untouched.device == torch.device("openreg", 0)
    # The callable sees the saved location.
    seen = []
    _load(data, map_location=lambda storage, location: seen.append(location) or storage)
    assert seen == ["openreg:0"]


def test_from_cpu_to_openreg_and_between_devices():
    cpu = torch.randn(2, 7)
    onto = _load(_saved(cpu), map_location="openreg")
    assert onto.device == torch.device("openreg", 0) and torch.equal(onto.cpu(), cpu)
    onto1 = _load(_saved(cpu), map_location={"cpu": "openreg:1"})
    assert onto1.device == torch.device("openreg", 1) and torch.equal(onto1.cpu(), cpu)
    back = _load(_saved(cpu.to("openreg:1")), map_location="openreg:0")
    assert back.device == torch.device("openreg", 0) and torch.equal(back.cpu(), cpu)


def test_map_location_onto_a_missing_device_is_a_clear_error():
    data = _saved(torch.ones(2, device="openreg"))
    with pytest.raises(RuntimeError, match=r"device 5.*device_count\(\) is 2"):
        _load(data, map_location="openreg:5")


def test_layout_tag_survives_a_round_trip():
    tagged = torch.randn(4).to("openreg")
    plain = torch.randn(4).to("openreg:1")
    _C._set_layout_tag(tagged, True)
    assert _C._get_layout_tag(tagged) and not _C._get_layout_tag(plain)
    loaded_tagged, loaded_plain = _round_trip([tagged, plain])
    assert _C._get_layout_tag(loaded_tagged)
    assert not _C._get_layout_tag(loaded_plain)
    assert torch.equal(loaded_tagged.cpu(), tagged.cpu())
    moved = _round_trip(tagged, map_location="openreg:1")
    assert moved.device.index == 1 and _C._get_layout_tag(moved)
    # An explicit "not tiled" tag is kept as such.
    _C._set_layout_tag(plain, False)
    assert not _C._get_layout_tag(_round_trip(plain))
    # Inside a container that torch.save pickles (a module's state_dict).
    module = torch.nn.Linear(2, 2).openreg()
    _C._set_layout_tag(module.weight, True)
    state = _round_trip(module.state_dict())
    assert _C._get_layout_tag(state["weight"]) and not _C._get_layout_tag(state["bias"])


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def test_module_state_dict_round_trip():
    model = _model().openreg(1)
    state = _round_trip(model.state_dict())
    assert all(t.device == torch.device("openreg", 1) for t in state.values())
    fresh = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    fresh.openreg(1).load_state_dict(state)
    x = torch.randn(3, 4)
    torch.testing.assert_close(fresh(x.openreg(1)).cpu(), _model()(x))
    on_cpu = _round_trip(model.state_dict(), map_location="cpu")
    assert all(t.device.type == "cpu" for t in on_cpu.values())


def test_whole_module_round_trip():
    model = _model().openreg()
    loaded = _round_trip(model, weights_only=False)
    assert isinstance(loaded, torch.nn.Sequential)
    assert all(p.device == torch.device("openreg", 0) for p in loaded.parameters())
    x = torch.randn(5, 4)
    torch.testing.assert_close(loaded(x.openreg()).cpu(), _model()(x))
    moved = _round_trip(model, weights_only=False, map_location="openreg:1")
    assert all(p.device == torch.device("openreg", 1) for p in moved.parameters())


def _sgd_step(model: torch.nn.Module, optimizer, x, y) -> None:
    optimizer.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()


# mse_loss reaches the CPU fallback as mse_loss.out, whose CPU kernel warns about
# resizing its out tensor (a PyTorch quirk of that out variant, harmless here).
@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
def test_optimizer_state_round_trip_matches_cpu_training():
    x, y = torch.randn(16, 4), torch.randn(16, 2)
    cpu_model = _model()
    cpu_opt = torch.optim.SGD(cpu_model.parameters(), lr=0.1, momentum=0.9)
    model = _model().openreg()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    _sgd_step(cpu_model, cpu_opt, x, y)
    _sgd_step(model, opt, x.openreg(), y.openreg())

    saved = _round_trip({"model": model.state_dict(), "optimizer": opt.state_dict()})
    for buffer_state in saved["optimizer"]["state"].values():
        assert buffer_state["momentum_buffer"].device == torch.device("openreg", 0)
    resumed = _model().openreg()
    resumed.load_state_dict(saved["model"])
    resumed_opt = torch.optim.SGD(resumed.parameters(), lr=0.1, momentum=0.9)
    resumed_opt.load_state_dict(saved["optimizer"])
    for cpu_state, state in zip(cpu_opt.state_dict()["state"].values(),
                                resumed_opt.state_dict()["state"].values(), strict=True):
        torch.testing.assert_close(state["momentum_buffer"].cpu(), cpu_state["momentum_buffer"])

    _sgd_step(cpu_model, cpu_opt, x, y)
    _sgd_step(resumed, resumed_opt, x.openreg(), y.openreg())
    for cpu_param, param in zip(cpu_model.parameters(), resumed.parameters(), strict=True):
        assert param.device == torch.device("openreg", 0)
        torch.testing.assert_close(param.detach().cpu(), cpu_param.detach())

    # Optimizer state can be loaded onto the other device and on CPU.
    on1 = _round_trip(opt.state_dict(), map_location="openreg:1")
    assert all(s["momentum_buffer"].device == torch.device("openreg", 1)
               for s in on1["state"].values())


def test_dlpack_round_trip():
    cpu = torch.randn(3, 4)
    for device in ("openreg:0", "openreg:1"):
        x = cpu.to(device)
        y = from_dlpack(to_dlpack(x))
        assert y.device == torch.device(device)
        assert torch.equal(y.cpu(), cpu)
        assert y.data_ptr() == x.data_ptr()  # shared, not copied
        z = torch.from_dlpack(to_dlpack(x))
        assert z.device == torch.device(device) and torch.equal(z.cpu(), cpu)
        # Strided views keep their strides; writes are visible through the original.
        view = from_dlpack(to_dlpack(x.t()[1:]))
        assert view.stride() == x.t()[1:].stride()
        view.copy_(torch.zeros(3, 3))
        expected = cpu.clone()
        expected.t()[1:] = 0
        assert torch.equal(x.cpu(), expected)


def test_dlpack_protocol_on_openreg_tensors():
    # torch.from_dlpack(tensor) goes through Tensor.__dlpack_device__.
    cpu = torch.randn(5)
    x = cpu.to("openreg:1")
    y = torch.from_dlpack(x)
    assert y.device == torch.device("openreg", 1)
    assert torch.equal(y.cpu(), cpu)


def test_backend_metadata_keeps_each_of_its_fields():
    # The fields PyTorch's reference-backend tests set, beside openreg's own
    # layout tag; a key openreg does not know is left out, not an error.
    t = torch.randn(3).to("openreg")
    torch._utils.set_tensor_metadata(t, {"version_number": True, "format_number": False, "unknown": True})
    assert torch._utils.get_tensor_metadata(t) == {"version_number": True, "format_number": False}
    _C._set_layout_tag(t, True)
    expected = {"version_number": True, "format_number": False, "openreg.tiled": True}
    assert torch._utils.get_tensor_metadata(t) == expected
    loaded = _round_trip(t)
    assert torch._utils.get_tensor_metadata(loaded) == expected
    assert torch._utils.get_tensor_metadata(torch.randn(2).to("openreg")) == {}
