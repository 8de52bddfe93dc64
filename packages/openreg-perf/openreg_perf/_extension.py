"""The entry point torch_openreg calls when it loads its layers (group torch_openreg.extensions,
name "perf"). openreg-perf registers nothing with the dispatcher: it reads what torch.openreg.record_activity()
records. So this only checks, cheaply, that the public hooks it builds on are there (an older
torch-openreg lacks them), and is reported by torch.openreg.extensions(). Imports nothing heavy.
"""

from __future__ import annotations


def register() -> None:
    import openreg_runtime
    import torch

    missing = [name for name, found in (
        ("torch.openreg.record_activity", hasattr(torch.openreg, "record_activity")),
        ("openreg_runtime.trace_get_dropped_count", hasattr(openreg_runtime, "trace_get_dropped_count")),
    ) if not found]
    if missing:
        raise ImportError(f"openreg-perf needs {', '.join(missing)}, which the installed torch-openreg and "
                          "openreg-runtime lack: install matching versions (pip install 'torch-openreg[perf]')")
