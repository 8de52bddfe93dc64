"""Copies: host to device, device to host, within a device and between the
two devices, blocking and non_blocking, for dense and strided (transposed,
sliced, expanded) sources and destinations, with dtype conversions, zero-size
tensors, and .item(). Every result is compared with the same copy on CPU."""

from __future__ import annotations

import threading

import openreg_runtime
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

HYPOTHESIS = settings(max_examples=75, deadline=None, database=None, derandomize=True,
                      suppress_health_check=[HealthCheck.function_scoped_fixture,
                                             HealthCheck.too_slow])

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
          torch.int8, torch.uint8, torch.bool]
LOCATIONS = ["cpu", "pinned", "openreg:0", "openreg:1"]


def _values(shape, dtype, seed) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    base = torch.randint(-100, 100, shape, generator=generator).to(torch.float64) / 4
    if dtype == torch.bool:
        return base > 0
    if dtype == torch.uint8:
        return base.abs().to(dtype)
    return base.to(dtype)


def _place(t: torch.Tensor, location: str) -> torch.Tensor:
    if location == "cpu":
        return t.clone()
    if location == "pinned":
        return t.pin_memory()
    return t.to(location)


def _base_shape(shape: tuple[int, ...], kind: str) -> tuple[int, ...]:
    """Shape of the tensor whose `kind` view (see _view) has `shape`."""
    if not shape or kind == "dense":
        return shape
    if kind == "transposed":
        return (shape[-1],) + shape[1:-1] + (shape[0],) if len(shape) > 1 else shape
    if kind == "sliced":
        return tuple(2 * n + 1 for n in shape)
    if kind == "expanded":
        return shape[:-1] + (1,)
    raise AssertionError(kind)


def _view(base: torch.Tensor, shape: tuple[int, ...], kind: str) -> torch.Tensor:
    """A strided view of base with the given shape: the same view on every device."""
    if not shape or kind == "dense":
        return base
    if kind == "transposed":
        return base.transpose(0, -1)
    if kind == "sliced":
        return base[(slice(1, None, 2),) * base.dim()]  # offset and strides of 2
    if kind == "expanded":
        return base.expand(*shape)
    raise AssertionError(kind)


def _pair(shape, kind, dtype, location, seed=None):
    """(view at location, the same view of the same values on CPU, both bases)."""
    base_shape = _base_shape(shape, kind)
    values = torch.zeros(base_shape, dtype=dtype) if seed is None else \
        _values(base_shape, dtype, seed)
    placed = _place(values, location)
    device_view, cpu_view = _view(placed, shape, kind), _view(values, shape, kind)
    assert device_view.shape == cpu_view.shape == torch.Size(shape)
    return device_view, cpu_view, placed, values


def _sync() -> None:
    torch.openreg.synchronize(0)
    torch.openreg.synchronize(1)


shapes = st.lists(st.integers(0, 5), min_size=0, max_size=3).map(tuple)
SOURCE_LAYOUTS = ["dense", "transposed", "sliced", "expanded"]
DESTINATION_LAYOUTS = ["dense", "transposed", "sliced"]  # never write through an expand


@HYPOTHESIS
@given(shape=shapes, src_dtype=st.sampled_from(DTYPES), dst_dtype=st.sampled_from(DTYPES),
       src_at=st.sampled_from(LOCATIONS), dst_at=st.sampled_from(LOCATIONS),
       src_layout=st.sampled_from(SOURCE_LAYOUTS), dst_layout=st.sampled_from(DESTINATION_LAYOUTS),
       non_blocking=st.booleans(), seed=st.integers(0, 2**16))
def test_copy_matches_cpu(shape, src_dtype, dst_dtype, src_at, dst_at, src_layout, dst_layout,
                          non_blocking, seed):
    source, source_cpu, _, _ = _pair(shape, src_layout, src_dtype, src_at, seed)
    destination, expected, destination_base, expected_base = \
        _pair(shape, dst_layout, dst_dtype, dst_at)
    expected.copy_(source_cpu)
    result = destination.copy_(source, non_blocking=non_blocking)
    assert result is destination
    _sync()
    # The whole destination storage: the view's elements copied, the rest untouched.
    assert torch.equal(destination_base.cpu(), expected_base)
    assert torch.equal(source.cpu(), source_cpu)  # the source is unchanged


