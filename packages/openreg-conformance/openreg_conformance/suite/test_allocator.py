"""Required: the caching allocator, through torch.accelerator's statistics.

The contracts: memory_allocated grows by at least a tensor's bytes and
returns to its baseline when the tensor is freed; max_memory_allocated
keeps the peak until reset_peak_memory_stats(); memory_reserved covers what
is allocated and, after empty_cache(), falls back to its baseline; asking
for more than the device holds raises torch.OutOfMemoryError, after which
nothing is left allocated and the device still allocates.
"""

from __future__ import annotations

import gc

import pytest
import torch

from conftest import needs_api

MIB = 1 << 20


@pytest.fixture(autouse=True)
def _statistics_api():
    for name in ("memory_allocated", "max_memory_allocated", "memory_reserved", "reset_peak_memory_stats",
                 "empty_cache"):
        needs_api(torch.accelerator, name)


def test_memory_allocated_follows_a_tensor(device):
    baseline = torch.accelerator.memory_allocated(0)
    tensor = torch.empty(16 * MIB, dtype=torch.uint8, device=device)
    assert torch.accelerator.memory_allocated(0) >= baseline + 16 * MIB, (
        "contract: memory_allocated grows by at least the tensor's bytes")
    del tensor
    gc.collect()
    assert torch.accelerator.memory_allocated(0) == baseline, (
        "contract: memory_allocated returns to its baseline once the tensor is freed "
        f"(baseline {baseline}, now {torch.accelerator.memory_allocated(0)})")


def test_the_peak_is_kept_until_reset(device):
    torch.accelerator.reset_peak_memory_stats(0)
    baseline = torch.accelerator.memory_allocated(0)
    tensor = torch.empty(32 * MIB, dtype=torch.uint8, device=device)
    del tensor
    assert torch.accelerator.max_memory_allocated(0) >= baseline + 32 * MIB, (
        "contract: max_memory_allocated keeps the peak after the tensor is freed")
    torch.accelerator.reset_peak_memory_stats(0)
    assert torch.accelerator.max_memory_allocated(0) == torch.accelerator.memory_allocated(0), (
        "contract: reset_peak_memory_stats() brings the peak down to what is allocated now")


def test_empty_cache_returns_the_reserved_memory(device):
    torch.accelerator.empty_cache()
    baseline = torch.accelerator.memory_reserved(0)
    tensor = torch.empty(64 * MIB, dtype=torch.uint8, device=device)
    assert torch.accelerator.memory_reserved(0) >= torch.accelerator.memory_allocated(0), (
        "contract: memory_reserved covers memory_allocated")
    del tensor
    torch.accelerator.empty_cache()
    assert torch.accelerator.memory_reserved(0) == baseline, (
        "contract: empty_cache() gives the unused cached blocks back: memory_reserved returns to its baseline "
        f"(baseline {baseline}, now {torch.accelerator.memory_reserved(0)})")


def test_too_large_an_allocation_is_an_out_of_memory_error(device):
    needs_api(torch.accelerator, "get_memory_info")
    baseline = torch.accelerator.memory_allocated(0)
    _, total = torch.accelerator.get_memory_info(0)
    with pytest.raises(torch.OutOfMemoryError):
        torch.empty(total + MIB, dtype=torch.uint8, device=device)
    assert torch.accelerator.memory_allocated(0) == baseline, (
        "contract: a failed allocation leaves memory_allocated at its baseline")
    survivor = torch.ones(4, device=device)
    assert survivor.sum().item() == 4.0, "contract: the device allocates and computes after an out-of-memory error"


def test_memory_stats_has_the_aggregate_counters(device):
    needs_api(torch.accelerator, "memory_stats")
    tensor = torch.empty(MIB, dtype=torch.uint8, device=device)
    stats = torch.accelerator.memory_stats(0)
    for key in ("allocated_bytes.all.current", "reserved_bytes.all.current", "allocation.all.current"):
        assert key in stats, f"contract: memory_stats() has {key!r}, as the CUDA caching allocator's does"
    assert stats["allocated_bytes.all.current"] == torch.accelerator.memory_allocated(0)
    del tensor
