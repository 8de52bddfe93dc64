#!/usr/bin/env python3
"""What every OpenReg package, installed, adds to `import torch`.

Times `import torch` in fresh processes of this environment (which holds
every OpenReg package), alternating two kinds: with torch's device backend
autoload (torch-openreg and its layers load, as for any user) and with
TORCH_DEVICE_BACKEND_AUTOLOAD=0 (the anchor: torch as if OpenReg were not
installed). Prints the median of each, their difference and ratio, and
where the difference goes (`python -X importtime`, top-level modules that
autoload imports). Target: at most 0.3 s more than the anchor.

    .venv/bin/python tools/bench/import_cost.py [--processes 10]
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

TARGET_EXTRA_SECONDS = 0.3
IMPORT = "import torch"


def environment(autoload: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TORCH_DEVICE_BACKEND_AUTOLOAD"}
    if not autoload:
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    return env


def import_seconds(autoload: bool) -> float:
    """Wall time of one fresh process that imports torch, less the interpreter's own start."""
    env = environment(autoload)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", IMPORT], check=True, env=env)
    with_torch = time.perf_counter() - start
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True, env=env)
    return with_torch - (time.perf_counter() - start)


def heaviest_autoload_imports(count: int = 8) -> list[tuple[float, str]]:
    """The modules autoload's own imports spend most on (cumulative seconds), from -X importtime."""
    result = subprocess.run([sys.executable, "-X", "importtime", "-c", IMPORT], capture_output=True, text=True,
                            check=True, env=environment(True))
    modules = []
    for line in result.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.removeprefix("import time:").split("|")
        if not cumulative.strip().isdigit():
            continue
        depth = len(name) - len(name.lstrip())
        if depth <= 3 and name.strip().split(".")[0] in ("torch_openreg", "openreg_runtime", "openreg_amp",
                                                         "openreg_distributed", "openreg_onnx", "openreg_perf"):
            modules.append((int(cumulative) / 1e6, name.strip()))
    return sorted(modules, reverse=True)[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=10, help="fresh processes of each kind")
    args = parser.parse_args()
    import_seconds(True)  # the first process of a run reads the files from disk
    samples = {True: [], False: []}
    for _ in range(args.processes):
        for autoload in (False, True):
            samples[autoload].append(import_seconds(autoload))
    anchor, openreg = statistics.median(samples[False]), statistics.median(samples[True])
    print(f"import torch, median of {args.processes} fresh processes each (interpreter start subtracted)")
    print(f"  without OpenReg (TORCH_DEVICE_BACKEND_AUTOLOAD=0, anchor)  {anchor:6.3f} s")
    print(f"  with every OpenReg package (autoload)                      {openreg:6.3f} s")
    extra = openreg - anchor
    verdict = "met" if extra <= TARGET_EXTRA_SECONDS else "NOT met"
    print(f"  difference {extra:+.3f} s, ratio {openreg / anchor:.2f}x   "
          f"(target <= +{TARGET_EXTRA_SECONDS} s: {verdict})")
    print("where autoload's imports go (-X importtime, cumulative):")
    for seconds, name in heaviest_autoload_imports():
        print(f"  {seconds:6.3f} s  {name}")


if __name__ == "__main__":
    main()
