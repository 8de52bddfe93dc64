"""Device profiles: load a TOML file of datasheet figures and fitted efficiencies into a typed, frozen record.

Validation refuses a missing, negative, non-numeric or unknown field, naming the field and the file.
Not the time model (model.py) and not the fitting of the efficiencies (fit.py): a profile is only data.
"""

from __future__ import annotations

import difflib
import functools
import math
import os
import reprlib
import tomllib
import warnings
from dataclasses import MISSING, dataclass, fields, replace
from importlib import resources
from pathlib import Path

# Every quantity is in SI base units, and every key says its unit (flops_per_s, bytes, _s, hz).
PRECISIONS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8")
LINK_TOPOLOGIES = ("switch", "mesh", "pcie")


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
    special_functions_per_s: float  # transcendentals (exp, tanh, ...): NVIDIA's SFUs, 16 per SM per clock

    def of(self, precision: str) -> float:
        suffix = "_ops_per_s" if precision == "int8" else "_flops_per_s"
        return getattr(self, precision + suffix)


@dataclass(frozen=True)
class Chip:
    compute_units: int  # SMs (NVIDIA), CUs (AMD), matrix engines or cores
    clock_hz: float  # the (boost) clock the peak rates are quoted at
    sustained_clock_hz: float  # the clock it holds under sustained full load (power or thermal limit)
    l2_bytes: float
    kernel_floor_s: float  # shortest time one kernel occupies its stream when queued there, as eager launches are
    graph_kernel_floor_s: float | None = None  # ... replayed from a CUDA graph (shorter); None: kernel_floor_s

    @property
    def graph_floor_s(self) -> float:
        return self.kernel_floor_s if self.graph_kernel_floor_s is None else self.graph_kernel_floor_s

    @property
    def sustained_fraction(self) -> float:
        """What share of the quoted compute peaks a long kernel can use: Note [Sustained clock]."""
        return min(1.0, self.sustained_clock_hz / self.clock_hz)


@dataclass(frozen=True)
class Matrix:
    """The matrix library's kernels (cuBLAS, hipBLASLt, ...): the output tiles it chooses between and
    how far it splits the reduction. model.py picks, per product, the candidate predicted fastest,
    as the library's heuristics aim to (Note [How a matrix kernel is chosen] in model.py)."""

    simt_tiles: tuple  # tiles of the kernels without matrix units (FP32 and FP64 products)
    tensor_tiles: tuple  # tiles of the matrix-unit kernels (TF32, BF16/FP16, FP8, INT8)
    max_split_k: int  # the most slices the reduction dimension is split into (1: never)
    # The tiles the library runs batched FP32 products (bmm) with, where its batched heuristic picks
    # from fewer kernels than its single-product one; empty: the same menu as simt_tiles.
    batched_simt_tiles: tuple = ()


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
    device_link_topology: str  # LINK_TOPOLOGIES: "switch", "mesh", or "pcie" (peers reach each other over PCIe)
    device_link_bytes_per_s: float  # one direction, one device, all its links together
    device_link_latency_s: float
    network_bytes_per_s: float  # one direction, per device (its share of the node's NICs)
    network_latency_s: float
    switch_reduction: bool  # the switch can reduce in-network (NVLink SHARP); enables the "switch" algorithm


@dataclass(frozen=True)
class Host:
    """The target machine's host as PyTorch eager drives the device from it (Note [How the host is
    replayed] in timeline.py): part of the profile, so a prediction never depends on the machine
    that makes it."""

    launch_s: float  # host time per kernel launch, the dispatch of the operator that launches it included
    operator_s: float  # host time per further operator call between two launches (composites, views, allocations)
    synchronize_s: float  # host time of a synchronisation beyond waiting for the device (an idle device's)
    # What a further outermost call (one Python or autograd's engine makes, not one inside another
    # operator) costs beyond its operator_s, a module's call beyond its calls (nn.Module's Python and its
    # forward's own), and an optimizer step beyond its operators (Optimizer.step's Python and the
    # backward pass's start): none where a profile leaves them out.
    outer_call_s: float = 0.0
    module_call_s: float = 0.0
    optimizer_step_s: float = 0.0


