#!/usr/bin/env python3
"""Check that the guide in docs/ quotes the code it explains, verbatim.

Source files mark a region with two comment lines (after "//" or "#"):
"LITERALINCLUDE START: NAME" and "LITERALINCLUDE END: NAME", NAME in
[A-Z0-9_]+ and unique within its file. A doc (any .md under docs/) quotes a
region with a directive on its own line, immediately followed by a fenced
code block that holds the region's lines, common indentation removed:

    <!-- LITERALINCLUDE: path/from/the/repo/root NAME -->

The check fails on a quoted path or marker that does not exist, on a START
without END or a name used twice, on a quote that differs from the code, on
a marker that no doc quotes, and on a ```python block that is not a quote
(a program for readers to copy runs while the site is built instead, as an
openreg-run block). It also follows references: a note cited by its title
in any file must be defined (in the file named with it, if any), and a
file path named in a comment or a page's text must exist. --fix rewrites stale quotes from the code
(keeping each fence's language tag) and then checks again.

Usage: python tools/docs_check.py [--fix] [--root REPO]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

MARKER_LIKE = re.compile(r"^\s*(//|#)\s*LITERALINCLUDE\b")
MARKER = re.compile(r"^\s*(?://|#)\s*LITERALINCLUDE\s+(START|END):\s*([A-Z0-9_]+)\s*$")
DIRECTIVE_LIKE = re.compile(r"^\s*<!--\s*LITERALINCLUDE\b")
DIRECTIVE = re.compile(r"^<!--\s*LITERALINCLUDE:\s*(\S+)\s+([A-Z0-9_]+)\s*-->\s*$")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# A program for readers to copy: it must be quoted from code the tests run, or
# run while the site is built (```{openreg-run}); generated code is ```text.
UNCHECKED_PROGRAM = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*(python|py|python3)\s*$")


@dataclass
class Region:
    """The lines between a START and END marker, ready to compare with a quote."""

    path: str
    name: str
    line: int  # of the START marker, 1-based
    lines: list[str]


@dataclass
class Quote:
    """A directive in a doc and the fenced block under it."""

    doc: str
    line: int  # of the directive, 1-based
    path: str
    name: str
    body_start: int  # index into the doc's lines of the first line inside the fence
    body_end: int  # index of the closing fence


# ------------------------------------------------------------------- markers


def region_text(lines: list[str]) -> list[str]:
    """The quotable form of a region: nested marker lines dropped, trailing
    whitespace stripped, common leading indentation removed."""
    kept = [line.rstrip() for line in lines if not MARKER.match(line)]
    if not kept:
        return []
    return textwrap.dedent("\n".join(kept)).split("\n")


def parse_markers(path: str, text: str) -> tuple[dict[str, Region], list[str]]:
    """The regions marked in one file, and the problems with its markers."""
    lines = text.splitlines()
    regions: dict[str, Region] = {}
    open_starts: dict[str, int] = {}
    open_duplicates: set[str] = set()  # reported already; their END is expected
    problems: list[str] = []
    for number, line in enumerate(lines, start=1):
        if not MARKER_LIKE.match(line):
            continue
        match = MARKER.match(line)
        if match is None:
            problems.append(
                f"{path}:{number}: malformed marker {line.strip()!r}: expected "
                "'LITERALINCLUDE START: NAME' or 'LITERALINCLUDE END: NAME', NAME in [A-Z0-9_]"
            )
            continue
        kind, name = match.groups()
        if kind == "START":
            if name in open_starts or name in regions:
                first = open_starts.get(name) or regions[name].line
                problems.append(
                    f"{path}:{number}: marker {name} is used twice in this file "
                    f"(first START at line {first})"
                )
                open_duplicates.add(name)
            else:
                open_starts[name] = number
        elif name in open_starts:
            start = open_starts.pop(name)
            regions[name] = Region(path, name, start, region_text(lines[start : number - 1]))
        elif name in open_duplicates:
            open_duplicates.remove(name)
        else:
            problems.append(f"{path}:{number}: END: {name} has no START before it")
    for name, start in open_starts.items():
        problems.append(f"{path}:{start}: START: {name} has no END")
    return regions, problems


def source_files(root: Path) -> list[str]:
    """Files tracked by git plus untracked files git does not ignore, outside docs/."""
    listing = subprocess.run(
        ["git", "-C", str(root), "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    paths = sorted({path for path in listing.split("\0") if path})
    return [path for path in paths if not path.startswith("docs/") and (root / path).is_file()]


def read_text(path: Path) -> str | None:
    """The file's text, or None for a binary file."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None


