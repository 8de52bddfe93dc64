"""Whether a compiled package may load into the torch and torch-openreg
installed here: the one check that torch_openreg and its compiled layers
(openreg-amp, openreg-distributed) make before loading their C++ code.
Not here: the lockstep pins of the installed layers' metadata
(_extensions.lockstep_mismatch), checked before a layer is even imported.
"""

from __future__ import annotations

from importlib.metadata import version


# LITERALINCLUDE START: VERSION_MISMATCH
def public_version(full: str) -> str:
    """The release a version names, without its local tag: "2.13.0+cu130"
    and "2.13.0+cpu" are builds of one release, "2.13.0"."""
    return full.split("+", 1)[0]


def version_mismatch(package: str, built_against: dict[str, str]) -> str | None:
    """Why ``package``, compiled against the versions in ``built_against``
    ({"torch": ..., "torch-openreg": ...}), must not load here, or None.

    Versions are compared without their local tags: the CPU and CUDA builds
    of one torch release (2.13.0+cpu, 2.13.0+cu130) share the C++ API and
    ABI that OpenReg compiles against, while two releases do not, so a C++
    extension built for one must not load into the other."""
    import torch

    installed = {"torch": str(torch.__version__)}
    if "torch-openreg" in built_against:
        installed["torch-openreg"] = version("torch-openreg")
    for name, built in built_against.items():
        if public_version(installed[name]) != public_version(built):
            return (f"{package} was compiled against {name} {built}, and {name} {installed[name]} is installed: "
                    f"a C++ extension compiled against one release of {name} must not load into another (its "
                    f"C++ ABI changes between releases), so {package} is not loaded. Install {name} "
                    f"{public_version(built)}, or rebuild {package} against the installed {name} "
                    f"(pip install --no-build-isolation <its source>).")
    return None
# LITERALINCLUDE END: VERSION_MISMATCH
