"""Registration scenario "add to an existing namespace" in Python: defines
openreg::scaled_add in the namespace the C++ extension owns, with its fake
kernel. Its openreg kernel is registered in python_kernel.py.

scaled_add(x, y, *, alpha=1.0) = x + alpha * y, for floating-point tensors,
broadcasting like torch.add. It has no gradient: a backward through it
raises instead of silently dropping the gradient.
"""

from __future__ import annotations

import torch

__all__ = ["result_meta"]

# LITERALINCLUDE START: PYTHON_FRAGMENT
# "FRAGMENT": the namespace is defined once, by TORCH_LIBRARY(openreg, m) in
# C++; any number of fragments may add to it. Keep the object alive: its
# registrations are undone when it is garbage collected.
_lib = torch.library.Library("openreg", "FRAGMENT")
_lib.define("scaled_add(Tensor x, Tensor y, *, float alpha=1.0) -> Tensor")


def result_meta(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Size, torch.dtype]:
    """The result's shape and dtype, with the checks both kernels make."""
    if not (x.is_floating_point() and y.is_floating_point()):
        raise RuntimeError(f"openreg::scaled_add expects floating-point tensors, got {x.dtype} and {y.dtype}")
    return torch.broadcast_shapes(x.shape, y.shape), torch.result_type(x, y)


@torch.library.register_fake("openreg::scaled_add", lib=_lib)
def _(x: torch.Tensor, y: torch.Tensor, *, alpha: float = 1.0) -> torch.Tensor:
    shape, dtype = result_meta(x, y)
    return x.new_empty(shape, dtype=dtype)


# Without an autograd kernel, PyTorch's fallback would only warn at backward
# and drop the gradient; say so by name instead.
def _no_backward(ctx, grad):
    raise NotImplementedError("openreg::scaled_add has no gradient (openreg does not implement its backward)")


torch.library.register_autograd("openreg::scaled_add", _no_backward, lib=_lib)
# LITERALINCLUDE END: PYTHON_FRAGMENT
