"""openreg_perf: how a program that runs on openreg would run on a real accelerator.

    with openreg_perf.simulate("h100-sxm") as run:
        loss = model(x).sum(); loss.backward(); opt.step()
    print(run.summary()); run.export_chrome_trace("step.json"); run.plot("step.svg")

The program runs unchanged on openreg while torch.profiler records it (capture.py); every kernel,
copy and collective gets a cost (costs.py) and a predicted time on the device profile (model.py);
the program's streams, events and host waits are replayed into a predicted timeline (timeline.py),
which the report reads (report.py). Profiles are data files (profile.py, profiles/*.toml).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .profile import Profile, ProfileError, list_profiles, load_profile

__all__ = ["Profile", "ProfileError", "Run", "list_profiles", "load_profile", "simulate"]


class Run:
    """What simulate() predicts for its region, filled in when the with block ends.

    total_time_s: predicted time of the region, from its first launch to its last completion, over
    every stream and device of the process. kernels: a report.KernelRecord per kernel, copy and
    collective, in launch order. peak_memory_bytes: per device, the caching allocator's peak over the
    region (as PyTorch's max_memory_allocated counts it)."""

    def __init__(self, profile: Profile, ranks: int):
        self.profile, self.ranks = profile, ranks
        self.total_time_s = 0.0
        self.kernels: list = []
        self.peak_memory_bytes: dict[int, int] = {}
        self.trace = self.timeline = self.report = None

    def _finish(self, trace, peak_memory_bytes: dict[int, int]) -> None:
        from . import report, timeline

        self.trace = trace
        self.timeline = timeline.replay(trace, self.profile, self.ranks)
        self.kernels = report.kernel_records(self.timeline)
        self.peak_memory_bytes = peak_memory_bytes
        self.report = report.region_report(self.timeline, self.profile, peak_memory_bytes)
        self.total_time_s = self.report.total_s

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
def simulate(profile: str | Path | Profile, ranks: int | None = None) -> Iterator[Run]:
    """Runs the with block on openreg, recording it, and predicts it on `profile` (a bundled profile's
    name, a TOML file, or a Profile). Collectives are predicted for `ranks` ranks (default: the
    default process group's size, or 1). Resets the peak memory statistics of every openreg device."""
    import torch

    from . import capture

    if not isinstance(profile, Profile):
        profile = load_profile(profile)
    run = Run(profile, ranks or _world_size())
    devices = list(range(torch.openreg.device_count()))
    for device in devices:
        torch.openreg.reset_peak_memory_stats(device)
    with capture.record(devices) as trace:
        yield run
    peaks = {device: torch.openreg.max_memory_allocated(device) for device in devices}
    run._finish(trace, {device: peak for device, peak in peaks.items() if peak > 0})
# LITERALINCLUDE END: PERF_SIMULATE


def _world_size() -> int:
    import torch.distributed as dist

    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
