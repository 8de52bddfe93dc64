"""Note [Caching shape inference] and Note [Numbers that only enter the
arithmetic] (csrc/fast/ShapeCache.cpp): the executor asks a Meta kernel once
per question, and a floating-point number given to an arithmetic operator
is part of the question only as "converts to float32 or not". PyTorch's
Meta kernels for these operators are Python references, which the profiler
shows as prims:: calls: that is how these tests count Meta kernels run."""

import os

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

pytestmark = pytest.mark.skipif(os.environ.get("OPENREG_FAST_PATHS") == "0",
                                reason="the shape cache is a speed layer; the plain path asks Meta every time")


def meta_kernels_run(fn) -> int:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
        torch.openreg.synchronize()
    return sum(event.count for event in prof.key_averages() if event.key.startswith("prims::"))


def test_a_new_divisor_at_every_step_asks_meta_once():
    """AdamW's bias correction: a number that changes at every step."""
    x = torch.rand(16, 16, device="openreg") + 1
    x.div_(1.5)
    assert meta_kernels_run(lambda: [x.div_(1.0 + step / 100) for step in range(5)]) == 0


def test_integers_and_other_operators_keep_their_values_in_the_key():
    x = torch.rand(16, 16, device="openreg") + 1
    assert meta_kernels_run(lambda: [x.div_(step + 2) for step in range(3)]) == 3
    assert meta_kernels_run(lambda: [x.clamp_(min=0.1 * step) for step in range(1, 4)]) >= 3


def test_a_number_beyond_float32_is_asked_again():
    x = torch.rand(16, 16, device="openreg") + 1
    x.mul_(2.0)
    assert meta_kernels_run(lambda: x.mul_(1e39)) >= 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64])
def test_arithmetic_with_changing_numbers_matches_the_cpu(dtype):
    cpu = torch.arange(1, 17, dtype=dtype).reshape(4, 4)
    device = cpu.to("openreg")
    for number in (1.5, 0.25, 3.0, -2.5, float("inf"), 1e39):
        expected = [cpu * number, cpu / number, cpu + number, torch.lerp(cpu.double(), cpu.double(), number)]
        actual = [device * number, device / number, device + number,
                  torch.lerp(device.double(), device.double(), number)]
        for want, got in zip(expected, actual, strict=True):
            assert got.dtype == want.dtype
            torch.testing.assert_close(got.cpu(), want, equal_nan=True)