@HYPOTHESIS
@given(shape=shapes, dtype=st.sampled_from(DTYPES), target=st.sampled_from(DTYPES),
       start=st.sampled_from(LOCATIONS), end=st.sampled_from(["cpu", "openreg:0", "openreg:1"]),
       layout=st.sampled_from(SOURCE_LAYOUTS), non_blocking=st.booleans(),
       seed=st.integers(0, 2**16))
def test_to_matches_cpu(shape, dtype, target, start, end, layout, non_blocking, seed):
    x, cpu, _, _ = _pair(shape, layout, dtype, start, seed)
    y = x.to(end, dtype=target, non_blocking=non_blocking)
    _sync()
    assert y.device == torch.device(end) and y.dtype == target
    assert y.shape == cpu.shape
    assert torch.equal(y.cpu(), cpu.to(target))


@pytest.mark.parametrize("non_blocking", [False, True])
def test_between_devices(non_blocking):
    cpu = torch.randn(64, 33)
    on0 = cpu.to("openreg:0")
    on1 = on0.to("openreg:1", non_blocking=non_blocking)
    assert on1.device == torch.device("openreg", 1)
    back = on1.to("openreg:0", non_blocking=non_blocking)
    assert torch.equal(on1.cpu(), cpu) and torch.equal(back.cpu(), cpu)
    # Strided, converting, into an existing tensor of the other device.
    target = torch.zeros(33, 64, dtype=torch.float64, device="openreg:1")
    target.copy_(on0.t(), non_blocking=non_blocking)
    torch.openreg.synchronize(1)
    assert torch.equal(target.cpu(), cpu.t().double())
    target[::2, 1::3].copy_(on0[:42:2, :17].t(), non_blocking=non_blocking)
    reference = cpu.t().double().clone()
    reference[::2, 1::3] = cpu[:42:2, :17].t().double()
    torch.openreg.synchronize(1)
    assert torch.equal(target.cpu(), reference)


def test_between_devices_with_current_device_elsewhere():
    cpu = torch.arange(1000, dtype=torch.int32)
    on1 = cpu.to("openreg:1")
    with torch.openreg.device(0):
        dst = torch.empty(1000, dtype=torch.int32, device="openreg:0")
        dst.copy_(on1)
    with torch.openreg.device(1):
        assert torch.equal(dst.cpu(), cpu)


def test_within_device_copies():
    cpu = torch.randn(5, 6, 7)
    x = cpu.to("openreg")
    y = torch.empty(5, 6, 7, device="openreg")
    y.copy_(x)
    assert torch.equal(y.cpu(), cpu)
    z = torch.empty(7, 6, 5, device="openreg")
    z.copy_(x.permute(2, 1, 0))
    assert torch.equal(z.cpu(), cpu.permute(2, 1, 0))
    w = torch.zeros(5, 6, 7, dtype=torch.float16, device="openreg")
    w[:, ::2].copy_(x[:, 1::2])
    expected = torch.zeros(5, 6, 7, dtype=torch.float16)
    expected[:, ::2] = cpu[:, 1::2].half()
    assert torch.equal(w.cpu(), expected)
    assert torch.equal(x.clone().cpu(), cpu)
    assert torch.equal(x.permute(2, 0, 1).contiguous().cpu(), cpu.permute(2, 0, 1).contiguous())


def test_broadcasting_copy_into_a_larger_tensor():
    row = torch.arange(4, dtype=torch.float32)
    on_device = torch.zeros(3, 4, device="openreg")
    on_device.copy_(row)  # host row broadcast over device rows
    assert torch.equal(on_device.cpu(), row.expand(3, 4))
    again = torch.zeros(3, 4, device="openreg:1")
    again.copy_(on_device[0])
    assert torch.equal(again.cpu(), row.expand(3, 4))


