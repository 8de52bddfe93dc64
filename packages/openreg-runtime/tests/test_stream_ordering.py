"""Work on one stream runs in program order, and queueing returns at once.

Each test blocks a stream with a gated kernel (see conftest.Gate): whatever is
queued behind it must not have run while the gate is closed, and queueing it
must return although the stream cannot make progress, which proves the calls
are asynchronous without measuring time.
"""

import ctypes
import threading
import time

import openreg_runtime as ort
import pytest

pytestmark = pytest.mark.sanitizer_safe

N = 4096


def test_launch_returns_while_kernel_is_blocked(res, gate):
    s = res.stream()
    ran_after = threading.Event()
    ort.launch_kernel(s, gate, "gate")
    ort.launch_kernel(s, ran_after.set, "after_gate")
    # Both launches returned although the first kernel cannot finish yet.
    assert gate.started.wait(10)
    assert not gate.finished.is_set() and not gate.timed_out
    assert ort.stream_query(s) is False
    assert not ran_after.is_set()
    gate.open()
    ort.stream_synchronize(s)
    assert gate.finished.is_set() and ran_after.is_set()
    assert ort.stream_query(s) is True


def test_program_order_of_copies_memsets_and_kernels(res, gate, hostmem):
    s = res.stream()
    dev = res.malloc(N)
    src = res.malloc_host(N)
    dst = res.malloc_host(N)
    hostmem.write(src, bytes(range(256)) * (N // 256))
    ctypes.memset(dst, 0xEE, N)
    log = []

    def kernel_double():
        host = ort.kernel_translate_pointer(dev, N)
        data = bytearray(ctypes.string_at(host, N))
        log.append(("double", data[:4]))
        ctypes.memmove(host, bytes((b * 2) & 0xFF for b in data), N)

    def kernel_check_memset():
        host = ort.kernel_translate_pointer(dev + 100, 10)
        log.append(("memset", ctypes.string_at(host, 10)))

    ort.launch_kernel(s, gate, "gate")
    ort.memcpy_async(dev, src, N, ort.orMemcpyHostToDevice, s)   # 1: load
    ort.launch_kernel(s, kernel_double, "double")                 # 2: x2
    ort.memset_async(dev + 100, 0x7F, 10, s)                      # 3: patch
    ort.launch_kernel(s, kernel_check_memset, "check_memset")     # 4: sees 3
    ort.memcpy_async(dst, dev, N, ort.orMemcpyDeviceToHost, s)   # 5: store
    # Everything is queued behind the closed gate: nothing has run.
    assert gate.started.wait(10)
    assert ort.stream_query(s) is False
    assert log == []
    assert hostmem.read(dst, N) == b"\xee" * N
    gate.open()
    ort.stream_synchronize(s)
    assert log == [("double", bytearray(b"\x00\x01\x02\x03")), ("memset", b"\x7f" * 10)]
    expected = bytearray((b * 2) & 0xFF for b in bytes(range(256)) * (N // 256))
    expected[100:110] = b"\x7f" * 10
    assert hostmem.read(dst, N) == bytes(expected)


def test_kernels_run_in_launch_order(res):
    s = res.stream()
    order = []
    for i in range(50):
        ort.launch_kernel(s, lambda i=i: order.append(i), f"k{i}")
    ort.stream_synchronize(s)
    assert order == list(range(50))


def test_default_stream_orders_too(gate, hostmem, res):
    dev = res.malloc(64)
    ort.memset(dev, 0, 64)
    ort.launch_kernel(0, gate, "gate_on_default")
    ort.memset_async(dev, 1, 64)  # stream 0: the current device's default stream
    assert gate.started.wait(10)
    assert ort.stream_query(0) is False
    gate.open()
    ort.stream_synchronize(0)
    assert hostmem.device_read(dev, 64) == b"\x01" * 64


def test_device_synchronize_waits_for_every_stream(res, hostmem):
    gates = [res.gate() for _ in range(3)]
    streams = [res.stream() for _ in range(3)]
    dev = res.malloc(3)
    for i, (g, s) in enumerate(zip(gates, streams, strict=True)):
        ort.launch_kernel(s, g, f"gate{i}")
        ort.memset_async(dev + i, i + 1, 1, s)
    done = threading.Event()

    def sync():
        ort.device_synchronize()
        done.set()

    t = threading.Thread(target=sync)
    t.start()
    for g in gates[:2]:
        g.open()
    # One stream is still blocked: device_synchronize must still be waiting.
    assert not done.wait(0.3)
    gates[2].open()
    t.join(10)
    assert done.is_set()
    assert all(ort.stream_query(s) for s in streams)
    assert hostmem.device_read(dev, 3) == b"\x01\x02\x03"


def test_synchronous_memcpy_waits_for_queued_work(res, gate, hostmem):
    s = res.stream()
    dev = res.malloc(16)
    ort.memset(dev, 0, 16)
    ort.launch_kernel(s, gate, "gate")
    ort.memset_async(dev, 0x5A, 16, s)
    result = {}

    def read():
        result["bytes"] = hostmem.device_read(dev, 16)

    t = threading.Thread(target=read)
    t.start()
    assert gate.started.wait(10)
    t.join(0.3)
    assert t.is_alive()  # orMemcpy waits for the device's queued work
    gate.open()
    t.join(10)
    assert result["bytes"] == b"\x5a" * 16


def test_stream_destroy_waits_for_queued_work(res, gate, hostmem):
    s = ort.stream_create()
    dev = res.malloc(8)
    ort.memset(dev, 0, 8)
    ort.launch_kernel(s, gate, "gate")
    ort.memset_async(dev, 9, 8, s)
    t = threading.Thread(target=ort.stream_destroy, args=(s,))
    t.start()
    assert gate.started.wait(10)
    t.join(0.3)
    assert t.is_alive()
    gate.open()
    t.join(10)
    assert not t.is_alive()
    assert hostmem.device_read(dev, 8) == b"\x09" * 8
    with pytest.raises(ort.Error):
        ort.stream_query(s)


def test_streams_do_not_wait_for_each_other(res, gate):
    blocked = res.stream()
    free = res.stream()
    ran = threading.Event()
    ort.launch_kernel(blocked, gate, "gate")
    ort.launch_kernel(free, ran.set, "independent")
    # Without any event, the second stream runs while the first is blocked.
    assert ran.wait(10)
    ort.stream_synchronize(free)
    assert ort.stream_query(blocked) is False
    gate.open()
    ort.stream_synchronize(blocked)


def test_stream_destroy_waits_even_while_another_thread_holds_the_stream(res, gate):
    # device_synchronize in another thread holds a reference to every stream
    # of the device; destroying one of them must still wait for its work.
    s = ort.stream_create()
    ort.launch_kernel(s, gate, "gate")
    assert gate.started.wait(10)
    syncing = threading.Thread(target=ort.device_synchronize)
    syncing.start()
    syncing.join(0.2)
    assert syncing.is_alive()  # blocked on the gated stream
    destroying = threading.Thread(target=ort.stream_destroy, args=(s,))
    destroying.start()
    destroying.join(0.3)
    assert destroying.is_alive()
    assert not gate.finished.is_set()
    gate.open()
    destroying.join(10)
    syncing.join(10)
    assert not destroying.is_alive() and not syncing.is_alive()
    assert gate.finished.is_set()


QUEUE_SLOTS = 4096  # Stream::kQueueSlots in src/runtime.h


def test_a_full_queue_blocks_the_launching_thread_until_the_worker_makes_room(res, gate):
    # Note [The launch queue]: as on CUDA, a launch waits when the stream
    # already holds as much queued work as it can; nothing is dropped.
    s = res.stream()
    ort.launch_kernel(s, gate, "gate")
    assert gate.started.wait(10)
    order, launched = [], []

    def launch_more_than_the_queue_holds():
        for i in range(QUEUE_SLOTS + 10):
            ort.launch_kernel(s, lambda i=i: order.append(i), f"k{i}")
            launched.append(i)

    launcher = threading.Thread(target=launch_more_than_the_queue_holds)
    launcher.start()
    deadline = time.monotonic() + 60
    while len(launched) < QUEUE_SLOTS - 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    launcher.join(timeout=0.5)
    # The gate holds one slot and the launches behind it hold the others.
    assert launcher.is_alive() and len(launched) == QUEUE_SLOTS - 1
    assert not order
    gate.open()
    launcher.join(timeout=60)
    assert not launcher.is_alive()
    ort.stream_synchronize(s)
    assert order == list(range(QUEUE_SLOTS + 10))


def test_a_kernel_is_refused_rather_than_left_waiting_on_a_full_queue(res, gate):
    # A kernel that waited for room would wait for a worker that may be its
    # own, or one waiting for it: the launch fails instead, and the kernel
    # (here, which catches the error) and the device carry on.
    full, other = res.stream(), res.stream()
    ort.launch_kernel(full, gate, "gate")
    assert gate.started.wait(10)
    for _ in range(QUEUE_SLOTS - 1):
        ort.launch_kernel(full, lambda: None, "filler")
    seen = {}

    def launch_onto_the_full_stream():
        try:
            ort.launch_kernel(full, lambda: None, "from_a_kernel")
        except ort.Error as e:
            seen["code"], seen["message"] = e.code, str(e)

    ort.launch_kernel(other, launch_onto_the_full_stream, "launcher")
    ort.stream_synchronize(other)
    assert seen["code"] == ort.orErrorNotPermitted
    assert "queue is full" in seen["message"]
    gate.open()
    ort.stream_synchronize(full)
