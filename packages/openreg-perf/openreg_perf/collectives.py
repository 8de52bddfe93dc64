"""Predicted time of one collective on a profiled device's links: alpha-beta per algorithm (ring, NCCL's
tree of nodes, in-switch reduction) and protocol (simple, low latency), as Note [The equations] in
model.py writes them, the faster taken. Not the kernels (model.py) nor their scheduling (timeline.py).

Note [Collectives across nodes]
links.network_bytes_per_s is one device's NIC (a DGX H100 has eight 400 Gb/s NICs, one per GPU). A
group of n ranks, g of them on each node, that spans nodes runs its rings (all_reduce, all_gather,
reduce_scatter, broadcast; and NCCL's tree of nodes) on several channels: each leaves a node through
another rank's NIC, so the node's g NICs share what the group sends to the next node, which is what
each rank sends to its neighbour, traffic * bytes. The rate is min(device link, g * NIC): on DGX
H100s, eight NICs' 400 GB/s beside NVLink's 450, not one NIC's 50. A group with one rank per node
(the data-parallel replicas of a pipeline) has one NIC each. An all_to_all instead sends each other node its share
directly: (n - g) / n of the buffer through the rank's own NIC, beside (g - 1) / n over the device
link. Each step of an algorithm across nodes pays the network's latency.
"""

from __future__ import annotations

import math

from .model import device_link_rate
from .profile import Profile

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")
ALGORITHMS = ("ring", "tree", "switch")
# NCCL reduces in the switch (NVLS) from this message size up; below it, its tuning picks a ring within a
# node, a ring or a tree across nodes.
SWITCH_MIN_BYTES = 2 * 2**20


def bus_bandwidth_factor(op: str, ranks: int) -> float:
    """nccl-tests' busbw = algbw * factor: what each rank's link carries per byte of the message."""
    if op == "all_reduce":
        return 2 * (ranks - 1) / ranks
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (ranks - 1) / ranks
    if op == "broadcast":
        return 1.0
    raise ValueError(f"unknown collective {op!r}; one of {', '.join(COLLECTIVES)}")


def collective_seconds(op: str, nbytes: float, ranks: int, profile: Profile, algorithm: str | None = None,
                       ranks_per_node: int | None = None) -> float:
    """Predicted time of one collective, with nccl-tests' size convention (all_reduce, broadcast: the
    buffer; all_gather: the gathered output; reduce_scatter: the input; all_to_all: what one rank sends).
    algorithm: "ring", "tree" or "switch" (in-network reduction), or None for the fastest available.
    ranks_per_node: how many of the group's ranks each node holds; by default as many as fit
    (consecutive ranks). A data-parallel group of pipelines has fewer: one rank per replica on a node.
    The group spans nodes when it has more ranks than that (Note [Collectives across nodes])."""
    bus_bandwidth_factor(op, ranks)  # validates op
    if ranks <= 1:
        return 0.0
    per_node = min(ranks, profile.links.devices_per_node) if ranks_per_node is None else ranks_per_node
    if not 1 <= per_node <= min(ranks, profile.links.devices_per_node):
        raise ValueError(f"ranks_per_node must be between 1 and {min(ranks, profile.links.devices_per_node)} "
                         f"({ranks} ranks, {profile.links.devices_per_node} devices a node), not {ranks_per_node!r}")
    available = _algorithms(op, profile, nbytes, spans_nodes=ranks > per_node)
    if algorithm is not None:
        if algorithm not in available:
            raise ValueError(f"{algorithm!r} cannot run {op} on {profile.name} over {ranks} ranks; "
                             f"available: {', '.join(available)}")
        available = (algorithm,)
    return min(_algorithm_seconds(op, nbytes, ranks, profile, name, per_node) for name in available)


def collective_bound(op: str, nbytes: float, ranks: int, seconds: float, profile: Profile) -> tuple[str, float]:
    """What held a collective of `seconds` (consecutive ranks, the fastest algorithm): "latency" where its
    steps' fixed costs took most of it, else "link"; and the share of its links' datasheet rate that its
    traffic per rank reached (a ring's bus traffic, a tree's 2, in-switch reduction's 1; across nodes
    the node's NICs, an all_to_all's own NIC: Note [Collectives across nodes])."""
    if ranks <= 1 or seconds <= 0:
        return "latency", 0.0
    per_node = min(ranks, profile.links.devices_per_node)
    available = _algorithms(op, profile, nbytes, spans_nodes=ranks > per_node)
    algorithm = min(available, key=lambda name: _algorithm_seconds(op, nbytes, ranks, profile, name, per_node))
    traffic, rate = {"switch": 1.0, "tree": 2.0}.get(algorithm, bus_bandwidth_factor(op, ranks)), device_link_rate(
        profile, per_node)
    if ranks > per_node:
        network = profile.links.network_bytes_per_s
        if op == "all_to_all":
            traffic, rate = (ranks - per_node) / ranks, network
        else:
            rate = min(rate, per_node * network)
    bound = "latency" if collective_seconds(op, 0.0, ranks, profile) > seconds / 2 else "link"
    return bound, traffic * nbytes / seconds / rate


def _algorithms(op: str, profile: Profile, nbytes: float, spans_nodes: bool) -> tuple[str, ...]:
    if op != "all_reduce":
        return ("ring",)
    if spans_nodes:  # NCCL's tree is a tree of nodes: within one node it chains the GPUs
        return ("ring", "tree")
    if profile.links.switch_reduction and nbytes >= SWITCH_MIN_BYTES:
        return ("ring", "switch")
    return ("ring",)


def _algorithm_seconds(op: str, nbytes: float, ranks: int, profile: Profile, algorithm: str,
                       ranks_per_node: int) -> float:
    links, params = profile.links, profile.collectives
    rate = device_link_rate(profile, ranks_per_node)
    if algorithm == "switch":
        return params.switch_setup_s + nbytes / (rate * params.switch_fraction)
    if algorithm == "tree":
        steps, traffic = 2 * math.ceil(math.log2(ranks)), 2.0
    else:
        steps, traffic = _ring_steps(op, ranks), bus_bandwidth_factor(op, ranks)
    extra_latency = 0.0
    if ranks > ranks_per_node:  # Note [Collectives across nodes]
        extra_latency, network = links.network_latency_s, links.network_bytes_per_s
        if op == "all_to_all":  # what a rank sends to other nodes leaves through its own NIC (as bytes at rate)
            traffic = max((ranks_per_node - 1) / ranks, (ranks - ranks_per_node) / ranks * rate / network)
        else:  # the group's rings leave each node through the NICs of all its ranks there
            rate = min(rate, ranks_per_node * network)
    protocols = ((params.simple_step_s, params.simple_fraction),
                 (params.low_latency_step_s, params.low_latency_fraction))
    return min(steps * (alpha + extra_latency) + traffic * nbytes / (rate * fraction) for alpha, fraction in protocols)


def _ring_steps(op: str, ranks: int) -> int:
    return 2 * (ranks - 1) if op == "all_reduce" else ranks - 1
