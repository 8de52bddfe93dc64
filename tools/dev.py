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
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
PYTHON = VENV / "bin" / "python"
WHEELHOUSE = ROOT / "build" / "wheelhouse"
COMBINATION_ENVS = ROOT / "build" / "combinations"
BUILD_LOGS = ROOT / "build" / "logs"
TORCH_OPENREG_TESTS = ROOT / "packages" / "torch-openreg" / "tests"


@dataclass(frozen=True)
class Package:
    name: str
    extra: str | None  # torch-openreg's extra that installs it; None: part of the core


# LITERALINCLUDE START: PACKAGES
# Build order follows the dependency direction: runtime <- torch-openreg <- layers.
PACKAGES = [
    Package("openreg-runtime", extra=None),
    Package("torch-openreg", extra=None),
    Package("openreg-amp", extra="amp"),
    Package("openreg-distributed", extra="distributed"),
    Package("openreg-onnx", extra="onnx"),
    Package("openreg-perf", extra="perf"),
]
# LITERALINCLUDE END: PACKAGES

# LITERALINCLUDE START: COMBINATIONS
# Each combination is one virtual environment holding torch, the core and the
# layers of these extras of torch-openreg, installed from the wheelhouse
# ("all" is the extra naming every layer). CI runs each in an environment of
# its own but "runtime"; "all", the full suite, runs in .venv, which holds
# every package.
COMBINATIONS = {
    "runtime": None,  # openreg-runtime alone, without torch
    "core": (),
    "amp": ("amp",),
    "distributed": ("distributed",),
    "onnx": ("onnx",),
    "perf": ("perf",),
    "all": ("all",),
}
CI_COMBINATIONS = [name for name in COMBINATIONS if name not in ("runtime", "all")]
# LITERALINCLUDE END: COMBINATIONS

# The .venv gets every pinned group of pyproject.toml but hatch's own.
VENV_GROUPS = ("torch", "test", "build", "lint", "docs", "onnx", "models", "quantization")
# Files that do not affect what a package installs.
SKIPPED_DIRS = {"build", "tests", "__pycache__", ".pytest_cache"}
# The guide as a site: warnings (a stale quote, a snippet that fails) are errors,
# every problem is reported, and -E rereads every page so each snippet runs again.
BUILD_DOCS = [PYTHON, "-m", "sphinx", "-W", "--keep-going", "-E", "-q", "-b", "html", "docs", "docs/_build/html"]


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


def install_pins(environment: Path, groups: tuple[str, ...]) -> None:
    """Installs the groups' pins into a virtual environment, when they changed."""
    requirements = pins(groups)
    digest = hashlib.sha256(json.dumps(requirements).encode()).hexdigest()
    stamps = environment / "openreg-stamps"
    if not up_to_date(stamps, "requirements", digest):
        print(f"installing {len(requirements)} pinned packages into {environment.relative_to(ROOT)} "
              "(torch among them: a minute or two)", flush=True)
        run_logged(f"pins-{environment.name}", environment / "bin" / "python", "-m", "pip", "install",
                   *requirements)
        mark_done(stamps, "requirements", digest)


def build_environment() -> dict:
    env = dict(os.environ)
    # A backend installed earlier must not load while the next one builds.
    env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
    if shutil.which("ccache"):
        env.setdefault("CMAKE_CXX_COMPILER_LAUNCHER", "ccache")
        env.setdefault("CMAKE_C_COMPILER_LAUNCHER", "ccache")
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


def setup() -> None:
    if sys.version_info[:2] != (3, 11):
        sys.exit(f"OpenReg targets Python 3.11; run this with python3.11, not {sys.version}")
    if not PYTHON.exists():
        run(sys.executable, "-m", "venv", VENV)
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


# ------------------------------------------------------------ combinations


def combination_packages(name: str) -> list[str]:
    """The OpenReg distributions combination `name` holds, exactly."""
    extras = COMBINATIONS[name]
    if extras is None:
        return ["openreg-runtime"]
    return [p.name for p in PACKAGES if p.extra is None or p.extra in extras or "all" in extras]


def combination_groups(name: str) -> tuple[str, ...]:
    """The pinned groups a combination's environment needs: the test tools,
    torch, and the third-party dependencies of its layers (a group named
    after the extra), so the layers themselves install with --no-index."""
    if COMBINATIONS[name] is None:
        return ("test",)
    extras = [p.extra for p in PACKAGES if p.name in combination_packages(name) and p.extra]
    return ("torch", "test", *[extra for extra in extras if extra in dependency_groups()])


