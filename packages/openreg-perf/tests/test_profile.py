"""Profiles: every bundled one loads, the datasheet pitfalls are avoided, and each way a profile file
can be wrong is refused with a ProfileError naming the field and the file."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from openreg_perf.profile import (
    KERNEL_CLASSES,
    PRECISIONS,
    Profile,
    ProfileError,
    architecture_levels,
    defaults,
    list_profiles,
    load_profile,
)

BUNDLED = list_profiles()
# The issue that asked for them: datasheet profiles of GPUs users plan for, fitted or not.
EXPECTED = ["a100-pcie-40gb", "a100-pcie-80gb", "a100-sxm-40gb", "a100-sxm-80gb", "b200", "gaudi2", "gh200",
            "h100-pcie", "h100-sxm", "h200", "h800-sxm", "host", "l4", "mi210", "mi250x", "mi300x", "mi325x",
            "p100-pcie-16gb", "p4", "t4", "v100-pcie-32gb", "v100-sxm2-32gb"]


def test_bundled_profiles_are_listed():
    assert BUNDLED == EXPECTED


@pytest.mark.parametrize("name", BUNDLED)
def test_every_bundled_profile_loads(name):
    profile = load_profile(name)
    assert isinstance(profile, Profile)
    assert profile.name == name
    assert profile.path.endswith(f"{name}.toml")
    assert profile.memory.bandwidth_bytes_per_s > 0
    assert profile.peak.fp32_flops_per_s > 0
    assert all(profile.peak_of(precision) >= 0 for precision in PRECISIONS)


@pytest.mark.parametrize("name", BUNDLED)
def test_every_figure_carries_a_source_or_says_it_is_an_estimate(name):
    """Each value line of the datasheet sections has a comment: its source, or why it is assumed."""
    section = None
    for line in open(load_profile(name).path).read().splitlines():
        header = re.match(r"^\[(\w+)\]", line)
        section = header.group(1) if header else section
        documented = ("peak", "chip", "matrix", "memory", "links", "host")
        if section in documented and "=" in line and not line.startswith("#"):
            assert "#" in line, f"{name}: {line!r} has no source"


def test_dense_figures_not_sparse_ones():
    """The pitfalls of widely copied tables: sparse rates passed off as dense, A100's TF32 as H100's."""
    h100, a100 = load_profile("h100-sxm"), load_profile("a100-sxm-80gb")
    assert h100.peak.bf16_flops_per_s == pytest.approx(989.4e12)
    assert h100.peak.fp16_flops_per_s == pytest.approx(989.4e12)
    assert h100.peak.tf32_flops_per_s == pytest.approx(494.7e12, rel=1e-3)
    assert h100.peak.fp8_flops_per_s == pytest.approx(1978.9e12)
    assert a100.peak.tf32_flops_per_s == pytest.approx(156e12)
    assert a100.peak.bf16_flops_per_s == pytest.approx(312e12)
    assert a100.peak.fp8_flops_per_s == 0  # Ampere has no FP8 unit
    assert load_profile("mi300x").peak.bf16_flops_per_s == pytest.approx(1307.4e12)


def test_a_profile_can_be_loaded_by_path(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(open(load_profile("h100-sxm").path).read().replace('name = "h100-sxm"', 'name = "mine"'))
    assert load_profile(path).name == "mine"
    assert load_profile(str(path)).path == str(path)


# ------------------------------------------------------------------------------------------ refusals

def _variant(tmp_path, old: str, new: str):
    text = open(load_profile("h100-sxm").path).read()
    assert old in text
    path = tmp_path / "variant.toml"
    path.write_text(text.replace(old, new, 1))
    return path


def _refused(path, *fragments):
    with pytest.raises(ProfileError) as error:
        load_profile(path)
    message = str(error.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message
    return message


def test_missing_field_is_refused(tmp_path):
    path = _variant(tmp_path, "bf16_flops_per_s = 989.4e12", "")
    _refused(path, "'peak.bf16_flops_per_s'", "missing")


def test_every_missing_field_and_section_is_told_at_once(tmp_path):
    """A profile written from a datasheet misses several at first: one load names them all."""
    path = tmp_path / "new-chip.toml"
    path.write_text('name = "new-chip"\ndescription = "from its datasheet"\n[chip]\nclock_hz = 1e9\n')
    _refused(path, "8 required fields and sections are missing: [peak], chip.compute_units, chip.sustained_clock_hz, "
                   "chip.l2_bytes, chip.kernel_floor_s, [matrix], [memory], [links]")


def test_a_sustained_clock_above_the_boost_clock_is_refused(tmp_path):
    line = next(line for line in open(load_profile("h100-sxm").path) if line.startswith("sustained_clock_hz"))
    _refused(_variant(tmp_path, line, "sustained_clock_hz = 3e9\n"), "field 'chip.sustained_clock_hz' (3e+09) must not "
             "be above chip.clock_hz")


def test_a_profile_older_than_a_field_is_told_what_to_add(tmp_path):
    """A profile written before a field of [efficiency] existed (a vendor's, or calibrate-host's cached one) is
    refused with the device-independent value to add, which then loads."""
    line = next(line for line in open(load_profile("h100-sxm").path).read().splitlines()
                if line.startswith("norm_row_s"))
    message = _refused(_variant(tmp_path, line + "\n", ""), "'efficiency.norm_row_s' is missing", "calibrate-host")
    suggested = message.split("device-independent ")[1].split(" (profiles")[0]
    default = defaults()["efficiency"].norm_row_s
    assert suggested == f"norm_row_s = {default:g}"
    assert load_profile(_variant(tmp_path, line, suggested)).efficiency.norm_row_s == default
    datasheet_field = _refused(_variant(tmp_path, "bf16_flops_per_s = 989.4e12", ""), "missing")
    assert "calibrate-host" not in datasheet_field  # no default to suggest


def test_an_optional_field_left_out_takes_its_default_and_a_present_one_is_checked(tmp_path):
    line = next(line for line in open(load_profile("h100-sxm").path).read().splitlines()
                if line.startswith("batched_simt_tiles"))
    assert load_profile(_variant(tmp_path, line, "")).matrix.batched_simt_tiles == ()
    _refused(_variant(tmp_path, line, "batched_simt_tiles = []"), "'matrix.batched_simt_tiles'", "[rows, columns]")


def test_missing_section_is_refused(tmp_path):
    path = _variant(tmp_path, "[memory]\n", "[not_memory]\n")
    _refused(path, "unknown field 'not_memory'")
    text = open(load_profile("h100-sxm").path).read()
    path.write_text(text.replace("[memory]", "").replace("capacity_bytes", "# capacity_bytes")
                    .replace("bandwidth_bytes_per_s = 3.35e12", ""))
    _refused(path, "section [memory] is missing")


def test_a_chip_without_fitted_sections_gets_the_defaults_and_says_so(tmp_path):
    """A vendor's new chip has a datasheet but no measurements: its profile leaves out [efficiency],
    [collectives] and [host], gets its architecture's levels (the device-independent values where the
    fit has no chip of that architecture), and says so."""
    text = open(load_profile("h100-sxm").path).read().split("\n[host]")[0]
    for architecture, said in (("hopper", "hopper chips' default"), ("cdna3", "cdna3 chips' default"),
                         ("newcomer", "device-independent default")):
        path = tmp_path / f"new-chip-{architecture}.toml"
        path.write_text(text.replace('name = "h100-sxm"', 'name = "new-chip"').replace('"hopper"', f'"{architecture}"'))
        profile = load_profile(path)
        assert profile.defaulted == ("host", "efficiency", "collectives")
        assert profile.host == load_profile("h100-sxm").host  # the H100's host is the bundled server host
        assert set(profile.provenance) == set(KERNEL_CLASSES)
        assert all(said in text for text in profile.provenance.values())
        levels = architecture_levels().get(architecture, {})
        assert profile.efficiency == replace(defaults()["efficiency"], **{name: value for name, value in levels.items()
                                                                          if hasattr(profile.efficiency, name)})
    # The fit knows CDNA 3's matrix units reach a smaller share of their peak than Hopper's.
    levels = architecture_levels()
    assert levels["cdna3"]["gemm_16bit_fraction"] < levels["hopper"]["gemm_16bit_fraction"]


def test_an_architecture_is_a_lower_case_name(tmp_path):
    path = _variant(tmp_path, 'architecture = "hopper"', 'architecture = "Hopper"')
    _refused(path, "'architecture'", "lower-case")


def test_negative_field_is_refused(tmp_path):
    path = _variant(tmp_path, "bandwidth_bytes_per_s = 3.35e12", "bandwidth_bytes_per_s = -3.35e12")
    _refused(path, "'memory.bandwidth_bytes_per_s'", "negative")


def test_unknown_key_is_refused(tmp_path):
    path = _variant(tmp_path, "[memory]\n", "[memory]\nbandwith_bytes_per_s = 1.0\n")
    _refused(path, "unknown field 'memory.bandwith_bytes_per_s'")


def test_unknown_top_level_key_is_refused(tmp_path):
    path = _variant(tmp_path, 'name = "h100-sxm"', 'name = "h100-sxm"\nmaker = "NVIDIA"')
    _refused(path, "unknown field 'maker'")


def test_non_numeric_field_is_refused(tmp_path):
    path = _variant(tmp_path, "compute_units = 132", 'compute_units = "132"')
    _refused(path, "'chip.compute_units'", "must be a number")


def test_boolean_is_not_a_number(tmp_path):
    path = _variant(tmp_path, "launch_s = 8.2e-6", "launch_s = true")
    _refused(path, "'host.launch_s'", "must be a number")


@pytest.mark.parametrize("old, new, fragments", [
    ("gemm_16bit_fraction = ", "gemm_16bit_fraction = 87.35 #", ("'efficiency.gemm_16bit_fraction'", "(0, 1]")),
    ("conv_forward_factor = ", "conv_forward_factor = 0 #", ("'efficiency.conv_forward_factor'", "(0, 4]")),
    ("bandwidth_bytes_per_s = 3.35e12", "bandwidth_bytes_per_s = 0",
     ("'memory.bandwidth_bytes_per_s'", "greater than 0")),
    ("fp32_flops_per_s = 66.9e12", "fp32_flops_per_s = 0", ("'peak.fp32_flops_per_s'", "greater than 0")),
    ("capacity_bytes = 85899345920", "capacity_bytes = 0", ("'memory.capacity_bytes'", "at least 1")),
    ("host_pinned_bytes_per_s = 64e9", "host_pinned_bytes_per_s = nan", ("'links.host_pinned_bytes_per_s'", "finite")),
    ("clock_hz = 1.83e9", "clock_hz = inf", ("'chip.clock_hz'", "finite")),
    ("max_split_k = 16", "max_split_k = 0", ("'matrix.max_split_k'", "at least 1")),
    ("simt_tiles = [[128, 128],", "simt_tiles = [[128],", ("'matrix.simt_tiles'", "[rows, columns]")),
    ("tensor_tiles = [[256, 128],", "tensor_tiles = [[256, -128],", ("'matrix.tensor_tiles'", "whole numbers")),
    ('hardware_names = ["H100 SXM", "H100 80GB HBM3"]', 'hardware_names = "H100"', ("'hardware_names'", "list")),
])
def test_values_out_of_range_are_refused_when_the_profile_loads(tmp_path, old, new, fragments):
    """Refused at load, naming the file and the field, not after the user's program ran."""
    _refused(_variant(tmp_path, old, new), *fragments)


