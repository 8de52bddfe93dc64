"""openreg_amp: the AMP layer of the openreg device - CUDA's autocast cast
policy, GradScaler's device kernels and the fused optimizers, registered by
loading libtorch_openreg_amp.so. torch_openreg calls ``register`` through the
``torch_openreg.extensions`` entry point; nothing here is a register-once
hook (the AutocastPrivateUse1 fallthrough and the device module are
torch_openreg's).
"""

import os

__all__ = ["library_path", "register"]

_registered = False
# Note [A layer imported before torch] in torch_openreg/_extensions.py:
# register() may be called while this module is still importing torch.
_module_ready = False
_register_when_ready = False


def library_path() -> str:
    """Path of libtorch_openreg_amp.so, the registrations of this layer."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib", "libtorch_openreg_amp.so")


# LITERALINCLUDE START: OPENREG_AMP_REGISTER
def register() -> None:
    """Loads the cast policies and kernels into the dispatcher (once).

    Refuses, with what to do, a torch or torch-openreg other than the ones it
    was compiled against: the library would not load, or worse, load and
    misbehave. torch_openreg reports the refusal in torch.openreg.extensions().
    """
    global _registered, _register_when_ready
    if _registered:
        return
    if not _module_ready:  # import openreg_amp ran import torch, which loads the layers: finish below
        _register_when_ready = True
        return
    mismatch = version_mismatch("openreg-amp", {"torch": _BUILT_FOR_TORCH, "torch-openreg": _BUILT_FOR_TORCH_OPENREG})
    if mismatch is not None:
        raise RuntimeError(mismatch)
    torch.ops.load_library(library_path())
    _registered = True
# LITERALINCLUDE END: OPENREG_AMP_REGISTER


import torch  # noqa: E402  (after register: Note [A layer imported before torch])
from torch_openreg import version_mismatch  # noqa: E402

from openreg_amp._build_info import TORCH_OPENREG_VERSION as _BUILT_FOR_TORCH_OPENREG  # noqa: E402
from openreg_amp._build_info import TORCH_VERSION as _BUILT_FOR_TORCH  # noqa: E402

_module_ready = True
if _register_when_ready:
    register()
