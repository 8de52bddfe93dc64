"""Events: ordering across streams and devices, queries, synchronisation,
elapsed time and its error paths."""

import ctypes
import threading
import time

import openreg_runtime as ort
import pytest

pytestmark = pytest.mark.sanitizer_safe


@pytest.mark.parametrize("devices", [(0, 0), (0, 1), (1, 0)],
                         ids=["same-device", "0-to-1", "1-to-0"])
def test_stream_waits_for_event_recorded_after_blocked_kernel(res, gate, hostmem, devices):
    dev_a, dev_b = devices
    a = res.stream(device=dev_a)
    b = res.stream(device=dev_b)
    event = res.event(device=dev_a)
    buf = res.malloc(256, device=dev_a)
    copy = res.malloc(256, device=dev_b)
    ort.memset(buf, 0x11, 256)
    ort.memset(copy, 0x00, 256)
    a_finished = threading.Event()
    b_observed = {}

    def a_tail():
        a_finished.set()

    def b_kernel():
        b_observed["a_finished"] = a_finished.is_set()
        b_observed["bytes"] = ctypes.string_at(ort.kernel_translate_pointer(copy, 256), 256)

    b_ran = threading.Event()
    ort.launch_kernel(a, gate, "gate")
    ort.memset_async(buf, 0x22, 256, a)
    ort.launch_kernel(a, a_tail, "a_tail")
    ort.event_record(event, a)
    ort.stream_wait_event(b, event)  # the host does not wait
    ort.memcpy_async(copy, buf, 256, ort.orMemcpyDeviceToDevice, b)
    ort.launch_kernel(b, b_kernel, "b_kernel")
    ort.launch_kernel(b, b_ran.set, "b_done")

    assert gate.started.wait(10)
    assert ort.event_query(event) is False
    # B has nothing else to wait for: if it ignored the event it would run now.
    assert not b_ran.wait(0.3)
    assert ort.stream_query(b) is False
    gate.open()
    ort.stream_synchronize(b)
    assert b_observed == {"a_finished": True, "bytes": b"\x22" * 256}
    assert ort.event_query(event) is True
    assert hostmem.device_read(copy, 256) == b"\x22" * 256


def test_event_never_recorded_imposes_no_wait(res):
    s = res.stream()
    event = res.event()
    assert ort.event_query(event) is True
    ort.event_synchronize(event)  # returns at once
    ort.stream_wait_event(s, event)
    ran = threading.Event()
    ort.launch_kernel(s, ran.set, "after_wait")
    assert ran.wait(10)
    ort.stream_synchronize(s)


def test_wait_on_completed_event_imposes_no_wait(res, gate):
    a = res.stream()
    b = res.stream()
    event = res.event()
    ort.event_record(event, a)
    ort.event_synchronize(event)
    ort.launch_kernel(a, gate, "gate")  # a is blocked again, after the capture
    ort.stream_wait_event(b, event)
    ran = threading.Event()
    ort.launch_kernel(b, ran.set, "b")
    assert ran.wait(10)
    gate.open()


def test_recording_again_replaces_the_capture(res, gate):
    blocked = res.stream()
    idle = res.stream()
    event = res.event()
    ort.launch_kernel(blocked, gate, "gate")
    ort.event_record(event, blocked)
    assert ort.event_query(event) is False
    ort.event_record(event, idle)
    ort.event_synchronize(event)  # waits for idle only; would hang on blocked
    assert ort.event_query(event) is True
    assert ort.stream_query(blocked) is False
    gate.open()


def test_event_synchronize_blocks_until_capture_done(res, gate):
    for flags in (ort.orEventDefault, ort.orEventBlockingSync):
        g = gate if flags == ort.orEventDefault else res.gate()
        s = res.stream()
        event = res.event(flags)
        ort.launch_kernel(s, g, "gate")
        ort.event_record(event, s)
        done = threading.Event()

        def sync(event=event, done=done):
            ort.event_synchronize(event)
            done.set()

        t = threading.Thread(target=sync)
        t.start()
        assert not done.wait(0.3)
        g.open()
        t.join(10)
        assert done.is_set() and g.finished.is_set()


