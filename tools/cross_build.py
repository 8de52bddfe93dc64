#!/usr/bin/env python3.11
"""Builds openreg-runtime for Windows from Linux, with the same CMake, and runs its C API suite there.

    python3.11 tools/cross_build.py windows          libopenreg.dll and c_api_suite.exe
    python3.11 tools/cross_build.py windows --run    ... and the suite under Wine

The compilers are MinGW-w64's (Debian: apt-get install g++-mingw-w64-x86-64-posix), Wine is Debian's
wine64. The build folder is build/cross/windows; the DLL and the program carry their C++ runtime, so
Wine needs nothing else. Exits with the suite's status. Standard library only.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ROOT / "packages" / "openreg-runtime"
COMPILERS = {"windows": ("x86_64-w64-mingw32-gcc-posix", "x86_64-w64-mingw32-g++-posix")}
SYSTEM_NAMES = {"windows": "Windows"}


def missing_tools(target: str, run: bool) -> list[str]:
    needed = [*COMPILERS[target], "cmake"] + (["wine"] if run else [])
    return [tool for tool in needed if shutil.which(tool) is None]


def build(target: str) -> Path:
    folder = ROOT / "build" / "cross" / target
    c_compiler, cxx_compiler = COMPILERS[target]
    subprocess.run(["cmake", "-S", RUNTIME, "-B", folder, f"-DCMAKE_SYSTEM_NAME={SYSTEM_NAMES[target]}",
                    f"-DCMAKE_C_COMPILER={c_compiler}", f"-DCMAKE_CXX_COMPILER={cxx_compiler}",
                    "-DCMAKE_BUILD_TYPE=Release", "-DOPENREG_C_API_SUITE=ON"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", folder, "--parallel", str(os.cpu_count() or 2)], check=True)
    return folder


def run_suite(folder: Path) -> int:
    """The suite under Wine. Wine prints a crash report when the suite's fault test ends its child on
    purpose; only the suite's own lines are shown."""
    environment = {**os.environ, "WINEDEBUG": "-all"}
    done = subprocess.run(["wine", "c_api_suite.exe"], cwd=folder, env=environment, capture_output=True, text=True,
                          timeout=300)
    for line in done.stdout.splitlines():
        if line.startswith(("PASS ", "FAIL ")) or line.endswith(" failed"):
            print(line)
    return done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", choices=sorted(COMPILERS))
    parser.add_argument("--run", action="store_true", help="run the C API suite under Wine")
    arguments = parser.parse_args()
    missing = missing_tools(arguments.target, arguments.run)
    if missing:
        print(f"cross_build: not installed: {', '.join(missing)} (Debian: apt-get install "
              "g++-mingw-w64-x86-64-posix wine64)", file=sys.stderr)
        return 2
    folder = build(arguments.target)
    print(f"built {folder / 'libopenreg.dll'} and {folder / 'c_api_suite.exe'}")
    return run_suite(folder) if arguments.run else 0


if __name__ == "__main__":
    sys.exit(main())
