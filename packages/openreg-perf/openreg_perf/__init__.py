"""openreg_perf: how a program that runs on openreg would run on a real accelerator.

    with openreg_perf.simulate("h100-sxm") as run:
        loss = model(x).sum(); loss.backward(); opt.step()
    print(run.summary()); run.export_chrome_trace("step.json"); run.plot("step.svg")

The program runs unchanged on openreg while torch.openreg.record_activity() records it (capture.py);
every kernel, copy and collective gets a cost (costs.py) and a predicted time on the device profile
(model.py);
the program's streams, events and host waits are replayed into a predicted timeline (timeline.py),
which the report reads (report.py). Profiles are data files (profile.py, profiles/*.toml).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .profile import Profile, ProfileError, list_profiles, load_profile

__all__ = ["Profile", "ProfileError", "Run", "devices_for", "list_profiles", "load_profile", "simulate"]


class Run:
    """What simulate() predicts for its region, filled in when the with block ends.

    total_time_s: predicted time of the region, from its first launch to its last completion, over
    every stream and device of the process. kernels: a report.KernelRecord per kernel, copy and
    collective, in launch order. peak_memory_bytes: per device, the caching allocator's peak over the
    region (as PyTorch's max_memory_allocated counts it). report: the region's figures
    (report.RegionReport). kernels and report are made when first read: a program that wants only
    the time does not pay for them."""

    def __init__(self, profile: Profile, ranks: int, executed: bool, host: str = "measured"):
        self.profile, self.ranks, self.executed, self.host = profile, ranks, executed, host
        self.total_time_s = 0.0
        self.peak_memory_bytes: dict[int, int] = {}
        self.memory: dict = {}  # device -> memory.MemorySplit
        self.trace = self.timeline = None

    def _finish(self, trace, memory: dict) -> None:
        from . import capture, timeline

        self.trace = trace
        with capture.without_cycle_collection():
            self.timeline = timeline.replay(trace, self.profile, self.ranks, self.host)
        self.memory = {device: split for device, split in memory.items() if split.peak_allocated > 0}
        self.peak_memory_bytes = {device: split.peak_allocated for device, split in self.memory.items()}
        self.total_time_s = self.timeline.total_s

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
        if profile is not None and not isinstance(profile, Profile):
            profile = load_profile(profile)
        other = Run(profile or self.profile, ranks or self.ranks, self.executed, host or self.host)
        other._finish(self.trace, self.memory)
        return other

    def summary(self, top: int = 10) -> str:
        from . import report

        return report.summary(self.profile, self.report, self.kernels, top)

    def export_chrome_trace(self, path: str | Path) -> None:
        """The predicted lanes (and the simulator's measured ones) for chrome://tracing or Perfetto."""
        from . import report

        report.write_chrome_trace(str(path), self.timeline, self.profile)

    def plot(self, path: str | Path) -> None:
        """An SVG picture: a lane per stream over the predicted time, and a roofline with each kernel."""
        from . import report

        Path(path).write_text(report.svg(self.timeline, self.profile, self.kernels,
                                         f"predicted on {self.profile.name}: {report._time(self.total_time_s)}"))


# LITERALINCLUDE START: PERF_SIMULATE
@contextmanager
def simulate(profile: str | Path | Profile, ranks: int | None = None, execute: bool = True,
             host: str = "measured") -> Iterator[Run]:
    """Runs the with block on openreg, recording it, and predicts it on `profile` (a bundled profile's
    name, a TOML file, or a Profile). Collectives are predicted for `ranks` ranks (default: the
    default process group's size, or 1). With execute=False the block runs in timing-only mode
    (torch.openreg.set_timing_only): nothing is computed and device memory is never touched, so a
    program larger than this machine runs, on devices of the profile's capacity (devices_for). host:
    the host's time between launches as measured here ("measured") or nothing but launches
    ("launches"; Note [How the host is replayed] in timeline.py). Resets the peak memory statistics of
    every openreg device."""
    import torch

    from . import capture
    from .memory import MemoryWatch

    if not isinstance(profile, Profile):
        profile = load_profile(profile)
    run = Run(profile, ranks or _world_size(), execute, host)
    devices = list(range(torch.openreg.device_count()))
    if not execute:
        _check_capacity(profile, devices)
    for device in devices:
        torch.openreg.reset_peak_memory_stats(device)
    timing_only = torch.openreg.is_timing_only()
    torch.openreg.set_timing_only(timing_only or not execute)
    try:
        with MemoryWatch(devices) as memory, capture.record(devices) as trace:
            yield run
    finally:
        torch.openreg.set_timing_only(timing_only)
    trace.host_pauses_ns = sorted(memory.pauses_ns)
    run._finish(trace, memory.splits)
# LITERALINCLUDE END: PERF_SIMULATE


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


def _world_size() -> int:
    import torch.distributed as dist

    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
