"""What a program did on openreg: every piece of device work with the operator that queued it, and
every time the host waited. The input of the replay (timeline.py).

It reads one public source, torch.openreg.record_activity(): the runtime's activity records (launches,
device work, event records, waits) and the operator calls that queued the work (names, shapes, dtypes,
scalar arguments, as torch.profiler's record_shapes describes them). It costs the program about a
microsecond per operator, where a torch.profiler session with record_shapes costs tens once its
results are read. Not here: costs (costs/), times (model.py), or any prediction.
"""

from __future__ import annotations

import bisect
import functools
import gc
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import openreg_runtime
import torch
from torch.nn.modules.module import register_module_forward_pre_hook
from torch.optim.optimizer import register_optimizer_step_pre_hook

from .costs import OpCall

# Runtime record kinds that occupy a stream (orActivityKind in openreg.h).
DEVICE_KINDS = ("kernel", "memcpy", "memset", "event_record", "stream_wait")


@dataclass(slots=True)
class Work:
    """One piece of device work, in the order the host queued it (its correlation id)."""

    correlation: int
    kind: str  # one of DEVICE_KINDS
    name: str  # the kernel's name, "memcpyHtoD", "eventRecord", ...
    device: int
    stream: int
    queued_ns: int  # when the host queued it (the runtime's clock)
    measured_ns: tuple[int, int]  # when it ran on the simulator
    op: OpCall | None = None  # the operator that queued it, if one was recorded (equal calls: one OpCall)
    waits_for: int = 0  # stream_wait: the correlation id of the event record it waits for
    call: int = 0  # which call of op queued it (the recording's operator id): one per call, unlike op


@dataclass(slots=True)
class HostWait:
    """The host blocked until work finished: a stream, a whole device (stream 0), an event record or
    the work a call queued (waits_for, a correlation id)."""

    name: str
    device: int
    stream: int
    measured_ns: tuple[int, int]
    waits_for: int = 0


@dataclass
class Trace:
    """A region of a program: its device work and host waits, each list in the runtime's time order;
    when each recorded operator began (the runtime's clock), what recording one cost the host, and
    the intervals the prediction's other instruments held the host (memory.py's samples): Note [How
    the host is replayed] in timeline.py takes both back out."""

    work: list[Work] = field(default_factory=list)
    waits: list[HostWait] = field(default_factory=list)
    region_ns: tuple[int, int] = (0, 0)
    operator_starts_ns: list[int] = field(default_factory=list)
    recording_cost_per_operator_s: float = 0.0
    host_pauses_ns: list[tuple[int, int]] = field(default_factory=list)  # sorted (start, end)
    outermost_starts_ns: list[int] = field(default_factory=list)  # the recorded operators no other called
    module_calls_ns: list[int] = field(default_factory=list)  # when each nn.Module call began
    optimizer_steps_ns: list[int] = field(default_factory=list)  # when each Optimizer.step began
    # Whether FP32 matrix products and convolutions may run on TF32 units, as PyTorch's flags said when
    # the region began: torch.backends.cuda.matmul.allow_tf32 (off by default) and
    # torch.backends.cudnn.allow_tf32 (on by default: an FP32 convolution on an NVIDIA GPU is TF32).
    tf32_matmul: bool = False
    tf32_convolution: bool = True
    # False when the runtime dropped records (its buffer filled faster than it was drained): the
    # prediction then misses work, and says so.
    complete: bool = True
    simulator_transfers: int = 0  # copies left out: the simulator's own (torch.openreg.SIMULATOR_TRANSFER)
    simulator_waits: int = 0  # host waits left out: the executor checking a call, which a real device queues
    default_streams: dict = field(default_factory=dict)  # device -> its default stream's id (reports mark it)


