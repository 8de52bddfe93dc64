"""The operator-registration scenarios of the guide (docs/operators/
registration-scenarios.md), one section per scenario: results against the
CPU, where each operator is registered, device checks, refusals, and that
every kernel runs on the current stream without synchronising.

Asynchrony is checked two ways, never by timing: ``on_blocked_stream`` calls
the operator while a gate blocks the stream (a hidden synchronisation would
hold the call until the gate gives up, and the test fails), and
``activity_of`` records the runtime's trace of the call (kernels launched
by name; no synchronisation, no copy).
"""

from __future__ import annotations

import contextlib
import warnings

import openreg_runtime
import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

SAME_DEVICE = "Expected all tensors to be on the same device"


# ----------------------------------------------------------------- helpers


def registered_at(op: str, key: str) -> str:
    """Where the kernel of ``op`` for dispatch key ``key`` was registered."""
    for line in torch._C._dispatch_dump_table(op).splitlines():
        if line.startswith(f"{key}: "):
            return line
    raise AssertionError(f"{op} has no entry for {key}")


@pytest.fixture
def activity_of():
    """``activity_of(fn)`` runs fn with the runtime's tracing on and returns
    (fn's result, names of kernels it launched, other activity kinds)."""

    def record(fn):
        torch.openreg.synchronize()
        openreg_runtime.trace_enable(True)
        openreg_runtime.trace_drain()
        try:
            result = fn()
            activity = openreg_runtime.trace_drain()
        finally:
            openreg_runtime.trace_enable(False)
        kernels = [a["name"] for a in activity if a["kind"] == "launch"]
        others = {a["kind"] for a in activity} - {"launch", "kernel"}
        return result, kernels, others

    yield record
    openreg_runtime.trace_enable(False)
    openreg_runtime.trace_drain()


@pytest.fixture
def on_blocked_stream(gate):
    """``on_blocked_stream(fn)`` calls fn while a gate blocks the current
    stream, checks that fn returned without waiting for the stream, then
    opens the gate and returns fn's result."""

    def run(fn):
        stream = torch.openreg.current_stream()
        blocked = gate(stream)
        result = fn()
        assert not blocked.finished.is_set(), "the call waited for the stream"
        assert not stream.query()
        blocked.open()
        return result

    return run


