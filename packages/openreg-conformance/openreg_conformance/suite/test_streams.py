"""Required: streams and events, as torch.Stream and torch.Event define them.

The contracts: work on one stream runs in order; a stream that waits for an
event (or for another stream) sees the work recorded before it; query() is
False while recorded work runs and True once it is done; synchronize() of a
stream or an event returns once its work is done; elapsed_time() is in
milliseconds.
"""

from __future__ import annotations

import time

import torch


def test_work_on_one_stream_runs_in_order(device, work):
    stream = torch.Stream(device)
    with stream:
        x = work.ones()
        y = work.enqueue(x)
        y.add_(1)
        z = y * 2
    stream.synchronize()
    assert z[0, :3].cpu().tolist() == [4.0] * 3, "contract: kernels of one stream run in the order they were queued"


def seen_after_waiting(device, work, wait) -> bool:
    """Whether a consumer stream, after wait(consumer, producer), copies the
    producer's finished result (2s) rather than what was there before."""
    producer, consumer = torch.Stream(device), torch.Stream(device)
    with producer:
        x = work.enqueue(work.ones()) + 1
    wait(consumer, producer)
    with consumer:
        copy = x.clone()
    consumer.synchronize()
    return torch.equal(copy.cpu(), torch.full((work.size, work.size), 2.0))


def wait_for_an_event(consumer, producer):
    ready = torch.Event(producer.device)
    ready.record(producer)
    consumer.wait_event(ready)


def test_a_stream_waiting_for_an_event_sees_the_recorded_work(device, work):
    assert seen_after_waiting(device, work, wait_for_an_event), (
        "contract: after Stream.wait_event(e), the stream's later work sees everything recorded before e")


def test_a_stream_waiting_for_a_stream_sees_its_work(device, work):
    assert seen_after_waiting(device, work, lambda consumer, producer: consumer.wait_stream(producer)), (
        "contract: after Stream.wait_stream(s), the stream's later work sees everything queued on s before")


def test_query_is_false_while_work_runs_and_true_after(device, work):
    stream = torch.Stream(device)
    with stream:
        work.enqueue(work.ones())
        done = torch.Event(device)
        done.record(stream)
    assert not done.query() and not stream.query(), (
        "contract: Event.query() and Stream.query() are False while the recorded work still runs")
    stream.synchronize()
    assert stream.query() and done.query(), "contract: query() is True once the work is done"


def test_stream_synchronize_waits_for_its_work(device, work):
    stream = torch.Stream(device)
    with stream:
        work.enqueue(work.ones())
        done = torch.Event(device)
        done.record(stream)
    stream.synchronize()
    assert done.query(), "contract: Stream.synchronize() returns only once the stream's work is done"


def test_event_synchronize_waits_for_the_recorded_work(device, work):
    stream = torch.Stream(device)
    with stream:
        work.enqueue(work.ones())
        done = torch.Event(device)
        done.record(stream)
        after = torch.Event(device)
        after.record(stream)
    done.synchronize()
    assert done.query(), "contract: Event.synchronize() returns only once the recorded work is done"
    stream.synchronize()
    assert after.query()


def test_elapsed_time_is_in_milliseconds(device, work):
    start, end = torch.Event(device, enable_timing=True), torch.Event(device, enable_timing=True)
    torch.accelerator.synchronize()
    began = time.perf_counter()
    start.record()
    work.enqueue(work.ones())
    end.record()
    end.synchronize()
    wall_ms = (time.perf_counter() - began) * 1000
    measured = start.elapsed_time(end)
    # The device's time between the events is most of the host's time around
    # them (the work takes about 200 ms): seconds would read 1000x smaller.
    assert 0.25 * wall_ms <= measured <= 1.05 * wall_ms + 1, (
        f"contract: Event.elapsed_time() is in milliseconds; {measured:.3f} between events around "
        f"{wall_ms:.0f} ms of the host's time")


def test_the_current_stream_follows_the_stream_context(device):
    default = torch.accelerator.current_stream(device)
    stream = torch.Stream(device)
    with stream:
        assert torch.accelerator.current_stream(device) == stream, (
            "contract: inside `with stream:`, torch.accelerator.current_stream() is that stream")
    assert torch.accelerator.current_stream(device) == default, "contract: the context restores the stream"
