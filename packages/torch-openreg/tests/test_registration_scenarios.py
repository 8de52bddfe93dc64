"""The operator-registration scenarios of the guide (docs/operators/), part
one: DispatchStub, custom operators in C++ and Python, tracing them with
torch.compile and torch.export, and fragments. Part two is
test_registration_overrides.py. Each section checks results against the CPU,
where each operator is registered, device checks, refusals, and that every
kernel runs on the current stream without synchronising.

Asynchrony is checked two ways, never by timing: ``on_blocked_stream`` calls
the operator while a gate blocks the stream (a hidden synchronisation would
hold the call until the gate gives up, and the test fails), and
``activity_of`` records the runtime's trace of the call (kernels launched
by name; no synchronisation, no copy); both are fixtures of conftest.py.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

_spec = importlib.util.spec_from_file_location("scenario_helpers", Path(__file__).with_name("scenario_helpers.py"))
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)
SAME_DEVICE, inputs, no_warnings, registered_at = (
    helpers.SAME_DEVICE, helpers.inputs, helpers.no_warnings, helpers.registered_at)


# ---------------------------------------- 2. DispatchStub (aten/Stub.cpp)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int32,
                                   torch.int64, torch.int8])
def test_abs_matches_cpu(dtype):
    cpu = (torch.randn(5, 6) * 10).to(dtype)
    device = cpu.openreg()
    torch.testing.assert_close(torch.abs(device).cpu(), torch.abs(cpu))
    torch.testing.assert_close(device.t()[1:4].abs().cpu(), cpu.t()[1:4].abs())  # strided
    in_place = device.clone().abs_()
    torch.testing.assert_close(in_place.cpu(), cpu.abs())
    out = torch.empty(0, dtype=dtype, device="openreg")
    torch.abs(device, out=out)
    assert out.shape == cpu.shape
    torch.testing.assert_close(out.cpu(), cpu.abs())


def test_abs_edge_shapes_and_second_device():
    for cpu in (torch.tensor(-2.5), torch.empty(0, 3), torch.randn(2, 1, 3)):
        result = cpu.openreg(1).abs()
        assert result.device == torch.device("openreg", 1)
        torch.testing.assert_close(result.cpu(), cpu.abs())


def test_abs_reaches_the_stub_kernel(activity_of):
    # abs.out is PyTorch's native abs_out, registered for PrivateUse1 in
    # Stub.cpp; abs and abs_ are PyTorch's composite kernels calling it.
    assert "csrc/aten/scenarios/Stub.cpp" in registered_at("aten::abs.out", "PrivateUse1")
    assert "CompositeExplicitAutograd" in registered_at("aten::abs", "PrivateUse1")
    _, device = inputs(8)
    torch.openreg.reset_fallback_counts()
    result, kernels, others = activity_of(lambda: device.abs())
    assert kernels == ["abs"] and not others  # the stub's kernel, on the stream
    assert torch.openreg.fallback_counts() == {}
    torch.testing.assert_close(result.cpu(), device.cpu().abs())


def test_abs_of_complex_takes_the_real_part_through_a_view():
    cpu = torch.randn(4, dtype=torch.complex64)
    torch.openreg.reset_fallback_counts()
    with no_warnings():  # view_as_real has a kernel: views cannot take the CPU fallback
        result = cpu.openreg().abs()
    assert result.dtype == torch.float32
    torch.testing.assert_close(result.cpu(), cpu.abs())
    assert torch.openreg.fallback_counts() == {}


def test_view_as_real_and_complex_are_views():
    cpu = torch.randn(3, dtype=torch.complex64)
    device = cpu.openreg()
    real = torch.view_as_real(device)
    assert real.shape == (3, 2) and real.untyped_storage().data_ptr() == device.untyped_storage().data_ptr()
    back = torch.view_as_complex(real)
    assert back.dtype == torch.complex64 and back.data_ptr() == device.data_ptr()
    torch.testing.assert_close(real.cpu(), torch.view_as_real(cpu))


def test_abs_checks_devices():
    _, device = inputs(4)
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        torch.abs(device, out=torch.empty(4, device="openreg:1"))


def test_abs_runs_on_the_stream(on_blocked_stream):
    cpu, device = inputs(6)
    result = on_blocked_stream(lambda: device.abs())
    torch.testing.assert_close(result.cpu(), cpu.abs())


# ------------------------ 3. custom operators in C++ (aten/CustomOps.cpp)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_swish_matches_cpu(dtype):
    cpu, device = inputs(4, 5, dtype=dtype)
    torch.testing.assert_close(torch.ops.openreg.swish(device).cpu(), F.silu(cpu))
    grad = torch.randn(4, 5).to(dtype)
    expected = torch.ops.aten.silu_backward(grad, cpu)
    result = torch.ops.openreg.swish_backward(grad.openreg(), device)
    torch.testing.assert_close(result.cpu(), expected)
    strided = torch.ops.openreg.swish(device.t()[1:])
    torch.testing.assert_close(strided.cpu(), F.silu(cpu.t()[1:]))


def test_swish_on_second_device():
    cpu, device = inputs(3, dtype=torch.float64, device="openreg:1")
    result = torch.ops.openreg.swish(device)
    assert result.device == torch.device("openreg", 1)
    torch.testing.assert_close(result.cpu(), F.silu(cpu))


def test_swish_refusals():
    with pytest.raises(RuntimeError, match="openreg::swish expects a floating-point tensor"):
        torch.ops.openreg.swish(torch.arange(3, device="openreg"))
    with pytest.raises(NotImplementedError, match="'openreg::swish' with arguments from the 'CPU'"):
        torch.ops.openreg.swish(torch.randn(3))
    _, device = inputs(3)
    with pytest.raises(RuntimeError, match=SAME_DEVICE + r".*self is on openreg:1.*openreg::swish_backward"):
        torch.ops.openreg.swish_backward(device, device.to("openreg:1"))
    with pytest.raises(RuntimeError, match="grad_output shaped like self"):
        torch.ops.openreg.swish_backward(device[:2], device)


def test_openreg_namespace_is_defined_once_and_extended_by_fragments():
    def schema_from(op):
        return next(line for line in torch._C._dispatch_dump(op).splitlines()
                    if line.startswith("debug: "))

    assert "csrc/aten/scenarios/CustomOps.cpp" in schema_from("openreg::swish")
    assert "csrc/aten/scenarios/Fragment.cpp" in schema_from("openreg::all_finite")
    assert "torch_openreg/ops/fragment.py" in schema_from("openreg::scaled_add")
    names = {name for name in torch._C._dispatch_get_all_op_names() if name.startswith("openreg::")}
    assert names >= {"openreg::swish", "openreg::swish_backward", "openreg::all_finite",
                     "openreg::softclip", "openreg::softclip_backward", "openreg::scaled_add"}
    # A second definition of the namespace is refused, naming the first.
    with pytest.raises(RuntimeError, match=r"single TORCH_LIBRARY.*csrc/aten/scenarios/CustomOps\.cpp"):
        torch.library.Library("openreg", "DEF")


# -------------------- 3. custom operators in Python (ops/custom_op.py)


def test_softclip_matches_cpu():
    cpu, device = inputs(4, 5, dtype=torch.float64)
    torch.testing.assert_close(torch.ops.openreg.softclip(device, 1.5).cpu(), 1.5 * torch.tanh(cpu / 1.5))
    grad = torch.randn(4, 5, dtype=torch.float64)
    reference = cpu.clone().requires_grad_()
    (1.5 * torch.tanh(reference / 1.5)).backward(grad)
    result = torch.ops.openreg.softclip_backward(grad.openreg(), device, 1.5)
    torch.testing.assert_close(result.cpu(), reference.grad)


def test_softclip_autograd_matches_cpu():
    cpu, device = inputs(6, dtype=torch.float64)
    leaf = device.clone().requires_grad_()
    torch.ops.openreg.softclip(leaf, 2.0).sum().backward()
    reference = cpu.clone().requires_grad_()
    (2.0 * torch.tanh(reference / 2.0)).sum().backward()
    torch.testing.assert_close(leaf.grad.cpu(), reference.grad)


def test_softclip_refusals():
    _, device = inputs(3)
    with pytest.raises(RuntimeError, match="expects limit > 0"):
        torch.ops.openreg.softclip(device, 0.0)
    with pytest.raises(RuntimeError, match="expects a floating-point tensor"):
        torch.ops.openreg.softclip(torch.arange(3, device="openreg"), 1.0)
    with pytest.raises(NotImplementedError):
        torch.ops.openreg.softclip(torch.randn(3), 1.0)
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        torch.ops.openreg.softclip_backward(device, device.to("openreg:1"), 1.0)


@pytest.mark.parametrize("function", [
    lambda t: torch.ops.openreg.swish(t),
    lambda t: torch.ops.openreg.softclip(t, 1.5),
    lambda t: F.relu6(t * 4),
], ids=["swish", "softclip", "relu6"])
def test_gradcheck_in_float64_on_openreg(function):
    _, device = inputs(3, 4, dtype=torch.float64)
    assert torch.autograd.gradcheck(function, (device.requires_grad_(),))


# ------------------------- torch.compile and torch.export of custom ops


def _pipeline(x, y):
    a = torch.ops.openreg.swish(x)
    b = torch.ops.openreg.softclip(a, 2.0)
    c = torch.ops.openreg.scaled_add(b, y, alpha=0.5)
    d = F.relu6(c * 3)
    return d, torch.ops.openreg.all_finite(d)


def _pipeline_on_cpu(x, y):
    return F.relu6((2.0 * torch.tanh(F.silu(x) / 2.0) + 0.5 * y) * 3)


def _differentiable(x):
    return F.relu6(torch.ops.openreg.softclip(torch.ops.openreg.swish(x), 2.0) * 4)


def _differentiable_on_cpu(x):
    return F.relu6(2.0 * torch.tanh(F.silu(x) / 2.0) * 4)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compile_traces_the_custom_ops(backend):
    torch._dynamo.reset()
    x, y = torch.randn(3, 4, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    compiled = torch.compile(_pipeline, fullgraph=True, backend=backend)
    result, finite = compiled(x.openreg(), y.openreg())
    torch.testing.assert_close(result.cpu(), _pipeline_on_cpu(x, y))
    assert finite.cpu().item() is True
    # Backward through the custom ops' autograd (C++ and Python).
    differentiable = torch.compile(_differentiable, fullgraph=True, backend=backend)
    leaf = x.openreg().requires_grad_()
    differentiable(leaf).sum().backward()
    reference = x.clone().requires_grad_()
    _differentiable_on_cpu(reference).sum().backward()
    torch.testing.assert_close(leaf.grad.cpu(), reference.grad)


def test_export_traces_the_custom_ops():
    class Model(torch.nn.Module):
        def forward(self, x, y):
            return _pipeline(x, y)

    x, y = torch.randn(3, 4), torch.randn(4)
    exported = torch.export.export(Model(), (x.openreg(), y.openreg()))
    targets = {str(node.target) for node in exported.graph.nodes if node.op == "call_function"}
    assert {"openreg.swish.default", "openreg.softclip.default", "openreg.scaled_add.default",
            "openreg.all_finite.default", "aten.relu6.default"} <= targets
    result, finite = exported.module()(x.openreg(), y.openreg())
    torch.testing.assert_close(result.cpu(), _pipeline_on_cpu(x, y))
    assert finite.cpu().item() is True


# ----------------------- 4. fragments (aten/Fragment.cpp, ops/fragment.py)


def test_all_finite():
    cases = [torch.randn(5), torch.tensor([1.0, float("inf")]), torch.tensor([float("nan")]),
             torch.arange(4), torch.empty(0), torch.tensor(3.0, dtype=torch.float64)]
    for cpu in cases:
        result = torch.ops.openreg.all_finite(cpu.openreg())
        assert result.shape == () and result.dtype == torch.bool
        assert result.device == torch.device("openreg", 0)
        assert result.cpu().item() == bool(torch.isfinite(cpu).all())


def test_scaled_add_matches_cpu():
    x, y = torch.randn(3, 4), torch.randn(4, dtype=torch.float64)
    result = torch.ops.openreg.scaled_add(x.openreg(), y.openreg(), alpha=-2.5)
    assert result.dtype == torch.float64 and result.shape == (3, 4)
    torch.testing.assert_close(result.cpu(), torch.add(x, y, alpha=-2.5))
    on1 = torch.ops.openreg.scaled_add(x.openreg(1), x.openreg(1))
    assert on1.device == torch.device("openreg", 1)
    torch.testing.assert_close(on1.cpu(), 2 * x)


def test_scaled_add_refusals():
    _, device = inputs(3)
    leaf = device.clone().requires_grad_()
    with pytest.raises(NotImplementedError, match="openreg::scaled_add has no gradient"):
        torch.ops.openreg.scaled_add(leaf, device).sum().backward()
    with pytest.raises(RuntimeError, match="expects floating-point tensors"):
        torch.ops.openreg.scaled_add(device, torch.arange(3, device="openreg"))
    with pytest.raises(RuntimeError, match=SAME_DEVICE + r", but got y is on openreg:1, different "
                       r"from other tensors on openreg:0 \(when checking argument in method "
                       r"openreg::scaled_add\)"):
        torch.ops.openreg.scaled_add(device, device.to("openreg:1"))
    with pytest.raises(RuntimeError, match=SAME_DEVICE + r".*y is on cpu"):
        torch.ops.openreg.scaled_add(device, torch.ones(3))
