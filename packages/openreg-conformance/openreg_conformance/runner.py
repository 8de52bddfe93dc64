"""Runs the suite in pytest processes the runner watches: per-file timeouts,
crashes survived, failures retried.

One pytest process runs every selected file in turn (one import of torch and
the backend for the whole suite) and appends a JSON line per event to a
progress file (plugin.py). The runner watches it: a file running past its
timeout has its process killed and is reported as timed out; a process that
dies (a crash in the backend) loses only the file it was in, reported as
failed with the exit status. Either way a new process goes on with the files
not yet started. Every failed test then runs again, in a fresh process,
up to `retries` times: one that passes on a retry is flaky, one
that fails every time fails consistently, as PyTorch's out-of-tree runner
(run_openreg_tests.py) reports them. (The failures of a round rerun
together, in one fresh process per round.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

SUITE = Path(__file__).resolve().parent / "suite"
POLL_S = 0.2


@dataclass
class Outcome:
    nodeid: str  # relative to the suite: "test_device.py::test_count"
    outcome: str  # passed, failed, skipped
    message: str = ""
    duration: float = 0.0
    phase: str = "call"  # setup, call, teardown; collect for a file that failed to import, or skipped as it did

    @property
    def retriable(self) -> bool:
        """A failed test can run again by itself; a file that failed to import or a dead process cannot."""
        return self.phase != "collect" and not self.nodeid.endswith("::<process>")


@dataclass
class Results:
    tests: dict[str, Outcome] = field(default_factory=dict)
    timed_out: list[str] = field(default_factory=list)  # files
    crashed: dict[str, str] = field(default_factory=dict)  # file -> how
    flaky: list[str] = field(default_factory=list)
    environment: dict = field(default_factory=dict)
    seconds: float = 0.0

    def record(self, outcome: Outcome) -> None:
        # A test's worst phase wins (a pass, then a failing teardown: failed).
        previous = self.tests.get(outcome.nodeid)
        if previous is None or previous.outcome != "failed":
            self.tests[outcome.nodeid] = outcome

    def failed(self) -> list[str]:
        return sorted(n for n, o in self.tests.items() if o.outcome == "failed")

    def stopped(self, where: str, how: str, running: str | None) -> None:
        """The process stopped (timed out, or died) in file `where`, running test `running`."""
        self.record(Outcome(f"{where}::<process>", "failed", f"the test process {how}"
                            + (f" while running {running}" if running else "") + "; its output is in the log",
                            phase="process"))


@dataclass(frozen=True)
class Options:
    device: str
    files: list[str]
    pytest_args: list[str] = field(default_factory=list)  # --conformance-overrides, -k, ...
    timeout_s: float = 600.0  # per file
    retries: int = 2
    suite: Path = SUITE  # the kit's; another only in the kit's own tests of the runner


def pytest_command(options: Options, targets: list[str], progress: Path) -> list[str]:
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "openreg_conformance.plugin",
            "--rootdir", str(options.suite), "-c", str(SUITE / "pytest.ini"),
            "--conformance-device", options.device, "--conformance-progress", str(progress),
            "--continue-on-collection-errors", *options.pytest_args,
            *[str(options.suite / target) for target in targets]]


def read_progress(path: Path, offset: int) -> tuple[list[dict], int]:
    with open(path) as progress:
        progress.seek(offset)
        text = progress.read()
    complete = text[: text.rfind("\n") + 1]  # a line still being written waits for the next poll
    return [json.loads(line) for line in complete.splitlines() if line], offset + len(complete)


def stop(process: subprocess.Popen) -> None:
    """Ends the pytest process and whatever it started (rank processes): the whole process group."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def run_once(options: Options, targets: list[str], results: Results, log) -> list[str]:
    """Runs targets (files or node ids) in one process, recording each event;
    returns the files not started because the process stopped early."""
    with tempfile.TemporaryDirectory(prefix="conformance-") as scratch:
        progress = Path(scratch) / "progress.jsonl"
        progress.touch()
        # The suite runs with its own plugin only (-p in pytest_command): no
        # other installed plugin (nor the kit's own entry point) loads twice.
        environment = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
        process = subprocess.Popen(pytest_command(options, targets, progress), cwd=scratch, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True, env=environment)
        # The file running, since when, and its test running (None: starting up, since the process began).
        offset, current, running, started_at, seen, timed_out = 0, None, None, time.monotonic(), [], False
        while True:
            finished = process.poll() is not None
            events, offset = read_progress(progress, offset)
            for event in events:
                if event["event"] == "environment":
                    results.environment = {k: v for k, v in event.items() if k != "event"}
                elif event["event"] == "file":
                    current, started_at = event["file"], time.monotonic()
                    seen.append(current)
                elif event["event"] == "start":
                    running = event["nodeid"]
                elif event["event"] == "test":
                    results.record(Outcome(event["nodeid"], event["outcome"], event["message"], event["duration"],
                                           event["phase"]))
            if finished:
                break
            if time.monotonic() - started_at > options.timeout_s:
                stop(process)
                timed_out, where = True, current or "<startup>"
                results.timed_out.append(where)
                results.stopped(where, f"ran past its {options.timeout_s:.0f} s", running)
                break
            time.sleep(POLL_S)
        code = process.returncode
        if code in (0, 1, 5):  # pytest ended by itself: whatever it did not start was deselected
            return []
        if not timed_out:
            where = current or "<startup>"
            results.crashed[where] = f"signal {-code}" if code < 0 else f"exit status {code}"
            results.stopped(where, f"stopped ({results.crashed[where]})", running)
    files = [t for t in targets if "::" not in t]
    return [f for f in files if f not in seen] if current is not None else []


def run(options: Options, log) -> Results:
    start, results = time.monotonic(), Results()
    pending = list(options.files)
    while pending:
        pending = run_once(options, pending, results, log)
    still_failing = [n for n in results.failed() if results.tests[n].retriable]
    for _ in range(options.retries):
        if not still_failing:
            break
        retry = Results()
        run_once(options, still_failing, retry, log)
        for nodeid in still_failing:
            if nodeid in retry.tests and retry.tests[nodeid].outcome == "passed":
                results.tests[nodeid] = retry.tests[nodeid]
                results.flaky.append(nodeid)
        still_failing = [n for n in still_failing if n not in results.flaky]
    results.seconds = time.monotonic() - start
    return results
