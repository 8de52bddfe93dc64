"""Published measurements as cases the model can predict: the rows of tools/bench/perf_calibration.csv,
NeuSight's per-kernel latencies and this project's own GPU runs, each on the profile of the chip measured.
Not the fitting (fit.py).

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
                                    device. The best of thousands of shapes is luckier than a typical large
                                    one (the library's best kernel, the timer's spread): the prediction is
                                    divided by best_shape_gain, fitted where a chip has both kinds of row.
  NCCL all_reduce (time, us)        collective_seconds("all_reduce", size, ranks); busbw rows become time
                                    through nccl-tests' convention: time = size * 2(n-1)/n / busbw.
  nvbandwidth (GB/s)                a copy of NVBANDWIDTH_BYTES: "p2p" for the NVLink pair, pinned "h2d".
  NeuSight (latency, ms, FP32)      linear: aten::addmm of a (B*M x N) input and a K x N weight (NeuSight's
                                    names: nn.Linear(N, K) on randn(B, M, N)); bmm: aten::bmm of B x M x N
                                    and B x N x K; conv: aten::convolution of the stated batch, channels,
                                    square kernel, square input, stride and padding; add, mul, div, pow (two
                                    B x H tensors, or one and a scalar: the "u" files), relu, tanh, gelu;
                                    softmax over H; ln: native_layer_norm over H. Timed with CUDA events
                                    around repeated runs: the rig's time per run is its host's (the
                                    floor: the fastest row of that device and file) or, above it, a
                                    share of the host's time that does not overlap the kernel plus the
                                    kernel (Note [NeuSight's rig]). Rows under HOST_BOUND_FACTOR times
                                    their floor measure the host: they are class "launch" and not fitted.

Note [NeuSight's rig]
  Fitted per device and file, published = max(floor, share * floor + k * elements) describes NeuSight's
  elementwise rows to 0.3-6 %, with the share at 0.4-0.8 of the floor on every device; max(floor,
  k * elements), a rig whose host runs wholly ahead of the device, misses them by 8-13 %. LayerNorm's
  rows want a share near 1.1 (7-12 %, against 13-26 %), softmax's 0.55-1.0 (one share for both did as well
  as one each: the norms held out came to 18.8 %, against 18.9). So part of the host's time per run does not
  overlap the kernel. The share is a harness cost, fitted to every device's rows at once, one for each
  group of files (RIG_SHARES): it describes the rig, not a device.
"""

from __future__ import annotations

import csv
import functools
import gzip
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields, replace
from pathlib import Path

from .collectives import bus_bandwidth_factor, collective_seconds
from .costs import Cost, OpCall, cost_of
from .model import copy_seconds, kernel_seconds, roofline_seconds
from .profile import Collectives, Efficiency, Profile, list_profiles, load_profile

LAUNCH_BOUND_SECONDS = 20e-6
HOST_BOUND_FACTOR = 1.5
# Note [NeuSight's rig]: which share of the rig's floor each of NeuSight's files adds to the kernel.
RIG_SHARES = {"ln": "neusight_rows_share", "softmax": "neusight_rows_share", "linear": "neusight_matrix_share",
              "bmm": "neusight_matrix_share", "conv": "neusight_matrix_share"}  # others: neusight_vector_share
HOST_LENGTHENED = 1.1  # a row back to back this much slower than with the host ahead measures the host
DEVICE_ALONE = ", host ahead"  # gpu_calibration.py's config suffix of a row timed with the host ahead of the device
NVBANDWIDTH_BYTES = 512 * 2**20  # nvbandwidth's default buffer size
# The classes of the accuracy tables (perf_model.py), and which profile provenance entry each informs.
ERROR_CLASSES = ("gemm_fp32", "gemm_tensor", "conv", "attention", "elementwise", "norm", "collectives", "links",
                 "launch")
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
    rig_share: str | None = None  # the harness parameter: the share of the floor the kernel adds to
    host_bound: bool = False  # measures the host that launched the kernel: class "launch", not fitted

    @property
    def fitted(self) -> bool:
        return not self.host_bound



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


class CalibrationRowError(ValueError):
    """A row of a calibration CSV that the model cannot read."""


# What a row of calibration.csv may say, as a refused row is told.
ROW_FORMS = ("workload: 'GEMM ...' (config 'M=.. K=.. N=..'), 'matmul max achievable ...' (config 'MxNxK'), "
             "'softmax ...', 'layernorm ...' or 'gelu ...' (config as the shipped rows'), a name with 'all_reduce', "
             f"or one with 'copy'; precision: {', '.join(_DTYPES)}; unit: {', '.join(_UNITS)}")


