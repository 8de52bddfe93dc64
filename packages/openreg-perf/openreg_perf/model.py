"""Predicted seconds of one kernel, copy or collective on a profiled device, and the datasheet roofline.

The model keeps what a roofline ignores: a launch floor, tile and wave quantisation of matrix kernels,
achievable fractions of peak that grow with size, and alpha-beta collectives per algorithm and protocol.
Not a scheduler (timeline.py overlaps streams and hosts) and not a fitter (fit.py chooses the efficiencies).

Note [The equations] (all rates from the profile; e.* is its [efficiency], c.* its [collectives]):
  kernel    t = floor + max(t_compute, t_memory)      (floor: chip.kernel_floor_s, the device's own time
                                                    per kernel; the host's per launch is the replay's)
  matrix    tile = min(tile_m, m) x min(tile_n, n); waves = ceil(batch * tiles(m) * tiles(n) / compute_units)
            t_compute = e.matrix_setup + waves * 2 * tile_m * tile_n * (k + e.matrix_half_depth)
                                               / (peak[precision] / compute_units * e.matrix_fraction)
  other     t_compute = flops / (peak[vector] * e.matrix_fraction)
  memory    t_memory = (bytes + e.memory_half_bytes) / (bandwidth * e.memory_fraction)
  copy      t = latency + bytes / (link rate * e.copy_fraction)
  collective (per algorithm, the faster protocol)  t = steps * alpha + traffic * bytes / (B * fraction)
            ring all_reduce: steps 2(n-1), traffic 2(n-1)/n (nccl-tests' bus bandwidth convention)
            tree all_reduce: steps 2 ceil(log2 n), traffic 2
            in-switch all_reduce (NVLink SHARP): t = c.switch_setup + bytes / (B * c.switch_fraction)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .costs import Cost
from .profile import PRECISIONS, Profile

MATRIX_KINDS = ("matmul", "conv", "attention")
COPY_KINDS = ("h2d", "d2h", "d2d", "p2p")
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")
ALGORITHMS = ("ring", "tree", "switch")


@dataclass(frozen=True)
class Prediction:
    seconds: float
    bound: str  # "compute", "memory" or "latency" (the fixed costs outweigh the work)
    achieved_fraction_of_peak: float  # of the peak that bounds it: FLOP/s, or bytes/s if memory-bound


def roofline_seconds(cost: Cost, dtype: str | None, profile: Profile) -> float:
    """The plain datasheet roofline: max(FLOPs / peak, bytes / bandwidth), no launch cost, no efficiency."""
    return max(cost.flops / _peak(cost, dtype, profile), cost.bytes / profile.memory.bandwidth_bytes_per_s)


def kernel_seconds(cost: Cost, dtype: str | None, profile: Profile) -> Prediction:
    """Predicted time of the kernel that does `cost`. dtype: a precision key ("tf32" to model TF32
    matrix products of FP32 tensors) or None for the cost's own precision. Views take no time."""
    if cost.kind == "view":
        return Prediction(0.0, "latency", 0.0)
    peak = _peak(cost, dtype, profile)
    compute, fixed = _compute_seconds(cost, peak, profile)
    memory = _memory_seconds(cost.bytes, profile)
    launch = profile.chip.kernel_floor_s
    seconds = launch + max(compute, memory)
    if compute >= memory:
        bound, fraction = "compute", cost.flops / (seconds * peak)
    else:
        bound, fraction = "memory", cost.bytes / (seconds * profile.memory.bandwidth_bytes_per_s)
        efficiency = profile.efficiency  # a small transfer's latency: memory_half_bytes at the fitted rate
        fixed = efficiency.memory_half_bytes / (profile.memory.bandwidth_bytes_per_s * efficiency.memory_fraction)
    if launch + fixed > seconds / 2:
        bound = "latency"
    return Prediction(seconds, bound, fraction)


def _peak(cost: Cost, dtype: str | None, profile: Profile) -> float:
    """Matrix kernels run at their precision's matrix rate (FP32's plain rate where a chip lacks the
    unit: PyTorch then computes in FP32); every other kernel at the vector rate."""
    precision = dtype or cost.precision
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; one of {', '.join(PRECISIONS)}")
    if cost.kind not in MATRIX_KINDS:
        return profile.peak.vector_flops_per_s
    return profile.peak_of(precision)


def _compute_seconds(cost: Cost, peak: float, profile: Profile) -> tuple[float, float]:
    """Compute time and the part of it that does not grow with the work."""
    efficiency = profile.efficiency
    if cost.matrix is None or cost.kind not in MATRIX_KINDS:
        return cost.flops / (peak * efficiency.matrix_fraction), 0.0
    shape, chip = cost.matrix, profile.chip
    tile_m, tile_n = min(chip.matrix_tile_m, shape.m), min(chip.matrix_tile_n, shape.n)
    tiles = shape.batch * math.ceil(shape.m / max(1, tile_m)) * math.ceil(shape.n / max(1, tile_n))
    waves = math.ceil(tiles / chip.compute_units)
    rate_per_unit = peak / chip.compute_units * efficiency.matrix_fraction
    tile_seconds = 2 * tile_m * tile_n * (shape.k + efficiency.matrix_half_depth) / rate_per_unit
    return efficiency.matrix_setup_s + waves * tile_seconds, efficiency.matrix_setup_s