def test_destroyed_event_still_orders_waiting_work(res, gate):
    a = res.stream()
    b = res.stream()
    event = ort.event_create()
    ort.launch_kernel(a, gate, "gate")
    ort.event_record(event, a)
    ort.stream_wait_event(b, event)
    ort.event_destroy(event)  # work already waiting still waits for the capture
    observed = {}
    ort.launch_kernel(b, lambda: observed.setdefault("gate_done", gate.finished.is_set()), "b")
    assert not ort.stream_query(b)
    gate.open()
    ort.stream_synchronize(b)
    assert observed == {"gate_done": True}


def test_elapsed_time_is_at_least_the_kernel_sleep(res):
    s = res.stream()
    start, end = res.event(), res.event()
    inner = {}

    def sleeper():
        t0 = time.monotonic_ns()
        time.sleep(0.05)
        inner["ms"] = (time.monotonic_ns() - t0) / 1e6

    ort.event_record(start, s)
    ort.launch_kernel(s, sleeper, "sleeper")
    ort.event_record(end, s)
    ort.event_synchronize(end)
    elapsed = ort.event_elapsed_time(start, end)
    # Lower bounds only (float32 result: allow its rounding).
    assert elapsed >= 50.0 - 1e-3
    assert elapsed >= inner["ms"] - 1e-3
    assert ort.event_elapsed_time(start, start) == 0.0
    assert ort.event_elapsed_time(end, start) == pytest.approx(-elapsed)


def test_elapsed_time_errors(res, gate, raises_or):
    s = res.stream()
    recorded = res.event()
    never = res.event()
    untimed = res.event(ort.orEventDisableTiming)
    ort.event_record(recorded, s)
    ort.stream_synchronize(s)

    with raises_or("orErrorInvalidResourceHandle", "recorded"):
        ort.event_elapsed_time(recorded, never)
    with raises_or("orErrorInvalidResourceHandle", "recorded"):
        ort.event_elapsed_time(never, recorded)

    ort.event_record(untimed, s)
    ort.stream_synchronize(s)
    with raises_or("orErrorInvalidResourceHandle", "orEventDisableTiming"):
        ort.event_elapsed_time(recorded, untimed)
    with raises_or("orErrorInvalidResourceHandle", "orEventDisableTiming"):
        ort.event_elapsed_time(untimed, recorded)

    # Each device has its own clock: events of two devices are not compared.
    other_device = res.event(device=1)
    ort.event_record(other_device, res.stream(device=1))
    ort.set_device(1)
    ort.device_synchronize()
    ort.set_device(0)
    with raises_or("orErrorInvalidResourceHandle", "different openreg devices (0 and 1)"):
        ort.event_elapsed_time(recorded, other_device)

    # Not finished: NotReady, with its own message (not a stale one).
    with pytest.raises(ort.Error):
        ort.free(12345)  # leaves an unrelated message as this thread's last
    pending = res.event()
    ort.launch_kernel(s, gate, "gate")
    ort.event_record(pending, s)
    with raises_or("orErrorNotReady", "not completed") as info:
        ort.event_elapsed_time(recorded, pending)
    assert "orFree" not in str(info.value)
    with raises_or("orErrorNotReady"):
        ort.event_elapsed_time(pending, recorded)
    gate.open()
    ort.event_synchronize(pending)
    assert ort.event_elapsed_time(recorded, pending) >= 0.0


def test_event_flags_and_disable_timing_still_orders(res, gate):
    s = res.stream()
    e = res.event(ort.orEventBlockingSync | ort.orEventDisableTiming)
    ort.launch_kernel(s, gate, "gate")
    ort.event_record(e, s)
    assert ort.event_query(e) is False
    gate.open()
    ort.event_synchronize(e)
    assert ort.event_query(e) is True


def test_event_on_default_stream(res):
    e = res.event(device=1)
    ort.set_device(1)
    ort.event_record(e)  # stream 0: device 1's default stream
    ort.event_synchronize(e)
    assert ort.event_query(e) is True
    ort.set_device(0)
