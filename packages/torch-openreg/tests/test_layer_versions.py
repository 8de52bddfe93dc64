"""Lockstep versions at load time: a layer pinned to the installed torch-openreg
loads; one pinned to another version is reported (warning and extensions())
and never imported, while `import torch` and the device keep working.
The layers here are throwaway distributions written into a temporary directory."""

from __future__ import annotations

import textwrap
from importlib.metadata import version
from pathlib import Path


def _write_layer(root: Path, name: str, pinned_to: str) -> None:
    """A layer distribution `name` whose metadata pins torch-openreg==pinned_to;
    importing its module leaves a mark, so a test sees whether it was imported."""
    (root / f"{name}.py").write_text(textwrap.dedent(f"""
        import os
        open(os.path.join({str(root)!r}, "{name}.imported"), "w").close()

        def register():
            import torch
            torch.ones(1, device="openreg")
    """))
    dist = root / f"{name}-{pinned_to}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {pinned_to}\n"
        f"Requires-Dist: torch==2.13.*\nRequires-Dist: torch-openreg=={pinned_to}\n")
    (dist / "entry_points.txt").write_text(f"[torch_openreg.extensions]\n{name} = {name}:register\n")


def test_a_layer_pinned_to_another_torch_openreg_warns_and_stays_unloaded(python, tmp_path):
    installed = version("torch-openreg")
    _write_layer(tmp_path, "current_layer", installed)
    _write_layer(tmp_path, "stale_layer", "0.0.1")
    facts = python.json("""
        import json, warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import torch
        print(json.dumps({
            "status": torch.openreg.extensions(),
            "warnings": [str(w.message) for w in caught if "stale_layer" in str(w.message)],
            "works": (torch.arange(3.0, device="openreg") * 2).cpu().tolist(),
        }))
    """, env={"PYTHONPATH": str(tmp_path)})
    assert facts["status"]["current_layer"] == "loaded"
    assert (tmp_path / "current_layer.imported").exists()
    stale = facts["status"]["stale_layer"]
    assert stale.startswith("failed: stale-layer 0.0.1 was built for torch-openreg 0.0.1 but torch-openreg "
                            f"{installed} is installed"), stale
    assert f"pip install 'torch-openreg[stale_layer]=={installed}'" in stale
    assert not (tmp_path / "stale_layer.imported").exists(), "a mismatched layer must not be imported"
    (warning,) = facts["warnings"]
    assert "not loaded" in warning and "0.0.1" in warning and installed in warning
    assert facts["works"] == [0.0, 2.0, 4.0]


TORCH_VERSION_AS = """
import warnings
import torch
torch.__version__ = {version!r}  # the installed torch, as a build of that version would report it
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import torch_openreg
print(hasattr(torch, "openreg"))
print(" | ".join(str(w.message) for w in caught if "torch-openreg was compiled" in str(w.message)))
"""


def test_torch_openreg_loads_into_another_build_of_its_torch_release(python):
    # torch from the default index is 2.13.0+cu130; this wheel was built
    # against 2.13.0+cpu. Only the local tag differs: same C++ API.
    import torch

    release = torch.__version__.split("+")[0]
    result = python.run(TORCH_VERSION_AS.format(version=f"{release}+cu130"),
                        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert result.stdout.splitlines()[0] == "True", result.stdout + result.stderr


def test_torch_openreg_refuses_another_torch_release_and_says_why(python):
    result = python.run(TORCH_VERSION_AS.format(version="2.14.0+cpu"), env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    registered, message = result.stdout.splitlines()
    assert registered == "False"
    assert "compiled against torch 2.13" in message and "torch 2.14.0+cpu is installed" in message
    assert "must not load into another" in message and "not registered" in message
