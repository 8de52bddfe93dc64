"""The profiler: torch.profiler with the PrivateUse1 activity shows openreg's
kernels, copies and memsets on a device timeline (one lane per stream),
linked to the operators that launched them; the legacy autograd profiler
times operators with openreg events. Tests read the exported trace and the
profiler's events, never wall-clock time."""

from __future__ import annotations

import json
import warnings

import openreg_runtime
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, record_function, schedule

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
DEVICE_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}


def exported(prof, tmp_path) -> list[dict]:
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    return json.loads(path.read_text())["traceEvents"]


def complete_events(trace: list[dict], categories) -> list[dict]:
    return [e for e in trace if e.get("ph") == "X" and e.get("cat") in categories]


def native_stream_id(stream: torch.Stream) -> int:
    return openreg_runtime.stream_get_id(stream.stream_id)


def operators_by_external_id(trace: list[dict]) -> dict[int, dict]:
    return {e["args"]["External id"]: e for e in complete_events(trace, {"cpu_op"})}


def test_each_operator_kernel_is_on_its_device_and_stream_after_the_operator_began(tmp_path):
    a = torch.randn(64, 64, device="openreg:1")
    b = torch.randn(64, 64, device="openreg:1")
    torch.openreg.synchronize(1)
    with profile(activities=ACTIVITIES) as prof:
        c = torch.mm(a, b)
        d = torch.exp(c)
        e = d.sum()
    trace = exported(prof, tmp_path)
    kernels = complete_events(trace, {"kernel"})
    operators = operators_by_external_id(trace)
    launched_by = {}
    for kernel in kernels:
        assert kernel["pid"] == 1, kernel  # device 1
        assert kernel["tid"] == native_stream_id(torch.openreg.default_stream(1))
        assert kernel["dur"] >= 0
        operator = operators[kernel["args"]["External id"]]
        assert operator["ts"] <= kernel["ts"]
        launched_by.setdefault(operator["name"], []).append(kernel)
    assert {"aten::mm", "aten::exp", "aten::sum"} <= set(launched_by)
    torch.testing.assert_close(e.cpu(), torch.exp(a.cpu() @ b.cpu()).sum(), rtol=1e-4, atol=0)


def test_copies_and_memsets_are_device_activities(tmp_path):
    pinned = torch.randn(1024).pin_memory()
    with profile(activities=ACTIVITIES) as prof:
        x = pinned.to("openreg", non_blocking=True)
        back = x.to("cpu")
        torch.zeros(256, device="openreg")
    trace = exported(prof, tmp_path)
    copies = complete_events(trace, {"gpu_memcpy"})
    names = [c["name"] for c in copies]
    assert "memcpyHtoD" in names and "memcpyDtoH" in names
    assert all(c["dur"] >= 0 and c["pid"] == 0 for c in copies)
    operators = operators_by_external_id(trace)
    assert all("copy" in operators[c["args"]["External id"]]["name"] for c in copies)
    torch.testing.assert_close(back, pinned)


def test_side_stream_kernel_lands_on_its_own_lane(tmp_path):
    x = torch.randn(128, device="openreg")
    side = torch.Stream(device="openreg")
    torch.openreg.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        y = x * 2
        side.wait_stream(torch.openreg.current_stream())
        with side:
            z = torch.exp(x)
        torch.openreg.current_stream().wait_stream(side)
    trace = exported(prof, tmp_path)
    operators = operators_by_external_id(trace)
    lanes = {}
    for kernel in complete_events(trace, {"kernel"}):
        lanes[operators[kernel["args"]["External id"]]["name"]] = kernel["tid"]
    assert lanes["aten::mul"] == native_stream_id(torch.openreg.default_stream(0))
    assert lanes["aten::exp"] == native_stream_id(side)
    assert lanes["aten::mul"] != lanes["aten::exp"]
    lane_names = {e["tid"]: e["args"]["name"] for e in trace if e.get("ph") == "M" and e.get("name") == "thread_name"
                  and e.get("pid") == 0}
    assert lane_names.get(native_stream_id(side)) == f"openreg stream {native_stream_id(side)}"
    torch.testing.assert_close(z.cpu(), torch.exp(x.cpu()))
    torch.testing.assert_close(y.cpu(), x.cpu() * 2)



