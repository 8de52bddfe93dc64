"""The predicted timeline: a captured Trace replayed on a device profile. Every piece of device work
gets its predicted duration (model.py) and starts when its stream, the work it waits for and the host
that queued it allow; the host queues in the order it did, and waits where it waited.

Note [How the host is replayed]
The host queues work in the order it did and waits where it waited; what it costs between two of its
events depends on the host model, and by default only on the program and the profile:
- "profile" (the default): the target's host as the profile's [host] section describes it. Each
  launch costs host.launch_s (the dispatch of the operator that launched it included), each further
  operator recorded since the previous event host.operator_s (composites, views, allocations), each
  further outermost call among them (one Python or autograd's engine makes, not one inside another
  operator) host.outer_call_s more, each module called host.module_call_s (nn.Module's Python and its
  forward's own, beyond its calls), each optimizer step begun host.optimizer_step_s (Optimizer.step's
  Python and the backward pass's start, beyond their operators), and each synchronisation
  host.synchronize_s once the device work it waits for has ended. The same program on the same
  profile is predicted the same on any machine, however busy.
- "this-machine": the host's own time between two events as it was measured here, less what the
  prediction's instruments cost it (recording the operators, measured once per process,
  capture.recording_cost_per_operator; the memory samples, as long as each took), and at least the
  profile's launch cost. An opt-in: it replays this machine's Python and dispatch, and whatever
  slowed them here (on a machine with few cores, the simulator's own kernels compete with them).
- "launches": nothing but launches, host.launch_s each, and no synchronisation cost: the device's view
  of a host that does nothing but launch.
A wait is replayed as a wait: the host resumes when the predicted work it waited for ends, not when the
simulator's did. All host threads are replayed as one, in the order they queued (autograd's device
thread queues the backward while the thread that called backward() waits for it).

Note [Multi-tensor kernels]
A _foreach_ operator (and GradScaler's unscale, _amp_foreach_non_finite_check_and_unscale_) is one call
of a real device's library: CUDA's multi_tensor_apply launches one
kernel per chunk of up to MULTI_TENSOR_TENSORS[lists] tensors and MULTI_TENSOR_ELEMENTS elements
(PyTorch's MultiTensorApply.cuh). openreg runs it as a per-tensor loop, and the recording names the
_foreach_ call for every launch of that loop (torch-openreg's ActivityRecording.cpp). The replay
prices the call's first launch as the whole operator (its cost over every tensor, plus a kernel's own
floor per further chunk, and never less than the stream's floor per chunk) and takes its other launches
as part of it: no time, no host launch.

Note [Transfers share their link]
A stream orders its own work, but two streams' transfers over one link do not both get the link's
whole rate: copies from the host on two streams share the device's host link (each direction is a
link of its own: PCIe is full duplex), and the collectives of two process groups (each group has a
stream of its own, as NCCL's do: a tensor-parallel group's all-reduce beside a data-parallel group's
reduce-scatter) share the device's links to its peers (NVLink, or PCIe between cards), and so do
peer copies. The replay gives each link a lane, as it does each stream: a transfer starts once
the link's previous transfer has ended, so the link carries at most its rate and the last of them
ends when the link has moved all their bytes, as it would sharing the rate. Copies within a device
(HBM) and every other kernel use no link.

Note [Streams share the device]
A kernel's predicted time is what it takes with the whole device: a compute-bound product fills every
compute unit. Kernels of two streams therefore do not both run at that pace: the replay gives each
device one compute lane beside its streams, and a kernel (or memset) starts once the device's previous
one has ended, whatever its stream, as a second large kernel waits for the first one's units on a GPU.
Copies (the copy engines) and collectives (which take few units, and whose time is their links') run
beside them. Two small kernels that would share the units are taken one after the other: the floor of
each is paid in full.

Not here: what a kernel costs (costs/, model.py) or what the report makes of the timeline.
"""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import dataclass, field

