"""Fitting the profiles' [efficiency] and [collectives] parameters to published measurements.

Turns each published row (tools/bench/perf_calibration.csv, and NeuSight's per-kernel latencies in
tools/bench/neusight_sample.csv.gz) into a case the model can predict on the profile of the chip that
was measured, fits the parameters by coordinate descent (deterministic), and predicts held-out devices.
Not the model (model.py) and not a report: tools/bench/perf_model.py prints the tables.

Note [How a calibration row becomes a prediction]
  A row's chip is the profile whose hardware_names occur in its hardware column (profile.py); a row of
  a chip no profile names is left out, and reported.
  GEMM torch.matmul (latency, ms)   aten::mm of the stated M, K, N in FP16; measured end to end around a
                                    synchronisation, so the prediction adds the harness's fixed host cost
                                    (Python call, dispatch, the BLAS library's host-side call, synchronise),
                                    fitted as eager_matmul_call_s. It is a harness cost, not device time.
  softmax / layernorm / gelu        the throughput in G elements/s becomes seconds for the stated elements;
    (G elements/s)                  the op is aten::_softmax over the last dim, aten::native_layer_norm over
                                    the last dim, aten::gelu, in FP16. LLMCompass runs softmax eagerly
                                    (eager_call_s) and layernorm and gelu through torch.compile
                                    (compiled_call_s: the compiled graph's call and guard costs).
  mamf-finder (TFLOP/s)             the best throughput over a shape search, at the stated best shape: one
                                    aten::mm (BF16) or aten::_scaled_mm (FP8) of that shape, timed on the
                                    device, so no harness cost.
  NCCL all_reduce (time, us)        collective_seconds("all_reduce", size, ranks); busbw rows become time
                                    through nccl-tests' convention: time = size * 2(n-1)/n / busbw.
  nvbandwidth (GB/s)                a copy of NVBANDWIDTH_BYTES: "p2p" for the NVLink pair, pinned "h2d".
  NeuSight (latency, ms, FP32)      linear: aten::addmm of a (B*M x N) input and a K x N weight (NeuSight's
                                    names: nn.Linear(N, K) on randn(B, M, N)); bmm: aten::bmm of B x M x N
                                    and B x N x K; conv: aten::convolution of the stated batch, channels,
                                    square kernel, square input, stride and padding; add, mul, div, pow (two
                                    B x H tensors, or one and a scalar: the "u" files), relu, tanh, gelu;
                                    softmax over H; ln: native_layer_norm over H. Timed with CUDA events
                                    around repeated runs: device time, but a kernel shorter than the host's
                                    time per iteration shows the host's. Rows under HOST_BOUND_FACTOR times
                                    their rig's floor (the fastest row of that device and file) measure the
                                    host: they are class "launch" and not fitted. Every NeuSight row is
                                    predicted as max(floor, device time).

Note [Which parameters a device gets]
  Levels (LEVEL_PARAMETERS: the fractions and factors of each kernel class) are fitted per device, to
  that device's own rows. Shapes (half depth, setup, tile overhead, memory half bytes, step latencies,
  the low-latency protocol, in-switch reduction) are one device-independent value fitted to all rows. A
  device without rows of a class gets the median of the per-device levels, one vote per device: the
  device-independent fit (profiles/_defaults.toml). A parameter no row informs (its rows move less than
  1 % when it grows by half) keeps its starting value. Leave-one-device-out drops every row of a device,
  fits, and predicts that device's rows, which then can only use the device-independent values. The
  harness costs describe the measurements, not a device: fitted with the rest, never written into a
  profile.
"""

from __future__ import annotations

import csv
import functools
import gzip
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields, replace
from pathlib import Path

from .costs import Cost, OpCall, cost_of
from .model import bus_bandwidth_factor, collective_seconds, copy_seconds, kernel_seconds, roofline_seconds
from .profile import Collectives, Efficiency, Profile, list_profiles, load_profile

