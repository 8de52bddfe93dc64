"""The cross-package tests' one rule: `@pytest.mark.needs_packages("openreg-amp", ...)`
runs a test only where those distributions belong to the combination under test.

tools/dev.py names the combination's distributions in OPENREG_COMBINATION_PACKAGES:
a needed package outside it skips the test (correct there, never counted as a
pass); one inside it but not installed fails the test, so in "all" every
cross-package test runs. Without the variable (a bare pytest), what is
installed decides. Not a fixture library: the tests' helpers live beside them.
"""

from __future__ import annotations

import os
from importlib.metadata import PackageNotFoundError, distribution

import pytest


def _installed(name: str) -> bool:
    try:
        distribution(name)
    except PackageNotFoundError:
        return False
    return True


def pytest_runtest_setup(item):
    marker = item.get_closest_marker("needs_packages")
    if marker is None:
        return
    declared = os.environ.get("OPENREG_COMBINATION_PACKAGES")
    combination = set(declared.split(",")) if declared else {n for n in marker.args if _installed(n)}
    absent = [name for name in marker.args if name not in combination]
    if absent:
        pytest.skip(f"needs {', '.join(absent)}, not part of this combination")
    missing = [name for name in marker.args if not _installed(name)]
    if missing:
        pytest.fail(f"{', '.join(missing)} belong to this combination but are not installed")