@dataclass(frozen=True)
class Efficiency:
    """What share of the datasheet rates each kernel class reaches; fitted by fit.py, see model.py for
    the equations they enter. Matrix classes: the product's precision sets the level (gemm_*), the
    kind of kernel a factor on it (conv_*, attention_*)."""

    gemm_fp32_fraction: float  # FP32/FP64 products on the plain (SIMT) units: fraction of their peak
    gemm_tf32_fraction: float  # TF32 products on the matrix units
    gemm_16bit_fraction: float  # BF16 and FP16 products on the matrix units
    gemm_8bit_fraction: float  # FP8 and INT8 products on the matrix units
    conv_forward_factor: float  # a convolution's forward pass, relative to a GEMM of its precision (above 1:
    #                             the library's algorithm does less work than the direct product, as Winograd)
    conv_winograd_factor: float  # a forward convolution the library runs as Winograd (Note [Which convolutions
    #                              run as Winograd] in costs/products.py): it multiplies less than the product
    conv_matrix_forward_factor: float  # a forward convolution on the matrix units (TF32, BF16, FP16): the
    #                                    library's implicit GEMM, relative to a GEMM of its precision
    conv_tf32_factor: float  # every pass of a TF32 convolution, on top of its pass's factor: cuDNN's TF32
    #                          kernels reach less of the TF32 rate than its BF16 ones of the BF16 rate
    conv_input_grad_factor: float  # its gradient with respect to the input
    conv_weight_grad_factor: float  # its gradient with respect to the weight
    conv_weight_grad_winograd_factor: float  # ... where the library runs it as Winograd (FP32, 3 x 3, stride 1)
    attention_forward_factor: float  # fused attention forward, relative to a GEMM of its precision
    attention_backward_factor: float  # fused attention backward
    matrix_half_depth: float  # reduction depth K at which a tile runs at half its rate (prologue/epilogue)
    matrix_unit_half_depth: float  # ... on the matrix units, whose kernels pipeline deeper slices of K
    matrix_setup_s: float  # fixed cost of a library matrix kernel beyond the kernel floor (FP32/FP64 units)
    matrix_unit_setup_s: float  # ... on the matrix units (TF32, 16- and 8-bit products)
    matrix_tile_overhead: float  # a tile's edge cost: its rate is 1 / (1 + overhead * (tm + tn) / (tm * tn))
    vector_fraction: float  # non-matrix arithmetic: fraction of the vector peak
    elementwise_memory_fraction: float  # fraction of memory bandwidth a long elementwise kernel sustains
    reduction_memory_fraction: float  # ... a long reduction
    norm_memory_fraction: float  # ... the norms (layer, RMS, batch, group)
    softmax_memory_fraction: float  # ... softmax
    optimizer_memory_fraction: float  # ... an optimizer's multi-tensor kernels (model.py's Note [Optimizer steps])
    memory_half_bytes: float  # bytes at which a streaming kernel reaches half of its fraction
    row_half_rows_per_unit: float  # rows per compute unit at which a row-wise kernel reaches half of its fraction
    norm_row_s: float  # a layer or RMS norm's fixed time per row on one compute unit (model.py's Note [Rows of a norm])
    norm_unit_bytes_per_s: float  # ... and the rate at which one compute unit streams its rows' bytes
    reduction_fixed_s: float  # a reduction kernel's own time beyond its bytes (model.py's Note [Reductions])
    reduction_global_s: float  # ... more where its blocks share each output, through a workspace
    copy_fraction: float  # fraction of a link's rate a large copy sustains
    conv_clock_gain: float  # a power-limited chip's clock in a convolution over its sustained clock (model.py's
    #                         Note [Sustained clock]), up to the boost clock
    softmax_element_cycles: float  # a softmax's cycles per element on a compute unit (Note [A softmax's pace])
    conv_unaligned_fraction: float  # a matrix-unit convolution whose channels cuDNN pads: its fraction of the
    #                                 peak, every pass (model.py's Note [Unaligned channels])


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
    matrix: Matrix
    memory: Memory
    links: Links
    host: Host
    efficiency: Efficiency
    collectives: Collectives
    provenance: dict  # kernel class -> where its efficiency comes from (datasheet, fitted to which rows, assumed)
    path: str  # the file it was read from, for messages
    hardware_names: tuple = ()  # how measurements name this chip ("H100 SXM"): published.py matches rows by them
    architecture: str = ""  # "hopper", "cdna3", ...: a chip without a fit of its own takes its architecture's levels
    defaulted: tuple = ()  # sections the file left out, filled with DEFAULTS_PROFILE's (a report says so)

    def peak_of(self, precision: str) -> float:
        """The dense peak rate for precision's matrix work. A chip without a unit for it (0 in the
        profile: FP8 on an A100) runs such work at its FP32 rate."""
        return self.peak.of(precision) or self.peak.fp32_flops_per_s

    def matrix_precision(self, precision: str) -> str:
        """The precision whose units run precision's products: itself, or FP32 where the chip lacks them."""
        return precision if self.peak.of(precision) else "fp32"

    def replayed_from_graph(self) -> Profile:
        """This profile for kernels replayed from a CUDA graph: no stream floor beyond each kernel's own."""
        return replace(self, chip=replace(self.chip, kernel_floor_s=self.chip.graph_floor_s))


