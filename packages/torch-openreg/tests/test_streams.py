"""Streams, events and the device guard: torch.Stream / torch.Event on
openreg, the stream pool and its priorities, stream and device context
managers, synchronisation. Streams are blocked with gates (conftest), never
with timing."""

from __future__ import annotations

import threading

import openreg_runtime
import pytest
import torch


def _device_copy(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    out.copy_(x)
    return out


def test_torch_stream_defaults_to_the_current_device():
    assert torch.Stream("openreg").device == torch.device("openreg", 0)
    with torch.openreg.device(1):
        assert torch.Stream("openreg").device_index == 1
        assert torch.Stream().device == torch.device("openreg", 1)
        assert torch.openreg.Stream().device_index == 1
    assert torch.Stream("openreg:1").device_index == 1
    assert torch.openreg.Stream("openreg:1").device_index == 1


def test_new_streams_are_not_the_default_stream():
    default = torch.openreg.default_stream()
    stream = torch.openreg.Stream()
    assert stream != default
    assert isinstance(stream, torch.Stream)
    assert torch.openreg.current_stream() == default
    assert default.device_type == torch.openreg.current_stream().device_type


def test_stream_pool_priorities():
    low, high = openreg_runtime.device_get_stream_priority_range()
    assert (low, high) == (0, -1)
    for device in (0, 1):
        normal = torch.openreg.Stream(device, priority=0)
        urgent = torch.openreg.Stream(device, priority=-1)
        very_urgent = torch.Stream(f"openreg:{device}", priority=-5)  # clamped
        assert openreg_runtime.stream_get_priority(normal.native_handle) == 0
        assert openreg_runtime.stream_get_priority(urgent.native_handle) == -1
        assert openreg_runtime.stream_get_priority(very_urgent.native_handle) == -1
        for s in (normal, urgent, very_urgent):
            assert openreg_runtime.stream_get_device(s.native_handle) == device
    # The pool hands out a bounded set of streams round robin.
    ids = {torch.openreg.Stream().stream_id for _ in range(40)}
    assert 1 < len(ids) <= 32


def test_stream_query_and_synchronize(gate):
    stream = torch.openreg.Stream()
    assert stream.query()
    g = gate(stream)
    assert not stream.query()
    g.open()
    stream.synchronize()
    assert stream.query()
    assert g.finished.is_set()


def test_work_follows_the_current_stream(gate):
    side = torch.openreg.Stream()
    x = torch.arange(1000, dtype=torch.float32, device="openreg")
    torch.openreg.synchronize()  # x is filled on the default stream; side must not race it
    g = gate(side)
    with torch.openreg.stream(side):
        assert torch.openreg.current_stream() == side
        y = x.to(torch.float64)  # a conversion kernel, queued behind the gate on `side`
    assert not side.query()
    assert torch.openreg.current_stream().query()  # the default stream is free
    g.open()
    side.synchronize()
    assert torch.equal(y.cpu(), torch.arange(1000, dtype=torch.float64))
    y.record_stream(side)


def test_wait_stream_orders_work(gate):
    producer = torch.openreg.Stream()
    consumer = torch.openreg.current_stream()
    src = torch.arange(4096, dtype=torch.float32, device="openreg")
    dst = torch.zeros(4096, device="openreg")
    torch.openreg.synchronize()  # filled on the default stream; the producer must not race them
    g = gate(producer)
    with torch.openreg.stream(producer):
        staged = _device_copy(src)  # behind the gate
    consumer.wait_stream(producer)
    dst.copy_(staged)  # must wait for the producer
    assert not consumer.query()
    g.open()
    assert torch.equal(dst.cpu(), torch.arange(4096, dtype=torch.float32))
    staged.record_stream(consumer)


def test_events_record_query_wait_and_synchronize(gate):
    producer = torch.openreg.Stream()
    consumer = torch.openreg.Stream()
    event = torch.Event("openreg")
    assert event.query()  # never recorded: complete
    g = gate(producer)
    event.record(producer)
    assert not event.query()
    x = torch.full((256,), 7.0, device="openreg")  # filled on the default stream
    consumer.wait_stream(torch.openreg.current_stream())
    consumer.wait_event(event)
    with torch.openreg.stream(consumer):
        y = x.to(torch.int32)  # queued behind the event
    assert not consumer.query()
    g.open()
    event.synchronize()
    assert event.query()
    consumer.synchronize()
    assert torch.equal(y.cpu(), torch.full((256,), 7, dtype=torch.int32))
    y.record_stream(consumer)


def test_event_wait_and_stream_record_event(gate):
    first = torch.openreg.Stream()
    second = torch.openreg.Stream()
    g = gate(first)
    event = first.record_event()
    assert isinstance(event, torch.Event)
    event.wait(second)
    assert not second.query()
    g.open()
    second.synchronize()
    assert event.query() and second.query()


def test_elapsed_time_with_timing_enabled():
    start = torch.Event("openreg", enable_timing=True)
    end = torch.Event("openreg", enable_timing=True)
    start.record()
    x = torch.randn(256, 256, device="openreg")
    (x @ x).sum().item()
    end.record()
    end.synchronize()
    elapsed = start.elapsed_time(end)
    assert isinstance(elapsed, float) and elapsed >= 0.0
    # torch.openreg.Event is a torch.Event on the current device.
    timed = torch.openreg.Event(enable_timing=True)
    assert isinstance(timed, torch.openreg.Event) and isinstance(timed, torch.Event)
    timed.record()
    timed.synchronize()
    assert end.elapsed_time(timed) >= 0.0


def test_elapsed_time_needs_timing_records_and_completion(gate):
    plain_a, plain_b = torch.Event("openreg"), torch.Event("openreg")
    plain_a.record()
    plain_b.record()
    plain_b.synchronize()
    with pytest.raises(ValueError, match="enable_timing"):
        plain_a.elapsed_time(plain_b)
    timed_a = torch.Event("openreg", enable_timing=True)
    timed_b = torch.Event("openreg", enable_timing=True)
    with pytest.raises(ValueError, match="recorded"):
        timed_a.elapsed_time(timed_b)
    # Recorded but not completed (the event query goes to the backend).
    stream = torch.openreg.Stream()
    g = gate(stream)
    timed_a.record(stream)
    timed_b.record(stream)
    with pytest.raises(RuntimeError, match="completed"):
        timed_a.elapsed_time(timed_b)
    g.open()
    timed_b.synchronize()
    assert timed_a.elapsed_time(timed_b) >= 0.0


def test_elapsed_time_between_devices_is_refused_like_cuda():
    # Each device has its own clock; CUDA refuses events of two devices.
    on0 = torch.Event("openreg:0", enable_timing=True)
    on1 = torch.Event("openreg:1", enable_timing=True)
    on0.record(torch.openreg.current_stream(0))
    on1.record(torch.openreg.current_stream(1))
    on0.synchronize()
    on1.synchronize()
    for start, end in ((on0, on1), (on1, on0)):
        with pytest.raises(RuntimeError, match="events belong to different openreg devices"):
            start.elapsed_time(end)


def test_events_across_devices(gate):
    on1 = torch.openreg.Stream(1)
    g = gate(on1)
    with torch.openreg.device(1):
        event = torch.Event("openreg:1")
        event.record(on1)
    waiter = torch.openreg.current_stream(0)
    waiter.wait_event(event)  # a stream of device 0 waits for device 1
    assert not waiter.query()
    g.open()
    waiter.synchronize()
    assert event.query()


def test_stream_context_switches_device_and_restores():
    on1 = torch.openreg.Stream(1)
    assert torch.openreg.current_device() == 0
    with torch.openreg.stream(on1):
        assert torch.openreg.current_device() == 1
        assert torch.openreg.current_stream() == on1
        assert torch.empty(1, device="openreg").device.index == 1
    assert torch.openreg.current_device() == 0
    assert torch.openreg.current_stream(1) == torch.openreg.default_stream(1)
    # torch.Stream is a context manager too (through torch.accelerator).
    with on1:
        assert torch.accelerator.current_device_index() == 1
        assert torch.accelerator.current_stream() == on1
    assert torch.accelerator.current_device_index() == 0
    assert torch.accelerator.current_stream(1) == torch.openreg.default_stream(1)
    # None is a no-op.
    with torch.openreg.stream(None):
        assert torch.openreg.current_stream() == torch.openreg.default_stream()


@pytest.mark.parametrize("set_stream", [torch.openreg.set_stream, torch.accelerator.set_stream],
                         ids=["openreg", "accelerator"])
def test_set_stream_makes_the_streams_device_current(set_stream):
    # As torch.cuda.set_stream: new tensors then go to the stream's device.
    on1 = torch.openreg.Stream(1)
    set_stream(on1)
    assert torch.openreg.current_device() == 1
    assert torch.openreg.current_stream() == on1
    assert torch.empty(1, device="openreg").device == torch.device("openreg", 1)
    set_stream(torch.openreg.default_stream(0))
    assert torch.openreg.current_device() == 0
    assert torch.openreg.current_stream(1) == on1  # each device keeps its current stream


def test_streams_report_their_priority_like_cuda_streams():
    assert torch.openreg.Stream(priority=-1).priority == -1
    assert torch.openreg.Stream(1, priority=0).priority == 0
    assert torch.openreg.default_stream().priority == 0
    assert torch.openreg.current_stream(1).priority == 0


def test_set_stream_is_per_device_and_per_thread():
    s0, s1 = torch.openreg.Stream(0), torch.openreg.Stream(1)
    torch.openreg.set_stream(s0)
    torch.openreg.set_stream(s1)
    assert torch.openreg.current_stream(0) == s0
    assert torch.openreg.current_stream(1) == s1
    seen = {}

    def other_thread():
        seen["stream"] = torch.openreg.current_stream(0)
        seen["device"] = torch.openreg.current_device()

    thread = threading.Thread(target=other_thread)
    thread.start()
    thread.join()
    assert seen["stream"] == torch.openreg.default_stream(0)
    assert seen["device"] == 0


def test_device_guard_in_ops_uses_the_tensor_device():
    x1 = torch.arange(8, dtype=torch.float32, device="openreg:1")
    assert torch.openreg.current_device() == 0
    y1 = x1 * 2  # runs on device 1 under a guard, leaves the current device alone
    assert y1.device == torch.device("openreg", 1)
    assert torch.openreg.current_device() == 0
    assert torch.equal(y1.cpu(), torch.arange(8, dtype=torch.float32) * 2)


def test_device_synchronize_waits_for_every_stream(gate):
    side = torch.openreg.Stream()
    src = torch.arange(2048, dtype=torch.float32, device="openreg")
    dst = torch.zeros(2048, device="openreg")
    torch.openreg.synchronize()
    g = gate(side)
    with torch.openreg.stream(side):
        dst.copy_(src)  # behind the gate
    opener = threading.Timer(0.05, g.open)
    opener.start()
    torch.openreg.synchronize()  # must wait for the gate and the copy
    opener.join()
    assert side.query()
    # Read on the default stream without any other synchronisation.
    assert torch.equal(dst.cpu(), torch.arange(2048, dtype=torch.float32))


def test_accelerator_synchronize_and_torch_stream_synchronize(gate):
    side = torch.openreg.Stream(1)
    g = gate(side)
    opener = threading.Timer(0.05, g.open)
    opener.start()
    torch.accelerator.synchronize(1)
    opener.join()
    assert side.query()
