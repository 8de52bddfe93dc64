"""Sphinx extension: the ```{openreg-run} directive runs a Python snippet at build time.

The page shows the snippet and the output of that very run (stdout and stderr
as a terminal shows them), so shown output cannot go stale. Each snippet runs
in an interpreter of its own (fresh, or forked from one that has imported
torch: Note [A warm interpreter]) of the build's environment, in a temporary
directory, with only the OPENREG/TORCH settings the directive names; machine
paths are scrubbed from the output. It is not a test runner: keep snippets short.

    ```{openreg-run}
    :file: oom.py                       (optional: saved under this name, command shown)
    :env: OPENREG_DEVICE_MEMORY=64MiB   (optional: settings, shown in the command)
    :args: -X faulthandler              (optional: interpreter options)
    :returncode: 1                      (optional: the exit status expected; default 0)
    :hide-code:                         (optional: show only command and output)
    :image: plot.svg                    (optional: an SVG picture the snippet writes, shown after the output)
    import torch
    ...
    ```

A directive with :file: and no body runs the snippet saved earlier in the
same page under that name again (e.g. with other settings).
"""

import ast
import atexit
import json
import os
import select
import shlex
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_SECONDS = 120  # conf.py's openreg_run_timeout replaces it
# Settings of the caller's shell must not change what a page shows.
CLEARED_PREFIXES = ("OPENREG_", "TORCH_", "PYTORCH_")
logger = logging.getLogger(__name__)


def scrub(text: str, workdir: str) -> str:
    """The output without the paths of this machine: the snippet's directory,
    the repository, the Python installation and PyTorch's build machine."""
    replacements = [
        (workdir + os.sep, ""),
        (workdir, "."),
        (str(ROOT) + os.sep, ""),
        (sysconfig.get_paths()["stdlib"] + os.sep, "lib/python3.11/"),
        ("/__w/pytorch/pytorch/", "pytorch/"),
    ]
    for old, new in replacements:
        text = text.replace(old, new)
    return text


def snippet_environment(settings: list[str]) -> dict:
    env = {name: value for name, value in os.environ.items() if not name.startswith(CLEARED_PREFIXES)}
    env["PYTHONUNBUFFERED"] = "1"  # stdout and stderr interleave as they would in a terminal
    # Where a snippet finds the repository's data files (a reader runs it from the repository's root).
    env["OPENREG_REPOSITORY"] = str(ROOT)
    for setting in settings:
        name, _, value = setting.partition("=")
        env[name] = value
    return env


def run_snippet(code: str, file: str | None, settings: list[str], args: list[str],
                image: str | None = None) -> tuple[int | None, str, float, str | None, str]:
    """Exit status (None on timeout), scrubbed output, seconds taken of one run, the text of the
    SVG picture named `image` that it wrote (None if it wrote none), and "fresh" or "warm"."""
    started = time.monotonic()
    warm = None if settings or args or not starts_by_importing_torch(code) else WarmInterpreter.get()
    if warm is not None:
        try:
            returncode, output, svg = run_in_a_new_directory(code, file, image, warm.run)
            return returncode, output, time.monotonic() - started, svg, "warm"
        except (OSError, ValueError) as failure:  # the warm interpreter failed: the snippet runs fresh
            logger.info("openreg-run: the warm interpreter failed (%s); the snippet runs fresh", failure)

    def fresh(code: str, file: str | None, workdir: str) -> tuple[int | None, str]:
        return run_in_a_fresh_interpreter(code, file, settings, args, workdir)

    returncode, output, svg = run_in_a_new_directory(code, file, image, fresh)
    return returncode, output, time.monotonic() - started, svg, "fresh"


def run_in_a_new_directory(code: str, file: str | None, image: str | None,
                           run: Callable[[str, str | None, str], tuple[int | None, str]]
                           ) -> tuple[int | None, str, str | None]:
    """run(code, file, workdir) in an empty temporary directory (the snippet saved there as file):
    its exit status, its output scrubbed, and the SVG picture named image it wrote, if any."""
    with tempfile.TemporaryDirectory(prefix="openreg-run-") as workdir:
        if file:
            Path(workdir, file).write_text(code)
        returncode, output = run(code, file, workdir)
        picture = Path(workdir, image) if image else None
        svg = picture.read_text() if picture and picture.is_file() else None
        return returncode, scrub(output, workdir), svg


def run_in_a_fresh_interpreter(code: str, file: str | None, settings: list[str], args: list[str],
                               workdir: str) -> tuple[int | None, str]:
    if file:
        command, given = [sys.executable, *args, file], {"stdin": subprocess.DEVNULL}
    else:
        command, given = [sys.executable, *args, "-"], {"input": code}  # tracebacks say <stdin>
    try:
        finished = subprocess.run(command, cwd=workdir, env=snippet_environment(settings), stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT_SECONDS, **given)
    except subprocess.TimeoutExpired as expired:
        output = expired.stdout.decode() if isinstance(expired.stdout, bytes) else expired.stdout or ""
        return None, output
    return finished.returncode, finished.stdout