LAUNCH_BOUND_SECONDS = 20e-6
HOST_BOUND_FACTOR = 1.5
NVBANDWIDTH_BYTES = 512 * 2**20  # nvbandwidth's default buffer size
HARNESS_PARAMETERS = ("eager_call_s", "eager_matmul_call_s", "compiled_call_s")
LEVEL_PARAMETERS = ("gemm_fp32_fraction", "gemm_tf32_fraction", "gemm_16bit_fraction", "gemm_8bit_fraction",
                    "conv_forward_factor", "vector_fraction", "elementwise_memory_fraction",
                    "reduction_memory_fraction", "norm_memory_fraction", "copy_fraction", "simple_fraction")
# The classes of the accuracy tables (perf_model.py), and which profile provenance entry each informs.
ERROR_CLASSES = ("gemm_fp32", "gemm_tensor", "conv", "elementwise", "norm", "collectives", "links", "launch")
_UNITS = {"ms": 1e-3, "us": 1e-6, "TFLOP/s": 1e12, "G elements/s": 1e9, "GB/s": 1e9}
_DTYPES = {"FP16": "c10::Half", "BF16": "c10::BFloat16", "FP8 e4m3": "c10::Float8_e4m3fn", "FP32": "float"}
F32 = "float"


@dataclass(frozen=True)
class Case:
    """One published row, ready to predict: seconds(profile, harness) against published_seconds."""

    label: str
    device: str  # the profile of the chip measured
    error_class: str  # ERROR_CLASSES
    harness: str | None  # which fixed harness cost the published figure includes
    published_seconds: float
    predict: Callable[[Profile], float]  # the model, without the harness cost
    roofline: Callable[[Profile], float]  # the plain datasheet roofline
    floor_seconds: float = 0.0  # the rig's time per iteration where the host, not the device, is slower
    host_bound: bool = False  # measures the host that launched the kernel: class "launch", not fitted

    @property
    def fitted(self) -> bool:
        return not self.host_bound


@dataclass(frozen=True)
class Fit:
    shared: dict[str, float]  # device-independent values (levels: median over devices)
    per_device: dict[str, dict[str, float]]  # fitted levels of devices that have rows

    def parameters(self, device: str) -> dict[str, float]:
        return {**self.shared, **self.per_device.get(device, {})}


# ------------------------------------------------------------------------------------ chips by name

@functools.cache
def _chips() -> tuple[tuple[str, str], ...]:
    """(hardware name, profile) pairs of every profile, longest name first (so "A100 80GB" wins over
    "A100")."""
    pairs = [(text, name) for name in list_profiles() for text in load_profile(name).hardware_names]
    return tuple(sorted(pairs, key=lambda pair: -len(pair[0])))


def chip_of(hardware: str) -> str | None:
    """The profile whose hardware_names occur in a row's hardware column, or None."""
    return next((name for text, name in _chips() if text in hardware), None)


@functools.cache
def device_profile(device: str) -> Profile:
    return load_profile(device)


def with_parameters(profile: Profile, parameters: dict[str, float]) -> Profile:
    efficiency = {f.name: parameters[f.name] for f in fields(Efficiency) if f.name in parameters}
    collectives = {f.name: parameters[f.name] for f in fields(Collectives) if f.name in parameters}
    return replace(profile, efficiency=replace(profile.efficiency, **efficiency),
                   collectives=replace(profile.collectives, **collectives))


# --------------------------------------------------------------------------- rows of calibration.csv

def read_rows(path: str | Path) -> list[dict]:
    """A calibration CSV (lines starting with # are comments)."""
    with open(path, newline="") as file:
        return list(csv.DictReader(line for line in file if not line.startswith("#")))


def cases_of(rows: Iterable[dict]) -> tuple[list[Case], list[str]]:
    """The cases of calibration.csv's rows, and the hardware names no profile names (left out)."""
    cases, unknown = [], []
    for row in rows:
        device = chip_of(row["hardware"])
        if device is None:
            unknown.append(row["hardware"])
        else:
            cases.append(_case(row, device))
    return cases, sorted(set(unknown))


