#!/usr/bin/env python3.11
"""OpenReg's developer entry point: set up the repository's .venv, then run.

    python3.11 tools/dev.py setup        create/refresh .venv, build what changed
    python3.11 tools/dev.py wheels       setup, then print the wheelhouse's wheels
    python3.11 tools/dev.py demo         setup, then run the demo
    python3.11 tools/dev.py docs         setup, then build the guide (docs/_build/html)
    python3.11 tools/dev.py test [ARGS]  setup, then every check CI runs, over every combination
                                         (ARGS go to the plain-path and suite pytest runs)
    python3.11 tools/dev.py pytest ARGS  setup, then pytest with ARGS
    python tools/dev.py combination NAME [ARGS]
                                         from inside a virtual environment (hatch's): install
                                         combination NAME from the wheelhouse, run its tests

CI's machinery (the combinations, the plain path, the scheduler) is tools/ci.py.

Every package is built once, as a wheel into build/wheelhouse (native ones
with --no-build-isolation inside .venv, which then installs the wheel so the
next package compiles against it). Idempotent: the pinned tools are
reinstalled only when the dependency groups of pyproject.toml change, and a
package is rebuilt only when one of its files changes (its persistent CMake
build directory then recompiles only the changed files).
Standard library only, so it runs before anything is installed.
"""

import hashlib
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
PYTHON = VENV / "bin" / "python"
WHEELHOUSE = ROOT / "build" / "wheelhouse"
BUILD_LOGS = ROOT / "build" / "logs"


@dataclass(frozen=True)
class Package:
    name: str
    extra: str | None  # torch-openreg's extra that installs it; None: part of the core
    # Whether torch_openreg loads it as a layer (its torch_openreg.extensions
    # entry point); the conformance kit registers nothing and is loaded by nobody.
    layer: bool = True


# LITERALINCLUDE START: PACKAGES
# Build order follows the dependency direction: runtime <- torch-openreg <- layers.
PACKAGES = [
    Package("openreg-runtime", extra=None),
    Package("torch-openreg", extra=None),
    Package("openreg-amp", extra="amp"),
    Package("openreg-distributed", extra="distributed"),
    Package("openreg-onnx", extra="onnx"),
    Package("openreg-perf", extra="perf"),
    Package("openreg-conformance", extra="conformance", layer=False),
]
# LITERALINCLUDE END: PACKAGES

# The .venv gets every pinned group of pyproject.toml but hatch's own.
VENV_GROUPS = ("torch", "test", "build", "lint", "docs", "onnx", "models", "quantization", "cross")
# Files that do not affect what a package installs.
SKIPPED_DIRS = {"build", "tests", "__pycache__", ".pytest_cache"}
# The guide as a site: warnings (a stale quote, a snippet that fails) are
# errors and every problem is reported. `docs` rebuilds the pages that changed
# since its last build (pass -E to reread every page); CI's build rereads every
# page (-E), so each snippet runs again against this checkout's packages.
SPHINX = [PYTHON, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "docs", "docs/_build/html"]
BUILD_DOCS = [*SPHINX, "-E"]


def elapsed(seconds: float) -> str:
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def run(*command: str | Path, env: dict | None = None) -> None:
    """Runs a command, showing it; a step longer than a few seconds ends with its time."""
    print("+", " ".join(str(c) for c in command), flush=True)
    start = time.monotonic()
    subprocess.run([str(c) for c in command], cwd=ROOT, env=env, check=True)
    if time.monotonic() - start > 5:
        print(f"  done in {elapsed(time.monotonic() - start)}", flush=True)


# Ninja's status line for each step of a build, "[12/40] Building CXX object ...".
NINJA_STEP = re.compile(r"^\s*\[(\d+)/(\d+)\] (Building \S+|Linking \S+)")
SILENCE_REPORT_S = 60


def forward_lines(stream, lines: queue.Queue) -> None:
    """Puts each line of stream into lines, then None (a thread, so the reader can time out)."""
    for line in stream:
        lines.put(line)
    lines.put(None)


def run_logged(label: str, *command: str | Path, env: dict | None = None) -> None:
    """Runs a long step (a package build, an install) without flooding the
    terminal: one line per file compiled or linked ("torch-openreg: 12/40
    compiled, 3m05s"), one per minute of silence, nothing else. The whole
    output goes to build/logs/<label>.log, whose end is printed if it fails."""
    print("+", " ".join(str(c) for c in command), flush=True)
    BUILD_LOGS.mkdir(parents=True, exist_ok=True)
    log_path = BUILD_LOGS / f"{label}.log"
    start = time.monotonic()
    process = subprocess.Popen([str(c) for c in command], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, errors="replace")
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=forward_lines, args=(process.stdout, lines), daemon=True).start()
    progress = "starting"
    with open(log_path, "w") as log:
        while True:
            try:
                line = lines.get(timeout=SILENCE_REPORT_S)
            except queue.Empty:
                print(f"  {label}: {progress}, still working, {elapsed(time.monotonic() - start)}", flush=True)
                continue
            if line is None:  # the output's end
                break
            log.write(line)
            step = NINJA_STEP.match(line)
            if step:
                done, total, action = step.groups()
                progress = f"{done}/{total} {'linked' if action.startswith('Linking') else 'compiled'}"
                print(f"  {label}: {progress}, {elapsed(time.monotonic() - start)}", flush=True)
    if process.wait() != 0:
        print("".join(log_path.read_text().splitlines(keepends=True)[-60:]), file=sys.stderr)
        print(f"{label}: failed; its whole output is in {log_path}", file=sys.stderr, flush=True)
        raise subprocess.CalledProcessError(process.returncode, command)
    print(f"  {label}: done in {elapsed(time.monotonic() - start)}", flush=True)


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


