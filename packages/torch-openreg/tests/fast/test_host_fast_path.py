"""The host fast path (HostFastPath.cpp) of add, sub, mul, div, clamp_min,
ten unary operators, sum, softmax, log_softmax and mm: same results as the
CPU whether an operation takes it or the general route, and the general
route's errors for everything the fast path declines."""

from __future__ import annotations

import re

import pytest
import torch

OPERATIONS = {
    "add": lambda a, b: torch.add(a, b, alpha=3),
    "sub": lambda a, b: torch.sub(a, b, alpha=2),
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "relu": lambda a, b: torch.relu(a),
    "clamp_min": lambda a, b: torch.clamp_min(a, -0.25),
    "sum": lambda a, b: a.sum(),
    "softmax": lambda a, b: torch.softmax(a, -1),
    "log_softmax": lambda a, b: torch.log_softmax(a, 0),
    "mm": lambda a, b: a @ b.t().contiguous(),
    # b is positive: the domain of log, sqrt and rsqrt.
    "neg": lambda a, b: -a,
    "exp": lambda a, b: torch.exp(a),
    "log": lambda a, b: torch.log(b),
    "tanh": lambda a, b: torch.tanh(a),
    "sigmoid": lambda a, b: torch.sigmoid(a),
    "sqrt": lambda a, b: torch.sqrt(b),
    "rsqrt": lambda a, b: torch.rsqrt(b),
    "sin": lambda a, b: torch.sin(a),
    "cos": lambda a, b: torch.cos(a),
    "silu": lambda a, b: torch.nn.functional.silu(a),
}
UNARY = ["neg", "exp", "log", "tanh", "sigmoid", "sqrt", "rsqrt", "sin", "cos", "silu"]


def executor_calls(prefix: str) -> int:
    return sum(sum(c) for name, c in torch.openreg.executor_counts().items() if name.startswith(prefix))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_fast_path_matches_cpu_and_skips_the_executor(name, dtype):
    a, b = torch.randn(3, 7).to(dtype), (torch.rand(3, 7) + 0.5).to(dtype)
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


# Positive: in every unary operator's domain.
DECLINED_UNARY = {
    "integers": lambda: torch.randint(1, 9, (3, 7)),
    "strided": lambda: (torch.rand(7, 3) + 1).t(),
}


@pytest.mark.parametrize("case", sorted(DECLINED_UNARY))
@pytest.mark.parametrize("name", UNARY)
def test_declined_unary_operands_take_the_general_route(name, case):
    a = b = DECLINED_UNARY[case]()
    try:
        OPERATIONS[name](a, b)
    except NotImplementedError as refusal:  # silu has no integer kernel on the CPU
        with pytest.raises(NotImplementedError, match=re.escape(str(refusal))):
            OPERATIONS[name](a.to("openreg"), b.to("openreg"))
        torch.openreg.synchronize()  # refused at the call: no sticky error
        return
    torch.openreg.reset_fallback_counts()  # and the executor's counts
    result = OPERATIONS[name](a.to("openreg"), b.to("openreg"))
    assert executor_calls(f"aten::{name}") == 1
    assert result.dtype == OPERATIONS[name](a, b).dtype
    torch.testing.assert_close(result.cpu(), OPERATIONS[name](a, b))


def test_python_scalars_and_in_place_forms_still_work():
    a = torch.randn(4, 4)
    x = a.to("openreg")
    torch.testing.assert_close((x * 2.5 + 1).cpu(), a * 2.5 + 1)
    x.mul_(x).clamp_min_(0.5)
    torch.testing.assert_close(x.cpu(), (a * a).clamp_min(0.5))


def test_gradients_flow_through_the_fast_path():
    a, b = torch.randn(5, 5), torch.rand(5, 5) + 0.5
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


# Calls the fast path declines, with the operator the general route counts.
DECLINED_OTHERS = {
    "sum of integers": (lambda x: x.sum(), torch.arange(6).view(2, 3), "aten::sum"),
    "sum to another dtype": (lambda x: x.sum(dtype=torch.float64), torch.randn(2, 3), "aten::sum"),
    "softmax of a transpose": (lambda x: torch.softmax(x.t(), 0), torch.randn(2, 3), "aten::_softmax"),
    "mm of a transpose": (lambda x: x @ x.t(), torch.randn(2, 3), "aten::mm"),
}


@pytest.mark.parametrize("case", sorted(DECLINED_OTHERS))
def test_declined_reductions_and_matmuls_take_the_general_route(case):
    fn, a, counted = DECLINED_OTHERS[case]
    torch.openreg.reset_fallback_counts()  # and the executor's counts
    result = fn(a.to("openreg"))
    assert executor_calls(counted) == 1
    torch.testing.assert_close(result.cpu(), fn(a))


def test_sum_softmax_and_mm_gradients_match_the_cpu():
    a, b = torch.randn(4, 6), torch.randn(6, 3)
    grads = {}
    for device in ("cpu", "openreg"):
        x, y = (t.to(device).detach().requires_grad_() for t in (a, b))
        (torch.log_softmax(x @ y, -1) + torch.softmax(x @ y, 0)).sum().backward()
        grads[device] = (x.grad.cpu(), y.grad.cpu())
    torch.testing.assert_close(grads["openreg"], grads["cpu"])


def test_mismatched_matrices_get_the_cpu_error_and_leave_the_device_usable():
    x, y = torch.randn(2, 3, device="openreg"), torch.randn(4, 5, device="openreg")
    with pytest.raises(RuntimeError, match=r"cannot be multiplied \(2x3 and 4x5\)"):
        x @ y
    torch.openreg.synchronize()  # no device error was left behind
    assert (x @ x.t()).shape == (2, 2)


def test_a_bad_softmax_dimension_is_an_index_error_now_not_a_device_error_later():
    x = torch.randn(2, 3, device="openreg")
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.softmax(x, 2)
    torch.openreg.synchronize()
    torch.testing.assert_close(torch.softmax(x, 1).sum(1).cpu(), torch.ones(2))


def test_empty_and_zero_dimensional_operands():
    for a in (torch.randn(0, 3), torch.tensor(2.5)):
        x = a.to("openreg")
        torch.testing.assert_close(x.sum().cpu(), a.sum())
        torch.testing.assert_close(torch.softmax(x, -1).cpu(), torch.softmax(a, -1))
    torch.testing.assert_close((torch.randn(0, 3, device="openreg") @ torch.randn(3, 2, device="openreg")).cpu(),
                               torch.empty(0, 2))


SCALAR_ERRORS = {
    "boolean alpha": (lambda x: torch.add(x, x, alpha=True), torch.float32, "Boolean alpha"),
    "alpha overflowing half": (lambda x: torch.sub(x, x, alpha=1e6), torch.float16, "without overflow"),
    "alpha overflowing float": (lambda x: torch.add(x, x, alpha=1e39), torch.float32, "without overflow"),
    "min overflowing bfloat16": (lambda x: torch.clamp_min(x, 1e39), torch.bfloat16, "without overflow"),
}


@pytest.mark.parametrize("case", sorted(SCALAR_ERRORS))
def test_a_scalar_the_cpu_refuses_is_refused_at_the_call(case):
    fn, dtype, message = SCALAR_ERRORS[case]
    a = torch.randn(3).to(dtype)
    with pytest.raises(RuntimeError, match=message):
        fn(a)  # the CPU's error ...
    x = a.to("openreg")
    with pytest.raises(RuntimeError, match=message):
        fn(x)  # ... raised on the host, not by a queued kernel
    torch.openreg.synchronize()  # so no device error was left behind
    torch.testing.assert_close((x + x).cpu(), a + a)