# -------------------------------------------------------------------- quotes


def closing_fence(lines: list[str], opening: int) -> int:
    """Index of the line closing the fence opened at lines[opening], or len(lines)."""
    fence = FENCE.match(lines[opening]).group(1)
    closer = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*$")
    for index in range(opening + 1, len(lines)):
        if closer.match(lines[index]):
            return index
    return len(lines)


def parse_quotes(doc: str, lines: list[str]) -> tuple[list[Quote], list[str]]:
    """The directives of one doc. Directives inside other code blocks are
    examples, not quotes, and are skipped."""
    quotes: list[Quote] = []
    problems: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if FENCE.match(line):
            if UNCHECKED_PROGRAM.match(line):
                problems.append(
                    f"{doc}:{index + 1}: a Python block that nothing runs: quote it from a file the tests run "
                    "(LITERALINCLUDE) or make it an openreg-run block, which runs while the site is built"
                )
            index = closing_fence(lines, index) + 1
            continue
        if not DIRECTIVE_LIKE.match(line):
            index += 1
            continue
        match = DIRECTIVE.match(line)
        if match is None:
            problems.append(
                f"{doc}:{index + 1}: malformed directive {line.strip()!r}: expected "
                "'<!-- LITERALINCLUDE: path/from/repo/root NAME -->'"
            )
        elif index + 1 == len(lines) or not FENCE.match(lines[index + 1]):
            problems.append(
                f"{doc}:{index + 1}: LITERALINCLUDE directive must be followed "
                "immediately by a fenced code block"
            )
        else:
            end = closing_fence(lines, index + 1)
            if end == len(lines):
                problems.append(f"{doc}:{index + 2}: code block is never closed")
                break
            quotes.append(Quote(doc, index + 1, match[1], match[2], index + 2, end))
            index = end
        index += 1
    return quotes, problems


def doc_files(root: Path) -> list[Path]:
    return sorted((root / "docs").rglob("*.md"))


# --------------------------------------------------------------------- check


class Repo:
    """Markers and quotes of one repository, read once."""

    def __init__(self, root: Path):
        self.root = root
        self.problems: list[str] = []
        self.regions: dict[tuple[str, str], Region] = {}  # markers the scan found
        self._markers_by_file: dict[str, dict[str, Region]] = {}
        for path in source_files(root):
            self._markers_by_file[path] = self._read_markers(path)
            for name, region in self._markers_by_file[path].items():
                self.regions[(path, name)] = region
        self.doc_lines: dict[str, list[str]] = {}
        self.quotes: list[Quote] = []
        for doc in doc_files(root):
            rel = doc.relative_to(root).as_posix()
            self.doc_lines[rel] = doc.read_text(encoding="utf-8").splitlines()
            quotes, problems = parse_quotes(rel, self.doc_lines[rel])
            self.quotes += quotes
            self.problems += problems

    def _read_markers(self, path: str) -> dict[str, Region]:
        text = read_text(self.root / path)
        if text is None:
            return {}
        regions, problems = parse_markers(path, text)
        self.problems += problems
        return regions

    def region_of(self, quote: Quote) -> Region | None:
        """The region a quote names, recording a problem if there is none."""
        path = os.path.normpath(quote.path).replace(os.sep, "/")
        if os.path.isabs(path) or path.startswith("../"):
            self.problems.append(
                f"{quote.doc}:{quote.line}: quoted path {quote.path} must be relative to the "
                "repository root"
            )
            return None
        if not (self.root / path).is_file():
            self.problems.append(
                f"{quote.doc}:{quote.line}: quoted file {quote.path} does not exist"
            )
            return None
        if path not in self._markers_by_file:  # e.g. a file git ignores
            self._markers_by_file[path] = self._read_markers(path)
        region = self._markers_by_file[path].get(quote.name)
        if region is None:
            self.problems.append(
                f"{quote.doc}:{quote.line}: marker {quote.name} not found in {quote.path}"
            )
        return region

    def quoted_text(self, quote: Quote) -> list[str]:
        body = self.doc_lines[quote.doc][quote.body_start : quote.body_end]
        return [line.rstrip() for line in body]


