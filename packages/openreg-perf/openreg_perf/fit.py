"""Fitting the profiles' [efficiency] and [collectives] parameters to published measurements.

Fits the parameters to the cases of published rows (published.py) by coordinate descent
(deterministic), and predicts held-out devices. Not the cases (published.py), the model (model.py) or a
report: tools/bench/perf_model.py prints the tables.

Note [Which parameters a device gets]
  Levels (LEVEL_PARAMETERS: the fractions and factors of each kernel class, and the fixed cost of an
  FP32 library kernel, which is a generation's: the H200's small FP32 products timed with the host
  ahead want about 3 us, NeuSight's Pascal, Turing and Volta rows 20) are fitted per device, to that
  device's own rows. Shapes (half depth, the matrix units' setup, tile overhead, memory half bytes, rows
  per unit, a norm's time per row, step latencies, the low-latency protocol, in-switch reduction) are one
  device-independent value fitted to all rows. A device without rows of a class gets the median of the
  per-device levels of the chips of its architecture where the fit has some (one generation runs the same
  library kernels on the same units: CDNA 3's matrix units reach a smaller share of their datasheet peak
  than Hopper's, MI300X 44 % and MI325X 53 % against 75-80 %), drawn towards the median of every device
  (_shrunk), else of every device, one vote per device: the architecture's and the device-independent fit
  (profiles/_defaults.toml). A parameter no row informs (its rows move less than 1 % when it grows by
  half) keeps its starting value. Leave-one-device-out drops every row of a device, fits, and predicts
  that device's rows, which then can only use its architecture's and the device-independent values. The
  harness costs describe the measurements, not a device: fitted with the rest, never written into a
  profile. A chip held by its power limit does not fit its own convolution factor (TIED_LEVELS): it
  takes what a chip without rows of its architecture would, and its convolution rows fit the
  device-independent conv_clock_gain instead (model.py's Note [Sustained clock]), which a factor of its
  own would otherwise absorb.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .profile import Profile
from .published import Case, device_profile, with_parameters

HARNESS_PARAMETERS = ("eager_call_s", "eager_matmul_call_s", "compiled_call_s", "best_shape_gain",
                      "neusight_vector_share", "neusight_rows_share", "neusight_matrix_share")
LEVEL_PARAMETERS = ("gemm_fp32_fraction", "gemm_tf32_fraction", "gemm_16bit_fraction", "gemm_8bit_fraction",
                    "conv_forward_factor", "conv_winograd_factor", "conv_matrix_forward_factor", "conv_tf32_factor",
                    "conv_weight_grad_factor", "conv_weight_grad_winograd_factor", "attention_forward_factor",
                    "attention_backward_factor", "vector_fraction",
                    "elementwise_memory_fraction", "reduction_memory_fraction", "norm_memory_fraction",
                    "softmax_memory_fraction", "optimizer_memory_fraction", "copy_fraction", "simple_fraction",
                    "matrix_setup_s")
# A power-limited chip does not fit these: it takes others' and fits conv_clock_gain.
TIED_LEVELS = ("conv_forward_factor", "conv_winograd_factor")


@dataclass(frozen=True)
class Fit:
    shared: dict[str, float]  # device-independent values (levels: median over devices)
    per_device: dict[str, dict[str, float]]  # fitted levels of devices that have rows
    per_architecture: dict[str, dict[str, float]]  # levels: median over the devices of each architecture

    def parameters(self, device: str) -> dict[str, float]:
        """A device's values: its own levels where its rows fitted them, else its architecture's."""
        return {**self.unseen(device_profile(device).architecture), **self.per_device.get(device, {})}

    def unseen(self, architecture: str) -> dict[str, float]:
        """The values for a chip of an architecture that no row informs."""
        return {**self.shared, **self.per_architecture.get(architecture, {})}


# ---------------------------------------------------------------------------------------- fitting

# Starting value and bounds of every parameter (the fit searches between the bounds on a log scale).
PARAMETERS = {
    "gemm_fp32_fraction": (0.8, 0.05, 1.0),
    "gemm_tf32_fraction": (0.7, 0.05, 1.0),
    "gemm_16bit_fraction": (0.8, 0.05, 1.0),
    "gemm_8bit_fraction": (0.7, 0.05, 1.0),
    "conv_forward_factor": (0.8, 0.05, 4.0),
    "conv_winograd_factor": (1.5, 0.05, 4.0),  # above 1: Winograd multiplies less than the direct product
    "conv_matrix_forward_factor": (0.8, 0.05, 4.0),
    "conv_tf32_factor": (1.0, 0.05, 4.0),
    "conv_weight_grad_factor": (0.6, 0.05, 4.0),
    "conv_weight_grad_winograd_factor": (1.0, 0.05, 8.0),  # above 1: Winograd multiplies less
    "conv_clock_gain": (1.0, 1.0, 3.0),  # 1: a power-limited chip's convolutions clock as its SGEMMs
    "conv_unaligned_fraction": (0.15, 0.01, 1.0),
    "attention_forward_factor": (0.6, 0.05, 4.0),
    "attention_backward_factor": (0.5, 0.05, 4.0),
    "softmax_element_cycles": (0.3, 0.001, 10.0),
    "matrix_half_depth": (32.0, 1.0, 1e4),
    "matrix_unit_half_depth": (32.0, 1.0, 1e4),
    "matrix_setup_s": (5e-6, 1e-8, 2e-5),  # a library kernel's fixed cost is microseconds, not a launch's
    "matrix_unit_setup_s": (3e-6, 1e-8, 5e-6),  # bounded: only the H100 rows separate it from a harness cost
    "matrix_tile_overhead": (8.0, 0.01, 1e3),
    "vector_fraction": (0.8, 0.05, 1.0),
    "elementwise_memory_fraction": (0.8, 0.05, 1.0),
    "reduction_memory_fraction": (0.8, 0.05, 1.0),
    "norm_memory_fraction": (0.8, 0.05, 1.0),
    "softmax_memory_fraction": (0.8, 0.05, 1.0),
    "optimizer_memory_fraction": (0.8, 0.05, 1.0),
    "memory_half_bytes": (1e6, 1.0, 1e9),
    "row_half_rows_per_unit": (4.0, 0.01, 1e3),
    "norm_row_s": (1e-7, 1e-10, 1e-5),
    "reduction_fixed_s": (2e-6, 1e-8, 2e-5),
    "reduction_global_s": (3e-6, 1e-8, 2e-5),
    "norm_unit_bytes_per_s": (4e10, 1e9, 1e12),
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
    "best_shape_gain": (1.05, 1.0, 1.5),
    "neusight_vector_share": (0.5, 0.01, 1.5),  # Note [NeuSight's rig] in published.py
    "neusight_rows_share": (0.5, 0.01, 1.5),
    "neusight_matrix_share": (0.5, 0.01, 1.5),
}
SWEEPS = 5
ARCHITECTURE_PRIOR = 1.0  # how many devices every device's median weighs against an architecture's own
GOLDEN_STEPS = 16


def predicted_seconds(case: Case, parameters: dict[str, float], profile: Profile | None = None) -> float:
    """The published figure as the model predicts it: the harness's fixed cost plus the device time,
    and never under the rig's time per iteration (a loop of kernels shorter than the host's launches
    runs at the host's pace)."""
    profile = profile or with_parameters(device_profile(case.device), parameters)
    if case.harness == "best_shape":  # the fastest of a shape search: luckier than a typical shape
        return case.predict(profile) / parameters["best_shape_gain"]
    harness = parameters[f"{case.harness}_call_s"] if case.harness else 0.0
    if case.rig_share:  # Note [NeuSight's rig] in published.py
        harness += parameters[case.rig_share] * case.floor_seconds
    return max(case.floor_seconds, harness + case.predict(profile))


