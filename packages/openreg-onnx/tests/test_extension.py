"""openreg-onnx as a layer of torch-openreg: listed by torch.openreg.extensions()
when installed and absent (with the backend unchanged) when not; cheap and
safe to import before torch; and never a crash when torch-openreg is not
loaded or a dependency is missing, only a report."""

from __future__ import annotations

import importlib.util
import shutil
import sysconfig
from pathlib import Path

import torch


def test_listed_as_loaded():
    assert torch.openreg.extensions()["onnx"] == "loaded"


def _prelude_hiding(tmp_path: Path, *hidden: str) -> str:
    """Code that, run first in a fresh interpreter, takes site-packages off
    sys.path and puts back a copy of it made of links to every entry except
    those whose name starts with one of ``hidden``: the import system and
    importlib.metadata (entry points included) then see those distributions
    as not installed, as after `pip uninstall`, without touching the venv."""
    site = Path(sysconfig.get_paths()["purelib"])
    visible = tmp_path / "site-packages"
    visible.mkdir()
    for entry in site.iterdir():
        if not entry.name.startswith(hidden):
            (visible / entry.name).symlink_to(entry)
    return (f"import sys\nsys.path[:] = [p for p in sys.path if p != {str(site)!r}] + [{str(visible)!r}]\n")


_BACKEND_FACTS = """
import importlib.util, json, torch
torch.manual_seed(0)
x = torch.arange(6, dtype=torch.float32).to("openreg:1")
print(json.dumps({
    "extensions": torch.openreg.extensions(),
    "onnx_importable": importlib.util.find_spec("openreg_onnx") is not None,
    "backend": torch._C._get_privateuse1_backend_name(),
    "device_count": torch.openreg.device_count(),
    "fallback_mode": torch.openreg.get_fallback_mode(),
    "device_module_api": sorted(torch.openreg.__all__),
    "operators": sorted(n for n in torch._C._dispatch_get_all_op_names() if n.startswith("openreg::")),
    "swish": torch.ops.openreg.swish(x).cpu().tolist(),
    "softclip": torch.ops.openreg.softclip(x, 2.0).cpu().tolist(),
    "linear": torch.nn.Linear(6, 2).to("openreg:1")(x).cpu().tolist(),
}))
"""


def test_not_installed_means_not_listed_and_the_backend_unchanged(python, tmp_path):
    installed = python.json(_BACKEND_FACTS)
    without = python.json(_prelude_hiding(tmp_path, "openreg_onnx") + _BACKEND_FACTS)
    assert installed["onnx_importable"] and not without["onnx_importable"]
    assert installed["extensions"]["onnx"] == "loaded"
    assert "onnx" not in without["extensions"]
    # Everything else, other layers' status included, is the same.
    for facts in (installed, without):
        facts["extensions"].pop("onnx", None)
        del facts["onnx_importable"]
    assert without == installed


def test_a_missing_dependency_is_reported_not_raised(python, tmp_path):
    facts = python.json(_prelude_hiding(tmp_path, "onnxruntime") + """
import json, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import torch
print(json.dumps({"status": torch.openreg.extensions()["onnx"],
                  "warnings": [str(w.message) for w in caught],
                  "works": (torch.ones(2, device="openreg") + 1).cpu().tolist()}))
""")
    assert facts["status"] == ("failed: ImportError: openreg-onnx needs onnxruntime: "
                               "pip install 'torch-openreg[onnx]' installs them")
    assert any("'onnx' failed to load" in w for w in facts["warnings"])
    assert facts["works"] == [2.0, 2.0]


def test_importing_first_is_cheap_and_registers_nothing_early(python):
    facts = python.json("""
import json, sys
import openreg_onnx
facts = {"before_torch": sorted(m for m in ("torch", "onnx", "onnxscript", "onnxruntime") if m in sys.modules)}
import torch
facts["status"] = torch.openreg.extensions()
facts["heavy_after_torch"] = sorted(m for m in ("onnxscript", "onnxruntime") if m in sys.modules)
facts["translated"] = sorted(op.name() for op in openreg_onnx.translation_table())
print(json.dumps(facts))
""")
    assert facts["before_torch"] == []
    assert facts["status"]["onnx"] == "loaded"
    assert facts["heavy_after_torch"] == []  # `import torch` does not pay for onnxscript
    assert len(facts["translated"]) >= 6 and "openreg::swish" in facts["translated"]


def test_without_the_backend_loaded_it_reports_and_still_exports(python):
    facts = python.json("""
import json, warnings
import openreg_onnx, torch
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    table = openreg_onnx.translation_table()
program = openreg_onnx.export(torch.nn.Linear(3, 2).eval(), (torch.randn(4, 3),), verbose=False, verify=True)
print(json.dumps({"table": len(table), "warnings": [str(w.message) for w in caught],
                  "has_openreg": hasattr(torch, "openreg"),
                  "outputs": [v.name for v in program.model.graph.outputs]}))
""", env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}, timeout=120)
    assert facts["has_openreg"] is False
    assert facts["table"] == 0
    assert any("openreg's operators are not registered" in w for w in facts["warnings"])
    assert len(facts["outputs"]) == 1  # a CPU model still exports and verifies


def test_a_torch_openreg_built_for_another_torch_is_reported(python, tmp_path):
    installed = Path(importlib.util.find_spec("torch_openreg").origin).parent
    shutil.copytree(installed, tmp_path / "torch_openreg", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "torch_openreg" / "_build_info.py").write_text('TORCH_VERSION = "1.0.0+fake"\n')
    facts = python.json("""
import json, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import openreg_onnx, torch
    table = openreg_onnx.translation_table()
print(json.dumps({"table": len(table), "has_openreg": hasattr(torch, "openreg"),
                  "warnings": [str(w.message) for w in caught]}))
""", env={"PYTHONPATH": str(tmp_path)}, timeout=120)
    assert facts["has_openreg"] is False and facts["table"] == 0
    assert any("1.0.0+fake" in w for w in facts["warnings"])
    assert any("openreg's operators are not registered" in w for w in facts["warnings"])
