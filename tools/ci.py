#!/usr/bin/env python3.11
"""CI's machinery: the combinations of packages, the plain path, and the
scheduler that runs CI's steps side by side. `tools/dev.py test` calls it
after setup, and `tools/dev.py combination` (hatch's environments) uses its
combinations.

    python3.11 tools/ci.py steps                     CI's steps, longest first, with their expected times
    python3.11 tools/ci.py step NAME [PYTEST ARGS]   one step alone (after tools/dev.py setup)

Standard library only, like tools/dev.py.
"""

from __future__ import annotations

import atexit
import fcntl
import json
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cross_build  # noqa: E402  (tools/cross_build.py)
from dev import (  # noqa: E402  (after the path line: tools/ is not a package)
    BUILD_DOCS,
    BUILD_LOGS,
    PACKAGES,
    PYTHON,
    ROOT,
    VENV,
    WHEELHOUSE,
    build_environment,
    dependency_groups,
    elapsed,
    install_pins,
    pins,
    run,
    run_logged,
    setup,
)

COMBINATION_ENVS = ROOT / "build" / "combinations"
TORCH_OPENREG_TESTS = ROOT / "packages" / "torch-openreg" / "tests"
DISTRIBUTED_COLLECTIVES_TESTS = ROOT / "packages" / "openreg-distributed" / "tests" / "test_collectives.py"
OPENREG_OVERRIDES = TORCH_OPENREG_TESTS / "conformance_overrides.py"  # the conformance kit's, for openreg

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
    "conformance": ("conformance",),
    "all": ("all",),
}
CI_COMBINATIONS = [name for name in COMBINATIONS if name not in ("runtime", "all")]
# LITERALINCLUDE END: COMBINATIONS


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


def combination_command(args: list[str]) -> None:
    """`tools/dev.py combination NAME [ARGS]`, run by hatch's environments."""
    if not args or args[0] not in COMBINATIONS:
        sys.exit(f"tools/dev.py combination NAME: NAME is one of {', '.join(COMBINATIONS)}")
    here = Path(sys.prefix)
    if here == Path(sys.base_prefix) or here == ROOT / ".venv":
        sys.exit("tools/dev.py combination replaces the OpenReg packages of the environment it runs in: "
                 "run it inside a combination's own environment (hatch run core:test)")
    setup()
    install_pins(here, combination_groups(args[0]))
    try:
        test_combination(here / "bin" / "python", args[0], args[1:])
    except subprocess.CalledProcessError as failure:
        sys.exit(failure.returncode)


# ------------------------------------------------ CI's environments

# Note [One torch for CI's environments]
# Every environment CI makes needs torch, and unpacking it took 30 to 50 s
# per environment on CI's 2-core machine. So CI installs the "torch" group
# once, into build/combinations/_torch, and each environment reads it through
# a .pth file in its site-packages: pip sees torch as installed and never
# touches it, while each environment installs its own OpenReg packages and
# its other pins as before. Nothing writes to the shared one after it is made.
SHARED_TORCH = COMBINATION_ENVS / "_torch"


def environment_python(environment: Path) -> Path:
    return environment / "bin" / "python"


def site_packages(environment: Path) -> Path:
    where = "import sysconfig; print(sysconfig.get_path('purelib'))"
    found = subprocess.run([environment_python(environment), "-c", where], capture_output=True, text=True, check=True)
    return Path(found.stdout.strip())


def make_environment(name: str, groups: tuple[str, ...]) -> Path:
    """build/combinations/NAME with `groups` pinned, torch from the shared one."""
    environment = COMBINATION_ENVS / name
    if not environment_python(environment).exists():
        run(sys.executable, "-m", "venv", environment)
    if "torch" in groups:
        with shared_torch_lock():
            if not environment_python(SHARED_TORCH).exists():
                run(sys.executable, "-m", "venv", SHARED_TORCH)
                seed_from_venv(SHARED_TORCH, ("torch",))
            install_pins(SHARED_TORCH, ("torch",))
        (site_packages(environment) / "openreg-shared-torch.pth").write_text(f"{site_packages(SHARED_TORCH)}\n")
    seed_from_venv(environment, tuple(group for group in groups if group != "torch"))
    install_pins(environment, groups)
    return environment


