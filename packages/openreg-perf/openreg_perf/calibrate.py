"""Measures this machine as a device: the `host` profile, for predicting openreg's own kernels here
(`python -m openreg_perf calibrate-host`, under a minute). Each figure is a median of device times
taken with openreg events, so the host's launch costs stay out of them. Not a profile of a real
accelerator: those come from datasheets and published measurements (profiles/*.toml, fit.py).
"""

from __future__ import annotations

import datetime
import math
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

from .profile import bundled_path, load_profile, user_profiles_dir


def device_seconds(fn: Callable[[], None], repeats: int = 5, inner: int = 1) -> float:
    """Median device time of one fn() call, over `repeats` samples of `inner` calls, between two
    events on the current openreg stream."""
    fn()  # warm-up: first calls of a dtype wait for their result (the executor's check)
    start, end = torch.Event(device="openreg", enable_timing=True), torch.Event(device="openreg", enable_timing=True)
    samples = []
    for _ in range(repeats):
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / 1e3 / inner)
    return statistics.median(samples)


def host_seconds(fn: Callable[[], object], calls: int = 200) -> float:
    """The host's time per fn() call (best of five batches): what the [host] section prices."""
    fn()
    best = math.inf
    for _ in range(5):
        begin = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - begin) / calls)
    return best


TILE = 64  # the host profile's matrix tile (a cache-blocked CPU GEMM's block), from the template