def fit(cases: list[Case]) -> Fit:
    """Least absolute log(predicted / published) (the error the tables report, and robust to a row the
    model cannot express) by coordinate descent: one parameter at a time, a
    golden-section search on a log scale, over the rows it affects; deterministic. Host-bound rows
    (class "launch" from NeuSight) measure the host, and are not fitted."""
    cases = [case for case in cases if case.fitted]
    devices = sorted({case.device for case in cases})
    keys = [(name, None) for name in PARAMETERS if name not in LEVEL_PARAMETERS]
    keys += [(name, device) for name in LEVEL_PARAMETERS for device in devices if _fits_own(name, device)]
    values = {key: PARAMETERS[key[0]][0] for key in keys}
    everything = list(range(len(cases)))
    at_start = _predictions(cases, values, everything)
    affected = {key: _affected_rows(cases, values, key, at_start) for key in keys}
    keys = [key for key in keys if affected[key]]
    for _ in range(SWEEPS):
        before = _loss(cases, values, everything)
        for key in keys:
            values[key] = _golden_search(cases, values, key, affected[key])
        if before - _loss(cases, values, everything) < 1e-3 * before:
            break
    return _as_fit({key: values[key] for key in keys})


def _fits_own(name: str, device: str) -> bool:
    return name not in TIED_LEVELS or device_profile(device).chip.sustained_fraction >= 1


def _parameters(values: dict, device: str) -> dict[str, float]:
    shared = {name: value for (name, owner), value in values.items() if owner is None}
    own = {name: value for (name, owner), value in values.items() if owner == device}
    tied = {}
    for name in TIED_LEVELS:
        if not _fits_own(name, device):  # what a chip of its architecture without rows takes
            fitted_on = {owner: value for (level, owner), value in values.items() if level == name and owner}
            tied[name] = _unseen_level(fitted_on, device_profile(device).architecture) if fitted_on \
                else PARAMETERS[name][0]
    return {**shared, **tied, **own}


