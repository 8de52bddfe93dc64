"""torch.compile on openreg: registers the Dynamo device interface
(device_interface.py), Inductor's backend for the device (inductor.py) and
the Dynamo backend named "openreg". Not here: any kernel code; Inductor's own
C++ code generation writes the kernels.

Importing Dynamo and Inductor takes longer than importing torch itself (about
1.2 s of a 2.5 s `import torch` here), and most processes never compile: so
nothing here imports them. Each registration waits for the first use:
Dynamo's when `torch._dynamo` is first imported, Inductor's when Inductor
first asks the device module for the device's backend.
"""

import importlib.abc
import importlib.machinery
import sys
import warnings
from typing import Any

import torch

__all__ = ["register", "inductor_backend"]


# LITERALINCLUDE START: COMPILE_REGISTRATION
def register() -> None:
    """Called by torch_openreg's registration, once per process."""
    if "torch._dynamo" in sys.modules:
        register_with_dynamo()
    else:
        # torch 2.13 has no lazy hook for a PrivateUse1 device's Dynamo
        # interface: register it the moment Dynamo's package has run.
        sys.meta_path.insert(0, _AfterImport("torch._dynamo", register_with_dynamo))


def register_with_dynamo() -> None:
    """Dynamo's device interface for "openreg" (and "openreg:N"), and the
    Dynamo backend named "openreg"."""
    from torch._dynamo.backends.registry import register_backend
    from torch._dynamo.device_interface import register_interface_for_device

    from torch_openreg._compile.device_interface import OpenRegInterface

    register_interface_for_device("openreg", OpenRegInterface)
    for index in range(torch.openreg.device_count()):
        register_interface_for_device(f"openreg:{index}", OpenRegInterface)
    register_backend(compile_with_inductor, name="openreg")


# Inductor's hook for a PrivateUse1 device: at the start of every compilation
# (torch._inductor.codegen.common.init_backend_registration) it reads these
# attributes of the device module, which torch.openreg forwards here.
INDUCTOR_BACKEND_ATTRIBUTES = {"Scheduling": "OpenRegScheduling", "PythonWrapperCodegen": "OpenRegWrapperCodegen"}


def inductor_backend(attribute: str) -> Any:
    """torch.openreg.Scheduling and torch.openreg.PythonWrapperCodegen.

    Inductor registers a device from them only if the device module also
    names a C++ wrapper (torch.openreg has none), and it has no such hook
    for the device's op overrides: so the first read registers openreg's
    whole Inductor backend itself (inductor.register)."""
    from torch_openreg._compile import inductor

    inductor.register()
    return getattr(inductor, INDUCTOR_BACKEND_ATTRIBUTES[attribute])


def compile_with_inductor(graph: torch.fx.GraphModule, example_inputs: list[Any], **kwargs: Any):
    """The Dynamo backend "openreg": Inductor, whose openreg backend
    (inductor.py) generates the device's kernels; the same compiler as
    torch.compile's default backend, under the device's name."""
    from torch._inductor.compile_fx import compile_fx

    return compile_fx(graph, example_inputs, **kwargs)
# LITERALINCLUDE END: COMPILE_REGISTRATION


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs `callback` once the module `name` has been imported, right after
    its code has run; then leaves sys.meta_path. The module is found and
    loaded as it would be without this finder."""

    def __init__(self, name: str, callback: Any) -> None:
        self.name = name
        self.callback = callback

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenCall(spec.loader, self.callback)
        return spec


class _ThenCall(importlib.abc.Loader):
    """A module's own loader, then a callback; a failing callback is a
    warning, never a failed import of the module."""

    def __init__(self, loader: importlib.abc.Loader, callback: Any) -> None:
        self.loader = loader
        self.callback = callback

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        # The module keeps its own loader (linecache and inspect read sources through it).
        module.__loader__ = module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        try:
            self.callback()
        except Exception as error:  # noqa: BLE001  (torch.compile must keep working for other devices)
            warnings.warn(f"torch.compile on openreg is not available: registering with Dynamo failed: {error}",
                          RuntimeWarning, stacklevel=2)
