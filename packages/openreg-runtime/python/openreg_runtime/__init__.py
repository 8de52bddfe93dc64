"""openreg_runtime: the OpenReg simulated accelerator runtime for Python.

The functions mirror libopenreg's C API one to one (see ``openreg/openreg.h``
for semantics); failures raise :class:`Error`. Downstream native builds use
:func:`get_include` and :func:`get_library_path` to compile and link against
the one libopenreg shipped here.
"""

import atexit
import os
from importlib.metadata import version as _dist_version

from openreg_runtime import _C
from openreg_runtime._C import *  # noqa: F403  (the C API, one function per call)

Error = _C.Error
__version__ = _dist_version("openreg-runtime")

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


# LITERALINCLUDE START: OR_PY_BUILD_PATHS
def get_include() -> str:
    """Directory holding ``openreg/openreg.h``, ``openreg.hpp`` and ``version.h``."""
    return os.path.join(_PACKAGE_DIR, "include")


def get_library_dir() -> str:
    """Directory holding ``libopenreg.so``: pass it to ``-L`` and the rpath."""
    return os.path.join(_PACKAGE_DIR, "lib")


def get_library_path() -> str:
    """Full path of the ``libopenreg.so`` that this package loads."""
    return os.path.join(get_library_dir(), "libopenreg.so")
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
