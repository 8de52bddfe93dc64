"""The scratch allocator (ScratchAllocator.cpp): host memory that CPU kernels
allocate for themselves while they run as openreg kernels is cached for the
next kernel; the program's own CPU tensors are untouched by it."""

from __future__ import annotations

import torch
import torch.nn.functional as F
import torch_openreg._C as _C


def conv_operands(device: str):
    torch.manual_seed(0)
    image, kernel = torch.randn(1, 16, 128, 128), torch.randn(16, 16, 3, 3)
    return image.to(device), kernel.to(device)


def test_a_kernels_own_host_memory_is_reused_by_the_next_kernel():
    image, kernel = conv_operands("openreg")
    F.conv2d(image, kernel, padding=1)  # its result is computed in a 1 MiB host block
    torch.openreg.synchronize()
    before = _C._testing.scratch_stats()
    assert before["in_use_bytes"] == 0 and before["cached_bytes"] >= 1 << 20

    result = F.conv2d(image, kernel, padding=1)
    torch.openreg.synchronize()
    after = _C._testing.scratch_stats()
    assert after["allocation_count"] == before["allocation_count"]  # nothing new from the C library
    assert after["reuse_count"] > before["reuse_count"]
    assert after["in_use_bytes"] == 0
    torch.testing.assert_close(result.cpu(), F.conv2d(*conv_operands("cpu"), padding=1))


def test_the_programs_own_cpu_tensors_bypass_the_cache():
    before = _C._testing.scratch_stats()
    block = torch.empty(1 << 22)  # 16 MiB on the host thread, outside any kernel
    block.fill_(1.0)
    del block
    assert _C._testing.scratch_stats() == before


def test_empty_cache_returns_cached_host_memory():
    image, kernel = conv_operands("openreg")
    F.conv2d(image, kernel, padding=1)
    torch.openreg.synchronize()
    assert _C._testing.scratch_stats()["cached_bytes"] > 0
    torch.openreg.empty_cache()
    stats = _C._testing.scratch_stats()
    assert stats["cached_bytes"] == 0 and stats["in_use_bytes"] == 0


def test_results_stay_correct_when_blocks_change_hands():
    # Differently sized kernels share the cache; each must see only its own data.
    torch.manual_seed(1)
    inputs = [torch.randn(1, 8, n, n) for n in (96, 128, 64, 128)]
    kernel = torch.randn(8, 8, 3, 3)
    device_kernel = kernel.to("openreg")
    results = [F.conv2d(x.to("openreg"), device_kernel, padding=1) for x in inputs]
    for x, result in zip(inputs, results, strict=True):
        torch.testing.assert_close(result.cpu(), F.conv2d(x, kernel, padding=1))
