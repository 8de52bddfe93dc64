"""The caching device allocator (reuse, splitting, statistics, empty_cache,
out-of-memory, the per-process memory fraction,
PYTORCH_NO_OPENREG_MEMORY_CACHING, record_stream) and pinned
host memory with asynchronous copies."""

from __future__ import annotations

import re

import openreg_runtime
import pytest
import torch

MiB = 1 << 20
SEGMENT = 2 * MiB  # segment size for requests up to 1 MiB

POOLS = ("all", "large_pool", "small_pool")
FIELDS = ("current", "peak", "allocated", "freed")
STAT_ARRAYS = ("allocation", "segment", "active", "inactive_split", "allocated_bytes",
               "reserved_bytes", "active_bytes", "inactive_split_bytes", "requested_bytes")


@pytest.fixture
def clean_cache():
    """Starts from an empty cache: nothing allocated and nothing reserved."""
    torch.openreg.synchronize()
    torch.openreg.empty_cache()
    for device in (0, 1):
        assert torch.openreg.memory_allocated(device) == 0
        assert torch.openreg.memory_reserved(device) == 0
    yield
    torch.openreg.empty_cache()


def test_freed_memory_is_reused(clean_cache):
    x = torch.empty(1000, device="openreg")
    pointer = x.data_ptr()
    del x
    y = torch.empty(1000, device="openreg")
    assert y.data_ptr() == pointer
    # A large allocation is reused as well.
    big = torch.empty(12 * MiB, dtype=torch.uint8, device="openreg")
    pointer = big.data_ptr()
    del big
    again = torch.empty(12 * MiB, dtype=torch.uint8, device="openreg")
    assert again.data_ptr() == pointer


def test_small_blocks_share_one_segment(clean_cache):
    a = torch.empty(1000, device="openreg")
    b = torch.empty(3000, device="openreg")
    c = torch.empty(100, dtype=torch.int8, device="openreg")
    assert torch.openreg.memory_reserved() == SEGMENT
    stats = torch.openreg.memory_stats()
    assert stats["segment.all.current"] == 1
    assert stats["allocation.all.current"] == 3
    # 1000 floats, 3000 floats and 100 bytes rounded up to 512-byte blocks.
    assert torch.openreg.memory_allocated() == 4096 + 12288 + 512
    assert stats["requested_bytes.all.current"] == 4000 + 12000 + 100
    starts = sorted(t.data_ptr() for t in (a, b, c))
    assert starts[-1] - starts[0] < SEGMENT
    # Device 1 is untouched.
    assert torch.openreg.memory_reserved(1) == 0


def test_large_requests_get_their_own_segment(clean_cache):
    small = torch.empty(10, device="openreg")
    large = torch.empty(3 * MiB, dtype=torch.uint8, device="openreg")
    stats = torch.openreg.memory_stats()
    assert stats["segment.small_pool.current"] == 1
    assert stats["segment.large_pool.current"] == 1
    assert stats["allocated_bytes.large_pool.current"] == 3 * MiB
    assert stats["allocated_bytes.small_pool.current"] == 512
    del small, large


def test_memory_stats_keys_follow_torch_cuda():
    stats = torch.openreg.memory_stats()
    expected = {f"{array}.{pool}.{field}" for array in STAT_ARRAYS for pool in POOLS
                for field in FIELDS}
    expected |= {"num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc",
                 "num_device_free"}
    assert expected <= set(stats)
    assert all(isinstance(v, int) for v in stats.values())
    assert list(stats) == sorted(stats)  # an ordered mapping, as torch.cuda's


def test_stats_follow_allocations_and_frees(clean_cache):
    before = torch.openreg.memory_stats()
    x = torch.empty(1000, device="openreg")
    during = torch.openreg.memory_stats()
    assert during["allocated_bytes.all.current"] - before["allocated_bytes.all.current"] == 4096
    assert during["allocation.all.current"] - before["allocation.all.current"] == 1
    assert during["allocation.all.allocated"] - before["allocation.all.allocated"] == 1
    assert during["active.all.current"] - before["active.all.current"] == 1
    assert during["active_bytes.all.current"] - before["active_bytes.all.current"] == 4096
    assert during["reserved_bytes.all.current"] == SEGMENT
    assert during["num_device_alloc"] - before["num_device_alloc"] == 1
    del x
    after = torch.openreg.memory_stats()
    assert after["allocated_bytes.all.current"] == before["allocated_bytes.all.current"]
    assert after["allocation.all.freed"] - before["allocation.all.freed"] == 1
    assert after["allocated_bytes.all.freed"] - before["allocated_bytes.all.freed"] == 4096
    assert after["active.all.current"] == before["active.all.current"]
    assert after["reserved_bytes.all.current"] == SEGMENT  # cached, not returned


