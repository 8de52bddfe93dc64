"""Pipeline-parallel training steps, predicted from one prediction per stage.

A pipeline runs each micro-batch through the stages in turn, forward then backward, and a schedule
decides which of its waiting micro-batches each device runs next. Each stage's forward and backward of
one micro-batch are predicted once (predict_stage: the stage's module run under simulate, without
executing), and the schedule is then played out over those times (predict_pipeline): every device runs
its operations in the schedule's order, each as soon as its device is free and its input has arrived
from the neighbouring stage over the profile's links.

    stages = [predict_stage(block, x, "h100-sxm") for block in blocks]
    step = predict_pipeline(stages, "h100-sxm", micro_batches=16, schedule="1f1b")
    print(step.summary())
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable
from dataclasses import astuple, dataclass, field
from pathlib import Path

from .collectives import collective_seconds
from .model import copy_seconds
from .profile import Profile, load_profile

SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b")
RECOMPUTATION = ("none", "full")


@dataclass(frozen=True)
class StageTimes:
    """One stage's predicted work for one micro-batch."""

    forward_s: float
    backward_s: float
    activation_bytes: float  # what the stage sends on (its output); the gradient coming back is as large
    parameter_bytes: float = 0.0  # its parameters: their gradients are reduced across data-parallel replicas


def stage_of(parts: list[StageTimes]) -> StageTimes:
    """A stage made of parts that run one after another (its layers): their times and parameters add up,
    and it sends on what its last part sends."""
    return StageTimes(sum(p.forward_s for p in parts), sum(p.backward_s for p in parts), parts[-1].activation_bytes,
                      sum(p.parameter_bytes for p in parts))


@dataclass(frozen=True)
class Operation:
    """A stage's forward ("F") or backward ("B") of one micro-batch, as the schedule ran it."""

    kind: str
    stage: int
    micro_batch: int
    device: int
    start_s: float
    end_s: float


@dataclass(frozen=True)
class DeviceTimes:
    """One device's share of a step: computing, waiting inside the pipeline (its bubble: for its turn or
    for its input to arrive), and its gradient reduction still running after the pipeline has ended."""

    compute_s: float
    bubble_s: float
    exposed_reduction_s: float


@dataclass
class PipelinePrediction:
    """A pipeline-parallel step: the pipeline (first forward to last backward), and each device's
    data-parallel reduction of its gradients, which starts when the device's last backward ends, while
    the devices before it may still run theirs. step_time_s ends with the last reduction."""

    schedule: str
    devices: int  # pipeline stages on devices (PP); a device holds `chunks` stages
    chunks: int
    micro_batches: int
    pipeline_s: float
    reductions_s: list[float]  # each device's gradient reduction across its data-parallel replicas
    operations: list[Operation] = field(repr=False)

    def last_backward_end_s(self, device: int) -> float:
        return max(op.end_s for op in self.operations if op.device == device)

    @property
    def gradient_reduction_s(self) -> float:
        return max(self.reductions_s)

    @property
    def step_time_s(self) -> float:
        return max(self.last_backward_end_s(d) + self.reductions_s[d] for d in range(self.devices))

    @property
    def exposed_reduction_s(self) -> float:
        """The part of the reductions that runs after the pipeline: the rest overlaps its backwards."""
        return self.step_time_s - self.pipeline_s

    def busy_s(self, device: int) -> float:
        return sum(op.end_s - op.start_s for op in self.operations if op.device == device)

    def device_times(self, device: int) -> DeviceTimes:
        compute = self.busy_s(device)
        exposed = max(0.0, self.last_backward_end_s(device) + self.reductions_s[device] - self.pipeline_s)
        return DeviceTimes(compute, self.pipeline_s - compute, exposed)

    def device_lines(self) -> list[str]:
        """A line per device: the report per rank of a pipeline stage."""
        lines = []
        for device in range(self.devices):
            times = self.device_times(device)
            lines.append(f"device {device}: compute {times.compute_s * 1e3:.1f} ms, "
                         f"bubble {times.bubble_s * 1e3:.1f} ms, "
                         f"gradient reduction after the pipeline {times.exposed_reduction_s * 1e3:.1f} ms")
        return lines

    @property
    def bubble_fraction(self) -> float:
        """The share of the pipeline's time its devices wait, on average."""
        busy = sum(self.busy_s(device) for device in range(self.devices)) / self.devices
        return 1 - busy / self.pipeline_s if self.pipeline_s else 0.0

    def in_flight(self, device: int) -> int:
        """The most micro-batches whose activations the device holds at once (forward done, backward not)."""
        held = most = 0
        for op in sorted((op for op in self.operations if op.device == device), key=lambda op: op.start_s):
            held += 1 if op.kind == "F" else -1
            most = max(most, held)
        return most

    def summary(self) -> str:
        return (f"{self.schedule}: {self.devices} devices, {self.chunks} chunk{'s' * (self.chunks > 1)} each, "
                f"{self.micro_batches} micro-batches: "
                f"step {self.step_time_s * 1e3:.1f} ms (pipeline {self.pipeline_s * 1e3:.1f} ms, bubble "
                f"{100 * self.bubble_fraction:.1f} %, gradient reduction {self.gradient_reduction_s * 1e3:.1f} ms, "
                f"{self.exposed_reduction_s * 1e3:.1f} ms of it after the pipeline), "
                f"at most {max(self.in_flight(d) for d in range(self.devices))} micro-batches in flight")


