"""The source maps: every package has one (tools/layering.py's SOURCE_MAPS, whose rule 0 checks that
each source file has exactly one tag), and torch-openreg's two copies of its map agree."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("openreg_layering", ROOT / "tools" / "layering.py")
layering = sys.modules.get(_spec.name) or importlib.util.module_from_spec(_spec)
if _spec.name not in sys.modules:
    sys.modules[_spec.name] = layering  # its dataclasses look their module up
    _spec.loader.exec_module(layering)


def test_every_package_has_a_source_map():
    packages = {path.name for path in (ROOT / "packages").iterdir() if (path / "pyproject.toml").exists()}
    assert packages == set(layering.SOURCE_MAPS)


def test_every_source_file_has_one_tag():
    assert layering.untagged(ROOT) == []


def test_the_package_readme_carries_the_same_map():
    def rows(path: Path):
        return layering.map_rows(path.read_text())
    assert rows(ROOT / "packages" / "torch-openreg" / "README.md") == rows(ROOT / "docs" / "binding" / "index.md")