def _label(row: dict) -> str:
    return f"{row['workload']} | {row['config']} | {row['hardware']}"


def _case(row: dict, device: str) -> Case:
    workload = row["workload"]
    if workload.startswith("GEMM"):
        call = _mm(row["config"], "M=(\\d+) K=(\\d+) N=(\\d+)", "MKN", _DTYPES[row["precision"]])
        return _kernel_case(row, device, "eager_matmul", call)
    if workload.startswith("matmul max achievable"):
        return _kernel_case(row, device, None, _mm(row["config"], "(\\d+)x(\\d+)x(\\d+)", "MNK",
                                                   _DTYPES[row["precision"]]))
    if workload.startswith(("softmax", "layernorm", "gelu")):
        return _memory_kernel_case(row, device)
    if "all_reduce" in workload:
        return _all_reduce_case(row, device)
    return _copy_case(row, device)


def _mm(config: str, pattern: str, order: str, dtype: str) -> OpCall:
    sizes = dict(zip(order, map(int, re.search(pattern, config).groups()), strict=True))
    m, k, n = sizes["M"], sizes["K"], sizes["N"]
    name = "aten::_scaled_mm" if "Float8" in dtype else "aten::mm"
    return OpCall(name, [[m, k], [k, n]], [dtype, dtype])


def _kernel_case(row, device, harness, call: OpCall) -> Case:
    cost = cost_of(call)
    value = float(row["value"]) * _UNITS[row["unit"]]
    published = value if row["metric"] == "latency" else cost.flops / value
    return priced_case(_label(row), device, harness, published, cost)


def priced_case(label: str, device: str, harness: str | None, published: float, cost: Cost,
                dtype: str | None = None) -> Case:
    """A kernel row: cost predicted in its own precision, or in dtype ("tf32" for an FP32 product)."""
    error_class = "launch" if published < LAUNCH_BOUND_SECONDS else _kernel_class(cost)
    return Case(label, device, error_class, harness, published,
                lambda profile: kernel_seconds(cost, dtype, profile).seconds,
                lambda profile: roofline_seconds(cost, dtype, profile))


def _kernel_class(cost: Cost) -> str:
    if cost.kind == "matmul":
        return "gemm_fp32" if cost.precision in ("fp32", "fp64") else "gemm_tensor"
    if cost.kind in ("conv", "norm"):
        return cost.kind
    return "elementwise"


def _memory_kernel_case(row, device) -> Case:
    sizes = [int(size) for size in re.findall(r"\d+", row["config"])]
    kind = row["workload"].split()[0]
    cost = _row_op_cost(kind, sizes, _DTYPES[row["precision"]])
    published = math.prod(sizes) / (float(row["value"]) * _UNITS[row["unit"]])
    harness = "eager" if kind == "softmax" else "compiled"
    return priced_case(_label(row), device, harness, published, cost)


def _row_op_cost(kind: str, sizes: list[int], dtype: str) -> Cost:
    """softmax / layernorm (ln) over the last of two sizes, or an elementwise op on them."""
    if kind == "softmax":
        return cost_of(OpCall("aten::_softmax", [sizes, [], []], [dtype, "Scalar", "Scalar"], [None, -1, False]))
    if kind in ("layernorm", "ln"):
        width = sizes[-1]
        return cost_of(OpCall("aten::native_layer_norm", [sizes, [], [width], [width], []],
                              [dtype, "ScalarList", dtype, dtype, "Scalar"], [None, [width], None, None, 1e-5]))
    return cost_of(OpCall(f"aten::{kind}", [sizes, []], [dtype, ""]))


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

    return Case(_label(row), device, "collectives", None, published,
                lambda profile: collective_seconds("all_reduce", nbytes, ranks, profile, algorithm), roofline)


def _mesh_share(profile: Profile, ranks: int) -> float:
    links = profile.links
    if links.device_link_topology != "mesh":
        return 1.0
    return (links.devices_per_node - 1) / (min(ranks, links.devices_per_node) - 1)


