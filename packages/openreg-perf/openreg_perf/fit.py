"""Fitting the profiles' [efficiency] and [collectives] parameters to published calibration rows.

Turns each row of a calibration table (tools/bench/perf_calibration.csv) into a case the model can
predict, fits the parameters by coordinate descent (deterministic), and predicts held-out devices.
Not the model (model.py) and not a report: tools/bench/perf_model.py prints the tables.

Note [How a calibration row becomes a prediction]
  GEMM torch.matmul (latency, ms)   aten::mm of the stated M, K, N in FP16; measured end to end around a
                                    synchronisation, so the prediction adds the harness's fixed host cost
                                    (Python call, dispatch, the BLAS library's host-side call, synchronise),
                                    fitted as eager_matmul_call_s. It is a harness cost, not device time:
                                    the mamf-finder rows, timed on the device, would not fit it.
  softmax / layernorm / gelu        the throughput in G elements/s becomes seconds for the stated elements;
    (G elements/s)                  the op is aten::_softmax over the last dim, aten::native_layer_norm over
                                    the last dim, aten::gelu, in FP16; costs.py counts bytes as the kernel
                                    moves them (softmax rows of 64 KiB are read three times). LLMCompass runs
                                    softmax eagerly (eager_call_s) and layernorm and gelu through torch.compile
                                    (compiled_call_s: the compiled graph's call and guard costs).
  mamf-finder (TFLOP/s)             the best throughput over a shape search, at the stated best shape: the
                                    time of one aten::mm (BF16) or aten::_scaled_mm (FP8) of that shape, timed
                                    on the device over many iterations, so no harness cost.
  NCCL all_reduce (time, us)        collective_seconds("all_reduce", size, ranks); nccl-tests times on the
                                    device, so no harness cost. busbw rows become time through nccl-tests'
                                    convention: time = size * 2(n-1)/n / busbw. "default algo" lets the model
                                    pick the fastest algorithm (in-switch on H200); "ring" forces the ring.
  nvbandwidth (GB/s)                a copy of NVBANDWIDTH_BYTES: "p2p" for the NVLink pair, pinned "h2d" for
                                    the host-to-device row; at that size the latency is under 0.1 %.
Each row's class for the error tables: "launch" if published under 20 us; otherwise "collectives" for
NCCL rows, "links" for copies, and for kernels the bound of the datasheet roofline ("compute"/"memory").

Note [Which parameters a device gets]
  Levels (matrix_fraction, memory_fraction, copy_fraction, simple_fraction) are fitted per device, to
  that device's own rows. Shapes (half depths, setup and step latencies, low-latency protocol, in-switch
  reduction) are one device-independent value fitted to all rows. A device without rows of a kind gets
  the median of the per-device levels, one vote per device: expressed relative to the datasheet peak,
  the device-independent fit. A parameter no row informs (its rows move less than 1 % when it grows by
  half) keeps its starting value. Leave-one-device-out drops every row of a device, fits, and predicts
  that device's rows, which then can only use the device-independent values. The harness costs
  (eager_call_s, eager_matmul_call_s, compiled_call_s) describe the measurements, not a device: they
  are fitted with the rest but never written into a profile.
"""

from __future__ import annotations

import csv
import functools
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields, replace
from pathlib import Path

from .costs import Cost, OpCall, cost_of
from .model import bus_bandwidth_factor, collective_seconds, copy_seconds, kernel_seconds, roofline_seconds
from .profile import Collectives, Efficiency, Profile, load_profile

LAUNCH_BOUND_SECONDS = 20e-6
NVBANDWIDTH_BYTES = 512 * 2**20  # nvbandwidth's default buffer size
HARNESS_PARAMETERS = ("eager_call_s", "eager_matmul_call_s", "compiled_call_s")
LEVEL_PARAMETERS = ("matrix_fraction", "memory_fraction", "copy_fraction", "simple_fraction")

