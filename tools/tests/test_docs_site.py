"""Tests of the guide's Sphinx extensions (docs/_ext): each builds a one-page
site in a throwaway directory with warnings as errors. The real guide's build
is `tools/dev.py docs`; these check that the build fails when it must."""

import html as html_text
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXTENSIONS = REPO / "docs" / "_ext"


def build_site(tmp_path: Path, page: str, repo: Path | None = None, conf: str = "",
               verbose: bool = False, env: dict | None = None) -> tuple[subprocess.CompletedProcess, str]:
    """Builds a site whose only page is `page` (conf.py ends with `conf`) in the
    environment `env` (default: this one's); returns the run and the page's text
    (HTML tags removed, so highlighted code reads as written). `verbose` logs
    each snippet's run."""
    source = tmp_path / "site"
    source.mkdir()
    checked = repo or make_repo(tmp_path / "repo", {})
    (source / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(EXTENSIONS)!r})\n"
        "extensions = ['myst_parser', 'quote_check', 'openreg_run']\n"
        f"quote_check_root = {str(checked)!r}\n" + conf
    )
    (source / "index.md").write_text(page)
    run = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-E", "-v" if verbose else "-q", "-b", "html",
         str(source), str(tmp_path / "out")],
        capture_output=True, text=True, timeout=300, env=env,
    )
    html = tmp_path / "out" / "index.html"
    return run, html_text.unescape(re.sub(r"<[^>]+>", "", html.read_text())) if html.exists() else ""


def make_repo(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def snippet(*lines: str) -> str:
    return "\n".join(["# Page", "", "```{openreg-run}", *lines, "```", ""])


def test_snippet_output_is_shown_with_the_code(tmp_path):
    run, html = build_site(tmp_path, snippet("print(6 * 7)", "print('done')"))
    assert run.returncode == 0, run.stderr
    assert "print(6 * 7)\nprint('done')" in html  # the code, then its output
    assert "42\ndone" in html


def test_settings_reach_the_snippet_and_the_shells_do_not(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENREG_FROM_THE_SHELL", "leaked")
    page = snippet(":file: env.py", ":env: OPENREG_GIVEN=yes",
                   "import os",
                   "print(os.environ.get('OPENREG_GIVEN'), os.environ.get('OPENREG_FROM_THE_SHELL'))")
    run, html = build_site(tmp_path, page)
    assert run.returncode == 0, run.stderr
    assert "yes None" in html
    assert "OPENREG_GIVEN=yes python env.py" in html


def test_machine_paths_are_scrubbed(tmp_path):
    page = snippet(":file: where.py", "import os", "print(os.path.abspath('where.py'))", "print(os.getcwd())")
    run, html = build_site(tmp_path, page)
    assert run.returncode == 0, run.stderr
    assert "openreg-run-" not in html  # the temporary directory's name
    assert "where.py\n" in html


def test_unexpected_exit_status_fails_the_build(tmp_path):
    run, _ = build_site(tmp_path, snippet("raise SystemExit(3)"))
    assert run.returncode != 0
    assert "exited with status 3, expected 0" in run.stderr


def test_expected_failure_shows_the_traceback(tmp_path):
    page = snippet(":file: boom.py", ":returncode: 1", "raise ValueError('boom')")
    run, html = build_site(tmp_path, page)
    assert run.returncode == 0, run.stderr
    assert "ValueError: boom" in html and 'File "boom.py", line 1' in html


def test_a_file_is_run_again_with_other_settings(tmp_path):
    page = "\n".join([
        snippet(":file: show.py", "import os", "print('mode', os.environ.get('OPENREG_MODE'))"),
        "```{openreg-run}", ":file: show.py", ":env: OPENREG_MODE=two", ":hide-code:", "```", "",
    ])
    run, html = build_site(tmp_path, page)
    assert run.returncode == 0, run.stderr
    assert "mode None" in html and "mode two" in html


def test_a_picture_the_snippet_writes_is_shown(tmp_path):
    page = snippet(":file: draw.py", ":image: dot.svg",
                   "from pathlib import Path",
                   "Path('dot.svg').write_text('<svg xmlns=\"http://www.w3.org/2000/svg\"><title>a dot</title>'",
                   "                           '<circle r=\"4\"/></svg>')",
                   "print('drawn')")
    run, html = build_site(tmp_path, page)
    assert run.returncode == 0, run.stderr
    assert "drawn" in html and "a dot" in html
    assert '<circle r="4"/>' in (tmp_path / "out" / "index.html").read_text()


def test_a_missing_picture_fails_the_build(tmp_path):
    run, _ = build_site(tmp_path, snippet(":file: draw.py", ":image: none.svg", "print('nothing drawn')"))
    assert run.returncode != 0
    assert "wrote no none.svg" in run.stderr


def test_unquoted_marker_fails_the_build(tmp_path):
    repo = make_repo(tmp_path / "repo", {"src/lib.cpp": "// LITERALINCLUDE START: LONELY\nint x;\n"
                                                        "// LITERALINCLUDE END: LONELY\n"})
    run, _ = build_site(tmp_path, "# Page\n\nNo quotes here.\n", repo=repo)
    assert run.returncode != 0
    assert "marker LONELY is not quoted by any doc" in run.stderr


def test_quote_of_a_missing_marker_fails_the_build(tmp_path):
    repo = make_repo(tmp_path / "repo", {"src/lib.cpp": "int x;\n",
                                         "docs/page.md": "<!-- LITERALINCLUDE: src/lib.cpp GONE -->\n```cpp\n```\n"})
    run, _ = build_site(tmp_path, "# Page\n", repo=repo)
    assert run.returncode != 0
    assert "marker GONE not found in src/lib.cpp" in run.stderr


def build_pages(tmp_path: Path, pages: dict[str, str], root_doc: str = "index") -> subprocess.CompletedProcess:
    """Builds a site of several pages with the navigation extension only."""
    source = tmp_path / "site"
    source.mkdir()
    (source / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(EXTENSIONS)!r})\n"
        f"extensions = ['myst_parser', 'site_navigation']\nroot_doc = {root_doc!r}\n"
    )
    for name, text in pages.items():
        (source / f"{name}.md").write_text(text)
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-E", "-q", "-b", "html", str(source),
         str(tmp_path / "out")], capture_output=True, text=True, timeout=300)


