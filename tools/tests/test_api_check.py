"""tools/api_check.py: the public headers pass, and a function that lacks an in/out mark, a
"Returns", a "Related", or breaks the C API's outputs-first rule without saying so fails, named."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("api_check", ROOT / "tools" / "api_check.py")
api_check = importlib.util.module_from_spec(_spec)
sys.modules["api_check"] = api_check  # its dataclass looks its module up there
_spec.loader.exec_module(api_check)


def test_the_public_headers_document_every_function():
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "api_check.py")], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout
    assert "0 problems" in done.stdout


def _problems(tmp_path: Path, text: str) -> dict[str, list[str]]:
    header = tmp_path / "packages" / "openreg-runtime" / "include" / "openreg" / "demo.h"
    header.parent.mkdir(parents=True)
    header.write_text(text)
    return {d.name: d.problems() for d in api_check.declarations(header)}


def test_each_missing_part_is_named(tmp_path):
    problems = _problems(tmp_path, """
/* Writes the thing.
 *   thing  out
 * Returns orSuccess. Related: orOther. */
OPENREG_API orError_t orGood(int* thing);

/* Writes the thing, undocumented. */
OPENREG_API orError_t orBare(int* thing,
                             const char* name);

/* Writes a stream's value.
 *   stream  in
 *   value   out
 * Returns orSuccess. Related: orGood. */
OPENREG_API orError_t orOutputsLast(orStream_t stream, int* value);

/* Releases it.
 *   release  in
 *   data     in
 * Returns orSuccess. Outputs last, as CUDA's cudaThing. Related: orGood. */
OPENREG_API orError_t orCallback(void (*release)(void*), void* data);
""")
    assert problems["orGood"] == []
    assert problems["orBare"] == ["no in/out mark for thing, name", 'no "Returns"', 'no "Related"']
    assert problems["orOutputsLast"] == ['an output after an input, not declared ("Outputs last, as CUDA\'s ...")']
    assert problems["orCallback"] == []
