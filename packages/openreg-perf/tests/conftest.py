"""Test setup for openreg-perf: import the package from this source tree when it is not installed,
and load tools/bench/perf_model.py (the calibration table) by path. The model's tests (costs,
profiles, time model, replay) need no openreg device; test_simulate.py runs programs on openreg.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
REPO_ROOT = PACKAGE_ROOT.parents[1]
if importlib.util.find_spec("openreg_perf") is None:
    sys.path.insert(0, str(PACKAGE_ROOT))


@pytest.fixture(scope="session")
def perf_bench():
    """tools/bench/perf_model.py as a module (not a package anywhere)."""
    path = REPO_ROOT / "tools" / "bench" / "perf_model.py"
    spec = importlib.util.spec_from_file_location("openreg_perf_bench", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The calibration table fits once per held-out device and once on every row: a minute and a half on the
# project's usual 2-core machine, over five minutes beside another CI worker on one 2.5x slower (an AMD
# EPYC, 2026-12-02), past the default bound. The test that first asks for it gets a longer one.
CALIBRATION_TIMEOUT_S = 1200


def pytest_collection_modifyitems(items):
    for item in items:
        if "calibration" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.timeout(CALIBRATION_TIMEOUT_S))


@pytest.fixture(scope="session")
def calibration(perf_bench):
    """The calibration table, computed once (one fit per held-out device, 15 in all, and one on every row)."""
    return perf_bench.calibration_table()


@pytest.fixture
def h100_here(tmp_path) -> Path:
    """The H100's profile with this process's device capacity: predicting without executing needs devices
    of the profile's capacity, and this machine's are smaller."""
    torch = pytest.importorskip("torch")
    import openreg_perf

    path = tmp_path / "h100-this-capacity.toml"
    capacity = torch.openreg.mem_get_info()[1]
    path.write_text(Path(openreg_perf.load_profile("h100-sxm").path).read_text().replace(
        "capacity_bytes = 85899345920", f"capacity_bytes = {capacity}"))
    return path
