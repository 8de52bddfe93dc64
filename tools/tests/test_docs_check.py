"""Tests of tools/docs_check.py: the real guide passes, and each way a quote
can drift from the code is caught in a small throwaway repository."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHECKER = REPO / "tools" / "docs_check.py"


def run_check(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(CHECKER), "--root", str(root), *args],
        capture_output=True,
        text=True,
    )


# Marker and directive lines are built here rather than written out, so this
# file holds no markers of its own for the checker to find.
def marker(kind: str, name: str, comment: str = "//") -> str:
    return f"{comment} LITERALINCLUDE {kind}: {name}"


def directive(path: str, name: str) -> str:
    return f"<!-- LITERALINCLUDE: {path} {name} -->"


def note(title: str) -> str:
    return "Note " + f"[{title}]"


def lines(*items: str) -> str:
    return "\n".join(items) + "\n"


SOURCE = lines(
    "int before();",
    marker("START", "ANSWER"),
    "int answer() {",
    "  return 42;",
    "}",
    marker("END", "ANSWER"),
)
QUOTED = ["int answer() {", "  return 42;", "}"]


def guide(path: str = "src/lib.cpp", name: str = "ANSWER", body: list[str] = QUOTED) -> str:
    """A doc whose first directive (line 3) quotes path/name with body."""
    return lines("# Guide", "", directive(path, name), "```cpp", *body, "```")


def make_repo(tmp_path: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    return tmp_path


def test_real_repository_passes():
    result = run_check(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1].endswith(" 0 problems")


def test_consistent_repository_passes(tmp_path):
    root = make_repo(tmp_path, {"src/lib.cpp": SOURCE, "docs/guide.md": guide()})
    result = run_check(root)
    assert result.returncode == 0, result.stdout
    assert result.stdout == "docs check: 1 quotes, 1 markers, 0 problems\n"


FAILURES = {
    "missing_file": (
        {"src/lib.cpp": SOURCE, "docs/guide.md": guide("src/gone.cpp") + guide()},
        "docs/guide.md:3: quoted file src/gone.cpp does not exist",
    ),
    "missing_marker": (
        {"src/lib.cpp": SOURCE, "docs/guide.md": guide(name="NOPE") + guide()},
        "docs/guide.md:3: marker NOPE not found in src/lib.cpp",
    ),
    "start_without_end": (
        {
            "src/lib.cpp": SOURCE + lines(marker("START", "OPEN"), "int x;"),
            "docs/guide.md": guide(),
        },
        "src/lib.cpp:7: START: OPEN has no END",
    ),
    "end_without_start": (
        {"src/lib.cpp": SOURCE + lines(marker("END", "CLOSED")), "docs/guide.md": guide()},
        "src/lib.cpp:7: END: CLOSED has no START before it",
    ),
    "duplicate_name": (
        {"src/lib.cpp": SOURCE + SOURCE, "docs/guide.md": guide()},
        "src/lib.cpp:8: marker ANSWER is used twice in this file (first START at line 2)",
    ),
    "malformed_marker": (
        {"src/lib.cpp": SOURCE + lines(marker("START", "lower_case")), "docs/guide.md": guide()},
        "src/lib.cpp:7: malformed marker",
    ),
    "stale_quote": (
        {
            "src/lib.cpp": SOURCE,
            "docs/guide.md": guide(body=["int answer() {", "  return 41;", "}"]),
        },
        "docs/guide.md:3: quote of src/lib.cpp ANSWER is stale (first difference at line 2",
    ),
    "unquoted_marker": (
        {"src/lib.cpp": SOURCE, "docs/guide.md": "# Guide\n"},
        "src/lib.cpp:2: marker ANSWER is not quoted by any doc",
    ),
    "directive_without_block": (
        {
            "src/lib.cpp": SOURCE,
            "docs/guide.md": lines(directive("src/lib.cpp", "ANSWER"), "text") + guide(),
        },
        "docs/guide.md:1: LITERALINCLUDE directive must be followed immediately by a fenced",
    ),
    "note_defined_nowhere": (
        {"src/lib.cpp": SOURCE + lines(f"// why: {note('Gone')}"), "docs/guide.md": guide()},
        "src/lib.cpp:7: no note is titled 'Gone'",
    ),
    "note_in_another_file": (
        {"src/lib.cpp": SOURCE + lines(f"// {note('Why')}", f"// see {note('Why')} in other.cpp"),
         "docs/guide.md": guide()},
        "src/lib.cpp:8: the note 'Why' is not in other.cpp but in src/lib.cpp",
    ),
    "path_of_a_moved_file": (
        {"src/lib.cpp": SOURCE + lines("// the kernels live in src/old/kernels.cpp"), "docs/guide.md": guide()},
        "src/lib.cpp:7: src/old/kernels.cpp names no file of the repository",
    ),
    "python_block_nothing_runs": (
        {"src/lib.cpp": SOURCE, "docs/guide.md": guide() + lines("```python", "print(42)", "```")},
        "docs/guide.md:9: a Python block that nothing runs",
    ),
}


@pytest.mark.parametrize("case", FAILURES, ids=list(FAILURES))
def test_problem_is_reported_with_file_and_line(tmp_path, case):
    files, expected = FAILURES[case]
    result = run_check(make_repo(tmp_path, files))
    assert result.returncode == 1
    problems = result.stdout.splitlines()[:-1]
    assert len(problems) == 1, result.stdout
    assert problems[0].startswith(expected), result.stdout
    assert result.stdout.splitlines()[-1].endswith(" 1 problems")


def test_fix_rewrites_a_stale_quote_and_keeps_the_language_tag(tmp_path):
    stale = guide(body=["int answer() {", "  return 41;", "}"]) + lines("", "The end.")
    root = make_repo(tmp_path, {"src/lib.cpp": SOURCE, "docs/guide.md": stale})
    result = run_check(root, "--fix")
    assert result.returncode == 0, result.stdout
    assert "fixed docs/guide.md:3: src/lib.cpp ANSWER" in result.stdout
    assert (root / "docs/guide.md").read_text() == guide() + lines("", "The end.")
    assert run_check(root).returncode == 0


def test_fix_fills_an_empty_block_with_the_dedented_region(tmp_path):
    source = lines(
        "class Box:",
        "    " + marker("START", "BOX_SIZE", "#"),
        "    def size(self):",
        "        return 1",
        "    " + marker("END", "BOX_SIZE", "#"),
    )
    doc = lines(directive("pkg/box.py", "BOX_SIZE"), "```python", "```")
    root = make_repo(tmp_path, {"pkg/box.py": source, "docs/box.md": doc})
    assert run_check(root, "--fix").returncode == 0
    expected = lines(
        directive("pkg/box.py", "BOX_SIZE"), "```python", "def size(self):", "    return 1", "```"
    )
    assert (root / "docs/box.md").read_text() == expected


def test_directive_inside_a_code_block_is_an_example(tmp_path):
    example = lines("~~~markdown", directive("src/gone.cpp", "NOPE"), "```cpp", "```", "~~~")
    root = make_repo(tmp_path, {"src/lib.cpp": SOURCE, "docs/guide.md": guide() + example})
    result = run_check(root)
    assert result.returncode == 0, result.stdout


def test_ignored_files_and_docs_need_no_quote(tmp_path):
    files = {
        "src/lib.cpp": SOURCE,
        ".gitignore": "build/\n",
        "build/generated.cpp": lines(marker("START", "GENERATED"), marker("END", "GENERATED")),
        "docs/notes.md": lines(marker("START", "IN_DOCS"), marker("END", "IN_DOCS")),
        "docs/guide.md": guide(),
    }
    result = run_check(make_repo(tmp_path, files))
    assert result.returncode == 0, result.stdout
    assert "1 quotes, 1 markers" in result.stdout


def test_fix_lengthens_the_fence_around_code_that_holds_a_fence(tmp_path):
    source = lines(
        marker("START", "USAGE", "#"),
        'USAGE = """',
        "```sh",
        "run it",
        "```",
        '"""',
        marker("END", "USAGE", "#"),
    )
    doc = lines(directive("usage.py", "USAGE"), "```python", "```")
    root = make_repo(tmp_path, {"usage.py": source, "docs/usage.md": doc})
    assert run_check(root, "--fix").returncode == 0
    text = (root / "docs/usage.md").read_text()
    assert text.startswith(lines(directive("usage.py", "USAGE"), "````python"))
    assert text.endswith('"""\n````\n')
