"""The command that builds a C++ program running AOTInductor packages on openreg
(run_package.cpp): libtorch, libtorch_openreg.so and, since that library also holds
torch_openreg's Python glue, libtorch_python.so and libpython. The test and the guide
both build with it.

    python build_command.py SOURCE OUTPUT     prints the command
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import torch
import torch_openreg
from torch.utils import cpp_extension


# LITERALINCLUDE START: AOTI_CPP_BUILD
def build_command(source: Path, output: Path) -> list[str]:
    torch_lib = Path(torch.__file__).parent / "lib"
    openreg_lib = torch_openreg.get_library_dir()
    python_lib = Path(os.path.realpath(sys.executable)).parents[1] / "lib"
    return ["c++", "-std=c++17", "-O1", str(source), "-o", str(output),
            *[f"-I{path}" for path in cpp_extension.include_paths()],
            f"-L{torch_lib}", f"-L{openreg_lib}", f"-L{python_lib}",
            # Linked even though the program calls none of them directly: loading
            # libtorch_openreg.so registers the backend and the model runner.
            "-Wl,--no-as-needed", "-ltorch_openreg", "-ltorch", "-ltorch_cpu", "-lc10", "-ltorch_python",
            f"-lpython3.{sys.version_info.minor}", f"-Wl,-rpath,{torch_lib}:{openreg_lib}:{python_lib}",
            f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"]
# LITERALINCLUDE END: AOTI_CPP_BUILD


if __name__ == "__main__":
    print(shlex.join(build_command(Path(sys.argv[1]), Path(sys.argv[2]))))
