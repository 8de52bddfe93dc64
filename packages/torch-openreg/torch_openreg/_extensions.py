"""Layer packages (openreg-amp, openreg-distributed, openreg-onnx) plug into
torch_openreg through the entry-point group ``torch_openreg.extensions``:
each entry point names a callable that registers the layer. A layer that
is not installed is simply absent; one that fails to load is reported by
``torch.openreg.extensions()`` and a warning, never a crash.
"""

import warnings
from importlib.metadata import entry_points

GROUP = "torch_openreg.extensions"

# name -> "loaded" or "failed: <reason>"
_status: dict[str, str] = {}


# LITERALINCLUDE START: LOAD_EXTENSIONS
def load_all() -> None:
    for entry in entry_points(group=GROUP):
        try:
            entry.load()()
            _status[entry.name] = "loaded"
        except Exception as error:  # a broken layer must not break the backend
            _status[entry.name] = f"failed: {type(error).__name__}: {error}"
            warnings.warn(f"openreg extension {entry.name!r} failed to load: {error}",
                          RuntimeWarning, stacklevel=2)
# LITERALINCLUDE END: LOAD_EXTENSIONS


def status() -> dict[str, str]:
    return dict(_status)
