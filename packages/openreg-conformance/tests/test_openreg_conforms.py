"""OpenReg passes the kit: every required group passes, every
capability-gated group runs or is skipped with its reason, and the report
has the keys of PyTorch's out-of-tree runner."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree

from kit_runs import ENABLED_BY, OPENREG_OVERRIDES, installed
from openreg_conformance.groups import GROUPS

NOT_HERE = {"pytorch_files": "no PyTorch checkout given"}  # no PyTorch source tree on CI's machines


def test_openreg_passes_every_group_it_registers(kit, tmp_path):
    code, report = kit("--overrides", str(OPENREG_OVERRIDES), "--junit", str(tmp_path / "report.xml"),
                       "--markdown", str(tmp_path / "report.md"))
    assert code == 0 and report["passed"], report["failures"]
    for group in GROUPS:
        counts = report["groups"][group.name]
        needed = ENABLED_BY.get(group.name)
        if group.name in NOT_HERE or (needed and not installed(needed)):
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
