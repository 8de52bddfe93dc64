"""What a predicted timeline means: per kernel (time, bound, achieved fraction of peak) and per region
(busy and idle time, exposed communication, hardware FLOP utilisation, peak memory against capacity),
as a text summary, a Chrome/Perfetto trace and an SVG picture (a lane per stream, and a roofline
with each kernel as a point). Not here: the prediction itself (timeline.py).
"""

from __future__ import annotations

import collections
import html
import json
import math
from dataclasses import dataclass, field

from .model import error_class, peak_rate, roofline_seconds
from .profile import PRECISIONS, Profile, defaults_label, held_out_errors
from .timeline import Predicted, Timeline, merged_intervals


@dataclass(frozen=True)
class KernelRecord:
    """One kernel, copy or collective of the region, as the report lists it."""

    name: str
    op: str  # the operator that queued it ("" if none was recorded)
    shapes: list
    dtypes: list
    flops: float
    bytes: float  # to and from device memory (less what L2 serves: model.memory_bytes)
    seconds: float  # predicted
    bound: str  # compute, memory or latency; a collective's link or latency (collectives.collective_bound)
    achieved_fraction: float  # of the peak that bounds it
    category: str  # compute, collective, copy, memset
    device: int
    stream: int
    start_s: float  # predicted, from the region's first launch
    known: bool  # False: no cost rule knew the operator, the default (bytes only) was used
    precision: str = "fp32"  # what it ran in (TF32 for an FP32 product on TF32 units)


def kernel_records(timeline: Timeline) -> list[KernelRecord]:
    records = []
    for item in timeline.items:
        if item.category == "sync":
            continue
        work, cost = item.work, item.cost
        op = work.op
        records.append(KernelRecord(
            work.name, op.name if op else "", list(op.shapes) if op else [], list(op.dtypes) if op else [],
            cost.flops if cost else 0.0, item.nbytes, item.seconds, item.bound,
            item.achieved_fraction, item.category, work.device, work.stream, item.start_s,
            cost.known if cost else True, (item.precision or cost.precision) if cost else "fp32"))
    return records


def _union_seconds(intervals: list[tuple[float, float]]) -> float:
    return sum(stop - start for start, stop in merged_intervals(intervals))


def _overlap_seconds(spans: list[tuple[float, float]], covers: list[tuple[float, float]]) -> float:
    """How much of the union of spans the union of covers also covers."""
    return _union_seconds(spans) + _union_seconds(covers) - _union_seconds(spans + covers)


@dataclass(frozen=True)
class RegionReport:
    total_s: float
    roofline_s: float  # the plain datasheet roofline of the same work, serialised
    busy_s: dict  # device -> time any of its streams runs work
    compute_s: float
    communication_s: float  # collectives, as run
    exposed_communication_s: float  # collectives' time with no compute running beside them
    flops: float
    hardware_flop_utilisation: float  # each kernel's FLOPs / its precision's peak, over the region's time (<= 1)
    memory: dict  # device -> memory.MemorySplit
    capacity_bytes: int
    unknown_operators: list  # operators priced by the default rule
    host: str  # the host model (timeline.HOST_MODELS)
    class_seconds: dict  # kernel class (model.error_class) -> predicted seconds of its kernels
    # Kernels no recorded operator launched, priced at the kernel floor: name -> count. A graph captured
    # before the region replays such kernels (its capture recorded their operators, not the replay).
    without_operator: dict = field(default_factory=dict)