def toctree(*entries: str) -> str:
    return "\n".join(["```{toctree}", *entries, "```", ""])


def test_a_part_hanging_from_no_navigation_fails_the_build(tmp_path):
    # part.md is in no toctree (Sphinx says so); page.md is in part.md's, so only this check finds it.
    run = build_pages(tmp_path, {"index": "# Start\n\n" + toctree("first"), "first": "# First\n",
                                 "part": "# Part\n\n" + toctree("page"), "page": "# Page\n"})
    assert run.returncode != 0
    assert "page is not reachable from the navigation" in run.stderr
    assert "first is not reachable" not in run.stderr


def test_the_site_opens_at_index_html_when_its_start_page_has_another_name(tmp_path):
    run = build_pages(tmp_path, {"README": "# Start\n\n" + toctree("first"), "first": "# First\n"}, root_doc="README")
    assert run.returncode == 0, run.stderr
    assert 'url=README.html' in (tmp_path / "out" / "index.html").read_text()


# A snippet that shows what a fresh interpreter would: its name, arguments and
# path, a thread joined and an atexit handler run at exit, and the traceback
# of the error it ends with.
TELLS_WHERE_IT_RUNS = [
    "import torch",
    "import atexit, sys, threading, time",
    "print(__name__, sys.argv, sys.orig_argv[1:], repr(sys.path[0])[:2], __spec__)",
    "print(sorted(globals())[:9], type(__loader__).__name__)",
    "atexit.register(print, 'atexit handler ran')",
    "threading.Thread(target=lambda: (time.sleep(0.5), print('thread joined'))).start()  # after the traceback",
    "def fails():",
    "    raise ValueError('the end')",
    "fails()",
]


def fresh_output(tmp_path: Path, code: str, file: str | None) -> str:
    """What `python -` or `python FILE` prints for `code`, run as the guide's build runs a fresh snippet."""
    workdir = tmp_path / "fresh"
    workdir.mkdir()
    sys.path.insert(0, str(EXTENSIONS))
    try:
        import openreg_run
        if file:
            (workdir / file).write_text(code)
        _, output = openreg_run.run_in_a_fresh_interpreter(code, file, [], [], str(workdir))
        return openreg_run.scrub(output, str(workdir))
    finally:
        sys.path.remove(str(EXTENSIONS))


