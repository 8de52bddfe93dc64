"""tools/opinfo_coverage.py: which OpInfo tests ran on openreg's own kernels
and which took the CPU fallback, read from torch.openreg.fallback_counts()."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def coverage(*args: str, **environment: str) -> str:
    run = subprocess.run([sys.executable, ROOT / "tools" / "opinfo_coverage.py", *args], capture_output=True,
                         text=True, timeout=300, env={**os.environ, **environment})
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return run.stdout


def test_an_operator_on_the_device_executor_is_native():
    out = coverage("-k", "test_compare_cpu_erf_openreg_float32", "--all")
    assert "NATIVE    test_compare_cpu_erf_openreg_float32" in out
    assert "native    1" in out and "fallback  0" in out


def test_an_operator_through_the_cpu_fallback_is_named_with_its_aten_operator():
    # With the device executor off, erf has no kernel of its own on openreg.
    out = coverage("-k", "test_compare_cpu_erf_openreg_float32", OPENREG_DEVICE_EXECUTOR="0")
    assert "FALLBACK  test_compare_cpu_erf_openreg_float32  falls back: aten::erf.out" in out
    assert "fallback  1" in out


def test_a_failure_and_a_skip_are_reported_with_their_reasons():
    out = coverage("-k", "test_compare_cpu_abs_openreg_float16 or test_compare_cpu_bernoulli_openreg_float32",
                   TORCH_OPENREG_SEEDED_DEFECT="float16-abs-keeps-the-sign")
    assert "FAILED    test_compare_cpu_abs_openreg_float16" in out
    assert "SKIPPED   test_compare_cpu_bernoulli_openreg_float32  not comparable with the CPU: random values" in out