def test_peak_and_its_reset(clean_cache):
    torch.openreg.reset_peak_memory_stats()
    big = torch.empty(16 * MiB, dtype=torch.uint8, device="openreg")
    small = torch.empty(1000, device="openreg")
    peak = torch.openreg.max_memory_allocated()
    assert peak == 16 * MiB + 4096
    del big
    assert torch.openreg.max_memory_allocated() == peak
    assert torch.openreg.memory_allocated() == 4096
    assert torch.openreg.max_memory_reserved() >= 16 * MiB + SEGMENT
    torch.openreg.reset_peak_memory_stats()
    assert torch.openreg.max_memory_allocated() == 4096
    assert torch.openreg.max_memory_reserved() == torch.openreg.memory_reserved()
    del small


def test_reset_accumulated_memory_stats(clean_cache):
    for _ in range(3):
        torch.empty(100, device="openreg")
    stats = torch.openreg.memory_stats()
    assert stats["allocation.all.allocated"] >= 3 and stats["allocation.all.freed"] >= 3
    keep = torch.empty(100, device="openreg")
    torch.openreg.reset_accumulated_memory_stats()
    stats = torch.openreg.memory_stats()
    assert stats["allocation.all.allocated"] == 0
    assert stats["allocation.all.freed"] == 0
    assert stats["allocated_bytes.all.allocated"] == 0
    assert stats["num_device_alloc"] == 0
    # Current values are not accumulated statistics.
    assert stats["allocation.all.current"] == 1
    assert stats["allocated_bytes.all.current"] == 512
    del keep
    assert torch.openreg.memory_stats()["allocation.all.freed"] == 1


def test_empty_cache_returns_reserved_memory(clean_cache):
    keep = torch.empty(12 * MiB, dtype=torch.uint8, device="openreg:1")
    for device in ("openreg:0", "openreg:1"):
        scratch = [torch.empty(n, device=device) for n in (100, 5000, 3 * MiB)]
        del scratch
    assert torch.openreg.memory_reserved(0) > torch.openreg.memory_allocated(0) == 0
    assert torch.openreg.memory_reserved(1) > torch.openreg.memory_allocated(1)
    free_before, total = torch.openreg.mem_get_info(0)
    torch.openreg.empty_cache()
    assert torch.openreg.memory_reserved(0) == torch.openreg.memory_allocated(0) == 0
    assert torch.openreg.memory_reserved(1) == torch.openreg.memory_allocated(1) == 12 * MiB
    free_after, total_after = torch.openreg.mem_get_info(0)
    assert total_after == total and free_after > free_before
    del keep


def test_mem_get_info_matches_reserved_memory(clean_cache):
    total = torch.openreg.get_device_properties(1).total_memory
    free, reported_total = torch.openreg.mem_get_info(1)
    assert reported_total == total == 4 << 30
    assert free == total
    x = torch.empty(6 * MiB, dtype=torch.uint8, device="openreg:1")
    free, _ = torch.openreg.mem_get_info(1)
    assert free == total - torch.openreg.memory_reserved(1)
    assert torch.openreg.mem_get_info(0)[0] == total  # device 0 untouched
    del x


