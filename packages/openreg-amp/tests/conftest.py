"""Fixtures of the openreg-amp tests.

Every test runs with the CPU fallback set to 'error' (an operator leaving
the device fails the test, so "zero CPU fallbacks" is checked everywhere)
and must return the device memory it took (the repository's
``openreg_device_state``, in the root's conftest.py). ``count_synchronizations``
counts the host's blocking calls through the runtime's tracing.
"""

from __future__ import annotations

import openreg_runtime
import pytest
import torch


@pytest.fixture(autouse=True)
def _no_fallback(openreg_device_state):
    # openreg_device_state (the root's conftest.py): device memory given back.
    previous = torch.openreg.get_fallback_mode()
    torch.openreg.set_fallback_mode("error")
    yield
    torch.openreg.set_fallback_mode(previous)


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