# Calibration device -> bundled profile it is, or (for devices only the calibration table mentions) the
# bundled profile it is built from and the datasheet figures that differ.
CALIBRATION_DEVICES: dict[str, tuple[str, dict]] = {
    "a100": ("a100-sxm-80gb", {}),
    "h100": ("h100-sxm", {}),
    "h200": ("h200", {}),
    "mi300x": ("mi300x", {}),
    # NVIDIA GH200 Grace Hopper Superchip datasheet: its Hopper GPU has H100 SXM's compute rates;
    # HBM3e 4.9 TB/s (144 GB version).
    "gh200": ("h100-sxm", {"memory": {"bandwidth_bytes_per_s": 4.9e12}}),
    # AMD Instinct MI325X data sheet: the MI300X's 304 CUs at 2,100 MHz and its rates; HBM3E 6 TB/s.
    "mi325x": ("mi300x", {"memory": {"bandwidth_bytes_per_s": 6.0e12}}),
    # Intel, "Intel Gaudi 3 AI Accelerator" (Hot Chips 2024), Gaudi 2 column: BF16 432 TFLOPS, HBM2E
    # 2.46 TB/s; Intel Gaudi 2 product brief: FP8 865 TFLOPS. Two matrix engines (MMEs), 256x256 arrays.
    "gaudi2": ("h100-sxm", {"peak": {"bf16_flops_per_s": 432e12, "fp16_flops_per_s": 432e12,
                                     "fp8_flops_per_s": 865e12},
                            "chip": {"compute_units": 2, "matrix_tile_m": 256, "matrix_tile_n": 256},
                            "memory": {"bandwidth_bytes_per_s": 2.46e12}}),
    # NVIDIA HGX B200 datasheet, per GPU: FP16/BF16 4.5 PFLOPS and FP8 9 PFLOPS with sparsity (halved
    # here), HBM3e 8 TB/s; 148 SMs as the device reports them (not in the datasheet).
    "b200": ("h100-sxm", {"peak": {"bf16_flops_per_s": 2.25e15, "fp16_flops_per_s": 2.25e15,
                                   "fp8_flops_per_s": 4.5e15},
                          "chip": {"compute_units": 148},
                          "memory": {"bandwidth_bytes_per_s": 8e12}}),
}
# Bundled profile -> the calibration device whose fitted levels it takes (same chip and links).
PROFILE_DEVICES = {"a100-sxm-80gb": "a100", "a100-sxm-40gb": "a100", "h100-sxm": "h100", "h200": "h200",
                   "mi300x": "mi300x"}
_HARDWARE_NAMES = (("GH200", "gh200"), ("A100", "a100"), ("H100", "h100"), ("H200", "h200"),
                   ("MI300X", "mi300x"), ("MI325X", "mi325x"), ("Gaudi 2", "gaudi2"), ("B200", "b200"))
_UNITS = {"ms": 1e-3, "us": 1e-6, "TFLOP/s": 1e12, "G elements/s": 1e9, "GB/s": 1e9}
_DTYPES = {"FP16": "c10::Half", "BF16": "c10::BFloat16", "FP8 e4m3": "c10::Float8_e4m3fn"}


@dataclass(frozen=True)
class Case:
    """One calibration row, ready to predict: seconds(profile, harness) against published_seconds."""

    row: dict
    device: str
    group: str  # the measurement it belongs to: gemm, kernels, mamf, nccl, links
    harness: str | None  # which fixed harness cost the published figure includes
    published_seconds: float
    predict: Callable[[Profile], float]  # the model, without the harness cost
    roofline: Callable[[Profile], float]  # the plain datasheet roofline
    cost: Cost | None = None  # for kernels

    @property
    def label(self) -> str:
        return f"{self.row['workload']} | {self.row['config']} | {self.row['hardware']}"


@dataclass(frozen=True)
class Fit:
    shared: dict[str, float]  # device-independent values (levels: geometric mean over devices)
    per_device: dict[str, dict[str, float]]  # fitted levels of devices that have rows

    def parameters(self, device: str) -> dict[str, float]:
        return {**self.shared, **self.per_device.get(device, {})}


# ------------------------------------------------------------------------------------------- rows

def read_rows(path: str | Path) -> list[dict]:
    """The calibration CSV (lines starting with # are comments)."""
    with open(path, newline="") as file:
        return list(csv.DictReader(line for line in file if not line.startswith("#")))


def cases_of(rows: Iterable[dict]) -> list[Case]:
    return [_case(row) for row in rows]


