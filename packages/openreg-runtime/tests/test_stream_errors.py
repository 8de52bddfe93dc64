"""Stream errors (Note [Stream errors] in src/stream.cpp): a kernel that
fails its stream with orKernelFailStream, and a copy that touches a faulted
device, stop exactly the work ordered after them -- later work on the stream
and on the streams that wait for it -- while the device and its other
streams go on. Every call that waits for that work reports the error."""


import openreg_runtime as ort
import pytest

pytestmark = pytest.mark.sanitizer_safe

FAILED = "failed its stream"


def failing(message: str):
    """A kernel body that fails the work that depends on it."""
    return lambda: ort.kernel_fail_stream(ort.orErrorLaunchFailure, message)


def on_device(device: int, call):
    previous = ort.get_device()
    ort.set_device(device)
    try:
        return call()
    finally:
        ort.set_device(previous)


def test_work_after_the_failure_is_skipped_and_every_wait_reports_it(res, raises_or, gate):
    s, other = res.stream(), res.stream()
    ran = []
    ort.launch_kernel(s, gate, "gate")  # the failure must not happen before "after" is queued
    ort.launch_kernel(s, lambda: ran.append("before"), "before")
    ort.launch_kernel(s, failing("collective #3 lost rank 1"), "collective")
    ort.launch_kernel(s, lambda: ran.append("after"), "after")
    gate.open()
    with raises_or("orErrorLaunchFailure", "collective #3 lost rank 1", "kernel 'collective'", FAILED):
        ort.stream_synchronize(s)
    assert ran == ["before"]  # the work ordered after it never ran
    with raises_or("orErrorLaunchFailure", "collective #3 lost rank 1"):
        ort.stream_query(s)
    with raises_or("orErrorLaunchFailure", "collective #3 lost rank 1"):
        ort.launch_kernel(s, lambda: ran.append("later"), "later")
    # An event recorded now succeeds, as one recorded before the failure
    # would have, and carries the failure to whatever waits for it.
    late = res.event()
    ort.event_record(late, s)
    with raises_or("orErrorLaunchFailure", "collective #3 lost rank 1"):
        ort.event_synchronize(late)
    waiter = res.stream()
    ort.stream_wait_event(waiter, late)
    with raises_or("orErrorLaunchFailure", "collective #3 lost rank 1"):
        ort.stream_synchronize(waiter)
    with raises_or("orErrorLaunchFailure", "collective #3 lost rank 1"):
        ort.device_synchronize()
    # The device and its other streams go on: this is no sticky error.
    ort.launch_kernel(other, lambda: ran.append("other stream"), "other")
    ort.stream_synchronize(other)
    assert ran == ["before", "other stream"]
    on_device(1, ort.device_synchronize)
    ort.device_reset()  # clears the stream's error with the device's
    ort.launch_kernel(s, lambda: ran.append("after reset"), "after_reset")
    ort.stream_synchronize(s)
    assert ran[-1] == "after reset"


def test_a_pageable_copy_through_a_failed_stream_reports_it(res, raises_or, hostmem, gate):
    s = res.stream()
    dev = res.malloc(16)
    hostmem.device_write(dev, b"A" * 16)
    buffer, address = hostmem.pageable(16)
    ort.launch_kernel(s, gate, "gate")  # the copy is queued before the failure: it runs, and is skipped
    ort.launch_kernel(s, failing("allreduce #0 failed"), "allreduce")
    gate.open()
    with raises_or("orErrorLaunchFailure", "allreduce #0 failed"):
        ort.memcpy_async(address, dev, 16, ort.orMemcpyDeviceToHost, s)
    assert buffer.raw == bytes(16)  # no value reached the host
    ort.device_reset()


