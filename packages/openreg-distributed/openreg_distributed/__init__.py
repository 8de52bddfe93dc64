"""openreg_distributed: the "occl" c10d backend for openreg tensors, a C++
c10d::Backend (openreg_distributed._C.OcclBackend). torch_openreg calls
``register`` through the ``torch_openreg.extensions`` entry point; this
registers only occl itself, never a register-once hook of torch_openreg.
"""

__all__ = ["create_backend", "register"]

# Note [A layer imported before torch] in torch_openreg/_extensions.py:
# register() may be called while this module is still importing torch.
_module_ready = False
_register_when_ready = False


def register() -> None:
    """Registers occl with torch.distributed (once); see registration.register."""
    global _register_when_ready
    if not _module_ready:  # import openreg_distributed ran import torch, which loads the layers
        _register_when_ready = True
        return
    from openreg_distributed import registration

    registration.register()


from openreg_distributed.registration import create_backend  # noqa: E402  (imports torch)

_module_ready = True
if _register_when_ready:
    register()
