"""Native programs built against the installed headers and libopenreg: the C
examples in c_examples/, a C++17 program using openreg.hpp, and the C API's
own test suite in C++ (native/c_api_suite.cpp). Not sanitizer-safe (they
compile and run separate programs)."""

import os
import subprocess
import sys
from pathlib import Path

import openreg_runtime as ort
import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "c_examples"
NATIVE_SUITE = Path(__file__).resolve().parent / "native" / "c_api_suite.cpp"


def build(compiler: list[str], source: Path, output: Path) -> Path:
    libdir = ort.get_library_dir()
    command = [*compiler, "-Wall", "-Wextra", "-Werror", "-O1", str(source),
               f"-I{ort.get_include()}", f"-L{libdir}", "-lopenreg",
               f"-Wl,-rpath,{libdir}", "-o", str(output)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"{' '.join(command)}\n{result.stderr}"
    return output


def run(binary: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)


def test_installed_headers_are_complete():
    include = Path(ort.get_include()) / "openreg"
    for name in ("openreg.h", "openreg.hpp", "version.h"):
        assert (include / name).is_file(), name
    assert Path(ort.get_library_path()).is_file()


def test_c_vector_add_example(tmp_path):
    binary = build(["cc", "-std=c11"], EXAMPLES / "vector_add.c", tmp_path / "vector_add")
    result = run(binary)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines == [f"vector_add: OK n=100000 c[99999]=299997.5 "
                     f"version={ort.runtime_get_version()}"]



def test_the_guides_build_script_builds_an_example(tmp_path):
    # c_examples/build.sh as the guide shows it, with this interpreter as `python`.
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    built = subprocess.run(["sh", str(EXAMPLES / "build.sh"), str(EXAMPLES / "vector_add.c"),
                            str(tmp_path / "vector_add")], capture_output=True, text=True, timeout=120, env=env)
    assert built.returncode == 0, built.stderr
    result = run(tmp_path / "vector_add")
    assert result.returncode == 0 and result.stdout.startswith("vector_add: OK"), result.stderr

def test_c_ipc_pair_example(tmp_path):
    # Two processes: the child opens the parent's buffer and reduces into it.
    binary = build(["cc", "-std=c11"], EXAMPLES / "ipc_pair.c", tmp_path / "ipc_pair")
    result = run(binary)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.splitlines() == ["ipc_pair: OK n=65536 host[65535]=65535.5"]


def test_c_example_sees_environment(tmp_path):
    # The C program gets its configuration the same way as Python does.
    binary = build(["cc", "-std=c11"], EXAMPLES / "vector_add.c", tmp_path / "vector_add")
    result = subprocess.run([str(binary)], capture_output=True, text=True, timeout=60,
                            env={"OPENREG_DEVICE_MEMORY": "64KiB"})
    assert result.returncode == 1
    assert "orMalloc" in result.stderr and "orErrorMemoryAllocation" in result.stderr
    assert "out of memory on openreg device 0" in result.stderr


def test_cpp_launch_lambda_exception_becomes_sticky_error(tmp_path):
    binary = build(["c++", "-std=c++17"], EXAMPLES / "launch_throw.cpp",
                   tmp_path / "launch_throw")
    result = run(binary)
    assert result.returncode == 0, result.stderr
    line, = result.stdout.splitlines()
    assert line.startswith("launch_throw: OK sticky message: ")
    assert "kernel 'throwing_lambda' failed on openreg device 0" in line
    assert "lambda exploded at index 7" in line
    assert "sticky: call orDeviceReset" in line


@pytest.mark.parametrize("standard", ["c99", "c11"])
def test_header_compiles_as_plain_c(tmp_path, standard):
    source = tmp_path / "probe.c"
    source.write_text(
        "#include <openreg/openreg.h>\n"
        "int main(void) {\n"
        "  int n = 0;\n"
        "  return orGetDeviceCount(&n) == orSuccess && n == 2 ? 0 : 1;\n"
        "}\n")
    binary = build(["cc", f"-std={standard}", "-pedantic"], source, tmp_path / "probe")
    assert run(binary).returncode == 0


def test_the_c_api_suite_passes_natively(tmp_path):
    # Devices, memory and capacity, a host fault named, kernels, streams, events, sticky errors,
    # graphs and IPC, from C++ alone: the program a port to another platform runs first.
    binary = build(["c++", "-std=c++17"], NATIVE_SUITE, tmp_path / "c_api_suite")
    result = subprocess.run([str(binary)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == "11 passed, 0 failed" and all(line.startswith("PASS ") for line in lines[:-1]), lines


def test_the_c_api_suite_reports_what_fails(tmp_path):
    binary = build(["c++", "-std=c++17"], NATIVE_SUITE, tmp_path / "c_api_suite")
    result = subprocess.run([str(binary), "devices_are_counted_and_selected"], capture_output=True, text=True,
                            timeout=60, cwd=tmp_path, env={**os.environ, "OPENREG_DEVICE_COUNT": "1"})
    assert result.returncode == 1
    failure, summary = result.stdout.splitlines()
    assert failure.startswith(f"FAIL devices_are_counted_and_selected: {NATIVE_SUITE}:")
    assert failure.endswith(": count >= 2") and summary == "0 passed, 1 failed"
