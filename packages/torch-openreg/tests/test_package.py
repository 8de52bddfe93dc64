"""Packaging: autoload through `import torch`, the torch-version check, and the
extension plugins walked through the 'torch_openreg.extensions' entry points."""

from __future__ import annotations

import importlib.util
import shutil
import textwrap
from pathlib import Path

import pytest
import torch


def test_import_torch_autoloads_the_backend(fresh_facts):
    assert fresh_facts["has_openreg"]
    assert fresh_facts["backend_name"] == "openreg"
    assert fresh_facts["tensor_device"] == "openreg:0"
    assert fresh_facts["roundtrip"] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]



@pytest.mark.parametrize("name", ["openreg-runtime", "torch-openreg"])
def test_the_installed_wheel_carries_its_license(name):
    from importlib.metadata import distribution

    licenses = [f for f in distribution(name).files if f.name == "LICENSE"]
    assert licenses, f"{name}'s wheel has no LICENSE"
    assert licenses[0].read_text().startswith("BSD 3-Clause License")

def test_autoload_disabled_leaves_torch_alone(python):
    facts = python.json("""
        import json, torch
        facts = {"has_openreg": hasattr(torch, "openreg"),
                 "backend_name": torch._C._get_privateuse1_backend_name()}
        try:
            torch.empty(1, device="openreg")
            facts["create"] = "created"
        except Exception as error:
            facts["create"] = type(error).__name__
        print(json.dumps(facts))
    """, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert facts["has_openreg"] is False
    assert facts["backend_name"] == "privateuseone"
    assert facts["create"] != "created"


def test_torch_version_mismatch_warns_and_import_still_works(python, tmp_path):
    installed = Path(importlib.util.find_spec("torch_openreg").origin).parent
    copy = tmp_path / "torch_openreg"
    shutil.copytree(installed, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "_build_info.py").write_text('TORCH_VERSION = "1.0.0+fake"\n')
    facts = python.json("""
        import json, warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import torch
        import torch_openreg
        print(json.dumps({
            "messages": [str(w.message) for w in caught],
            "torch_version": torch.__version__,
            "package_file": torch_openreg.__file__,
            "has_openreg": hasattr(torch, "openreg"),
            "cpu_works": torch.ones(2).add(1).tolist(),
        }))
    """, env={"PYTHONPATH": str(tmp_path)})
    assert facts["package_file"].startswith(str(tmp_path)), "the child did not import the copy"
    mismatch = [m for m in facts["messages"] if "1.0.0+fake" in m]
    assert mismatch, facts["messages"]
    assert facts["torch_version"] in mismatch[0]
    assert facts["has_openreg"] is False
    assert facts["cpu_works"] == [2.0, 2.0]


def test_extensions_reports_a_dict_of_statuses():
    status = torch.openreg.extensions()
    assert isinstance(status, dict)
    for name, value in status.items():
        assert isinstance(name, str)
        assert value == "loaded" or value.startswith("failed: ")
    # A copy: callers cannot corrupt the registry.
    status["injected"] = "loaded"
    assert "injected" not in torch.openreg.extensions()


def _write_plugin_distribution(root: Path) -> None:
    (root / "openreg_test_plugin.py").write_text(textwrap.dedent("""
        CALLS = []

        def register():
            import torch
            CALLS.append(torch.openreg.device_count())

        def broken():
            raise RuntimeError("plugin exploded on purpose")
    """))
    dist = root / "openreg_test_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: openreg-test-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(textwrap.dedent("""
        [torch_openreg.extensions]
        good_layer = openreg_test_plugin:register
        bad_layer = openreg_test_plugin:broken
    """))


def test_extension_plugins_are_loaded_and_failures_reported(python, tmp_path):
    _write_plugin_distribution(tmp_path)
    facts = python.json("""
        import json, warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import torch
        import openreg_test_plugin
        x = torch.ones(3, device="openreg")
        print(json.dumps({
            "status": torch.openreg.extensions(),
            "calls": openreg_test_plugin.CALLS,
            "warnings": [str(w.message) for w in caught],
            "works": (x + 1).cpu().tolist(),
        }))
    """, env={"PYTHONPATH": str(tmp_path)})
    status = facts["status"]
    assert status["good_layer"] == "loaded"
    assert status["bad_layer"].startswith("failed: ")
    assert "plugin exploded on purpose" in status["bad_layer"]
    # Called exactly once, with the device already registered.
    assert facts["calls"] == [2]
    assert any("bad_layer" in w and "plugin exploded on purpose" in w for w in facts["warnings"])
    assert facts["works"] == [2.0, 2.0, 2.0]


def _write_layer_package(root: Path) -> None:
    """A layer package shaped like openreg-amp: it imports the backend it
    extends first, and registers through an entry point in a submodule."""
    package = root / "openreg_test_layer"
    package.mkdir()
    (package / "__init__.py").write_text(textwrap.dedent("""
        import torch_openreg  # the backend first; it imports torch
        import torch

        from openreg_test_layer._register import CALLS
    """))
    (package / "_register.py").write_text(textwrap.dedent("""
        CALLS = []

        def register():
            import torch
            CALLS.append(torch.openreg.device_count())
    """))
    dist = root / "openreg_test_layer-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: openreg-test-layer\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[torch_openreg.extensions]\ntest_layer = openreg_test_layer._register:register\n")


@pytest.mark.parametrize("first", ["import torch_openreg", "import openreg_test_layer", "import torch"])
def test_every_import_order_works(python, tmp_path, first):
    # torch's autoload imports torch_openreg; a script (or layer) that
    # imports torch_openreg first runs that autoload while torch_openreg is
    # half-imported, which must not fail.
    _write_layer_package(tmp_path)
    facts = python.json(f"{first}\n" + textwrap.dedent("""
        import json
        import torch
        import torch_openreg
        import openreg_test_layer
        x = torch.ones(3, device="openreg")
        print(json.dumps({"works": (x * 2).cpu().tolist(), "status": torch.openreg.extensions(),
                          "calls": openreg_test_layer.CALLS}))
    """), env={"PYTHONPATH": str(tmp_path)})
    assert facts["works"] == [2.0, 2.0, 2.0]
    assert facts["status"]["test_layer"] == "loaded"
    assert facts["calls"] == [2]
