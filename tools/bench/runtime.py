#!/usr/bin/env python3
"""Benchmark libopenreg: builds tools/bench/runtime_bench.cpp against the
installed openreg-runtime and runs it. Prints each figure with its anchor
(plain memcpy for copies) and the ratio. Run with the repository's .venv:

    .venv/bin/python tools/bench/runtime.py
"""

import subprocess
import sys
import tempfile
from pathlib import Path

import openreg_runtime

SOURCE = Path(__file__).with_name("runtime_bench.cpp")


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        binary = Path(scratch) / "runtime_bench"
        subprocess.run(
            ["c++", "-std=c++17", "-O2", str(SOURCE), "-o", str(binary),
             f"-I{openreg_runtime.get_include()}", f"-L{openreg_runtime.get_library_dir()}",
             "-lopenreg", f"-Wl,-rpath,{openreg_runtime.get_library_dir()}"],
            check=True)
        sys.exit(subprocess.run([str(binary)]).returncode)


if __name__ == "__main__":
    main()
