"""How openreg_perf.assume applies (Note [Assumed selections] in assumptions.py): a dispatch mode
that, in timing-only mode, replaces a data-dependent selection on an openreg tensor by the stated
number of positions from PyTorch's fixed-size nonzero_static."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.weak import WeakIdKeyDictionary

from .assumptions import ASSUMED, Assumption

# Each mask an assumption sized -> the number of positions assumed for it, while the mask lives.
_DECIDED = WeakIdKeyDictionary()


def _is_mask(index) -> bool:
    return isinstance(index, torch.Tensor) and index.dtype in (torch.bool, torch.uint8)


class AssumedSelections(TorchDispatchMode):
    def __init__(self, fraction: float):
        super().__init__()
        self.fraction = fraction

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        handler = _HANDLERS.get(func)
        on_device = bool(args) and isinstance(args[0], torch.Tensor) and args[0].device.type == "openreg"
        if handler is None or not on_device or not torch.openreg.is_timing_only():
            return func(*args, **kwargs)
        return handler(self, func, *args, **kwargs)

    def positions(self, func, mask: torch.Tensor) -> torch.Tensor:
        """The (selected, mask.dim()) positions a mask is assumed to select, as nonzero gives them. A mask
        selects as many each time it is used: the backward pass of x[mask] selects through it again, and
        takes the size the forward's assumption gave it, whatever fraction its own assume() states."""
        count = _DECIDED.get(mask)
        if count is None:
            count = round(self.fraction * mask.numel())
            ASSUMED.append(Assumption(f"aten::{func.__name__.split('.')[0]}", tuple(mask.shape), count))
            _DECIDED[mask] = count
        return torch.nonzero_static(mask, size=count)

    def indices(self, func, indices: list) -> list:
        """Advanced indices with each mask replaced by the positions it is assumed to select, one
        index per dimension it covers (as PyTorch expands a mask before indexing)."""
        expanded = []
        for index in indices:
            expanded += list(self.positions(func, index).unbind(1)) if _is_mask(index) else [index]
        return expanded

    def nonzero(self, func, input):
        return self.positions(func, input)

    def masked_select(self, func, input, mask):
        shape = torch.broadcast_shapes(input.shape, mask.shape)
        return torch.ops.aten.index.Tensor(input.expand(shape), self.indices(func, [mask.expand(shape)]))

    def index(self, func, input, indices):
        return func(input, self.indices(func, indices))

    def index_put(self, func, input, indices, values, accumulate=False):
        return func(input, self.indices(func, indices), values, accumulate)


_HANDLERS = {
    torch.ops.aten.nonzero.default: AssumedSelections.nonzero,
    torch.ops.aten.masked_select.default: AssumedSelections.masked_select,
    torch.ops.aten.index.Tensor: AssumedSelections.index,
    torch.ops.aten.index_put.default: AssumedSelections.index_put,
    torch.ops.aten.index_put_.default: AssumedSelections.index_put,
}