def test_torch_accelerator_memory_functions_agree(clean_cache):
    torch.openreg.reset_peak_memory_stats(1)
    x = torch.empty(3 * MiB, dtype=torch.uint8, device="openreg:1")
    y = torch.empty(1000, device="openreg:0")
    for device in (0, 1):
        assert torch.accelerator.memory_allocated(device) == torch.openreg.memory_allocated(device)
        assert torch.accelerator.memory_reserved(device) == torch.openreg.memory_reserved(device)
        assert (torch.accelerator.max_memory_allocated(device)
                == torch.openreg.max_memory_allocated(device))
        assert torch.accelerator.memory_stats(device)["allocated_bytes.all.current"] == \
            torch.openreg.memory_allocated(device)
    assert torch.accelerator.memory_allocated(1) == 3 * MiB
    assert torch.accelerator.get_memory_info(1) == torch.openreg.mem_get_info(1)
    del x
    assert torch.accelerator.max_memory_allocated(1) == 3 * MiB
    torch.accelerator.reset_peak_memory_stats(1)
    assert torch.openreg.max_memory_allocated(1) == 0
    torch.accelerator.empty_cache()
    assert torch.openreg.memory_reserved(1) == 0
    del y


_OOM_SCRIPT = """
import json, re, torch
MiB = 1 << 20
facts = {"baseline": [torch.openreg.memory_allocated(), torch.openreg.memory_reserved()]}
small = torch.empty(1000, device="openreg")          # a 2 MiB segment, mostly unallocated
big = torch.empty(40 * MiB, dtype=torch.uint8, device="openreg")
try:
    torch.empty(40 * MiB, dtype=torch.uint8, device="openreg")
    facts["raised"] = None
except Exception as error:
    facts["raised"] = type(error).__name__
    facts["is_torch_oom"] = isinstance(error, torch.OutOfMemoryError)
    facts["is_openreg_oom"] = isinstance(error, torch.openreg.OutOfMemoryError)
    facts["is_runtime_error"] = isinstance(error, RuntimeError)
    facts["message"] = str(error)
facts["num_ooms"] = torch.openreg.memory_stats()["num_ooms"]
facts["during"] = [torch.openreg.memory_allocated(), torch.openreg.memory_reserved()]
del small, big
torch.openreg.empty_cache()
facts["after"] = [torch.openreg.memory_allocated(), torch.openreg.memory_reserved()]
again = torch.empty(60 * MiB, dtype=torch.uint8, device="openreg")
again.copy_(torch.full((60 * MiB,), 7, dtype=torch.uint8))
facts["works_again"] = int(again[-1].item())
# Device 1 has its own capacity.
facts["device1"] = torch.empty(60 * MiB, dtype=torch.uint8, device="openreg:1").numel()
print(json.dumps(facts))
"""


def test_out_of_memory(python):
    facts = python.json(_OOM_SCRIPT, env={"OPENREG_DEVICE_MEMORY": "64MiB"})
    assert facts["raised"] == "OutOfMemoryError"
    assert facts["is_torch_oom"] and facts["is_openreg_oom"] and facts["is_runtime_error"]
    message = facts["message"]
    assert "openreg:0" in message
    assert re.search(r"Tried to allocate 40(\.0+)? MiB", message), message
    assert re.search(r"total capacity of 64(\.0+)? MiB", message), message
    assert re.search(r"40(\.\d+)? MiB is allocated by PyTorch", message), message
    unallocated = re.search(r"(\S+ \S+) is reserved by PyTorch but unallocated", message)
    assert unallocated and unallocated.group(1) != "0 bytes", message
    assert facts["num_ooms"] == 1
    assert facts["during"] == [40 * MiB + 4096, 40 * MiB + SEGMENT]
    assert facts["baseline"] == [0, 0]
    assert facts["after"] == [0, 0]
    assert facts["works_again"] == 7
    assert facts["device1"] == 60 * MiB


