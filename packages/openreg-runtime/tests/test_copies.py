"""Copies and memsets: every direction, kind inference, pinned vs pageable
asynchrony, count 0, byte-exact results."""

import ctypes
import threading

import openreg_runtime as ort
import pytest

pytestmark = pytest.mark.sanitizer_safe

H2D = ort.orMemcpyHostToDevice
D2H = ort.orMemcpyDeviceToHost
D2D = ort.orMemcpyDeviceToDevice
H2H = ort.orMemcpyHostToHost
DEFAULT = ort.orMemcpyDefault


def pattern(n: int, seed: int = 0) -> bytes:
    return bytes((i * 7 + seed) & 0xFF for i in range(n))


# ------------------------------------------------------------ synchronous copies


@pytest.mark.parametrize("kind", [H2D, DEFAULT], ids=["explicit", "default"])
def test_sync_round_trip_every_direction(res, hostmem, kind):
    n = 10_000  # not a multiple of anything in particular
    data = pattern(n, 3)
    src, src_addr = hostmem.pageable(data)
    a = res.malloc(n, device=0)
    b = res.malloc(n, device=0)
    c = res.malloc(n, device=1)
    ort.memcpy(a, src_addr, n, kind)
    ort.memcpy(b, a, n, D2D if kind == H2D else DEFAULT)       # same device
    ort.memcpy(c, b, n, D2D if kind == H2D else DEFAULT)       # across devices
    out, out_addr = hostmem.pageable(n)
    ort.memcpy(out_addr, c, n, D2H if kind == H2D else DEFAULT)
    assert out.raw == data
    # Host to host, through the runtime.
    out2, out2_addr = hostmem.pageable(n)
    ort.memcpy(out2_addr, src_addr, n, H2H if kind == H2D else DEFAULT)
    assert out2.raw == data


def test_partial_and_offset_copies(res, hostmem):
    dev = res.malloc(1024)
    ort.memset(dev, 0xAB, 1024)
    hostmem.device_write(dev + 100, b"hello")
    ort.memcpy(dev + 500, dev + 100, 5, D2D)  # within one allocation
    data = hostmem.device_read(dev, 1024)
    expected = bytearray(b"\xab" * 1024)
    expected[100:105] = b"hello"
    expected[500:505] = b"hello"
    assert data == bytes(expected)


def test_pinned_memory_with_sync_copies(res, hostmem):
    n = 8192
    pinned = res.malloc_host(n)
    dev = res.malloc(n)
    hostmem.write(pinned, pattern(n, 9))
    ort.memcpy(dev, pinned, n, DEFAULT)
    ctypes.memset(pinned, 0, n)
    ort.memcpy(pinned, dev, n, D2H)
    assert hostmem.read(pinned, n) == pattern(n, 9)


def test_count_zero_succeeds_at_once(res, gate):
    s = res.stream()
    dev = res.malloc(16)
    ort.launch_kernel(s, gate, "gate")
    # Count 0 never waits and never checks pointers, not even NULL ones.
    ort.memcpy(0, 0, 0, H2D)
    ort.memcpy(dev, 0, 0, DEFAULT)
    ort.memcpy_async(0, dev, 0, D2H, s)
    ort.memset(0, 1, 0)
    ort.memset_async(dev, 1, 0, s)
    assert ort.stream_query(s) is False
    gate.open()


# ------------------------------------------------------------ asynchronous copies


def test_async_copies_from_pinned_memory_return_before_completion(res, gate, hostmem):
    n = 64 * 1024
    s = res.stream()
    src = res.malloc_host(n)
    dst = res.malloc_host(n)
    dev = res.malloc(n)
    data = pattern(n, 5)
    hostmem.write(src, data)
    ctypes.memset(dst, 0, n)
    ort.launch_kernel(s, gate, "gate")
    ort.memcpy_async(dev, src, n, H2D, s)
    ort.memcpy_async(dst, dev, n, D2H, s)
    # Both calls returned with the stream blocked ahead of them: not done yet.
    assert gate.started.wait(10)
    assert ort.stream_query(s) is False
    assert hostmem.read(dst, n) == bytes(n)
    gate.open()
    ort.stream_synchronize(s)
    assert hostmem.read(dst, n) == data


def test_async_h2d_from_pageable_memory_returns_after_copy(res, gate, hostmem):
    n = 4096
    s = res.stream()
    dev = res.malloc(n)
    ort.memset(dev, 0, n)
    src, src_addr = hostmem.pageable(pattern(n, 1))
    ort.launch_kernel(s, gate, "gate")
    t = threading.Thread(target=ort.memcpy_async, args=(dev, src_addr, n, H2D, s))
    t.start()
    assert gate.started.wait(10)
    t.join(0.3)
    assert t.is_alive()  # pageable: the call waits for the copy itself
    gate.open()
    t.join(10)
    assert not t.is_alive()
    # The copy is complete: the caller may reuse its buffer at once.
    ctypes.memset(src_addr, 0xFF, n)
    ort.stream_synchronize(s)
    assert hostmem.device_read(dev, n) == pattern(n, 1)


def test_async_d2h_to_pageable_memory_returns_after_copy(res, gate, hostmem):
    n = 4096
    s = res.stream()
    dev = res.malloc(n)
    ort.memset(dev, 0, n)
    out, out_addr = hostmem.pageable(n)
    ort.launch_kernel(s, gate, "gate")
    ort.memset_async(dev, 0x3C, n, s)  # queued behind the gate
    result = {}

    def copy_back():
        ort.memcpy_async(out_addr, dev, n, D2H, s)
        result["bytes_at_return"] = ctypes.string_at(out_addr, n)

    t = threading.Thread(target=copy_back)
    t.start()
    assert gate.started.wait(10)
    t.join(0.3)
    assert t.is_alive()
    gate.open()
    t.join(10)
    # No synchronisation: the bytes were there when the call returned.
    assert result["bytes_at_return"] == b"\x3c" * n