# Note [A warm interpreter]
# Nearly every snippet begins with `import torch`, which costs a fresh
# interpreter about 1.3 s of CPU, more than most snippets then take. On
# Linux, a snippet with no :env: and no :args: whose first statements
# import torch (after nothing but imports of the standard library) runs
# instead in a child forked from one interpreter that has already imported
# torch (and, through torch's autoload, openreg's backend) with the very
# environment such a snippet gets (docs/_ext/warm_interpreter.py). The
# child starts where a fresh `python -` stands after that import, runs the
# rest, and exits as one does (threads joined, atexit handlers run). Any
# other snippet runs fresh: one that sets environment variables or sizes
# the devices before it imports torch must, since torch and the backend
# read those at import. The warm interpreter never touches the device, so
# its children may use it (a child of a parent that did could not, as with
# CUDA). If it prints anything while it starts, the snippets would not show
# it, so every snippet then runs fresh. It kills a snippet at its timeout or
# when the build stops waiting for it, and ends when the build's pipe to it
# closes: nothing outlives a build, even one killed. What a child still
# shows differently: the warm interpreter's hash seed (the order of a set of
# strings, which differs between fresh runs anyway), its process time
# (time.process_time() starts near 0), an uncaught KeyboardInterrupt's exit
# status (1, not -2), and output that a process it started prints after it
# exits (a fresh run's pipe waits for it). The guide's build took 177 CPU
# seconds so instead of 232 (2026-11-30), every output the same but for
# the times, addresses and process ids it prints.
def starts_by_importing_torch(code: str) -> bool:
    try:
        statements = ast.parse(code).body
    except SyntaxError:
        return False  # a fresh interpreter reports it as Python does
    for statement in statements:
        if isinstance(statement, ast.Import):
            modules = [alias.name for alias in statement.names]
        elif isinstance(statement, ast.ImportFrom) and statement.level == 0:
            modules = [statement.module or ""]
        elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue  # a docstring
        else:
            return False
        others = [module for module in modules if module.partition(".")[0] != "torch"]
        if not all(module.partition(".")[0] in sys.stdlib_module_names for module in others):
            return False
        if len(others) < len(modules):
            return True
    return False


class WarmInterpreter:
    _lock = threading.Lock()
    _tried = False
    _the_one: "WarmInterpreter | None" = None

    @classmethod
    def get(cls) -> "WarmInterpreter | None":
        """The build's warm interpreter, started at the first call; None if it cannot be used."""
        with cls._lock:
            if not cls._tried:
                # Only on Linux: macOS's system libraries may not survive a fork (Python spawns there).
                cls._tried, cls._the_one = True, cls._start() if sys.platform == "linux" else None
            return cls._the_one

    @classmethod
    def _start(cls) -> "WarmInterpreter | None":
        folder = tempfile.mkdtemp(prefix="openreg-warm-")
        path = os.path.join(folder, "socket")
        process = subprocess.Popen([sys.executable, str(Path(__file__).with_name("warm_interpreter.py")), path],
                                   cwd=folder, env=snippet_environment([]), stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        printed = _read_until_a_line(process.stdout.fileno(), time.monotonic() + TIMEOUT_SECONDS)
        if printed != b"ready\n":
            process.kill()
            process.wait()
            logger.info("openreg-run: every snippet runs in a fresh interpreter; the warm one printed %r",
                        printed[:2000])
            shutil.rmtree(folder, ignore_errors=True)
            return None
        process.stdout.close()  # the warm interpreter writes nothing more
        warm = WarmInterpreter(process, folder, path)
        atexit.register(warm.stop)
        return warm

    def __init__(self, process: subprocess.Popen, folder: str, path: str) -> None:
        self.process, self.folder, self.path = process, folder, path

    def run(self, code: str, file: str | None, workdir: str) -> tuple[int | None, str]:
        """Runs the snippet in a child of the warm interpreter, which kills it at the timeout. Any
        failure raises OSError or ValueError; closing the connection then kills the child too."""
        output = tempfile.NamedTemporaryFile(dir=self.folder, delete=False).name  # not in the snippet's directory
        request = {"code": code, "file": file, "workdir": workdir, "output": output, "timeout": TIMEOUT_SECONDS}
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
                connection.settimeout(TIMEOUT_SECONDS + 30)  # the warm interpreter keeps the snippet's time
                connection.connect(self.path)
                connection.sendall(json.dumps(request).encode() + b"\n")
                status = connection.makefile("r").readline().strip()
                returncode = None if status == "timed out" else int(status)
            return returncode, Path(output).read_text()
        finally:
            os.unlink(output)

    def stop(self) -> None:
        self.process.stdin.close()  # the warm interpreter exits when its input ends
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.folder, ignore_errors=True)


