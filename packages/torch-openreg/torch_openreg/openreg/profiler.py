"""The openreg runtime's activity, record by record, for tools that rebuild
the device's timeline (openreg-perf replays it on a model of another
accelerator): what the last torch.profiler session saw (profiler_activity),
or a region recorded with the operators that queued its work and nothing
else (record_activity). Not here: the Kineto integration itself
(csrc/profiler/Profiler.cpp), which turns the same records into the trace.
"""

from __future__ import annotations

import gc
import struct
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import NamedTuple

import torch_openreg._C as _C


@contextmanager
def _without_cycle_collection() -> Iterator[None]:
    """Python's cyclic garbage collector off meanwhile: a region's records are many small tuples, none
    of them cyclic, and each collection they would set off walks the program's whole heap. (openreg-perf
    has its own copy: a layer may not import torch-openreg's private helpers.)"""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


# LITERALINCLUDE START: ACTIVITY_RECORD
# orActivity of the runtime's openreg.h, field by field, in its native layout.
_RECORD = struct.Struct("@i64siQQQQQQ")
_KINDS = ("kernel", "memcpy", "memset", "launch", "synchronize", "event_record", "stream_wait")


class ActivityRecord(NamedTuple):
    """One runtime activity record (orActivity in openreg.h). Times are the
    runtime's monotonic clock in ns; ``correlation_id`` ties a ``launch``
    record (host side) to the device record of the same work;
    ``external_correlation_id`` (launch records) is the id of the operator
    that launched it: the profiler's (``_KinetoEvent.correlation_id()``), or
    in record_activity() a key of ``ActivityRecording.operators``;
    ``waited_for_correlation_id`` (``stream_wait``, and ``synchronize`` of an
    event) names the ``event_record`` waited for."""

    kind: str
    name: str
    device: int
    stream: int
    start_ns: int
    end_ns: int
    correlation_id: int
    external_correlation_id: int
    waited_for_correlation_id: int


def profiler_activity() -> list[ActivityRecord]:
    """The activity records of the last torch.profiler session that recorded
    openreg activity (ProfilerActivity.PrivateUse1), oldest first: every
    launch, kernel, copy, memset, event record, stream wait and host
    synchronisation of the profiled region. Empty before any such session."""
    with _without_cycle_collection():
        return _activity_records(*_C._profiler_activity())


def _activity_records(data: bytes, size: int) -> list[ActivityRecord]:
    if size != _RECORD.size:
        raise RuntimeError(f"torch-openreg's orActivity is {size} bytes but this module reads {_RECORD.size}: "
                           "torch-openreg and openreg-runtime do not match; reinstall them together")
    names: dict[bytes, str] = {}  # a program launches few distinct names many times
    records = []
    # A training step makes thousands of records: each is built as a plain tuple of the
    # record's type, which costs half of what calling the NamedTuple's constructor does.
    make = tuple.__new__
    for fields in _RECORD.iter_unpack(data):
        name = fields[1]
        text = names.get(name)
        if text is None:
            text = names[name] = name.split(b"\0", 1)[0].decode(errors="replace")
        records.append(make(ActivityRecord, (_KINDS[fields[0]], text) + fields[2:]))
    return records

# LITERALINCLUDE END: ACTIVITY_RECORD


# LITERALINCLUDE START: RECORD_ACTIVITY
# The name under which the simulator's own copies are recorded (Note [The
# simulator's own transfers] in csrc/profiler/ActivityRecording.h).
SIMULATOR_TRANSFER = "openreg::simulator_transfer"


class OperatorRecord(NamedTuple):
    """An operator call that queued openreg work, with its arguments as
    torch.profiler's ``record_shapes=True`` describes them: ``shapes`` (a
    tensor's sizes, a list of sizes for a tensor list, ``[]`` otherwise),
    ``dtypes`` (``"float"``, ``"c10::Half"``, ..., ``"TensorList"``,
    ``"Scalar"``, ``"ScalarList"``, or ``""``) and ``concrete_inputs`` (the
    value of a scalar or a list of scalars, ``None`` otherwise); and what it
    returned, described the same way: ``output_shapes``, ``output_dtypes``;
    ``channels_last``: whether a tensor argument is laid out channels-last
    (its ``suggest_memory_format()``), which a device's convolutions may
    have to convert. The copies the simulator makes for itself (an operator
    it runs synchronously computes its results on the host and copies them
    over, which a real device does not) are named
    ``SIMULATOR_TRANSFER``, and are not among the operator starts."""

    name: str
    shapes: list
    dtypes: list[str]
    concrete_inputs: list
    output_shapes: list = []
    output_dtypes: list[str] = []
    channels_last: bool = False


@dataclass
class ActivityRecording:
    """What record_activity() recorded, filled in when its block ends.
    ``activity``: the runtime's records, as profiler_activity() gives them.
    ``operators``: the calls that queued work, by the id that the launch
    records carry as ``external_correlation_id``. ``operator_starts_ns``:
    when every recorded call began (runtime clock), sorted;
    ``outermost_starts_ns``: those of the calls no other recorded call made
    (the calls Python makes, and autograd's engine).
    ``simulator_intervals_ns``: (start, end) of each time the simulator
    worked for itself (Note [The simulator's own transfers]): a host wait
    in one is the simulator's (the executor checking a call, or its copy
    of a result), which a real device's host would not make. ``complete``:
    False if the runtime dropped records (its buffer was full), which
    record_activity() also warns about."""

    activity: list[ActivityRecord] = field(default_factory=list)
    operators: dict[int, OperatorRecord] = field(default_factory=dict)
    operator_starts_ns: list[int] = field(default_factory=list)
    outermost_starts_ns: list[int] = field(default_factory=list)
    simulator_intervals_ns: list[tuple[int, int]] = field(default_factory=list)
    complete: bool = True


@contextmanager
def record_activity() -> Iterator[ActivityRecording]:
    """Records the openreg activity of the block and the operators that
    queued it (every call that takes an openreg tensor or device), without a
    profiler session: costs the program about a microsecond per operator
    where torch.profiler with record_shapes costs tens. Waits for every
    device at the end. One recording or profiler session collects the
    runtime's records at a time: it raises if another one is running."""
    recording = ActivityRecording()
    _C._start_activity_recording()
    try:
        yield recording
    finally:
        data, size, (ids, calls), starts, outermost, simulator, dropped = _C._stop_activity_recording()
        with _without_cycle_collection():
            recording.activity = _activity_records(data, size)
            recording.operators = _operator_records(ids, calls)
        recording.operator_starts_ns = sorted(starts)
        recording.outermost_starts_ns = sorted(outermost)
        recording.simulator_intervals_ns = sorted(simulator)
        if dropped:
            recording.complete = False
            warnings.warn(dropped, RuntimeWarning, stacklevel=3)


def _operator_records(ids: list[int], calls: list[tuple]) -> dict[int, OperatorRecord]:
    """Equal calls come as one tuple (a loop repeats its calls), and share one
    OperatorRecord: a tool can cache what it computes per call by id()."""
    made: dict[int, OperatorRecord] = {}
    operators = {}
    for id_, call in zip(ids, calls, strict=True):
        record = made.get(id(call))
        if record is None:
            record = made[id(call)] = OperatorRecord(*call)
        operators[id_] = record
    return operators
# LITERALINCLUDE END: RECORD_ACTIVITY
