"""Shared fixtures and helpers for the torch-openreg tests.

Every test runs under two autouse fixtures:

* ``_quiet_fallback`` puts the CPU fallback in 'silent' mode (the fallback
  tests set the mode they test themselves) and restores the previous mode;
* ``_clean_device_state`` starts the test on openreg:0 with the default
  streams current and afterwards waits for both devices, restores that
  state, and asserts that ``memory_allocated`` of both devices is back to
  its value at the start of the test, after gc.collect() if needed (a test
  that leaks device memory, or a backend that loses track of a free, fails
  here; a test that already failed is not reported twice).

Blocking a stream deterministically (never by timing) is done with ``Gate``:
a kernel, launched through openreg_runtime onto a torch stream, that waits
until the test opens it. The ``gate`` fixture opens every gate at teardown,
so a failing test cannot hang the suite.

Anything that needs a fresh interpreter or environment variables runs in a
subprocess through ``run_python`` (always with a timeout, never from inside
the package's source directory).
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import openreg_runtime
import pytest
import torch

DEVICES = (0, 1)
# A gate waits at most this long; a test that forgets to open it then fails
# (timed_out is set) instead of hanging.
GATE_TIMEOUT_S = 15.0
# The repository root: subprocesses run here, never inside the package
# directory, whose torch_openreg/ would shadow the installed package.
REPO_ROOT = Path(__file__).resolve().parents[3]


# ------------------------------------------------------------------- gates


class Gate:
    """Kernel body that blocks its stream until ``open()`` is called."""

    def __init__(self) -> None:
        self._open = threading.Event()
        self.started = threading.Event()
        self.finished = threading.Event()
        self.timed_out = False

    def __call__(self) -> None:
        self.started.set()
        if not self._open.wait(GATE_TIMEOUT_S):
            self.timed_out = True  # not an exception: no sticky error for later tests
        self.finished.set()

    def open(self) -> None:
        self._open.set()


@pytest.fixture
def gate():
    """``gate(stream)`` queues a closed Gate on a torch openreg stream and returns it."""
    gates: list[Gate] = []

    def block(stream: torch.Stream) -> Gate:
        g = Gate()
        openreg_runtime.launch_kernel(stream.native_handle, g, "test_gate")
        gates.append(g)
        return g

    yield block
    for g in gates:
        g.open()
    for device in DEVICES:
        torch.openreg.synchronize(device)
    assert not any(g.timed_out for g in gates), "a gate was never opened by its test"


# --------------------------------------------------------- autouse fixtures


@pytest.fixture(autouse=True)
def _quiet_fallback():
    previous = torch.openreg.get_fallback_mode()
    torch.openreg.set_fallback_mode("silent")
    yield
    torch.openreg.set_fallback_mode(previous)


def _reset_device_state() -> None:
    for device in DEVICES:
        torch.openreg.set_stream(torch.openreg.default_stream(device))
    torch.openreg.set_device(0)


def _allocated() -> dict[int, int]:
    return {d: torch.openreg.memory_allocated(d) for d in DEVICES}


def _wait_for_allocated(expected: dict[int, int], seconds: float = 2.0) -> dict[int, int]:
    """The allocated bytes once they equal expected, or after `seconds`.

    A backward pass runs on the autograd engine's thread for the device,
    which drops its last references to the pass's buffers just after
    `backward()` has returned (on CUDA too). So a count that is still off
    right after a test may be that thread finishing, not a leak; a leak is
    still off seconds later.
    """
    deadline = time.monotonic() + seconds
    while (after := _allocated()) != expected and time.monotonic() < deadline:
        time.sleep(0.001)
    return after


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when == "call":
        item.openreg_call_failed = outcome.get_result().failed


@pytest.fixture(autouse=True)
def _clean_device_state(request):
    _reset_device_state()
    baseline = _allocated()  # the previous test's teardown collected its garbage
    yield
    for device in DEVICES:
        torch.openreg.synchronize(device)
    _reset_device_state()
    after = _allocated()
    if after != baseline:  # gc.collect() is slow: only when reference counting did not suffice
        gc.collect()
        after = _wait_for_allocated(baseline)
    if getattr(request.node, "openreg_call_failed", False):
        return  # the failure's traceback keeps its tensors alive: nothing more to report
    assert after == baseline, f"device memory not returned: before {baseline}, after {after}"


# ------------------------------------------------------------- subprocesses


def run_python(code: str | Path, *, env: dict[str, str] | None = None, timeout: float = 60,
               cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Runs ``code`` (source text, or a script file) in a fresh interpreter of
    this venv and returns the result.

    ``env`` entries are added to (or, with value None, removed from) a copy of
    this process's environment. With ``check`` a non-zero exit fails the test
    with the child's output.
    """
    full_env = dict(os.environ)
    full_env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    for key, value in (env or {}).items():
        if value is None:
            full_env.pop(key, None)
        else:
            full_env[key] = value
    command = [sys.executable, str(code)] if isinstance(code, Path) else \
        [sys.executable, "-c", textwrap.dedent(code)]
    result = subprocess.run(command, env=full_env,
                            cwd=str(cwd or REPO_ROOT), capture_output=True, text=True,
                            timeout=timeout)
    if check:
        assert result.returncode == 0, (
            f"child failed ({result.returncode})\n"
            f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}")
    return result


