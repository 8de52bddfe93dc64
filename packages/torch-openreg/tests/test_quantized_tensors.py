"""PyTorch's legacy quantized tensors on openreg (csrc/aten/Quantized.cpp),
as CUDA has them: torch.quantize_per_tensor and quantize_per_channel into
qint8, quint8 and qint32, dequantize, int_repr, the qparams, copies and
views, each giving the CPU's integers bit for bit, with no operator falling
back to the CPU. And the dtypes the device reports as supported, checked
against what runs."""

from __future__ import annotations

import pytest
import torch
from torch.testing._internal.common_dtype import get_all_dtypes

pytestmark = pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning")

QUANTIZED_DTYPES = (torch.qint8, torch.quint8, torch.qint32)
SUB_BYTE_DTYPES = (torch.quint4x2, torch.quint2x4)  # quantized per tensor only, as on the CPU


@pytest.fixture(autouse=True)
def _no_cpu_fallback():
    torch.openreg.set_fallback_mode("error")
    torch.openreg.reset_fallback_counts()
    yield
    assert torch.openreg.fallback_counts() == {}
    torch.openreg.set_fallback_mode("silent")


def assert_same_quantized(on_device: torch.Tensor, on_cpu: torch.Tensor) -> None:
    assert on_device.device.type == "openreg" and on_device.dtype == on_cpu.dtype
    assert on_device.qscheme() == on_cpu.qscheme()
    torch.testing.assert_close(on_device.int_repr().cpu(), on_cpu.int_repr(), rtol=0, atol=0)
    torch.testing.assert_close(on_device.dequantize().cpu(), on_cpu.dequantize(), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", QUANTIZED_DTYPES)
def test_quantize_per_tensor_gives_the_cpu_s_integers(dtype):
    torch.manual_seed(0)
    x = torch.randn(6, 5) * 4
    for source in (x, x.t()):  # contiguous and transposed
        on_device = torch.quantize_per_tensor(source.to("openreg"), 0.05, 3, dtype)
        on_cpu = torch.quantize_per_tensor(source, 0.05, 3, dtype)
        assert (on_device.q_scale(), on_device.q_zero_point()) == (0.05, 3)
        assert_same_quantized(on_device, on_cpu)
    # Parameters given as tensors, as torch.ao's observers produce them.
    scale, zero_point = torch.tensor(0.1, device="openreg"), torch.tensor(1, device="openreg")
    assert_same_quantized(torch.quantize_per_tensor(x.to("openreg"), scale, zero_point, dtype),
                          torch.quantize_per_tensor(x, 0.1, 1, dtype))


@pytest.mark.parametrize("dtype", (torch.qint8, torch.quint8))
def test_quantize_per_channel_gives_the_cpu_s_integers(dtype):
    torch.manual_seed(0)
    x = torch.randn(4, 3, 5)
    scales, zero_points = torch.tensor([0.02, 0.1, 0.5], dtype=torch.float64), torch.tensor([0, 2, 5])
    on_cpu = torch.quantize_per_channel(x, scales, zero_points, 1, dtype)
    for where in ("cpu", "openreg"):  # the parameters may live on either side
        on_device = torch.quantize_per_channel(x.to("openreg"), scales.to(where), zero_points.to(where), 1, dtype)
        assert on_device.q_per_channel_axis() == 1
        torch.testing.assert_close(on_device.q_per_channel_scales().cpu(), on_cpu.q_per_channel_scales())
        torch.testing.assert_close(on_device.q_per_channel_zero_points().cpu(), on_cpu.q_per_channel_zero_points())
        assert_same_quantized(on_device, on_cpu)


def test_quantized_tensors_move_copy_and_view_as_on_the_cpu():
    x = torch.randn(4, 6)
    on_cpu = torch.quantize_per_tensor(x, 0.1, 2, torch.quint8)
    on_device = on_cpu.to("openreg")
    assert_same_quantized(on_device, on_cpu)
    assert on_device.q_scale() == 0.1 and on_device.cpu().q_zero_point() == 2
    # Views share the integers; clone copies them.
    assert_same_quantized(on_device.t(), on_cpu.t())
    assert_same_quantized(on_device[1:3, ::2], on_cpu[1:3, ::2])
    assert_same_quantized(on_device.view(6, 4), on_cpu.view(6, 4))
    assert_same_quantized(on_device.t().contiguous(), on_cpu.t().contiguous())
    # copy_ from a quantized tensor takes the source's parameters, as on the CPU.
    target = torch.quantize_per_tensor(torch.zeros(4, 6, device="openreg"), 0.5, 0, torch.quint8)
    target.copy_(on_device)
    assert (target.q_scale(), target.q_zero_point()) == (0.1, 2)
    assert_same_quantized(target, on_cpu)
    # copy_ from a float tensor quantizes with the destination's parameters.
    target.copy_(x.to("openreg"))
    assert_same_quantized(target, torch.quantize_per_tensor(x, 0.1, 2, torch.quint8))
    # Integers made into a quantized tensor.
    integers = torch.randint(0, 255, (3, 4), dtype=torch.uint8)
    assert_same_quantized(torch._make_per_tensor_quantized_tensor(integers.to("openreg"), 0.2, 7),
                          torch._make_per_tensor_quantized_tensor(integers, 0.2, 7))


def test_quantized_tensors_land_on_the_device_asked_for_whichever_is_current():
    # ATen's quantized kernels allocate on the current device: each runs with its arguments' device current.
    assert torch.openreg.device_count() >= 2 and torch.openreg.current_device() == 0
    x = torch.randn(4, 6)
    q_cpu = torch.quantize_per_tensor(x, 0.05, 3, torch.quint8)
    on_one = torch.quantize_per_tensor(x.to("openreg:1"), 0.05, 3, torch.quint8)
    moved = q_cpu.to("openreg:1")
    across = q_cpu.to("openreg:0").to("openreg:1")
    per_channel = torch.quantize_per_channel(x.to("openreg:1"), torch.rand(4) + 0.01, torch.zeros(4, dtype=torch.long),
                                             0, torch.qint8)
    module = torch.nn.Module()
    module.register_buffer("q", q_cpu)
    module.to("openreg:1")
    for q in (on_one, moved, across, per_channel, module.q):
        assert q.device == torch.device("openreg:1"), q.device
    for q in (on_one, moved, across, module.q):
        assert torch.equal(q.int_repr().cpu(), q_cpu.int_repr())
    assert torch.openreg.current_device() == 0


def test_per_channel_float_zero_points_give_the_cpu_s_integers():
    torch.manual_seed(0)
    x, scales, zero_points = torch.randn(4, 6), torch.rand(4) + 0.01, torch.randn(4) * 3
    on_cpu = torch.quantize_per_channel(x, scales, zero_points, 0, torch.quint8)
    on_device = torch.quantize_per_channel(x.to("openreg"), scales, zero_points, 0, torch.quint8)
    assert on_device.qscheme() == torch.per_channel_affine_float_qparams
    assert_same_quantized(on_device, on_cpu)


def test_a_saved_quantized_tensor_loads_onto_openreg(tmp_path):
    torch.manual_seed(0)
    saved = {"per_tensor": torch.quantize_per_tensor(torch.randn(3, 4), 0.1, 2, torch.qint8),
             "per_channel": torch.quantize_per_channel(torch.randn(3, 4), torch.rand(3) + 0.01,
                                                       torch.tensor([0, 1, 2]), 0, torch.quint8)}
    torch.save(saved, tmp_path / "quantized.pt")
    for device in ("openreg:0", "openreg:1"):
        loaded = torch.load(tmp_path / "quantized.pt", map_location=device)
        for name, original in saved.items():
            assert loaded[name].device == torch.device(device)
            assert_same_quantized(loaded[name], original)


def test_wrong_quantized_copies_are_refused_as_on_the_cpu():
    quantized = torch.quantize_per_tensor(torch.randn(4, device="openreg"), 0.1, 0, torch.qint8)
    with pytest.raises(RuntimeError, match="Copying from quantized Tensor to non-quantized Tensor is not allowed"):
        torch.zeros(4, device="openreg").copy_(quantized)
    other = torch.quantize_per_tensor(torch.randn(4, device="openreg"), 0.1, 0, torch.quint8)
    with pytest.raises(RuntimeError, match="same dtype"):
        other.copy_(quantized)


def _raised_by(action) -> Exception:
    with pytest.raises(Exception) as info:
        action()
    return info.value


def _underlying(dtype: torch.dtype) -> torch.dtype:
    return {torch.qint8: torch.int8, torch.quint8: torch.uint8, torch.qint32: torch.int32}[dtype]


def _zero_point_users(dtype, bad):
    """Each way a zero point reaches the arithmetic, as a function of the
    device of the data and of the device of the quantizer's parameters (a
    quantized tensor to dequantize keeps its parameters with its data)."""
    x = torch.randn(2, 3)
    integers = torch.zeros(2, 3, dtype=_underlying(dtype))
    scales, zero_points = torch.tensor([0.1, 0.2], dtype=torch.float64), torch.tensor([bad, 0])
    return {
        "quantize_per_channel": lambda data, params: torch.quantize_per_channel(
            x.to(data), scales.to(params), zero_points.to(params), 0, dtype),
        "dequantize_per_channel": lambda data, params: torch._make_per_channel_quantized_tensor(
            integers.to(data), scales.to(data), zero_points.to(data), 0).dequantize(),
        "quantize_per_tensor": lambda data, params: torch.quantize_per_tensor(
            x.to(data), torch.tensor(0.1).to(params), torch.tensor(bad).to(params), dtype),
        "dequantize_per_tensor": lambda data, params: torch._make_per_tensor_quantized_tensor(
            integers.to(data), 0.1, bad).dequantize(),
    }


@pytest.mark.parametrize("dtype, bad", [
    (torch.quint8, 300), (torch.quint8, -1), (torch.qint8, 128), (torch.qint8, -129), (torch.qint32, 1 << 31),
], ids=["quint8_above", "quint8_below", "qint8_above", "qint8_below", "qint32_above"])
@pytest.mark.parametrize("use", ["quantize_per_channel", "dequantize_per_channel", "quantize_per_tensor",
                                 "dequantize_per_tensor"])
@pytest.mark.parametrize("params", ["cpu", "openreg"])  # where the scales and zero points live
def test_out_of_range_zero_points_are_refused_as_on_the_cpu(dtype, bad, use, params):
    # The CPU refuses a zero point outside the quantized type's range; ATen
    # leaves that check to the device for per-channel quantizers (Note
    # [Per-channel zero points are checked on the host]), and CUDA clamps.
    on_cpu = _raised_by(lambda: _zero_point_users(dtype, bad)[use]("cpu", "cpu"))
    on_device = _raised_by(lambda: _zero_point_users(dtype, bad)[use]("openreg", params))
    assert type(on_device) is type(on_cpu)
    assert "zero_point" in str(on_cpu) and str(on_cpu) in str(on_device)
    # Refused on the host: nothing failed on the device.
    torch.openreg.synchronize()
    assert torch.quantize_per_tensor(torch.ones(2, device="openreg"), 1.0, 0, dtype).int_repr().tolist() == [1, 1]


@pytest.mark.parametrize("dtype", SUB_BYTE_DTYPES)
def test_sub_byte_quantized_dtypes_give_the_cpu_s_packed_integers(dtype):
    # Two or four values a byte; an odd count leaves the last byte partly filled.
    torch.manual_seed(0)
    x = torch.randn(5, 7)
    on_cpu = torch.quantize_per_tensor(x, 0.1, 3, dtype)
    assert_same_quantized(torch.quantize_per_tensor(x.to("openreg"), 0.1, 3, dtype), on_cpu)
    assert_same_quantized(on_cpu.to("openreg"), on_cpu)
    assert torch.equal(on_cpu.to("openreg").cpu().int_repr(), on_cpu.int_repr())


def test_quantizing_on_openreg_warns_of_the_deprecation_as_on_the_cpu(python):
    result = python.run("""
        import warnings
        import torch
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.quantize_per_tensor(torch.randn(4, device="openreg"), 0.1, 0, torch.qint8)
        print([str(w.message) for w in caught])
    """)
    assert "torch.quantize_per_tensor, torch.quantize_per_channel and other quantized tensor creation functions" \
        in result.stdout
    assert "are deprecated" in result.stdout


# LITERALINCLUDE START: SUPPORTED_DTYPES_CHECK
def test_the_supported_dtypes_are_those_that_run():
    supported = torch.accelerator.get_device_capability("openreg:0")["supported_dtypes"]
    plain = [d for d in supported if d not in QUANTIZED_DTYPES + SUB_BYTE_DTYPES]
    # Every supported dtype is made and converted to every other, on the
    # device as on the CPU (float8 and complex32 too).
    values = torch.tensor([0.0, 1.0, 2.5, -3.0, 64.0])
    for source in plain:
        start = values.abs().to(source) if not source.is_signed else values.to(source)
        for target in plain:
            expected = start.to(target)
            got = start.to("openreg").to(target)
            assert got.dtype == target
            torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0, equal_nan=True,
                                       msg=f"{source} -> {target}")
    assert set(QUANTIZED_DTYPES + SUB_BYTE_DTYPES) <= supported
    # What PyTorch's own test of a device's capability asks of it.
    assert set(get_all_dtypes(include_complex32=True, include_qint=True)) <= supported
    # What is left out converts nowhere: the CPU refuses it too.
    all_dtypes = {v for v in vars(torch).values() if isinstance(v, torch.dtype)}
    for left_out in all_dtypes - supported:
        with pytest.raises((RuntimeError, NotImplementedError)):
            values.to(left_out)
# LITERALINCLUDE END: SUPPORTED_DTYPES_CHECK
