"""Registration scenario "custom operators" in Python: openreg::softclip and
its gradient through torch.library.custom_op, with fake kernels for
torch.compile and torch.export and an autograd formula.

softclip(x, limit) = limit * tanh(x / limit) bounds x smoothly to
(-limit, limit). Both operators run on openreg only, as stream kernels.
"""

from __future__ import annotations

import torch

from torch_openreg.ops.launch import check_same_device, launch_on_stream

__all__ = ["softclip", "softclip_backward"]


def _check(x: torch.Tensor, limit: float) -> None:
    # On the host, before launching: a failure inside the kernel would only
    # surface later, as a sticky error.
    if not x.is_floating_point():
        raise RuntimeError(f"openreg::softclip expects a floating-point tensor, got {x.dtype}")
    if not limit > 0:
        raise RuntimeError(f"openreg::softclip expects limit > 0, got {limit}")


# LITERALINCLUDE START: PYTHON_CUSTOM_OP
@torch.library.custom_op("openreg::softclip", mutates_args=(), device_types="openreg")
def softclip(x: torch.Tensor, limit: float) -> torch.Tensor:
    _check(x, limit)
    out = torch.empty_like(x)
    launch_on_stream("softclip", [out, x],
                     lambda o, i: torch.mul(torch.tanh(i / limit), limit, out=o))
    return out


@softclip.register_fake
def _(x: torch.Tensor, limit: float) -> torch.Tensor:
    _check(x, limit)
    return torch.empty_like(x)


@torch.library.custom_op("openreg::softclip_backward", mutates_args=(), device_types="openreg")
def softclip_backward(grad: torch.Tensor, x: torch.Tensor, limit: float) -> torch.Tensor:
    check_same_device("openreg::softclip_backward", grad=grad, x=x)
    _check(x, limit)
    out = torch.empty_like(x)
    launch_on_stream("softclip_backward", [out, grad, x],
                     lambda o, g, i: torch.mul(g, 1 - torch.tanh(i / limit) ** 2, out=o))
    return out


@softclip_backward.register_fake
def _(grad: torch.Tensor, x: torch.Tensor, limit: float) -> torch.Tensor:
    return torch.empty_like(x)


def _setup_context(ctx, inputs, output) -> None:
    x, limit = inputs
    ctx.save_for_backward(x)
    ctx.limit = limit


def _backward(ctx, grad: torch.Tensor):
    (x,) = ctx.saved_tensors
    return softclip_backward(grad, x, ctx.limit), None  # no gradient for limit


softclip.register_autograd(_backward, setup_context=_setup_context)
# LITERALINCLUDE END: PYTHON_CUSTOM_OP