_FRACTION_SCRIPT = """
import json, torch
MiB = 1 << 20

def now():  # every statistic of the moment (the running totals and counters aside)
    return {k: v for k, v in torch.openreg.memory_stats().items() if k.endswith(".current")}

facts = {"default": torch.openreg.get_per_process_memory_fraction()}
torch.openreg.set_per_process_memory_fraction(0.25)  # 64 MiB of the 256 MiB device
facts["fraction"] = [torch.openreg.get_per_process_memory_fraction(),
                     torch.openreg.get_per_process_memory_fraction("openreg:0"),
                     torch.openreg.get_per_process_memory_fraction(1)]
below = torch.empty(40 * MiB, dtype=torch.uint8, device="openreg")
baseline = now()
try:
    torch.empty(40 * MiB, dtype=torch.uint8, device="openreg")  # 80 MiB reserved: past 64
    facts["raised"] = None
except Exception as error:
    facts["raised"] = type(error).__name__
    facts["is_torch_oom"] = isinstance(error, torch.OutOfMemoryError)
    facts["message"] = str(error)
facts["back_to_baseline"] = now() == baseline
facts["num_ooms"] = torch.openreg.memory_stats()["num_ooms"]
facts["device1"] = torch.empty(80 * MiB, dtype=torch.uint8, device="openreg:1").numel()  # its own fraction: 1
del below
torch.openreg.set_per_process_memory_fraction(1.0)
big = torch.empty(80 * MiB, dtype=torch.uint8, device="openreg")
big.copy_(torch.full((80 * MiB,), 7, dtype=torch.uint8))
facts["big"] = int(big[-1].item())
facts["fraction_after"] = torch.openreg.get_per_process_memory_fraction()
print(json.dumps(facts))
"""


def test_per_process_memory_fraction_caps_reserved_memory(python):
    # As torch.cuda's: past fraction * total memory, a new segment is
    # refused as out-of-memory, and the statistics are as they were.
    facts = python.json(_FRACTION_SCRIPT, env={"OPENREG_DEVICE_MEMORY": "256MiB"})
    assert facts["default"] == 1.0
    assert facts["fraction"] == [0.25, 0.25, 1.0]
    assert facts["raised"] == "OutOfMemoryError" and facts["is_torch_oom"]
    message = facts["message"]
    assert re.search(r"Tried to allocate 40(\.0+)? MiB", message), message
    assert re.search(r"memory fraction 0\.25 allows 64(\.0+)? MiB", message), message
    assert "set_per_process_memory_fraction" in message
    assert facts["back_to_baseline"]
    assert facts["num_ooms"] == 1
    assert facts["device1"] == 80 * MiB
    assert facts["big"] == 7
    assert facts["fraction_after"] == 1.0


@pytest.mark.parametrize("fraction", [-0.1, 1.5, 1], ids=["negative", "above_one", "not_a_float"])
def test_invalid_memory_fractions_are_refused_as_by_torch_cuda(fraction, monkeypatch):
    # torch.cuda's own wrapper checks its arguments before it needs CUDA
    # (only its lazy initialisation does), so this build can run it.
    import torch.cuda.memory
    monkeypatch.setattr(torch.cuda.memory, "_lazy_init", lambda: None)
    with pytest.raises((TypeError, ValueError)) as cuda:
        torch.cuda.memory.set_per_process_memory_fraction(fraction, 0)
    with pytest.raises(type(cuda.value), match=re.escape(str(cuda.value))):
        torch.openreg.set_per_process_memory_fraction(fraction)
    assert torch.openreg.get_per_process_memory_fraction() == 1.0


def test_caching_can_be_disabled(python):
    facts = python.json("""
        import json, torch
        x = torch.empty(1000, device="openreg")
        reserved_live = torch.openreg.memory_reserved()
        del x
        reserved_after = torch.openreg.memory_reserved()
        y = torch.empty(3 << 20, dtype=torch.uint8, device="openreg:1")
        live1 = torch.openreg.memory_reserved(1)
        del y
        print(json.dumps([reserved_live, reserved_after, live1, torch.openreg.memory_reserved(1)]))
    """, env={"PYTORCH_NO_OPENREG_MEMORY_CACHING": "1"})
    assert facts[0] > 0 and facts[2] > 0
    assert facts[1] == 0 and facts[3] == 0


# ------------------------------------------------------------ record_stream


