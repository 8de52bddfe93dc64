"""Builds scale_shift.cpp against the installed torch-openreg, as a vendor
would, and runs its operator once. From this folder:

    python build_and_run.py

The guide quotes it (docs/operators/kernel-api.md) and tests/test_kernel_api.py
runs it as it is, so the quote is a program that works when copied.
"""

# LITERALINCLUDE START: KERNEL_API_EXAMPLE_BUILD
import openreg_runtime
import torch
import torch_openreg
from torch.utils.cpp_extension import load

library_dir = torch_openreg.get_library_dir()
load(
    name="openreg_kernel_api_example",
    sources=["scale_shift.cpp"],
    extra_include_paths=[torch_openreg.get_include(), openreg_runtime.get_include()],
    extra_ldflags=[f"-L{library_dir}", "-ltorch_openreg", f"-Wl,-rpath,{library_dir}"],
    is_python_module=False,  # the library registers operators; there is no Python module to import
)
x = torch.arange(4.0, device="openreg")
print(torch.ops.openreg_example.scale_shift(x, 2.0, 1.0))
# LITERALINCLUDE END: KERNEL_API_EXAMPLE_BUILD
