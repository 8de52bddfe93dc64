"""torch_openreg: the PrivateUse1 backend "openreg" for PyTorch.

Importing this package (which `import torch` does through the
``torch.backends`` entry point unless TORCH_DEVICE_BACKEND_AUTOLOAD=0)
registers the device once per process: the C++ extension registers the
guard, hooks, allocators, generator, serialization and operators at load
time; this file renames PrivateUse1 to "openreg", installs the device
module ``torch.openreg``, generates the ``.openreg()`` methods, and loads
the installed layer packages (amp, distributed, onnx).
"""

import os
import warnings

__all__ = ["_autoload", "get_include", "get_library_dir", "version_mismatch"]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


# LITERALINCLUDE START: TORCH_OPENREG_BUILD_PATHS
def get_include() -> str:
    """Directory holding the public kernel API, ``torch_openreg/Kernel.h``.

    A layer package compiles with it and with ``openreg_runtime.get_include()``.
    """
    return os.path.join(_PACKAGE_DIR, "include")


def get_library_dir() -> str:
    """Directory holding ``libtorch_openreg.so``: pass it to ``-L`` and the rpath."""
    return os.path.join(_PACKAGE_DIR, "lib")
# LITERALINCLUDE END: TORCH_OPENREG_BUILD_PATHS


# LITERALINCLUDE START: AUTOLOAD
def _autoload() -> None:
    """Entry point of the ``torch.backends`` group, called by ``import torch``.

    Importing this package already registered the backend, or warned that it
    could not; there is nothing left to do, and nothing here may raise, so
    that ``import torch`` keeps working whatever state this package is in.

    Defined before ``import torch`` below: a script (or a layer package)
    that imports torch_openreg first makes that line run torch's autoload,
    which finds this package half-imported and needs ``_autoload`` already
    there. Registration then goes on once torch is imported.
    """
# LITERALINCLUDE END: AUTOLOAD


import torch  # noqa: E402  (after _autoload, see its docstring)

from torch_openreg._build_info import TORCH_VERSION as _BUILT_FOR_TORCH  # noqa: E402
from torch_openreg._versions import version_mismatch  # noqa: E402


def _register() -> None:
    # libopenreg must come from openreg_runtime's copy: load it first so the
    # extension's dependency resolves to the already-loaded library.
    import openreg_runtime

    # On Windows the layers' libraries find ours through this (no rpath there).
    openreg_runtime.add_dll_directories(get_library_dir())
    import torch_openreg._C  # noqa: F401  (C++ registrations run at load)
    from torch_openreg import _compile, _dlpack, _extensions, _printing, openreg

    # LITERALINCLUDE START: PYTHON_REGISTRATION
    torch.utils.rename_privateuse1_backend("openreg")
    torch._register_device_module("openreg", openreg)
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
    )
    # LITERALINCLUDE END: PYTHON_REGISTRATION
    # The operators written in Python; they name the device "openreg".
    from torch_openreg import ops  # noqa: F401
    _dlpack.install()
    _printing.install()  # print(t) in timing-only mode: Note [Printing a tensor in timing-only mode]
    _compile.register()  # torch.compile: Dynamo's device interface, Inductor's backend
    _extensions.load_all()
    # Test-only: the conformance kit's negative controls (_seeded_defects.py).
    if os.environ.get("TORCH_OPENREG_SEEDED_DEFECT"):
        from torch_openreg import _seeded_defects
        _seeded_defects.apply(os.environ["TORCH_OPENREG_SEEDED_DEFECT"])


# LITERALINCLUDE START: TORCH_VERSION_CHECK
_mismatch = version_mismatch("torch-openreg", {"torch": _BUILT_FOR_TORCH})
if _mismatch is None:
    _register()
else:
    warnings.warn(f"{_mismatch} The openreg device is not registered.", RuntimeWarning, stacklevel=2)
# LITERALINCLUDE END: TORCH_VERSION_CHECK

