"""tools/size_report.py: what counts as a line of code, which files are a
speed layer, and that a package over its budget fails the report."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("size_report", ROOT / "tools" / "size_report.py")
size_report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(size_report)


def test_blank_lines_and_comment_lines_are_not_code():
    text = "\n".join(["# a comment", "x = 1  # code", "", "// also a comment", " * inside a block comment",
                      "int y = 2;", "   "])
    assert size_report.lines_of_code(text) == 2


def test_a_package_over_its_budget_fails_and_the_speed_layer_counts_apart(tmp_path, capsys):
    package = tmp_path / "packages" / "demo"
    (package / "src" / "fast").mkdir(parents=True)
    (package / "tests").mkdir()
    (package / "pyproject.toml").write_text("")
    (package / "src" / "plain.py").write_text("a = 1\nb = 2\nc = 3\n")
    (package / "src" / "fast" / "quick.cpp").write_text("int q;\n")
    (package / "tests" / "test_demo.py").write_text("x = 1\n" * 50)  # tests are not counted
    (tmp_path / "tools").mkdir()
    budget = tmp_path / "tools" / "size_budget.toml"
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "."], check=True)

    rules = "[files]\nlimit = 600\nexempt = []\n[tools]\nplain = 0\n"
    budget.write_text(rules + "[packages.demo]\nplain = 3\nspeed = 1\n")
    assert size_report.main(["--root", str(tmp_path)]) == 0
    budget.write_text(rules + "[packages.demo]\nplain = 2\nspeed = 1\n")
    assert size_report.main(["--root", str(tmp_path)]) == 1
    assert "over budget: demo: plain path 3 lines, budget 2" in capsys.readouterr().out


def test_a_file_past_the_line_limit_fails_unless_exempt_by_name(tmp_path, capsys):
    package = tmp_path / "packages" / "demo"
    package.mkdir(parents=True)
    (package / "pyproject.toml").write_text("")
    (package / "long.py").write_text("# a reader holds the whole file\n" * 11)
    (tmp_path / "tools").mkdir()
    budget = tmp_path / "tools" / "size_budget.toml"
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "."], check=True)
    budget.write_text("[files]\nlimit = 10\nexempt = []\n[tools]\nplain = 0\n[packages.demo]\nplain = 0\n")
    assert size_report.main(["--root", str(tmp_path)]) == 1
    assert "packages/demo/long.py: 11 lines, more than 10" in capsys.readouterr().out
    budget.write_text('[files]\nlimit = 10\nexempt = ["packages/demo/long.py"]\n[tools]\nplain = 0\n'
                      "[packages.demo]\nplain = 0\n")
    assert size_report.main(["--root", str(tmp_path)]) == 0


def test_the_repository_is_within_its_budget():
    assert size_report.main(["--root", str(ROOT)]) == 0