@pytest.mark.parametrize("location", ["openreg:0", "openreg:1"])
def test_zero_size_tensors(location):
    for shape in [(0,), (0, 3), (4, 0, 2)]:
        cpu = torch.empty(shape)
        x = cpu.to(location)
        assert x.shape == shape and x.device == torch.device(location)
        assert x.cpu().shape == shape
        if len(shape) == 2:
            assert x.t().cpu().shape == cpu.t().shape
        y = torch.empty(shape, dtype=torch.int64, device=location)
        y.copy_(x)
        y.copy_(cpu)
        cpu.copy_(y)
        assert x.to(torch.float16).shape == shape
        assert x.to("openreg:0" if location.endswith("1") else "openreg:1").shape == shape
    assert torch.empty(0, device=location).data_ptr() == 0


@pytest.mark.parametrize("dtype, value", [
    (torch.float32, 1.5), (torch.float64, -2.25), (torch.float16, 0.5), (torch.bfloat16, 3.0),
    (torch.int8, -7), (torch.uint8, 200), (torch.int16, 1234), (torch.int32, -123456),
    (torch.int64, 2**40 + 3), (torch.bool, True), (torch.complex64, 1 + 2j),
])
def test_item(dtype, value):
    for device in ("openreg:0", "openreg:1"):
        t = torch.tensor([0, value, 0], dtype=dtype).to(device)
        item = t[1].item()
        assert item == torch.tensor(value, dtype=dtype).item()
        assert type(item) is type(torch.tensor(value, dtype=dtype).item())
    # One-element tensors of any rank, with a storage offset, or strided.
    on_device = torch.tensor([[0, value], [value, 0]], dtype=dtype).to("openreg")
    expected = torch.tensor(value, dtype=dtype).item()
    assert on_device[1:, :1].item() == expected
    assert on_device[0, 1:].item() == expected
    assert on_device.t()[:1, 1:].item() == expected
    with pytest.raises(RuntimeError, match="a Tensor with 4 elements cannot be converted"):
        on_device.item()


def test_item_waits_for_queued_work(gate):
    stream = torch.openreg.current_stream()
    x = torch.zeros(1, device="openreg")
    value = torch.full((1,), 42.0)
    g = gate(stream)
    x.copy_(value.pin_memory(), non_blocking=True)  # behind the gate
    opener = threading.Timer(0.05, g.open)
    opener.start()
    assert x.item() == 42.0  # waits for the copy, not just the call
    opener.join()


def test_non_blocking_copy_between_streams_needs_synchronisation(gate):
    # Work on a non-current stream is ordered only after synchronising; once
    # synchronised the data is there.
    side = torch.openreg.Stream()
    source = torch.arange(10_000, dtype=torch.float32, device="openreg")
    side.wait_stream(torch.openreg.current_stream())
    g = gate(side)
    with torch.openreg.stream(side):
        copy = source.to(torch.float64, non_blocking=True)
    g.open()
    torch.openreg.current_stream().wait_stream(side)
    assert torch.equal(copy.cpu(), torch.arange(10_000, dtype=torch.float64))
    copy.record_stream(torch.openreg.current_stream())
    source.record_stream(side)


@pytest.mark.parametrize("non_blocking", [False, True])
def test_copying_out_of_a_faulted_device_reports_its_error(non_blocking):
    # As on CUDA, where the copy runs on the faulted device: the half-written
    # result must not reach another device silently.
    x = torch.empty(8, device="openreg:0")
    x.random_(5, 2)  # from >= to: the kernel fails on the device
    with pytest.raises(RuntimeError, match="kernel 'random_' failed"):
        torch.openreg.synchronize(0)
    try:
        with pytest.raises(RuntimeError, match="kernel 'random_' failed"):
            x.to("openreg:1", non_blocking=non_blocking)
        torch.openreg.synchronize(1)  # the destination device is not faulted
    finally:
        with torch.openreg.device(0):
            openreg_runtime.device_reset()