def test_event_record_and_stream_wait_are_on_their_stream_lanes(tmp_path, gate):
    # The side stream waits for an event recorded behind a gate on the main
    # stream, so its wait is queued (not skipped as already complete) and
    # holds its kernel until the main stream reaches the record.
    x = torch.randn(128, device="openreg")
    main, side = torch.openreg.current_stream(), torch.Stream(device="openreg")
    torch.openreg.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        held = gate(main)
        y = x * 2
        event = torch.Event(device="openreg")
        event.record(main)
        side.wait_event(event)
        with side:
            z = torch.exp(y)
        held.open()
        torch.openreg.synchronize()
    trace = exported(prof, tmp_path)
    syncs = {e["name"]: e for e in complete_events(trace, {"cuda_sync"})}
    record, wait = syncs["eventRecord"], syncs["streamWaitEvent"]
    assert (record["pid"], record["tid"]) == (0, native_stream_id(main))
    assert (wait["pid"], wait["tid"]) == (0, native_stream_id(side))
    assert record["dur"] == 0 and wait["dur"] >= 0
    kernels = {k["name"]: k for k in complete_events(trace, {"kernel"})}
    mul, exp = kernels["aten::mul"], kernels["aten::exp"]
    rounding = 0.002  # microseconds with three decimals, start and duration rounded apart
    assert mul["ts"] + mul["dur"] <= record["ts"] + rounding
    assert record["ts"] <= wait["ts"] + wait["dur"] + rounding
    assert wait["ts"] + wait["dur"] <= exp["ts"] + rounding
    torch.testing.assert_close(z.cpu(), torch.exp(x.cpu() * 2))

def test_key_averages_device_time_matches_the_runtime_event_timing():
    # A kernel whose device time is known from the runtime's own events.
    a = torch.randn(512, 512, device="openreg")
    b = torch.randn(512, 512, device="openreg")
    start, end = torch.Event(device="openreg", enable_timing=True), torch.Event(device="openreg", enable_timing=True)
    torch.openreg.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        start.record()
        for _ in range(5):
            torch.mm(a, b)
        end.record()
    end.synchronize()
    event_us = start.elapsed_time(end) * 1000
    # The five calls (the plain path's shape inference calls aten::mm again, inside).
    mms = [e for e in prof.events() if e.name == "aten::mm" and e.device_type == torch.autograd.DeviceType.CPU
           and (e.cpu_parent is None or e.cpu_parent.name != "aten::mm")]
    assert len(mms) == 5
    assert all(e.device_time_total > 0 for e in mms)
    # The kernels ran between the two event records on the same stream, one
    # after another, so their summed durations fit in the event interval,
    # and they took most of it (the stream ran nothing else).
    device_us = sum(e.device_time_total for e in mms)
    assert 0.5 * event_us <= device_us <= event_us * 1.01 + 1


def test_record_function_range_encloses_its_device_work(tmp_path):
    x = torch.randn(256, 256, device="openreg")
    torch.openreg.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        with record_function("my_block"):
            y = torch.tanh(x) @ x
        z = y + 1
    trace = exported(prof, tmp_path)
    annotations = [e for e in complete_events(trace, {"gpu_user_annotation"}) if e["name"] == "my_block"]
    assert len(annotations) == 1
    span = annotations[0]
    operators = operators_by_external_id(trace)
    launched_by = [(operators[k["args"]["External id"]]["name"], k) for k in complete_events(trace, {"kernel"})]
    inside = [k for name, k in launched_by if name in ("aten::tanh", "aten::mm")]
    outside = [k for name, k in launched_by if name == "aten::add"]
    assert len(inside) >= 2 and outside
    for kernel in inside:
        assert span["ts"] <= kernel["ts"] and kernel["ts"] + kernel["dur"] <= span["ts"] + span["dur"] + 0.01
    assert outside[0]["ts"] >= span["ts"] + span["dur"] - 0.01
    torch.testing.assert_close(z.cpu(), torch.tanh(x.cpu()) @ x.cpu() + 1, rtol=1e-4, atol=1e-3)


def test_profile_memory_reports_device_allocations_and_frees():
    with profile(activities=ACTIVITIES, profile_memory=True) as prof:
        x = torch.empty(1 << 20, device="openreg")  # 4 MiB
        del x
    events = prof.events()
    # An allocation inside an operator is counted to it; the free after it
    # is an event of its own.
    empty = next(e for e in events if e.name == "aten::empty")
    assert empty.device_memory_usage == 4 << 20 and empty.cpu_memory_usage == 0
    frees = [e.device_memory_usage for e in events if e.name == "[memory]"]
    assert frees == [-(4 << 20)]


def test_schedule_and_on_trace_ready_record_only_active_steps(tmp_path):
    traces = []
    x = torch.randn(32, device="openreg")

    def ready(prof):
        traces.append(exported(prof, tmp_path))

    with profile(activities=ACTIVITIES, schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                 on_trace_ready=ready) as prof:
        for step in range(5):
            with record_function(f"step{step}"):
                torch.exp(x)
            prof.step()
    assert len(traces) == 1
    annotations = {e["name"] for e in complete_events(traces[0], {"gpu_user_annotation"})}
    assert annotations == {"step2", "step3", "ProfilerStep#2", "ProfilerStep#3"}
    kernels = complete_events(traces[0], {"kernel"})
    assert len(kernels) == 2


def mlp_step():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to("openreg")
    x, y = torch.randn(8, 16, device="openreg"), torch.randint(0, 4, (8,), device="openreg")
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    return loss


