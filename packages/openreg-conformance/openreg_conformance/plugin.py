"""The kit's pytest plugin: the device under test, capability gates, the
vendor's overrides, and a progress file the runner reads.

pytest loads it in every run (an entry point of the pytest11 group); it
does nothing until a run names a device:

    pytest --conformance-device NAME [--conformance-overrides FILE] ...

A vendor's own tests then get the same fixture (``conformance_device``, a
torch.device of index 0) and the same marker
(``@pytest.mark.conformance_capability("autocast")``: skipped, with the
reason capabilities.py gives, when the backend does not register the
feature) as the kit's suite. torch is imported only once a device is named.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

_state: dict = {"device": None, "overrides": None, "progress": None, "pytorch_tests": None, "reasons": {},
                "file": None}  # file: the suite file whose tests are running


def pytest_addoption(parser):
    group = parser.getgroup("openreg-conformance")
    group.addoption("--conformance-device", default=None, help="the device type under test (openreg, cuda, ...)")
    group.addoption("--conformance-import", action="append", default=[],
                    help="a module to import before the tests (a backend torch does not load by itself)")
    group.addoption("--conformance-overrides", default=None,
                    help="the vendor's overrides: a Python file (EXCLUDED_TESTS, NOT_COMPARABLE; see the guide)")
    group.addoption("--conformance-progress", default=None, help="where to append one JSON line per event (runner)")
    group.addoption("--conformance-pytorch-tests", default=None, help="the test/ folder of a PyTorch checkout")


def pytest_configure(config):
    config.addinivalue_line("markers", "conformance_capability(name): skipped unless the backend registers it")
    device = config.getoption("--conformance-device")
    if device is None:
        return
    for module in config.getoption("--conformance-import"):
        importlib.import_module(module)
    _state["device"] = device
    _state["pytorch_tests"] = config.getoption("--conformance-pytorch-tests")
    overrides = config.getoption("--conformance-overrides")
    _state["overrides"] = load_overrides(overrides) if overrides else None
    progress = config.getoption("--conformance-progress")
    if progress:
        _state["progress"] = open(progress, "a", buffering=1)
        emit({"event": "environment", **environment(device)})


def pytest_unconfigure(config):
    if _state["progress"] is not None:
        _state["progress"].close()
        _state["progress"] = None


def load_overrides(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("conformance_overrides", path)
    if spec is None or spec.loader is None:
        raise pytest.UsageError(f"--conformance-overrides {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def device_type() -> str | None:
    return _state["device"]


def overrides() -> ModuleType | None:
    return _state["overrides"]


def pytorch_tests_dir() -> Path | None:
    return Path(_state["pytorch_tests"]) if _state["pytorch_tests"] else None


def capability_reason(name: str) -> str | None:
    """Why the backend lacks capability `name` (None: it has it), asked once per run."""
    from openreg_conformance.capabilities import CHECKS

    if name not in _state["reasons"]:
        _state["reasons"][name] = CHECKS[name](_state["device"])
    return _state["reasons"][name]


@pytest.fixture
def conformance_device():
    """The device under test, index 0, as torch.device."""
    import torch

    if _state["device"] is None:
        pytest.skip("no device under test: pass --conformance-device NAME")
    return torch.device(_state["device"], 0)


def pytest_runtest_setup(item):
    if _state["device"] is None:
        return
    excluded = (getattr(overrides(), "EXCLUDED_TESTS", None) or {})
    for pattern, reason in excluded.items():
        if pattern in item.nodeid:
            pytest.skip(f"excluded by the vendor's overrides: {reason}")
    for marker in item.iter_markers("conformance_capability"):
        reason = capability_reason(marker.args[0])
        if reason is not None:
            pytest.skip(reason)


# ---------------------------------------------------------- the progress file

def emit(record: dict) -> None:
    if _state["progress"] is not None:
        _state["progress"].write(json.dumps(record) + "\n")


def environment(device: str) -> dict:
    """What the report says about the run: torch, the backend's package, the device."""
    from importlib.metadata import entry_points

    import torch

    from openreg_conformance.capabilities import device_capability

    backends = [f"{point.dist.name} {point.dist.version}" for point in entry_points(group="torch.backends")
                if point.dist is not None]
    module = torch.get_device_module(device) if hasattr(torch, device) else None
    name = module.get_device_name(0) if module is not None and hasattr(module, "get_device_name") else device
    capability, unreported = device_capability(0)
    return {"torch": torch.__version__, "python": sys.version.split()[0], "device_type": device,
            "device_count": torch.accelerator.device_count(), "device_name": str(name),
            "capability": {key: str(value) for key, value in capability.items()} if capability else
                          {"unreported": unreported},
            "backend_packages": backends, "seeded_defect": os.environ.get("TORCH_OPENREG_SEEDED_DEFECT")}


def pytest_runtest_logstart(nodeid, location):
    file = nodeid.split("::", 1)[0]
    if _state["file"] != file:
        _state["file"] = file
        emit({"event": "file", "file": file, "time": time.time()})
    emit({"event": "start", "nodeid": nodeid})


def message_of(report) -> str:
    if report.skipped and isinstance(report.longrepr, tuple):
        return report.longrepr[2].removeprefix("Skipped: ")
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return crash.message
    return str(report.longrepr)[-2000:]


def pytest_runtest_logreport(report):
    # One record per test: its first failure or skip, else its call's pass.
    if report.when == "call" or report.failed or (report.skipped and report.when == "setup"):
        emit({"event": "test", "nodeid": report.nodeid, "phase": report.when,
              "outcome": "failed" if report.failed else report.outcome,
              "message": message_of(report) if not report.passed else "", "duration": report.duration})


def pytest_collectreport(report):
    if report.failed:
        emit({"event": "test", "nodeid": report.nodeid or "<collection>", "phase": "collect", "outcome": "failed",
              "message": str(report.longrepr)[-2000:], "duration": 0.0})
    elif report.skipped:  # a whole file skipped as it was imported (pytest.skip(allow_module_level=True))
        emit({"event": "test", "nodeid": report.nodeid, "phase": "collect", "outcome": "skipped",
              "message": message_of(report), "duration": 0.0})