from .capture import HostWait, Trace, Work
from .collectives import collective_bound, collective_seconds
from .costs import Cost, cost_of, message_bytes
from .model import (
    MATRIX_KINDS,
    copy_rate,
    copy_seconds,
    kernel_seconds,
    memory_bytes,
)
from .profile import Profile

# occl's kernels (openreg-distributed's collectives) and the collective of the model each one is.
COLLECTIVE_KERNELS = {
    "allreduce": "all_reduce", "allreduce_coalesced": "all_reduce", "reduce": "all_reduce",
    "allgather": "all_gather", "all_gather_into_tensor": "all_gather", "gather": "all_gather",
    "reduce_scatter": "reduce_scatter", "reduce_scatter_tensor": "reduce_scatter", "scatter": "reduce_scatter",
    "broadcast": "broadcast", "all_to_all_single": "all_to_all", "all_to_all": "all_to_all",
    "send": "broadcast", "recv": "broadcast", "recv_anysource": "broadcast", "barrier": "all_reduce",
}
COPY_KINDS = {"memcpyHtoD": "h2d", "memcpyDtoH": "d2h", "memcpyDtoD": "d2d", "memcpyPtoP": "p2p"}
# The link each kind of transfer uses (Note [Transfers share their link]); collectives use "peers".
COPY_LINKS = {"h2d": "from host", "d2h": "to host", "p2p": "peers"}


@dataclass(slots=True)
class Predicted:
    """One piece of work on the predicted timeline. Times in seconds from the region's first launch."""

    work: Work
    start_s: float
    seconds: float
    category: str  # "compute", "collective", "copy", "memset" or "sync" (event records and waits)
    bound: str = "latency"  # compute, memory or latency (model.Prediction.bound); a collective's link or latency
    achieved_fraction: float = 0.0
    cost: Cost | None = None
    precision: str | None = None  # what it ran in, where it differs from the cost's own (TF32 for FP32)
    memory_bytes: float | None = None  # to and from device memory where L2 serves some (model.memory_bytes)

    @property
    def nbytes(self) -> float:  # to and from device memory
        return self.memory_bytes if self.memory_bytes is not None else (self.cost.bytes if self.cost else 0.0)

    @property
    def end_s(self) -> float:
        return self.start_s + self.seconds


@dataclass(slots=True)
class PredictedWait:
    wait: HostWait
    start_s: float
    end_s: float


@dataclass
class Timeline:
    items: list[Predicted] = field(default_factory=list)
    waits: list[PredictedWait] = field(default_factory=list)
    host: str = "profile"  # the host model it was replayed with (HOST_MODELS)
    default_streams: dict = field(default_factory=dict)  # device -> its default stream's id

    @property
    def total_s(self) -> float:
        """First launch to last completion, over every stream and device, and the host's last wait."""
        ends = [item.end_s for item in self.items] + [wait.end_s for wait in self.waits]
        return max(ends, default=0.0)


HOST_MODELS = ("profile", "this-machine", "launches")
# CUDA's multi_tensor_apply: tensors per launch by the number of tensor lists, and elements per launch
# (320 blocks of 65536), Note [Multi-tensor kernels].
MULTI_TENSOR_TENSORS = {1: 110, 2: 64, 3: 48, 4: 36, 5: 30}
MULTI_TENSOR_ELEMENTS = 320 * 65536


def replay(trace: Trace, profile: Profile, ranks: int = 1, host: str = "profile") -> Timeline:
    """The predicted timeline of trace on profile; collectives as if the group had `ranks` ranks; the
    host's time between launches from the profile, as measured here, or its launches alone (Note [How
    the host is replayed])."""
    if host not in HOST_MODELS:
        raise ValueError(f"host={host!r}: one of {', '.join(HOST_MODELS)}")
    return _Replay(trace, profile, ranks, host).run()