def region_report(timeline: Timeline, profile: Profile, memory: dict) -> RegionReport:
    work = [item for item in timeline.items if item.category != "sync"]
    spans = lambda items: [(item.start_s, item.end_s) for item in items]  # noqa: E731
    compute = [item for item in work if item.category in ("compute", "memset")]
    collectives = [item for item in work if item.category == "collective"]
    devices = sorted({item.work.device for item in work})
    busy = {d: _union_seconds(spans([item for item in work if item.work.device == d])) for d in devices}
    communication = _union_seconds(spans(collectives))
    exposed = communication - _overlap_seconds(spans(collectives), spans(compute))
    priced = [item for item in work if item.cost is not None]
    flops = sum(item.cost.flops for item in priced)
    roofline = sum(roofline_seconds(item.cost, item.precision, profile) for item in priced)
    # A collective is priced by the collective model, never by its operator's cost rule.
    unknown = sorted({item.work.op.name for item in priced if not item.cost.known and item.category != "collective"})
    total = timeline.total_s
    utilisation = _flop_utilisation(priced, devices, total, profile)
    class_seconds: dict[str, float] = {}
    for item in priced:
        name = "collectives" if item.category == "collective" else "copies" if item.category == "copy" else \
            error_class(item.cost, item.precision)
        class_seconds[name] = class_seconds.get(name, 0.0) + item.seconds
    without_operator = collections.Counter(item.work.name for item in work
                                           if item.category == "compute" and item.work.op is None)
    return RegionReport(total, roofline, busy, _union_seconds(spans(compute)), communication, exposed, flops,
                        utilisation, dict(memory), profile.memory.capacity_bytes, unknown, timeline.host,
                        class_seconds, dict(without_operator))


def without_operator_text(kernels: dict) -> str:
    """What the summary and the region's warning say of kernels no recorded operator launched."""
    names = ", ".join(f"{name} x{count}" for name, count in sorted(kernels.items(), key=lambda k: -k[1])[:4])
    return (f"{sum(kernels.values())} kernels ({names}{', ...' if len(kernels) > 4 else ''}), priced at the "
            "kernel floor: a graph captured before the region replays such kernels, and their work is left out")


def expected_error(report: RegionReport) -> tuple[float, dict[str, float]]:
    """The held-out error of the prediction's kernel classes (profile.held_out_errors), weighted by
    the predicted time of each: the error one should expect of the device time, and the classes'.
    A class the benchmark has no rows for is left out of the weighting."""
    errors = held_out_errors()
    known = {name: seconds for name, seconds in report.class_seconds.items() if name in errors}
    total = sum(known.values())
    if total <= 0:
        return 0.0, {}
    weighted = sum(seconds * errors[name][0] for name, seconds in known.items()) / total
    return weighted, {name: errors[name][0] for name in sorted(known, key=lambda name: -known[name])}


def _flop_utilisation(priced: list[Predicted], devices: list[int], total: float, profile: Profile) -> float:
    """Hardware FLOP utilisation: each kernel's FLOPs against the peak of the precision it ran in (TF32 for
    an FP32 product on TF32 units), over the region's time on every device. Every FLOP a kernel does
    counts, an activation checkpoint's recomputation too: model FLOP utilisation (MFU, as PaLM defines
    it) leaves that out, and is lower by the recomputed share. A device's kernels share its units
    (timeline.py's Note [Streams share the device]), so it stays under 1; capped there all the same."""
    if total <= 0 or not devices:
        return 0.0
    peak_seconds = sum(item.cost.flops / peak_rate(item.cost, item.precision, profile) for item in priced)
    return min(1.0, peak_seconds / (total * len(devices)))


def _si(value: float, unit: str) -> str:
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _time(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.1f} us"


