"""Note [Who runs queued work]: a thread that waits for a stream's work (it
synchronises with the stream or with an event, copies to pageable memory,
or launches into a full queue) runs the queued work itself, in order, as
far as each op may run off the worker (kernels launched with
orKernelAnyThread); the worker runs the rest. Order,
errors and the calling thread's own state are the same either way."""

import ctypes
import threading

import openreg_runtime as ort
import pytest

pytestmark = pytest.mark.sanitizer_safe

QUEUE_SLOTS = 4096  # a stream's ring (Stream::kQueueSlots in src/runtime.h)


def recorder(log: list, label: str):
    def kernel():
        log.append((label, threading.get_ident(), ort.kernel_is_on_worker()))
    return kernel


def hold_until_the_host_waits(res, s: int) -> None:
    """Queues on s a wait for a gated event of another stream, opened 0.2 s
    later: the worker is then inside that wait when the host synchronises,
    and steps aside for it once the wait ends."""
    other, event, gate = res.stream(), res.event(), res.gate()
    ort.launch_kernel(other, gate, "gate")
    ort.event_record(event, other)
    ort.stream_wait_event(s, event)
    threading.Timer(0.2, gate.open).start()


def test_a_synchronising_thread_runs_any_thread_kernels_itself(res):
    s = res.stream()
    log = []
    hold_until_the_host_waits(res, s)
    for label in "abc":
        ort.launch_kernel(s, recorder(log, label), label, any_thread=True)
    ort.stream_synchronize(s)
    assert log == [(label, threading.get_ident(), False) for label in "abc"]


def test_the_host_stops_before_a_kernel_that_must_run_on_the_worker(res):
    s = res.stream()
    gate = res.gate()
    log = []
    ort.launch_kernel(s, gate, "gate")  # holds the worker until opened
    ort.launch_kernel(s, recorder(log, "pinned"), "pinned")  # orKernelDefault
    ort.launch_kernel(s, recorder(log, "free"), "free", any_thread=True)
    threading.Timer(0.05, gate.open).start()
    ort.stream_synchronize(s)
    assert [entry[0] for entry in log] == ["pinned", "free"]
    assert all(entry[1] != threading.get_ident() and entry[2] for entry in log)


def test_a_launch_into_a_full_queue_runs_queued_work_itself(res):
    s = res.stream()
    gate = res.gate()
    log = []
    me = threading.get_ident()
    ort.launch_kernel(s, gate, "gate")  # holds the worker: the ring fills behind it
    for index in range(QUEUE_SLOTS - 1):  # the gate and these fill the ring
        ort.launch_kernel(s, recorder(log, index), "queued", any_thread=True)
    assert log == []
    threading.Timer(0.1, gate.open).start()  # once the next launch waits for room
    ort.launch_kernel(s, recorder(log, QUEUE_SLOTS - 1), "into_a_full_ring", any_thread=True)
    ran_while_launching = list(log)
    ort.stream_synchronize(s)
    assert [entry[0] for entry in log] == list(range(QUEUE_SLOTS))
    # The launching thread made room by running the first quarter itself.
    assert len(ran_while_launching) >= QUEUE_SLOTS // 4 - 1
    assert all(thread == me and not on_worker for _, thread, on_worker in ran_while_launching[:QUEUE_SLOTS // 4 - 1])


def test_a_copy_to_pageable_memory_runs_the_work_queued_before_it(res):
    s = res.stream()
    n = 64
    dev = res.malloc(n)
    pageable = ctypes.create_string_buffer(n)  # not pinned: the copy waits for its op
    log = []
    hold_until_the_host_waits(res, s)
    for label in "ab":
        ort.launch_kernel(s, recorder(log, label), label, any_thread=True)
    ort.memcpy_async(ctypes.addressof(pageable), dev, n, ort.orMemcpyDeviceToHost, s)
    assert log == [(label, threading.get_ident(), False) for label in "ab"]


def test_an_event_s_synchronisation_runs_the_work_queued_before_it(res):
    s = res.stream()
    event = res.event()
    log = []
    hold_until_the_host_waits(res, s)
    for label in "ab":
        ort.launch_kernel(s, recorder(log, label), label, any_thread=True)
    ort.event_record(event, s)
    ort.launch_kernel(s, recorder(log, "after"), "after", any_thread=True)
    ort.event_synchronize(event)
    assert log[:2] == [(label, threading.get_ident(), False) for label in "ab"]
    ort.stream_synchronize(s)
    assert [entry[0] for entry in log] == ["a", "b", "after"]


def test_copies_and_kernels_keep_their_order_on_the_host(res, hostmem):
    s = res.stream()
    n = 256
    dev = res.malloc(n)
    pinned = res.malloc_host(n)
    ctypes.memmove(pinned, bytes(range(256)), n)
    ort.memcpy_async(dev, pinned, n, ort.orMemcpyHostToDevice, s)

    def invert():
        host = ort.kernel_translate_pointer(dev, n)
        ctypes.memmove(host, bytes(255 - b for b in ctypes.string_at(host, n)), n)

    ort.launch_kernel(s, invert, "invert", any_thread=True)
    ort.memcpy_async(pinned, dev, n, ort.orMemcpyDeviceToHost, s)
    ort.stream_synchronize(s)
    assert ctypes.string_at(pinned, n) == bytes(255 - b for b in range(256))


def test_a_failure_on_the_host_is_the_device_s_sticky_error(res, raises_or):
    s = res.stream()
    skipped = threading.Event()

    def fail():
        raise ValueError("bad operand")

    ort.launch_kernel(s, fail, "failing_on_host", any_thread=True)
    ort.launch_kernel(s, skipped.set, "after_failure", any_thread=True)
    with raises_or("orErrorLaunchFailure", "kernel 'failing_on_host' failed", "bad operand"):
        ort.stream_synchronize(s)
    ort.device_reset()
    assert not skipped.is_set()


def test_calls_failing_inside_a_kernel_leave_the_host_s_last_error_alone(res):
    s = res.stream()
    seen = []

    def kernel():
        try:
            ort.stream_query(0xDEAD)  # fails, and the kernel goes on
        except ort.Error as error:
            seen.append(error.name)

    hold_until_the_host_waits(res, s)
    ort.launch_kernel(s, kernel, "queries_a_bad_handle", any_thread=True)
    assert ort.get_last_error() == ort.orSuccess
    ort.stream_synchronize(s)
    assert seen == ["orErrorInvalidResourceHandle"]  # inside the kernel, run by this thread
    assert ort.get_last_error() == ort.orSuccess


def test_the_host_keeps_its_current_device(res):
    s = res.stream(device=1)
    log = []
    with res.on_device(1):
        hold_until_the_host_waits(res, s)
    ort.launch_kernel(s, lambda: log.append((ort.get_device(), ort.kernel_is_on_worker())), "on_device_1",
                      any_thread=True)
    ort.set_device(0)
    ort.stream_synchronize(s)
    assert log == [(1, False)]  # inside the kernel, its stream's device
    assert ort.get_device() == 0


def test_asking_where_a_kernel_runs_outside_a_kernel_is_refused(raises_or):
    with raises_or("orErrorNotPermitted", "not inside a running kernel"):
        ort.kernel_is_on_worker()
