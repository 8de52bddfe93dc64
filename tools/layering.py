#!/usr/bin/env python3.11
"""The house's layering rules, checked on the C++ sources of packages/.

Each source file has two tags:
  - plain or speed: a file under a folder named fast/ is a speed layer;
  - copy, replace or skip: what a vendor does with it, from a package's
    source map (torch-openreg's, in docs/binding/index.md: Note [The source
    map]; openreg-distributed's, in its README); a package without one has none.
From the tags and the folders, four rules follow:
  1. plain never includes speed (a speed layer installs itself at a seam);
  2. copy never includes skip (a vendor who copies a file needs nothing left out);
  3. torch-openreg's runtime/ never includes graphs/, profiler/, aten/,
     compile/ or python/ (what the device is does not depend on what uses it);
  4. a layer package includes torch-openreg only through its public headers
     (include/torch_openreg/), never a source file.
tools/size_report.py counts plain and speed lines with the same tags.

    python3.11 tools/layering.py     prints each broken rule; exits 1 if any

Standard library only.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE_SUFFIXES = (".cpp", ".h", ".hpp", ".c")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.MULTILINE)
SOURCE_MAP = re.compile(r"<!-- SOURCE_MAP START -->\n(.*?)<!-- SOURCE_MAP END -->", re.DOTALL)
# Source maps by package: the file holding the table (its paths relative to the package).
SOURCE_MAPS = {"torch-openreg": Path("docs/binding/index.md"),
               "openreg-distributed": Path("packages/openreg-distributed/README.md")}
# torch-openreg's folders that runtime/ may not include.
ABOVE_THE_RUNTIME = ("graphs", "profiler", "aten", "compile", "python")
CORE = ("openreg-runtime", "torch-openreg")


def is_speed_layer(path: Path) -> bool:
    return "fast" in path.parts


@dataclass(frozen=True)
class Include:
    source: Path  # relative to the repository
    line: int
    target: str  # as written
    resolved: Path | None  # the repository's file it names, if any


def package_of(path: Path) -> str:
    return path.parts[1]  # packages/<name>/...


def sources(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for p in (root / "packages").rglob("*")
                  if p.suffix in SOURCE_SUFFIXES and "build" not in p.relative_to(root).parts
                  and "tests" not in p.relative_to(root).parts)


def resolve(root: Path, source: Path, target: str, quoted: bool) -> Path | None:
    """The repository file an include names: beside the source, then from the
    package's source and include folders; <torch_openreg/...> is
    torch-openreg's public header."""
    package = root / "packages" / package_of(source)
    candidates = [root / source.parent / target] if quoted else []
    candidates += [package / folder / target for folder in ("csrc", "src", "include")]
    if target.startswith("torch_openreg/"):
        candidates.append(root / "packages" / "torch-openreg" / "include" / target)
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve().relative_to(root.resolve())
    return None


def includes(root: Path, source: Path) -> list[Include]:
    text = (root / source).read_text(errors="replace")
    found = []
    for match in INCLUDE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        target = match.group(2)
        found.append(Include(source, line, target, resolve(root, source, target, match.group(1) == '"')))
    return found


def vendor_tags(root: Path) -> dict[Path, str]:
    """copy, replace or skip per file, from each package's source map."""
    tags = {}
    for package, document in SOURCE_MAPS.items():
        if not (root / document).exists():  # a tree without the package
            continue
        block = SOURCE_MAP.search((root / document).read_text())
        if block is None:
            continue
        base = Path("packages") / package
        files = [s for s in sources(root) if package_of(s) == package]
        for row in block.group(1).splitlines()[2:]:
            cell, tag = [part.strip() for part in row.strip("|").split("|")[:2]]
            names = re.findall(r"`([^`]+)`", cell)
            folder = names[0] if names[0].endswith("/") else names[0].rsplit("/", 1)[0] + "/"
            named = [names[0]] + [folder + name for name in names[1:]]
            for path in files:
                relative = str(path.relative_to(base))
                if "all but" in cell:
                    covered = relative.startswith(names[0]) and relative not in named[1:]
                else:
                    covered = any(relative == n or (n.endswith("/") and relative.startswith(n)) for n in named)
                if covered:
                    tags[path] = tag
    return tags


def broken_rules(root: Path = ROOT) -> list[str]:
    tags = vendor_tags(root)
    problems = []
    for source in sources(root):
        package = package_of(source)
        for inc in includes(root, source):
            where = f"{source}:{inc.line}: includes {inc.target}"
            target = inc.resolved
            if target is not None and not is_speed_layer(source) and is_speed_layer(target):
                problems.append(f"{where}, a speed layer, from the plain path (rule 1: install it at a seam)")
            if target is not None and tags.get(source) == "copy" and tags.get(target) == "skip":
                problems.append(f"{where}, tagged skip, from a file tagged copy (rule 2)")
            runtime = Path("packages/torch-openreg/csrc/runtime")
            if (target is not None and runtime in source.parents and package_of(target) == "torch-openreg"
                    and len(target.parts) > 4 and target.parts[3] in ABOVE_THE_RUNTIME):
                problems.append(f"{where}, above the runtime (rule 3)")
            if (package not in CORE and target is not None and package_of(target) == "torch-openreg"
                    and "include" != target.parts[2]):
                problems.append(f"{where}, a torch-openreg source, from a layer package (rule 4: use the "
                                "public headers of include/torch_openreg/)")
    return problems


def main() -> None:
    problems = broken_rules()
    for problem in problems:
        print(problem)
    print(f"layering: {len(sources(ROOT))} source files, {len(problems)} broken rules")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