# LITERALINCLUDE START: PERF_SUMMARY
def summary(profile: Profile, report: RegionReport, kernels: list[KernelRecord], top: int = 10, ranks: int = 1) -> str:
    """The report as text: the region, then the kernels that take the most predicted time."""
    lines = [f"openreg-perf: predicted on {predicted_on(profile, ranks)} ({profile.description})",
             f"  region time        {_time(report.total_s)}   (datasheet roofline: {_time(report.roofline_s)})"]
    error, per_class = expected_error(report)
    if profile.name == "host":  # this machine's CPU as the device: the held-out rows are GPUs' and accelerators'
        lines.append("  expected error     not known for this machine's CPU (the held-out errors are accelerators'; "
                     "tools/bench/perf_model.py --parts host compares its kernels)")
    elif per_class:
        classes = ", ".join(f"{name} {100 * value:.0f}%" for name, value in per_class.items())
        lines.append(f"  expected error     about {100 * error:.0f}% of the device time (held out per kernel class: "
                     f"{classes}; tools/bench/perf_model.py)")
    lines.append(f"  host               {_host_line(profile, report.host)}")
    if profile.defaulted:
        taken = ", ".join(f"[{section}] " + ("the bundled server host's" if section == "host" else
                                              f"the {defaults_label(profile.architecture)} defaults")
                          for section in profile.defaulted)
        lines.append(f"  profile            leaves out [{'], ['.join(profile.defaulted)}]: used instead, "
                     f"{taken} (profiles/_defaults.toml)")
    for device, busy in report.busy_s.items():
        idle = max(0.0, report.total_s - busy)
        lines.append(f"  device {device}           busy {_time(busy)}, idle {_time(idle)} "
                     f"({100 * idle / report.total_s if report.total_s else 0:.0f}%)")
    lines.append(f"  compute            {_time(report.compute_s)}")
    if report.communication_s > 0:
        lines.append(f"  communication      {_time(report.communication_s)}, exposed "
                     f"{_time(report.exposed_communication_s)}, overlapped "
                     f"{_time(report.communication_s - report.exposed_communication_s)}")
    lines.append(f"  work               {_si(report.flops, 'FLOP')}, hardware FLOP utilisation "
                 f"{100 * report.hardware_flop_utilisation:.1f}%")
    for device, split in report.memory.items():
        lines.append(f"  peak memory {device}      {_si(split.peak_allocated, 'B')} of "
                     f"{_si(report.capacity_bytes, 'B')} ({100 * split.peak_allocated / report.capacity_bytes:.1f}%), "
                     f"reserved "
                     f"{_si(split.peak_reserved, 'B')}")
        lines.append(f"    at its busiest   parameters {_si(split.parameters, 'B')}, gradients "
                     f"{_si(split.gradients, 'B')}, optimizer state {_si(split.optimizer_state, 'B')}, "
                     f"activations and other {_si(split.activations, 'B')}, between samples "
                     f"{_si(split.between_samples, 'B')}")
    if report.unknown_operators:
        lines.append(f"  default cost for   {', '.join(report.unknown_operators)}")
    if report.without_operator:
        lines.append(f"  no operator for    {without_operator_text(report.without_operator)}")
    by_name: dict[str, list[KernelRecord]] = {}
    for record in kernels:
        by_name.setdefault(record.op or record.name, []).append(record)
    ranked = sorted(by_name.items(), key=lambda entry: -sum(r.seconds for r in entry[1]))[:top]
    width = max([48] + [len(name) for name, _ in ranked])  # whole names: two may differ only at their ends
    lines.append(f"  {'kernel':<{width}} {'count':>6} {'time':>12} {'share':>6}  {'bound':<15} achieved")
    busy = sum(r.seconds for r in kernels) or 1.0
    for name, records in ranked:
        seconds = sum(r.seconds for r in records)
        bounds = {r.bound for r in records}
        achieved = max(r.achieved_fraction for r in records)
        lines.append(f"  {name:<{width}} {len(records):>6} {_time(seconds):>12} {100 * seconds / busy:>5.1f}%  "
                     f"{'/'.join(sorted(bounds)):<15} {100 * achieved:5.1f}%")
    return "\n".join(lines)
# LITERALINCLUDE END: PERF_SUMMARY


def _host_line(profile: Profile, host: str) -> str:
    if host == "this-machine":
        return "as measured on this machine (host=\"this-machine\"): depends on the machine that predicts"
    if host == "launches":
        return f"launches only, {_time(profile.host.launch_s)} each (the device's view)"
    figures = profile.host
    return (f"the profile's: {_time(figures.launch_s)} a launch, {_time(figures.operator_s)} a further operator, "
            f"{_time(figures.outer_call_s)} more a further call from Python, {_time(figures.module_call_s)} a module, "
            f"{_time(figures.optimizer_step_s)} an optimizer step, {_time(figures.synchronize_s)} a synchronisation")


def predicted_on(profile: Profile, ranks: int = 1) -> str:
    """What a prediction is of, as its reports name it: "h100-sxm", "h100-sxm for 64 ranks"."""
    return profile.name + (f" for {ranks} ranks" if ranks > 1 else "")


