"""Device profiles: load a TOML file of datasheet figures and fitted efficiencies into a typed, frozen record.

Validation refuses a missing, negative, non-numeric or unknown field, naming the field and the file.
Not the time model (model.py) and not the fitting of the efficiencies (fit.py): a profile is only data.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, fields
from importlib import resources
from pathlib import Path

# Every quantity is in SI base units, and every key says its unit (flops_per_s, bytes, _s, hz).
PRECISIONS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8")
LINK_TOPOLOGIES = ("switch", "mesh")


class ProfileError(ValueError):
    """A profile file that cannot be used; the message names the field and the file."""


@dataclass(frozen=True)
class Peak:
    """Dense peak rates (never the 2:4 sparsity figures). 0 means the chip has no such unit.

    fp32 is the plain (non-tensor) FP32 rate that FP32 matrix products run at unless TF32 is
    allowed; tf32/bf16/fp16/fp8/int8 are matrix-unit rates. vector is the rate of the arithmetic of
    every other kernel (elementwise, reductions, norms): a GPU's FP32 cores (its fp32 rate), a CPU's
    SIMD units on such code, which is far below its matrix rate.
    """

    fp64_flops_per_s: float
    fp32_flops_per_s: float
    vector_flops_per_s: float
    tf32_flops_per_s: float
    bf16_flops_per_s: float
    fp16_flops_per_s: float
    fp8_flops_per_s: float
    int8_ops_per_s: float

    def of(self, precision: str) -> float:
        suffix = "_ops_per_s" if precision == "int8" else "_flops_per_s"
        return getattr(self, precision + suffix)


@dataclass(frozen=True)
class Chip:
    compute_units: int  # SMs (NVIDIA), CUs (AMD), matrix engines or cores
    clock_hz: float  # the clock the peak rates are quoted at
    l2_bytes: float
    launch_overhead_s: float  # the host's time per kernel launch, as PyTorch issues them eagerly
    kernel_floor_s: float  # shortest time one kernel occupies its stream (a CUDA graph's replay shows it)
    matrix_tile_m: int  # output tile one compute unit works on in a matrix kernel (rows)
    matrix_tile_n: int  # (columns)


@dataclass(frozen=True)
class Memory:
    capacity_bytes: int
    bandwidth_bytes_per_s: float


@dataclass(frozen=True)
class Links:
    host_pinned_bytes_per_s: float  # one direction
    host_pageable_bytes_per_s: float  # one direction, through the driver's staging buffer
    host_latency_s: float
    devices_per_node: int
    device_link_topology: str  # "switch": every device reaches every other at full rate; "mesh": one link per peer
    device_link_bytes_per_s: float  # one direction, one device, all its links together
    device_link_latency_s: float
    network_bytes_per_s: float  # one direction, per device (its share of the node's NICs)
    network_latency_s: float
    switch_reduction: bool  # the switch can reduce in-network (NVLink SHARP); enables the "switch" algorithm


@dataclass(frozen=True)
class Efficiency:
    """Fitted by fit.py; see model.py for the equations they enter."""

    matrix_fraction: float  # fraction of dense peak a long matrix tile sustains
    matrix_half_depth: float  # reduction depth K at which a tile runs at half of that (prologue/epilogue)
    matrix_setup_s: float  # fixed cost of a library matrix kernel beyond the launch
    memory_fraction: float  # fraction of memory bandwidth a long streaming kernel sustains
    memory_half_bytes: float  # bytes at which a streaming kernel reaches half of that
    copy_fraction: float  # fraction of a link's rate a large copy sustains


@dataclass(frozen=True)
class Collectives:
    """Fitted by fit.py: alpha (per step) and beta (fraction of link rate) for each protocol."""

    simple_step_s: float  # bandwidth-optimised protocol: latency per algorithm step
    simple_fraction: float  # and fraction of the link rate it sustains
    low_latency_step_s: float  # latency-optimised protocol (NCCL's LL): latency per step
    low_latency_fraction: float  # and its (lower) fraction of the link rate
    switch_setup_s: float  # in-switch reduction: fixed cost per collective
    switch_fraction: float  # and its fraction of the link rate


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    peak: Peak
    chip: Chip
    memory: Memory
    links: Links
    efficiency: Efficiency
    collectives: Collectives
    path: str  # the file it was read from, for messages

    def peak_of(self, precision: str) -> float:
        """The dense peak rate for precision's matrix work. A chip without a unit for it (0 in the
        profile: FP8 on an A100) runs such work at its FP32 rate."""
        return self.peak.of(precision) or self.peak.fp32_flops_per_s


_SECTIONS = {
    "peak": Peak,
    "chip": Chip,
    "memory": Memory,
    "links": Links,
    "efficiency": Efficiency,
    "collectives": Collectives,
}
_TOP_LEVEL = ("name", "description")


def user_profiles_dir() -> Path:
    """Where profiles of the user's own live (a vendor's chip, this machine's measured `host`):
    $OPENREG_PERF_HOME/profiles, by default ~/.cache/openreg-perf/profiles. A profile there takes
    precedence over the bundled one of the same name."""
    home = os.environ.get("OPENREG_PERF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "openreg-perf")
    return Path(home) / "profiles"


def list_profiles() -> list[str]:
    """Names of the bundled profiles and of the user's own, e.g. "h100-sxm"."""
    folder = resources.files("openreg_perf") / "profiles"
    names = {entry.name[: -len(".toml")] for entry in folder.iterdir() if entry.name.endswith(".toml")}
    if user_profiles_dir().is_dir():
        names |= {path.stem for path in user_profiles_dir().glob("*.toml")}
    return sorted(names)


