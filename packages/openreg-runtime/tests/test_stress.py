"""Many Python threads driving the runtime at once (the bindings release the
GIL, so they really overlap): each with its own streams and buffers, checking
every byte of every round trip."""

import ctypes
import threading

import openreg_runtime as ort
import pytest

pytestmark = pytest.mark.sanitizer_safe

THREADS = 8
ITERATIONS = 25
SIZE = 16 * 1024 + 7  # odd on purpose


def transform_table(key: int) -> bytes:
    return bytes(((b * 5) + key) & 0xFF for b in range(256))


def worker(index: int, errors: list, barrier: threading.Barrier) -> None:
    device = index % ort.get_device_count()
    streams = []
    device_ptrs = []
    pinned = []
    try:
        ort.set_device(device)
        assert ort.get_device() == device
        streams = [ort.stream_create(), ort.stream_create_with_priority(-1)]
        src = ort.malloc_host(SIZE)
        dst = ort.malloc_host(SIZE)
        pinned += [src, dst]
        a = ort.malloc(SIZE)
        device_ptrs.append(a)
        b = ort.malloc(SIZE)
        device_ptrs.append(b)
        done = ort.event_create()
        barrier.wait(timeout=30)  # start the hot loop together
        for it in range(ITERATIONS):
            s = streams[it % 2]
            other = streams[(it + 1) % 2]
            key = (index * 31 + it) & 0xFF
            data = bytes((index + it + i) & 0xFF for i in range(256)) * (SIZE // 256) + \
                bytes(SIZE % 256)
            table = transform_table(key)

            def kernel(a=a, b=b, table=table):
                assert ort.get_device() == device
                source = ctypes.string_at(ort.kernel_translate_pointer(a, SIZE), SIZE)
                ctypes.memmove(ort.kernel_translate_pointer(b, SIZE),
                               source.translate(table), SIZE)

            if it % 3 == 0:
                # Pageable source: the call returns once the copy is done.
                page = ctypes.create_string_buffer(data, SIZE)
                ort.memcpy_async(a, ctypes.addressof(page), SIZE,
                                 ort.orMemcpyHostToDevice, s)
                ctypes.memset(page, 0, SIZE)  # must not affect the device copy
            else:
                ctypes.memmove(src, data, SIZE)
                ort.memcpy_async(a, src, SIZE, ort.orMemcpyHostToDevice, s)
            ort.launch_kernel(s, kernel, f"transform_t{index}_i{it}")
            ort.event_record(done, s)
            ort.stream_wait_event(other, done)  # hand over to the other stream
            ort.memset_async(a, 0, SIZE, other)
            ort.memcpy_async(dst, b, SIZE, ort.orMemcpyDeviceToHost, other)
            if it % 2:
                ort.stream_synchronize(other)
            else:
                ort.event_record(done, other)
                ort.event_synchronize(done)
            got = ctypes.string_at(dst, SIZE)
            expected = data.translate(table)
            if got != expected:
                bad = next(i for i in range(SIZE) if got[i] != expected[i])
                raise AssertionError(
                    f"thread {index} iteration {it}: first bad byte at {bad}: "
                    f"{got[bad]} != {expected[bad]}")
            check = ctypes.create_string_buffer(SIZE)
            ort.memcpy(ctypes.addressof(check), a, SIZE, ort.orMemcpyDefault)
            if check.raw != bytes(SIZE):
                raise AssertionError(f"thread {index} iteration {it}: memset missing")
        ort.event_destroy(done)
    except BaseException as e:  # noqa: BLE001 - reported by the main thread
        errors.append((index, e))
        barrier.abort()
    finally:
        for s in streams:
            ort.stream_destroy(s)
        for p in device_ptrs:
            ort.free(p)
        for p in pinned:
            ort.free_host(p)


def test_threads_round_trip_concurrently():
    errors: list = []
    barrier = threading.Barrier(THREADS)
    threads = [threading.Thread(target=worker, args=(i, errors, barrier))
               for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    assert errors == []


def test_threads_allocate_and_free_concurrently():
    # The allocator's free list under contention: no overlap, no leak.
    errors: list = []
    before = [None] * ort.get_device_count()

    def churn(index: int) -> None:
        try:
            ort.set_device(index % 2)
            live = []
            for it in range(200):
                size = 512 * (1 + (index * 7 + it) % 13)
                p = ort.malloc(size)
                ort.memset(p, index, size)
                live.append((p, size))
                if len(live) > 4:
                    q, qsize = live.pop(0)
                    out = ctypes.create_string_buffer(qsize)
                    ort.memcpy(ctypes.addressof(out), q, qsize, ort.orMemcpyDeviceToHost)
                    if out.raw != bytes([index]) * qsize:
                        raise AssertionError(f"thread {index}: allocation was overwritten")
                    ort.free(q)
            for q, _ in live:
                ort.free(q)
        except BaseException as e:  # noqa: BLE001
            errors.append((index, e))

    for d in range(len(before)):
        ort.set_device(d)
        before[d] = ort.mem_get_info()[0]
    ort.set_device(0)
    threads = [threading.Thread(target=churn, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    for d in range(len(before)):
        ort.set_device(d)
        assert ort.mem_get_info()[0] == before[d]
    ort.set_device(0)


def test_blocked_waiters_each_wake_when_their_own_point_is_reached(res, gate):
    # Host threads block (past the short spin) on events recorded at
    # different points of one stream, and on the whole stream. The worker
    # wakes waiters only when the lowest point any of them needs is reached;
    # every waiter must still wake, and none before its point.
    stream = res.stream()
    ran = []
    ort.launch_kernel(stream, gate, "gate")
    points = {}
    for i in range(200):
        ort.launch_kernel(stream, lambda i=i: ran.append(i), f"step{i}")
        if i % 40 == 39:
            points[i] = res.event()
            ort.event_record(points[i], stream)
    seen = {}

    def wait(point):
        if point is None:
            ort.stream_synchronize(stream)
        else:
            ort.event_synchronize(points[point])
        seen[point] = len(ran)

    waiters = [threading.Thread(target=wait, args=(p,)) for p in [*points, None]]
    for t in waiters:
        t.start()
    gate.started.wait(timeout=30)
    threading.Event().wait(0.05)  # long past the spin: the waiters are asleep
    assert seen == {}
    gate.open()
    for t in waiters:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in waiters), "a waiter was never woken"
    assert all(seen[p] >= p + 1 for p in points) and seen[None] == 200
