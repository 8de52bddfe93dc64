"""Device and pinned memory: allocation, accounting, out-of-memory, pages
returned to the OS, pointer attributes, frees that wait for queued work."""

import ctypes
import re
import threading

import openreg_runtime as ort
import pytest

pytestmark = pytest.mark.sanitizer_safe

MiB = 1 << 20
GiB = 1 << 30


def free_bytes(device: int = 0) -> int:
    previous = ort.get_device()
    ort.set_device(device)
    try:
        return ort.mem_get_info()[0]
    finally:
        ort.set_device(previous)


def rss_shmem_bytes() -> int:
    with open("/proc/self/status") as f:
        match = re.search(r"^RssShmem:\s+(\d+) kB", f.read(), re.M)
    assert match, "RssShmem missing from /proc/self/status"
    return int(match.group(1)) * 1024


def test_malloc_alignment_and_accounting(res):
    before = free_bytes()
    sizes = [1, 511, 512, 513, 4096, 100_000]
    ptrs = [res.malloc(n) for n in sizes]
    assert all(p % 512 == 0 for p in ptrs)
    assert len(set(ptrs)) == len(ptrs)
    rounded = sum((n + 511) // 512 * 512 for n in sizes)
    assert free_bytes() == before - rounded
    assert free_bytes(1) == 4 * GiB  # the other device is untouched
    for p in ptrs:
        res.free(p)
    assert free_bytes() == before


def test_malloc_zero_gives_null_and_free_null_is_noop():
    assert ort.malloc(0) == 0
    assert ort.malloc_host(0) == 0
    ort.free(0)
    ort.free_host(0)


def test_allocations_do_not_overlap(res, hostmem):
    ptrs = [res.malloc(1000) for _ in range(8)]
    for i, p in enumerate(ptrs):
        ort.memset(p, i, 1000)
    for i, p in enumerate(ptrs):
        assert hostmem.device_read(p, 1000) == bytes([i]) * 1000


def test_freed_memory_is_reused(res):
    p = res.malloc(4096)
    res.free(p)
    q = res.malloc(4096)
    assert q == p  # best fit over a coalesced free list


def test_out_of_memory_when_capacity_is_full(res, raises_or):
    # Pages are reserved lazily: untouched allocations cost no real memory.
    baseline = free_bytes()
    big = [res.malloc(GiB) for _ in range(3)]
    rest = free_bytes()
    last = res.malloc(rest)
    assert free_bytes() == 0
    with raises_or("orErrorMemoryAllocation", "openreg device 0", "512 bytes",
                   f"capacity {4 * GiB} bytes", "OPENREG_DEVICE_MEMORY"):
        ort.malloc(512)
    assert ort.peek_at_last_error() == ort.orErrorMemoryAllocation
    # A failed allocation changes nothing; device 1 is unaffected.
    assert free_bytes() == 0
    q = res.malloc(GiB, device=1)
    res.free(q)
    res.free(big[1])
    p = res.malloc(GiB)  # fits again
    with raises_or("orErrorMemoryAllocation", "tried to allocate 1"):
        ort.malloc(1)
    res.free(p)
    for b in (big[0], big[2], last):
        res.free(b)
    assert free_bytes() == baseline
    # Everything coalesced back: the whole capacity is one block again.
    whole = res.malloc(4 * GiB)
    res.free(whole)


def test_out_of_memory_sizes_beyond_capacity(raises_or):
    before = free_bytes()
    for size in (4 * GiB + 1, 1 << 62, 2**64 - 1, 2**64 - 511):
        with raises_or("orErrorMemoryAllocation", "out of memory on openreg device 0",
                       f"tried to allocate {size} bytes"):
            ort.malloc(size)
    assert free_bytes() == before


def test_fragmentation_reports_largest_free_block(res, raises_or):
    # Fill the device with 1 GiB blocks, free two that are not adjacent:
    # 2 GiB are free, but no 2 GiB block exists.
    blocks = [res.malloc(GiB) for _ in range(4)]
    res.free(blocks[0])
    res.free(blocks[2])
    assert free_bytes() == 2 * GiB
    with raises_or("orErrorMemoryAllocation", f"largest free block {GiB}"):
        ort.malloc(2 * GiB)
    res.free(blocks[1])  # now 0..3 GiB coalesce
    p = res.malloc(2 * GiB)
    res.free(p)


def test_freed_pages_return_to_the_os(res):
    size = 64 * MiB
    before = rss_shmem_bytes()
    p = res.malloc(size)
    untouched = rss_shmem_bytes()
    assert untouched - before < size // 4  # reserved lazily
    ort.memset(p, 0x5A, size)  # touches every page through the host alias
    touched = rss_shmem_bytes()
    assert touched - before >= size * 0.9
    res.free(p)
    after = rss_shmem_bytes()
    assert touched - after >= size * 0.9
    # Freed pages read back as zeros when allocated again.
    q = res.malloc(size)
    seen = {}

    def peek():
        host = ort.kernel_translate_pointer(q, size)
        seen["sample"] = ctypes.string_at(host + size // 2, 16)

    ort.launch_kernel(0, peek, "peek")
    ort.stream_synchronize(0)
    assert seen["sample"] == bytes(16)
    res.free(q)


def test_pointer_attributes(res, hostmem):
    dev = res.malloc(1000, device=1)
    attrs = ort.pointer_get_attributes(dev + 10)  # interior pointers resolve
    assert attrs == {"type": "device", "device": 1, "base": dev, "size": 1024}
    pinned = res.malloc_host(100)
    assert ort.pointer_get_attributes(pinned + 99) == {
        "type": "host", "device": -1, "base": pinned, "size": 100}
    buf, addr = hostmem.pageable(10)
    assert ort.pointer_get_attributes(addr) == {
        "type": "unregistered", "device": -1, "base": 0, "size": 0}
    assert ort.pointer_get_attributes(0)["type"] == "unregistered"
    res.free(dev)
    res.free_host(pinned)
    for freed in (dev, pinned):
        assert ort.pointer_get_attributes(freed) == {
            "type": "unregistered", "device": -1, "base": 0, "size": 0}


def test_pinned_memory_is_plain_host_memory(res):
    p = res.malloc_host(3 * 4096 + 5)
    ctypes.memset(p, 0x42, 3 * 4096 + 5)
    assert ctypes.string_at(p, 3 * 4096 + 5) == b"\x42" * (3 * 4096 + 5)


def test_free_waits_for_queued_work_on_its_device(res, gate):
    s = res.stream()
    p = ort.malloc(4096)
    seen = {}

    def use_after_gate():
        gate()
        host = ort.kernel_translate_pointer(p, 4096)  # must still be allocated
        seen["byte"] = ctypes.string_at(host, 1)

    ort.launch_kernel(s, use_after_gate, "uses_p")
    t = threading.Thread(target=ort.free, args=(p,))
    t.start()
    assert gate.started.wait(10)
    t.join(0.3)
    assert t.is_alive()  # orFree waits, as cudaFree does
    gate.open()
    t.join(10)
    ort.stream_synchronize(s)  # no illegal address: the kernel ran first
    assert "byte" in seen
    assert ort.pointer_get_attributes(p)["type"] == "unregistered"


def test_free_host_waits_for_queued_copies(res, gate, hostmem):
    s = res.stream(device=1)
    dev = res.malloc(4096, device=1)
    ort.memset(dev, 0x77, 4096)
    pinned = ort.malloc_host(4096)
    seen = {}
    ort.launch_kernel(s, gate, "gate")
    ort.memcpy_async(pinned, dev, 4096, ort.orMemcpyDeviceToHost, s)
    ort.launch_kernel(s, lambda: seen.setdefault("data", ctypes.string_at(pinned, 4096)),
                      "read_pinned")
    t = threading.Thread(target=ort.free_host, args=(pinned,))
    t.start()
    assert gate.started.wait(10)
    t.join(0.3)
    assert t.is_alive()  # any device's queued work may still use the buffer
    gate.open()
    t.join(10)
    assert seen["data"] == b"\x77" * 4096


def test_work_queued_elsewhere_reaching_freed_memory_is_an_illegal_address(
        res, gate, raises_or):
    # orFree waits for its own device only. A copy queued on another device's
    # stream that then reaches the freed memory fails cleanly, like a fault.
    s1 = res.stream(device=1)
    p0 = ort.malloc(4096)
    pinned = res.malloc_host(4096)
    ort.launch_kernel(s1, gate, "gate")
    ort.memcpy_async(pinned, p0, 4096, ort.orMemcpyDeviceToHost, s1)
    ort.free(p0)  # device 0 has no queued work: returns at once
    gate.open()
    with raises_or("orErrorIllegalAddress", "memcpyDtoH", "openreg device 1",
                   "freed device memory"):
        ort.stream_synchronize(s1)
    ort.set_device(1)
    ort.device_reset()
    ort.set_device(0)
