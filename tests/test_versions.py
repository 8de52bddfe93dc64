"""Lockstep versions, checked on the sources: every package of packages/ has
the same version, pins the exact version of the OpenReg packages it depends
on, is listed in tools/dev.py's PACKAGES and, if it is a layer, is installed
by its own extra of torch-openreg and by "all", and has a combination (tools/ci.py) and a
hatch environment. Reads the pyproject files only."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ROOT / "packages"
_spec = importlib.util.spec_from_file_location("openreg_dev", ROOT / "tools" / "dev.py")
dev = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dev)
_spec = importlib.util.spec_from_file_location("openreg_ci", ROOT / "tools" / "ci.py")
ci = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ci)


def _project(name: str) -> dict:
    return tomllib.loads((PACKAGES / name / "pyproject.toml").read_text())


def _version(name: str) -> str:
    return (PACKAGES / name / "VERSION").read_text().strip()


def _openreg_requirements(requirements: list[str]) -> dict[str, str]:
    """name -> version specifier, for the requirements naming a package of packages/."""
    ours = {path.name for path in PACKAGES.iterdir() if (path / "pyproject.toml").exists()}
    found = {}
    for requirement in requirements:
        name, specifier = re.match(r"^([A-Za-z0-9_.-]+)\s*(.*)$", requirement).groups()
        if name in ours:
            found[name] = specifier
    return found


def test_every_package_is_built_by_dev_py_in_dependency_order():
    on_disk = {path.name for path in PACKAGES.iterdir() if (path / "pyproject.toml").exists()}
    names = [package.name for package in dev.PACKAGES]
    assert sorted(names) == sorted(on_disk)
    assert names[:2] == ["openreg-runtime", "torch-openreg"]


def test_versions_move_in_lockstep():
    versions = {package.name: _version(package.name) for package in dev.PACKAGES}
    assert len(set(versions.values())) == 1, versions
    for package in dev.PACKAGES:
        project = _project(package.name)
        pinned = _openreg_requirements(project["project"].get("dependencies", []))
        pinned |= _openreg_requirements(project["build-system"]["requires"])
        for name, specifier in pinned.items():
            assert specifier == f"=={versions[name]}", f"{package.name} pins {name}{specifier}"


def test_each_layer_has_its_extra_and_all_names_every_layer():
    extras = _project("torch-openreg")["project"]["optional-dependencies"]
    layers = {package.extra: package.name for package in dev.PACKAGES if package.extra}
    for extra, name in layers.items():
        assert _openreg_requirements(extras[extra]) == {name: f"=={_version(name)}"}, extra
    assert _openreg_requirements(extras["all"]) == {name: f"=={_version(name)}" for name in layers.values()}
    # An extra without a package is a layer that has not landed yet: it installs nothing.
    assert all(not extras[extra] for extra in set(extras) - set(layers) - {"all"})


def test_every_layer_has_a_combination_and_a_hatch_environment_of_its_own():
    hatch = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["envs"]
    for name in ["core", "all", *[package.extra for package in dev.PACKAGES if package.extra]]:
        assert hatch[name]["scripts"]["test"] == f"python tools/dev.py combination {name} {{args}}"
        if name != "all":
            assert ci.COMBINATIONS[name] == ((name,) if name != "core" else ())
            assert name in ci.CI_COMBINATIONS


def test_every_package_ships_the_repositorys_license():
    # Each wheel carries its package's LICENSE (the build backends' default license files).
    license_text = (ROOT / "LICENSE").read_text()
    assert license_text.startswith("BSD 3-Clause License")
    for package in dev.PACKAGES:
        assert (PACKAGES / package.name / "LICENSE").read_text() == license_text, package.name
        assert _project(package.name)["project"]["license"] == {"text": "BSD-3-Clause"}, package.name
