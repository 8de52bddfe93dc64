"""Tracing: launch records on the host, device records on the stream, linked
by correlation ids; nothing is recorded while tracing is off."""

import openreg_runtime as ort
import pytest

pytestmark = pytest.mark.sanitizer_safe

KEYS = {"kind", "name", "device", "stream", "start_ns", "end_ns", "correlation_id", "external_correlation_id",
        "waited_for_correlation_id"}


def run_workload(res, device: int):
    s = res.stream(device=device)
    dev = res.malloc(4096, device=device)
    pinned = res.malloc_host(4096)
    ort.launch_kernel(s, lambda: None, "traced_kernel")
    ort.memcpy_async(dev, pinned, 4096, ort.orMemcpyHostToDevice, s)
    ort.memset_async(dev, 0, 4096, s)
    ort.memcpy_async(pinned, dev, 4096, ort.orMemcpyDeviceToHost, s)
    ort.stream_synchronize(s)
    return s


def test_trace_records_launch_and_device_activity(res):
    before = ort.trace_get_timestamp()
    ort.trace_enable(True)
    s = run_workload(res, device=1)
    ort.trace_enable(False)
    after = ort.trace_get_timestamp()
    records = ort.trace_drain()
    assert all(set(r) == KEYS for r in records)
    stream_id = ort.stream_get_id(s)

    launches = [r for r in records if r["kind"] == "launch"]
    device_side = [r for r in records if r["kind"] in ("kernel", "memcpy", "memset")]
    expected = [("kernel", "traced_kernel"), ("memcpy", "memcpyHtoD"),
                ("memset", "memset"), ("memcpy", "memcpyDtoH")]
    assert [(r["kind"], r["name"]) for r in device_side] == expected
    assert [r["name"] for r in launches] == [name for _, name in expected]

    by_correlation = {r["correlation_id"]: r for r in launches}
    assert len(by_correlation) == len(launches)  # unique ids
    for record in device_side:
        launch = by_correlation[record["correlation_id"]]
        assert record["correlation_id"] > 0
        assert launch["name"] == record["name"]
        assert record["device"] == launch["device"] == 1
        assert record["stream"] == launch["stream"] == stream_id
        assert before <= launch["start_ns"] <= launch["end_ns"] <= after
        assert before <= record["start_ns"] <= record["end_ns"] <= after
        # The device could not start before the host began queueing it.
        assert launch["start_ns"] <= record["start_ns"]
    # Device records of one stream run in order.
    for earlier, later in zip(device_side, device_side[1:], strict=False):
        assert earlier["end_ns"] <= later["start_ns"]

    syncs = [r for r in records if r["kind"] == "synchronize"]
    assert [r["name"] for r in syncs] == ["orStreamSynchronize"]
    assert syncs[0]["stream"] == stream_id and syncs[0]["device"] == 1
    assert syncs[0]["start_ns"] <= syncs[0]["end_ns"]
    # Drained records are gone.
    assert ort.trace_drain() == []


def test_trace_synchronous_calls(res):
    dev = res.malloc(256)
    ort.trace_enable(True)
    ort.memset(dev, 1, 256)
    ort.device_synchronize()
    ort.trace_enable(False)
    records = ort.trace_drain()
    memsets = [r for r in records if r["name"] == "memset"]
    assert {r["kind"] for r in memsets} == {"launch", "memset"}
    assert len({r["correlation_id"] for r in memsets}) == 1
    assert all(r["stream"] == ort.stream_get_id(ort.device_get_default_stream(0))
               for r in memsets)
    assert any(r["kind"] == "synchronize" and r["name"] == "orDeviceSynchronize"
               for r in records)


def test_copies_name_whether_they_stay_on_one_device(res):
    s = res.stream(device=0)
    on0, also_on0, on1 = res.malloc(256, device=0), res.malloc(256, device=0), res.malloc(256, device=1)
    ort.trace_enable(True)
    ort.memcpy_async(also_on0, on0, 256, ort.orMemcpyDeviceToDevice, s)
    ort.memcpy_async(on1, on0, 256, ort.orMemcpyDeviceToDevice, s)  # crosses the device link
    ort.stream_synchronize(s)
    ort.trace_enable(False)
    copies = [r["name"] for r in ort.trace_drain() if r["kind"] == "memcpy"]
    assert copies == ["memcpyDtoD", "memcpyPtoP"]


def test_nothing_recorded_when_disabled(res):
    ort.trace_enable(False)
    run_workload(res, device=0)
    ort.device_synchronize()
    assert ort.trace_drain() == []