# Note [Environments seeded from .venv]
# Setup has already unpacked every pin into .venv, and pip unpacking them again
# took 50 s for torch and as long for the plain path's groups on CI's 2-core
# machine. So before pip runs, each distribution the groups' pins need (with
# what they require, as .venv's metadata says) is hard-linked from .venv, file
# by file as its RECORD lists them, and pip finds it installed. pip replaces an
# installed file, never edits it, so neither tree disturbs the other; what
# cannot be linked (another file system) pip installs as before.
SEED_CLOSURE = """
import importlib.metadata as metadata, json, sys
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
wanted, found = [Requirement(pin).name for pin in sys.argv[1:]], {}
while wanted:
    name = canonicalize_name(wanted.pop())
    if name in found:
        continue
    try:
        distribution = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        continue
    found[name] = [str(distribution.locate_file(file)) for file in distribution.files or ()]
    for text in distribution.requires or ():
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            wanted.append(requirement.name)
print(json.dumps(found))
"""


def seed_from_venv(environment: Path, groups: tuple[str, ...]) -> None:
    requirements = pins(groups)
    if not requirements:
        return
    listed = subprocess.run([PYTHON, "-c", SEED_CLOSURE, *requirements], capture_output=True, text=True)
    if listed.returncode != 0:
        return  # pip installs them
    source, target = site_packages(VENV), site_packages(environment)
    for files in json.loads(listed.stdout).values():
        for file in map(Path, files):
            try:
                relative = file.resolve().relative_to(source)
            except ValueError:
                continue  # a script in bin/ or a data file outside site-packages: CI runs python -m
            linked = target / relative
            if linked.exists() or not file.is_file():
                continue
            linked.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(file, linked)
            except OSError:
                return  # another file system: pip installs the rest


