"""tools/layering.py: the layering rules, derived from each source file's tags, hold in the
repository, and each rule catches a file that breaks it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("openreg_layering", ROOT / "tools" / "layering.py")
layering = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = layering  # its dataclass looks its module up
_spec.loader.exec_module(layering)

SOURCE_MAP = """<!-- SOURCE_MAP START -->
| Files | Tag | What |
|---|---|---|
| `csrc/runtime/` | copy | the device |
| `csrc/python/Module.cpp` | copy | the module |
| `csrc/python/Testing.cpp` | skip | tests' hooks |
| `csrc/aten/` | replace | operators |
| `csrc/fast/` | skip | the speed layer |
| `include/torch_openreg/` | copy | the public API |
<!-- SOURCE_MAP END -->
"""


LAYER_MAP = """<!-- SOURCE_MAP START -->
| Files | Tag | What |
|---|---|---|
| `csrc/Amp.cpp` | copy | the policy |
| `csrc/Kernels.cpp` | replace | the kernels |
<!-- SOURCE_MAP END -->
"""


def test_the_repository_keeps_every_rule():
    assert layering.broken_rules() == []


@pytest.fixture
def tree(tmp_path):
    """A repository of two packages that keeps every rule; each test breaks one."""
    (tmp_path / "docs" / "binding").mkdir(parents=True)
    (tmp_path / "docs" / "binding" / "index.md").write_text(SOURCE_MAP)
    core = tmp_path / "packages" / "torch-openreg"
    files = {
        "csrc/runtime/Device.h": "#pragma once\n",
        "csrc/runtime/Device.cpp": '#include "runtime/Device.h"\n',
        "csrc/python/Module.cpp": '#include "runtime/Device.h"\n',
        "csrc/python/Testing.cpp": '#include "runtime/Device.h"\n',
        "csrc/aten/Ops.cpp": '#include "runtime/Device.h"\n',
        "csrc/fast/Fast.h": '#include "runtime/Device.h"\n',
        "include/torch_openreg/Kernel.h": "#pragma once\n",
    }
    for name, text in files.items():
        (core / name).parent.mkdir(parents=True, exist_ok=True)
        (core / name).write_text(text)
    layer = tmp_path / "packages" / "openreg-amp" / "csrc"
    layer.mkdir(parents=True)
    (layer / "Amp.cpp").write_text("#include <torch_openreg/Kernel.h>\n")
    (layer / "Kernels.cpp").write_text("#include <torch_openreg/Kernel.h>\n")
    (layer.parent / "README.md").write_text(LAYER_MAP)
    assert layering.broken_rules(tmp_path) == []
    return tmp_path


def _break(tree: Path, path: str, include: str) -> list[str]:
    with open(tree / path, "a") as source:
        source.write(f"#include {include}\n")
    return layering.broken_rules(tree)


def test_the_plain_path_including_a_speed_layer_is_caught(tree):
    (found,) = _break(tree, "packages/torch-openreg/csrc/aten/Ops.cpp", '"fast/Fast.h"')
    assert "rule 1" in found and "Ops.cpp:2: includes fast/Fast.h" in found


def test_a_copy_file_including_a_skip_file_is_caught(tree):
    (found,) = _break(tree, "packages/torch-openreg/csrc/python/Module.cpp", '"python/Testing.cpp"')
    assert "rule 2" in found


def test_the_runtime_including_what_uses_it_is_caught(tree):
    (found,) = _break(tree, "packages/torch-openreg/csrc/runtime/Device.cpp", '"aten/Ops.cpp"')
    assert "rule 3" in found


def test_a_layer_including_a_torch_openreg_source_is_caught(tree):
    (found,) = _break(tree, "packages/openreg-amp/csrc/Amp.cpp", '"../../torch-openreg/csrc/runtime/Device.h"')
    assert "rule 4" in found


def test_a_file_no_row_tags_is_caught(tree):
    (tree / "packages" / "openreg-amp" / "csrc" / "New.cpp").write_text("")
    (found,) = layering.broken_rules(tree)
    assert "rule 0" in found and "csrc/New.cpp: tagged nowhere" in found


def test_a_file_two_rows_tag_is_caught(tree):
    readme = tree / "packages" / "openreg-amp" / "README.md"
    readme.write_text(readme.read_text().replace("<!-- SOURCE_MAP END -->",
                                                 "| `csrc/` | skip | everything |\n<!-- SOURCE_MAP END -->"))
    found = layering.broken_rules(tree)
    assert len(found) == 2 and all("rule 0" in line and "tagged copy, skip" in line or "tagged replace, skip" in line
                                   for line in found)


def test_a_map_naming_a_file_that_is_gone_is_caught(tree):
    (tree / "packages" / "openreg-amp" / "csrc" / "Kernels.cpp").unlink()
    (found,) = layering.broken_rules(tree)
    assert "rule 0" in found and "csrc/Kernels.cpp, which is gone" in found


def test_a_package_without_a_map_is_caught(tree):
    (tree / "packages" / "openreg-amp" / "README.md").write_text("# openreg-amp\n")
    (found,) = layering.broken_rules(tree)
    assert "no SOURCE_MAP block for openreg-amp" in found


@pytest.mark.parametrize("header", ["<unistd.h>", "<sys/mman.h>", "<windows.h>", "<pthread.h>"])
def test_a_system_header_outside_a_platform_file_is_caught(tree, header):
    (found,) = _break(tree, "packages/openreg-amp/csrc/Kernels.cpp", header)
    assert "rule 5" in found and f"includes {header[1:-1]}" in found


def test_a_platform_file_may_include_system_headers(tree):
    platform = tree / "packages" / "openreg-amp" / "csrc" / "platform_posix.cpp"
    platform.write_text("#include <unistd.h>\n#include <sys/mman.h>\n")
    row = "| `csrc/platform_posix.cpp` | copy | the OS |\n"
    (tree / "packages" / "openreg-amp" / "README.md").write_text(
        LAYER_MAP.replace("<!-- SOURCE_MAP END -->", row + "<!-- SOURCE_MAP END -->"))
    assert layering.broken_rules(tree) == []