def _matmul_seconds(dtype: torch.dtype, n: int) -> float:
    a, b = torch.randn(n, n, device="openreg", dtype=dtype), torch.randn(n, n, device="openreg", dtype=dtype)
    return device_seconds(lambda: torch.mm(a, b), inner=max(1, 2 * 512**3 // n**3))


def _matrix_work(n: int) -> float:
    """2 * tile^2 * waves * units of an n^3 product: what the model divides by the rate (model.py)."""
    units = os.cpu_count() or 1
    waves = math.ceil(math.ceil(n / TILE) ** 2 / units)
    return 2 * TILE * TILE * waves * units


def _matrix_fit(dtype: torch.dtype, launch: float, sizes=(256, 512)) -> tuple[float, float]:
    """(peak, half_depth) of the model's matrix time, t = launch + work(n) * (n + half_depth) / peak,
    through n^3 products of two sizes: a CPU GEMM gets faster per FLOP as it grows, as the model's
    half depth says."""
    (n1, n2), (t1, t2) = sizes, [_matmul_seconds(dtype, n) - launch for n in sizes]
    c1, c2 = _matrix_work(n1), _matrix_work(n2)
    ratio = t2 / t1
    half_depth = max(0.0, (c2 * n2 - ratio * c1 * n1) / (ratio * c1 - c2))
    return c2 * (n2 + half_depth) / t2, half_depth


def _copy_rate(source: torch.Tensor, destination: str, non_blocking: bool) -> float:
    return source.numel() * source.element_size() / device_seconds(lambda: source.to(destination,
                                                                                    non_blocking=non_blocking))


def _add_seconds(elements: int, inner: int) -> float:
    a, b = torch.ones(elements, device="openreg"), torch.ones(elements, device="openreg")
    return device_seconds(lambda: a.add_(b), inner=inner)


# LITERALINCLUDE START: HOST_CALIBRATION
def measure() -> dict[str, float]:
    """This machine's figures, as the host profile's fields name them. Kernels are timed in batches,
    as a program queues them: a kernel's time here is what it adds to its stream. The operators
    measured are not those the host check compares (tools/bench/perf_model.py)."""
    tiny = torch.zeros(1, device="openreg")
    launch = device_seconds(lambda: torch.neg(tiny), inner=200)
    host_launch, host_operator = host_seconds(lambda: torch.neg(tiny)), host_seconds(lambda: tiny.view(1))
    host_synchronize = host_seconds(torch.openreg.synchronize)
    # Memory: an in-place add (reads two tensors, writes one) at two sizes gives the rate and the
    # size at which half of it is reached (the model's memory_half_bytes).
    small, large = 256 << 10, 2 << 20
    t_small, t_large = _add_seconds(small, 20) - launch, _add_seconds(large, 5) - launch
    bandwidth = 12 * (large - small) / (t_large - t_small)
    half_bytes = max(0.0, t_small * bandwidth - 12 * small)
    # Non-matrix arithmetic: sigmoid, which the cost model counts as 4 FLOPs per element.
    x = torch.randn(1 << 20, device="openreg")
    vector = 4 * x.numel() / (device_seconds(lambda: torch.sigmoid(x), inner=5) - launch)
    fp32, half_depth = _matrix_fit(torch.float32, launch)
    skinny = torch.randn(TILE, TILE, device="openreg")
    setup = max(0.0, device_seconds(lambda: torch.mm(skinny, skinny), inner=50) - launch
                - _matrix_work(TILE) * (TILE + half_depth) / fp32)
    host = torch.randn(8 << 20)
    pinned = host.pin_memory()
    figures = {
        "fp64_flops_per_s": _matrix_fit(torch.float64, launch)[0], "fp32_flops_per_s": fp32,
        "vector_flops_per_s": vector, "bf16_flops_per_s": _matrix_fit(torch.bfloat16, launch)[0],
        "fp16_flops_per_s": _matrix_fit(torch.float16, launch, (128, 256))[0],
        "launch_overhead_s": launch, "bandwidth_bytes_per_s": bandwidth, "memory_half_bytes": half_bytes,
        "host_launch_s": host_launch, "host_operator_s": host_operator, "host_synchronize_s": host_synchronize,
        "matrix_half_depth": half_depth, "matrix_setup_s": setup,
        "host_pinned_bytes_per_s": _copy_rate(pinned, "openreg", non_blocking=True),
        "host_pageable_bytes_per_s": _copy_rate(host, "openreg", non_blocking=False),
        "capacity_bytes": torch.openreg.mem_get_info()[1],
    }
    if torch.openreg.device_count() > 1:
        figures["device_link_bytes_per_s"] = _copy_rate(host.to("openreg:0"), "openreg:1", non_blocking=True)
    return figures
# LITERALINCLUDE END: HOST_CALIBRATION


def _cpu_clock_hz() -> float:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            mhz = [float(line.split(":")[1]) for line in cpuinfo if line.startswith("cpu MHz")]
        return mhz[0] * 1e6 if mhz else 1e9
    except OSError:
        return 1e9


def host_profile_text(figures: dict[str, float]) -> str:
    """The host profile: the bundled template with the measured figures in place."""
    template = load_profile(bundled_path("host"))
    links = template.links
    link = figures.get("device_link_bytes_per_s", links.device_link_bytes_per_s)
    collectives = template.collectives
    when = datetime.date.today().isoformat()
    return f"""# This machine's CPU running the simulated openreg device, measured by
# `python -m openreg_perf calibrate-host` on {when} (openreg_perf/calibrate.py): each figure is a
# median of device times between openreg events. Units: SI base units, named in every key.
name = "host"
description = "This machine ({os.cpu_count()} cores) running the simulated device, measured {when}"

[peak]
fp64_flops_per_s = {figures['fp64_flops_per_s']:.4g}  # measured: 256^3 and 512^3 matmuls
fp32_flops_per_s = {figures['fp32_flops_per_s']:.4g}  # measured: 256^3 and 512^3 matmuls
vector_flops_per_s = {figures['vector_flops_per_s']:.4g}  # measured: sigmoid of 1 Mi floats (4 FLOPs each)
tf32_flops_per_s = 0  # the CPU has no TF32 path: FP32
bf16_flops_per_s = {figures['bf16_flops_per_s']:.4g}  # measured: 256^3 and 512^3 matmuls
fp16_flops_per_s = {figures['fp16_flops_per_s']:.4g}  # measured: 128^3 and 256^3 matmuls
fp8_flops_per_s = 0  # no FP8 matmul: computed in FP32
int8_ops_per_s = 0  # no INT8 matmul: computed in FP32
special_functions_per_s = {template.peak.special_functions_per_s:.4g}  # from the template: not measured

[chip]
compute_units = {os.cpu_count()}  # cores
clock_hz = {_cpu_clock_hz():.4g}  # /proc/cpuinfo
sustained_clock_hz = {_cpu_clock_hz():.4g}  # as clock_hz: the rates above are measured under load
l2_bytes = {int(template.chip.l2_bytes)}  # from the template
kernel_floor_s = {figures['launch_overhead_s']:.4g}  # measured: back-to-back one-element neg (the stream worker's)

[matrix]
simt_tiles = [[{TILE}, {TILE}]]  # assumption: a cache-blocked CPU GEMM's blocks
tensor_tiles = [[{TILE}, {TILE}]]  # (no matrix units: the same blocks)
max_split_k = 1  # the CPU GEMM does not split the reduction across cores

[memory]
capacity_bytes = {figures['capacity_bytes']}  # the simulated device's capacity (OPENREG_DEVICE_MEMORY)
bandwidth_bytes_per_s = {figures['bandwidth_bytes_per_s']:.4g}  # measured: add_ of 256 Ki and of 2 Mi floats

[links]
host_pinned_bytes_per_s = {figures['host_pinned_bytes_per_s']:.4g}  # measured: 32 MiB from pinned memory
host_pageable_bytes_per_s = {figures['host_pageable_bytes_per_s']:.4g}  # measured: 32 MiB from pageable memory
host_latency_s = {figures['launch_overhead_s']:.4g}  # as a launch
devices_per_node = {links.devices_per_node}  # OPENREG_DEVICE_COUNT's default
device_link_topology = "{links.device_link_topology}"  # simulated devices share this machine's memory
device_link_bytes_per_s = {link:.4g}  # measured: 32 MiB from openreg:0 to openreg:1
device_link_latency_s = {figures['launch_overhead_s']:.4g}  # as a launch
network_bytes_per_s = {links.network_bytes_per_s:.4g}  # template: not measured
network_latency_s = {links.network_latency_s:.4g}  # template: not measured
switch_reduction = false  # no switch: a copy through memory

[host]  # this machine's Python driving the simulator
launch_s = {figures['host_launch_s']:.4g}  # measured: one-element neg called back to back, host time each
operator_s = {figures['host_operator_s']:.4g}  # measured: a view (an operator that launches nothing)
synchronize_s = {figures['host_synchronize_s']:.4g}  # measured: synchronize() of an idle device
outer_call_s = {template.host.outer_call_s:.4g}  # from the template (the H100 machine's Python): not measured
module_call_s = {template.host.module_call_s:.4g}  # from the template: not measured
optimizer_step_s = {template.host.optimizer_step_s:.4g}  # from the template: not measured

[efficiency]  # the rates above are what kernels reach: fractions of 1
gemm_fp32_fraction = 1.0
gemm_tf32_fraction = 1.0
gemm_16bit_fraction = 1.0
gemm_8bit_fraction = 1.0
conv_forward_factor = 1.0
conv_winograd_factor = 1.0
conv_matrix_forward_factor = 1.0
conv_tf32_factor = 1.0
conv_input_grad_factor = 1.0
conv_weight_grad_factor = 1.0
conv_weight_grad_winograd_factor = 1.0
attention_forward_factor = 1.0
attention_backward_factor = 1.0
matrix_half_depth = {figures['matrix_half_depth']:.4g}  # measured: the two matmul sizes
matrix_unit_half_depth = {figures['matrix_half_depth']:.4g}  # as matrix_half_depth: no matrix units here
matrix_setup_s = {figures['matrix_setup_s']:.4g}  # measured: a 64^3 matmul beyond its launch and FLOPs
matrix_unit_setup_s = {figures['matrix_setup_s']:.4g}  # as matrix_setup_s: the simulator has no matrix units of its own
matrix_tile_overhead = 0.0001  # one block size: no choice between tiles to weigh
vector_fraction = 1.0
elementwise_memory_fraction = 1.0
reduction_memory_fraction = 1.0
norm_memory_fraction = 1.0
softmax_memory_fraction = 1.0
optimizer_memory_fraction = 1.0
memory_half_bytes = {figures['memory_half_bytes']:.4g}  # measured: the same two add_ sizes
row_half_rows_per_unit = 0.0  # the simulator runs a row-wise kernel as any other: no occupancy to reach
norm_row_s = 0.0  # the simulator runs a row-wise kernel as any other: nor a time per row
reduction_fixed_s = 0.0  # the simulator runs a reduction as any other kernel
reduction_global_s = 0.0
norm_unit_bytes_per_s = 1e15  # nor a compute unit's own limit (a rate far above any memory's)
copy_fraction = 1.0
conv_clock_gain = 1.0  # no power limit: the simulator runs at its CPU's clock
softmax_element_cycles = 0.0  # the simulator runs a softmax as any other kernel
conv_unaligned_fraction = 1.0  # no matrix units: nothing to pad channels for

[collectives]  # template: occl over shared memory is not measured here
simple_step_s = {collectives.simple_step_s:.4g}
simple_fraction = {collectives.simple_fraction:.4g}
low_latency_step_s = {collectives.low_latency_step_s:.4g}
low_latency_fraction = {collectives.low_latency_fraction:.4g}
switch_setup_s = {collectives.switch_setup_s:.4g}
switch_fraction = {collectives.switch_fraction:.4g}

[provenance]
gemm_fp32 = "measured here: 256^3 and 512^3 matmuls (calibrate-host)"
gemm_16bit = "measured here: 256^3 and 512^3 matmuls (calibrate-host)"
elementwise = "measured here: add_ of two sizes (calibrate-host)"
collectives = "template: not measured"
"""


def calibrate_host(path: str | Path | None = None) -> Path:
    """Measures this machine and writes its host profile (by default where load_profile("host") looks
    first); returns the path."""
    target = Path(path) if path is not None else user_profiles_dir() / "host.toml"
    text = host_profile_text(measure())
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    load_profile(target)  # refuses a profile the measurement got wrong (a negative figure)
    return target
