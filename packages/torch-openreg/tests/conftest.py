"""Shared fixtures and helpers for the torch-openreg tests.

Every test runs under two autouse fixtures:

* ``_quiet_fallback`` puts the CPU fallback in 'silent' mode (the fallback
  tests set the mode they test themselves) and restores the previous mode;
* ``_clean_device_state``: the repository's ``openreg_device_state`` (the
  root's conftest.py): the test starts on openreg:0 with the default streams
  current and must give back the device memory it took.

Blocking a stream deterministically (never by timing) is done with ``Gate``:
a kernel, launched through openreg_runtime onto a torch stream, that waits
until the test opens it. The ``gate`` fixture opens every gate at teardown,
so a failing test cannot hang the suite.

Anything that needs a fresh interpreter or environment variables runs in a
subprocess through the root conftest's ``python`` fixture (always with a
timeout, never from inside the package's source directory).
"""

from __future__ import annotations

import threading

import openreg_runtime
import pytest
import torch

DEVICES = (0, 1)
# A gate waits at most this long; a test that forgets to open it then fails
# (timed_out is set) instead of hanging.
GATE_TIMEOUT_S = 15.0


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


@pytest.fixture(autouse=True)
def _clean_device_state(openreg_device_state):
    yield


# ------------------------------------------------------------- subprocesses


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
def fresh_facts(python):
    return python.json(_FRESH_FACTS)


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