_SECTIONS = {
    "peak": Peak,
    "chip": Chip,
    "matrix": Matrix,
    "memory": Memory,
    "links": Links,
    "host": Host,
    "efficiency": Efficiency,
    "collectives": Collectives,
}
_TOP_LEVEL = ("name", "description", "hardware_names", "architecture", "provenance")
# Sections a profile may leave out: a chip nobody has measured yet has no fitted efficiencies, and a
# profile may leave the host to the bundled server's. DEFAULTS_PROFILE supplies them, and every report
# made with such a profile says which it took (Profile.defaulted).
OPTIONAL_SECTIONS = ("host", "efficiency", "collectives")
DEFAULTS_PROFILE = "_defaults"
# Peaks a chip may lack (0: no such unit); every other rate, size and count must be positive.
OPTIONAL_PEAKS = ("fp64_flops_per_s", "tf32_flops_per_s", "bf16_flops_per_s", "fp16_flops_per_s",
                  "fp8_flops_per_s", "int8_ops_per_s")
# A kind's factor on the GEMM level may pass 1 where the library's algorithm does less work than the
# direct product (cuDNN's Winograd convolutions), never by more than this.
MAX_FACTOR = 4.0
# Kernel classes whose efficiency a profile states, with where it comes from ([provenance]).
KERNEL_CLASSES = ("gemm_fp32", "gemm_tf32", "gemm_16bit", "gemm_8bit", "conv", "attention", "elementwise",
                  "reduction", "norm", "copies", "collectives")


