"""The operator-registration scenarios of the guide (docs/operators/), part
two: an autograd.Function in C++, a per-operator fallback, Meta kernels,
overriding a composite operator, a fallthrough, a structured-style kernel,
Python kernels, and refusals made on the host. Part one, and how asynchrony
is checked, is in test_registration_scenarios.py.
"""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

_spec = importlib.util.spec_from_file_location("scenario_helpers", Path(__file__).with_name("scenario_helpers.py"))
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)
SAME_DEVICE, inputs, no_warnings, registered_at = (
    helpers.SAME_DEVICE, helpers.inputs, helpers.no_warnings, helpers.registered_at)


# ----------- 5. autograd.Function for AutogradPrivateUse1 (aten/AutogradFunction.cpp)


def test_swish_autograd_function_matches_cpu():
    assert "csrc/aten/scenarios/AutogradFunction.cpp" in registered_at("openreg::swish", "AutogradPrivateUse1")
    cpu, device = inputs(4, 5, dtype=torch.float64)
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
    cpu, device = inputs(5, dtype=torch.float64)
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
        assert "csrc/aten/scenarios/PerOperatorFallback.cpp" in registered_at(op, "PrivateUse1")
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
        assert "csrc/aten/scenarios/Meta.cpp" in registered_at(op, "Meta")
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
    _, device = inputs(2, 3)
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
    assert "csrc/aten/scenarios/CompositeOverride.cpp" in registered_at("aten::relu6", "PrivateUse1")
    assert "csrc/aten/scenarios/CompositeOverride.cpp" in registered_at("aten::relu6", "AutogradPrivateUse1")
    _, device = inputs(6)
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
    _, device = inputs(3)
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        torch.ops.aten.hardtanh_backward(device, device.to("openreg:1"), 0.0, 6.0)


# ------------------------------------------ 7. fallthrough (aten/Fallthrough.cpp)


def test_all_finite_falls_through_autograd():
    assert torch._C._dispatch_kernel_for_dispatch_key_is_fallthrough(
        "openreg::all_finite", "AutogradPrivateUse1")
    assert "csrc/aten/scenarios/Fallthrough.cpp" in registered_at("openreg::all_finite", "AutogradPrivateUse1")
    leaf = torch.randn(4, dtype=torch.float64).openreg().requires_grad_()
    with no_warnings():
        result = torch.ops.openreg.all_finite(leaf * 2)
    assert result.grad_fn is None and not result.requires_grad
    assert result.cpu().item() is True


# ----------------------- 7. structured-style kernel (aten/Structured.cpp)


def test_logit_variants_are_registered_here():
    for op in ("aten::logit.out", "aten::logit", "aten::logit_"):
        assert "csrc/aten/scenarios/Structured.cpp" in registered_at(op, "PrivateUse1")


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
    x, device = inputs(4)
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
    _, device = inputs(2)
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