def load_profile(name_or_path: str | Path) -> Profile:
    """A bundled profile by name ("h100-sxm"), or any profile file by path."""
    path = _resolve(name_or_path)
    try:
        with open(path, "rb") as file:
            table = tomllib.load(file)
    except tomllib.TOMLDecodeError as error:
        raise ProfileError(f"{path}: not valid TOML: {error}") from None
    return _build(table, str(path))


def _resolve(name_or_path: str | Path) -> Path:
    candidate = Path(name_or_path)
    if candidate.suffix == ".toml" or candidate.exists():
        if not candidate.is_file():
            raise ProfileError(f"{candidate}: no such profile file")
        return candidate
    own = user_profiles_dir() / f"{name_or_path}.toml"
    if own.is_file():
        return own
    bundled = bundled_path(str(name_or_path))
    if not bundled.is_file():
        raise ProfileError(f"no profile named {name_or_path!r}; known: {', '.join(list_profiles())}")
    return bundled


def bundled_path(name: str) -> Path:
    """The file of the profile bundled under name (whether or not it exists)."""
    return Path(str(resources.files("openreg_perf") / "profiles" / f"{name}.toml"))


def _build(table: dict, path: str) -> Profile:
    _refuse_unknown(table, set(_TOP_LEVEL) | set(_SECTIONS), "", path)
    for key in _TOP_LEVEL:
        if not isinstance(table.get(key), str):
            raise ProfileError(f"{path}: field {key!r} is missing or not a string")
    sections = {}
    for section, record in _SECTIONS.items():
        values = table.get(section)
        if not isinstance(values, dict):
            raise ProfileError(f"{path}: section [{section}] is missing")
        sections[section] = _build_section(record, values, section, path)
    return Profile(name=table["name"], description=table["description"], path=path, **sections)


def _build_section(record: type, values: dict, section: str, path: str):
    expected = {field.name: field.type for field in fields(record)}
    _refuse_unknown(values, set(expected), f"{section}.", path)
    checked = {}
    for key, type_name in expected.items():
        where = f"{path}: field '{section}.{key}'"
        if key not in values:
            raise ProfileError(f"{where} is missing")
        checked[key] = _check_value(values[key], type_name, where)
    return record(**checked)


def _check_value(value, type_name: str, where: str):
    if type_name == "str":
        if value not in LINK_TOPOLOGIES:
            raise ProfileError(f"{where} must be one of {', '.join(LINK_TOPOLOGIES)}, not {value!r}")
        return value
    if type_name == "bool":
        if not isinstance(value, bool):
            raise ProfileError(f"{where} must be true or false, not {value!r}")
        return value
    # bool is an int subclass in Python: refuse it where a number is meant.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ProfileError(f"{where} must be a number, not {value!r}")
    if value < 0:
        raise ProfileError(f"{where} must not be negative ({value})")
    if type_name == "int":
        if value != int(value) or value < 1:
            raise ProfileError(f"{where} must be a whole number of at least 1 ({value})")
        return int(value)
    return float(value)


def _refuse_unknown(values: dict, known: set[str], prefix: str, path: str) -> None:
    unknown = sorted(set(values) - known)
    if unknown:
        raise ProfileError(f"{path}: unknown field '{prefix}{unknown[0]}' (known: {', '.join(sorted(known))})")