def chrome_trace(timeline: Timeline, profile: Profile, measured: bool = True, ranks: int = 1) -> dict:
    """Chrome/Perfetto trace events: a lane per predicted stream (process "predicted on <profile>[ for N
    ranks], device N"), beside the simulator's measured lanes when measured is true."""
    events, on = [], predicted_on(profile, ranks)
    origin = min((item.work.queued_ns for item in timeline.items), default=0)
    for item in timeline.items:
        work = item.work
        args = {"op": work.op.name if work.op else "", "bound": item.bound,
                "flops": item.cost.flops if item.cost else 0, "bytes": item.nbytes}
        events.append({"name": work.name, "cat": item.category, "ph": "X", "ts": item.start_s * 1e6,
                       "dur": item.seconds * 1e6, "pid": f"predicted on {on}, device {work.device}",
                       "tid": stream_name(timeline, work.device, work.stream), "args": args})
        if measured:
            start, end = work.measured_ns
            events.append({"name": work.name, "cat": item.category, "ph": "X", "ts": (start - origin) / 1e3,
                           "dur": (end - start) / 1e3, "pid": f"measured on openreg (simulator), device {work.device}",
                           "tid": stream_name(timeline, work.device, work.stream)})
    for wait in timeline.waits:
        events.append({"name": wait.wait.name, "cat": "host wait", "ph": "X", "ts": wait.start_s * 1e6,
                       "dur": (wait.end_s - wait.start_s) * 1e6, "pid": f"predicted on {on}, host",
                       "tid": "host"})
    return {"traceEvents": events, "displayTimeUnit": "ns"}


def write_chrome_trace(path: str, timeline: Timeline, profile: Profile, ranks: int = 1) -> None:
    with open(path, "w") as out:
        json.dump(chrome_trace(timeline, profile, ranks=ranks), out)


# ------------------------------------------------------------------------------------------ picture

_COLORS = {"compute": "#4e79a7", "memory": "#59a14f", "latency": "#bab0ac", "collective": "#e15759",
           "copy": "#f28e2b", "memset": "#76b7b2"}


def _color(item_category: str, bound: str) -> str:
    return _COLORS["collective" if item_category == "collective" else
                   "copy" if item_category == "copy" else bound if bound in _COLORS else "latency"]


def stream_name(timeline: Timeline, device: int, stream: int) -> str:
    """A lane's name: torch.openreg.Stream.stream_id's number, and "(default)" for the device's default stream."""
    return f"stream {stream}" + (" (default)" if timeline.default_streams.get(device) == stream else "")


def svg(timeline: Timeline, profile: Profile, kernels: list[KernelRecord], title: str) -> str:
    """The picture of a report: a lane per (device, stream) over the predicted time, and a roofline
    chart (achieved FLOP/s against arithmetic intensity, log-log) with each kernel a point."""
    width, lane_height, margin = 900, 22, 150
    lanes = sorted({(item.work.device, item.work.stream) for item in timeline.items if item.category != "sync"})
    total = timeline.total_s or 1.0  # the scale's: an empty region's axis still ends at its 0 s
    timeline_height = 40 + lane_height * max(1, len(lanes))
    parts = [f'<text x="10" y="20" font-size="14">{html.escape(title)}</text>']
    if not lanes:
        parts.append(f'<text x="{margin}" y="45" font-size="11">no work ran in the region</text>')
    for row, lane in enumerate(lanes):
        y = 30 + row * lane_height
        label = f"device {lane[0]}, {stream_name(timeline, *lane)}"
        parts.append(f'<text x="10" y="{y + 15}" font-size="11">{label}</text>')
        for item in timeline.items:
            if (item.work.device, item.work.stream) != lane or item.category == "sync":
                continue
            x = margin + (width - margin - 10) * item.start_s / total
            w = max(0.5, (width - margin - 10) * item.seconds / total)
            parts.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{lane_height - 4}" '
                         f'fill="{_color(item.category, item.bound)}"><title>{html.escape(item.work.name)} '
                         f'{_time(item.seconds)}</title></rect>')
    parts.append(f'<text x="{margin}" y="{timeline_height}" font-size="11">0</text>'
                 f'<text x="{width - 80}" y="{timeline_height}" font-size="11">{_time(timeline.total_s)}</text>')
    parts += _legend(10, timeline_height + 8)
    chart_top = timeline_height + 34
    parts += _roofline_chart(profile, kernels, chart_top, width)
    height = chart_top + 300
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'font-family="sans-serif">{"".join(parts)}</svg>\n')