def cases_of(rows: Iterable[dict]) -> tuple[list[Case], list[str]]:
    """The cases of calibration.csv's rows, and the hardware names no profile names (left out). A row the
    model cannot read is refused, naming it and what a row may say."""
    cases, unknown = [], []
    for number, row in enumerate(rows, start=1):
        device = chip_of(row["hardware"])
        if device is None:
            unknown.append(row["hardware"])
            continue
        try:
            cases.append(_case(row, device))
        except (KeyError, ValueError, AttributeError, TypeError) as error:
            raise CalibrationRowError(f"calibration row {number} ({_label(row)}) cannot be read "
                                      f"({type(error).__name__}: {error}); {ROW_FORMS}") from None
    return cases, sorted(set(unknown))


def _label(row: dict) -> str:
    return f"{row['workload']} | {row['config']} | {row['precision']} | {row['hardware']}"


def _case(row: dict, device: str) -> Case:
    workload = row["workload"]
    if workload.startswith("GEMM"):
        call = _mm(row["config"], "M=(\\d+) K=(\\d+) N=(\\d+)", "MKN", _DTYPES[row["precision"]])
        return _kernel_case(row, device, "eager_matmul", call)
    if workload.startswith("matmul max achievable"):
        return _kernel_case(row, device, "best_shape", _mm(row["config"], "(\\d+)x(\\d+)x(\\d+)", "MNK",
                                                   _DTYPES[row["precision"]]))
    if workload.startswith(("softmax", "layernorm", "gelu")):
        return _memory_kernel_case(row, device)
    if "all_reduce" in workload:
        return _all_reduce_case(row, device)
    if "copy" in workload:
        return _copy_case(row, device)
    raise ValueError(f"no model for the workload {workload!r}")


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


def priced_case(label: str, device: str, harness: str | None, published: float, cost: Cost | tuple[Cost, ...],
                dtype: str | None = None, graph: bool = False) -> Case:
    """A kernel row (or a row timing a few kernels one after the other: a tuple of costs): each cost
    predicted in its own precision, or in dtype ("tf32" for an FP32 product); graph: replayed from a
    CUDA graph, at the chip's graph floor."""
    costs = cost if isinstance(cost, tuple) else (cost,)
    error_class = "launch" if published < LAUNCH_BOUND_SECONDS else _kernel_class(costs[0], dtype)

    def predict(profile: Profile) -> float:
        if graph:
            profile = profile.replayed_from_graph()
        return sum(kernel_seconds(one, dtype, profile).seconds for one in costs)

    return Case(label, device, error_class, harness, published, predict,
                lambda profile: sum(roofline_seconds(one, dtype, profile) for one in costs))


