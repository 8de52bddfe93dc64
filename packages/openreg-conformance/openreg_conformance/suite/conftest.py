"""The suite's fixtures: the device under test and what its contracts share.

Every test gets `device` (index 0 of the device type under test) and ends
with the device synchronized and device 0 current.
"""

from __future__ import annotations

import time

import pytest
import torch


@pytest.fixture
def device(conformance_device):
    return conformance_device


@pytest.fixture
def device_type(conformance_device) -> str:
    return conformance_device.type


def needs_api(owner, name: str) -> None:
    """Skips a test whose contract needs an API the installed torch lacks, naming both."""
    if not hasattr(owner, name):
        pytest.skip(f"needs {getattr(owner, '__name__', owner)}.{name}, which torch {torch.__version__} lacks")


class Work:
    """Device work that takes about `milliseconds` on the device, calibrated
    on it: matrix products, doubled until they take long enough to measure.
    Enough to be still running when the host looks, on any device. The
    calibration waits by reading a value back (the one wait every backend
    must get right), never by a synchronize the tests are checking."""

    def __init__(self, device: torch.device, milliseconds: float = 300.0):
        self.device = device
        self.a = torch.full((1024, 1024), 1.0 / 1024, device=device)
        self.enqueue_products(torch.ones(1024, 1024, device=device), 1)[0, 0].item()  # warm up
        count, took = 1, 0.0
        while took < 0.02 and count < 1 << 14:
            count *= 2
            start = time.perf_counter()
            self.enqueue_products(torch.ones(1024, 1024, device=device), count)[0, 0].item()
            took = time.perf_counter() - start
        self.count = max(1, int(count * milliseconds / 1000 / took))

    def enqueue_products(self, x: torch.Tensor, count: int) -> torch.Tensor:
        for _ in range(count):
            x = x @ self.a  # stays all ones: a's rows sum to one
        return x

    def enqueue(self, x: torch.Tensor) -> torch.Tensor:
        """x after the work, queued on the current stream: all-ones x stays all ones."""
        return self.enqueue_products(x, self.count)


@pytest.fixture
def work(device) -> Work:
    return Work(device)


@pytest.fixture(autouse=True)
def _device_settles():
    """Leaves the device synchronized, on device 0, after every test."""
    yield
    torch.accelerator.synchronize()
    torch.accelerator.set_device_index(0)
