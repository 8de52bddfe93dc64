"""Python kernels on openreg streams: the Python counterpart of Launch.h.

``launch_on_stream`` queues a Python function as a kernel on the current
openreg stream and hands it CPU views of device tensors; ``check_same_device``
is the device check every kernel makes first. Not a fast path: a Python
kernel holds the GIL while it runs.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence

import openreg_runtime
import torch

import torch_openreg._C

__all__ = ["check_same_device", "launch_on_stream"]


def check_same_device(op: str, **tensors: torch.Tensor) -> None:
    """Unless every tensor is on one device, raises the error that the C++
    check (SameDevice.h) raises. CPU tensors are refused, even 0-dim ones."""
    common = None
    for name, tensor in tensors.items():
        if common is None:
            common = tensor.device
        elif tensor.device != common:
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but got {name} is on {tensor.device}, "
                f"different from other tensors on {common} (when checking argument in method {op})")


# LITERALINCLUDE START: PYTHON_LAUNCH
class _ViewSpec:
    """What the kernel needs to rebuild a view of one device tensor: plain
    values, so the caller's tensors may be freed before the kernel runs (the
    caching allocator reuses their memory only for work queued after it)."""

    def __init__(self, tensor: torch.Tensor) -> None:
        self.address = tensor.data_ptr()
        self.size, self.stride, self.dtype = tensor.shape, tensor.stride(), tensor.dtype
        last = sum((n - 1) * s for n, s in zip(self.size, self.stride, strict=True))
        self.span = 0 if tensor.numel() == 0 else (last + 1) * tensor.element_size()

    def view(self) -> torch.Tensor:
        """A CPU tensor over the device bytes; valid only inside the kernel."""
        if self.span == 0:
            return torch.empty_strided(self.size, self.stride, dtype=self.dtype)
        host = openreg_runtime.kernel_translate_pointer(self.address, self.span)
        raw = torch.frombuffer((ctypes.c_byte * self.span).from_address(host), dtype=torch.uint8)
        return raw.view(self.dtype).as_strided(self.size, self.stride)


def launch_on_stream(name: str, tensors: Sequence[torch.Tensor], fn: Callable[..., None]) -> None:
    """Queues ``fn(*views)`` on the current stream of ``tensors[0]``'s device
    and returns at once. ``fn`` first runs on the host over empty CPU tensors
    of the same dtypes, so that what the CPU code refuses for these dtypes
    raises now (Note [Refusing on the host what the CPU kernel refuses] in
    CheckedLaunch.h). Any later exception in ``fn`` fails the kernel: it is
    raised, naming ``name``, by the next call that synchronises."""
    fn(*(torch.empty(0, dtype=t.dtype) for t in tensors))
    specs = [_ViewSpec(t) for t in tensors]
    stream = torch.openreg.current_stream(tensors[0].device)

    def kernel() -> None:
        views = [spec.view() for spec in specs]
        try:
            fn(*views)
        finally:
            # The host must never reach device memory outside a kernel: a
            # view fn kept (in a global, say) raises from now on.
            torch_openreg._C._revoke_kernel_views(views, name)

    openreg_runtime.launch_kernel(stream.native_handle, kernel, name)
# LITERALINCLUDE END: PYTHON_LAUNCH
