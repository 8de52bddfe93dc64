"""Helpers shared by the registration-scenario tests (loaded by path: the
tests run with --import-mode=importlib)."""

from __future__ import annotations

import contextlib
import warnings

import torch

SAME_DEVICE = "Expected all tensors to be on the same device"

def registered_at(op: str, key: str) -> str:
    """Where the kernel of ``op`` for dispatch key ``key`` was registered."""
    for line in torch._C._dispatch_dump_table(op).splitlines():
        if line.startswith(f"{key}: "):
            return line
    raise AssertionError(f"{op} has no entry for {key}")


@contextlib.contextmanager
def no_warnings():
    """A context in which any warning fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


# Inputs built on the host first: creating them copies, which synchronises.
def inputs(*shape, dtype=torch.float32, device="openreg"):
    torch.manual_seed(0)
    cpu = torch.randn(*shape).to(dtype)
    return cpu, cpu.to(device)