def _roofline_chart(profile: Profile, kernels: list[KernelRecord], top: int, width: int) -> list[str]:
    """Achieved FLOP/s against arithmetic intensity, log-log, with labelled axes: one roof per precision
    the region's kernels ran in (its peak, and the memory bandwidth's slope), each kernel a point."""
    left, size_x, size_y = 90, width - 130, 260
    precisions = sorted({record.precision for record in kernels if record.flops > 0}) or ["fp32"]
    roofs = {precision: _roof_peak(profile, precision) for precision in precisions}
    bandwidth = profile.memory.bandwidth_bytes_per_s
    highest = max(roofs.values())
    x_range = (-2, 4)  # log10 FLOP/byte
    y_range = (math.floor(math.log10(highest)) - 5, math.ceil(math.log10(highest) + 0.3))  # log10 FLOP/s

    def point(intensity: float, rate: float) -> tuple[float, float]:
        lx = (math.log10(intensity) - x_range[0]) / (x_range[1] - x_range[0])
        ly = (math.log10(rate) - y_range[0]) / (y_range[1] - y_range[0])
        return left + size_x * min(max(lx, 0), 1), top + size_y * (1 - min(max(ly, 0), 1))

    parts = [f'<rect x="{left}" y="{top}" width="{size_x}" height="{size_y}" fill="none" stroke="#999"/>']
    for exponent in range(x_range[0], x_range[1] + 1):  # axis values
        x, _ = point(10.0 ** exponent, 10.0 ** y_range[0])
        parts.append(f'<text x="{x:.1f}" y="{top + size_y + 14}" font-size="10" text-anchor="middle">'
                     f'{10.0 ** exponent:g}</text>')
    for exponent in range(y_range[0], y_range[1] + 1):
        _, y = point(1.0, 10.0 ** exponent)
        parts.append(f'<text x="{left - 6}" y="{y + 3:.1f}" font-size="10" text-anchor="end">'
                     f'{_si(10.0 ** exponent, "FLOP/s")}</text>')
    parts.append(f'<text x="{left + size_x / 2}" y="{top + size_y + 30}" font-size="11" text-anchor="middle">'
                 f'arithmetic intensity (FLOP per byte of memory traffic)</text>')
    for index, (precision, peak) in enumerate(sorted(roofs.items(), key=lambda item: -item[1])):
        color = _ROOF_COLORS[index % len(_ROOF_COLORS)]
        roof = [point(10 ** x, min(peak, bandwidth * 10 ** x)) for x in [x_range[0] + i * 0.05 for i in range(121)]]
        parts.append(f'<polyline fill="none" stroke="{color}" points="' +
                     " ".join(f"{x:.1f},{y:.1f}" for x, y in roof) + '"/>')
        parts.append(f'<text x="{left + size_x - 4}" y="{point(1e4, peak)[1] - 3:.1f}" font-size="10" '
                     f'text-anchor="end" fill="{color}">{precision}: {_si(peak, "FLOP/s")}</text>')
    for record in kernels:
        if record.flops <= 0 or record.bytes <= 0 or record.seconds <= 0:
            continue
        x, y = point(record.flops / record.bytes, record.flops / record.seconds)
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{_color(record.category, record.bound)}">'
                     f'<title>{html.escape(record.op or record.name)}</title></circle>')
    return parts


_ROOF_COLORS = ("#333333", "#8c564b", "#9467bd", "#17becf")


def _roof_peak(profile: Profile, precision: str) -> float:
    """The peak a roof stands for: a precision's matrix rate (FP32's where the chip lacks the unit)."""
    return profile.peak_of(precision) if precision in PRECISIONS else profile.peak.fp32_flops_per_s


def _legend(x: float, y: float) -> list[str]:
    """What the colours of the lanes and the points mean."""
    parts, names = [], (("compute", "compute-bound"), ("memory", "memory-bound"), ("latency", "latency-bound"),
                        ("collective", "collective"), ("copy", "copy"), ("memset", "memset"))
    for index, (key, label) in enumerate(names):
        left = x + index * 120
        parts.append(f'<rect x="{left}" y="{y}" width="10" height="10" fill="{_COLORS[key]}"/>'
                     f'<text x="{left + 14}" y="{y + 9}" font-size="10">{label}</text>')
    return parts