def test_record_stream_delays_reuse_until_the_stream_is_done(clean_cache, gate):
    a = torch.openreg.current_stream()
    b = torch.openreg.Stream()
    x = torch.empty(4096, device="openreg")  # allocated on A
    x.uniform_()
    pointer = x.data_ptr()
    g = gate(b)  # B is busy
    b.wait_stream(a)
    with torch.openreg.stream(b):
        y = x.to(torch.float64)  # B reads x, after the gate
    x.record_stream(b)
    del x
    z = torch.empty(4096, device="openreg")  # same size, on A
    assert z.data_ptr() != pointer, "memory still in use on B was handed out again"
    w = torch.empty(4096, device="openreg")
    assert w.data_ptr() != pointer
    del z, w
    assert torch.empty(4096, device="openreg").data_ptr() != pointer
    g.open()
    b.synchronize()
    reused = torch.empty(4096, device="openreg")
    assert reused.data_ptr() == pointer, "memory B no longer uses must become reusable"
    y.record_stream(b)
    del y, reused


def test_without_record_stream_memory_is_reused_at_once(clean_cache, gate):
    # The contrast case: the allocator only knows the allocating stream.
    b = torch.openreg.Stream()
    x = torch.empty(4096, device="openreg")
    pointer = x.data_ptr()
    g = gate(b)
    del x
    assert torch.empty(4096, device="openreg").data_ptr() == pointer
    g.open()


def test_record_stream_of_another_device(clean_cache, gate):
    other = torch.openreg.Stream(1)
    x = torch.ones(1000, device="openreg:0")
    pointer = x.data_ptr()
    g = gate(other)
    x.record_stream(other)
    del x
    assert torch.empty(1000, device="openreg:0").data_ptr() != pointer
    g.open()
    other.synchronize()
    assert torch.empty(1000, device="openreg:0").data_ptr() == pointer


def test_freeing_a_block_used_on_a_faulted_device_loses_nothing(clean_cache):
    # The free records an event on every stream that used the block; on a
    # faulted device that record fails, and the free (a deleter, which must
    # not throw) releases the block at once: the device skips its work.
    x = torch.ones(1024, device="openreg:0")
    on1 = torch.openreg.Stream(1)
    x.record_stream(on1)
    failing = torch.empty(8, device="openreg:1")
    failing.random_(5, 2)  # from >= to: the kernel fails on device 1
    with pytest.raises(RuntimeError, match="sticky"):
        torch.openreg.synchronize(1)
    try:
        del x
        assert torch.openreg.memory_allocated(0) == 0
        y = torch.ones(1024, device="openreg:0")  # the block is reusable
        assert y.sum().item() == 1024.0
        del y
    finally:
        with torch.openreg.device(1):
            openreg_runtime.device_reset()
    del failing


def test_record_stream_on_a_view_and_the_current_stream(clean_cache):
    x = torch.empty(100, 100, device="openreg")
    x[10:].record_stream(torch.openreg.Stream())  # a view records its storage
    x.record_stream(torch.openreg.current_stream())  # the allocating stream: nothing to do
    pointer = x.data_ptr()
    del x
    torch.openreg.synchronize()
    assert torch.empty(100, 100, device="openreg").data_ptr() == pointer


def test_record_stream_rejects_non_openreg_streams():
    x = torch.empty(10, device="openreg")
    with pytest.raises(RuntimeError):
        x.record_stream(torch.Stream("cpu"))


# ----------------------------------------------------------- pinned memory


def test_non_blocking_h2d_from_pinned_memory_returns_before_completion(gate):
    stream = torch.openreg.current_stream()
    source = torch.arange(100_000, dtype=torch.float32).pin_memory()
    g = gate(stream)  # an earlier, long-running operation on the stream
    on_device = source.to("openreg", non_blocking=True)  # would hang here if synchronous
    assert not g.finished.is_set()
    assert not stream.query()
    g.open()
    stream.synchronize()
    assert torch.equal(on_device.cpu(), torch.arange(100_000, dtype=torch.float32))


def test_non_blocking_d2h_into_pinned_memory_returns_before_completion(gate):
    stream = torch.openreg.current_stream()
    on_device = torch.arange(50_000, dtype=torch.int64, device="openreg")
    destination = torch.full((50_000,), -1, dtype=torch.int64).pin_memory()
    g = gate(stream)
    destination.copy_(on_device, non_blocking=True)
    # The copy is queued behind the gate: the host buffer is untouched so far.
    assert not stream.query()
    assert torch.equal(destination, torch.full((50_000,), -1, dtype=torch.int64))
    g.open()
    stream.synchronize()
    assert torch.equal(destination, torch.arange(50_000, dtype=torch.int64))


