"""The entry point torch_openreg calls when it loads its layers (group
torch_openreg.extensions, name "onnx"). ONNX export registers nothing with
the dispatcher, so this only checks, cheaply, that the layer can work: a
missing dependency is reported by torch.openreg.extensions() and a warning,
not at the first export. Not where anything is imported eagerly.
"""

from __future__ import annotations

from importlib.util import find_spec

# The modules export needs, by the distribution that provides each.
_REQUIRED = {"onnx": "onnx", "onnxscript": "onnxscript", "onnxruntime": "onnxruntime"}


# LITERALINCLUDE START: ONNX_REGISTER
def register() -> None:
    missing = [distribution for module, distribution in _REQUIRED.items() if find_spec(module) is None]
    if missing:
        raise ImportError(f"openreg-onnx needs {', '.join(missing)}: "
                          "pip install 'torch-openreg[onnx]' installs them")
# LITERALINCLUDE END: ONNX_REGISTER