def test_streams_that_wait_for_failed_work_fail_and_earlier_records_do_not(res, raises_or, gate):
    a, b, c = res.stream(), res.stream(), res.stream()
    before, after = res.event(), res.event()
    ran = []
    ort.launch_kernel(a, gate, "gate")  # nothing below runs before the test has queued it all
    ort.event_record(before, a)
    ort.launch_kernel(a, failing("send to rank 2 failed"), "send")
    ort.event_record(after, a)
    ort.stream_wait_event(b, before)
    ort.launch_kernel(b, lambda: ran.append("b"), "b_work")
    ort.stream_wait_event(c, after)
    ort.launch_kernel(c, lambda: ran.append("c"), "c_work")
    gate.open()
    ort.stream_synchronize(b)  # waited only for the work before the failure
    with raises_or("orErrorLaunchFailure", "send to rank 2 failed", f"stream {ort.stream_get_id(c)} waited"):
        ort.stream_synchronize(c)
    assert ran == ["b"]
    ort.event_synchronize(before)
    with raises_or("orErrorLaunchFailure", "send to rank 2 failed"):
        ort.event_synchronize(after)
    ort.device_reset()


def test_a_wait_queued_after_the_failed_work_ended_still_fails_the_waiter(res, raises_or, gate):
    a, b = res.stream(), res.stream()
    event = res.event()
    ort.launch_kernel(a, gate, "gate")  # the record is queued before the failure
    ort.launch_kernel(a, failing("broadcast #1 failed"), "broadcast")
    ort.event_record(event, a)
    gate.open()
    with raises_or("orErrorLaunchFailure", "broadcast #1 failed"):
        ort.stream_synchronize(a)
    ort.stream_wait_event(b, event)  # the event has completed, its work failed
    with raises_or("orErrorLaunchFailure", "broadcast #1 failed"):
        ort.stream_synchronize(b)
    ort.device_reset()


def test_the_failure_crosses_devices_through_an_event(res, raises_or, gate):
    a0, b1 = res.stream(device=0), res.stream(device=1)
    event = res.event(device=0)
    ort.launch_kernel(a0, gate, "gate")  # the record is queued before the failure
    ort.launch_kernel(a0, failing("all_gather #4 failed"), "all_gather")
    ort.event_record(event, a0)
    ort.stream_wait_event(b1, event)
    gate.open()
    with raises_or("orErrorLaunchFailure", "all_gather #4 failed"):
        ort.stream_synchronize(b1)
    for device in (0, 1):
        on_device(device, ort.device_reset)


def test_a_kernel_that_also_returns_a_failure_leaves_the_sticky_error(res, raises_or):
    s = res.stream()

    def both() -> None:
        ort.kernel_fail_stream(ort.orErrorLaunchFailure, "stream's")
        raise RuntimeError("device's")

    ort.launch_kernel(s, both, "both")
    with raises_or("orErrorLaunchFailure", "device's", "sticky"):
        ort.stream_synchronize(s)
    ort.device_reset()


def test_fail_stream_is_for_kernels_and_failures(res, raises_or):
    with raises_or("orErrorNotPermitted", "not inside a running kernel"):
        ort.kernel_fail_stream(ort.orErrorLaunchFailure, "host")
    errors = []

    def success_code() -> None:
        try:
            ort.kernel_fail_stream(ort.orSuccess, "no error")
        except ort.Error as error:
            errors.append(error.name)

    s = res.stream()
    ort.launch_kernel(s, success_code, "success_code")
    ort.stream_synchronize(s)  # refused, so the stream did not fail
    assert errors == ["orErrorInvalidValue"]


# ------------------------------------------ copies that touch a faulted device


