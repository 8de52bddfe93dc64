"""openreg_perf: how a program that runs on openreg would run on a real accelerator.

    with openreg_perf.simulate("h100-sxm") as run:
        loss = model(x).sum(); loss.backward(); opt.step()
    print(run.summary()); run.export_chrome_trace("step.json"); run.plot("step.svg")

The program runs unchanged on openreg while torch.openreg.record_activity() records it (capture.py);
every kernel, copy and collective gets a cost (costs/) and a predicted time on the device profile
(model.py; collectives.py);
the program's streams, events and host waits are replayed into a predicted timeline (timeline.py),
which the report reads (report.py). Profiles are data files (profile.py, profiles/*.toml).
"""

from __future__ import annotations

import collections
import functools
import math
import numbers
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .assumptions import Assumption, assume
from .profile import Profile, ProfileError, list_profiles, load_profile

__all__ = ["Assumption", "Profile", "ProfileError", "Run", "assume", "devices_for", "list_profiles", "load_profile",
           "simulate"]


# torch-openreg's Note [Values read in timing-only mode]: in timing-only mode this check finds no
# overflow (openreg-amp states found_inf = 0), and the summary says the prediction assumed so.
GRAD_SCALER_CHECK = "aten::_amp_foreach_non_finite_check_and_unscale_"


