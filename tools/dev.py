#!/usr/bin/env python3.11
"""OpenReg's developer entry point: set up the repository's .venv, then run.

    python3.11 tools/dev.py setup        create/refresh .venv, build what changed
    python3.11 tools/dev.py demo         setup, then run the demo
    python3.11 tools/dev.py docs         setup, then build the guide (docs/_build/html)
    python3.11 tools/dev.py test         setup, then every check CI runs
    python3.11 tools/dev.py pytest ARGS  setup, then pytest with ARGS

Idempotent: requirements are reinstalled only when tools/requirements-dev.txt
changes, and a package is rebuilt only when one of its files changes (its
persistent CMake build directory then recompiles only the changed files).
Standard library only, so it runs before anything is installed.
"""

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
PYTHON = VENV / "bin" / "python"
STAMPS = VENV / "openreg-stamps"
REQUIREMENTS = ROOT / "tools" / "requirements-dev.txt"
# Build order follows the dependency direction: runtime <- torch-openreg <- layers.
PACKAGES = ["openreg-runtime", "torch-openreg", "openreg-amp", "openreg-distributed", "openreg-onnx"]
# Files that do not affect what a package installs.
SKIPPED_DIRS = {"build", "tests", "__pycache__", ".pytest_cache"}
# The guide as a site: warnings (a stale quote, a snippet that fails) are errors,
# every problem is reported, and -E rereads every page so each snippet runs again.
BUILD_DOCS = [PYTHON, "-m", "sphinx", "-W", "--keep-going", "-E", "-q", "-b", "html", "docs", "docs/_build/html"]


def run(*command: str | Path, env: dict | None = None) -> None:
    print("+", " ".join(str(c) for c in command), flush=True)
    subprocess.run([str(c) for c in command], cwd=ROOT, env=env, check=True)


def fingerprint(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def package_files(package: Path) -> list[Path]:
    files = []
    for directory, subdirs, names in os.walk(package):
        subdirs[:] = [d for d in subdirs if d not in SKIPPED_DIRS and not d.endswith(".egg-info")]
        files += [Path(directory) / name for name in names if not name.endswith(".pyc")]
    return files


def up_to_date(name: str, digest: str) -> bool:
    stamp = STAMPS / name
    return stamp.exists() and stamp.read_text() == digest


def mark_done(name: str, digest: str) -> None:
    STAMPS.mkdir(exist_ok=True)
    (STAMPS / name).write_text(digest)


def build_environment() -> dict:
    env = dict(os.environ)
    # A backend installed earlier must not load while the next one builds.
    env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
    if shutil.which("ccache"):
        env.setdefault("CMAKE_CXX_COMPILER_LAUNCHER", "ccache")
        env.setdefault("CMAKE_C_COMPILER_LAUNCHER", "ccache")
    return env


def setup() -> None:
    if sys.version_info[:2] != (3, 11):
        sys.exit(f"OpenReg targets Python 3.11; run this with python3.11, not {sys.version}")
    if not PYTHON.exists():
        run(sys.executable, "-m", "venv", VENV)
    requirements = fingerprint([REQUIREMENTS])
    if not up_to_date("requirements", requirements):
        run(PYTHON, "-m", "pip", "install", "--quiet", "-r", REQUIREMENTS)
        mark_done("requirements", requirements)
    built_against: list[Path] = []  # a package compiles against the headers of those before it
    for name in PACKAGES:
        package = ROOT / "packages" / name
        built_against += package_files(package)
        digest = fingerprint(built_against)
        if up_to_date(name, digest):
            print(f"{name}: up to date", flush=True)
            continue
        run(PYTHON, "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-deps",
            package, env=build_environment())
        mark_done(name, digest)


# The operator tests that also run with the speed layers off
# (OPENREG_FAST_PATHS=0): the plain reference path must pass them alone.
TORCH_OPENREG_TESTS = ROOT / "packages" / "torch-openreg" / "tests"
PLAIN_PATH_TESTS = [TORCH_OPENREG_TESTS / name for name in (
    "test_opinfo.py", "test_training.py", "test_registration_scenarios.py", "test_registration_overrides.py",
    "test_registration.py", "test_kernel_api.py", "test_copies.py", "test_random.py", "test_attention.py",
    "test_fallback.py", "test_compile.py", "test_profiler.py", "test_graphs.py",
)]
# openreg-distributed's collectives and training, on the plain path too.
PLAIN_PATH_TESTS += [ROOT / "packages" / "openreg-distributed" / "tests" / name for name in (
    "test_collectives.py", "test_training.py",
)]
PLAIN_PATH = dict(os.environ, OPENREG_FAST_PATHS="0")


def main() -> None:
    command, args = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("", [])
    steps = {
        "setup": [],
        "demo": [[PYTHON, "tools/demo.py", *args]],
        "docs": [[*BUILD_DOCS, *args]],
        "pytest": [[PYTHON, "-m", "pytest", *args]],
        # Everything CI checks. pytest runs last, so its summary closes the output.
        "test": [
            [PYTHON, "tools/docs_check.py"],
            BUILD_DOCS,
            [PYTHON, "-m", "ruff", "check", "."],
            [PYTHON, "tools/sanitize.py"],
            ([PYTHON, "-m", "pytest", "-q", *PLAIN_PATH_TESTS], PLAIN_PATH),
            [PYTHON, "-m", "pytest", *args],
        ],
    }
    if command not in steps:
        sys.exit(__doc__)
    setup()
    for step in steps[command]:
        command_line, env = step if isinstance(step, tuple) else (step, None)
        try:
            run(*command_line, env=env)
        except subprocess.CalledProcessError as failure:
            sys.exit(failure.returncode)


if __name__ == "__main__":
    main()
