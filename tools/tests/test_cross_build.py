"""tools/cross_build.py: the runtime built for Windows with MinGW-w64 from the same CMake, and its C API
suite run under Wine, where both are installed (Debian: g++-mingw-w64-x86-64-posix, wine64)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("openreg_cross_build", ROOT / "tools" / "cross_build.py")
cross_build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cross_build)


def test_the_windows_build_passes_the_c_api_suite_under_wine():
    missing = cross_build.missing_tools("windows", run=True)
    if missing:
        pytest.skip(f"not installed here: {', '.join(missing)} (the README's command installs no system packages)")
    done = subprocess.run([sys.executable, ROOT / "tools" / "cross_build.py", "windows", "--run"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[-1] == "11 passed, 0 failed", lines
    assert (ROOT / "build" / "cross" / "windows" / "libopenreg.dll").is_file()


def test_missing_tools_are_named_with_how_to_install_them():
    done = subprocess.run([sys.executable, ROOT / "tools" / "cross_build.py", "windows", "--run"],
                          capture_output=True, text=True, env={"PATH": "/nonexistent"}, timeout=60)
    assert done.returncode == 2
    assert "x86_64-w64-mingw32-g++-posix" in done.stderr and "wine" in done.stderr
    assert "apt-get install g++-mingw-w64-x86-64-posix wine64" in done.stderr