def _case(row: dict) -> Case:
    device = next(key for text, key in _HARDWARE_NAMES if text in row["hardware"])
    workload = row["workload"]
    if workload.startswith("GEMM"):
        shape = _mm(row["config"], "M=(\\d+) K=(\\d+) N=(\\d+)", "MKN")
        return _kernel_case(row, device, "gemm", "eager_matmul", shape)
    if workload.startswith("matmul max achievable"):
        return _kernel_case(row, device, "mamf", None, _mm(row["config"], "(\\d+)x(\\d+)x(\\d+)", "MNK"))
    if workload.startswith(("softmax", "layernorm", "gelu")):
        return _memory_kernel_case(row, device)
    if "all_reduce" in workload:
        return _all_reduce_case(row, device)
    return _copy_case(row, device)


def _mm(config: str, pattern: str, order: str) -> Callable[[str], OpCall]:
    sizes = dict(zip(order, map(int, re.search(pattern, config).groups()), strict=True))
    m, k, n = sizes["M"], sizes["K"], sizes["N"]

    def call(dtype: str) -> OpCall:
        name = "aten::_scaled_mm" if "Float8" in dtype else "aten::mm"
        return OpCall(name, [[m, k], [k, n]], [dtype, dtype])

    return call


def _kernel_case(row, device, group, harness, make_call) -> Case:
    call = make_call(_DTYPES[row["precision"]])
    cost = cost_of(call)
    value = float(row["value"]) * _UNITS[row["unit"]]
    published = value if row["metric"] == "latency" else cost.flops / value
    return _priced_case(row, device, group, harness, published, cost)


def _priced_case(row, device, group, harness, published, cost) -> Case:
    return Case(row, device, group, harness, published, lambda profile: kernel_seconds(cost, None, profile).seconds,
                lambda profile: roofline_seconds(cost, None, profile), cost)


def _memory_kernel_case(row, device) -> Case:
    sizes = [int(size) for size in re.findall(r"\d+", row["config"])]
    half = "c10::Half"
    if row["workload"].startswith("softmax"):
        call = OpCall("aten::_softmax", [sizes, [], []], [half, "Scalar", "Scalar"], [None, -1, False])
    elif row["workload"].startswith("layernorm"):
        rows, width = sizes
        call = OpCall("aten::native_layer_norm", [sizes, [], [width], [width], []],
                      [half, "ScalarList", half, half, "Scalar"], [None, [width], None, None, 1e-5])
    else:
        call = OpCall("aten::gelu", [sizes, []], [half, ""])
    cost = cost_of(call)
    elements = math.prod(sizes)
    published = elements / (float(row["value"]) * _UNITS[row["unit"]])
    harness = "eager" if row["workload"].startswith("softmax") else "compiled"
    return _priced_case(row, device, "kernels", harness, published, cost)


def _all_reduce_case(row, device) -> Case:
    config = row["config"]
    ranks = int(re.search(r"(\d+) GPUs", config).group(1))
    amount, unit = re.search(r"(\d+) (KiB|MiB|GiB)", config).groups()
    nbytes = int(amount) * 2 ** {"KiB": 10, "MiB": 20, "GiB": 30}[unit]
    algorithm = "ring" if "ring" in config else None
    value = float(row["value"]) * _UNITS[row["unit"]]
    factor = bus_bandwidth_factor("all_reduce", ranks)
    published = value if row["metric"] == "time" else nbytes * factor / value

    def roofline(profile: Profile) -> float:  # ring traffic at the datasheet link rate
        return nbytes * factor / profile.links.device_link_bytes_per_s * _mesh_share(profile, ranks)

    return Case(row, device, "nccl", None, published,
                lambda profile: collective_seconds("all_reduce", nbytes, ranks, profile, algorithm), roofline)


def _mesh_share(profile: Profile, ranks: int) -> float:
    links = profile.links
    if links.device_link_topology == "switch":
        return 1.0
    return (links.devices_per_node - 1) / (min(ranks, links.devices_per_node) - 1)


def _copy_case(row, device) -> Case:
    host = "host-to-device" in row["workload"]
    published = NVBANDWIDTH_BYTES / (float(row["value"]) * _UNITS[row["unit"]])

    def roofline(profile: Profile) -> float:
        links = profile.links
        rate = links.host_pinned_bytes_per_s if host else links.device_link_bytes_per_s / _mesh_share(profile, 2)
        return NVBANDWIDTH_BYTES / rate

    return Case(row, device, "links", None, published,
                lambda profile: copy_seconds(NVBANDWIDTH_BYTES, "h2d" if host else "p2p", True, profile), roofline)