def test_a_missing_unit_is_zero_and_allowed(tmp_path):
    profile = load_profile(_variant(tmp_path, "fp8_flops_per_s = 1978.9e12", "fp8_flops_per_s = 0"))
    assert profile.peak_of("fp8") == profile.peak.fp32_flops_per_s and profile.matrix_precision("fp8") == "fp32"


def test_a_pcie_only_card_is_a_topology(tmp_path):
    profile = load_profile(_variant(tmp_path, 'device_link_topology = "switch"', 'device_link_topology = "pcie"'))
    assert profile.links.device_link_topology == "pcie"


def test_fractional_count_is_refused(tmp_path):
    path = _variant(tmp_path, "devices_per_node = 8", "devices_per_node = 7.5")
    _refused(path, "'links.devices_per_node'", "whole number")


def test_unknown_topology_is_refused(tmp_path):
    path = _variant(tmp_path, 'device_link_topology = "switch"', 'device_link_topology = "torus"')
    _refused(path, "'links.device_link_topology'", "switch, mesh, pcie")


def test_invalid_toml_is_refused(tmp_path):
    path = _variant(tmp_path, "compute_units = 132", "compute_units = = 132")
    _refused(path, "not valid TOML")


def test_unknown_profile_name_is_refused():
    with pytest.raises(ProfileError, match="no profile named 'tpu-v9'.*h100-sxm"):
        load_profile("tpu-v9")
    with pytest.raises(ProfileError, match="did you mean 'h100-sxm'"):
        load_profile("h100sxm")