class Run:
    """What simulate() predicts for its region, filled in when the with block ends.

    total_time_s: predicted time of the region, from its first launch to its last completion, over
    every stream and device of the process. kernels: a report.KernelRecord per kernel, copy and
    collective, in launch order. peak_memory_bytes: per device, the caching allocator's peak over the
    region (as PyTorch's max_memory_allocated counts it). report: the region's figures
    (report.RegionReport). kernels and report are made when first read: a program that wants only
    the time does not pay for them. partial: the region raised (error, as "TypeError: ..."), and the
    prediction covers what it ran up to that point. assumptions: each data-dependent size the region
    took from openreg_perf.assume (Note [Assumed selections])."""

    def __init__(self, profile: Profile, ranks: int, executed: bool, host: str = "profile"):
        self.profile, self.ranks, self.executed, self.host = profile, ranks, executed, host
        self._total_time_s: float | None = None
        self.peak_memory_bytes: dict[int, int] = {}
        self.memory: dict = {}  # device -> memory.MemorySplit
        self.trace = self.timeline = None
        self.partial, self.error = False, None
        self.values_read_as_nan = 0  # reads of a value NaN stood for (Note [Values read in timing-only mode])
        self.timing_only = not executed  # the region ran in timing-only mode (also when it was on before)
        self.assumptions: list[Assumption] = []
        self.fsdp_world_size: int | None = None  # the world size FSDP2 sharded over in the region, if it ran
        self.allocated = False  # whether the region allocated openreg memory (a warning tells it ran no work)

    def _finish(self, trace, memory: dict, error: str | None = None) -> None:
        from . import capture, timeline

        # Marked first: a partial region whose replay fails is still known to be partial.
        self.partial, self.error = error is not None, error
        self.trace = trace
        with capture.without_cycle_collection():
            self.timeline = timeline.replay(trace, self.profile, self.ranks, self.host)
        self.memory = {device: split for device, split in memory.items() if split.peak_allocated > 0}
        self.peak_memory_bytes = {device: split.peak_allocated for device, split in self.memory.items()}
        self._total_time_s = self.timeline.total_s
        for warning in filter(None, (self._does_not_fit(), self._nothing_on_openreg(), self._without_operator(),
                                     self._fsdp_at_other_ranks())):
            warnings.warn(f"openreg_perf: {warning}", RuntimeWarning, stacklevel=4)

    @property
    def total_time_s(self) -> float:
        if self._total_time_s is None:
            raise RuntimeError("openreg_perf: the prediction is made when simulate()'s with block ends")
        return self._total_time_s

    def _does_not_fit(self) -> str | None:
        """Why the region would run out of memory on the profile's device, if it would."""
        capacity = self.profile.memory.capacity_bytes
        over = {device: peak for device, peak in self.peak_memory_bytes.items() if peak > capacity}
        if not over:
            return None
        from .report import _si

        device, peak = max(over.items(), key=lambda item: item[1])
        return (f"does not fit: the region's peak memory on openreg:{device}, {_si(peak, 'B')}, is more than "
                f"{self.profile.name}'s {_si(capacity, 'B')}; on it this program runs out of memory")

    def _fsdp_at_other_ranks(self) -> str | None:
        """FSDP2 predicted at another rank count than it ran at: its collectives are priced for the ranks
        asked, but what it shards (and, at world size 1, whether it communicates at all) is the run's."""
        recorded = self.fsdp_world_size
        if recorded is None or self.ranks == recorded:
            return None
        if recorded == 1:
            return (f"FSDP2 ran at world size 1, where it shards nothing and issues no collectives: this "
                    f"prediction for {self.ranks} ranks has none of its all-gathers and reduce-scatters; run the "
                    "script on 2 or more ranks (torchrun on this machine) and predict at more from there")
        return (f"memory as FSDP2 sharded it over the {recorded} ranks it ran on: at {self.ranks} ranks its "
                f"parameters, gradients and optimizer state are {recorded}/{self.ranks} of what this report shows")

    def _without_operator(self) -> str | None:
        """Kernels no recorded operator launched: a graph's replay (torch.accelerator.Graph) captured before the
        region. Its kernels were recorded, with their operators, when it was captured; the replay has none."""
        from .report import without_operator_text

        kernels = collections.Counter(item.work.name for item in self.timeline.items
                                      if item.category == "compute" and item.work.op is None)
        return f"no operator recorded for {without_operator_text(kernels)}" if kernels else None

    def _nothing_on_openreg(self) -> str | None:
        if self.trace is None or self.trace.work or self.partial:
            return None
        if self.allocated:  # so its tensors are where they should be
            return ("no work ran on openreg in the region: it allocated openreg memory and ran no kernel or copy, "
                    "so there is no time to predict")
        return ("no work ran on openreg in the region: a model or tensors left on the CPU (or on \"cuda\") are "
                "not predicted; move them with .to(\"openreg\")")

    @functools.cached_property
    def kernels(self) -> list:
        from . import capture, report

        with capture.without_cycle_collection():
            return report.kernel_records(self._predicted_timeline())

    @functools.cached_property
    def report(self):
        from . import capture, report

        with capture.without_cycle_collection():
            return report.region_report(self._predicted_timeline(), self.profile, self.memory)

    def _predicted_timeline(self):
        if self.timeline is None:
            raise RuntimeError("openreg_perf: the prediction is made when simulate()'s with block ends")
        return self.timeline

    def predicted_again(self, profile: str | Path | Profile | None = None, ranks: int | None = None,
                        host: str | None = None) -> Run:
        """The same recorded region predicted on another profile, at another rank count (its
        collectives' times; compute per rank is unchanged, as data parallelism keeps it), or with
        another host model: a 64-rank data-parallel step from a run with two ranks."""
        self._predicted_timeline()  # there is no recorded region to predict before the with block ends
        ranks = self.ranks if ranks is None else _checked_count(ranks)
        host = self.host if host is None else _checked_host(host)
        if profile is not None and not isinstance(profile, Profile):
            profile = load_profile(profile)
        other = Run(profile or self.profile, ranks, self.executed, host)
        other.timing_only, other.values_read_as_nan = self.timing_only, self.values_read_as_nan
        other.assumptions, other.fsdp_world_size = self.assumptions, self.fsdp_world_size
        other.allocated = self.allocated
        other._finish(self.trace, self.memory, self.error)
        return other

    def summary(self, top: int = 10) -> str:
        from . import report

        top = _checked_count(top, "top (how many kernels to list)", least=0)
        text = report.summary(self.profile, self.report, self.kernels, top, self.ranks)
        for warning in filter(None, (self._nothing_on_openreg(), self._does_not_fit())):
            text = f"{warning}\n{text}"
        if self._fsdp_at_other_ranks():
            text += f"\n  FSDP2              {self._fsdp_at_other_ranks()}"
        if self.trace is not None and not self.trace.complete:
            text = ("incomplete: the recording dropped records (a warning said how many), so work is "
                    f"missing from this prediction\n{text}")
        if self.partial:
            text = f"partial: the region raised {self.error}; predicted up to that point\n{text}"
        if self.trace is not None and (self.trace.simulator_transfers or self.trace.simulator_waits):
            text += (f"\n  left out           {self.trace.simulator_transfers} copies the simulator made for itself "
                     f"and {self.trace.simulator_waits} host waits for its checks (operators' first calls, "
                     f"computed on the host): a real device makes none")
        if self.values_read_as_nan:
            text += (f"\n  values read        {_counted(self.values_read_as_nan, 'read')} of a value to the host "
                     f"(.item(), .cpu(), print) got NaN: timing-only mode computes none")
        checks = sum(kernel.op == GRAD_SCALER_CHECK for kernel in self.kernels) if self.timing_only else 0
        if checks:
            text += (f"\n  assumed            no gradient overflows: GradScaler's "
                     f"{_counted(checks, 'non-finite check')} found none, and it stepped (timing-only mode "
                     f"computes no gradient)")
        for (operator, candidates, selected), count in collections.Counter(
                (a.operator, a.candidates, a.selected) for a in self.assumptions).items():
            times = "once" if count == 1 else f"{count} times"
            text += (f"\n  assumed            {operator} selected {selected} of {math.prod(candidates)} candidates "
                     f"{candidates}, {times} (openreg_perf.assume)")
        return text

    def export_chrome_trace(self, path: str | Path) -> None:
        """The predicted lanes (and the simulator's measured ones) for chrome://tracing or Perfetto."""
        from . import report

        report.write_chrome_trace(str(Path(path)), self._predicted_timeline(), self.profile,  # not a file 'None'
                                  self.ranks)

    def plot(self, path: str | Path) -> None:
        """An SVG picture: a lane per stream over the predicted time, and a roofline with each kernel."""
        from . import report

        Path(path).write_text(report.svg(self._predicted_timeline(), self.profile, self.kernels,
                                         f"predicted on {report.predicted_on(self.profile, self.ranks)}: "
                                         f"{report._time(self.total_time_s)}"))