def error_class(case: Case, profile: Profile) -> str:
    if case.published_seconds < LAUNCH_BOUND_SECONDS:
        return "launch"
    if case.group in ("nccl", "links"):
        return "collectives" if case.group == "nccl" else "links"
    flops_only = replace(case.cost, bytes_read=0.0, bytes_written=0.0)
    return "compute" if roofline_seconds(flops_only, None, profile) >= case.roofline(profile) else "memory"


# ---------------------------------------------------------------------------------------- devices

def device_profile(device: str, parameters: dict[str, float] | None = None) -> Profile:
    """The profile of a calibration device, with the given [efficiency]/[collectives] values if any."""
    profile = _datasheet_profile(device)
    return with_parameters(profile, parameters) if parameters else profile


@functools.cache
def _datasheet_profile(device: str) -> Profile:
    base, overrides = CALIBRATION_DEVICES[device]
    profile = load_profile(base)
    for section, values in overrides.items():
        profile = replace(profile, **{section: replace(getattr(profile, section), **values)})
    return replace(profile, name=device)


def with_parameters(profile: Profile, parameters: dict[str, float]) -> Profile:
    efficiency = {f.name: parameters[f.name] for f in fields(Efficiency) if f.name in parameters}
    collectives = {f.name: parameters[f.name] for f in fields(Collectives) if f.name in parameters}
    return replace(profile, efficiency=replace(profile.efficiency, **efficiency),
                   collectives=replace(profile.collectives, **collectives))


def predicted_seconds(case: Case, parameters: dict[str, float]) -> float:
    harness = parameters[f"{case.harness}_call_s"] if case.harness else 0.0
    return harness + case.predict(device_profile(case.device, parameters))


# -------------------------------------------------------------------------------------------- fit

# Starting value and bounds of every parameter (the fit searches between the bounds on a log scale).
PARAMETERS = {
    "matrix_fraction": (0.8, 0.05, 1.0),
    "matrix_half_depth": (64.0, 1.0, 1e4),
    "matrix_setup_s": (1e-5, 1e-8, 1e-4),
    "memory_fraction": (0.8, 0.05, 1.0),
    "memory_half_bytes": (1e6, 1.0, 1e9),
    "copy_fraction": (0.85, 0.05, 1.0),
    "simple_step_s": (5e-6, 1e-8, 1e-3),
    "simple_fraction": (0.8, 0.05, 1.0),
    "low_latency_step_s": (2e-6, 1e-8, 1e-4),
    "low_latency_fraction": (0.5, 0.005, 1.0),  # NCCL's LL protocol carries 4 bytes of data per 8
    "switch_setup_s": (1e-5, 1e-8, 1e-3),
    "switch_fraction": (0.8, 0.05, 1.0),
    "eager_call_s": (1e-5, 1e-7, 1e-4),
    "eager_matmul_call_s": (1e-5, 1e-7, 1e-4),
    "compiled_call_s": (3e-5, 1e-7, 1e-3),
}
SWEEPS = 30
GOLDEN_STEPS = 40


def fit(cases: list[Case]) -> Fit:
    """Least squares of log(predicted / published) by coordinate descent: one parameter at a time, a
    golden-section search on a log scale, over the rows it affects; deterministic."""
    devices = sorted({case.device for case in cases})
    keys = [(name, None) for name in PARAMETERS if name not in LEVEL_PARAMETERS]
    keys += [(name, device) for name in LEVEL_PARAMETERS for device in devices]
    values = {key: PARAMETERS[key[0]][0] for key in keys}
    affected = {key: _affected_rows(cases, values, key) for key in keys}
    keys = [key for key in keys if affected[key]]
    for _ in range(SWEEPS):
        before = _loss(cases, values, range(len(cases)))
        for key in keys:
            values[key] = _golden_search(cases, values, key, affected[key])
        if before - _loss(cases, values, range(len(cases))) < 1e-9:
            break
    return _as_fit({key: values[key] for key in keys})


