"""torch.compile on openreg: registers, once per process, the Dynamo device
interface (device_interface.py), Inductor's backend for the device
(inductor.py) and the Dynamo backend named "openreg". Not here: any kernel
code; Inductor's own C++ code generation writes the kernels.
"""

from typing import Any

import torch

__all__ = ["register"]


# LITERALINCLUDE START: COMPILE_REGISTRATION
def register() -> None:
    """Called by torch_openreg's registration, once per process."""
    from torch._dynamo.backends.registry import register_backend
    from torch._dynamo.device_interface import register_interface_for_device

    from torch_openreg._compile import inductor
    from torch_openreg._compile.device_interface import OpenRegInterface

    register_interface_for_device("openreg", OpenRegInterface)
    for index in range(torch.openreg.device_count()):
        register_interface_for_device(f"openreg:{index}", OpenRegInterface)
    inductor.register()
    register_backend(compile_with_inductor, name="openreg")


def compile_with_inductor(graph: torch.fx.GraphModule, example_inputs: list[Any], **kwargs: Any):
    """The Dynamo backend "openreg": Inductor, whose openreg backend
    (inductor.py) generates the device's kernels; the same compiler as
    torch.compile's default backend, under the device's name."""
    from torch._inductor.compile_fx import compile_fx

    return compile_fx(graph, example_inputs, **kwargs)
# LITERALINCLUDE END: COMPILE_REGISTRATION