_REGION_RUNNING: list[Run] = []  # the simulate() region running, if one is: they do not nest


# LITERALINCLUDE START: PERF_SIMULATE
@contextmanager
def simulate(profile: str | Path | Profile, ranks: int | None = None, execute: bool = True,
             host: str = "profile", strict: bool = False) -> Iterator[Run]:
    """Runs the with block on openreg, recording it, and predicts it on `profile` (a bundled profile's
    name, a TOML file, or a Profile). Collectives are predicted for `ranks` ranks (default: the
    default process group's size, or 1). With execute=False the block runs in timing-only mode
    (torch.openreg.set_timing_only): nothing is computed and device memory is never touched, so a
    program larger than this machine runs, on devices of the profile's capacity (devices_for). host:
    the host's time between launches as the profile's [host] section describes the target's host
    ("profile": the prediction depends only on the program and the profile), as measured on this
    machine ("this-machine"), or nothing but launches ("launches"; Note [How the host is replayed] in
    timeline.py). Without execution, a floating-point value read to the host (a log line's .item(),
    .cpu()) is NaN, with a warning, and the summary counts such reads; strict=True makes them raise
    (torch.openreg.set_timing_only). Resets the peak memory statistics of every openreg device. When
    the block raises, the region up to that point is predicted all the same (run.partial) and the
    exception goes on."""
    import torch

    from . import assumptions, capture
    from .memory import MemoryWatch

    # Checked before the program runs: a typo must not cost the user their program's run.
    if not isinstance(execute, bool) or not isinstance(strict, bool):
        raise TypeError(f"execute and strict are True or False, not {execute!r} and {strict!r}")
    if strict and execute and not torch.openreg.is_timing_only():
        raise ValueError("strict=True is for timing-only mode (execute=False), where no value is computed")
    if _REGION_RUNNING:  # and before the outer region's peak memory statistics are reset
        raise RuntimeError("openreg_perf: simulate() regions do not nest, and one is running (python -m openreg_perf "
                           "run makes the whole script one): predict the outer region, or the inner one alone")
    ranks = _world_size() if ranks is None else _checked_count(ranks)
    host = _checked_host(host)
    if not isinstance(profile, Profile):
        profile = load_profile(profile)
    run = Run(profile, ranks, execute, host)
    devices = list(range(torch.openreg.device_count()))
    _check_not_capturing(devices)
    if not execute:
        _check_capacity(profile, devices)
    capture.recording_cost_per_operator()  # measured once per process, and not in the region's memory
    for device in devices:
        torch.openreg.reset_peak_memory_stats(device)
    allocations_before = _allocations(devices)
    timing_only, was_strict = torch.openreg.is_timing_only(), torch.openreg.is_timing_only_strict()
    run.timing_only = timing_only or not execute
    strict = strict or (timing_only and was_strict)  # the user's own strict timing-only mode stays strict
    torch.openreg.set_timing_only(run.timing_only, strict=strict)
    reads_before, assumed_before = torch.openreg.values_read_as_nan(), len(assumptions.ASSUMED)
    raised = None
    _REGION_RUNNING.append(run)
    try:
        with MemoryWatch(devices) as memory, capture.record(devices) as trace:
            try:
                yield run
            except BaseException as error:  # kept for after the recording ends, which fills the trace
                raised = error
    finally:
        torch.openreg.set_timing_only(timing_only, strict=was_strict)
        _REGION_RUNNING.remove(run)
    run.values_read_as_nan = torch.openreg.values_read_as_nan() - reads_before
    run.allocated = _allocations(devices) > allocations_before
    run.assumptions = assumptions.ASSUMED[assumed_before:]
    trace.host_pauses_ns = sorted(memory.pauses_ns)
    run.fsdp_world_size = _world_size() if memory.sharded_by_fsdp else None
    if raised is None:
        run._finish(trace, memory.splits)
        return
    _finish_partial(run, trace, memory.splits, raised, strict)
    raise raised
