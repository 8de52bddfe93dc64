"""Needs the profiler: torch.profiler with the device's activity.

The contracts: a profile taken with the device's activity holds the
device's kernels, each with a name and a duration, attributed to the
device, and the operator table reports device time.
"""

from __future__ import annotations

import pytest
import torch
from openreg_conformance.capabilities import profiler_activity

pytestmark = pytest.mark.conformance_capability("profiler")


def profile(device, device_type):
    a = torch.randn(256, 256, device=device)
    torch.accelerator.synchronize()
    activities = [torch.profiler.ProfilerActivity.CPU, profiler_activity(device_type)]
    with torch.profiler.profile(activities=activities) as recording:
        for _ in range(3):
            a = torch.relu(a @ a)
        torch.accelerator.synchronize()
    return recording


def test_the_profile_holds_the_device_kernels(device, device_type):
    recording = profile(device, device_type)
    kind = torch.autograd.DeviceType.CUDA if device_type == "cuda" else torch.autograd.DeviceType.PrivateUse1
    kernels = [e for e in recording.events() if e.device_type == kind]
    assert len(kernels) >= 6, (
        f"contract: a profile with the device's activity holds its kernels (3 matrix products and 3 relus); "
        f"found {len(kernels)} device events")
    assert all(e.name and e.device_time_total >= 0 for e in kernels)
    assert sum(e.device_time_total for e in kernels) > 0, "contract: device kernels have durations"


def test_operators_report_device_time(device, device_type):
    table = profile(device, device_type).key_averages()
    matmuls = [row for row in table if row.key in ("aten::mm", "aten::matmul")]
    assert matmuls and max(row.device_time_total for row in matmuls) > 0, (
        "contract: the operator table attributes device time to the operators that launched the kernels")