class _Replay:
    def __init__(self, trace: Trace, profile: Profile, ranks: int, host: str):
        self.trace, self.profile, self.ranks, self.host = trace, profile, ranks, host
        self._synchronize_s = profile.host.synchronize_s if host == "profile" else 0.0
        self.timeline = Timeline(host=host, default_streams=trace.default_streams)
        self.stream_free: dict[tuple[int, int], float] = {}  # (device, stream) -> when its last work ends
        self.link_free: dict[tuple[int, str], float] = {}  # (device, link) -> when its last transfer ends
        # device -> when its last kernel ends (Note [Streams share the device])
        self.compute_free: dict[int, float] = {}
        self.ended: dict[int, float] = {}  # correlation -> predicted end
        self.waited_by_host = {wait.waits_for for wait in trace.waits if wait.waits_for}
        self.predicted: dict[tuple, tuple] = {}  # _predict's cache
        self.multi_tensor_call: Predicted | None = None  # the last kernel, if a _foreach_ call queued it
        self.pauses = merged_intervals(trace.host_pauses_ns)  # threads may pause at once: count each instant once
        self.pause_starts = [start for start, _ in self.pauses]
        self.paused_before = list(itertools.accumulate((end - start for start, end in self.pauses),
                                                       initial=0))  # ns paused before each pause

    def run(self) -> Timeline:
        # LITERALINCLUDE START: PERF_REPLAY
        # Note [How the host is replayed] (above).
        events = [(work.queued_ns, 0, work) for work in self.trace.work]
        events += [(wait.measured_ns[0], 1, wait) for wait in self.trace.waits]
        events.sort(key=lambda event: (event[0], event[1]))
        host, previous_ns = 0.0, events[0][0] if events else 0
        for measured_ns, _, event in events:
            if isinstance(event, Work):
                if self._joins_multi_tensor_kernel(event):
                    continue  # Note [Multi-tensor kernels]
                if self.timeline.items:
                    host += self._before_launch(previous_ns, measured_ns)
                self._schedule(event, issued=host)
                previous_ns = measured_ns
            else:
                host += self._before_wait(previous_ns, measured_ns)
                resumed = max(host, self._completion(event)) + self._synchronize_s
                self.timeline.waits.append(PredictedWait(event, host, resumed))
                host, previous_ns = resumed, event.measured_ns[1]
        # LITERALINCLUDE END: PERF_REPLAY
        return self.timeline

    def _joins_multi_tensor_kernel(self, work: Work) -> bool:
        """A later launch of the _foreach_ call that made the last kernel: it ends with that kernel."""
        last = self.multi_tensor_call
        if last is None or work.call == 0 or work.call != last.work.call:
            return False
        self.ended[work.correlation] = last.end_s
        return True

    def _before_launch(self, begin_ns: int, end_ns: int) -> float:
        """The host's time from its previous event to queueing the next piece of work."""
        launch = self.profile.host.launch_s
        if self.host == "profile":
            return launch + self._profile_host_seconds(begin_ns, end_ns, launching=True)
        if self.host == "this-machine":
            return max(launch, self._measured_seconds(begin_ns, end_ns))
        return launch

    def _before_wait(self, begin_ns: int, end_ns: int) -> float:
        """The host's time from its previous event to starting a wait."""
        if self.host == "profile":
            return self._profile_host_seconds(begin_ns, end_ns, launching=False)
        if self.host == "this-machine":
            return self._measured_seconds(begin_ns, end_ns)
        return 0.0

    def _profile_host_seconds(self, begin_ns: int, end_ns: int, launching: bool) -> float:
        """host="profile" between two of the host's events, beyond a launch's own launch_s (which
        includes the call that launched it): the operators recorded, the outermost calls among them, the
        modules called and the optimizer steps begun."""
        host, trace = self.profile.host, self.trace
        operators = max(0, self._operators(begin_ns, end_ns) - launching)
        outer_calls = max(0, _between(trace.outermost_starts_ns, begin_ns, end_ns) - launching)
        modules = _between(trace.module_calls_ns, begin_ns, end_ns)
        steps = _between(trace.optimizer_steps_ns, begin_ns, end_ns)
        return (host.operator_s * operators + host.outer_call_s * outer_calls + host.module_call_s * modules
                + host.optimizer_step_s * steps)

    def _operators(self, begin_ns: int, end_ns: int) -> int:
        """Operators recorded between two of the host's events."""
        return _between(self.trace.operator_starts_ns, begin_ns, end_ns)

    def _measured_seconds(self, begin_ns: int, end_ns: int) -> float:
        """The host's own time between two of its events as measured here, without what the
        prediction's instruments cost it (the recording, per operator recorded; memory samples, as
        they took)."""
        if end_ns <= begin_ns:  # (another thread's launch during a wait)
            return 0.0
        paused_ns = self._paused_until(end_ns) - self._paused_until(begin_ns)
        recorded = self._operators(begin_ns, end_ns) * self.trace.recording_cost_per_operator_s
        return max(0.0, (end_ns - begin_ns - paused_ns) * 1e-9 - recorded)

    def _paused_until(self, ns: int) -> int:
        """How long the instruments held the host before ns (a pause under way counts up to ns)."""
        index = bisect.bisect_right(self.pause_starts, ns)
        if index == 0:
            return 0
        start, end = self.pauses[index - 1]
        return self.paused_before[index - 1] + min(ns, end) - start

    def _schedule(self, work: Work, issued: float) -> None:
        lane, link = (work.device, work.stream), _link(work)
        start = max(issued, self.stream_free.get(lane, 0.0), self.link_free.get(link, 0.0),
                    self.compute_free.get(work.device, 0.0) if _uses_compute_units(work) else 0.0)
        if work.kind == "stream_wait":
            start = max(start, self.ended.get(work.waits_for, 0.0))  # recorded before the region: no wait
        item = self._predict(work, start)
        self.multi_tensor_call = item if _is_multi_tensor(work) else None
        self.timeline.items.append(item)
        self.stream_free[lane] = item.end_s
        if link is not None:
            self.link_free[link] = item.end_s
        if _uses_compute_units(work):
            self.compute_free[work.device] = item.end_s
        self.ended[work.correlation] = item.end_s

    def _predict(self, work: Work, start: float) -> Predicted:
        if work.kind in ("event_record", "stream_wait"):
            return Predicted(work, start, 0.0, "sync")
        pinned = work.correlation not in self.waited_by_host
        # A loop repeats its calls, which capture.py shares: one prediction per distinct call.
        key = (id(work.op), work.kind, work.name, pinned)
        known = self.predicted.get(key)
        if known is None:
            known = self.predicted[key] = self._duration(work, pinned)
        return Predicted(work, start, *known)

    def _duration(self, work: Work, pinned: bool) -> tuple:
        """(seconds, category, bound, achieved fraction, cost[, precision]): a Predicted's fields but
        where it starts."""
        cost = cost_of(work.op) if work.op is not None and not _backend_setup(work) else None
        if work.kind == "memcpy":
            kind, nbytes = COPY_KINDS.get(work.name, "d2d"), cost.bytes_read if cost is not None else 0.0
            # A copy the host waited for has a pageable side (or was synchronous): the slower rate.
            seconds = copy_seconds(nbytes, kind, pinned, self.profile)
            achieved = nbytes / seconds / copy_rate(kind, self.profile) if seconds else 0.0
            return seconds, "copy", "memory", achieved, cost
        if work.kind == "kernel" and work.name in COLLECTIVE_KERNELS:
            nbytes = message_bytes(work.op) if work.op is not None else 0.0
            op = COLLECTIVE_KERNELS[work.name]
            seconds = max(collective_seconds(op, nbytes, self.ranks, self.profile), self.profile.chip.kernel_floor_s)
            return (seconds, "collective", *collective_bound(op, nbytes, self.ranks, seconds, self.profile), cost)
        category = "memset" if work.kind == "memset" else "compute"
        if cost is None:  # work no recorded operator queued: the shortest a kernel takes
            return self.profile.chip.kernel_floor_s, category, "latency", 0.0, None
        precision = self._precision(cost)
        prediction = kernel_seconds(cost, precision, self.profile)
        seconds = max(prediction.seconds, self.profile.chip.kernel_floor_s)
        if _is_multi_tensor(work):  # Note [Multi-tensor kernels]: each further chunk is a kernel of its own
            launches, chip = multi_tensor_launches(work.op), self.profile.chip
            seconds = max(launches * chip.kernel_floor_s, seconds + (launches - 1) * chip.graph_floor_s)
        return (seconds, category, prediction.bound, prediction.achieved_fraction_of_peak, cost, precision,
                memory_bytes(cost, self.profile))

    def _precision(self, cost: Cost) -> str | None:
        """TF32 for an FP32 matrix kernel where PyTorch's flags allowed it (Trace.tf32_*), else the cost's."""
        if cost.precision != "fp32":
            return None
        allowed = self.trace.tf32_convolution if cost.kind == "conv" else self.trace.tf32_matmul
        return "tf32" if allowed and cost.kind in MATRIX_KINDS else None

    def _completion(self, wait: HostWait) -> float:
        """When the predicted work a host wait waits for ends."""
        if wait.waits_for:
            return self.ended.get(wait.waits_for, 0.0)
        lanes = [end for (device, stream), end in self.stream_free.items()
                 if device == wait.device and (wait.stream == 0 or stream == wait.stream)]
        return max(lanes, default=0.0)


