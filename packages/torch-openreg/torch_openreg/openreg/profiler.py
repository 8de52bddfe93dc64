"""What torch.profiler saw on openreg devices, record by record, for tools
that rebuild the device's timeline (openreg-perf replays it on a model of
another accelerator). Not here: the Kineto integration itself
(csrc/runtime/Profiler.cpp), which turns the same records into the trace.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import torch_openreg._C as _C

# LITERALINCLUDE START: ACTIVITY_RECORD
# orActivity of the runtime's openreg.h, field by field, in its native layout.
_RECORD = struct.Struct("@i64siQQQQQQ")
_KINDS = ("kernel", "memcpy", "memset", "launch", "synchronize", "event_record", "stream_wait")


class ActivityRecord(NamedTuple):
    """One runtime activity record (orActivity in openreg.h). Times are the
    runtime's monotonic clock in ns; ``correlation_id`` ties a ``launch``
    record (host side) to the device record of the same work;
    ``external_correlation_id`` (launch records) is the profiler's id of the
    operator that launched it (``_KinetoEvent.correlation_id()``);
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
    data, size = _C._profiler_activity()
    if size != _RECORD.size:
        raise RuntimeError(f"torch-openreg's orActivity is {size} bytes but this module reads {_RECORD.size}: "
                           "torch-openreg and openreg-runtime do not match; reinstall them together")
    return [ActivityRecord(_KINDS[kind], name.split(b"\0", 1)[0].decode(errors="replace"), *rest)
            for kind, name, *rest in _RECORD.iter_unpack(data)]
# LITERALINCLUDE END: ACTIVITY_RECORD
