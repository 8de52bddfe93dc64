"""tools/ci.py's scheduler (Note [CI's scheduler]): CI's steps start longest first, by the times
last measured, a step never measured before the rest."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("openreg_ci", ROOT / "tools" / "ci.py")
ci = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ci)


def test_steps_start_longest_first_by_the_last_measured_times(tmp_path, monkeypatch):
    committed, measured = tmp_path / "committed.json", tmp_path / "measured.json"
    committed.write_text(json.dumps({name: 10.0 for name in ci.CI_STEPS}))
    measured.write_text(json.dumps({"docs": 5.0, "sanitize": 300.0}))
    monkeypatch.setattr(ci, "COMMITTED_TIMES", committed)
    monkeypatch.setattr(ci, "MEASURED_TIMES", measured)
    order = ci.schedule()
    assert order[0] == "sanitize" and order[-1] == "docs"  # this machine's times win over the committed
    assert sorted(order) == sorted(ci.CI_STEPS)


def test_a_step_never_measured_starts_first(tmp_path, monkeypatch):
    committed = tmp_path / "committed.json"
    committed.write_text(json.dumps({name: 10.0 for name in ci.CI_STEPS if name != "plain-path"}))
    monkeypatch.setattr(ci, "COMMITTED_TIMES", committed)
    monkeypatch.setattr(ci, "MEASURED_TIMES", tmp_path / "absent.json")
    assert ci.schedule()[0] == "plain-path"


def test_the_committed_times_name_every_step():
    assert set(json.loads(ci.COMMITTED_TIMES.read_text())) == set(ci.CI_STEPS)


def test_an_environment_is_seeded_from_venv_by_links_and_pip_finds_it_complete(tmp_path):
    """Note [Environments seeded from .venv]: the lint group's pin (ruff), linked from .venv, file for
    file, is installed as far as pip can tell: it has nothing left to install."""
    if not ci.PYTHON.exists():
        pytest.skip("needs .venv (python3.11 tools/dev.py setup)")
    environment = tmp_path / "env"
    ci.run(sys.executable, "-m", "venv", environment)
    ci.seed_from_venv(environment, ("lint",))
    (dist_info,) = ci.site_packages(environment).glob("ruff-*.dist-info")
    linked_from = ci.site_packages(ci.VENV) / dist_info.name / "RECORD"
    assert (dist_info / "RECORD").stat().st_ino == linked_from.stat().st_ino
    pip = [environment / "bin" / "python", "-m", "pip", "install", "--no-index", *ci.pins(("lint",))]
    checked = subprocess.run(pip, capture_output=True, text=True)
    assert checked.returncode == 0 and "Requirement already satisfied" in checked.stdout, checked.stderr


def test_a_step_started_beside_the_builds_is_reported_and_its_failure_fails_the_run(tmp_path, monkeypatch, capsys):
    """Note [Steps beside the builds]: the workers leave it alone, and its result counts like a worker's."""
    monkeypatch.setattr(ci, "BUILD_LOGS", tmp_path)
    monkeypatch.setattr(ci, "MEASURED_TIMES", tmp_path / "times.json")
    started = []
    monkeypatch.setattr(ci, "schedule", lambda: [step.name for step in started])  # nothing else to run
    started.append(ci.StepProcess("no-such-step", []))  # tools/ci.py refuses it: status 1
    with pytest.raises(SystemExit) as ended:
        ci.run_steps([], workers=1, beside=started)
    assert ended.value.code == 1
    output = capsys.readouterr().out
    assert "===== no-such-step: FAILED in " in output and "steps: " in output  # its log, printed whole
    assert "beside the builds: no-such-step " in output
    assert not (tmp_path / "times.json").exists(), "a failed run's times are not kept"
