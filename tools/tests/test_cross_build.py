"""tools/cross_build.py: the runtime built for Windows (MinGW-w64) and macOS (zig c++) from the same CMake; the
Windows C API suite run under Wine, the macOS library and suite checked as Mach-O files of the right architecture
that export exactly the C API.

Where a toolchain is missing these tests skip, naming it; CI's step cross-platform installs the toolchains first and
sets OPENREG_REQUIRE_CROSS_BUILDS, which turns such a skip into a failure."""

from __future__ import annotations

import importlib.util
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("openreg_cross_build", ROOT / "tools" / "cross_build.py")
cross_build = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)  # dataclasses look it up there
_spec.loader.exec_module(cross_build)

RUNTIME_HEADERS = ROOT / "packages" / "openreg-runtime" / "include" / "openreg"
SUITE_TESTS = 11  # tests/native/c_api_suite.cpp's


def build(*arguments: str) -> subprocess.CompletedProcess:
    for name in (a for a in arguments if a in cross_build.TARGETS):
        missing = cross_build.missing_tools(name, run="--run" in arguments)
        if missing and os.environ.get("OPENREG_REQUIRE_CROSS_BUILDS"):
            pytest.fail(f"{name}: not installed: {', '.join(missing)}")
        if missing:
            pytest.skip(f"{name}: not installed here: {', '.join(missing)}")
    done = subprocess.run([sys.executable, ROOT / "tools" / "cross_build.py", *arguments],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def test_the_windows_build_passes_the_c_api_suite_under_wine():
    lines = build("windows", "--run").stdout.splitlines()
    assert lines[-1] == f"{SUITE_TESTS} passed, 0 failed", lines
    assert all(path.is_file() for path in cross_build.built_files("windows"))


# LITERALINCLUDE START: MACH_O_CHECK
MACH_O_CPU = {"macos-arm64": 0x0100000C}  # CPU_TYPE_ARM64
MH_EXECUTE, MH_DYLIB, LC_SYMTAB = 2, 6, 0x2


def mach_o(path: Path) -> tuple[int, int, set[str]]:
    """A 64-bit Mach-O file's CPU type, file type, and the names of the symbols it defines and exports."""
    data = path.read_bytes()
    magic, cpu, _, file_type, commands = struct.unpack_from("<IiiII", data)
    assert magic == 0xFEEDFACF, f"{path} is not a 64-bit Mach-O file"
    exported, offset = set(), 32  # the load commands follow the 32-byte header
    for _ in range(commands):
        command, size = struct.unpack_from("<II", data, offset)
        if command == LC_SYMTAB:
            symbols, count, strings, _ = struct.unpack_from("<IIII", data, offset + 8)
            for index in range(count):
                name, kind = struct.unpack_from("<IB", data, symbols + 16 * index)
                if kind & 0x01 and kind & 0x0E == 0x0E:  # N_EXT, defined in a section (N_SECT)
                    exported.add(data[strings + name:data.index(b"\0", strings + name)].decode())
        offset += size
    return cpu, file_type, exported
# LITERALINCLUDE END: MACH_O_CHECK


def c_api_functions() -> set[str]:
    declared = " ".join(header.read_text() for header in RUNTIME_HEADERS.glob("*.h"))
    return set(re.findall(r"OPENREG_API [^;(]*?\b(or\w+)\(", declared))


@pytest.mark.parametrize("name", list(MACH_O_CPU))
def test_the_macos_build_links_for_the_architecture_and_exports_exactly_the_c_api(name):
    build(name)
    library, suite = cross_build.built_files(name)
    cpu, file_type, exported = mach_o(library)
    assert (cpu, file_type) == (MACH_O_CPU[name], MH_DYLIB)
    assert mach_o(suite)[:2] == (MACH_O_CPU[name], MH_EXECUTE)
    # Besides the C API: the linker's own two symbols, and the C++ allocation operators that every
    # library carrying libc++ defines (C++ lets a program replace them, so they stay visible).
    c_api = {symbol[1:] for symbol in exported if symbol.startswith("_or")}
    others = {s for s in exported if not s.startswith("_or") and not s.startswith(("__Znw", "__Zna", "__Zdl", "__Zda"))}
    assert c_api == c_api_functions()
    assert others == {"___dso_handle", "__mh_dylib_header"}


def test_missing_tools_are_named_with_how_to_install_them():
    done = subprocess.run([sys.executable, ROOT / "tools" / "cross_build.py", "windows", "--run"],
                          capture_output=True, text=True, env={"PATH": "/nonexistent"}, timeout=60)
    assert done.returncode == 2
    assert "x86_64-w64-mingw32-g++-posix" in done.stderr and "wine" in done.stderr
    assert "apt-get install g++-mingw-w64-x86-64-posix wine wine64" in done.stderr