def first_difference(a: list[str], b: list[str]) -> int:
    """1-based number of the first line where a and b differ."""
    for number, (left, right) in enumerate(zip(a, b, strict=False), start=1):
        if left != right:
            return number
    return min(len(a), len(b)) + 1


# ---------------------------------------------------------------- references
# Comments and pages name notes ("Note [Sticky errors]") and files
# ("csrc/aten/Executor.cpp"). A note renamed or a file moved leaves them
# pointing nowhere, and nothing else notices.

NOTE = re.compile(r"Note \[([^\]]+)\]")
# A note is defined where a comment (or a docstring line) starts with its
# title, followed by the end of the line, a colon or a parenthesis.
NOTE_DEFINITION = re.compile(r"^\s*(?://+|#+|\*|/\*+)?\s*Note \[([^\]]+)\](?:\s*$|:|\s+\()")
NOTE_IN_FILE = re.compile(r"Note \[([^\]]+)\],? in `?([\w./-]+\.\w+)")
PATH_MENTION = re.compile(
    r"(?<![\w./-])((?:\.\.?/)*(?:[\w.-]+/)+[\w.-]+\.(?:py|cpp|h|hpp|c|md|toml|txt|sh|cmake|csv|json))\b"
)
# Paths into other projects (PyTorch's sources, system headers) are not checked.
FOREIGN_PATHS = ("ATen/", "aten/", "c10/", "torch/", "native/", "caffe2/", "pybind11/", "sys/", "linux/")
HASH_COMMENTS = {".py", ".toml", ".sh", ".cmake", ".txt"}
SLASH_COMMENTS = {".c", ".cpp", ".h", ".hpp"}


def prose_lines(path: str, text: str):
    """(line number, text) of what a file says in words: comments of code,
    a page's text outside code blocks (its link targets Sphinx checks)."""
    suffix = Path(path).suffix
    in_block = False
    for number, line in enumerate(text.splitlines(), start=1):
        if suffix == ".md":
            if FENCE.match(line):
                in_block = not in_block
            elif not in_block and not DIRECTIVE_LIKE.match(line):  # quotes: checked above
                yield number, re.sub(r"\]\([^)]*\)", "]", line)
        elif suffix in HASH_COMMENTS and "#" in line:
            yield number, line.split("#", 1)[1]
        elif suffix in SLASH_COMMENTS:
            comment = re.search(r"//(.*)$|^\s*(?:/\*|\*)(.*)$", line)
            if comment:
                yield number, comment.group(1) or comment.group(2) or ""


def check_references(root: Path) -> list[str]:
    """Every note named is defined (in the file named with it, if any), and
    every file path named in words exists in the repository."""
    files = [f for f in git_files(root) if not f.startswith("docs/_build/")]
    texts = {f: text for f in files if (text := read_text(root / f)) is not None}
    notes: dict[str, set[str]] = {}
    for path, text in texts.items():
        for line in text.splitlines():
            if (definition := NOTE_DEFINITION.match(line)) is not None:
                notes.setdefault(definition[1], set()).add(path)
    build_files = "\n".join(text for path, text in texts.items()
                             if Path(path).name in ("CMakeLists.txt", "pyproject.toml"))
    problems = []
    for path, text in texts.items():
        for number, line in enumerate(text.splitlines(), start=1):
            for title in NOTE.findall(line):
                if title not in notes:
                    problems.append(f"{path}:{number}: no note is titled {title!r}")
            for title, named in NOTE_IN_FILE.findall(line):
                if title in notes and not any(d == named or d.endswith("/" + named) for d in notes[title]):
                    problems.append(f"{path}:{number}: the note {title!r} is not in {named} "
                                    f"but in {', '.join(sorted(notes[title]))}")
        for number, words in prose_lines(path, text):
            for named in PATH_MENTION.findall(words):
                if not names_a_file(path, named, files, build_files):
                    problems.append(f"{path}:{number}: {named} names no file of the repository")
    return problems


