"""Operators registered from Python: importing this package registers them.

custom_op (openreg::softclip), fragment (openreg::scaled_add) and
python_kernel (scaled_add's openreg kernel) are registration scenarios of
the guide; launch runs Python kernels on openreg streams.
"""

from torch_openreg.ops import custom_op, fragment, launch, python_kernel

__all__ = ["custom_op", "fragment", "launch", "python_kernel"]
