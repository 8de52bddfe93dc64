"""Whatever the combination, each OpenReg layer is either installed and loaded,
or absent and reported as absent: torch.openreg.extensions() does not list it,
its features answer with a message that says what to install, and the
backend works. Runs in every combination (core alone shows every layer absent)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("openreg_dev", ROOT / "tools" / "dev.py")
dev = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dev)
LAYERS = [package for package in dev.PACKAGES if package.extra and package.layer]

pytestmark = pytest.mark.needs_packages("torch-openreg")


def test_every_layer_is_loaded_or_not_listed(python, installed):
    facts = python.json("""
        import json, torch
        print(json.dumps({"extensions": torch.openreg.extensions(),
                          "works": (torch.arange(4.0, device="openreg") + 1).cpu().tolist()}))
    """, timeout=180)
    for layer in LAYERS:
        if installed(layer.name):
            assert facts["extensions"][layer.extra] == "loaded", facts["extensions"]
        else:
            assert layer.extra not in facts["extensions"], facts["extensions"]
    assert facts["works"] == [1.0, 2.0, 3.0, 4.0]


def test_autocast_casts_with_openreg_amp_and_says_what_to_install_without(python, installed):
    facts = python.json("""
        import json, warnings, torch
        a = torch.randn(4, 4, device="openreg")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with torch.autocast("openreg", dtype=torch.float16):
                dtype = str((a @ a).dtype)
        print(json.dumps({"dtype": dtype, "warnings": [str(w.message) for w in caught]}))
    """, timeout=180)
    if installed("openreg-amp"):
        assert facts["dtype"] == "torch.float16"
        assert not [w for w in facts["warnings"] if "cast policy" in w]
    else:
        assert facts["dtype"] == "torch.float32"  # full precision, not a crash
        assert [w for w in facts["warnings"] if "install torch-openreg[amp]" in w], facts["warnings"]


@pytest.mark.needs_packages("openreg-amp", "openreg-distributed")
@pytest.mark.parametrize("layer", ["openreg_amp", "openreg_distributed"])
def test_a_layer_imported_before_torch_is_registered(layer):
    # Note [A layer imported before torch]: the layer's import runs torch's
    # autoload, which loads the layers while this one is half imported.
    code = f"""
import warnings
warnings.simplefilter("error")  # no "circular import" warning either
import {layer}
import torch
import torch.distributed as dist
assert torch.openreg.extensions()["amp" if "{layer}" == "openreg_amp" else "distributed"] == "loaded"
with torch.autocast("openreg", dtype=torch.float16):
    y = torch.mm(torch.ones(2, 2, device="openreg"), torch.ones(2, 2, device="openreg"))
print(y.dtype, "occl" in dist.Backend.backend_list)
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["torch.float16", "True"]