# LITERALINCLUDE START: PIPELINE_ORDERS
def device_order(schedule: str, device: int, devices: int, micro_batches: int, chunks: int = 1) -> list[tuple]:
    """The (kind, stage, micro-batch) operations one device runs, in the schedule's order. Stage
    c * devices + device is the device's chunk c (interleaved 1F1B; the other schedules have one chunk)."""
    if schedule == "gpipe":  # every forward, then every backward
        return [("F", device, m) for m in range(micro_batches)] + [("B", device, m) for m in range(micro_batches)]
    # 1F1B (PipeDream-Flush): enough forwards to fill the pipeline after this device, then one forward and
    # one backward in turn, then the backwards left. Interleaved (Megatron-LM): the same over virtual
    # micro-batches that take `devices` micro-batches through one chunk before the next.
    group = devices * chunks

    def virtual(k: int, backward: bool) -> tuple:
        chunk = (k % group) // devices
        stage = (chunks - 1 - chunk if backward else chunk) * devices + device
        return ("B" if backward else "F", stage, k // group * devices + k % devices)

    total = micro_batches * chunks
    warmup = min(devices - device - 1 if chunks == 1 else (devices - device - 1) * 2 + (chunks - 1) * devices, total)
    forwards = [virtual(k, backward=False) for k in range(total)]
    backwards = [virtual(k, backward=True) for k in range(total)]
    steady = [op for pair in zip(forwards[warmup:], backwards, strict=False) for op in pair]
    return forwards[:warmup] + steady + backwards[total - warmup:]
# LITERALINCLUDE END: PIPELINE_ORDERS


def play(stages: list[StageTimes], micro_batches: int, schedule: str = "1f1b", chunks: int = 1,
         transfer_s: Callable[[int, float], float] = lambda boundary, nbytes: 0.0) -> list[Operation]:
    """Plays the schedule out: each device runs its operations in order, each when the device is free and
    its input is there. transfer_s(boundary, nbytes): the time to send nbytes from stage boundary to
    boundary + 1 (or back), on different devices."""
    devices = _checked_schedule(schedule, len(stages), micro_batches, chunks)
    last = len(stages) - 1
    pending = [collections.deque(device_order(schedule, d, devices, micro_batches, chunks)) for d in range(devices)]
    free, ended, operations = [0.0] * devices, {}, []

    def ready(kind: str, stage: int, m: int) -> float | None:
        """When the operation's input is on its device; None while the operation it needs has not run."""
        if kind == "F" and stage == 0:
            return 0.0
        if kind == "B" and stage == last:
            return ended.get(("F", stage, m))
        source = stage - 1 if kind == "F" else stage + 1
        done = ended.get((kind, source, m))
        if done is None:
            return None
        crosses = source % devices != stage % devices
        return done + (transfer_s(min(source, stage), stages[min(source, stage)].activation_bytes) if crosses else 0)

    while any(pending):
        progressed = False
        for device, queue in enumerate(pending):
            while queue and (arrived := ready(*queue[0])) is not None:
                kind, stage, m = queue.popleft()
                start = max(free[device], arrived)
                end = start + (stages[stage].forward_s if kind == "F" else stages[stage].backward_s)
                ended[(kind, stage, m)], free[device] = end, end
                operations.append(Operation(kind, stage, m, device, start, end))
                progressed = True
        if not progressed:
            raise RuntimeError(f"the {schedule} schedule waits on itself: a bug in device_order")
    return operations


# LITERALINCLUDE START: PREDICT_PIPELINE
def predict_pipeline(stages: list[StageTimes], profile: str | Path | Profile, micro_batches: int,
                     schedule: str = "1f1b", chunks: int = 1, tensor_parallel: int = 1, data_parallel: int = 1,
                     recomputation: str = "none") -> PipelinePrediction:
    """A training step of a model split into stages (in order; len(stages) / chunks devices of the
    pipeline, each a tensor-parallel group of tensor_parallel devices, the whole pipeline replicated
    data_parallel times). Devices are placed in order, tensor-parallel groups innermost, so a stage
    boundary between two nodes sends over the network and the others over the device links; each
    tensor-parallel rank sends its 1 / tensor_parallel of the activation (Megatron-LM's scatter-gather).
    recomputation="full" runs each stage's forward again before its backward (activation checkpointing
    of every layer), for stages predicted from modules that do not checkpoint themselves; a module that
    does (torch.utils.checkpoint, fully or selectively) has its recomputation in its predicted backward."""
    from . import _checked_count

    if not isinstance(profile, Profile):
        profile = load_profile(profile)
    micro_batches, chunks, tensor_parallel, data_parallel = (
        _checked_count(value, name) for value, name in ((micro_batches, "micro_batches"), (chunks, "chunks"),
                                                        (tensor_parallel, "tensor_parallel"),
                                                        (data_parallel, "data_parallel")))
    for index, stage in enumerate(stages):
        if not all(math.isfinite(value) and value >= 0 for value in astuple(stage)):
            raise ValueError(f"stage {index}: its times and sizes must be finite and not negative, not {stage}")
    schedule = schedule.lower() if isinstance(schedule, str) else schedule  # the prose's "1F1B" is "1f1b"
    if recomputation not in RECOMPUTATION:
        raise ValueError(f"recomputation must be one of {', '.join(RECOMPUTATION)}, not {recomputation!r} (selective "
                         "recomputation is predicted as it runs, from stages whose modules checkpoint themselves: "
                         "torch.utils.checkpoint with create_selective_checkpoint_contexts)")
    if recomputation == "full":
        stages = [StageTimes(s.forward_s, s.backward_s + s.forward_s, s.activation_bytes, s.parameter_bytes)
                  for s in stages]
    devices = _checked_schedule(schedule, len(stages), micro_batches, chunks)
    per_node = profile.links.devices_per_node

    def transfer_s(boundary: int, nbytes: float) -> float:
        sender, receiver = boundary % devices, (boundary + 1) % devices  # chunks wrap to the first device
        crosses_nodes = sender * tensor_parallel // per_node != receiver * tensor_parallel // per_node
        return _point_to_point_s(nbytes / tensor_parallel, profile, crosses_nodes)

    operations = play(stages, micro_batches, schedule, chunks, transfer_s)
    # Each device's gradients (its tensor-parallel rank's share of its stages' parameters), summed over its
    # replicas once its last backward has made them final; a bucketed reduction (DDP's) could start during
    # that backward, so this is the later bound.
    # A replica's devices are consecutive: a device's data-parallel group has a rank on each node that
    # holds whole replicas, one a node otherwise.
    replicas_per_node = min(data_parallel, max(1, per_node // (devices * tensor_parallel)))
    reductions = [collective_seconds("all_reduce", sum(s.parameter_bytes for s in stages[d::devices]) / tensor_parallel,
                                     data_parallel, profile, ranks_per_node=replicas_per_node) for d in range(devices)]
    return PipelinePrediction(schedule, devices, chunks, micro_batches, max(op.end_s for op in operations),
                              reductions, operations)
# LITERALINCLUDE END: PREDICT_PIPELINE


def _point_to_point_s(nbytes: float, profile: Profile, crosses_nodes: bool) -> float:
    if not crosses_nodes:
        return copy_seconds(nbytes, "p2p", False, profile)
    return profile.links.network_latency_s + nbytes / profile.links.network_bytes_per_s


def _checked_schedule(schedule: str, stages: int, micro_batches: int, chunks: int) -> int:
    """The number of devices; a clear error for a schedule that cannot run as asked."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, not {schedule!r}")
    if micro_batches < 1 or chunks < 1 or stages < 1:
        raise ValueError("stages, micro-batches and chunks must each be at least 1")
    if chunks > 1 and schedule != "interleaved-1f1b":
        raise ValueError(f"{schedule} runs one chunk per device; chunks={chunks} needs interleaved-1f1b")
    if stages % chunks:
        raise ValueError(f"{stages} stages do not split into {chunks} chunks per device")
    devices = stages // chunks
    if schedule == "interleaved-1f1b" and micro_batches % devices:
        raise ValueError(f"interleaved 1F1B takes micro-batches in groups of the {devices} devices: "
                         f"{micro_batches} is not a multiple of {devices}")
    return devices


# LITERALINCLUDE START: PREDICT_STAGE
def predict_stage(module, example_input, profile: str | Path | Profile, ranks: int = 1) -> StageTimes:
    """One stage's forward and backward of one micro-batch (example_input), each predicted without
    executing (simulate(..., execute=False): devices of the profile's capacity, see devices_for). ranks:
    the tensor-parallel degree the stage's collectives run at. A stage after the first receives its input
    from the stage before and sends its gradient back: give it an input that requires grad, so the
    backward computes that gradient too. The backward adds to the parameters' gradients, as every
    micro-batch's after the first does (gradient accumulation)."""
    import torch

    from . import simulate

    tensors = (example_input, *module.parameters())
    elsewhere = sorted({str(tensor.device) for tensor in tensors if tensor.device.type != "openreg"})
    if elsewhere:
        raise ValueError(f"a stage's module and input must be on openreg to be predicted, not on "
                         f"{', '.join(elsewhere)}: build them with device=\"openreg\": nothing else is predicted")
    # A fresh input, as each micro-batch's is: its gradient is written, not added to an earlier one's.
    example_input = example_input.detach().requires_grad_(example_input.requires_grad)
    # The parameters' gradients as the earlier micro-batches left them: this backward adds to them.
    fresh = [p for p in module.parameters() if p.requires_grad and p.grad is None]
    for parameter in fresh:
        parameter.grad = torch.empty_like(parameter)  # allocated, never written
    with simulate(profile, ranks=ranks, execute=False) as forward:
        output = module(example_input)
    gradient = torch.empty_like(output)  # the next stage's gradient, arriving; allocated outside the regions
    with simulate(profile, ranks=ranks, execute=False) as backward:
        output.backward(gradient)
    for parameter in fresh:
        parameter.grad = None
    parameters = sum(p.numel() * p.element_size() for p in module.parameters())
    return StageTimes(forward.total_time_s, backward.total_time_s, output.numel() * output.element_size(),
                      parameters)
# LITERALINCLUDE END: PREDICT_STAGE
