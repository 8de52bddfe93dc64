"""The source maps (tools/layering.py's SOURCE_MAPS: torch-openreg's in
docs/binding/index.md, with the same block in its README, and
openreg-distributed's in its README): every source file is tagged copy,
replace or skip, in exactly one row, and torch-openreg's two copies agree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "packages" / "torch-openreg"
BLOCK = re.compile(r"<!-- SOURCE_MAP START -->\n(.*?)<!-- SOURCE_MAP END -->", re.DOTALL)
TAGS = ("copy", "replace", "skip")


def _block(path: Path) -> str:
    found = BLOCK.search(path.read_text())
    assert found, f"{path.relative_to(ROOT)} has no SOURCE_MAP block"
    return found.group(1)


def _rows(block: str) -> list[tuple[list[str], list[str], str]]:
    """(paths, excluded paths, tag) per row; paths relative to the package, folders ending in /."""
    rows = []
    for line in block.splitlines()[2:]:
        cell, tag = [part.strip() for part in line.strip("|").split("|")[:2]]
        names = re.findall(r"`([^`]+)`", cell)
        base = names[0].rsplit("/", 1)[0] + "/" if not names[0].endswith("/") else names[0]
        paths = [names[0]] + [base + name for name in names[1:] if "all but" not in cell]
        excluded = [base + name for name in names[1:]] if "all but" in cell else []
        rows.append((paths, excluded, tag))
    return rows


def _covers(path: str, pattern: str) -> bool:
    return path.startswith(pattern) if pattern.endswith("/") else path == pattern


# package -> (the document holding its map, the folders its map covers)
MAPS = {
    "torch-openreg": (ROOT / "docs" / "binding" / "index.md", ("csrc", "include", "torch_openreg")),
    "openreg-distributed": (ROOT / "packages" / "openreg-distributed" / "README.md", ("csrc", "openreg_distributed")),
}


@pytest.mark.parametrize("package", sorted(MAPS))
def test_every_source_file_has_one_tag(package):
    document, folders = MAPS[package]
    root = ROOT / "packages" / package
    rows = _rows(_block(document))
    assert {tag for _, _, tag in rows} <= set(TAGS)
    files = sorted(str(p.relative_to(root)) for folder in folders
                   for p in (root / folder).rglob("*") if p.suffix in (".cpp", ".h", ".py"))
    for path in files:
        tags = [tag for paths, excluded, tag in rows
                if any(_covers(path, p) for p in paths) and not any(_covers(path, e) for e in excluded)]
        assert len(tags) == 1, f"{path}: tagged {tags or 'nowhere'} in the source map"
    for paths, _, _ in rows:
        for pattern in paths:
            assert any(_covers(path, pattern) for path in files), f"the source map names {pattern}, which is gone"


def test_the_package_readme_carries_the_same_map():
    assert _block(PACKAGE / "README.md") == _block(ROOT / "docs" / "binding" / "index.md")