def up_to_date(stamps: Path, name: str, digest: str) -> bool:
    stamp = stamps / name
    return stamp.exists() and stamp.read_text() == digest


def mark_done(stamps: Path, name: str, digest: str) -> None:
    stamps.mkdir(exist_ok=True)
    (stamps / name).write_text(digest)


def dependency_groups() -> dict[str, list[str]]:
    """The root pyproject.toml's dependency groups: every third-party pin."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["dependency-groups"]


def pins(groups: tuple[str, ...]) -> list[str]:
    declared = dependency_groups()
    return sorted({pin for group in groups for pin in declared[group]})


def install_pins(environment: Path, groups: tuple[str, ...], stamp: str = "requirements") -> None:
    """Installs the groups' pins into a virtual environment, when they changed
    since the stamp of that name was written."""
    requirements = pins(groups)
    digest = hashlib.sha256(json.dumps(requirements).encode()).hexdigest()
    stamps = environment / "openreg-stamps"
    if not up_to_date(stamps, stamp, digest):
        print(f"installing {len(requirements)} pinned packages into {environment.relative_to(ROOT)} "
              "(torch among them: a minute or two)", flush=True)
        run_logged(f"pins-{environment.name}", environment / "bin" / "python", "-m", "pip", "install",
                   *requirements)
        mark_done(stamps, stamp, digest)


def build_environment() -> dict:
    env = dict(os.environ)
    # A backend installed earlier must not load while the next one builds.
    env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
    if shutil.which("ccache"):
        env.setdefault("CMAKE_CXX_COMPILER_LAUNCHER", "ccache")
        env.setdefault("CMAKE_C_COMPILER_LAUNCHER", "ccache")
        # ccache caches sources compiled with a precompiled header only when told that
        # __DATE__/__TIME__ and the header's own definitions may be ignored
        # (Note [Precompiled PyTorch headers] in packages/torch-openreg/CMakeLists.txt).
        env.setdefault("CCACHE_SLOPPINESS", "pch_defines,time_macros")
    return env


def wheel_of(name: str) -> list[Path]:
    return sorted(WHEELHOUSE.glob(name.replace("-", "_") + "-*.whl"))


# LITERALINCLUDE START: BUILD_WHEEL
def build_wheel(name: str) -> Path:
    """Builds packages/<name> into the wheelhouse with .venv's torch and
    build tools (no isolated build fetching a torch of its own), and installs
    it into .venv, where the packages after it compile against it."""
    for stale in wheel_of(name):
        stale.unlink()
    run_logged(name, PYTHON, "-m", "pip", "wheel", "--verbose", "--no-build-isolation", "--no-deps",
               "--wheel-dir", WHEELHOUSE, ROOT / "packages" / name, env=build_environment())
    (wheel,) = wheel_of(name)
    run(PYTHON, "-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall", wheel)
    return wheel
# LITERALINCLUDE END: BUILD_WHEEL


def setup(early: tuple[tuple[str, ...], Callable[[], None]] | None = None) -> None:
    """.venv with the pins, then every package built and installed. early, (groups, start): the pins of
    those groups first, then start() runs while the other pins install and the packages build."""
    if sys.version_info[:2] != (3, 11):
        sys.exit(f"OpenReg targets Python 3.11; run this with python3.11, not {sys.version}")
    if not PYTHON.exists():
        run(sys.executable, "-m", "venv", VENV)
    if early is not None:
        groups, start = early
        install_pins(VENV, groups, stamp="requirements-early")
        start()
    install_pins(VENV, VENV_GROUPS)
    stamps = VENV / "openreg-stamps"
    built_against: list[Path] = []  # a package compiles against the headers of those before it
    for package in PACKAGES:
        built_against += package_files(ROOT / "packages" / package.name)
        digest = fingerprint(built_against)
        if up_to_date(stamps, package.name, digest) and wheel_of(package.name):
            print(f"{package.name}: up to date", flush=True)
            continue
        build_wheel(package.name)
        mark_done(stamps, package.name, digest)


def step(command_line: list, env: dict | None = None):
    return lambda: run(*command_line, env=env)


def main() -> None:
    command, args = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("", [])
    if command in ("combination", "test"):
        import ci  # CI's machinery: tools/ci.py
        if command == "combination":
            return ci.combination_command(args)
    steps = {
        "setup": [],
        "wheels": [lambda: print("\n".join(str(wheel) for wheel in sorted(WHEELHOUSE.glob("*.whl"))))],
        "demo": [step([PYTHON, "tools/demo.py", *args])],
        # A line per silent minute, the whole output in build/logs/docs.log.
        "docs": [lambda: run_logged("docs", *SPHINX, *args)],
        "pytest": [step([PYTHON, "-m", "pytest", *args], dict(os.environ, OPENREG_COMBINATION_PACKAGES=",".join(
            p.name for p in PACKAGES)))],
        # Everything CI checks: the quick checks, then every step side by side (tools/ci.py), some of
        # them started beside the builds (Note [Steps beside the builds]).
        "test": [lambda: ci.test(args, beside)],
    }
    if command not in steps:
        sys.exit(__doc__)
    beside = []
    setup(early=(ci.BESIDE_THE_BUILDS_GROUPS, lambda: beside.extend(ci.start_steps_beside_the_builds(args)))
          if command == "test" else None)
    for action in steps[command]:
        try:
            action()
        except subprocess.CalledProcessError as failure:
            sys.exit(failure.returncode)


if __name__ == "__main__":
    main()