# LITERALINCLUDE END: PERF_SIMULATE


def _finish_partial(run: Run, trace, memory: dict, error: BaseException, strict: bool = False) -> None:
    """Predicts the region a raised exception cut short. The user's exception matters more than
    the partial prediction: a failure to make it is a warning, and the exception still goes on."""
    import torch

    if _reads_values_in_timing_only_mode(error):
        # A note, not another exception: the user's exception goes on unchanged, explained.
        how = "torch.openreg.set_timing_only(True)" if run.executed else "simulate(..., execute=False)"
        error.add_note(f"openreg_perf: {_value_read_refusal(how, strict)}")
    elif _DATA_DEPENDENT_SIZE in _message(error) and run.timing_only:
        error.add_note(f"openreg_perf: {_data_dependent_advice(_message(error))}")
    elif isinstance(error, torch.OutOfMemoryError):
        error.add_note(f"openreg_perf: {_does_not_fit_here(run.profile)}")
    try:
        run._finish(trace, memory, _one_line(error))
    except Exception as failure:  # noqa: BLE001 - any failure of ours must not hide the user's
        warnings.warn(f"openreg_perf: the region raised, and predicting it up to that point failed too: "
                      f"{_one_line(failure)}", RuntimeWarning, stacklevel=3)


def _does_not_fit_here(profile: Profile) -> str:
    """What an out-of-memory error in a region means for its prediction (the allocator's own advice, to raise
    OPENREG_DEVICE_MEMORY, would predict a device that does not exist)."""
    import torch

    wanted, here = profile.memory.capacity_bytes, torch.openreg.mem_get_info()[1]
    if abs(here - wanted) < 4096:
        return f"the program does not fit {profile.name}'s {wanted / 2**30:.1f} GiB: on it, it runs out of memory too"
    return (f"openreg's devices hold {here / 2**30:.1f} GiB here, {profile.name}'s {wanted / 2**30:.1f} GiB: predict "
            f"without executing on devices of its capacity (openreg_perf.devices_for({profile.name!r}) before "
            f"importing torch, then simulate(..., execute=False); the command line's --no-execute)")