def test_profile_error_is_a_value_error():
    assert issubclass(ProfileError, ValueError)


def test_the_host_calibration_writes_a_profile_that_loads(tmp_path):
    """calibrate-host's text (openreg_perf/calibrate.py) in the current format, from figures of the
    kind measure() returns."""
    from openreg_perf.calibrate import host_profile_text

    figures = dict.fromkeys(("fp64_flops_per_s", "fp32_flops_per_s", "vector_flops_per_s", "bf16_flops_per_s",
                             "fp16_flops_per_s", "bandwidth_bytes_per_s", "host_pinned_bytes_per_s",
                             "host_pageable_bytes_per_s"), 1e10)
    figures.update(launch_overhead_s=5e-6, memory_half_bytes=1e5, matrix_half_depth=10.0, matrix_setup_s=1e-6,
                   host_launch_s=6e-6, host_operator_s=1e-6, host_synchronize_s=4e-6, capacity_bytes=1 << 30)
    path = tmp_path / "host.toml"
    path.write_text(host_profile_text(figures))
    profile = load_profile(path)
    assert profile.defaulted == () and profile.host.launch_s == 6e-6 and profile.matrix.simt_tiles == ((64, 64),)
    bundled = load_profile("h100-sxm").host  # Python's time for a call, a module, a step: not measured here
    assert (profile.host.outer_call_s, profile.host.module_call_s, profile.host.optimizer_step_s) == (
        bundled.outer_call_s, bundled.module_call_s, bundled.optimizer_step_s)