@pytest.mark.parametrize("direction", ["from the faulted device", "into the faulted device"])
def test_a_copy_that_runs_after_its_other_device_faulted_fails_its_stream(res, raises_or, gate, hostmem, direction):
    # The copy is queued on device 1 while device 0 is still healthy (it
    # passes the checks made when queued), and runs only after the kernel
    # that faults device 0: it must fail then, not move half-written data.
    s0, s1 = res.stream(device=0), res.stream(device=1)
    on0, on1 = res.malloc(64, device=0), res.malloc(64, device=1)
    hostmem.device_write(on1, b"1" * 64)
    hostmem.device_write(on0, b"0" * 64)
    ready = res.event(device=0)
    ort.launch_kernel(s0, gate, "gate")
    ort.launch_kernel(s0, lambda: 1 / 0, "faulty")
    ort.event_record(ready, s0)
    ort.stream_wait_event(s1, ready)
    dst, src = (on1, on0) if direction == "from the faulted device" else (on0, on1)
    ort.memcpy_async(dst, src, 64, ort.orMemcpyDeviceToDevice, s1)
    gate.open()
    with raises_or("orErrorLaunchFailure", "memcpyPtoP", "did not run", "openreg device 0", "kernel 'faulty'"):
        ort.stream_synchronize(s1)
    on_device(0, ort.device_reset)
    on_device(1, ort.device_reset)
    assert hostmem.device_read(on1, 64) == b"1" * 64  # nothing was copied
    assert hostmem.device_read(on0, 64) == b"0" * 64


# ----------------------------------------------------------- trace records


def test_waits_name_the_record_they_wait_for(res):
    a, b = res.stream(), res.stream()
    event = res.event()
    gate = res.gate()
    ort.trace_enable(True)
    ort.launch_kernel(a, gate, "gate")
    ort.event_record(event, a)
    ort.stream_wait_event(b, event)
    gate.open()
    ort.event_synchronize(event)
    ort.stream_synchronize(b)
    ort.trace_enable(False)
    records = ort.trace_drain()
    (record,) = [r for r in records if r["kind"] == "event_record"]
    (wait,) = [r for r in records if r["kind"] == "stream_wait"]
    (sync,) = [r for r in records if r["name"] == "orEventSynchronize"]
    assert record["correlation_id"] > 0
    assert wait["waited_for_correlation_id"] == record["correlation_id"]
    assert sync["waited_for_correlation_id"] == record["correlation_id"]
    assert sync["stream"] == ort.stream_get_id(a)
    assert all(r["waited_for_correlation_id"] == 0 for r in records if r not in (wait, sync))


def test_a_host_wait_for_queued_work_names_that_work(res, hostmem):
    # A copy with pageable memory returns only when it is done: its trace
    # says so, so that a tool replaying the trace knows the host waited.
    dev = res.malloc(64)
    buffer, address = hostmem.pageable(64)
    ort.trace_enable(True)
    ort.memcpy_async(address, dev, 64, ort.orMemcpyDeviceToHost, 0)
    ort.trace_enable(False)
    records = ort.trace_drain()
    (copy,) = [r for r in records if r["kind"] == "memcpy"]
    (wait,) = [r for r in records if r["kind"] == "synchronize"]
    assert wait["name"] == "memcpyDtoH wait" and wait["waited_for_correlation_id"] == copy["correlation_id"]
    assert copy["end_ns"] <= wait["end_ns"]  # (the copy may have ended before the host began to wait)


def test_records_beyond_the_buffer_are_counted_as_dropped(run_python):
    # OPENREG_TRACE_RECORDS bounds the records waiting to be drained; those
    # beyond it are counted, never dropped silently.
    code = """
import openreg_runtime as ort
s = ort.stream_create()
dev = ort.malloc(1)
ort.trace_enable(True)
for _ in range(600):
    ort.memset_async(dev, 0, 1, s)  # a launch record and a memset record each
ort.stream_synchronize(s)  # and one synchronize record
ort.trace_enable(False)
print(ort.trace_get_dropped_count(), len(ort.trace_drain()))
ort.trace_enable(True)  # switching on again starts a new count
print(ort.trace_get_dropped_count())
"""
    result = run_python(code, env={"OPENREG_TRACE_RECORDS": "1000"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(2 * 600 + 1 - 1000), "1000", "0"]
    bad = run_python("import openreg_runtime as ort; ort.get_device_count(); ort.malloc(1)",
                     env={"OPENREG_TRACE_RECORDS": "0"})
    assert "OPENREG_TRACE_RECORDS=0 is not a whole number of records" in bad.stderr