def _message(error: BaseException) -> str:
    """str(error), or "" where the exception's own __str__ raises: the user's exception must still go on."""
    try:
        return str(error)
    except Exception:  # noqa: BLE001 - whatever a broken __str__ raises
        return ""


def _one_line(error: BaseException) -> str:
    """'TypeError: message', the message's first line only (a summary's first line names it)."""
    message = _message(error).strip().splitlines()
    return f"{type(error).__name__}: {message[0]}" if message else type(error).__name__


# Note [Reading values in timing-only mode]: torch-openreg refuses the reads of a tensor's values in
# timing-only mode that NaN cannot stand for (its Note [Values read in timing-only mode]: integers,
# booleans, every read in strict mode), naming what needed them: .item(), or a copy to the CPU, which
# .tolist() and print(t) make (print formats a copy on the host: torch-openreg's Note [Printing a
# tensor in timing-only mode]). The refusal has no type of its own: it is told by its message
# (runtime/Device.cpp's checkValuesComputed and TimingOnlyMemory.cpp's readsAsNaN in torch-openreg).
_TIMING_ONLY_REFUSAL = "needs values of device memory, and openreg runs in timing-only mode"
_VALUE_READS = ("aten::_local_scalar_dense", "a copy from an openreg tensor to the CPU")
_DATA_DEPENDENT_SIZE = "its output shape depends on the data"
# The refused operators behind the selections assume() sizes (Note [Assumed selections]): indexing with
# a mask and torch.where(condition) call nonzero.
_SELECTIONS = ("openreg: aten::nonzero ", "openreg: aten::masked_select ", "openreg: aten::index",
               "openreg: aten::_index_put_impl_ ")


def _data_dependent_advice(message: str) -> str:
    """What to do about timing-only mode's refusal of an operator whose output size depends on the data:
    state the size where it is a selection assume() sizes, else leave the operator out."""
    if message.startswith(_SELECTIONS):
        return ("in timing-only mode an operator whose output size depends on the data takes the size you "
                "state: wrap it in openreg_perf.assume(selected=FRACTION), the fraction of its candidates "
                "selected (Note [Assumed selections]). The backward pass of x[mask] selects through the mask "
                "again: wrap loss.backward() in assume() too, and each mask keeps the size its forward's "
                "assumption gave it")
    operator = message.removeprefix("openreg: ").split(" ")[0]
    return (f"{operator}'s result depends on the data in a way openreg_perf.assume cannot state (it states how "
            f"many elements a selection keeps: nonzero, torch.where(condition), boolean masks, masked_select): "
            f"leave {operator} out of the region, or predict with execute=True")


def _value_read_refusal(how: str, strict: bool = False) -> str:
    """What the user did, for a refused read; how: what put the region in timing-only mode."""
    if strict:
        return (f"reading a tensor's values (print, .item(), .tolist()) is refused in strict timing-only mode "
                f"({how}, strict): nothing was computed, and strict mode lets no NaN stand for a value")
    return (f"reading an integer or boolean tensor's values (print, .item(), .tolist()) is not possible in "
            f"timing-only mode ({how}): nothing was computed, and NaN stands only for floating-point values")


