"""Layer packages (openreg-amp, openreg-distributed, openreg-onnx, openreg-perf) plug into
torch_openreg through the entry-point group ``torch_openreg.extensions``:
each entry point names a callable that registers the layer. A layer that
is not installed is simply absent; one that fails to load is reported by
``torch.openreg.extensions()`` and a warning, never a crash. A layer pinned
to another torch-openreg version (see lockstep_mismatch) is not even imported.
"""

import re
import warnings
from importlib.metadata import EntryPoint, entry_points, version

GROUP = "torch_openreg.extensions"

# name -> "loaded" or "failed: <reason>"
_status: dict[str, str] = {}


# A requirement on exactly one torch-openreg version, as a layer's metadata
# states it ("torch-openreg==0.1.0", possibly followed by "; <marker>").
_EXACT_PIN = re.compile(r"^torch[-_.]openreg\s*==\s*([^\s;,]+)\s*(;|$)", re.IGNORECASE)


# LITERALINCLUDE START: LOCKSTEP_CHECK
def lockstep_mismatch(entry: EntryPoint) -> str | None:
    """Why the layer behind ``entry`` must not load into this torch-openreg,
    or None. OpenReg's layers pin the exact torch-openreg version they were
    built against (versions move in lockstep); a layer installed beside
    another version (pip --no-deps, an old wheel) may not even be
    ABI-compatible, so it is not imported. A plugin without such a pin loads."""
    if entry.dist is None:
        return None
    pinned = [m.group(1) for m in map(_EXACT_PIN.match, entry.dist.requires or []) if m]
    installed = version("torch-openreg")
    if not pinned or installed in pinned:
        return None
    layer = entry.dist.metadata["Name"]
    return (f"{layer} {entry.dist.version} was built for torch-openreg {pinned[0]} but torch-openreg "
            f"{installed} is installed; install matching versions (pip install "
            f"'torch-openreg[{entry.name}]=={installed}' from the same wheelhouse) or rebuild {layer}")
# LITERALINCLUDE END: LOCKSTEP_CHECK


# Note [A layer imported before torch]
# `import openreg_amp` as a program's first import runs the layer's own
# `import torch`, which loads torch_openreg (autoload), which loads the
# layers: it finds openreg_amp half imported. So a layer defines its
# register() before it imports torch, and a call that comes while the
# layer's module is still importing only asks the module to register itself
# once it has finished (the last lines of the module). torch_openreg itself
# is imported the same way (its _autoload).

# LITERALINCLUDE START: LOAD_EXTENSIONS
def load_all() -> None:
    for entry in entry_points(group=GROUP):
        if mismatch := lockstep_mismatch(entry):
            _status[entry.name] = f"failed: {mismatch}"
            warnings.warn(f"openreg extension {entry.name!r} not loaded: {mismatch}", RuntimeWarning,
                          stacklevel=2)
            continue
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