@contextmanager
def shared_torch_lock():
    """Held while the shared torch is made: steps run in processes of their own, so the lock is a file."""
    COMBINATION_ENVS.mkdir(parents=True, exist_ok=True)
    with open(COMBINATION_ENVS / ".shared-torch.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ci_combination(name: str, args: list[str]) -> None:
    environment = make_environment(name, combination_groups(name))
    test_combination(environment_python(environment), name, args)


# ------------------------------------------------------- the plain path

PLAIN_WHEELHOUSE = ROOT / "build" / "plain-wheelhouse"
# The packages with speed layers, and the CMake option that leaves them out.
SPEED_LAYER_OPTIONS = {"torch-openreg": "OPENREG_SPEED_LAYERS", "openreg-distributed": "OCCL_SPEED_LAYERS"}
# Tests of the speed layers themselves: every other test of torch-openreg
# runs on the plain build too.
SPEED_LAYER_TESTS = TORCH_OPENREG_TESTS / "fast"


def build_plain_wheel(name: str) -> Path:
    """Package name built without its speed layers (as if its csrc/fast/ were
    deleted: Note [Deletable speed layers], Note [occl's deletable speed
    layer]). It reuses setup's build folder: no plain file's compile command
    depends on the option, so ninja relinks without csrc/fast/'s objects and
    compiles nothing (the next setup, which says ON, relinks them back)."""
    PLAIN_WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    pattern = name.replace("-", "_") + "-*.whl"
    for stale in PLAIN_WHEELHOUSE.glob(pattern):
        stale.unlink()
    run_logged(f"{name}-plain", PYTHON, "-m", "pip", "wheel", "--verbose", "--no-build-isolation", "--no-deps",
               f"--config-settings=cmake.define.{SPEED_LAYER_OPTIONS[name]}=OFF",
               "--wheel-dir", PLAIN_WHEELHOUSE, ROOT / "packages" / name, env=build_environment())
    (wheel,) = PLAIN_WHEELHOUSE.glob(pattern)
    return wheel


def test_plain_path(args: list[str]) -> None:
    """torch-openreg's whole suite (but its speed layers' own tests) and
    openreg-distributed's collectives, on both built without their speed
    layers, in an environment of its own with the other packages as built
    against the full ones (the public kernel API is the same). occl's speed
    layer replaces one thing, an allreduce's body over IPC, so its plain path
    differs from the full build only there: the collectives' suite, which
    compares every collective, op and dtype with gloo's, covers it; the rest
    of occl's suite runs once, on the full build (combination-distributed)."""
    plain = [build_plain_wheel(name) for name in SPEED_LAYER_OPTIONS]
    python = environment_python(make_environment("plain", (*combination_groups("all"), "models")))
    run(python, "-m", "pip", "uninstall", "--quiet", "--yes", *[p.name for p in PACKAGES])
    run(python, "-m", "pip", "install", "--quiet", "--no-index", "--find-links", WHEELHOUSE, *plain,
        *[p.name for p in PACKAGES if p.name not in SPEED_LAYER_OPTIONS])
    check_installed(python, [p.name for p in PACKAGES])
    run(python, "-c", "import torch, torch_openreg._C as c, openreg_distributed._C as occl; "
                      "assert not c._fast_paths_enabled() and not occl._speed_layer_installed(), 'speed layers'")
    run(python, "-m", "pytest", *CI_PYTEST, TORCH_OPENREG_TESTS, f"--ignore={SPEED_LAYER_TESTS}",
        DISTRIBUTED_COLLECTIVES_TESTS, *args, env=ALL)
    # PyTorch's operator and module databases against the CPU, as a vendor runs them (the kit's command).
    run(python, "-m", "openreg_conformance", "--device", "openreg", "--groups", "operators",
        "--overrides", OPENREG_OVERRIDES, "--log", BUILD_LOGS / "plain-operators.log",
        "--report", BUILD_LOGS / "plain-operators.json", env=ALL)


# ----------------------------------------------------------- CI's steps

# .venv holds every package: the "all" combination.
ALL = combination_environment("all")
# CI's pytest runs keep no cache (steps side by side would write it at once)
# and name their ten slowest tests, for whoever balances the suite next.
CI_PYTEST = ["-q", "-p", "no:cacheprovider", "--durations=10"]
# The full build's tests: the runtime's, the tools', the cross-package ones
# (every package installed), and torch-openreg's speed layers' own tests.
# torch-openreg's other tests run once, on the plain build (plain-path),
# with PyTorch's operator and module databases compared with the CPU (the
# kit's operators group), and the layers' own suites in their combinations.
# The conformance kit's combination holds the core alone, the full build:
# there the whole kit runs, the operators group among its groups, and the
# groups a layer registers (autocast, GradScaler, distributed) skip; here,
# with every layer, OpenReg runs the whole kit again and the kit catches the
# defects seeded into those layers.
CONFORMANCE_TESTS = ROOT / "packages" / "openreg-conformance" / "tests"
CROSS_BUILD_TESTS = ROOT / "tools" / "tests" / "test_cross_build.py"  # in their own step, cross-platform
SUITE_PARTS = {
    "suite-runtime-tools-and-cross-package": [ROOT / "packages" / "openreg-runtime" / "tests", ROOT / "tools" / "tests",
                                              ROOT / "tests", f"--ignore={CROSS_BUILD_TESTS}"],
    "suite-speed-layers": [SPEED_LAYER_TESTS],
    "suite-conformance-with-every-layer": [CONFORMANCE_TESTS / "test_openreg_conforms.py",
                                           CONFORMANCE_TESTS / "test_negative_controls.py",
                                           "-k", "conforms or autocast or allreduce"],
}


def pytest_step(tests: list) -> Callable[[list[str]], None]:
    return lambda args: run(PYTHON, "-m", "pytest", *CI_PYTEST, *tests, *args, env=ALL)


def test_cross_platform(args: list[str]) -> None:
    """The runtime built for Windows and run under Wine, and linked for macOS on both architectures
    (tools/cross_build.py). The toolchains the machine lacks are installed first where it can (as root,
    with apt-get: CI's machines), and there, or under CI, a missing one fails; elsewhere its tests skip,
    naming what to install."""
    cross_build.install_toolchains(list(cross_build.TARGETS))
    required = cross_build.can_install() or bool(os.environ.get("CI"))
    run(PYTHON, "-m", "pytest", *CI_PYTEST, "-rs", CROSS_BUILD_TESTS, *args,
        env={**ALL, **({"OPENREG_REQUIRE_CROSS_BUILDS": "1"} if required else {})})


# Each step takes the pytest arguments given to `tools/dev.py test`.
CI_STEPS = {
    "docs": lambda args: run(*BUILD_DOCS),
    "sanitize": lambda args: run(PYTHON, "tools/sanitize.py"),
    **{f"combination-{name}": (lambda args, name=name: ci_combination(name, args)) for name in CI_COMBINATIONS},
    "plain-path": test_plain_path,
    **{part: pytest_step(tests) for part, tests in SUITE_PARTS.items()},
    "cross-platform": test_cross_platform,
}


# ------------------------------------------------------ CI's scheduler

# Note [CI's scheduler]
# After the builds, CI's checks take about half an hour one after another,
# and most keep one core busy (pytest, the guide's snippets, a linker). So
# `tools/dev.py test` runs as many steps side by side as the machine has
# cores. Each step is `tools/ci.py step NAME` in a process of its own, its
# output in build/logs/ci-NAME.log, printed whole when it ends, so outputs
# never interleave. The steps start longest first, by the time each took
# when last measured, and each worker takes the next step as soon as it is
# free (list scheduling, longest first: never worse than 4/3 of the best
# split, and robust to a step that runs longer than measured). The times
# come from the last run here (ci-step-times.json under build/logs/), else from the
# last fresh-clone run, committed as tools/ci_step_times.json. Steps write
# nothing in common: .venv is only read, each environment of
# build/combinations is a step's own (the shared torch is made once, under a
# lock), the sanitizer has its own build folder, and pytest keeps no cache.
# A failed step lets the running ones finish and starts no more. A step that
# needs no wheel has already started, beside the builds (Note [Steps beside
# the builds]).
MEASURED_TIMES = BUILD_LOGS / "ci-step-times.json"
COMMITTED_TIMES = ROOT / "tools" / "ci_step_times.json"


def expected_times() -> dict[str, float]:
    """Each step's last measured time in seconds (a step never measured: infinity, so it starts first)."""
    times = {}
    for source in (COMMITTED_TIMES, MEASURED_TIMES):
        if source.exists():
            times.update(json.loads(source.read_text()))
    return {name: times.get(name, math.inf) for name in CI_STEPS}


# LITERALINCLUDE START: SCHEDULE
def schedule() -> list[str]:
    """CI's steps, longest first."""
    times = expected_times()
    return sorted(CI_STEPS, key=lambda name: -times[name])
# LITERALINCLUDE END: SCHEDULE


def busy_cpu_seconds() -> float | None:
    """Seconds the machine's cores have been busy since boot (Linux; None elsewhere)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    user, nice, system = (int(f) for f in fields[:3])
    return (user + nice + system) / os.sysconf("SC_CLK_TCK")


# Note [Steps beside the builds]
# A step that needs no OpenReg wheel starts as soon as .venv holds its pinned
# tools (BESIDE_THE_BUILDS_GROUPS, installed before the other pins), in the
# background, while setup installs the other pins and builds the packages:
# those leave a core idle for long stretches (pip downloading and unpacking
# torch, linking, a package of a few files, the quick checks), and the cross
# builds' single-threaded compiles of zig's libc++ fill them. Its output and
# time are reported like any other step's, once the steps on the workers have
# ended.
STEPS_BESIDE_THE_BUILDS = ("cross-platform",)
BESIDE_THE_BUILDS_GROUPS = ("test", "build", "cross")  # pytest, cmake and ninja, zig


class StepProcess:
    """`tools/ci.py step NAME` in a process of its own, its output in build/logs/ci-NAME.log."""

    def __init__(self, name: str, args: list[str]) -> None:
        BUILD_LOGS.mkdir(parents=True, exist_ok=True)
        self.name, self.log_path, self.start = name, BUILD_LOGS / f"ci-{name}.log", time.monotonic()
        self._log = open(self.log_path, "w")
        self.process = subprocess.Popen([sys.executable, __file__, "step", name, *args], cwd=ROOT, stdout=self._log,
                                        stderr=subprocess.STDOUT)
        atexit.register(self.process.kill)  # a failed setup or check leaves nothing running behind it
        self.took = None  # its time, from start to end, whenever it is waited for
        self._timer = threading.Thread(target=self._time, daemon=True)
        self._timer.start()

    def _time(self) -> None:
        self.process.wait()
        self.took = time.monotonic() - self.start

    def wait(self) -> tuple[int, float]:
        self._timer.join()
        self._log.close()
        return self.process.returncode, self.took


def start_steps_beside_the_builds(args: list[str]) -> list[StepProcess]:
    return [StepProcess(name, args) for name in STEPS_BESIDE_THE_BUILDS]


def run_steps(args: list[str], workers: int, beside: list[StepProcess] = ()) -> None:
    """Runs every step but those already running beside the builds, `workers`
    at a time, longest first (Note [CI's scheduler]), then waits for those;
    exits with the first failed step's status once the running ones have
    stopped."""
    BUILD_LOGS.mkdir(parents=True, exist_ok=True)
    pending = [name for name in schedule() if name not in {step.name for step in beside}]
    lock, failures, times, ran_on = threading.Lock(), [], {}, {}

    def finished(name: str, code: int, took: float, where: str) -> None:
        with lock:
            times[name], ran_on[name] = took, where
            print(f"\n===== {name}: {'passed' if code == 0 else 'FAILED'} in {elapsed(took)}", flush=True)
            print((BUILD_LOGS / f"ci-{name}.log").read_text(errors="replace"), flush=True)
            if code != 0:
                failures.append(code)

    def worker(number: int) -> None:
        while True:
            with lock:
                if failures or not pending:
                    return
                name = pending.pop(0)
            finished(name, *StepProcess(name, args).wait(), f"worker {number}")

    start, busy_at_start = time.monotonic(), busy_cpu_seconds()
    threads = [threading.Thread(target=worker, args=(number,)) for number in range(1, workers + 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for step in beside:
        finished(step.name, *step.wait(), "beside the builds")
    for where in sorted(set(ran_on.values())):
        print(f"{where}: " + ", ".join(f"{name} {elapsed(times[name])}" for name in times if ran_on[name] == where))
    wall = time.monotonic() - start
    busy = busy_cpu_seconds()
    usage = (f", the cores {100 * (busy - busy_at_start) / (wall * (os.cpu_count() or 1)):.0f}% busy"
             if busy is not None and busy_at_start is not None else "")
    print(f"all steps: {elapsed(wall)} on {workers} workers{usage}", flush=True)
    if not failures:  # a failed run's times are not the steps' times
        MEASURED_TIMES.write_text(json.dumps({name: round(t, 1) for name, t in times.items()}, indent=1) + "\n")
        print(f"step times saved to {MEASURED_TIMES.relative_to(ROOT)}")
    if failures:
        sys.exit(failures[0])


def test(args: list[str], beside: list[StepProcess] = ()) -> None:
    """`tools/dev.py test ARGS`, after setup (and the steps it started beside
    its builds): the quick checks, then every step."""
    for check in (["tools/docs_check.py"], ["tools/layering.py"], ["tools/size_report.py"], ["tools/api_check.py"],
                  ["-m", "ruff", "check", "."]):
        run(PYTHON, *check)
    run_steps(args, workers=max(2, os.cpu_count() or 2), beside=beside)


def main() -> None:
    command, args = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("", [])
    if command == "steps":
        times = expected_times()
        for name in schedule():
            print(f"{name:36} {elapsed(times[name]) if math.isfinite(times[name]) else 'never measured'}")
        return
    if command == "step" and args and args[0] in CI_STEPS:
        try:
            return CI_STEPS[args[0]](args[1:])
        except subprocess.CalledProcessError as failure:
            sys.exit(failure.returncode)
    sys.exit(__doc__ + f"\nsteps: {', '.join(CI_STEPS)}")


if __name__ == "__main__":
    main()
