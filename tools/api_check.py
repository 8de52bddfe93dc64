#!/usr/bin/env python3
"""Checks that the public C and C++ APIs document every function the same way.

The public headers (openreg-runtime's include/openreg/*.h, torch-openreg's include/torch_openreg/*.h)
declare each exported function (OPENREG_API, TORCH_OPENREG_API) under a comment that says, in the
manner openreg.h declares once at its top:
  - every parameter, on a line of its own: "  name  in", "out" or "in,out" (then, optionally, ": why");
  - "Returns": the status codes and what each means, or what a non-status result is (a void
    function says nothing);
  - "Related": the functions to read beside it;
  - for the C API, whose rule is "outputs come first": a function that takes an output after an
    input says so ("Outputs last, as CUDA's cudaX.") rather than breaking the rule silently.
It fails naming each function and what it lacks. Run by the README's test command.

    python3.11 tools/api_check.py [HEADER ...]
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEADERS = sorted([*(ROOT / "packages/openreg-runtime/include/openreg").glob("*.h"),
                  *(ROOT / "packages/torch-openreg/include/torch_openreg").glob("*.h")])
EXPORTS = ("OPENREG_API", "TORCH_OPENREG_API")
MARK = re.compile(r"^\s*(\w+(?:,\s*\w+)*)\s+(in,out|in|out)\b")
OUTPUTS_LAST = re.compile(r"outputs last", re.IGNORECASE)


@dataclass
class Declaration:
    header: Path
    line: int
    name: str
    returns_void: bool
    parameters: list[str]
    comment: str
    c_api: bool

    def problems(self) -> list[str]:
        said = []
        if not self.comment:
            return ["no comment"]
        marks = {}
        for text in self.comment.splitlines():
            found = MARK.match(text)
            if found:
                for name in found.group(1).split(","):
                    marks[name.strip()] = found.group(2)
        missing = [name for name in self.parameters if name not in marks]
        if missing:
            said.append(f"no in/out mark for {', '.join(missing)}")
        if not self.returns_void and "Returns" not in self.comment:
            said.append('no "Returns"')
        if "Related" not in self.comment:
            said.append('no "Related"')
        if self.c_api and self._outputs_after_inputs(marks) and not OUTPUTS_LAST.search(self.comment):
            said.append('an output after an input, not declared ("Outputs last, as CUDA\'s ...")')
        return said

    def _outputs_after_inputs(self, marks: dict[str, str]) -> bool:
        seen_input = False
        for name in self.parameters:
            mark = marks.get(name)
            if mark == "in":
                seen_input = True
            elif mark in ("out", "in,out") and seen_input:
                return True
        return False


def declarations(header: Path) -> list[Declaration]:
    """Each exported function of header with the comment block right above it."""
    lines = header.read_text().splitlines()
    found = []
    for index, text in enumerate(lines):
        if not text.lstrip().startswith(EXPORTS):
            continue
        statement = text
        end = index
        while ";" not in statement and "{" not in statement:
            end += 1
            statement += " " + lines[end].strip()
        head, _, arguments = statement.partition("(")
        arguments = arguments.rsplit(")", 1)[0]
        name = head.split()[-1].lstrip("*&")
        found.append(Declaration(header, index + 1, name, head.split()[1] == "void" and "*" not in head,
                                 _parameter_names(arguments), _comment_above(lines, index),
                                 header.suffix == ".h" and "openreg-runtime" in str(header)))
    return found


def _parameter_names(arguments: str) -> list[str]:
    arguments = re.sub(r"<[^<>]*>", "", re.sub(r"<[^<>]*>", "", arguments))  # template arguments' commas
    arguments = re.sub(r"\(\s*\*\s*(\w+)\s*\)\s*\([^()]*\)", r"\1", arguments)  # void (*release)(void*)
    names = []
    for parameter in arguments.split(","):
        parameter = parameter.split("=")[0].strip()
        if parameter and parameter != "void":
            names.append(re.findall(r"\w+", parameter)[-1])
    return names


def _comment_above(lines: list[str], index: int) -> str:
    """The comment block ending on the line above index (/* ... */ or // lines)."""
    block = []
    at = index - 1
    if at >= 0 and lines[at].strip().endswith("*/"):
        while at >= 0:
            block.insert(0, lines[at])
            if lines[at].strip().startswith("/*"):
                break
            at -= 1
    else:
        while at >= 0 and lines[at].strip().startswith("//") and "LITERALINCLUDE" not in lines[at]:
            block.insert(0, lines[at])
            at -= 1
    return "\n".join(re.sub(r"^\s*(/\*+|\*/|\*|//)", "", line) for line in block)


def main() -> None:
    headers = [Path(arg) for arg in sys.argv[1:]] or HEADERS
    checked = failures = 0
    for header in headers:
        for declaration in declarations(header):
            checked += 1
            for problem in declaration.problems():
                failures += 1
                print(f"{declaration.header.relative_to(ROOT)}:{declaration.line}: {declaration.name}: {problem}")
    print(f"api check: {checked} functions in {len(headers)} headers, {failures} problems")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