def test_freeing_pinned_memory_a_faulted_device_used_loses_nothing():
    # Freeing a pinned block records an event on each stream that used it;
    # on a faulted device that record fails, and the free must not throw.
    host = torch.ones(1000).pin_memory()
    with torch.openreg.device(1):
        on_device = host.to("openreg:1", non_blocking=True)
        torch.openreg.synchronize(1)
        failing = torch.empty(8, device="openreg:1")
        failing.random_(5, 2)  # from >= to: the kernel fails on device 1
        with pytest.raises(RuntimeError, match="sticky"):
            torch.openreg.synchronize(1)
    try:
        del host
        again = torch.ones(1000).pin_memory()
        assert again.is_pinned() and again.sum().item() == 1000.0
    finally:
        with torch.openreg.device(1):
            openreg_runtime.device_reset()
    del on_device, failing


def test_non_blocking_to_cpu_gives_pinned_memory(gate):
    on_device = torch.arange(1000, dtype=torch.float32, device="openreg")
    g = gate(torch.openreg.current_stream())
    host = on_device.to("cpu", non_blocking=True)
    assert host.is_pinned()
    g.open()
    torch.openreg.synchronize()
    assert torch.equal(host, torch.arange(1000, dtype=torch.float32))


def test_pinned_source_is_not_reused_while_a_copy_reads_it(gate):
    stream = torch.openreg.current_stream()
    source = torch.arange(4096, dtype=torch.float32).pin_memory()
    pointer = source.data_ptr()
    g = gate(stream)
    on_device = source.to("openreg", non_blocking=True)
    del source
    other = torch.empty(4096, dtype=torch.float32).pin_memory()
    assert other.data_ptr() != pointer, "pinned memory a queued copy reads was reused"
    g.open()
    stream.synchronize()
    assert torch.equal(on_device.cpu(), torch.arange(4096, dtype=torch.float32))


def test_blocking_copies_from_pageable_memory_wait():
    # Without non_blocking the data is there when the call returns; reading it
    # on another stream with no synchronisation must see it.
    source = torch.randn(100_000)
    on_device = source.to("openreg")
    side = torch.openreg.Stream()
    with torch.openreg.stream(side):
        back = on_device.cpu()
    assert torch.equal(back, source)
    assert torch.openreg.current_stream().query()


# ------------------------------------------------------ impossible sizes


@pytest.mark.parametrize("make", [
    lambda: torch.UntypedStorage(-5, device="openreg"),
    lambda: torch.UntypedStorage(8, device="openreg").resize_(-1),
    lambda: torch.UntypedStorage(8, device="openreg").resize_(-512),
    lambda: torch.UntypedStorage(1 << 62, device="openreg"),
], ids=["new_negative", "resize_negative", "resize_negative_block", "exabytes"])
def test_a_size_no_device_holds_is_out_of_memory(clean_cache, make):
    # Rounding such a size to blocks or segments must not wrap around to a
    # small block that aliases the next allocation (as CUDA, an OOM error).
    neighbour = torch.arange(256, dtype=torch.float32, device="openreg")
    with pytest.raises(torch.OutOfMemoryError, match="openreg out of memory. Tried to allocate"):
        make()
    after = torch.arange(256, dtype=torch.float32, device="openreg").mul_(2)
    torch.testing.assert_close(neighbour.cpu(), torch.arange(256, dtype=torch.float32))
    torch.testing.assert_close(after.cpu(), torch.arange(256, dtype=torch.float32) * 2)


def test_a_view_of_an_emptied_storage_says_so_without_faulting():
    base = torch.arange(10.0, device="openreg")
    view = base[2:]
    base.untyped_storage().resize_(0)
    for use in (lambda: view.cpu(), lambda: view.sum(), lambda: view + 1, lambda: view.clone()):
        with pytest.raises(RuntimeError, match="storage is empty or too small: it holds 0 bytes"):
            use()
    # The device did not fault: work goes on, with no sticky error.
    torch.openreg.synchronize()
    assert (torch.ones(3, device="openreg") * 2).cpu().tolist() == [2.0, 2.0, 2.0]
