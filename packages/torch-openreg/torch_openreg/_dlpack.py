"""DLPack device of openreg tensors.

torch 2.13's Tensor.__dlpack_device__ recognises PrivateUse1 tensors only
under the name "privateuse1", so after the rename to "openreg" it raises
"Unknown device type openreg for Dlpack" and torch.from_dlpack(tensor)
fails (capsules from torch.utils.dlpack.to_dlpack work). This wraps the
method to report openreg tensors as kDLExtDev, the DLPack device type PyTorch
maps back to PrivateUse1, and leaves every other device to PyTorch. An
export of memory timing-only mode never computed is refused (_check_exports).
"""

import torch
from torch.utils.dlpack import DLDeviceType


def install() -> None:
    original = torch.Tensor.__dlpack_device__
    if getattr(original, "_openreg_wrapped", False):
        return

    # LITERALINCLUDE START: DLPACK_DEVICE
    def __dlpack_device__(self):
        if self.device.type == "openreg":
            return DLDeviceType.kDLExtDev, self.device.index or 0
        return original(self)
    # LITERALINCLUDE END: DLPACK_DEVICE

    __dlpack_device__._openreg_wrapped = True
    __dlpack_device__.__doc__ = original.__doc__
    torch.Tensor.__dlpack_device__ = __dlpack_device__
    _check_exports()


def _check_exports() -> None:
    """A tensor imported from DLPack has no allocator block, so the runtime cannot refuse it when memory
    timing-only mode never computed is read through it (Note [Memory timing-only mode never computed]):
    such memory is refused at the export instead, by both of PyTorch's ways to export."""
    from torch_openreg import _C

    original_method, original_function = torch.Tensor.__dlpack__, torch.utils.dlpack.to_dlpack

    def __dlpack__(self, *args, **kwargs):
        if self.device.type == "openreg":
            _C._check_exportable(self)
        return original_method(self, *args, **kwargs)

    def to_dlpack(tensor):
        if isinstance(tensor, torch.Tensor) and tensor.device.type == "openreg":
            _C._check_exportable(tensor)
        return original_function(tensor)

    __dlpack__.__doc__, to_dlpack.__doc__ = original_method.__doc__, original_function.__doc__
    torch.Tensor.__dlpack__, torch.utils.dlpack.to_dlpack = __dlpack__, to_dlpack
