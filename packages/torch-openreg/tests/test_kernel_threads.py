"""Note [The threads of a kernel]: a kernel with small operands runs its CPU
code on the stream's worker alone; from KERNEL_BYTES of operands on, it may
split its work across the worker's intra-op thread team, as on the CPU."""

import os

import pytest
import torch
import torch_openreg

KERNEL_BYTES = 256 << 10  # kParallelKernelBytes in csrc/runtime/KernelThreads.h

pytestmark = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs a thread team of at least two")


def threads_in_kernel(elements: int) -> tuple[int, int]:
    operand = torch.zeros(elements, device="openreg")
    return torch_openreg._C._testing.kernel_threads_for_testing(operand)


def test_a_small_kernel_keeps_to_its_worker():
    inside, team = threads_in_kernel(1024)
    assert team >= 2
    assert inside == 1


def test_a_kernel_with_large_operands_uses_the_team():
    inside, team = threads_in_kernel(KERNEL_BYTES // 4)
    assert inside == team >= 2


def test_the_team_is_whole_again_after_a_small_kernel():
    threads_in_kernel(1024)
    inside, team = threads_in_kernel(KERNEL_BYTES // 4)
    assert inside == team >= 2
    assert threads_in_kernel(1024) == (1, team)


def test_small_kernels_compute_what_the_cpu_computes():
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    result = (a.to("openreg") @ b.to("openreg")).cpu()
    torch.testing.assert_close(result, a @ b)