@contextlib.contextmanager
def no_warnings():
    """A context in which any warning fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


# Inputs built on the host first: creating them copies, which synchronises.
def _x(*shape, dtype=torch.float32, device="openreg"):
    torch.manual_seed(0)
    cpu = torch.randn(*shape).to(dtype)
    return cpu, cpu.to(device)


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
    assert "csrc/aten/Stub.cpp" in registered_at("aten::abs.out", "PrivateUse1")
    assert "CompositeExplicitAutograd" in registered_at("aten::abs", "PrivateUse1")
    _, device = _x(8)
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
    _, device = _x(4)
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        torch.abs(device, out=torch.empty(4, device="openreg:1"))


def test_abs_runs_on_the_stream(on_blocked_stream):
    cpu, device = _x(6)
    result = on_blocked_stream(lambda: device.abs())
    torch.testing.assert_close(result.cpu(), cpu.abs())


# ------------------------ 3. custom operators in C++ (aten/CustomOps.cpp)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_swish_matches_cpu(dtype):
    cpu, device = _x(4, 5, dtype=dtype)
    torch.testing.assert_close(torch.ops.openreg.swish(device).cpu(), F.silu(cpu))
    grad = torch.randn(4, 5).to(dtype)
    expected = torch.ops.aten.silu_backward(grad, cpu)
    result = torch.ops.openreg.swish_backward(grad.openreg(), device)
    torch.testing.assert_close(result.cpu(), expected)
    strided = torch.ops.openreg.swish(device.t()[1:])
    torch.testing.assert_close(strided.cpu(), F.silu(cpu.t()[1:]))


def test_swish_on_second_device():
    cpu, device = _x(3, dtype=torch.float64, device="openreg:1")
    result = torch.ops.openreg.swish(device)
    assert result.device == torch.device("openreg", 1)
    torch.testing.assert_close(result.cpu(), F.silu(cpu))


def test_swish_refusals():
    with pytest.raises(RuntimeError, match="openreg::swish expects a floating-point tensor"):
        torch.ops.openreg.swish(torch.arange(3, device="openreg"))
    with pytest.raises(NotImplementedError, match="'openreg::swish' with arguments from the 'CPU'"):
        torch.ops.openreg.swish(torch.randn(3))
    _, device = _x(3)
    with pytest.raises(RuntimeError, match=SAME_DEVICE + r".*self is on openreg:1.*openreg::swish_backward"):
        torch.ops.openreg.swish_backward(device, device.to("openreg:1"))
    with pytest.raises(RuntimeError, match="grad_output shaped like self"):
        torch.ops.openreg.swish_backward(device[:2], device)


def test_openreg_namespace_is_defined_once_and_extended_by_fragments():
    def schema_from(op):
        return next(line for line in torch._C._dispatch_dump(op).splitlines()
                    if line.startswith("debug: "))

    assert "csrc/aten/CustomOps.cpp" in schema_from("openreg::swish")
    assert "csrc/aten/Fragment.cpp" in schema_from("openreg::all_finite")
    assert "torch_openreg/ops/fragment.py" in schema_from("openreg::scaled_add")
    names = {name for name in torch._C._dispatch_get_all_op_names() if name.startswith("openreg::")}
    assert names >= {"openreg::swish", "openreg::swish_backward", "openreg::all_finite",
                     "openreg::softclip", "openreg::softclip_backward", "openreg::scaled_add"}
    # A second definition of the namespace is refused, naming the first.
    with pytest.raises(RuntimeError, match=r"single TORCH_LIBRARY.*csrc/aten/CustomOps\.cpp"):
        torch.library.Library("openreg", "DEF")


# -------------------- 3. custom operators in Python (ops/custom_op.py)


def test_softclip_matches_cpu():
    cpu, device = _x(4, 5, dtype=torch.float64)
    torch.testing.assert_close(torch.ops.openreg.softclip(device, 1.5).cpu(), 1.5 * torch.tanh(cpu / 1.5))
    grad = torch.randn(4, 5, dtype=torch.float64)
    reference = cpu.clone().requires_grad_()
    (1.5 * torch.tanh(reference / 1.5)).backward(grad)
    result = torch.ops.openreg.softclip_backward(grad.openreg(), device, 1.5)
    torch.testing.assert_close(result.cpu(), reference.grad)


def test_softclip_autograd_matches_cpu():
    cpu, device = _x(6, dtype=torch.float64)
    leaf = device.clone().requires_grad_()
    torch.ops.openreg.softclip(leaf, 2.0).sum().backward()
    reference = cpu.clone().requires_grad_()
    (2.0 * torch.tanh(reference / 2.0)).sum().backward()
    torch.testing.assert_close(leaf.grad.cpu(), reference.grad)


def test_softclip_refusals():
    _, device = _x(3)
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
    _, device = _x(3, 4, dtype=torch.float64)
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
    _, device = _x(3)
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


# ----------- 5. autograd.Function for AutogradPrivateUse1 (aten/AutogradFunction.cpp)


def test_swish_autograd_function_matches_cpu():
    assert "csrc/aten/AutogradFunction.cpp" in registered_at("openreg::swish", "AutogradPrivateUse1")
    cpu, device = _x(4, 5, dtype=torch.float64)
    leaf = device.clone().requires_grad_()
    out = torch.ops.openreg.swish(leaf)
    assert "SwishFunction" in out.grad_fn.name()
    grad = torch.randn(4, 5, dtype=torch.float64)
    out.backward(grad.openreg())
    reference = cpu.clone().requires_grad_()
    F.silu(reference).backward(grad)
    torch.testing.assert_close(leaf.grad.cpu(), reference.grad)
    with torch.no_grad():
        assert torch.ops.openreg.swish(leaf).grad_fn is None
    with torch.inference_mode():
        torch.testing.assert_close(torch.ops.openreg.swish(leaf).cpu(), F.silu(cpu))


def test_swish_backward_runs_on_the_stream(on_blocked_stream, activity_of):
    cpu, device = _x(5, dtype=torch.float64)
    leaf = device.clone().requires_grad_()
    loss = torch.ops.openreg.swish(leaf)
    seed = torch.ones(5, dtype=torch.float64, device="openreg")
    _, kernels, others = activity_of(lambda: on_blocked_stream(lambda: loss.backward(seed)))
    assert "swish_backward" in kernels and not others
    reference = cpu.clone().requires_grad_()
    F.silu(reference).sum().backward()
    torch.testing.assert_close(leaf.grad.cpu(), reference.grad)


# ------------------- 6. per-operator fallback (aten/PerOperatorFallback.cpp)


def test_histc_is_sent_to_the_cpu_explicitly():
    for op in ("aten::histc", "aten::histc.out"):
        assert "csrc/aten/PerOperatorFallback.cpp" in registered_at(op, "PrivateUse1")
    cpu = torch.tensor([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])
    torch.openreg.reset_fallback_counts()
    result = torch.histc(cpu.openreg(), bins=4)
    assert result.device == torch.device("openreg", 0)
    assert torch.equal(result.cpu(), torch.histc(cpu, bins=4))
    out = torch.empty(0, device="openreg")
    torch.histc(cpu.openreg(), bins=4, out=out)
    assert torch.equal(out.cpu(), torch.histc(cpu, bins=4))
    counts = torch.openreg.fallback_counts()
    assert counts.get("aten::histc") == 1 and counts.get("aten::histc.out") == 1


def test_histc_obeys_the_fallback_mode():
    device = torch.tensor([0.0, 3.0]).openreg()
    torch.openreg.reset_fallback_counts()
    torch.openreg.set_fallback_mode("warn")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.histc(device, bins=2)
        torch.histc(device, bins=2)
    messages = [str(w.message) for w in caught if "openreg has no kernel" in str(w.message)]
    assert len(messages) == 1 and "aten::histc" in messages[0], messages
    torch.openreg.set_fallback_mode("error")
    with pytest.raises(NotImplementedError, match="aten::histc"):
        torch.histc(device, bins=2)


def test_histc_checks_devices():
    device = torch.tensor([0.0, 3.0]).openreg()
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        torch.histc(device, bins=2, out=torch.empty(0, device="openreg:1"))


# ------------------------------------------- 7. Meta kernels (aten/Meta.cpp)


def test_meta_kernels():
    for op in ("openreg::swish", "openreg::swish_backward", "openreg::all_finite"):
        assert "csrc/aten/Meta.cpp" in registered_at(op, "Meta")
    x = torch.empty(3, 5, dtype=torch.float64, device="meta")
    out = torch.ops.openreg.swish(x)
    assert out.device.type == "meta" and out.shape == (3, 5) and out.dtype == torch.float64
    assert torch.ops.openreg.swish_backward(x, x).shape == (3, 5)
    finite = torch.ops.openreg.all_finite(x)
    assert finite.shape == () and finite.dtype == torch.bool
    # The Meta kernels refuse what the device kernels refuse.
    with pytest.raises(RuntimeError, match="floating-point tensor"):
        torch.ops.openreg.swish(torch.empty(3, dtype=torch.int64, device="meta"))
    with pytest.raises(RuntimeError, match="grad_output shaped like self"):
        torch.ops.openreg.swish_backward(x[:2], x)


def test_fake_tensors_of_openreg_use_the_meta_kernels():
    _, device = _x(2, 3)
    with FakeTensorMode() as mode:
        fake = mode.from_tensor(device)
        out = torch.ops.openreg.swish(fake)
        assert out.device == torch.device("openreg", 0) and out.shape == (2, 3)
        assert torch.ops.openreg.scaled_add(fake, fake.new_empty(3, dtype=torch.float64)).dtype == \
            torch.float64


# --------------- 7. overriding a composite operator (aten/CompositeOverride.cpp)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.uint8])
def test_relu6_matches_cpu(dtype):
    cpu = (torch.randn(4, 5) * 8).to(dtype)
    torch.testing.assert_close(F.relu6(cpu.openreg()).cpu(), F.relu6(cpu))


def test_relu6_runs_one_kernel(activity_of):
    assert "csrc/aten/CompositeOverride.cpp" in registered_at("aten::relu6", "PrivateUse1")
    assert "csrc/aten/CompositeOverride.cpp" in registered_at("aten::relu6", "AutogradPrivateUse1")
    _, device = _x(6)
    torch.openreg.reset_fallback_counts()
    _, kernels, others = activity_of(lambda: F.relu6(device))
    assert kernels == ["relu6"] and not others
    assert torch.openreg.fallback_counts() == {}


def test_relu6_keeps_its_gradient():
    cpu = torch.randn(4, 5, dtype=torch.float64) * 8
    leaf = cpu.openreg().requires_grad_()
    with no_warnings():  # no "autograd kernel was not registered" warning
        out = F.relu6(leaf)
        (out * out).sum().backward()
    reference = cpu.clone().requires_grad_()
    (F.relu6(reference) ** 2).sum().backward()
    torch.testing.assert_close(leaf.grad.cpu(), reference.grad)
    assert "Relu6Function" in out.grad_fn.name()


def test_hardtanh_backward_matches_cpu():
    grad = torch.randn(3, 4)
    self = torch.randn(4, dtype=torch.float64) * 3  # broadcast, dtype promotion
    expected = torch.ops.aten.hardtanh_backward(grad, self, -1.0, 2.0)
    result = torch.ops.aten.hardtanh_backward(grad.openreg(), self.openreg(), -1.0, 2.0)
    assert result.dtype == expected.dtype == torch.float64
    torch.testing.assert_close(result.cpu(), expected)


def test_relu6_refusals():
    _, device = _x(3)
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        torch.ops.aten.hardtanh_backward(device, device.to("openreg:1"), 0.0, 6.0)


# ------------------------------------------ 7. fallthrough (aten/Fallthrough.cpp)


def test_all_finite_falls_through_autograd():
    assert torch._C._dispatch_kernel_for_dispatch_key_is_fallthrough(
        "openreg::all_finite", "AutogradPrivateUse1")
    assert "csrc/aten/Fallthrough.cpp" in registered_at("openreg::all_finite", "AutogradPrivateUse1")
    leaf = torch.randn(4, dtype=torch.float64).openreg().requires_grad_()
    with no_warnings():
        result = torch.ops.openreg.all_finite(leaf * 2)
    assert result.grad_fn is None and not result.requires_grad
    assert result.cpu().item() is True


# ----------------------- 7. structured-style kernel (aten/Structured.cpp)


def test_logit_variants_are_registered_here():
    for op in ("aten::logit.out", "aten::logit", "aten::logit_"):
        assert "csrc/aten/Structured.cpp" in registered_at(op, "PrivateUse1")


@pytest.mark.parametrize("eps", [None, 0.1])
def test_logit_variants_match_cpu(eps):
    cpu = torch.rand(4, 5, dtype=torch.float64)
    device = cpu.openreg()
    torch.testing.assert_close(torch.logit(device, eps).cpu(), torch.logit(cpu, eps))
    out = torch.empty(0, dtype=torch.float64, device="openreg")
    torch.logit(device, eps, out=out)
    torch.testing.assert_close(out.cpu(), torch.logit(cpu, eps))
    in_place = device.clone()
    assert in_place.logit_(eps) is in_place
    torch.testing.assert_close(in_place.cpu(), torch.logit(cpu, eps))


def test_logit_meta_step_matches_cpu():
    ints = torch.arange(3)
    result = torch.logit(ints.openreg())  # integers become the default float dtype
    assert result.dtype == torch.logit(ints).dtype == torch.float32
    torch.testing.assert_close(result.cpu(), torch.logit(ints), equal_nan=True)
    nhwc = torch.rand(2, 3, 4, 5).to(memory_format=torch.channels_last)
    assert torch.logit(nhwc.openreg()).stride() == torch.logit(nhwc).stride()
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
        ints.openreg().logit_()
    wrong_shape = torch.empty(2, device="openreg")
    with pytest.warns(UserWarning, match="An output with one or more elements was resized"):
        torch.logit(torch.rand(3).openreg(), out=wrong_shape)
    assert wrong_shape.shape == (3,)
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        torch.logit(torch.rand(3).openreg(), out=torch.empty(3, device="openreg:1"))


# --------------------------- 8. Python kernels (ops/python_kernel.py)


def test_scaled_add_kernel_is_the_python_one(activity_of):
    dump = torch._C._dispatch_dump("openreg::scaled_add")
    assert "PrivateUse1: registered at" in dump and "Meta: registered at" in dump
    x, device = _x(4)
    result, kernels, others = activity_of(lambda: torch.ops.openreg.scaled_add(device, device, alpha=3.0))
    assert kernels == ["scaled_add"] and not others
    torch.testing.assert_close(result.cpu(), 4 * x)


def test_python_kernel_errors_are_sticky_and_name_the_kernel(python):
    # In a child: a sticky error leaves the device unusable for the process.
    facts = python.json("""
        import json, torch
        from torch_openreg.ops.launch import launch_on_stream

        x = torch.tensor([1.0, -1.0]).to("openreg")

        def fail(view):  # a check of values: only the kernel can make it
            if (view < 0).any():
                raise ValueError("bad element")

        launch_on_stream("failing_kernel", [x], fail)
        try:
            torch.openreg.synchronize()
            print(json.dumps({"error": None}))
        except RuntimeError as error:
            print(json.dumps({"error": str(error)}))
    """)
    assert "failing_kernel" in facts["error"] and "ValueError: bad element" in facts["error"]


# ------- what the CPU code refuses is refused on the host, not on the device


@pytest.mark.parametrize(("call", "message"), [
    (lambda: torch.ones(2, dtype=torch.bool, device="openreg").abs(),
     "\"abs_cpu\" not implemented for 'Bool'"),
    (lambda: torch.ops.openreg.swish(torch.ones(2, device="openreg").to(torch.float8_e4m3fn)),
     "\"silu_cpu\" not implemented for 'Float8_e4m3fn'"),
    (lambda: F.relu6(torch.ones(2, dtype=torch.bool, device="openreg")),
     "Bool inputs not supported for hardtanh"),
    (lambda: torch.logit(torch.ones(2, dtype=torch.complex64, device="openreg")),
     "\"logit_cpu\" not implemented for 'ComplexFloat'"),
    (lambda: torch.ops.openreg.softclip(torch.ones(2, device="openreg").to(torch.float8_e4m3fn), 1.0),
     "not implemented for 'Float8_e4m3fn'"),
], ids=["abs", "swish", "relu6", "logit", "softclip"])
def test_refused_on_the_host_like_on_the_cpu(call, message):
    with pytest.raises((RuntimeError, NotImplementedError), match=message):
        call()
    torch.openreg.synchronize()  # no sticky error: the device is still usable
    _, device = _x(2)
    torch.testing.assert_close(device.abs().cpu(), device.cpu().abs())


# ------------------- every kernel runs on the current stream, asynchronously


_KERNEL_CALLS = {
    "abs": lambda x, y: x.abs(),
    "swish": lambda x, y: torch.ops.openreg.swish(x),
    "swish_backward": lambda x, y: torch.ops.openreg.swish_backward(y, x),
    "softclip": lambda x, y: torch.ops.openreg.softclip(x, 2.0),
    "softclip_backward": lambda x, y: torch.ops.openreg.softclip_backward(y, x, 2.0),
    "all_finite": lambda x, y: torch.ops.openreg.all_finite(x),
    "relu6": lambda x, y: F.relu6(x),
    "hardtanh_backward": lambda x, y: torch.ops.aten.hardtanh_backward(y, x, 0.0, 6.0),
    "logit": lambda x, y: torch.logit(x, 0.25),
    "logit.out": lambda x, y: torch.logit(x, 0.25, out=torch.empty_like(x)),
    "logit_": lambda x, y: x.clone().logit_(0.25),
    "scaled_add": lambda x, y: torch.ops.openreg.scaled_add(x, y, alpha=0.5),
}

_CPU_REFERENCES = {
    "abs": lambda x, y: x.abs(),
    "swish": lambda x, y: F.silu(x),
    "swish_backward": lambda x, y: torch.ops.aten.silu_backward(y, x),
    "softclip": lambda x, y: 2.0 * torch.tanh(x / 2.0),
    "softclip_backward": lambda x, y: y * (1 - torch.tanh(x / 2.0) ** 2),
    "all_finite": lambda x, y: torch.isfinite(x).all(),
    "relu6": lambda x, y: F.relu6(x),
    "hardtanh_backward": lambda x, y: torch.ops.aten.hardtanh_backward(y, x, 0.0, 6.0),
    "logit": lambda x, y: torch.logit(x, 0.25),
    "logit.out": lambda x, y: torch.logit(x, 0.25),
    "logit_": lambda x, y: torch.logit(x, 0.25),
    "scaled_add": lambda x, y: x + 0.5 * y,
}


@pytest.mark.parametrize("name", sorted(_KERNEL_CALLS))
@pytest.mark.parametrize("device", [0, 1])
def test_kernel_runs_on_the_current_stream(name, device, on_blocked_stream):
    torch.manual_seed(0)
    x, y = torch.rand(3, 4, dtype=torch.float64) * 8 - 1, torch.randn(3, 4, dtype=torch.float64)
    dx, dy = x.openreg(device), y.openreg(device)
    torch.openreg.synchronize(device)
    with torch.openreg.device(device), torch.openreg.stream(torch.openreg.Stream()):
        result = on_blocked_stream(lambda: _KERNEL_CALLS[name](dx, dy))
        assert result.device == torch.device("openreg", device)
        # Read back on the same stream: ordered after the kernel.
        torch.testing.assert_close(result.cpu(), _CPU_REFERENCES[name](x, y), equal_nan=True)
