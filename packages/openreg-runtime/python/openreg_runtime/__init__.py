"""openreg_runtime: the OpenReg simulated accelerator runtime for Python.

The functions mirror libopenreg's C API one to one (see ``openreg/openreg.h``
for semantics); failures raise :class:`Error`. Downstream native builds use
:func:`get_include` and :func:`get_library_path` to compile and link against
the one libopenreg shipped here.
"""

import atexit
import os
import sys
from importlib.metadata import version as _dist_version

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_DLL_DIRECTORIES = []  # Windows: the handles os.add_dll_directory returned, kept for the process's life


# LITERALINCLUDE START: OR_PY_DLL_DIRECTORIES
def add_dll_directories(*folders: str) -> None:
    """Lets the loader find the DLLs in folders when an extension that needs
    them is imported. Windows has no rpath: a package adds its library folder
    before importing its extension, as torch does for its own. Elsewhere the
    libraries' rpath finds them, and this does nothing."""
    if not hasattr(os, "add_dll_directory"):  # only Windows' Python has it
        return
    for folder in folders:
        if os.path.isdir(folder):
            _DLL_DIRECTORIES.append(os.add_dll_directory(folder))


add_dll_directories(os.path.join(_PACKAGE_DIR, "lib"))
# LITERALINCLUDE END: OR_PY_DLL_DIRECTORIES

from openreg_runtime import _C  # noqa: E402  (after its library's folder is known to the loader)
from openreg_runtime._C import *  # noqa: E402, F403  (the C API, one function per call)

Error = _C.Error
__version__ = _dist_version("openreg-runtime")
# The C API's library, as each platform's linker names it (CMake's default names).
_LIBRARY_FILE = {"win32": "libopenreg.dll", "darwin": "libopenreg.dylib"}.get(sys.platform, "libopenreg.so")


# LITERALINCLUDE START: OR_PY_BUILD_PATHS
def get_include() -> str:
    """Directory holding ``openreg/openreg.h``, ``openreg.hpp`` and ``version.h``."""
    return os.path.join(_PACKAGE_DIR, "include")


def get_library_dir() -> str:
    """Directory holding ``libopenreg.so`` (``.dylib`` on macOS, ``.dll`` on Windows): pass it to ``-L`` and
    the rpath."""
    return os.path.join(_PACKAGE_DIR, "lib")


def get_library_path() -> str:
    """Full path of the ``libopenreg.so`` that this package loads."""
    return os.path.join(get_library_dir(), _LIBRARY_FILE)
# LITERALINCLUDE END: OR_PY_BUILD_PATHS


def _drain_devices_at_exit() -> None:
    # Python kernels still queued at exit would run during interpreter
    # teardown; let every device finish its work while Python is intact.
    try:
        count = _C.get_device_count()
        for device in range(count):
            _C.set_device(device)
            try:
                _C.device_synchronize()
            except Error:
                pass  # a sticky kernel error was the user's to handle
    except Error:
        return  # never usable here (bad configuration, memory not mappable, forked child)


atexit.register(_drain_devices_at_exit)