def _parameters(values: dict, device: str) -> dict[str, float]:
    shared = {name: value for (name, owner), value in values.items() if owner is None}
    own = {name: value for (name, owner), value in values.items() if owner == device}
    return {**shared, **own}


def _affected_rows(cases, values, key) -> list[int]:
    """Rows that inform a parameter: their prediction moves by more than 1 % when it grows by half.
    A parameter no row informs keeps its starting value instead of drifting on rounding noise."""
    changed = {**values, key: values[key] * 1.5}
    return [index for index, case in enumerate(cases)
            if abs(_prediction(case, changed) / _prediction(case, values) - 1) > 0.01]


def _prediction(case: Case, values: dict) -> float:
    return predicted_seconds(case, _parameters(values, case.device))


def _loss(cases, values, rows) -> float:
    return sum(math.log(_prediction(cases[index], values) / cases[index].published_seconds) ** 2 for index in rows)


def _golden_search(cases, values, key, rows) -> float:
    low, high = (math.log(bound) for bound in PARAMETERS[key[0]][1:])
    ratio = (math.sqrt(5) - 1) / 2

    def loss_at(log_value: float) -> float:
        return _loss(cases, {**values, key: math.exp(log_value)}, rows)

    a, b = low, high
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    loss_c, loss_d = loss_at(c), loss_at(d)
    for _ in range(GOLDEN_STEPS):
        if loss_c < loss_d:
            b, d, loss_d = d, c, loss_c
            c = b - ratio * (b - a)
            loss_c = loss_at(c)
        else:
            a, c, loss_c = c, d, loss_d
            d = a + ratio * (b - a)
            loss_d = loss_at(d)
    best = math.exp((a + b) / 2)
    # Keep the old value unless the search found a better one (the loss may be flat or multi-modal).
    return best if loss_at(math.log(best)) < loss_at(math.log(values[key])) else values[key]


def _as_fit(fitted: dict) -> Fit:
    """Device-independent level: the median over the devices whose rows fitted it, one vote per device
    (the median: the best single guess for an unseen device under absolute error, which one unusual
    device cannot pull). Any parameter no row informs keeps its starting value."""
    shared = {name: start for name, (start, _, _) in PARAMETERS.items()}
    per_device: dict[str, dict[str, float]] = {}
    for (name, device), value in fitted.items():
        if device is None:
            shared[name] = value
        else:
            per_device.setdefault(device, {})[name] = value
    for name in LEVEL_PARAMETERS:
        values = sorted(own[name] for own in per_device.values() if name in own)
        if values:
            middle = values[(len(values) - 1) // 2: len(values) // 2 + 1]
            shared[name] = math.exp(sum(map(math.log, middle)) / len(middle))
    return Fit(shared, per_device)


# ----------------------------------------------------------------------------------------- evaluate

@dataclass(frozen=True)
class Evaluated:
    case: Case
    error_class: str
    predicted_seconds: float
    roofline_seconds: float
    held_out: bool  # predicted by a fit that did not see this device's rows

    @property
    def model_error(self) -> float:
        return abs(self.predicted_seconds - self.case.published_seconds) / self.case.published_seconds

    @property
    def roofline_error(self) -> float:
        return abs(self.roofline_seconds - self.case.published_seconds) / self.case.published_seconds


MULTI_DEVICE_GROUPS = ("mamf", "nccl")


def evaluate(cases: list[Case]) -> tuple[Fit, list[Evaluated]]:
    """Fit on every row; predict rows of groups measured on several devices leave-one-device-out
    (the fit without any row of that device), the others with the full fit."""
    full = fit(cases)
    held_out_fits = {}
    results = []
    for case in cases:
        held_out = case.group in MULTI_DEVICE_GROUPS
        if held_out and case.device not in held_out_fits:
            held_out_fits[case.device] = fit([other for other in cases if other.device != case.device])
        parameters = (held_out_fits[case.device] if held_out else full).parameters(case.device)
        profile = device_profile(case.device)
        results.append(Evaluated(case, error_class(case, profile), predicted_seconds(case, parameters),
                                 case.roofline(profile), held_out))
    return full, results


def profile_parameters(full: Fit, profile_name: str) -> dict[str, float]:
    """The [efficiency] and [collectives] values a bundled profile should carry."""
    return full.parameters(PROFILE_DEVICES.get(profile_name, ""))