# LITERALINCLUDE START: PERF_LINKS
def _link(work: Work) -> tuple[int, str] | None:
    """The (device, link) a transfer occupies, or None for work that uses no link (Note [Transfers
    share their link])."""
    if work.kind == "memcpy":
        link = COPY_LINKS.get(COPY_KINDS.get(work.name, "d2d"))
        return (work.device, link) if link is not None else None
    if work.kind == "kernel" and work.name in COLLECTIVE_KERNELS:
        return (work.device, "peers")
    return None
# LITERALINCLUDE END: PERF_LINKS


def _uses_compute_units(work: Work) -> bool:
    """A kernel or memset that needs the device's compute units (Note [Streams share the device]); not a
    copy, a collective or an event."""
    return work.kind == "memset" or (work.kind == "kernel" and work.name not in COLLECTIVE_KERNELS)


def _backend_setup(work: Work) -> bool:
    """Work a collective operator queued besides its collective kernel: the backend's own (openreg-distributed
    clears and fills its control block on a group's first collective), which the operator's cost does not describe."""
    return work.op.name.startswith("c10d::") and not (work.kind == "kernel" and work.name in COLLECTIVE_KERNELS)


def _is_multi_tensor(work: Work) -> bool:
    """A call CUDA runs with multi_tensor_apply: the _foreach_ operators and GradScaler's unscale."""
    return work.op is not None and work.op.name.startswith(("aten::_foreach_", "aten::_amp_foreach_"))


def multi_tensor_launches(call) -> int:
    """How many kernels CUDA's multi_tensor_apply launches for a _foreach_ call."""
    lists = [shapes for shapes, dtype in zip(call.shapes, call.dtypes, strict=False) if dtype == "TensorList"]
    if not lists or not lists[0]:
        return 1
    tensors, elements = len(lists[0]), sum(math.prod(shape) for shape in lists[0])
    per_launch = MULTI_TENSOR_TENSORS.get(len(lists), MULTI_TENSOR_TENSORS[5])
    return max(1, math.ceil(tensors / per_launch), math.ceil(elements / MULTI_TENSOR_ELEMENTS))


def merged_intervals(intervals: list[tuple]) -> list[tuple]:
    """The intervals sorted, overlapping ones merged: their union."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _between(sorted_ns: list[int], begin_ns: int, end_ns: int) -> int:
    """How many of sorted_ns fall in (begin_ns, end_ns]."""
    return max(0, bisect.bisect_right(sorted_ns, end_ns) - bisect.bisect_right(sorted_ns, begin_ns))