def names_a_file(mentioned_in: str, named: str, files: list[str], build_files: str) -> bool:
    """Whether `named` is a file of the repository: relative to the mention
    (./, ../), a path from the root, the end of one (a package's own path,
    ".../" and a path's end), a file the build generates, or a path into
    another project."""
    if named.startswith(FOREIGN_PATHS):
        return True
    named = named.removeprefix(".../")  # an elided path: its end must match
    if named.startswith("."):
        return os.path.normpath(os.path.join(os.path.dirname(mentioned_in), named)) in files
    return any(f == named or f.endswith("/" + named) for f in files) or Path(named).name in build_files


def git_files(root: Path) -> list[str]:
    listing = subprocess.run(["git", "-C", str(root), "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                             capture_output=True, text=True, check=True).stdout
    return sorted(path for path in listing.split("\0") if path and (root / path).is_file())


def check(root: Path) -> tuple[list[str], int, int]:
    """Every problem found, the number of quotes and the number of markers."""
    repo = Repo(root)
    quoted = set()
    for quote in repo.quotes:
        region = repo.region_of(quote)
        if region is None:
            continue
        quoted.add((region.path, region.name))
        text = repo.quoted_text(quote)
        if text != region.lines:
            repo.problems.append(
                f"{quote.doc}:{quote.line}: quote of {quote.path} {quote.name} is stale "
                f"(first difference at line {first_difference(text, region.lines)} of the "
                "block); run python tools/docs_check.py --fix"
            )
    for region in sorted(repo.regions.values(), key=lambda region: (region.path, region.line)):
        if (region.path, region.name) not in quoted:
            repo.problems.append(
                f"{region.path}:{region.line}: marker {region.name} is not quoted by any doc"
            )
    repo.problems += check_references(root)
    return repo.problems, len(repo.quotes), len(repo.regions)


# ----------------------------------------------------------------------- fix


def fence_around(opening: str, body: list[str]) -> tuple[str, str]:
    """The opening and closing fence lines for body: the original fence and
    language tag, lengthened if body itself holds a line of fence characters."""
    indent, rest = re.match(r"^( {0,3})(.*)$", opening).groups()
    char = rest[0]
    length = len(rest) - len(rest.lstrip(char))
    runs = [len(text) - len(text.lstrip(char)) for text in (line.lstrip(" ") for line in body)]
    length = max([length] + [run + 1 for run in runs if run >= 3])
    return indent + char * length + rest.lstrip(char), indent + char * length


def fix_stale_quotes(root: Path) -> list[str]:
    """Rewrites every stale quote from the code; returns one line per rewrite."""
    repo = Repo(root)
    fixed: list[str] = []
    rewrites: dict[str, list[tuple[Quote, Region]]] = {}
    for quote in repo.quotes:
        region = repo.region_of(quote)
        if region is not None and repo.quoted_text(quote) != region.lines:
            rewrites.setdefault(quote.doc, []).append((quote, region))
            fixed.append(f"fixed {quote.doc}:{quote.line}: {quote.path} {quote.name}")
    for doc, pairs in rewrites.items():
        lines = repo.doc_lines[doc]
        for quote, region in sorted(pairs, key=lambda pair: -pair[0].line):
            opening, closing = fence_around(lines[quote.body_start - 1], region.lines)
            lines[quote.body_start - 1 : quote.body_end + 1] = [opening, *region.lines, closing]
        (root / doc).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return fixed


# ---------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fix", action="store_true", help="rewrite stale quotes, then check")
    parser.add_argument(
        "--root",
        type=Path,
        default=Path(__file__).resolve().parent.parent,
        help="repository root (default: the repository holding this script)",
    )
    args = parser.parse_args(argv)
    root = args.root.resolve()
    try:
        if args.fix:
            for line in fix_stale_quotes(root):
                print(line)
        problems, quote_count, marker_count = check(root)
    except subprocess.CalledProcessError as error:
        print(f"docs check: cannot list the files of {root}: {error.stderr.strip()}")
        return 2
    for problem in problems:
        print(problem)
    print(f"docs check: {quote_count} quotes, {marker_count} markers, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