def user_profiles_dir() -> Path:
    """Where profiles of the user's own live (a vendor's chip, this machine's measured `host`):
    $OPENREG_PERF_HOME/profiles, by default ~/.cache/openreg-perf/profiles. A profile there takes
    precedence over the bundled one of the same name."""
    home = os.environ.get("OPENREG_PERF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "openreg-perf")
    return Path(home) / "profiles"


def list_profiles() -> list[str]:
    """Names of the bundled profiles and of the user's own, e.g. "h100-sxm"."""
    folder = resources.files("openreg_perf") / "profiles"
    names = {entry.name[: -len(".toml")] for entry in folder.iterdir()
             if entry.name.endswith(".toml") and not entry.name.startswith("_")}
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
    if not isinstance(name_or_path, str | Path) or not str(name_or_path):
        raise ProfileError(f"a profile is a bundled profile's name (such as 'h100-sxm'), a TOML file's path or a "
                           f"Profile, not {name_or_path!r}")
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
        known = list_profiles()
        close = _likely_meant(str(name_or_path), known)
        hint = f"did you mean {' or '.join(map(repr, close))}? " if close else ""
        raise ProfileError(f"no profile named {name_or_path!r}; {hint}known: {', '.join(known)}")
    return bundled


def _likely_meant(name: str, known: list[str]) -> list[str]:
    """The profiles a mistyped name most likely meant: those it begins ("h100" -> h100-pcie, h100-sxm),
    letters and digits compared without case or separators, else the closest spelling."""
    def plain(text: str) -> str:
        return "".join(character for character in text.lower() if character.isalnum())

    starting = [profile for profile in known if plain(profile).startswith(plain(name))] if plain(name) else []
    return starting[:3] or difflib.get_close_matches(name.lower(), known, n=1, cutoff=0.5)


def bundled_path(name: str) -> Path:
    """The file of the profile bundled under name (whether or not it exists)."""
    return Path(str(resources.files("openreg_perf") / "profiles" / f"{name}.toml"))


def _build(table: dict, path: str) -> Profile:
    _refuse_unknown(table, set(_TOP_LEVEL) | set(_SECTIONS), "", path)
    missing = _missing(table)
    if len(missing) > 1:  # all at once: a profile written from a datasheet misses several at first
        raise ProfileError(f"{path}: {len(missing)} required fields and sections are missing: {', '.join(missing)}")
    for key in ("name", "description"):
        if not isinstance(table.get(key), str):
            raise ProfileError(f"{path}: field {key!r} is missing or not a string")
    architecture = table.get("architecture", "")
    if not isinstance(architecture, str) or architecture != architecture.lower():
        raise ProfileError(f"{path}: field 'architecture' must be a lower-case name such as \"hopper\", "
                           f"not {reprlib.repr(architecture)}")
    known = architecture_levels()
    close = difflib.get_close_matches(architecture, known, n=1, cutoff=0.85) if architecture not in known else []
    if close:  # a new chip's own architecture is welcome; a misspelt one would lose its levels unseen
        warnings.warn(f"{path}: architecture {architecture!r} is none the fit knows, so the device-independent "
                      f"levels are used: did you mean {close[0]!r}?", stacklevel=3)
    sections, defaulted = {}, []
    for section, record in _SECTIONS.items():
        values = table.get(section)
        if values is None and section in OPTIONAL_SECTIONS:
            sections[section] = defaults(architecture)[section]
            defaulted.append(section)
            continue
        if not isinstance(values, dict):
            raise ProfileError(f"{path}: section [{section}] is missing")
        sections[section] = _build_section(record, values, section, path)
    chip = sections["chip"]
    if chip.sustained_clock_hz > chip.clock_hz:
        raise ProfileError(f"{path}: field 'chip.sustained_clock_hz' ({chip.sustained_clock_hz:g}) must not be above "
                           f"chip.clock_hz ({chip.clock_hz:g}), the boost clock the datasheet's peaks are quoted at")
    provenance = _provenance(table.get("provenance", {}), path)
    if "efficiency" in defaulted:
        provenance = {name: f"{defaults_label(architecture)} default (no fit for this chip)" for name in KERNEL_CLASSES}
    return Profile(name=table["name"], description=table["description"], path=path, provenance=provenance,
                   hardware_names=_hardware_names(table.get("hardware_names", []), path),
                   architecture=architecture,
                   defaulted=tuple(defaulted), **sections)


def _missing(table: dict) -> list[str]:
    """Every required field and section the profile leaves out."""
    missing = [key for key in ("name", "description") if key not in table]
    for section, record in _SECTIONS.items():
        values = table.get(section)
        if values is None and section not in OPTIONAL_SECTIONS:
            missing.append(f"[{section}]")
        elif isinstance(values, dict):
            missing += [f"{section}.{field.name}" for field in fields(record)
                        if field.name not in values and field.default is MISSING]
    return missing


def _hardware_names(values, path: str) -> tuple:
    if not isinstance(values, list) or not all(isinstance(text, str) and text for text in values):
        raise ProfileError(f"{path}: field 'hardware_names' must be a list of names, such as [\"H100 SXM\"]")
    return tuple(values)


@functools.cache
def defaults(architecture: str = "") -> dict:
    """The sections a profile may leave out, from profiles/_defaults.toml: the fit's device-independent
    values for a chip without measurements of its own (its architecture's levels where the fit has
    chips of it: Note [Which parameters a device gets] in fit.py), and the bundled server host."""
    table, levels = _defaults_table(), architecture_levels().get(architecture, {})
    built = {}
    for section in OPTIONAL_SECTIONS:  # an architecture's levels go into the section each belongs to
        names = {f.name for f in fields(_SECTIONS[section])}
        values = {**table[section], **{name: value for name, value in levels.items() if name in names}}
        built[section] = _build_section(_SECTIONS[section], values, section, str(bundled_path(DEFAULTS_PROFILE)))
    return built


@functools.cache
def _defaults_table() -> dict:
    """profiles/_defaults.toml as TOML reads it; never changed once read."""
    with open(bundled_path(DEFAULTS_PROFILE), "rb") as file:
        return tomllib.load(file)


def defaults_label(architecture: str) -> str:
    """Whose levels a profile without [efficiency] of its own takes, as its provenance and reports say."""
    return f"{architecture} chips'" if architecture in architecture_levels() else "device-independent"


def architecture_levels() -> dict[str, dict[str, float]]:
    """Per architecture, the [efficiency] levels a chip of it without a fit of its own takes:
    _defaults.toml's [architecture.<name>] sections, written by tools/bench/perf_model.py --write-profiles."""
    return _defaults_table().get("architecture", {})


@functools.cache
def held_out_errors() -> dict[str, tuple[float, float]]:
    """Per kernel class, the model's mean absolute error and signed bias held out (leave one device
    out, tools/bench/perf_model.py --write-profiles writes them into profiles/_defaults.toml)."""
    table = _defaults_table().get("held_out_error", {})
    return {name: (float(values[0]), float(values[1])) for name, values in table.items()}


def _provenance(values, path: str) -> dict:
    if not isinstance(values, dict):
        raise ProfileError(f"{path}: [provenance] must be a table of kernel class = \"source\"")
    _refuse_unknown(values, set(KERNEL_CLASSES), "provenance.", path)
    for name, text in values.items():
        if not isinstance(text, str) or not text:
            raise ProfileError(f"{path}: field 'provenance.{name}' must say where the figure comes from")
    return dict(values)


def _build_section(record: type, values: dict, section: str, path: str):
    expected = {field.name: field.type for field in fields(record)}
    field_defaults = {field.name: field.default for field in fields(record)}
    _refuse_unknown(values, set(expected), f"{section}.", path)
    checked = {}
    for key, type_name in expected.items():
        where = f"{path}: field '{section}.{key}'"
        if key not in values:
            if field_defaults.get(key, MISSING) is not MISSING:
                continue  # an optional field: the record's default
            raise ProfileError(f"{where} is missing{_newer_field_hint(section, key)}")
        checked[key] = _check_value(values[key], type_name, key, where)
    return record(**checked)


def _newer_field_hint(section: str, key: str) -> str:
    """What a profile written before the field existed (a vendor's, calibrate-host's cached one) can add."""
    default = _defaults_table().get(section, {}).get(key) if section in OPTIONAL_SECTIONS else None
    return "" if default is None else (
        f"; a profile older than the field can take the device-independent {key} = {default:g} "
        f"(profiles/_defaults.toml) or leave [{section}] out (a host profile: run calibrate-host again)")


def _check_value(value, type_name: str, key: str, where: str):
    if type_name == "str":
        if value not in LINK_TOPOLOGIES:
            raise ProfileError(f"{where} must be one of {', '.join(LINK_TOPOLOGIES)}, not {value!r}")
        return value
    if type_name == "bool":
        if not isinstance(value, bool):
            raise ProfileError(f"{where} must be true or false, not {value!r}")
        return value
    if type_name == "tuple":
        return _check_tiles(value, where)
    # bool is an int subclass in Python: refuse it where a number is meant.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ProfileError(f"{where} must be a number, not {value!r}")
    if not math.isfinite(value):
        raise ProfileError(f"{where} must be a finite number, not {value!r}")
    if value < 0:
        raise ProfileError(f"{where} must not be negative ({value})")
    if type_name == "int":
        if value != int(value) or value < 1:
            raise ProfileError(f"{where} must be a whole number of at least 1 ({value})")
        return int(value)
    if key.endswith("_fraction") and not 0 < value <= 1:
        raise ProfileError(f"{where} is a fraction: it must be in (0, 1], not {value}")
    if key.endswith("_factor") and not 0 < value <= MAX_FACTOR:
        raise ProfileError(f"{where} is a factor on a GEMM's level: it must be in (0, {MAX_FACTOR:g}], not {value}")
    if value == 0 and key.endswith(("_per_s", "_hz", "_bytes")) and key not in OPTIONAL_PEAKS \
            and key != "memory_half_bytes":
        raise ProfileError(f"{where} must be greater than 0")
    return float(value)


def _check_tiles(value, where: str) -> tuple:
    tiles = value if isinstance(value, list) else None
    if not tiles or not all(isinstance(tile, list) and len(tile) == 2 and
                            all(isinstance(side, int) and not isinstance(side, bool) and side > 0 for side in tile)
                            for tile in tiles):
        raise ProfileError(f"{where} must be a non-empty list of [rows, columns] tiles of whole numbers, "
                           f"not {value!r}")
    return tuple((rows, columns) for rows, columns in tiles)


def _refuse_unknown(values: dict, known: set[str], prefix: str, path: str) -> None:
    unknown = sorted(set(values) - known)
    if unknown:
        raise ProfileError(f"{path}: unknown field '{prefix}{unknown[0]}' (known: {', '.join(sorted(known))})")
