#!/usr/bin/env python3.11
"""Builds openreg-runtime for Windows and macOS from Linux, with the same CMake, and runs its C API suite on Windows.

    python3.11 tools/cross_build.py windows               libopenreg.dll and c_api_suite.exe
    python3.11 tools/cross_build.py windows --run         ... and the suite under Wine
    .venv/bin/python tools/cross_build.py macos-arm64     libopenreg.dylib and c_api_suite, linked
    python3.11 tools/cross_build.py --install-toolchains windows --run
                                                          installs what is missing first (as root, with apt-get)

Windows: MinGW-w64's compilers (Debian: g++-mingw-w64-x86-64-posix) and Debian's Wine (wine, wine64). The DLL
and the program carry their C++ runtime, so Wine needs nothing else. macOS: `zig c++` from PyPI's ziglang (the
project's `cross` dependency group, in .venv), which carries the macOS SDK's headers and libSystem; the programs
are linked but cannot run here. Each target builds in build/cross/<target>, and zig keeps what it compiles for a
target (its libc++) in build/cross/zig-cache. Exits with the first failure's status. Standard library only.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ROOT / "packages" / "openreg-runtime"
CROSS = ROOT / "build" / "cross"
ZIG_CACHE = CROSS / "zig-cache"
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"


@dataclass(frozen=True)
class Target:
    system: str                      # CMAKE_SYSTEM_NAME
    compilers: tuple[str, ...] = ()  # C and C++, commands on PATH
    zig_target: str | None = None    # or zig cc and zig c++ for this target
    runs_here: bool = False          # its suite runs here (under Wine)
    packages: str = ""               # Debian's packages that give the compilers and the runner


# LITERALINCLUDE START: CROSS_TARGETS
# macOS means Apple silicon: PyTorch has published no wheels for Intel Macs
# since 2.3 (pytorch/pytorch#114602), so the torch this project pins cannot
# run on one.
TARGETS = {
    "windows": Target("Windows", ("x86_64-w64-mingw32-gcc-posix", "x86_64-w64-mingw32-g++-posix"), runs_here=True,
                      packages="g++-mingw-w64-x86-64-posix wine wine64"),
    "macos-arm64": Target("Darwin", zig_target="aarch64-macos"),
}
# LITERALINCLUDE END: CROSS_TARGETS


def zig_python() -> str | None:
    """An interpreter that has PyPI's ziglang: this one, else the project's .venv."""
    if importlib.util.find_spec("ziglang") is not None:
        return sys.executable
    if VENV_PYTHON.exists() and subprocess.run([VENV_PYTHON, "-c", "import ziglang"],
                                               capture_output=True).returncode == 0:
        return str(VENV_PYTHON)
    return None


def missing_tools(name: str, run: bool) -> list[str]:
    target = TARGETS[name]
    if target.zig_target is not None:
        return [] if zig_python() is not None else ["ziglang (pip install ziglang, or tools/dev.py setup)"]
    needed = [*target.compilers, "cmake"] + (["wine"] if run and target.runs_here else [])
    return [tool for tool in needed if shutil.which(tool) is None]


def can_install() -> bool:
    return os.geteuid() == 0 and shutil.which("apt-get") is not None


def install_toolchains(names: list[str]) -> None:
    """Debian's packages for the targets whose tools are missing, where this process may install them."""
    packages = sorted({p for name in names if missing_tools(name, run=True) for p in TARGETS[name].packages.split()})
    if not packages:
        return
    if not can_install():
        print(f"cross_build: cannot install {' '.join(packages)} here (needs root and apt-get)", file=sys.stderr)
        return
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], check=True, env=environment, stdout=subprocess.DEVNULL)
    subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages], check=True,
                   env=environment, stdout=subprocess.DEVNULL)


def zig_wrappers(name: str, folder: Path) -> tuple[Path, Path]:
    """CMake takes one program per compiler: two small scripts that run `zig cc` and `zig c++` for the target."""
    target, python = TARGETS[name], zig_python()
    wrappers = []
    for language in ("cc", "c++"):
        wrapper = folder / f"zig-{language}"
        # Without UBSan, which zig cc turns on in unoptimised builds (and CMake's compiler checks are).
        wrapper.write_text(f'#!/bin/sh\nexec "{python}" -m ziglang {language} -target {target.zig_target} '
                           f'-fno-sanitize=undefined "$@"\n')
        wrapper.chmod(0o755)
        wrappers.append(wrapper)
    return wrappers[0], wrappers[1]


def build(name: str) -> Path:
    target, folder = TARGETS[name], CROSS / name
    folder.mkdir(parents=True, exist_ok=True)
    c_compiler, cxx_compiler = zig_wrappers(name, folder) if target.zig_target else target.compilers
    environment = {**os.environ, "ZIG_GLOBAL_CACHE_DIR": str(ZIG_CACHE)}
    subprocess.run(["cmake", "-S", RUNTIME, "-B", folder, f"-DCMAKE_SYSTEM_NAME={target.system}",
                    f"-DCMAKE_C_COMPILER={c_compiler}", f"-DCMAKE_CXX_COMPILER={cxx_compiler}",
                    # Unoptimised: what these builds check is that the code compiles, links and runs.
                    "-DCMAKE_BUILD_TYPE=", "-DOPENREG_C_API_SUITE=ON"], check=True, stdout=subprocess.DEVNULL,
                   env=environment)
    subprocess.run(["cmake", "--build", folder, "--parallel", str(os.cpu_count() or 2)], check=True, env=environment)
    return folder


def built_files(name: str) -> list[Path]:
    folder = CROSS / name
    if TARGETS[name].system == "Windows":
        return [folder / "libopenreg.dll", folder / "c_api_suite.exe"]
    return [folder / "libopenreg.dylib", folder / "c_api_suite"]


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
    parser.add_argument("targets", nargs="+", choices=sorted(TARGETS))
    parser.add_argument("--run", action="store_true", help="run the C API suite where it can run here (Windows)")
    parser.add_argument("--install-toolchains", action="store_true",
                        help="install Debian's packages for the targets first, as root with apt-get")
    arguments = parser.parse_args()
    if arguments.install_toolchains:
        install_toolchains(arguments.targets)
    for name in arguments.targets:
        missing = missing_tools(name, arguments.run)
        if missing:
            how = f"Debian: apt-get install {TARGETS[name].packages}" if TARGETS[name].packages else "PyPI"
            print(f"cross_build: {name}: not installed: {', '.join(missing)} ({how})", file=sys.stderr)
            return 2
    for name in arguments.targets:
        folder = build(name)
        print(f"{name}: built {' and '.join(str(f.relative_to(ROOT)) for f in built_files(name))}", flush=True)
        if arguments.run and TARGETS[name].runs_here:
            code = run_suite(folder)
            if code != 0:
                return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
