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
    """Device work that takes about `milliseconds` on the device: matrix
    products, calibrated on it, so that it is still running when the host
    looks. The products are large enough that the device's time, not the
    host's launches, bounds them: 1024 x 1024, or 4096 x 4096 on a device
    that does one of the small ones in under a millisecond (a GPU). The
    calibration waits by reading a value back (the one wait every backend
    must get right), never by a synchronize the tests are checking."""

    def __init__(self, device: torch.device, milliseconds: float = 200.0):
        self.device = device
        size = 1024
        if self.seconds_for(size, 1) < 0.001:
            size = 4096
        count, took = 1, 0.0
        while took < 0.02 and count < 1 << 14:
            count *= 2
            took = self.seconds_for(size, count)
        self.size, self.count = size, max(1, int(count * milliseconds / 1000 / took))

    def seconds_for(self, size: int, count: int) -> float:
        self.a = torch.full((size, size), 1.0 / size, device=self.device)
        self.enqueue_products(torch.ones(size, size, device=self.device), 1)[0, 0].item()  # warm, and idle
        start = time.perf_counter()
        self.enqueue_products(torch.ones(size, size, device=self.device), count)[0, 0].item()
        return time.perf_counter() - start

    def enqueue_products(self, x: torch.Tensor, count: int) -> torch.Tensor:
        for _ in range(count):
            x = x @ self.a  # stays all ones: a's rows sum to one
        return x

    def enqueue(self, x: torch.Tensor) -> torch.Tensor:
        """x after the work, queued on the current stream: all-ones x stays all ones (x is size x size)."""
        return self.enqueue_products(x, self.count)

    def ones(self) -> torch.Tensor:
        return torch.ones(self.size, self.size, device=self.device)


@pytest.fixture
def work(device) -> Work:
    return Work(device)


@pytest.fixture(autouse=True)
def _device_settles():
    """Leaves the device synchronized, on device 0, after every test."""
    yield
    torch.accelerator.synchronize()
    torch.accelerator.set_device_index(0)