def test_a_misspelt_architecture_is_warned_of_and_a_new_one_is_welcome(tmp_path, recwarn):
    """An architecture the fit does not know takes the device-independent levels: a new chip's own
    ("acme", "cdna2") silently, a near miss of a known one ("hoper") with a warning naming it."""
    datasheet = Path(load_profile("h100-sxm").path).read_text().split("\n[host]")[0]
    for architecture in ("acme", "cdna2", "hoper"):
        path = tmp_path / f"chip-{architecture}.toml"
        path.write_text(datasheet.replace('"hopper"', f'"{architecture}"'))
        load_profile(path)
    said = [str(warning.message) for warning in recwarn.list if issubclass(warning.category, UserWarning)]
    assert said == [f"{tmp_path / 'chip-hoper.toml'}: architecture 'hoper' is none the fit knows, so the "
                    "device-independent levels are used: did you mean 'hopper'?"]
    path = tmp_path / "chip-table.toml"
    table = "{" + ", ".join(f"level{i} = {i}" for i in range(40)) + "}"  # as a bad write once left it
    path.write_text(datasheet.replace('architecture = "hopper"', f"architecture = {table}"))
    _refused(path, "field 'architecture' must be a lower-case name")
    with pytest.raises(ProfileError) as refused:
        load_profile(path)
    assert len(str(refused.value)) < 300  # not the whole table