# LITERALINCLUDE START: INSTALL_COMBINATION
def install_combination(python: Path, name: str) -> None:
    """Makes python's environment hold exactly combination `name`'s OpenReg
    packages, installed from the wheelhouse the way a user would:
    `pip install --no-index --find-links build/wheelhouse "torch-openreg[amp]"`.
    Its third-party pins (torch among them) are already installed, so pip
    reaches no registry and never replaces torch."""
    extras = COMBINATIONS[name]
    requirement = ("openreg-runtime" if extras is None
                   else "torch-openreg" + (f"[{','.join(extras)}]" if extras else ""))
    run(python, "-m", "pip", "uninstall", "--quiet", "--yes", *[p.name for p in PACKAGES])
    run(python, "-m", "pip", "install", "--quiet", "--no-index", "--find-links", WHEELHOUSE, requirement)
    check_installed(python, combination_packages(name))
# LITERALINCLUDE END: INSTALL_COMBINATION


def check_installed(python: Path, expected: list[str]) -> None:
    names = [p.name for p in PACKAGES]
    listing = subprocess.run(
        [python, "-c", "import json, sys, importlib.metadata as m\n"
                       "print(json.dumps(sorted({d.metadata['Name'] for d in m.distributions()} & set(sys.argv[1:]))))",
         *names], capture_output=True, text=True, check=True)
    installed = json.loads(listing.stdout)
    if installed != sorted(expected):
        sys.exit(f"the combination installed {installed}, expected exactly {sorted(expected)}: "
                 "check torch-openreg's extras in packages/torch-openreg/pyproject.toml")


def combination_tests(name: str) -> list[list[str | Path]]:
    """What proves a combination, as pytest arguments: "all" runs every test;
    a smaller one runs its layers' own tests (the core alone: its packaging
    tests), then the cross-package tests of tests/ (those needing a package
    outside the combination skip)."""
    if name == "all":
        return [[]]  # pyproject.toml's testpaths
    if COMBINATIONS[name] is None:
        return [[ROOT / "packages" / "openreg-runtime" / "tests"]]
    layers = [p.name for p in PACKAGES if p.extra and p.name in combination_packages(name)]
    own = ([ROOT / "packages" / layer / "tests" for layer in layers]
           or [TORCH_OPENREG_TESTS / "test_package.py", TORCH_OPENREG_TESTS / "test_layer_versions.py"])
    return [own, [ROOT / "tests", "-m", "needs_packages"]]


def combination_environment(name: str) -> dict:
    # tests/conftest.py fails a cross-package test whose packages belong to
    # the combination but are missing, and skips it only when they do not.
    return dict(os.environ, OPENREG_COMBINATION_PACKAGES=",".join(combination_packages(name)))


def test_combination(python: Path, name: str, args: list[str]) -> None:
    install_combination(python, name)
    for tests in combination_tests(name):
        run(python, "-m", "pytest", "-q", *tests, *args, env=combination_environment(name))


def ci_combination(name: str) -> None:
    """One fresh virtual environment per combination under build/combinations."""
    environment = COMBINATION_ENVS / name
    if not (environment / "bin" / "python").exists():
        run(sys.executable, "-m", "venv", environment)
    install_pins(environment, combination_groups(name))
    test_combination(environment / "bin" / "python", name, [])


def combination_command(args: list[str]) -> None:
    """`tools/dev.py combination NAME [ARGS]`, run by hatch's environments."""
    if not args or args[0] not in COMBINATIONS:
        sys.exit(f"tools/dev.py combination NAME: NAME is one of {', '.join(COMBINATIONS)}")
    here = Path(sys.prefix)
    if here == Path(sys.base_prefix) or here == VENV:
        sys.exit("tools/dev.py combination replaces the OpenReg packages of the environment it runs in: "
                 "run it inside a combination's own environment (hatch run core:test)")
    setup()
    install_pins(here, combination_groups(args[0]))
    try:
        test_combination(here / "bin" / "python", args[0], args[1:])
    except subprocess.CalledProcessError as failure:
        sys.exit(failure.returncode)


# ------------------------------------------------------------------- steps

