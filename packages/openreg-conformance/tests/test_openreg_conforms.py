"""OpenReg passes the kit: with every layer installed, every group it
registers passes and the report has the keys of PyTorch's out-of-tree
runner; without a layer, the groups that layer registers skip, each with
its reason."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree

import pytest
from kit_runs import ENABLED_BY, OPENREG_OVERRIDES
from openreg_conformance.groups import GROUPS

NOT_HERE = {"pytorch_files": "no PyTorch checkout given"}  # no PyTorch source tree on CI's machines


@pytest.fixture
def missing_groups(installed) -> list[str]:
    """The groups whose layer (or onnxruntime) is not installed here."""
    return [group for group, needed in ENABLED_BY.items() if not installed(needed)]


def test_openreg_passes_every_group_it_registers(kit, tmp_path, missing_groups):
    if missing_groups:
        pytest.skip(f"needs every layer; {', '.join(missing_groups)} cannot run here (CI runs this test in "
                    "its step suite-conformance-with-every-layer)")
    code, report = kit("--overrides", str(OPENREG_OVERRIDES), "--junit", str(tmp_path / "report.xml"),
                       "--markdown", str(tmp_path / "report.md"))
    assert code == 0 and report["passed"], report["failures"]
    for group in GROUPS:
        counts = report["groups"][group.name]
        if group.name in NOT_HERE:
            assert counts["status"] == "skipped" and counts["passed"] == 0, (group.name, counts)
            continue
        assert counts["status"] == "passed" and counts["failed"] == 0 and counts["passed"] > 0, (group.name, counts)
    assert set(report) >= {"shard", "failed", "flaky", "timed_out", "skipped_by_reason"}
    assert report["shard"] == "1/1" and report["failed"] == [] and report["timed_out"] == []
    assert all(skip["reason"] for skip in report["skipped"]), "every skip states its reason"
    reasons = " ".join(report["skipped_by_reason"])
    assert NOT_HERE["pytorch_files"] in reasons
    assert "not comparable with the CPU: random values" in reasons, "the overrides file's reasons are listed"
    assert report["environment"]["device_type"] == "openreg"
    assert any(p.startswith("torch-openreg ") for p in report["environment"]["backend_packages"])
    suites = ElementTree.parse(tmp_path / "report.xml").getroot()
    assert {suite.get("name") for suite in suites} == {g.name for g in GROUPS}
    assert "| device | required | passed |" in (tmp_path / "report.md").read_text()


def test_without_a_layer_its_groups_skip_with_the_reason(kit, missing_groups):
    missing = missing_groups
    if not missing:
        pytest.skip("every layer is installed here; the kit's combination (the core alone) runs this test")
    code, report = kit("--groups", "device", *missing)
    assert code == 0 and report["passed"], report["failures"]
    assert report["groups"]["device"]["status"] == "passed"
    for group in missing:
        assert report["groups"][group]["status"] == "skipped", (group, report["groups"][group])
    reasons = " ".join(report["skipped_by_reason"])
    if "autocast" in missing:
        assert "registers no autocast kernels" in reasons
    if "distributed" in missing:
        assert "no c10d backend is registered for the device" in reasons