class snippet_output(nodes.General, nodes.Element):
    """Placeholder for a snippet's output until the run finishes; holds what
    is needed to run the snippet again (a page read in an earlier build)."""


# Snippets start while pages are read and run side by side; the pages wait for
# their output only when written. Keys are (code, file, settings, args, image, page, line).
RUNNER = ThreadPoolExecutor(max_workers=(os.cpu_count() or 2) + 1)
RUNS: dict[tuple, Future] = {}


def start_run(key: tuple) -> Future:
    if key not in RUNS:
        code, file, settings, args, image = key[:5]
        RUNS[key] = RUNNER.submit(run_snippet, code, file, list(settings), list(args), image)
    return RUNS[key]


class OpenRegRun(SphinxDirective):
    has_content = True
    option_spec = {
        "file": directives.unchanged_required,
        "env": directives.unchanged_required,
        "args": directives.unchanged_required,
        "returncode": int,
        "hide-code": directives.flag,
        "image": directives.unchanged_required,
    }

    def run(self) -> list[nodes.Node]:
        file = self.options.get("file")
        settings = tuple(shlex.split(self.options.get("env", "")))
        args = tuple(shlex.split(self.options.get("args", "")))
        saved = self.env.temp_data.setdefault("openreg_run_files", {})
        code = "\n".join(self.content).rstrip() + "\n" if self.content else None
        if code is None:
            if file not in saved:
                raise self.error("openreg-run: no snippet: give a body, or :file: naming a snippet "
                                 "shown earlier on this page")
            code = saved[file]
        elif file:
            saved[file] = code
        if (settings or args) and not file:
            raise self.error("openreg-run: name the script with :file: so the page can show the command "
                             "that carries :env: and :args:")

        shown: list[nodes.Node] = []
        if "hide-code" not in self.options:
            shown.append(self.code_block(code, "python"))
        if file:
            shown.append(self.code_block(" ".join([*settings, "python", *args, file]), "sh"))
        source, line = self.get_source_info()
        image = self.options.get("image")
        if image and not image.endswith(".svg"):
            raise self.error("openreg-run: :image: names an SVG file the snippet writes")
        placeholder = snippet_output(key=(code, file, settings, args, image, source, line),
                                     returncode=self.options.get("returncode", 0))
        self.set_source_info(placeholder)
        start_run(placeholder["key"])
        return [*shown, placeholder]

    def code_block(self, text: str, language: str) -> nodes.literal_block:
        block = nodes.literal_block(text, text, language=language)
        self.set_source_info(block)
        return block


def fill_in_outputs(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """Replaces each placeholder with the output of its run, waiting for it."""
    for placeholder in list(doctree.findall(snippet_output)):
        key, expected = placeholder["key"], placeholder["returncode"]
        returncode, output, seconds, svg, how = start_run(key).result()
        logger.verbose("openreg-run %s:%s took %.1f s (%s)", key[5], key[6], seconds, how)  # shown with -v
        if returncode != expected:
            status = "timed out" if returncode is None else f"exited with status {returncode}"
            logger.warning("openreg-run: the snippet %s, expected %d; its output:\n%s", status, expected,
                           output, location=placeholder)
        text = output.rstrip("\n") or "(no output)"
        block = nodes.literal_block(text, text, language="text")
        block.source, block.line = placeholder.source, placeholder.line
        shown = [block]
        if key[4]:
            if svg is None:
                logger.warning("openreg-run: the snippet wrote no %s for :image:", key[4], location=placeholder)
            else:  # inline, so the page needs no file beside it
                shown.append(nodes.raw("", f'<div class="openreg-run-image">{svg}</div>', format="html"))
        placeholder.replace_self(shown)


def _read_until_a_line(fd: int, deadline: float) -> bytes:
    """What a pipe gives until a newline, its end or the deadline, whichever comes first."""
    found = b""
    while not found.endswith(b"\n") and time.monotonic() < deadline:
        readable, _, _ = select.select([fd], [], [], deadline - time.monotonic())
        chunk = os.read(fd, 4096) if readable else b""
        if not chunk:
            break
        found += chunk
    return found


def read_settings(app: Sphinx, config) -> None:
    global TIMEOUT_SECONDS
    TIMEOUT_SECONDS = config.openreg_run_timeout


def setup(app: Sphinx) -> dict:
    app.add_config_value("openreg_run_timeout", TIMEOUT_SECONDS, "env")  # seconds a snippet may run
    app.connect("config-inited", read_settings)
    app.add_node(snippet_output)
    app.add_directive("openreg-run", OpenRegRun)
    app.connect("doctree-resolved", fill_in_outputs)
    # Runs live in this process until the pages are written: no parallel reading.
    return {"parallel_read_safe": False, "parallel_write_safe": True}
