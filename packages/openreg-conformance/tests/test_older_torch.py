"""What the kit does where a backend or the installed torch lacks an API the
contracts use, as CUDA on torch 2.11 lacked two (the kit's run on an H200,
tools/bench/measured/conformance/): a missing capability report skips its
contract and is named in the report; an operators group without
set_test_configs runs unconfigured, or skips naming the API when an overrides
file needs it."""

from __future__ import annotations

import os

import pytest
import torch
from kit_runs import OPENREG_OVERRIDES
from openreg_conformance.capabilities import device_capability

# PyTorch's default hook, which torch 2.11's CUDA backend keeps.
UNREPORTED = "Backend doesn't support getting device capabilities."


def test_a_backend_without_a_capability_report_is_told_apart_from_a_broken_one(monkeypatch):
    def unreported(index=None):
        raise RuntimeError(UNREPORTED)

    monkeypatch.setattr(torch.accelerator, "get_device_capability", unreported)
    capability, reason = device_capability(0)
    assert capability is None and UNREPORTED in reason

    def broken(index=None):
        raise RuntimeError("device-side assert triggered")

    monkeypatch.setattr(torch.accelerator, "get_device_capability", broken)
    with pytest.raises(RuntimeError, match="device-side assert"):
        device_capability(0)


# Imported first by the kit's test processes (--import): torch as 2.11 has it.
WITHOUT_SET_TEST_CONFIGS = """
from torch.testing._internal import common_device_type
del common_device_type.DeviceTypeTestBase.set_test_configs
"""


@pytest.mark.parametrize("overrides", [False, True])
def test_the_operators_group_without_set_test_configs(kit, tmp_path, monkeypatch, overrides):
    (tmp_path / "older_torch.py").write_text(WITHOUT_SET_TEST_CONFIGS)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    args = ["--groups", "operators", "--import", "older_torch", "--retries", "0", "-k", "test_compare_cpu_abs_"]
    status, report = kit(*args, *(["--overrides", str(OPENREG_OVERRIDES)] if overrides else []))
    group = report["groups"]["operators"]
    if overrides:  # nothing to apply them with: skipped, naming the API
        assert group["status"] == "skipped", group
        assert any("set_test_configs" in reason for reason in report["skipped_by_reason"]), report
    else:  # nothing to apply: the group runs as it is
        assert status == 0 and group["status"] == "passed" and group["passed"] > 0, group