@pytest.mark.parametrize("use_kineto", [False, True])
def test_legacy_profiler_reports_non_negative_device_times_without_warnings(use_kineto, caplog, capfd):
    mlp_step()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.autograd.profiler.profile(use_device="openreg", use_kineto=use_kineto) as prof:
            mlp_step()
            torch.openreg.synchronize()
        averages = prof.key_averages()
    assert not [w for w in caught if "PrivateUse1" in str(w.message) or "privateuse1" in str(w.message)]
    assert "not enabled" not in caplog.text
    assert "not enabled" not in capfd.readouterr().err  # PyTorch's C++ warnings go to stderr
    assert averages
    for event in averages:
        assert event.cpu_time_total >= 0
        assert event.device_time_total >= 0
        assert event.self_device_time_total >= 0
    assert sum(e.self_device_time_total for e in averages) > 0
    assert any(e.key == "aten::addmm" and e.device_time_total > 0 for e in averages)


def test_a_stream_wait_names_the_event_record_it_waits_for(tmp_path, gate):
    # In the trace's args and in torch.openreg.profiler_activity(), which
    # tools that replay the device's timeline read (openreg-perf).
    main, side = torch.openreg.current_stream(), torch.Stream(device="openreg")
    torch.openreg.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        held = gate(main)
        event = torch.Event(device="openreg")
        event.record(main)
        side.wait_event(event)
        held.open()
        torch.openreg.synchronize()
    syncs = {e["name"]: e for e in complete_events(exported(prof, tmp_path), {"cuda_sync"})}
    assert syncs["streamWaitEvent"]["args"]["waits for"] == syncs["eventRecord"]["args"]["correlation"]
    records = torch.openreg.profiler_activity()
    (record,) = [r for r in records if r.kind == "event_record"]
    (wait,) = [r for r in records if r.kind == "stream_wait"]
    assert wait.waited_for_correlation_id == record.correlation_id > 0
    assert (record.stream, wait.stream) == (native_stream_id(main), native_stream_id(side))


def test_profiler_activity_ties_each_launch_to_its_operator():
    x = torch.randn(8, 8, device="openreg")
    with profile(activities=ACTIVITIES, record_shapes=True) as prof:
        y = torch.mm(x, x)
    operators = {e.correlation_id(): e for e in prof.profiler.kineto_results.events()
                 if e.device_type() == torch.autograd.DeviceType.CPU}
    records = torch.openreg.profiler_activity()
    (launch,) = [r for r in records if r.kind == "launch" and r.name == "aten::mm"]
    (kernel,) = [r for r in records if r.kind == "kernel" and r.correlation_id == launch.correlation_id]
    operator = operators[launch.external_correlation_id]
    # The plain path launches from mm's out= variant, also named aten::mm, whose shapes add the output's.
    assert operator.name() == "aten::mm" and operator.shapes()[:2] == [[8, 8], [8, 8]]
    assert launch.start_ns <= kernel.start_ns <= kernel.end_ns
    torch.testing.assert_close(y.cpu(), x.cpu() @ x.cpu())


LONG_RECORDING = """
import os, warnings, torch
from torch.profiler import ProfilerActivity, profile
from torch_openreg import _C

def kept(count):
    x = torch.zeros(1, device="openreg")
    torch.openreg.synchronize()
    if os.environ["CONSUMER"] == "profiler":
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
            for _ in range(count):
                x.add_(1)
        records = torch.openreg.profiler_activity()
    else:
        with torch.openreg.record_activity() as recording:
            for _ in range(count):
                x.add_(1)
        records = recording.activity
    assert x.item() == count
    # aten::add_ (in place, the fast path) or aten::add (add.out into x, the plain path)
    return sum(1 for r in records if r.kind == "kernel" and r.name in ("aten::add_", "aten::add"))

warnings.simplefilter("error")  # none while every record is kept
print("drained while running:", kept(20_000), flush=True)
warnings.simplefilter("default")
_C._testing.pause_draining(True)
print("draining held back:", kept(20_000), flush=True)
"""


@pytest.mark.parametrize("consumer,dropped", [
    ("profiler", "openreg profiler: the runtime dropped"),
    ("record_activity", "torch.openreg.record_activity(): the runtime dropped"),
])
def test_a_long_recording_keeps_every_kernel_and_dropped_records_are_reported(python, consumer, dropped):
    # The runtime holds OPENREG_TRACE_RECORDS records until they are drained
    # (2^20 by default; 2^15 here, so that a short program overflows it):
    # 20,000 kernels leave 40,000 records. A profiler session, or a
    # record_activity() recording, drains while the program runs, so it keeps
    # every kernel; with its draining held back, the runtime drops records
    # and it warns, on the standard error as Kineto does when CUPTI drops
    # records.
    result = python.run(LONG_RECORDING, env={"OPENREG_TRACE_RECORDS": str(1 << 15), "CONSUMER": consumer})
    lines = result.stdout.splitlines()
    assert lines[0] == "drained while running: 20000"
    assert int(lines[1].split(": ")[1]) < 20_000
    assert result.stderr.count(dropped) == 1, result.stderr
    assert "device activity records" in result.stderr
