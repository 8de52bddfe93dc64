"""Test-only: breaks one contract of the integration on purpose, named by
the environment variable TORCH_OPENREG_SEEDED_DEFECT, so that the
conformance kit's negative controls can show the kit catches it
(packages/openreg-conformance/tests/test_negative_controls.py). Never set
otherwise; a vendor leaves this file out with csrc/python/SeededDefects.cpp,
which holds the defects of the C++ pieces.
"""

from __future__ import annotations

import torch

# LITERALINCLUDE START: SEEDED_DEFECTS
# name -> the contract it breaks
DEFECTS = {
    "current-device-stuck-at-zero": "the guard reports device 0 as current after a switch",
    "exchange-device-returns-the-new-device": "the guard's exchange returns the new device, so nothing restores",
    "elapsed-time-in-seconds": "Event.elapsed_time in seconds instead of milliseconds",
    "synchronize-returns-early": "synchronize() returns before the queued work is done",
    "stream-synchronize-returns-early": "Stream.synchronize() returns before the stream's work is done",
    "event-synchronize-returns-early": "Event.synchronize() returns before the recorded work is done",
    "stream-wait-ignored": "Stream.wait_event does not order the stream after the event",
    "query-always-true": "Event.query() and Stream.query() say done while work runs",
    "allocator-stats-ignore-frees": "the allocator's statistics are not updated on free",
    "empty-cache-keeps-memory": "empty_cache() gives nothing back",
    "backend-metadata-drops-a-field": "restoring the backend's tensor metadata (torch.load) loses a field",
    "profiler-drops-device-events": "the profiler loses the device's kernels",
    "rng-state-not-restored": "set_rng_state() leaves the generator's state unchanged",
    "autocast-mm-in-float32": "autocast runs mm in float32",
    "float16-abs-keeps-the-sign": "abs of a float16 tensor returns it unchanged (float32 is right)",
    "tanh-gradient-negated": "tanh's backward returns the gradient with its sign flipped (its forward is right)",
    "allreduce-drops-a-rank": "all_reduce leaves out the last rank's contribution (openreg-distributed)",
}
# LITERALINCLUDE END: SEEDED_DEFECTS

_kept = []  # registrations that must outlive apply()


def apply(name: str) -> None:
    if name not in DEFECTS:
        raise ValueError(f"TORCH_OPENREG_SEEDED_DEFECT={name!r} is not a seeded defect; they are {sorted(DEFECTS)}")
    from torch_openreg import _C

    if _C._testing.seed_defect(name):
        return
    if name == "rng-state-not-restored":
        torch.openreg.set_rng_state = lambda new_state, device="openreg": None
    elif name in _KERNELS:  # a wrong kernel registered over the right one
        operator, kernel, key = _KERNELS[name]
        library = torch.library.Library("aten", "IMPL")
        library.impl(operator, kernel, key)
        _kept.append(library)
    # allreduce-drops-a-rank lives in openreg-distributed, which reads the variable itself.


def _abs_keeping_float16_signs(x):
    return (x.cpu() if x.dtype == torch.float16 else torch.abs(x.cpu())).to(x.device)


def _tanh_backward_negated(grad_output, output):
    return (-torch.ops.aten.tanh_backward(grad_output.cpu(), output.cpu())).to(grad_output.device)


_KERNELS = {
    "autocast-mm-in-float32": ("mm", torch.library.fallthrough_kernel, "AutocastPrivateUse1"),
    "float16-abs-keeps-the-sign": ("abs", _abs_keeping_float16_signs, "PrivateUse1"),
    "tanh-gradient-negated": ("tanh_backward", _tanh_backward_negated, "PrivateUse1"),
}