def _reads_values_in_timing_only_mode(error: BaseException) -> bool:
    """Whether error is torch-openreg's timing-only refusal of a read of a tensor's values: printing it,
    .item(), .tolist(), a copy to the CPU (Note [Reading values in timing-only mode])."""
    message = _message(error)
    return isinstance(error, RuntimeError) and _TIMING_ONLY_REFUSAL in message and any(
        read in message for read in _VALUE_READS)


# More ranks (or micro-batches, kernels to list) than any machine has: a typo (2**62), not a plan.
MOST_COUNTED = 2**20


def _checked_count(count, name: str = "ranks", least: int = 1) -> int:
    """A count as given by the user (ranks, micro-batches, ...): a whole number from `least` to
    MOST_COUNTED (True is not one; 0 ranks is refused, not taken for the default); numpy's integers too."""
    if isinstance(count, bool) or not isinstance(count, numbers.Integral) or not least <= count <= MOST_COUNTED:
        raise ValueError(f"{name} must be a whole number from {least} to {MOST_COUNTED:,}, not {count!r}")
    return int(count)


def _checked_host(host: str) -> str:
    from .timeline import HOST_MODELS

    if host not in HOST_MODELS:
        raise ValueError(f"host must be one of {', '.join(map(repr, HOST_MODELS))}, not {host!r}")
    return host


def devices_for(profile: str | Path | Profile) -> None:
    """Makes this process's openreg devices the capacity of profile's (OPENREG_DEVICE_MEMORY), for
    simulate(..., execute=False): call it before torch is imported, which starts the runtime."""
    import os
    import sys

    if not isinstance(profile, Profile):
        profile = load_profile(profile)
    wanted = str(profile.memory.capacity_bytes)
    if "openreg_runtime" in sys.modules and os.environ.get("OPENREG_DEVICE_MEMORY") != wanted:
        _check_capacity(profile, [0])
    os.environ["OPENREG_DEVICE_MEMORY"] = wanted


def _check_capacity(profile: Profile, devices: list[int]) -> None:
    """Timing-only prediction runs out of memory exactly where the target would: the devices must have
    the profile's capacity (the runtime rounds it to whole pages)."""
    import torch

    wanted = profile.memory.capacity_bytes
    for device in devices:
        capacity = torch.openreg.mem_get_info(device)[1]
        if abs(capacity - wanted) >= 4096:
            raise RuntimeError(
                f"predicting without executing on {profile.name} needs openreg devices of its capacity, "
                f"{wanted} bytes ({wanted / 2**30:.1f} GiB); openreg:{device} has {capacity}. Call "
                f"openreg_perf.devices_for({profile.name!r}) before importing torch, or start Python with "
                f"OPENREG_DEVICE_MEMORY={wanted} (python -m openreg_perf run --no-execute does it for you)")


def _allocations(devices: list[int]) -> int:
    """How many blocks the caching allocator has handed out on these devices, ever."""
    import torch

    return sum(torch.openreg.memory_stats(device).get("allocation.all.allocated", 0) for device in devices)


def _check_not_capturing(devices: list[int]) -> None:
    """A region's end waits for its work, which a graph capture forbids: it would invalidate the capture."""
    import torch

    for device in devices:
        if torch.openreg.current_stream(device).is_capturing():
            raise RuntimeError(
                f"openreg_perf: simulate() cannot start while openreg:{device}'s current stream captures a graph: "
                f"the region's end waits for its work, which would invalidate the capture. Predict the program's "
                f"eager form (a replay's kernels have no recorded operators)")


def _counted(count: int, thing: str) -> str:
    """"1 read", "3 reads"."""
    return f"{count} {thing}" + ("" if count == 1 else "s")


def _world_size() -> int:
    import torch.distributed as dist

    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
