#!/usr/bin/env python3
"""How big the code is, against a budget written in the repository, in the
spirit of tinygrad's line budget: lines of code per package, split into the
plain path and the speed layers (folders named `fast/`), tests excluded. A
line of code is a line that is neither blank nor only a comment. Prints the
table and each package's largest files; exits 1 when a part is over its
budget in tools/size_budget.toml. A file may be as long as one thing needs:
the budget is per package, not per file.

    python3.11 tools/size_report.py [--root REPO]

Standard library only; `tools/dev.py test` runs it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tomllib
from pathlib import Path

SOURCE_SUFFIXES = {".py", ".c", ".cpp", ".h", ".hpp"}
COMMENT_STARTS = ("#", "//", "/*", "*")


def lines_of_code(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip() and not line.strip().startswith(COMMENT_STARTS))


sys.path.insert(0, str(Path(__file__).resolve().parent))
from layering import is_speed_layer  # noqa: E402  (the same tags as the layering rules)


def tracked(root: Path, folder: str) -> list[Path]:
    """The tracked source files under folder, relative to root, tests excluded."""
    listing = subprocess.run(["git", "-C", str(root), "ls-files", "-z", folder],
                             capture_output=True, text=True, check=True).stdout
    return [Path(name) for name in filter(None, listing.split("\0"))
            if Path(name).suffix in SOURCE_SUFFIXES and "tests" not in Path(name).parts]


def package_sources(root: Path, package: str) -> list[Path]:
    """The package's tracked source files, relative to the package, tests excluded."""
    return [path.relative_to(f"packages/{package}") for path in tracked(root, f"packages/{package}")]


def files_too_long(root: Path, rule: dict) -> list[str]:
    """Source files of packages/ and tools/ past the limit of lines, but those exempt by name."""
    too_long = []
    for path in tracked(root, "packages") + tracked(root, "tools"):
        lines = len((root / path).read_text(encoding="utf-8").splitlines())
        if lines > rule["limit"] and str(path) not in rule["exempt"]:
            too_long.append(f"{path}: {lines} lines, more than {rule['limit']} (split it along its seams)")
    return too_long


def measure(root: Path, package: str) -> dict[str, dict[Path, int]]:
    """{"plain": {file: lines}, "speed": {file: lines}} for one package."""
    parts: dict[str, dict[Path, int]] = {"plain": {}, "speed": {}}
    for path in package_sources(root, package):
        count = lines_of_code((root / "packages" / package / path).read_text(encoding="utf-8"))
        parts["speed" if is_speed_layer(path) else "plain"][path] = count
    return parts


def report(root: Path) -> list[str]:
    """Prints the table; returns the budgets exceeded, one line each."""
    budget = tomllib.loads((root / "tools" / "size_budget.toml").read_text())
    over = []
    print(f"{'package':<22} {'plain':>7} {'budget':>7} {'speed':>7} {'budget':>7}   largest files")
    for package, limits in budget["packages"].items():
        parts = measure(root, package)
        totals = {part: sum(files.values()) for part, files in parts.items()}
        largest = sorted({**parts["plain"], **parts["speed"]}.items(), key=lambda item: -item[1])[:3]
        print(f"{package:<22} {totals['plain']:>7} {limits['plain']:>7} {totals['speed']:>7} "
              f"{limits.get('speed', 0):>7}   " + ", ".join(f"{path} {count}" for path, count in largest))
        for part in ("plain", "speed"):
            if totals[part] > limits.get(part, 0):
                over.append(f"{package}: {part} path {totals[part]} lines, budget {limits.get(part, 0)}")
    tools = {path: lines_of_code((root / path).read_text(encoding="utf-8")) for path in tracked(root, "tools")}
    print(f"{'tools/':<22} {sum(tools.values()):>7} {budget['tools']['plain']:>7}")
    if sum(tools.values()) > budget["tools"]["plain"]:
        over.append(f"tools/: {sum(tools.values())} lines, budget {budget['tools']['plain']}")
    over += files_too_long(root, budget["files"])
    listed = set(budget["packages"])
    on_disk = {p.name for p in (root / "packages").iterdir() if (p / "pyproject.toml").exists()}
    over += [f"{name}: no budget in tools/size_budget.toml" for name in sorted(on_disk - listed)]
    return over


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    over = report(parser.parse_args(argv).root)
    for line in over:
        print(f"over budget: {line}")
    print(f"size report: {'within budget' if not over else f'{len(over)} over budget'}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