def test_records_taken_stay_until_drained_after_disable(res):
    ort.trace_enable(True)
    ort.launch_kernel(0, lambda: None, "kept")
    ort.stream_synchronize(0)
    ort.trace_enable(False)
    ort.launch_kernel(0, lambda: None, "not_recorded")
    ort.stream_synchronize(0)
    names = [r["name"] for r in ort.trace_drain()]
    assert names.count("kept") == 2
    assert "not_recorded" not in names


def test_many_records_drain_in_batches(res):
    s = res.stream()
    ort.trace_enable(True)
    for i in range(300):
        ort.launch_kernel(s, lambda: None, f"k{i}")
    ort.stream_synchronize(s)
    ort.trace_enable(False)
    records = ort.trace_drain()  # more than one internal batch of 256
    kernels = [r["name"] for r in records if r["kind"] == "kernel"]
    assert kernels == [f"k{i}" for i in range(300)]


def test_long_names_are_truncated(res):
    name = "k" * 100
    ort.trace_enable(True)
    ort.launch_kernel(0, lambda: None, name)
    ort.stream_synchronize(0)
    ort.trace_enable(False)
    records = [r for r in ort.trace_drain() if r["kind"] in ("launch", "kernel")]
    assert len(records) == 2 and all(r["name"] == "k" * 63 for r in records)


def test_timestamp_is_monotonic():
    stamps = [ort.trace_get_timestamp() for _ in range(100)]
    assert stamps == sorted(stamps) and stamps[0] > 0


def test_launch_records_carry_the_external_correlation_id(res):
    s = res.stream()
    ort.trace_enable(True)
    ort.launch_kernel(s, lambda: None, "outside")
    ort.trace_push_external_correlation_id(41)
    ort.trace_push_external_correlation_id(42)
    ort.launch_kernel(s, lambda: None, "inner")
    assert ort.trace_pop_external_correlation_id() == 42
    ort.launch_kernel(s, lambda: None, "outer")
    assert ort.trace_pop_external_correlation_id() == 41
    ort.stream_synchronize(s)
    ort.trace_enable(False)
    launches = {r["name"]: r for r in ort.trace_drain() if r["kind"] == "launch"}
    assert launches["outside"]["external_correlation_id"] == 0
    assert launches["inner"]["external_correlation_id"] == 42
    assert launches["outer"]["external_correlation_id"] == 41


def test_popping_an_empty_external_correlation_stack_fails():
    with pytest.raises(ort.Error) as failure:
        ort.trace_pop_external_correlation_id()
    assert failure.value.name == "orErrorInvalidValue"
    assert "pushed no id" in str(failure.value)
    ort.get_last_error()


def test_event_record_and_stream_wait_are_on_their_streams(res):
    # Stream a holds a gate, then records the event; stream b waits for it,
    # then runs a kernel: b's wait cannot end before a reaches the record,
    # nor b's kernel start before the wait ends.
    a, b = res.stream(), res.stream()
    event = res.event()
    gate = res.gate()
    ort.trace_enable(True)
    ort.launch_kernel(a, gate, "gate")
    ort.event_record(event, a)
    ort.stream_wait_event(b, event)
    ort.launch_kernel(b, lambda: None, "after_wait")
    gate.started.wait(5)
    gate.open()
    ort.stream_synchronize(b)
    ort.trace_enable(False)
    records = ort.trace_drain()
    launches = {r["correlation_id"]: r for r in records if r["kind"] == "launch"}
    device_side = {r["kind"]: r for r in records if r["kind"] != "launch"}
    record, wait, kernel = device_side["event_record"], device_side["stream_wait"], device_side["kernel"]
    assert record["name"] == "eventRecord" and wait["name"] == "streamWaitEvent"
    assert record["stream"] == ort.stream_get_id(a) and wait["stream"] == ort.stream_get_id(b)
    for r in (record, wait):
        launch = launches[r["correlation_id"]]  # linked to the host call that queued it
        assert launch["name"] == r["name"] and launch["stream"] == r["stream"] and r["device"] == 0
        assert launch["start_ns"] <= r["start_ns"] <= r["end_ns"]
    assert record["start_ns"] == record["end_ns"]  # the instant the event captured
    assert record["start_ns"] <= wait["end_ns"] <= kernel["start_ns"]


def test_a_wait_for_a_completed_event_is_recorded_while_tracing(res):
    """The dependency is the program's: a replay of the trace (openreg-perf) must see it however fast
    the simulator ran the work waited for. Not tracing, such a wait queues nothing."""
    a, b = res.stream(), res.stream()
    event = res.event()
    ort.event_record(event, a)
    ort.stream_synchronize(a)
    ort.trace_enable(True)
    ort.stream_wait_event(b, event)
    ort.stream_synchronize(b)
    ort.trace_enable(False)
    waits = [r for r in ort.trace_drain() if r["kind"] == "stream_wait"]
    assert len(waits) == 1 and waits[0]["name"] == "streamWaitEvent"
