"""The host fast path of add, sub, mul, div and clamp_min (Pointwise.cpp):
same results as the CPU whether an operation takes it or the general route,
and the general route's errors for everything the fast path declines."""

from __future__ import annotations

import pytest
import torch

OPERATIONS = {
    "add": lambda a, b: torch.add(a, b, alpha=3),
    "sub": lambda a, b: torch.sub(a, b, alpha=2),
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "relu": lambda a, b: torch.relu(a),
    "clamp_min": lambda a, b: torch.clamp_min(a, -0.25),
}


def executor_calls(prefix: str) -> int:
    return sum(sum(c) for name, c in torch.openreg.executor_counts().items() if name.startswith(prefix))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_fast_path_matches_cpu_and_skips_the_executor(name, dtype):
    a, b = torch.randn(3, 7).to(dtype), torch.randn(3, 7).to(dtype) + 3
    torch.openreg.reset_fallback_counts()  # and the executor's counts
    result = OPERATIONS[name](a.to("openreg"), b.to("openreg"))
    assert executor_calls("aten::") == 0  # queued without the executor
    assert result.device.type == "openreg" and result.dtype == dtype
    torch.testing.assert_close(result.cpu(), OPERATIONS[name](a, b))


DECLINED = {
    "broadcast": (torch.randn(3, 7), torch.randn(7)),
    "promotion": (torch.randn(3, 7), torch.randn(3, 7, dtype=torch.float64)),
    "integers": (torch.randint(1, 9, (3, 7)), torch.randint(1, 9, (3, 7))),
    "strided": (torch.randn(7, 3).t(), torch.randn(3, 7)),
}


@pytest.mark.parametrize("case", sorted(DECLINED))
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div"])
def test_declined_operands_take_the_general_route(name, case):
    a, b = DECLINED[case]
    torch.openreg.reset_fallback_counts()  # and the executor's counts
    result = OPERATIONS[name](a.to("openreg"), b.to("openreg"))
    assert executor_calls(f"aten::{name}") == 1
    torch.testing.assert_close(result.cpu(), OPERATIONS[name](a, b))


def test_python_scalars_and_in_place_forms_still_work():
    a = torch.randn(4, 4)
    x = a.to("openreg")
    torch.testing.assert_close((x * 2.5 + 1).cpu(), a * 2.5 + 1)
    x.mul_(x).clamp_min_(0.5)
    torch.testing.assert_close(x.cpu(), (a * a).clamp_min(0.5))


def test_gradients_flow_through_the_fast_path():
    a, b = torch.randn(5, 5), torch.randn(5, 5) + 3
    grads = {}
    for device in ("cpu", "openreg"):
        x, y = (t.to(device).detach().requires_grad_() for t in (a, b))
        (torch.relu(x * y - x / y) + x).sum().backward()
        grads[device] = (x.grad.cpu(), y.grad.cpu())
    torch.testing.assert_close(grads["openreg"], grads["cpu"])


def test_operands_on_two_devices_get_the_same_device_error():
    x, y = torch.ones(3, device="openreg:0"), torch.ones(3, device="openreg:1")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        x + y


def test_an_openreg_and_a_cpu_tensor_are_refused_like_cuda():
    x = torch.ones(3, device="openreg")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        x * torch.ones(3)


def test_results_land_on_the_operands_device():
    x = torch.arange(4.0, device="openreg:1")
    result = x + x
    assert result.device == torch.device("openreg:1")
    torch.testing.assert_close(result.cpu(), torch.arange(4.0) * 2)
