"""openreg-amp as a package: found through torch_openreg's entry points and
listed as loaded, installed by the extra torch-openreg[amp], pinned to the
torch-openreg it was built against; and, without it, torch.autocast("openreg")
still warns and keeps full precision."""

from __future__ import annotations

from importlib.metadata import entry_points, requires, version
from pathlib import Path

import openreg_amp
import pytest
import torch


def test_listed_as_a_loaded_extension():
    assert torch.openreg.extensions()["amp"] == "loaded"
    (entry,) = [e for e in entry_points(group="torch_openreg.extensions") if e.name == "amp"]
    assert entry.value == "openreg_amp:register"
    assert Path(openreg_amp.library_path()).is_file()


def test_installed_by_the_amp_extra_and_pinned_to_torch_openreg():
    extras = requires("torch-openreg")
    assert f'openreg-amp=={version("openreg-amp")}; extra == "amp"' in extras
    assert f'openreg-amp=={version("openreg-amp")}; extra == "all"' in extras
    assert f"torch-openreg=={version('torch-openreg')}" in requires("openreg-amp")
    from openreg_amp import _build_info
    assert _build_info.TORCH_OPENREG_VERSION == version("torch-openreg")
    assert _build_info.TORCH_VERSION == torch.__version__


def test_refuses_to_load_into_another_torch_openreg(monkeypatch):
    monkeypatch.setattr(openreg_amp, "_registered", False)
    monkeypatch.setattr(openreg_amp, "_BUILT_FOR_TORCH_OPENREG", "0.0.1")
    with pytest.raises(RuntimeError, match="compiled against torch-openreg 0.0.1.* rebuild openreg-amp"):
        openreg_amp.register()


def test_loads_into_another_build_of_the_same_torch_release(monkeypatch):
    # 2.13.0+cu130 (the default index's build) and 2.13.0+cpu share the C++
    # API: only the local tag differs, so the layer loads.
    monkeypatch.setattr(openreg_amp, "_registered", False)
    monkeypatch.setattr(openreg_amp, "_BUILT_FOR_TORCH", torch.__version__.split("+")[0] + "+cu130")
    openreg_amp.register()
    monkeypatch.setattr(openreg_amp, "_registered", False)
    monkeypatch.setattr(openreg_amp, "_BUILT_FOR_TORCH", "2.12.1+cpu")
    with pytest.raises(RuntimeError, match="compiled against torch 2.12.1.*must not load into another.*Install torch "
                                           "2.12.1, or rebuild openreg-amp"):
        openreg_amp.register()


# Hides this package's entry point before torch (and so torch_openreg) loads:
# the process then runs as if openreg-amp were not installed.
_WITHOUT_AMP = """
import importlib.metadata as metadata
original = metadata.entry_points
def without_amp(**params):
    found = original(**params)
    if params.get("group") == "torch_openreg.extensions":
        return metadata.EntryPoints([e for e in found if e.name != "amp"])
    return found
metadata.entry_points = without_amp
"""

_AUTOCAST_FACTS = """
import json, warnings
import torch
a = torch.randn(8, 8, device="openreg")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    with torch.autocast("openreg"):
        dtypes = [str((a @ a).dtype), str(torch.nn.functional.linear(a, a).dtype)]
print(json.dumps({"extensions": torch.openreg.extensions(), "dtypes": dtypes,
                  "warnings": [str(w.message) for w in caught if "cast policy" in str(w.message)]}))
"""


def test_without_openreg_amp_autocast_warns_and_keeps_full_precision(python):
    facts = python.json(_WITHOUT_AMP + _AUTOCAST_FACTS, timeout=120)
    assert "amp" not in facts["extensions"]
    assert facts["dtypes"] == ["torch.float32", "torch.float32"]
    assert len(facts["warnings"]) == 1 and "install torch-openreg[amp]" in facts["warnings"][0]


def test_with_openreg_amp_autocast_casts_without_a_warning(python):
    facts = python.json(_AUTOCAST_FACTS, timeout=120)
    assert facts["extensions"]["amp"] == "loaded"
    assert facts["dtypes"] == ["torch.float16", "torch.float16"]
    assert facts["warnings"] == []
