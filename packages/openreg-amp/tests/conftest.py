"""Fixtures of the openreg-amp tests.

Every test runs with the CPU fallback set to 'error' (an operator leaving
the device fails the test, so "zero CPU fallbacks" is checked everywhere)
and must return the device memory it took. ``count_synchronizations``
counts the host's blocking calls through the runtime's tracing.
"""

from __future__ import annotations

import gc
import time

import openreg_runtime
import pytest
import torch

DEVICES = (0, 1)


def _allocated() -> dict[int, int]:
    return {d: torch.openreg.memory_allocated(d) for d in DEVICES}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when == "call":
        item.amp_call_failed = outcome.get_result().failed


@pytest.fixture(autouse=True)
def _no_fallback_and_no_leak(request):
    previous = torch.openreg.get_fallback_mode()
    torch.openreg.set_fallback_mode("error")
    baseline = _allocated()
    yield
    torch.openreg.set_fallback_mode(previous)
    for device in DEVICES:
        torch.openreg.synchronize(device)
    # The autograd engine's device thread drops a backward pass's buffers
    # just after backward() returns: give it a moment before calling a leak.
    deadline = time.monotonic() + 2.0
    while (after := _allocated()) != baseline and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.001)
    if not getattr(request.node, "amp_call_failed", False):
        assert after == baseline, f"device memory not returned: before {baseline}, after {after}"


@pytest.fixture
def count_synchronizations():
    """``count_synchronizations(fn)`` -> (fn's result, how many times the host
    blocked waiting for the device while fn ran)."""

    def count(fn):
        torch.openreg.synchronize()
        openreg_runtime.trace_enable(True)
        openreg_runtime.trace_drain()
        try:
            result = fn()
            activity = openreg_runtime.trace_drain()
        finally:
            openreg_runtime.trace_enable(False)
        return result, sum(1 for record in activity if record["kind"] == "synchronize")

    yield count
    openreg_runtime.trace_enable(False)
    openreg_runtime.trace_drain()