def _memory_seconds(nbytes: float, profile: Profile) -> float:
    if nbytes <= 0:
        return 0.0
    efficiency = profile.efficiency
    return (nbytes + efficiency.memory_half_bytes) / (profile.memory.bandwidth_bytes_per_s * efficiency.memory_fraction)


def copy_seconds(nbytes: float, kind: str, pinned: bool, profile: Profile) -> float:
    """A copy of nbytes: "h2d"/"d2h" over the host link (pageable memory at the driver's staging rate,
    which already is an effective rate), "d2d" within one device's memory, "p2p" to a peer device."""
    links = profile.links
    if kind in ("h2d", "d2h"):
        if not pinned:
            return links.host_latency_s + nbytes / links.host_pageable_bytes_per_s
        return links.host_latency_s + nbytes / (links.host_pinned_bytes_per_s * profile.efficiency.copy_fraction)
    if kind == "d2d":  # read and write the same memory
        return profile.chip.kernel_floor_s + _memory_seconds(2 * nbytes, profile)
    if kind == "p2p":
        peer_rate = _link_rate(profile, ranks=2)
        return links.device_link_latency_s + nbytes / (peer_rate * profile.efficiency.copy_fraction)
    raise ValueError(f"unknown copy kind {kind!r}; one of {', '.join(COPY_KINDS)}")


def _link_rate(profile: Profile, ranks: int) -> float:
    """One direction, one device: a switch gives every device its full rate to any peer; a mesh gives
    one link per peer, so a collective over n devices uses n-1 of the node's links."""
    links = profile.links
    if links.device_link_topology == "switch" or links.devices_per_node <= 1:
        return links.device_link_bytes_per_s
    peers_in_use = min(ranks, links.devices_per_node) - 1
    return links.device_link_bytes_per_s * peers_in_use / (links.devices_per_node - 1)


def bus_bandwidth_factor(op: str, ranks: int) -> float:
    """nccl-tests' busbw = algbw * factor: what each rank's link carries per byte of the message."""
    if op == "all_reduce":
        return 2 * (ranks - 1) / ranks
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (ranks - 1) / ranks
    if op == "broadcast":
        return 1.0
    raise ValueError(f"unknown collective {op!r}; one of {', '.join(COLLECTIVES)}")


def collective_seconds(op: str, nbytes: float, ranks: int, profile: Profile, algorithm: str | None = None) -> float:
    """Predicted time of one collective, with nccl-tests' size convention (all_reduce, broadcast: the
    buffer; all_gather: the gathered output; reduce_scatter: the input; all_to_all: what one rank sends).
    algorithm: "ring", "tree" or "switch" (in-network reduction), or None for the fastest available."""
    bus_bandwidth_factor(op, ranks)  # validates op
    if ranks <= 1:
        return 0.0
    available = _algorithms(op, profile, ranks)
    if algorithm is not None:
        if algorithm not in available:
            raise ValueError(f"{algorithm!r} cannot run {op} on {profile.name} over {ranks} ranks; "
                             f"available: {', '.join(available)}")
        available = (algorithm,)
    return min(_algorithm_seconds(op, nbytes, ranks, profile, name) for name in available)


def _algorithms(op: str, profile: Profile, ranks: int) -> tuple[str, ...]:
    if op != "all_reduce":
        return ("ring",)
    within_node = ranks <= profile.links.devices_per_node
    if profile.links.switch_reduction and within_node:
        return ("ring", "tree", "switch")
    return ("ring", "tree")


def _algorithm_seconds(op: str, nbytes: float, ranks: int, profile: Profile, algorithm: str) -> float:
    links, params = profile.links, profile.collectives
    rate = _link_rate(profile, ranks)
    extra_latency = 0.0
    if ranks > links.devices_per_node:  # crosses nodes: each rank's share of the network is the limit
        rate = min(rate, links.network_bytes_per_s)
        extra_latency = links.network_latency_s
    if algorithm == "switch":
        return params.switch_setup_s + nbytes / (rate * params.switch_fraction)
    if algorithm == "tree":
        steps, traffic = 2 * math.ceil(math.log2(ranks)), 2.0
    else:
        steps, traffic = _ring_steps(op, ranks), bus_bandwidth_factor(op, ranks)
    protocols = ((params.simple_step_s, params.simple_fraction),
                 (params.low_latency_step_s, params.low_latency_fraction))
    return min(steps * (alpha + extra_latency) + traffic * nbytes / (rate * fraction) for alpha, fraction in protocols)


def _ring_steps(op: str, ranks: int) -> int:
    return 2 * (ranks - 1) if op == "all_reduce" else ranks - 1
