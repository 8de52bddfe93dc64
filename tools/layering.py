#!/usr/bin/env python3.11
"""The house's layering rules, checked on the sources of packages/.

Each source file has two tags:
  - plain or speed: a file under a folder named fast/ is a speed layer;
  - copy, replace or skip: what a vendor does with it, from its package's
    source map (torch-openreg's in docs/binding/index.md: Note [The source
    map]; every other package's in its README).
Rule 0: every C++ and Python source file of a package has exactly one tag,
and every path a map names exists. From the tags and the folders, four
rules follow for the C++ includes:
  1. plain never includes speed (a speed layer installs itself at a seam);
  2. copy never includes skip (a vendor who copies a file needs nothing left out);
  3. torch-openreg's runtime/ never includes graphs/, profiler/, aten/,
     compile/ or python/ (what the device is does not depend on what uses it);
  4. a layer package includes torch-openreg only through its public headers
     (include/torch_openreg/), never a source file;
  5. only a file named platform_<os> includes a system header of an OS
     (unistd.h, pthread.h, dlfcn.h, sys/..., windows.h, ...): every other
     file is portable C++ (Note [Platform calls] in each package).
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
SOURCE_SUFFIXES = (".cpp", ".h", ".hpp", ".c")  # what includes
TAGGED_SUFFIXES = SOURCE_SUFFIXES + (".py",)  # what a source map tags
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.MULTILINE)
SOURCE_MAP = re.compile(r"<!-- SOURCE_MAP START -->\n(.*?)<!-- SOURCE_MAP END -->", re.DOTALL)
# Source maps by package: the file holding the table (its paths relative to the package).
SOURCE_MAPS = {"torch-openreg": Path("docs/binding/index.md"),
               **{package: Path("packages") / package / "README.md" for package in
                  ("openreg-runtime", "openreg-amp", "openreg-distributed", "openreg-onnx", "openreg-perf",
                   "openreg-conformance")}}
VENDOR_TAGS = ("copy", "replace", "skip")
# torch-openreg's folders that runtime/ may not include.
ABOVE_THE_RUNTIME = ("graphs", "profiler", "aten", "compile", "python")
CORE = ("openreg-runtime", "torch-openreg")
# The headers of an operating system rather than of C, C++ or a library: POSIX's, Linux's, macOS's, Windows'.
SYSTEM_HEADER = re.compile(r"^(unistd|signal|pthread|dlfcn|fcntl|poll|sched|semaphore|spawn|dirent|termios|netdb"
                           r"|windows|winsock2|io|process|malloc)\.h$|^(sys|linux|mach|arpa|netinet)/")


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


def sources(root: Path, suffixes: tuple = SOURCE_SUFFIXES) -> list[Path]:
    """The package sources with these suffixes, outside tests/ and build/ folders."""
    found = []
    for path in (root / "packages").rglob("*"):
        relative = path.relative_to(root)
        if path.suffix in suffixes and not {"build", "tests"} & set(relative.parts) and path.is_file():
            found.append(relative)
    return sorted(found)


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


@dataclass(frozen=True)
class MapRow:
    """One row of a source map: the paths it names (relative to the package; a folder ends in /),
    those it leaves out ("all but ..."), and its tag."""

    paths: tuple[str, ...]
    excluded: tuple[str, ...]
    tag: str

    def covers(self, relative: str) -> bool:
        return (any(_named(relative, p) for p in self.paths)
                and not any(_named(relative, e) for e in self.excluded))


def _named(path: str, pattern: str) -> bool:
    """A path a map's pattern names: the file itself, or anything under a folder (ending in /)."""
    return path.startswith(pattern) if pattern.endswith("/") else path == pattern


def map_rows(text: str) -> list[MapRow] | None:
    """The rows of the SOURCE_MAP block in a document's text; None if it has none. A cell names its
    first path in full and the others relative to the first one's folder."""
    block = SOURCE_MAP.search(text)
    if block is None:
        return None
    rows = []
    for line in block.group(1).splitlines()[2:]:
        cell, tag = [part.strip() for part in line.strip("|").split("|")[:2]]
        names = re.findall(r"`([^`]+)`", cell)
        folder = names[0] if names[0].endswith("/") else names[0].rsplit("/", 1)[0] + "/"
        others = tuple(folder + name for name in names[1:])
        if "all but" in cell:
            rows.append(MapRow((names[0],), others, tag))
        else:
            rows.append(MapRow((names[0],) + others, (), tag))
    return rows


def _maps(root: Path):
    """(package, document, rows, files) of each package present in this tree: its map's rows (None
    without one) and its tagged sources, relative to the package."""
    tagged = sources(root, TAGGED_SUFFIXES)
    for package, document in SOURCE_MAPS.items():
        if (root / "packages" / package).is_dir():
            path = root / document
            base = Path("packages") / package
            files = [str(p.relative_to(base)) for p in tagged if package_of(p) == package]
            yield package, document, map_rows(path.read_text()) if path.exists() else None, files


def vendor_tags(root: Path) -> dict[Path, str]:
    """copy, replace or skip per file, from each package's source map."""
    tags = {}
    for package, _, rows, files in _maps(root):
        for relative in files:
            for row in rows or ():
                if row.covers(relative):
                    tags[Path("packages") / package / relative] = row.tag
    return tags


def untagged(root: Path) -> list[str]:
    """Rule 0: every source file of a package in exactly one row of its map, with a known tag, and
    every path a map names there."""
    problems = []
    for package, document, rows, files in _maps(root):
        if rows is None:
            problems.append(f"{document}: no SOURCE_MAP block for {package} (rule 0)")
            continue
        base = Path("packages") / package
        for row in rows:
            if row.tag not in VENDOR_TAGS:
                problems.append(f"{document}: tag {row.tag!r} is none of {', '.join(VENDOR_TAGS)} (rule 0)")
            for pattern in row.paths + row.excluded:
                if not any(_named(path, pattern) for path in files):
                    problems.append(f"{document}: names {base / pattern}, which is gone (rule 0)")
        for path in files:
            tags = [row.tag for row in rows if row.covers(path)]
            if len(tags) != 1:
                problems.append(f"{base / path}: tagged {', '.join(tags) or 'nowhere'} in {document} (rule 0: "
                                "one row of the source map each)")
    return problems


def broken_rules(root: Path = ROOT) -> list[str]:
    tags = vendor_tags(root)
    problems = untagged(root)
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
            # An example program (c_examples/) may use its OS: the rule is about what packages build.
            if (SYSTEM_HEADER.search(inc.target) and not source.name.startswith("platform_")
                    and "c_examples" not in source.parts):
                problems.append(f"{where}, a system header, outside the package's platform_<os> files (rule 5)")
    return problems


def main() -> None:
    problems = broken_rules()
    for problem in problems:
        print(problem)
    print(f"layering: {len(sources(ROOT, TAGGED_SUFFIXES))} source files, {len(problems)} broken rules")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
