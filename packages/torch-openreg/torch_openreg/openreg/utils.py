"""Argument helpers shared by the torch.openreg submodules."""

from typing import Any

import torch

import torch_openreg._C as _C


def _device_index(device: Any, optional: bool = False, default_current: bool = False) -> int:
    """Index of an openreg device given as int, str or torch.device.

    None (or a device without index) means the current device when
    ``default_current`` is set, else -1 if ``optional``.
    """
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "openreg":
            raise ValueError(f"expected an openreg device, got {device}")
        device = device.index
    if device is None:
        if default_current:
            return _C._current_device()
        if optional:
            return -1
        raise ValueError("expected an openreg device, got None")
    if not isinstance(device, int):
        raise TypeError(f"expected an openreg device index, got {device!r}")
    if device >= _C._device_count() or (device < 0 and not optional):
        # The C++ check's error: a torch.AcceleratorError (a RuntimeError, as
        # CUDA's invalid device ordinal) naming the valid range.
        _C._check_device_index(device)
    return device
