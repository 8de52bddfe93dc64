"""print(t) of an openreg tensor in timing-only mode.

Note [Printing a tensor in timing-only mode]
PyTorch's formatter works on the tensor's own device: it picks a number format from
masked_select(t, isfinite(t) & t.ne(0)), whose output size depends on the values. A device in
timing-only mode computes no values, so that size is unknown and the print would stop a training
loop that logs its loss. A lazy device has the same problem, and PyTorch's answer for XLA, lazy,
IPU and MTIA tensors is to format a copy on the host (_str_intern). openreg does that too, but only
in timing-only mode: the copy is a read like any other (Note [Values read in timing-only mode] in
csrc/runtime/TimingOnlyMemory.h), so floating-point values the mode never computed print as nan,
the read is counted, and its warning names the line that printed; an integer tensor's read raises;
values the host knows print exactly. Outside the mode nothing changes: the formatter runs on the
device, as CUDA's does.

A tensor too large for the host ever to know its values (over kLargestKnownValues bytes) is not
copied whole: its summary (the first and last rows print shows) is read, and the rest printed as
the nan it would read as. Not here: the reads themselves (TimingOnlyMemory.cpp).
"""

from __future__ import annotations

import os
import sys
import warnings

import torch
import torch._tensor_str

import torch_openreg._C

_LARGEST_KNOWN_VALUES = 1 << 20  # bytes: kLargestKnownValues in csrc/runtime/TimingOnlyMemory.h
_OWN_FILES = (os.path.dirname(torch.__file__) + os.sep, os.path.dirname(os.path.abspath(__file__)) + os.sep)


def install() -> None:
    """Wraps PyTorch's tensor formatter (torch._tensor_str._str, which Tensor.__repr__ calls)."""
    formatter = torch._tensor_str._str

    def formatted(self, *, tensor_contents=None):
        if tensor_contents is None and _formatted_on_the_host(self):
            tensor_contents = _contents_from_the_host(self)
        return formatter(self, tensor_contents=tensor_contents)

    torch._tensor_str._str = formatted


def _formatted_on_the_host(t: torch.Tensor) -> bool:
    return (t.device.type == "openreg" and t.layout == torch.strided
            and not torch._C._functorch.is_functorch_wrapped_tensor(t) and torch.openreg.is_timing_only())


def _contents_from_the_host(t: torch.Tensor) -> str:
    before = torch.openreg.values_read_as_nan()
    quiet = torch_openreg._C._set_quiet_value_reads(True)  # the read's warning would name this file's line
    try:
        contents = _format_host_copy(t)
    finally:
        torch_openreg._C._set_quiet_value_reads(quiet)
    if torch.openreg.values_read_as_nan() > before:
        warnings.warn("openreg: print(t) in timing-only mode reads values that were never computed: nan stands for "
                      "them (Note [Values read in timing-only mode]; set_timing_only(True, strict=True) raises "
                      "instead)", stacklevel=_printing_line_level())
    return contents


def _format_host_copy(t: torch.Tensor) -> str:
    with torch.no_grad():
        if t.numel() * t.element_size() <= _LARGEST_KNOWN_VALUES:
            return _format(t.cpu(), t)
        torch._tensor_str.get_summarized_data(t).cpu()  # the read print makes: counted, timed, warned
        return _format(torch.full((), float("nan"), dtype=t.dtype).expand(t.shape), t)


def _format(host: torch.Tensor, t: torch.Tensor) -> str:
    """host formatted as the contents of t's repr (indented past "tensor(" or its subclass's name)."""
    prefix = "tensor(" if type(t) in (torch.Tensor, torch.nn.Parameter) else f"{type(t).__name__}("
    return torch._tensor_str._tensor_str(host, len(prefix))


def _printing_line_level() -> int:
    """warnings.warn's stacklevel, from its caller, for the first frame outside torch and this package."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_OWN_FILES):
        frame, level = frame.f_back, level + 1
    return level
