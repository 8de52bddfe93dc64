"""Registration scenario "Python kernels": the openreg kernel of
openreg::scaled_add (defined in fragment.py), written in Python with
torch.library.impl and run as a kernel on the current openreg stream.
"""

from __future__ import annotations

import torch

from torch_openreg.ops.fragment import result_meta
from torch_openreg.ops.launch import check_same_device, launch_on_stream

__all__ = ["scaled_add"]


# LITERALINCLUDE START: PYTHON_KERNEL
@torch.library.impl("openreg::scaled_add", "PrivateUse1")
def scaled_add(x: torch.Tensor, y: torch.Tensor, *, alpha: float = 1.0) -> torch.Tensor:
    check_same_device("openreg::scaled_add", x=x, y=y)
    shape, dtype = result_meta(x, y)
    out = torch.empty(shape, dtype=dtype, device=x.device)
    launch_on_stream("scaled_add", [out, x, y],
                     lambda o, a, b: torch.add(a, b, alpha=alpha, out=o))
    return out
# LITERALINCLUDE END: PYTHON_KERNEL