@contextmanager
def record(devices: list[int] | None = None) -> Iterator[Trace]:
    """Records the region inside the with block; the Trace is filled when the block ends.

    Work queued before the region has finished when it starts (every device is synchronised first),
    so the region starts on idle devices, as a prediction assumes."""
    trace = Trace(recording_cost_per_operator_s=recording_cost_per_operator(),
                  tf32_matmul=torch.get_float32_matmul_precision() != "highest",
                  tf32_convolution=torch.backends.cudnn.allow_tf32)
    for device in devices if devices is not None else range(torch.openreg.device_count()):
        torch.openreg.synchronize(device)
        trace.default_streams[device] = torch.openreg.default_stream(device).stream_id

    def module_called(module, args) -> None:
        trace.module_calls_ns.append(openreg_runtime.trace_get_timestamp())

    def step_began(optimizer, args, kwargs) -> None:
        trace.optimizer_steps_ns.append(openreg_runtime.trace_get_timestamp())

    with (torch.openreg.record_activity() as recording, _removed_after(register_module_forward_pre_hook(module_called)),
          _removed_after(register_optimizer_step_pre_hook(step_began))):
        start = openreg_runtime.trace_get_timestamp()
        yield trace
        end = openreg_runtime.trace_get_timestamp()  # the recording's own wait at exit comes after this
    trace.region_ns = (start, end)
    trace.operator_starts_ns = recording.operator_starts_ns
    trace.outermost_starts_ns = recording.outermost_starts_ns
    trace.complete = recording.complete
    with without_cycle_collection():
        _fill(trace, recording.activity, recording.operators, recording.simulator_intervals_ns)


@contextmanager
def _removed_after(hook) -> Iterator[None]:
    try:
        yield
    finally:
        hook.remove()


@contextmanager
def without_cycle_collection() -> Iterator[None]:
    """Turns Python's cyclic garbage collector off meanwhile: reading a trace makes many small objects,
    none of them cyclic, and each collection they set off would walk the program's whole heap (it cost
    ten times more than the reading itself)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


@functools.cache
def recording_cost_per_operator(calls: int = 2000) -> float:
    """What recording one operator costs the host, measured once per process: one-element additions on
    openreg, best of three with and without recording, per operator recorded (an addition records
    the operators it calls too)."""
    x = torch.zeros(1, device="openreg")

    def best_seconds() -> float:
        timings = []
        for _ in range(3):
            begin = time.perf_counter()
            for _ in range(calls):
                torch.add(x, x)
            timings.append(time.perf_counter() - begin)
        return min(timings)

    plain = best_seconds()
    with torch.openreg.record_activity() as recording:
        recorded = best_seconds()
    operators_per_call = max(1, len(recording.operator_starts_ns)) / (3 * calls)
    return max(0.0, (recorded - plain) / calls / operators_per_call)


def _fill(trace: Trace, records, operators: dict, simulator_intervals: list[tuple[int, int]]) -> None:
    start, end = trace.region_ns
    launches = {r.correlation_id: r for r in records if r.kind == "launch" and start <= r.start_ns <= end}
    calls: dict[int, OpCall] = {}  # one OpCall per distinct operator record (record_activity shares them)
    simulators = torch.openreg.SIMULATOR_TRANSFER
    for r in records:
        if r.kind in DEVICE_KINDS and r.correlation_id in launches:
            launch = launches[r.correlation_id]
            operator = operators.get(launch.external_correlation_id)
            if operator is not None and operator.name == simulators:
                trace.simulator_transfers += 1  # a real device computes the results where they go
                continue
            op = _op_call(operator, calls)
            trace.work.append(Work(r.correlation_id, r.kind, r.name, r.device, r.stream, launch.start_ns,
                                   (r.start_ns, r.end_ns), op, r.waited_for_correlation_id,
                                   launch.external_correlation_id))
        elif r.kind == "synchronize" and start <= r.start_ns <= end:
            if _inside(simulator_intervals, r.start_ns, r.end_ns):
                trace.simulator_waits += 1  # Note [The simulator's own transfers] in torch-openreg
                continue
            trace.waits.append(HostWait(r.name, r.device, r.stream, (r.start_ns, r.end_ns),
                                        r.waited_for_correlation_id))
    trace.work.sort(key=lambda w: w.correlation)
    trace.waits.sort(key=lambda w: w.measured_ns[0])


def _inside(intervals: list[tuple[int, int]], start_ns: int, end_ns: int) -> bool:
    """Whether [start_ns, end_ns] lies in one of the sorted (start, end) intervals."""
    index = bisect.bisect_right(intervals, (start_ns, math.inf)) - 1
    return index >= 0 and end_ns <= intervals[index][1]


def _op_call(record, calls: dict[int, OpCall]) -> OpCall | None:
    if record is None:
        return None
    call = calls.get(id(record))
    if call is None:
        call = calls[id(record)] = OpCall(record.name, record.shapes, record.dtypes, record.concrete_inputs,
                                           record.output_shapes, record.output_dtypes, record.channels_last)
    return call
