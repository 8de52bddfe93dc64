"""What the kit's own tests share: run_kit runs `python -m
openreg_conformance` as a vendor would, in a process of its own with a
bound, and returns its exit status and its JSON report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

OPENREG_OVERRIDES = Path(__file__).resolve().parents[2] / "torch-openreg" / "tests" / "conformance_overrides.py"
BOUND_S = 900
# What a group needs installed beside OpenReg's core: the layer package that
# registers it, or the third-party one it runs (onnxruntime). In the kit's
# combination (the core alone) these groups skip, with their reasons.
ENABLED_BY = {"autocast": "openreg-amp", "grad_scaler": "openreg-amp", "distributed": "openreg-distributed",
              "onnx": "onnxruntime"}


def run_kit(tmp_path: Path, *args: str, defect: str | None = None) -> tuple[int, dict]:
    report = tmp_path / "report.json"
    environment = {k: v for k, v in os.environ.items() if k != "TORCH_OPENREG_SEEDED_DEFECT"}
    if defect is not None:
        environment["TORCH_OPENREG_SEEDED_DEFECT"] = defect
    run = subprocess.run([sys.executable, "-m", "openreg_conformance", "--device", "openreg", "--report", str(report),
                          "--log", str(tmp_path / "pytest.log"), *args], cwd=tmp_path, env=environment,
                         capture_output=True, text=True, timeout=BOUND_S)
    assert report.exists(), f"the kit wrote no report:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return run.returncode, json.loads(report.read_text())
