"""The in-place host fast path (InPlaceFastPath.cpp) of an optimizer step's
operators: same results as the CPU whether an operation takes it or the
general route, without the device executor when it does, and the general
route's results and errors for everything it declines."""

from __future__ import annotations

import os
import re

import pytest
import torch

OPERATIONS = {
    "add_": lambda a, b, c: a.add_(b, alpha=-0.5),
    "add_scalar": lambda a, b, c: a.add_(1e-3),
    "mul_": lambda a, b, c: a.mul_(b),
    "mul_scalar": lambda a, b, c: a.mul_(0.99),
    "div_scalar": lambda a, b, c: a / 3,
    "addcmul_": lambda a, b, c: a.addcmul_(b, c, value=0.25),
    "addcdiv_": lambda a, b, c: a.addcdiv_(b, c, value=-0.5),
    "lerp_": lambda a, b, c: a.lerp_(b, 0.1),
}
FAST = os.environ.get("OPENREG_FAST_PATHS") != "0"


def executor_calls() -> int:
    return sum(sum(c) for c in torch.openreg.executor_counts().values())


def operands(dtype=torch.float32, shapes=((3, 7), (3, 7), (3, 7))):
    torch.manual_seed(0)
    return [(torch.rand(*shape) + 0.5).to(dtype) for shape in shapes]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_matches_cpu_and_skips_the_executor(name, dtype):
    cpu = operands(dtype)
    device = [t.to("openreg") for t in cpu]
    torch.openreg.reset_fallback_counts()  # and the executor's counts
    result = OPERATIONS[name](*device)
    assert (executor_calls() == 0) == FAST
    expected = OPERATIONS[name](*cpu)
    assert result.device.type == "openreg" and result.dtype == dtype
    torch.testing.assert_close(result.cpu(), expected)
    torch.testing.assert_close(device[0].cpu(), cpu[0])  # written in place, or left alone (div)


def test_in_place_results_keep_autograd_s_version_counter():
    a = torch.ones(4, device="openreg")
    version = a._version
    a.mul_(2.0).add_(torch.ones(4, device="openreg"))
    assert a._version == version + 2
    assert a.cpu().tolist() == [3.0] * 4


DECLINED = {
    "broadcast": operands(shapes=((3, 7), (7,), (3, 7))),
    "promotion": [torch.ones(3, 7), torch.ones(3, 7, dtype=torch.float64), torch.ones(3, 7)],
    "strided": [torch.ones(7, 3).t(), torch.ones(3, 7), torch.ones(3, 7)],
}


@pytest.mark.parametrize("case", sorted(DECLINED))
@pytest.mark.parametrize("name", ["add_", "mul_", "addcmul_", "lerp_"])
def test_declined_operands_take_the_general_route(name, case):
    cpu = [t.clone() for t in DECLINED[case]]
    device = [t.to("openreg") for t in DECLINED[case]]
    try:
        expected = OPERATIONS[name](*cpu)
    except RuntimeError as error:
        with pytest.raises(RuntimeError, match=re.escape(str(error).splitlines()[0][:40])):
            OPERATIONS[name](*device)
        return
    torch.testing.assert_close(OPERATIONS[name](*device).cpu(), expected)


def test_a_partly_overlapping_operand_is_refused_at_the_call_as_on_the_cpu():
    for device in ("cpu", "openreg"):
        base = torch.arange(8.0).to(device)
        with pytest.raises(RuntimeError, match="single memory location"):
            base[1:].add_(base[:-1])
    torch.openreg.synchronize()  # no device error was left behind


def test_integer_tensors_and_overflowing_scalars_take_the_general_route():
    ints = torch.arange(6).to("openreg")
    assert ints.mul_(3).cpu().tolist() == [0, 3, 6, 9, 12, 15]
    half = torch.ones(3, dtype=torch.float16)
    torch.testing.assert_close(half.to("openreg").add_(1e10).cpu(), half.add_(1e10))  # inf, as on the CPU
