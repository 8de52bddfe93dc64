"""The kit's own tests. Their helpers live in kit_runs.py (pytest imports
test files with importlib, so this directory goes on sys.path)."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from kit_runs import run_kit  # noqa: E402


@pytest.fixture
def kit(tmp_path):
    """kit(*args, defect=None) -> (exit status, report): the kit run against openreg."""
    return lambda *args, defect=None: run_kit(tmp_path, *args, defect=defect)
