"""openreg_distributed: the "occl" c10d backend for openreg tensors, a C++
c10d::Backend (openreg_distributed._C.OcclBackend). torch_openreg calls
``register`` through the ``torch_openreg.extensions`` entry point; this
registers only occl itself, never a register-once hook of torch_openreg.
"""

from openreg_distributed.registration import create_backend, register

__all__ = ["create_backend", "register"]
