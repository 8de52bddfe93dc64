#!/usr/bin/env python3
"""Run the runtime's tests against libopenreg built with ASan and UBSan.

Builds libopenreg alone (no Python module) under build/sanitize, then runs
the tests marked `sanitizer_safe` with that library taking the place of the
installed one: LD_LIBRARY_PATH wins over the bindings' RUNPATH, and the
sanitizer runtimes are preloaded because python itself is not instrumented.
Also builds and runs the C examples against the sanitized library.
Run it with the repository's .venv python (tools/dev.py test does).
"""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "packages" / "openreg-runtime"
BUILD = ROOT / "build" / "sanitize"
BIN = Path(sys.executable).parent
SANITIZERS = "address,undefined"


def run(command: list, env: dict | None = None) -> subprocess.CompletedProcess:
    print("+", " ".join(str(c) for c in command), flush=True)
    return subprocess.run([str(c) for c in command], cwd=ROOT, env=env, check=True,
                          stdout=None)


def compiler_file(name: str) -> str:
    found = subprocess.run(["cc", f"-print-file-name={name}"], capture_output=True, text=True,
                           check=True).stdout.strip()
    if not os.path.isabs(found):
        sys.exit(f"sanitize: the C compiler has no {name}; install the compiler's sanitizer runtimes")
    return found


def build_library() -> None:
    run([BIN / "cmake", "-S", PACKAGE, "-B", BUILD, "-G", "Ninja",
         f"-DCMAKE_MAKE_PROGRAM={BIN / 'ninja'}", "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
         f"-DOPENREG_SANITIZE={SANITIZERS}"])
    run([BIN / "cmake", "--build", BUILD])


def sanitized_environment() -> dict:
    env = dict(os.environ)
    # python is not linked against libstdc++: without it preloaded too, ASan's
    # __cxa_throw interceptor aborts on the first C++ exception.
    env["LD_PRELOAD"] = " ".join(compiler_file(name) for name in
                                 ("libasan.so", "libubsan.so", "libstdc++.so"))
    env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(BUILD), env.get("LD_LIBRARY_PATH")]))
    # Python's own allocations are never freed at exit: leak reports would be noise.
    env["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=0:halt_on_error=1"
    env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
    return env


def check_sanitized_library_is_loaded(env: dict) -> None:
    probe = (
        "import openreg_runtime, pathlib;"
        "maps = pathlib.Path('/proc/self/maps').read_text().splitlines();"
        "libs = {l.split()[-1] for l in maps if 'libopenreg.so' in l};"
        "print(*libs)"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                            text=True, check=True).stdout.split()
    expected = str(BUILD / "libopenreg.so")
    if loaded != [expected]:
        sys.exit(f"sanitize: expected only {expected} to be loaded, found {loaded}")


def run_c_example(env: dict, name: str) -> None:
    source = PACKAGE / "c_examples" / f"{name}.c"
    binary = BUILD / name
    run(["cc", "-std=c11", f"-fsanitize={SANITIZERS}", "-g", source, "-o", binary,
         f"-I{PACKAGE / 'include'}", f"-I{BUILD / 'include'}", f"-L{BUILD}", "-lopenreg",
         f"-Wl,-rpath,{BUILD}"])
    clean = {k: v for k, v in env.items() if k != "LD_PRELOAD"}  # the binary links them itself
    run([binary], env=clean)


def main() -> None:
    build_library()
    env = sanitized_environment()
    check_sanitized_library_is_loaded(env)
    for example in ("vector_add", "ipc_pair"):
        run_c_example(env, example)
    run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "sanitizer_safe",
         str(PACKAGE / "tests"), *sys.argv[1:]], env=env)


if __name__ == "__main__":
    try:
        main()
    except subprocess.CalledProcessError as failure:
        sys.exit(failure.returncode)