def last_json_line(result: subprocess.CompletedProcess):
    """The JSON object a child printed as its last stdout line."""
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert lines, f"child printed nothing\nstderr:\n{result.stderr}"
    return json.loads(lines[-1])


class _Python:
    """What the ``python`` fixture gives tests: run(code, ...) and json(code, ...)."""

    run = staticmethod(run_python)

    @staticmethod
    def json(code: str | Path, **kwargs):
        return last_json_line(run_python(code, **kwargs))


@pytest.fixture(scope="session")
def python():
    return _Python()


# Facts about a fresh interpreter that only ran `import torch`, gathered
# once for the tests that need them (one subprocess instead of several).
_FRESH_FACTS = """
import json, warnings
# The core alone: layer packages installed beside it (openreg-amp, ...) are
# hidden, so these facts do not depend on which layers the venv holds.
import importlib.metadata as metadata
all_entry_points = metadata.entry_points
metadata.entry_points = lambda **params: (metadata.EntryPoints([])
    if params.get("group") == "torch_openreg.extensions" else all_entry_points(**params))
facts = {}
import torch
facts["has_openreg"] = hasattr(torch, "openreg")
facts["backend_name"] = torch._C._get_privateuse1_backend_name()
facts["initialized_after_import"] = torch.openreg.is_initialized()
facts["device_count"] = torch.openreg.device_count()
facts["available"] = torch.openreg.is_available()
facts["initialized_after_count"] = torch.openreg.is_initialized()
facts["fallback_mode"] = torch.openreg.get_fallback_mode()
facts["extensions"] = torch.openreg.extensions()
x = torch.arange(6, dtype=torch.float32).to("openreg")
facts["tensor_device"] = str(x.device)
facts["roundtrip"] = x.cpu().tolist()
facts["initialized_after_tensor"] = torch.openreg.is_initialized()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    a = torch.randn(4, 4, device="openreg")
    with torch.autocast("openreg"):
        first = a @ a
    with torch.autocast("openreg", dtype=torch.bfloat16):
        second = torch.mm(a, a)
facts["autocast_dtypes"] = [str(first.dtype), str(second.dtype)]
facts["autocast_values_ok"] = bool(torch.allclose(first.cpu(), a.cpu() @ a.cpu()))
facts["autocast_warnings"] = [str(w.message) for w in caught if "cast policy" in str(w.message)]
print(json.dumps(facts))
"""


@pytest.fixture(scope="session")
def fresh_facts():
    return last_json_line(run_python(_FRESH_FACTS))


# ------------------------------------ fixtures of the registration scenarios


@pytest.fixture
def activity_of():
    """``activity_of(fn)`` runs fn with the runtime's tracing on and returns
    (fn's result, names of kernels it launched, other activity kinds)."""

    def record(fn):
        torch.openreg.synchronize()
        openreg_runtime.trace_enable(True)
        openreg_runtime.trace_drain()
        try:
            result = fn()
            activity = openreg_runtime.trace_drain()
        finally:
            openreg_runtime.trace_enable(False)
        kernels = [a["name"] for a in activity if a["kind"] == "launch"]
        others = {a["kind"] for a in activity} - {"launch", "kernel"}
        return result, kernels, others

    yield record
    openreg_runtime.trace_enable(False)
    openreg_runtime.trace_drain()


@pytest.fixture
def on_blocked_stream(gate):
    """``on_blocked_stream(fn)`` calls fn while a gate blocks the current
    stream, checks that fn returned without waiting for the stream, then
    opens the gate and returns fn's result."""

    def run(fn):
        stream = torch.openreg.current_stream()
        blocked = gate(stream)
        result = fn()
        assert not blocked.finished.is_set(), "the call waited for the stream"
        assert not stream.query()
        blocked.open()
        return result

    return run