# The operator tests that also run on torch-openreg built without its speed
# layers (csrc/fast/): the plain reference path must pass them alone.
PLAIN_PATH_TESTS = [TORCH_OPENREG_TESTS / name for name in (
    "test_opinfo.py", "test_training.py", "test_registration_scenarios.py", "test_registration_overrides.py",
    "test_registration.py", "test_kernel_api.py", "test_copies.py", "test_random.py", "test_attention.py",
    "test_fallback.py", "test_compile.py", "test_profiler.py", "test_graphs.py", "test_real_models.py",
    "test_quantized_tensors.py",
)]
# openreg-distributed's collectives and training, on the plain path too.
PLAIN_PATH_TESTS += [ROOT / "packages" / "openreg-distributed" / "tests" / name for name in (
    "test_collectives.py", "test_training.py",
)]
# .venv holds every package: the "all" combination.
ALL = combination_environment("all")
# CI runs every test once: the layers' own suites in their combinations, the
# rest in parts spread over the two lanes (Note [CI's two lanes]) to balance
# them: the runtime's and the cross-package tests of tests/ (with every
# package), torch-openreg's two longest files, the rest of torch-openreg's.
TORCH_OPENREG_LONGEST = [TORCH_OPENREG_TESTS / name for name in ("test_aot_inductor.py", "test_device_generic.py")]
SUITE_PARTS = {
    "suite-runtime-and-cross-package": [ROOT / "packages" / "openreg-runtime" / "tests", ROOT / "tests"],
    "suite-torch-openreg-longest": TORCH_OPENREG_LONGEST,
    "suite-torch-openreg": [TORCH_OPENREG_TESTS, *[f"--ignore={path}" for path in TORCH_OPENREG_LONGEST]],
}
PLAIN_WHEELHOUSE = ROOT / "build" / "plain-wheelhouse"
# CI's pytest runs keep no cache (two lanes would write it at once) and take
# the arguments given to `tools/dev.py test`, which passes them on here.
CI_PYTEST = ["-p", "no:cacheprovider", *json.loads(os.environ.get("OPENREG_CI_PYTEST_ARGS", "[]"))]


def build_plain_wheel() -> Path:
    """torch-openreg built without its speed layers (-DOPENREG_SPEED_LAYERS=OFF,
    as if csrc/fast/ were deleted: Note [Deletable speed layers]), in a build
    folder of its own, so the two builds never reconfigure each other."""
    PLAIN_WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    for stale in PLAIN_WHEELHOUSE.glob("torch_openreg-*.whl"):
        stale.unlink()
    run_logged("torch-openreg-plain", PYTHON, "-m", "pip", "wheel", "--verbose", "--no-build-isolation", "--no-deps",
               "--config-settings=cmake.define.OPENREG_SPEED_LAYERS=OFF",
               "--config-settings=build-dir=build/plain-{wheel_tag}",
               "--wheel-dir", PLAIN_WHEELHOUSE, ROOT / "packages" / "torch-openreg", env=build_environment())
    (wheel,) = PLAIN_WHEELHOUSE.glob("torch_openreg-*.whl")
    return wheel


def test_plain_path(args: list[str]) -> None:
    """The plain-path tests on torch-openreg built without csrc/fast/, in an
    environment of its own (build/combinations/plain) holding it and the
    other packages as built against the full one (the public kernel API is
    the same), so .venv keeps the full build meanwhile."""
    plain = build_plain_wheel()
    environment = COMBINATION_ENVS / "plain"
    if not (environment / "bin" / "python").exists():
        run(sys.executable, "-m", "venv", environment)
    install_pins(environment, (*combination_groups("all"), "models"))
    python = environment / "bin" / "python"
    run(python, "-m", "pip", "uninstall", "--quiet", "--yes", *[p.name for p in PACKAGES])
    run(python, "-m", "pip", "install", "--quiet", "--no-index", "--find-links", WHEELHOUSE, plain,
        *[p.name for p in PACKAGES if p.name != "torch-openreg"])
    check_installed(python, [p.name for p in PACKAGES])
    run(python, "-c", "import torch, torch_openreg._C as c; assert not c._fast_paths_enabled(), 'speed layers'")
    run(python, "-m", "pytest", "-q", *PLAIN_PATH_TESTS, *args, env=ALL)


def step(command_line: list, env: dict | None = None):
    return lambda: run(*command_line, env=env)


# ------------------------------------------------------------ CI's two lanes

