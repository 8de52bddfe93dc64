"""DLPack device of openreg tensors.

torch 2.13's Tensor.__dlpack_device__ recognises PrivateUse1 tensors only
under the name "privateuse1", so after the rename to "openreg" it raises
"Unknown device type openreg for Dlpack" and torch.from_dlpack(tensor)
fails (capsules from torch.utils.dlpack.to_dlpack work). This wraps the
method to report openreg tensors as kDLExtDev, the DLPack device type PyTorch
maps back to PrivateUse1, and leaves every other device to PyTorch.
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