def _kernel_class(cost: Cost, dtype: str | None = None) -> str:
    if cost.kind == "matmul":  # TF32 products run on the matrix units, as 16- and 8-bit ones do
        return "gemm_fp32" if cost.precision in ("fp32", "fp64") and dtype != "tf32" else "gemm_tensor"
    if cost.kind in ("conv", "attention", "norm"):
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
    "kernel: copy (out.copy_)": lambda n, t: OpCall("aten::copy_", [[n], [n], []], [t, t, "Scalar"],
                                                    [None, None, False]),
    "kernel: sum (all)": lambda n, t: OpCall("aten::sum", [[n], []], [t, ""]),
    "kernel: sum over rows of 1024": lambda n, t: OpCall("aten::sum", [[n // 1024, 1024], []], [t, "ScalarList"],
                                                         [None, [-1]]),
}
_MEASURED_DTYPES = {"FP32": "float", "BF16": "c10::BFloat16", "FP16": "c10::Half", "TF32": "float",
                    "FP8 e4m3": "c10::Float8_e4m3fn"}


def measured_cases(rows: list[dict]) -> list[Case]:
    """Cases of tools/bench/measured's CSVs (gpu_calibration.py on GPUs this project borrowed): matrix
    products in each precision (TF32: FP32 tensors on TF32 units), ResNet-50's convolutions (forward,
    and forward then the weight's or the input's gradient; BF16 channels-last, FP32 and TF32), fused
    attention (forward, and forward then backward), the fused AdamW step, and elementwise, reduction,
    softmax and LayerNorm kernels of N elements. Rows of several runs are
    averaged, but for those timed with the host ahead of the device (DEVICE_ALONE), which take their
    fastest run. Those and a kernel's "graph replay" are timed without the host; a row back to back
    more than HOST_LENGTHENED times its twin timed with the host ahead, and other rows near their
    rig's floor (the fastest row of their workload), measure the host, as NeuSight's (class "launch",
    not fitted): the BF16 convolutions, whose host takes about 28 us per call, and backward passes
    through autograd (110-300 us of the H200 host's time per call), are."""
    grouped: dict[tuple, list[dict]] = {}
    for row in rows:
        if _measured_cost(row) is not None and row["metric"] == "device time" and chip_of(row["hardware"]):
            grouped.setdefault((row["workload"], row["config"], row["precision"], row["hardware"]), []).append(row)
    floors: dict[tuple, float] = {}
    for (workload, config, _, hardware), same in grouped.items():
        if not _device_alone(config):
            key = (workload.split(":")[0], hardware)
            floors[key] = min(floors.get(key, math.inf), _seconds_of(same))
    sizes = Counter((workload.split(":")[0], hardware) for workload, config, _, hardware in grouped
                    if not _device_alone(config))
    cases = []
    for (workload, config, precision, hardware), same in grouped.items():
        published = _seconds_of(same, fastest=config.endswith(DEVICE_ALONE))
        family = (workload.split(":")[0], hardware)
        # A workload's fastest row is its rig's floor; a lone row (the fused AdamW step) has none to be near.
        floor = 0.0 if _device_alone(config) or sizes[family] < 2 else floors[family]
        cost, dtype = _measured_cost(same[0])
        case = priced_case(_label(same[0]), chip_of(hardware), None, published, cost, dtype,
                           graph="graph replay" in config)
        twin = grouped.get((workload, config + DEVICE_ALONE, precision, hardware))
        lengthened = twin is not None and published > HOST_LENGTHENED * _seconds_of(twin, fastest=True)
        host_bound = published < HOST_BOUND_FACTOR * floor or lengthened
        cases.append(replace(case, floor_seconds=floor, host_bound=host_bound,
                             error_class="launch" if host_bound else case.error_class))
    return cases


def _device_alone(config: str) -> bool:
    """A row timed without the host: replayed from a CUDA graph, or with the host ahead of the device."""
    return "graph replay" in config or config.endswith(DEVICE_ALONE)


def _seconds_of(rows: list[dict], fastest: bool = False) -> float:
    """The mean of several runs' figures, or the fastest where only the host can lengthen them: a row
    timed with the host ahead comes out longer when the host falls behind its spin, never shorter."""
    seconds = [float(row["value"]) * _UNITS[row["unit"]] for row in rows]
    return min(seconds) if fastest else sum(seconds) / len(seconds)


def _measured_cost(row: dict) -> tuple[Cost, str | None] | None:
    dtype = _MEASURED_DTYPES.get(row["precision"])
    if dtype is None:
        return None
    if row["workload"] in ("GEMM torch.matmul", "GEMM torch._scaled_mm"):
        call = _mm(row["config"], "M=(\\d+) K=(\\d+) N=(\\d+)", "MKN", dtype)
        return cost_of(call), "tf32" if row["precision"] == "TF32" else None
    if row["workload"] in _CONVOLUTION_GRADIENTS:
        gradients = _CONVOLUTION_GRADIENTS[row["workload"]]
        # gpu_calibration.py's CONVOLUTION_PRECISIONS: BF16 channels-last, FP32 and TF32 contiguous
        return (_measured_convolution(row["config"], dtype, gradients, channels_last=row["precision"] == "BF16"),
                "tf32" if row["precision"] == "TF32" else None)
    if row["workload"] == "AdamW step" and row["config"].endswith(", fused"):
        return _measured_fused_adamw(row["config"]), None
    if row["workload"] in _ATTENTION_BACKWARD:
        return _measured_attention(row["config"], dtype, _ATTENTION_BACKWARD[row["workload"]]), None
    elements = re.match(r"(\d+) elements", row["config"])
    if elements is None:
        return None
    n = int(elements.group(1))
    if row["workload"] in _MEASURED_KERNELS:
        return cost_of(_MEASURED_KERNELS[row["workload"]](n, dtype)), None
    over_rows = re.fullmatch(r"kernel: (softmax|layer_norm) over rows of (\d+)", row["workload"])
    if over_rows:
        kind, width = over_rows.group(1), int(over_rows.group(2))
        return _row_op_cost("softmax" if kind == "softmax" else "ln", [n // width, width], dtype), None
    return None


# gpu_calibration.py's convolution workloads -> the gradients taken after the forward: (input, weight)
_CONVOLUTION_GRADIENTS = {"conv2d forward": None, "conv2d forward + weight gradient": (False, True),
                          "conv2d forward + input gradient": (True, False)}


def _measured_convolution(config: str, dtype: str, gradients: tuple[bool, bool] | None,
                          channels_last: bool) -> tuple[Cost, ...]:
    """gpu_calibration.py's F.conv2d(image, weight, stride, padding=k // 2) of "N=32 C=64 K=64 R=S=3
    stride=1 H=W=56", then (unless gradients is None) torch.autograd.grad of its output with respect to
    the input or the weight: one convolution_backward with that output mask."""
    n, c, k, r, stride, side = (int(v) for v in re.match(
        r"N=(\d+) C=(\d+) K=(\d+) R=S=(\d+) stride=(\d+) H=W=(\d+)", config).groups())
    shapes = [[n, c, side, side], [k, c, r, r]]
    geometry = [[stride, stride], [r // 2, r // 2], [1, 1], False, [0, 0], 1]
    lists = ["ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"]
    forward = cost_of(OpCall("aten::convolution", shapes + [[]] * 7, [dtype, dtype, ""] + lists,
                             [None, None, None] + geometry, channels_last=channels_last))
    if gradients is None:
        return (forward,)
    out = (side + 2 * (r // 2) - r) // stride + 1
    backward = cost_of(OpCall("aten::convolution_backward", [[n, k, out, out]] + shapes + [[]] * 8,
                              [dtype, dtype, dtype, "ScalarList"] + lists + ["ScalarList"],
                              [None, None, None, None] + geometry + [[*gradients, False]],
                              channels_last=channels_last))
    return forward, backward


# gpu_calibration.py's attention workloads -> whether the backward pass follows the forward
_ATTENTION_BACKWARD = {"scaled_dot_product_attention forward": False,
                       "scaled_dot_product_attention forward + backward": True}


def _measured_attention(config: str, dtype: str, backward: bool) -> tuple[Cost, ...]:
    """gpu_calibration.py's F.scaled_dot_product_attention(q, k, v, is_causal) of "B=8 H=16 S=512 D=64
    causal=False" tensors, then (backward) torch.autograd.grad of its output: FlashAttention's forward
    kernel, then its backward, which also reads the output and the FP32 log-sum-exp of each query row."""
    b, h, s, d, causal = re.match(r"B=(\d+) H=(\d+) S=(\d+) D=(\d+) causal=(True|False)", config).groups()
    qkv, causal = [int(b), int(h), int(s), int(d)], causal == "True"
    forward = cost_of(OpCall("aten::_scaled_dot_product_flash_attention", [qkv] * 3 + [[], []],
                             [dtype] * 3 + ["Scalar", "Scalar"], [None] * 3 + [0.0, causal]))
    if not backward:
        return (forward,)
    logsumexp = [int(b), int(h), int(s)]
    backward_call = OpCall("aten::_scaled_dot_product_flash_attention_backward",
                           [qkv] * 5 + [logsumexp] + [[]] * 8, [dtype] * 5 + [F32, "", "", "Scalar", "Scalar",
                                                                           "Scalar", "Scalar", "", ""],
                           [None] * 8 + [int(s), int(s), 0.0, causal, None, None])
    return forward, cost_of(backward_call)


def _measured_fused_adamw(config: str) -> Cost:
    """gpu_calibration.py's torch.optim.AdamW(fused=True).step() over "8 x 4096 x 4096 FP32 parameters",
    each with a gradient and both moments: one _fused_adamw_ call."""
    count, *shape = (int(size) for size in re.match(r"(\d+) x (\d+) x (\d+)", config).groups())
    lists = [[shape] * count] * 4 + [[], [[]] * count]  # params, grads, moments; no maxima; the steps
    return cost_of(OpCall("aten::_fused_adamw_", lists + [[]] * 7, ["TensorList"] * 6 + ["Scalar"] * 7,
                          [None] * 6 + [1e-4, 0.9, 0.999, 0.01, 1e-8, False, False]))


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
        cases.append(replace(case, floor_seconds=floor, rig_share=RIG_SHARES.get(row["op"], "neusight_vector_share"),
                             host_bound=host_bound,
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