def _affected_rows(cases, values, key, predicted: list[float]) -> list[int]:
    """Rows that inform a parameter: their prediction (predicted, at values) moves by more than 1 % when
    it grows by half. A parameter no row informs keeps its starting value instead of drifting on
    rounding noise."""
    name, owner = key
    candidates = [index for index, case in enumerate(cases) if owner is None or case.device == owner]
    after = _predictions(cases, {**values, key: values[key] * 1.5}, candidates)
    return [index for index, new in zip(candidates, after, strict=True) if abs(new / predicted[index] - 1) > 0.01]


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
    return sum(abs(math.log(predicted / cases[index].published_seconds))
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
    per_architecture: dict[str, dict[str, float]] = {}
    for name in LEVEL_PARAMETERS:
        fitted_on = {device: own[name] for device, own in per_device.items() if name in own}
        if fitted_on:
            shared[name] = _median(fitted_on.values())
        for architecture in {device_profile(device).architecture for device in fitted_on} - {""}:
            per_architecture.setdefault(architecture, {})[name] = _unseen_level(fitted_on, architecture)
    return Fit(shared, per_device, per_architecture)


def _unseen_level(fitted_on: dict[str, float], architecture: str) -> float:
    """A level for a chip of architecture without a fit of its own, from the devices' fits (fitted_on):
    its fitted siblings' median drawn towards every device's (_shrunk), or every device's."""
    everyone = _median(fitted_on.values())
    siblings = [value for device, value in fitted_on.items() if device_profile(device).architecture == architecture]
    return _shrunk(siblings, everyone) if siblings and architecture else everyone


def _shrunk(siblings: list[float], everyone: float) -> float:
    """An architecture's level for a chip of it without rows: the median of its fitted siblings, drawn
    towards every device's median as far as one device would pull it (on a log scale: n siblings
    weigh n, every device's median ARCHITECTURE_PRIOR). One sibling is a sample of one: the P4 and
    the P100 are both Pascal, and a 75 W card and a 250 W one. Held out, a prior of 0.5, 1, 2 or 3
    devices gives 17.5, 17.6, 17.9 or 18.0 % overall (tools/bench/perf_model.py, 2026-11-30): one
    sibling and every device weigh alike."""
    weight = len(siblings) / (len(siblings) + ARCHITECTURE_PRIOR)
    return math.exp(weight * math.log(_median(siblings)) + (1 - weight) * math.log(everyone))


def _median(values) -> float:
    """The median on a log scale (of two middle values, their geometric mean)."""
    values = sorted(values)
    middle = values[(len(values) - 1) // 2: len(values) // 2 + 1]
    return math.exp(sum(map(math.log, middle)) / len(middle))


# ----------------------------------------------------------------------------------------- evaluate

@dataclass(frozen=True)
class Evaluated:
    case: Case
    predicted_seconds: float  # by the fit without this row's device (held out)
    in_sample_seconds: float  # by the fit on every row
    roofline_seconds: float
    held_out_fit: Fit  # the fit without this row's device, which predicted it

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
        held_out = held_out_fits[case.device]
        results.append(Evaluated(case, predicted_seconds(case, held_out.unseen(profile.architecture)),
                                 predicted_seconds(case, full.parameters(case.device)), case.roofline(profile),
                                 held_out))
    return full, results


def profile_parameters(full: Fit, profile_name: str) -> dict[str, float]:
    """The [efficiency] and [collectives] values a profile should carry (its own fitted levels where
    it has rows, the device-independent values otherwise), without the harness costs."""
    values = full.parameters(profile_name) if profile_name else full.shared
    return {name: value for name, value in values.items() if name not in HARNESS_PARAMETERS}


# The parameter that carries each provenance class's level, and the error class of the rows that fit it.
_PROVENANCE = {"gemm_fp32": ("gemm_fp32_fraction", "gemm_fp32"), "gemm_tf32": ("gemm_tf32_fraction", "gemm_tensor"),
               "gemm_16bit": ("gemm_16bit_fraction", "gemm_tensor"),
               "reduction": ("reduction_memory_fraction", "elementwise"),
               "gemm_8bit": ("gemm_8bit_fraction", "gemm_tensor"), "conv": ("conv_forward_factor", "conv"),
               "attention": ("attention_forward_factor", "attention"),
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
        architecture = device_profile(device).architecture
        siblings = [other for other in fitted_by if device_profile(other).architecture == architecture] \
            if architecture else []
        if parameter in full.per_device.get(device, {}):
            said[name] = f"fitted: {len(own)} published {error_class} rows of this chip (fit.py)"
        elif own and not _fits_own(parameter, device):
            said[name] = (f"its {len(own)} published {error_class} rows fit conv_clock_gain, power-limited chips' "
                          f"clock in convolutions; its factor is an unseen {architecture} chip's (fit.TIED_LEVELS)")
        elif siblings:
            said[name] = (f"{architecture} chips': the median of the fits on {', '.join(siblings)}, drawn towards "
                          "every device's")
        elif fitted_by:
            said[name] = f"device-independent: the median of the fits on {', '.join(fitted_by)}"
        else:
            said[name] = "assumed: the starting value; no calibration row informs it"
    return said
