"""openreg_onnx: ONNX export of models that live on the openreg device.

``export`` is torch.onnx.export (dynamo path) with translations for
openreg's custom operators and verification in onnxruntime;
``translation_table`` gives the translations to callers of torch.onnx.export;
``verify`` compares an exported model with the device's results.

Importing this package is cheap and imports neither torch nor onnxscript:
``import torch`` loads it through the torch_openreg.extensions entry point in
every process, and onnxscript alone takes seconds to import. The names
below load their modules on first use.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("openreg-onnx")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0"

# Public name -> the module that defines it.
_LAZY = {
    "export": "openreg_onnx.exporter",
    "MissingTranslationError": "openreg_onnx.exporter",
    "translation_table": "openreg_onnx.translations",
    "verify": "openreg_onnx.verification",
    "VerificationError": "openreg_onnx.verification",
    "VerificationResult": "openreg_onnx.verification",
    "OutputCheck": "openreg_onnx.verification",
    "TOLERANCES": "openreg_onnx.verification",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'openreg_onnx' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
