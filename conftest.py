"""The repository's pytest plugin: what the packages' test suites share.

pytest loads this file for every test under the repository root (the root's
pyproject.toml makes it pytest's rootdir). It imports nothing at the top
that the lightest combination lacks (openreg-runtime alone, without torch),
and none of its fixtures is autouse: a package's conftest says which of
them every one of its tests runs under.

* ``openreg_device_state``: the test starts on openreg:0 with the default
  streams current; afterwards both devices are waited for, that state is
  restored, and ``memory_allocated`` of each device must be back where it
  was (a test that leaks device memory, or a backend that loses track of a
  free, fails here; a test that already failed is not reported twice).
* ``python``: a fresh interpreter of this environment, bounded:
  ``python.run(code)`` and ``python.json(code)`` (its last printed line).
* ``installed(name)``: whether a distribution is installed here.
* ``@pytest.mark.needs_packages(...)``: a test for a combination of
  packages, skipped where they are not part of the combination under test.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap
import time
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent


# ------------------------------------------------- installed distributions


def is_installed(name: str) -> bool:
    try:
        distribution(name)
    except PackageNotFoundError:
        return False
    return True


@pytest.fixture(scope="session")
def installed():
    return is_installed


def pytest_runtest_setup(item):
    """`needs_packages`: tools/dev.py names the combination's distributions
    in OPENREG_COMBINATION_PACKAGES. A needed package outside it skips the
    test (correct there, never counted as a pass); one inside it but not
    installed fails the test, so in "all" every such test runs. Without the
    variable (a bare pytest), what is installed decides."""
    marker = item.get_closest_marker("needs_packages")
    if marker is None:
        return
    declared = os.environ.get("OPENREG_COMBINATION_PACKAGES")
    combination = set(declared.split(",")) if declared else {n for n in marker.args if is_installed(n)}
    absent = [name for name in marker.args if name not in combination]
    if absent:
        pytest.skip(f"needs {', '.join(absent)}, not part of this combination")
    missing = [name for name in marker.args if not is_installed(name)]
    if missing:
        pytest.fail(f"{', '.join(missing)} belong to this combination but are not installed")


# ------------------------------------------------------ the device's state


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when == "call":
        item.openreg_call_failed = outcome.get_result().failed


def _reset_device_state(torch) -> None:
    for device in range(torch.openreg.device_count()):
        torch.openreg.set_stream(torch.openreg.default_stream(device))
    torch.openreg.set_device(0)


def _allocated(torch) -> dict[int, int]:
    return {d: torch.openreg.memory_allocated(d) for d in range(torch.openreg.device_count())}


def _wait_for_allocated(torch, expected: dict[int, int], seconds: float = 2.0) -> dict[int, int]:
    """The allocated bytes once they equal expected, or after `seconds`.

    A backward pass runs on the autograd engine's thread for the device,
    which drops its last references to the pass's buffers just after
    `backward()` has returned (on CUDA too). So a count that is still off
    right after a test may be that thread finishing, not a leak; a leak is
    still off seconds later."""
    deadline = time.monotonic() + seconds
    while (after := _allocated(torch)) != expected and time.monotonic() < deadline:
        time.sleep(0.001)
    return after


@pytest.fixture
def openreg_device_state(request):
    import torch

    _reset_device_state(torch)
    baseline = _allocated(torch)  # the previous test's teardown collected its garbage
    yield
    for device in range(torch.openreg.device_count()):
        torch.openreg.synchronize(device)
    _reset_device_state(torch)
    after = _allocated(torch)
    if after != baseline:  # gc.collect() is slow: only when reference counting did not suffice
        gc.collect()
        after = _wait_for_allocated(torch, baseline)
    if getattr(request.node, "openreg_call_failed", False):
        return  # the failure's traceback keeps its tensors alive: nothing more to report
    assert after == baseline, f"device memory not returned: before {baseline}, after {after}"


# ------------------------------------------------------------- subprocesses


class Python:
    """A fresh interpreter of this environment, in the repository's root
    (never a package's directory, whose sources would shadow the installed
    package), with a bound."""

    @staticmethod
    def run(code: str | Path, *, env: dict[str, str | None] | None = None, timeout: float = 60,
            cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess:
        """Runs ``code`` (source text, or a script file). ``env`` entries are
        added to (or, with value None, removed from) a copy of this process's
        environment, which never passes TORCH_DEVICE_BACKEND_AUTOLOAD on.
        With ``check`` a non-zero exit fails the test with the child's output."""
        full_env = {k: v for k, v in os.environ.items() if k != "TORCH_DEVICE_BACKEND_AUTOLOAD"}
        for key, value in (env or {}).items():
            if value is None:
                full_env.pop(key, None)
            else:
                full_env[key] = value
        command = [sys.executable, str(code)] if isinstance(code, Path) else \
            [sys.executable, "-c", textwrap.dedent(code)]
        result = subprocess.run(command, env=full_env, cwd=str(cwd or REPO_ROOT), capture_output=True, text=True,
                                timeout=timeout)
        if check:
            assert result.returncode == 0, (
                f"child failed ({result.returncode})\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}")
        return result

    @staticmethod
    def json(code: str | Path, **options):
        """The JSON value the child printed as its last line."""
        result = Python.run(code, **options)
        lines = [line for line in result.stdout.splitlines() if line.strip()]
        assert lines, f"child printed nothing\nstderr:\n{result.stderr}"
        return json.loads(lines[-1])


@pytest.fixture(scope="session")
def python():
    return Python()