def test_async_d2d_same_and_cross_device(res, gate, hostmem):
    n = 3000
    s = res.stream(device=0)
    a = res.malloc(n, device=0)
    b = res.malloc(n, device=0)
    c = res.malloc(n, device=1)
    hostmem.device_write(a, pattern(n, 11))
    ort.memset(b, 0, n)
    ort.memset(c, 0, n)
    ort.launch_kernel(s, gate, "gate")
    ort.memcpy_async(b, a, n, D2D, s)  # no host side: returns at once
    ort.memcpy_async(c, b, n, DEFAULT, s)
    assert gate.started.wait(10)
    assert ort.stream_query(s) is False
    gate.open()
    ort.stream_synchronize(s)
    assert hostmem.device_read(b, n) == pattern(n, 11)
    assert hostmem.device_read(c, n) == pattern(n, 11)


def test_async_copy_on_other_devices_stream(res, hostmem):
    # A stream of device 1 may copy device 0 memory.
    n = 512
    s1 = res.stream(device=1)
    a = res.malloc(n, device=0)
    pinned = res.malloc_host(n)
    hostmem.write(pinned, pattern(n, 2))
    ort.memcpy_async(a, pinned, n, H2D, s1)
    ort.stream_synchronize(s1)
    assert hostmem.device_read(a, n) == pattern(n, 2)


def test_async_default_stream(res, hostmem):
    n = 100
    dev = res.malloc(n, device=1)
    pinned = res.malloc_host(n)
    hostmem.write(pinned, pattern(n, 4))
    ort.set_device(1)
    ort.memcpy_async(dev, pinned, n)  # kind Default, stream 0 of device 1
    ort.stream_synchronize()
    ort.set_device(0)
    assert hostmem.device_read(dev, n) == pattern(n, 4)


# ----------------------------------------------------------------------- memset


def test_memset_sync_uses_low_byte_and_exact_range(res, hostmem):
    dev = res.malloc(1000)
    ort.memset(dev, 0, 1000)
    ort.memset(dev + 10, 0x1AB, 20)  # only the low 8 bits count
    ort.memset(dev + 999, -1, 1)
    data = hostmem.device_read(dev, 1000)
    assert data == bytes(10) + b"\xab" * 20 + bytes(969) + b"\xff"


def test_memset_async_is_queued(res, gate, hostmem):
    s = res.stream(device=1)
    dev = res.malloc(256, device=1)
    ort.memset(dev, 0x01, 256)
    ort.launch_kernel(s, gate, "gate")
    ort.memset_async(dev + 128, 0x02, 128, s)
    assert gate.started.wait(10)
    assert ort.stream_query(s) is False
    gate.open()
    ort.stream_synchronize(s)
    assert hostmem.device_read(dev, 256) == b"\x01" * 128 + b"\x02" * 128


def test_memset_waits_for_device_work(res, gate, hostmem):
    s = res.stream()
    dev = res.malloc(64)
    ort.memset(dev, 0, 64)
    ort.launch_kernel(s, gate, "gate")
    ort.memset_async(dev, 0x10, 64, s)
    t = threading.Thread(target=ort.memset, args=(dev, 0x20, 32))
    t.start()
    assert gate.started.wait(10)
    t.join(0.3)
    assert t.is_alive()  # orMemset waits for the device's queued work first
    gate.open()
    t.join(10)
    assert hostmem.device_read(dev, 64) == b"\x20" * 32 + b"\x10" * 32


# ------------------------------------------------- large copies (copy engine)


def long_pattern(n: int, seed: int) -> bytes:
    # A prime period, so no part boundary (page multiples) lines up with it.
    return (pattern(4093, seed) * (n // 4093 + 1))[:n]


def test_large_copies_and_memsets_split_across_cores_are_byte_exact(res, hostmem):
    # Above 8 MiB the copy engine splits a copy between threads; an odd size
    # makes the last part shorter and a position-dependent pattern catches any
    # part landing at the wrong offset.
    n = (24 << 20) + 12345
    data = long_pattern(n, 5)
    src, src_addr = hostmem.pageable(data)
    a, b = res.malloc(n), res.malloc(n)
    ort.memcpy(a, src_addr, n, H2D)
    ort.memcpy(b, a, n, D2D)
    out, out_addr = hostmem.pageable(n)
    ort.memcpy(out_addr, b, n, D2H)
    assert out.raw == data
    ort.memset(b + 1, 0xAB, n - 2)
    ort.memcpy(out_addr, b, n, D2H)
    assert out.raw[0] == data[0] and out.raw[-1] == data[-1]
    assert out.raw[1:-1] == b"\xab" * (n - 2)


def test_large_copies_on_many_streams_at_once_are_byte_exact(res, hostmem):
    # Streams whose copies find the copy engine busy do their part alone.
    n = 12 << 20
    streams = [res.stream() for _ in range(4)]
    sources = [hostmem.pageable(long_pattern(n, seed)) for seed in range(4)]
    targets = [res.malloc(n) for _ in range(4)]
    pinned = [res.malloc_host(n) for _ in range(4)]
    for (_, src_addr), dst, stream, host in zip(sources, targets, streams, pinned, strict=True):
        ctypes.memmove(host, src_addr, n)
        ort.memcpy_async(dst, host, n, H2D, stream)
    for stream in streams:
        ort.stream_synchronize(stream)
    for seed, dst in enumerate(targets):
        out, out_addr = hostmem.pageable(n)
        ort.memcpy(out_addr, dst, n, D2H)
        assert out.raw == long_pattern(n, seed)