# Note [CI's two lanes]
# After the builds, CI's checks take about 17 minutes one after another on
# its 2-core machine, and most of them keep one core busy (pytest, the
# guide's snippets, one compiler). So `test` runs them in two lanes side by
# side, each lane's steps in order, balanced by their times. Each step is
# `tools/dev.py ci-step NAME` in a process of its own, its output kept in
# build/logs/ci-NAME.log and printed whole when it ends, so the lanes' output
# never interleaves. Steps of different lanes write nothing in common: .venv
# is only read (the plain path has an environment of its own), each
# combination has its own, the sanitizer its own build folder, and pytest
# keeps no cache. A failed step stops both lanes after their current step.
CI_STEPS = {
    "docs": lambda: run(*BUILD_DOCS),
    "sanitize": lambda: run(PYTHON, "tools/sanitize.py"),
    **{f"combination-{name}": (lambda name=name: ci_combination(name)) for name in CI_COMBINATIONS},
    "plain-path": lambda: test_plain_path(CI_PYTEST),
    **{part: (lambda tests=tests: run(PYTHON, "-m", "pytest", *CI_PYTEST, *tests, env=ALL))
       for part, tests in SUITE_PARTS.items()},
}
# LITERALINCLUDE START: CI_LANES
CI_LANES = [
    ["docs", "sanitize", *[f"combination-{name}" for name in CI_COMBINATIONS], "suite-runtime-and-cross-package",
     "suite-torch-openreg-longest"],
    ["plain-path", "suite-torch-openreg"],
]
# LITERALINCLUDE END: CI_LANES


def run_lanes(lanes: list[list[str]]) -> None:
    """Runs the lanes side by side (Note [CI's two lanes]); exits with the
    first failed step's status after both lanes have stopped."""
    BUILD_LOGS.mkdir(parents=True, exist_ok=True)
    print_lock, failures, times = threading.Lock(), [], {}

    def run_lane(steps: list[str]) -> None:
        for name in steps:
            if failures:
                return
            log_path, start = BUILD_LOGS / f"ci-{name}.log", time.monotonic()
            with open(log_path, "w") as log:
                code = subprocess.run([sys.executable, __file__, "ci-step", name], cwd=ROOT, stdout=log,
                                      stderr=subprocess.STDOUT).returncode
            times[name] = time.monotonic() - start
            with print_lock:
                print(f"\n===== {name}: {'passed' if code == 0 else 'FAILED'} in {elapsed(times[name])}",
                      flush=True)
                print(log_path.read_text(errors="replace"), flush=True)
            if code != 0:
                failures.append(code)

    start = time.monotonic()
    threads = [threading.Thread(target=run_lane, args=(lane,)) for lane in lanes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for number, lane in enumerate(lanes, 1):
        print(f"lane {number}: " + ", ".join(f"{name} {elapsed(times[name])}" for name in lane if name in times))
    print(f"both lanes: {elapsed(time.monotonic() - start)}", flush=True)
    if failures:
        sys.exit(failures[0])


def main() -> None:
    command, args = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("", [])
    if command == "combination":
        return combination_command(args)
    if command == "ci-step":  # one step of a lane, run by run_lanes after setup
        try:
            return CI_STEPS[args[0]]()
        except subprocess.CalledProcessError as failure:
            sys.exit(failure.returncode)
    steps = {
        "setup": [],
        "wheels": [lambda: print("\n".join(str(wheel) for wheel in sorted(WHEELHOUSE.glob("*.whl"))))],
        "demo": [step([PYTHON, "tools/demo.py", *args])],
        "docs": [step([*BUILD_DOCS, *args])],
        "pytest": [step([PYTHON, "-m", "pytest", *args], ALL)],
        # Everything CI checks: the quick checks, then the rest in two lanes.
        "test": [
            step([PYTHON, "tools/docs_check.py"]),
            step([PYTHON, "tools/size_report.py"]),
            step([PYTHON, "tools/api_check.py"]),
            step([PYTHON, "-m", "ruff", "check", "."]),
            lambda: run_lanes(CI_LANES),
        ],
    }
    if command not in steps:
        sys.exit(__doc__)
    os.environ["OPENREG_CI_PYTEST_ARGS"] = json.dumps(args)  # for the lanes' pytest steps
    setup()
    for action in steps[command]:
        try:
            action()
        except subprocess.CalledProcessError as failure:
            sys.exit(failure.returncode)


if __name__ == "__main__":
    main()