def _copy_case(row, device) -> Case:
    host = "host-to-device" in row["workload"]
    published = NVBANDWIDTH_BYTES / (float(row["value"]) * _UNITS[row["unit"]])

    def roofline(profile: Profile) -> float:
        links = profile.links
        rate = links.host_pinned_bytes_per_s if host else links.device_link_bytes_per_s / _mesh_share(profile, 2)
        return NVBANDWIDTH_BYTES / rate

    return Case(_label(row), device, "links", None, published,
                lambda profile: copy_seconds(NVBANDWIDTH_BYTES, "h2d" if host else "p2p", True, profile), roofline)


# ------------------------------------------------------------------- the project's own measurements

# tools/bench/gpu_calibration.py's kernels: workload -> how a row of N elements becomes an operator call.
_MEASURED_KERNELS = {
    "kernel: add (out=)": lambda n, t: OpCall("aten::add", [[n], [n], [], [n]], [t, t, "Scalar", t], [None, None, 1]),
    "kernel: mul by a scalar": lambda n, t: OpCall("aten::mul", [[n], []], [t, "Scalar"], [None, 2.0]),
    "kernel: relu": lambda n, t: OpCall("aten::relu", [[n]], [t]),
    "kernel: exp": lambda n, t: OpCall("aten::exp", [[n]], [t]),
    "kernel: gelu": lambda n, t: OpCall("aten::gelu", [[n], []], [t, ""]),
    "kernel: copy (out.copy_)": lambda n, t: OpCall("aten::copy_", [[n], [n]], [t, t]),
    "kernel: sum (all)": lambda n, t: OpCall("aten::sum", [[n], []], [t, ""]),
    "kernel: sum over rows of 1024": lambda n, t: OpCall("aten::sum", [[n // 1024, 1024], []], [t, "ScalarList"],
                                                         [None, [-1]]),
}
_MEASURED_DTYPES = {"FP32": "float", "BF16": "c10::BFloat16", "FP16": "c10::Half", "TF32": "float",
                    "FP8 e4m3": "c10::Float8_e4m3fn"}


def measured_cases(rows: list[dict]) -> list[Case]:
    """Cases of tools/bench/measured's CSVs (gpu_calibration.py on a GPU this project borrowed): matrix
    products in each precision (TF32: FP32 tensors on TF32 units), and elementwise, reduction, softmax
    and LayerNorm kernels of N elements. Rows of several runs are averaged. A kernel "graph replay" is
    timed without the host; "eager back to back" rows near their rig's floor measure the host, as
    NeuSight's (class "launch", not fitted)."""
    grouped: dict[tuple, list[dict]] = {}
    for row in rows:
        if _measured_cost(row) is not None and row["metric"] == "device time" and chip_of(row["hardware"]):
            grouped.setdefault((row["workload"], row["config"], row["precision"], row["hardware"]), []).append(row)
    floors: dict[tuple, float] = {}
    for (workload, config, _, hardware), same in grouped.items():
        if "graph replay" not in config:
            key = (workload.split(":")[0], hardware)
            floors[key] = min(floors.get(key, math.inf), _seconds_of(same))
    cases = []
    for (workload, config, _, hardware), same in grouped.items():
        published = _seconds_of(same)
        floor = 0.0 if "graph replay" in config else floors[(workload.split(":")[0], hardware)]
        cost, dtype = _measured_cost(same[0])
        case = priced_case(_label(same[0]), chip_of(hardware), None, published, cost, dtype)
        host_bound = published < HOST_BOUND_FACTOR * floor
        cases.append(replace(case, floor_seconds=floor, host_bound=host_bound,
                             error_class="launch" if host_bound else case.error_class))
    return cases


def _seconds_of(rows: list[dict]) -> float:
    return sum(float(row["value"]) * _UNITS[row["unit"]] for row in rows) / len(rows)


def _measured_cost(row: dict) -> tuple[Cost, str | None] | None:
    dtype = _MEASURED_DTYPES.get(row["precision"])
    if dtype is None:
        return None
    if row["workload"] in ("GEMM torch.matmul", "GEMM torch._scaled_mm"):
        call = _mm(row["config"], "M=(\\d+) K=(\\d+) N=(\\d+)", "MKN", dtype)
        return cost_of(call), "tf32" if row["precision"] == "TF32" else None
    elements = re.match(r"(\d+) elements", row["config"])
    if elements is None:
        return None
    n = int(elements.group(1))
    if row["workload"] in _MEASURED_KERNELS:
        return cost_of(_MEASURED_KERNELS[row["workload"]](n, dtype)), None
    if row["workload"] in ("kernel: softmax over rows of 1024", "kernel: layer_norm over rows of 1024"):
        kind = "softmax" if "softmax" in row["workload"] else "ln"
        return _row_op_cost(kind, [n // 1024, 1024], dtype), None
    return None


# ----------------------------------------------------------------------------- NeuSight's kernel rows

def read_neusight(path: str | Path) -> list[dict]:
    """The sample of NeuSight's training split (tools/bench/neusight_sample.csv.gz: one CSV, an `op`
    column naming the file each row came from)."""
    with gzip.open(path, "rt", newline="") as file:
        return list(csv.DictReader(line for line in file if not line.startswith("#")))


def neusight_cases(rows: list[dict]) -> tuple[list[Case], list[str]]:
    """The cases of NeuSight rows (Note [How a calibration row becomes a prediction]), and the device
    names no profile names."""
    floors: dict[tuple[str, str], float] = {}
    for row in rows:
        key = (row["Device"], row["op"])
        floors[key] = min(floors.get(key, math.inf), float(row["Latency"]) * 1e-3)
    cases, unknown = [], set()
    for row in rows:
        device = chip_of(row["Device"])
        if device is None:
            unknown.add(row["Device"])
            continue
        published = float(row["Latency"]) * 1e-3
        floor = floors[(row["Device"], row["op"])]
        label = f"NeuSight {row['op']} | {_neusight_config(row)} | {row['Device']}"
        case = priced_case(label, device, None, published, _neusight_cost(row))
        host_bound = published < HOST_BOUND_FACTOR * floor
        cases.append(replace(case, floor_seconds=floor, host_bound=host_bound,
                             error_class="launch" if host_bound else case.error_class))
    return cases, sorted(unknown)


def _neusight_config(row: dict) -> str:
    keys = ("B", "M", "N", "K", "H", "Input_Channel", "Output_Channel", "Kernel_Szie", "Input_Size", "Stride",
            "Padding")
    return " ".join(f"{key}={row[key]}" for key in keys if row.get(key))


def _neusight_cost(row: dict) -> Cost:
    op = row["op"]
    number = lambda key: int(float(row[key]))  # noqa: E731
    if op == "linear":  # nn.Linear(N, K) on randn(B, M, N)
        rows_in, n, k = number("B") * number("M"), number("N"), number("K")
        return cost_of(OpCall("aten::addmm", [[k], [rows_in, n], [n, k], [], []], [F32, F32, F32, "Scalar", "Scalar"],
                              [None, None, None, 1, 1]))
    if op == "bmm":  # randn(B, M, N) @ randn(B, N, K)
        b, m, n, k = (number(key) for key in "BMNK")
        return cost_of(OpCall("aten::bmm", [[b, m, n], [b, n, k]], [F32, F32]))
    if op == "conv":
        size, kernel, channels = number("Input_Size"), number("Kernel_Szie"), number("Input_Channel")
        stride, padding = number("Stride"), number("Padding")
        source, weight = [number("B"), channels, size, size], [number("Output_Channel"), channels, kernel, kernel]
        return cost_of(OpCall("aten::convolution", [source, weight, [], [], [], [], [], [], []],
                              [F32, F32, "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList",
                               "Scalar"],
                              [None, None, None, [stride, stride], [padding, padding], [1, 1], False, [0, 0], 1]))
    sizes = [number("B"), number("H")]
    if op in ("softmax", "ln"):
        return _row_op_cost(op, sizes, F32)
    base = op.removesuffix("u") if op in ("addu", "mulu", "divu", "powu") else op
    if op.endswith("u") and op != "relu":  # with a scalar
        return cost_of(OpCall(f"aten::{base}", [sizes, []], [F32, "Scalar"], [None, 2.0]))
    if base in ("add", "mul", "div", "pow"):
        return cost_of(OpCall(f"aten::{base}", [sizes, sizes], [F32, F32]))
    return cost_of(OpCall(f"aten::{base}", [sizes], [F32]))


# ---------------------------------------------------------------------------------------- fitting

# Starting value and bounds of every parameter (the fit searches between the bounds on a log scale).
PARAMETERS = {
    "gemm_fp32_fraction": (0.8, 0.05, 1.0),
    "gemm_tf32_fraction": (0.7, 0.05, 1.0),
    "gemm_16bit_fraction": (0.8, 0.05, 1.0),
    "gemm_8bit_fraction": (0.7, 0.05, 1.0),
    "conv_forward_factor": (0.8, 0.05, 4.0),  # above 1: the library's algorithm (Winograd) does less work
    "matrix_half_depth": (32.0, 1.0, 1e4),
    "matrix_setup_s": (5e-6, 1e-8, 2e-5),  # a library kernel's fixed cost is microseconds, not a launch's
    "matrix_tile_overhead": (8.0, 0.01, 1e3),
    "vector_fraction": (0.8, 0.05, 1.0),
    "elementwise_memory_fraction": (0.8, 0.05, 1.0),
    "reduction_memory_fraction": (0.8, 0.05, 1.0),
    "norm_memory_fraction": (0.8, 0.05, 1.0),
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
SWEEPS = 5
GOLDEN_STEPS = 16


def predicted_seconds(case: Case, parameters: dict[str, float], profile: Profile | None = None) -> float:
    """The published figure as the model predicts it: the harness's fixed cost plus the device time,
    and never under the rig's time per iteration (a loop of kernels shorter than the host's launches
    runs at the host's pace)."""
    harness = parameters[f"{case.harness}_call_s"] if case.harness else 0.0
    profile = profile or with_parameters(device_profile(case.device), parameters)
    return max(case.floor_seconds, harness + case.predict(profile))


def fit(cases: list[Case]) -> Fit:
    """Least squares of log(predicted / published) by coordinate descent: one parameter at a time, a
    golden-section search on a log scale, over the rows it affects; deterministic. Host-bound rows
    (class "launch" from NeuSight) measure the host, and are not fitted."""
    cases = [case for case in cases if case.fitted]
    devices = sorted({case.device for case in cases})
    keys = [(name, None) for name in PARAMETERS if name not in LEVEL_PARAMETERS]
    keys += [(name, device) for name in LEVEL_PARAMETERS for device in devices]
    values = {key: PARAMETERS[key[0]][0] for key in keys}
    affected = {key: _affected_rows(cases, values, key) for key in keys}
    keys = [key for key in keys if affected[key]]
    everything = list(range(len(cases)))
    for _ in range(SWEEPS):
        before = _loss(cases, values, everything)
        for key in keys:
            values[key] = _golden_search(cases, values, key, affected[key])
        if before - _loss(cases, values, everything) < 1e-3 * before:
            break
    return _as_fit({key: values[key] for key in keys})


def _parameters(values: dict, device: str) -> dict[str, float]:
    shared = {name: value for (name, owner), value in values.items() if owner is None}
    own = {name: value for (name, owner), value in values.items() if owner == device}
    return {**shared, **own}


def _affected_rows(cases, values, key) -> list[int]:
    """Rows that inform a parameter: their prediction moves by more than 1 % when it grows by half.
    A parameter no row informs keeps its starting value instead of drifting on rounding noise."""
    name, owner = key
    candidates = [index for index, case in enumerate(cases) if owner is None or case.device == owner]
    before = _predictions(cases, values, candidates)
    after = _predictions(cases, {**values, key: values[key] * 1.5}, candidates)
    return [index for index, old, new in zip(candidates, before, after, strict=True) if abs(new / old - 1) > 0.01]


def _predictions(cases, values, rows) -> list[float]:
    """Each row's prediction; one profile per device, not per row."""
    profiles: dict[str, tuple[dict, Profile]] = {}
    found = []
    for index in rows:
        case = cases[index]
        if case.device not in profiles:
            parameters = _parameters(values, case.device)
            profiles[case.device] = parameters, with_parameters(device_profile(case.device), parameters)
        found.append(predicted_seconds(case, *profiles[case.device]))
    return found


def _loss(cases, values, rows) -> float:
    predictions = _predictions(cases, values, rows)
    return sum(math.log(predicted / cases[index].published_seconds) ** 2
               for index, predicted in zip(rows, predictions, strict=True))


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
    predicted_seconds: float  # by the fit without this row's device (held out)
    in_sample_seconds: float  # by the fit on every row
    roofline_seconds: float

    def error(self, predicted: float) -> float:
        """Signed relative error: positive when predicted too slow."""
        return predicted / self.case.published_seconds - 1

    @property
    def model_error(self) -> float:
        return self.error(self.predicted_seconds)

    @property
    def roofline_error(self) -> float:
        return self.error(self.roofline_seconds)

    @property
    def in_sample_error(self) -> float:
        return self.error(self.in_sample_seconds)


def evaluate(cases: list[Case]) -> tuple[Fit, list[Evaluated]]:
    """Fit on every row, and predict every row leave-one-device-out: by the fit without any row of
    its device, which knows that device only by its datasheet."""
    full = fit(cases)
    held_out_fits = {device: fit([case for case in cases if case.device != device])
                     for device in sorted({case.device for case in cases})}
    results = []
    for case in cases:
        profile = device_profile(case.device)
        results.append(Evaluated(case, predicted_seconds(case, held_out_fits[case.device].shared),
                                 predicted_seconds(case, full.parameters(case.device)), case.roofline(profile)))
    return full, results


def profile_parameters(full: Fit, profile_name: str) -> dict[str, float]:
    """The [efficiency] and [collectives] values a profile should carry (its own fitted levels where
    it has rows, the device-independent values otherwise), without the harness costs."""
    return {name: value for name, value in full.parameters(profile_name).items() if name not in HARNESS_PARAMETERS}


# The parameter that carries each provenance class's level, and the error class of the rows that fit it.
_PROVENANCE = {"gemm_fp32": ("gemm_fp32_fraction", "gemm_fp32"), "gemm_tf32": ("gemm_tf32_fraction", "gemm_tensor"),
               "gemm_16bit": ("gemm_16bit_fraction", "gemm_tensor"),
               "reduction": ("reduction_memory_fraction", "elementwise"),
               "gemm_8bit": ("gemm_8bit_fraction", "gemm_tensor"), "conv": ("conv_forward_factor", "conv"),
               "elementwise": ("elementwise_memory_fraction", "elementwise"),
               "norm": ("norm_memory_fraction", "norm"), "copies": ("copy_fraction", "links"),
               "collectives": ("simple_fraction", "collectives")}


def provenance(full: Fit, cases: list[Case], device: str) -> dict[str, str]:
    """Where each kernel class's efficiency in device's profile comes from, as [provenance] says it."""
    from .profile import KERNEL_CLASSES

    said = {}
    for name in KERNEL_CLASSES:
        if name not in _PROVENANCE:
            said[name] = "assumed: the starting value; no calibration row of any device informs it"
            continue
        parameter, error_class = _PROVENANCE[name]
        own = [case for case in cases if case.device == device and case.error_class == error_class]
        fitted_by = sorted(other for other, values in full.per_device.items() if parameter in values)
        if parameter in full.per_device.get(device, {}):
            said[name] = f"fitted: {len(own)} published {error_class} rows of this chip (fit.py)"
        elif fitted_by:
            said[name] = f"device-independent: the median of the fits on {', '.join(fitted_by)}"
        else:
            said[name] = "assumed: the starting value; no calibration row informs it"
    return said