linux_only = pytest.mark.skipif(sys.platform != "linux", reason="the warm interpreter forks on Linux only")


@linux_only
@pytest.mark.parametrize("file", [None, "where.py"])
def test_a_snippet_forked_from_the_warm_interpreter_shows_what_a_fresh_one_would(tmp_path, file):
    code = "\n".join(TELLS_WHERE_IT_RUNS) + "\n"
    options = [f":file: {file}"] if file else []
    run, html = build_site(tmp_path, snippet(*options, ":returncode: 1", *TELLS_WHERE_IT_RUNS), verbose=True)
    assert run.returncode == 0, run.stderr
    assert "(warm)" in run.stdout and "(fresh)" not in run.stdout
    expected = fresh_output(tmp_path, code, file)
    assert "atexit handler ran" in expected and "ValueError: the end" in expected  # the comparison means something
    assert expected.rstrip("\n") in html


def test_a_snippet_that_does_anything_before_importing_torch_runs_fresh(tmp_path):
    page = snippet("import os", "os.environ['OPENREG_DEVICE_COUNT'] = '3'", "import torch",
                   "print('devices', torch.openreg.device_count())")
    run, html = build_site(tmp_path, page, verbose=True)
    assert run.returncode == 0, run.stderr
    assert "(fresh)" in run.stdout and "(warm)" not in run.stdout
    assert "devices 3" in html


@linux_only
def test_a_warm_snippet_past_its_time_is_killed_and_fails_the_build(tmp_path):
    page = snippet(":file: forever.py", "import torch", "import os, time", "print('pid', os.getpid(), flush=True)",
                   "time.sleep(600)")
    run, html = build_site(tmp_path, page, conf="openreg_run_timeout = 5\n", verbose=True)
    assert run.returncode != 0
    assert "the snippet timed out, expected 0" in run.stderr and "(warm)" in run.stdout
    pid = int(re.search(r"pid (\d+)", html).group(1))
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:  # its waiter reaps it
        time.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists()


@linux_only
def test_a_warm_interpreter_that_prints_while_it_starts_is_not_used(tmp_path):
    """What an interpreter prints as it starts (here a sitecustomize module) belongs to each snippet's
    output: a child of the warm interpreter would not show it, so the snippet runs fresh and does."""
    site = tmp_path / "site-customized"
    site.mkdir()
    (site / "sitecustomize.py").write_text("print('starting up')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    run, html = build_site(tmp_path, snippet("import torch", "print('snippet ran')"), verbose=True, env=env)
    assert run.returncode == 0, run.stderr
    assert "(fresh)" in run.stdout and "(warm)" not in run.stdout
    assert "starting up\nsnippet ran" in html


BUILD_THAT_DIES = """
import sys
sys.path.insert(0, sys.argv[1])
import openreg_run
warm = openreg_run.WarmInterpreter.get()
code = f"import torch\\nimport os, time\\nopen({sys.argv[2]!r}, 'w').write(str(os.getpid()))\\ntime.sleep(600)\\n"
warm.run(code, "forever.py", sys.argv[3])
"""


@linux_only
def test_a_build_that_dies_leaves_no_snippet_and_no_warm_interpreter_running(tmp_path):
    """The warm interpreter ends when the build's pipe closes, and the waiter kills a snippet whose
    build went away: nothing outlives a build killed with SIGKILL."""
    pid_file = tmp_path / "snippet.pid"
    build = subprocess.Popen([sys.executable, "-c", BUILD_THAT_DIES, str(EXTENSIONS), str(pid_file), str(tmp_path)])
    try:
        deadline = time.monotonic() + 120
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline and build.poll() is None, "the snippet never started"
            time.sleep(0.2)
        started = [int(pid_file.read_text()), *_children(build.pid)]  # the snippet, the warm interpreter
        assert len(started) == 2
    finally:
        build.kill()
        build.wait()
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(pid) for pid in started)


def _children(parent: int) -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir()
            if entry.name.isdigit() and _stat(int(entry.name))[1:2] == [str(parent)]]


def _stat(pid: int) -> list[str]:
    """State and parent of a process, [] once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[:2]
    except (OSError, IndexError):
        return []


def _alive(pid: int) -> bool:
    return _stat(pid)[:1] not in ([], ["Z"])
