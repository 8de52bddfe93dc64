#!/usr/bin/env python3.11
"""OpInfo coverage of openreg: which of PyTorch's OpInfo operators run on the
device natively, which take the CPU fallback, and which fail.

    .venv/bin/python tools/opinfo_coverage.py                  every op, forward, float32
    .venv/bin/python tools/opinfo_coverage.py --ops add,mm -v  some ops, one line per entry
    .venv/bin/python tools/opinfo_coverage.py --all-dtypes --backward --write-expected

For each OpInfo of torch's op_db (float32, or the first dtype it supports
among int64, int32, complex64, ... when it has no float32 on the CPU) the
first --samples sample inputs run on openreg and on the CPU and are compared
(packages/torch-openreg/tests/opinfo_harness.py says exactly how). An entry
is then

  native    it passed and nothing went through the CPU fallback: only
            dedicated kernels and the device executor ran
            (torch.openreg.fallback_counts() stayed empty);
  fallback  it passed, but these aten ops took the CPU fallback;
  failed    openreg raised where the CPU did not, the values differ, the
            worker crashed, or it exceeded --timeout;
  untested  no sample could be compared (the CPU itself raised on all of
            them, or the OpInfo has no sample): not counted as exercised.

Entries run in worker subprocesses (--jobs in parallel): a crash or a hang
costs one entry, reported as failed, and a new worker goes on with the rest.

--write-expected adds every passing entry to
packages/torch-openreg/tests/opinfo_expected_to_pass.txt (tests/test_opinfo.py
runs that list). It never removes an entry unless --prune is given, and then
only entries that ran here and did not pass.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "packages" / "torch-openreg" / "tests" / "opinfo_harness.py"
PROTOCOL = "@@opinfo "  # prefix of the lines a worker writes for the parent


def load_harness():
    """tests/opinfo_harness.py, loaded by path (neither directory is a package)."""
    import importlib.util

    name = "openreg_opinfo_harness"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HARNESS)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


# ----------------------------------------------------------------- worker


def worker(samples: int) -> None:
    """Reads entries (one JSON list on stdin), runs them in order and writes
    a 'start' line before and a 'done' line after each one."""
    os.environ.setdefault("OPENREG_FALLBACK", "silent")
    import faulthandler
    import warnings

    warnings.filterwarnings("ignore")
    import torch

    torch.openreg.set_fallback_mode("silent")
    torch.empty(1, device="openreg")  # starts the runtime, which installs its fault handler
    # Installed after the runtime's, which it chains to: a crash also names
    # the Python frame it happened in (the worker's stderr goes in the report).
    faulthandler.enable()
    harness = load_harness()
    entries = [harness.Entry.parse(text) for text in json.load(sys.stdin)]
    out = sys.stdout
    for entry in entries:
        out.write(PROTOCOL + json.dumps({"start": str(entry)}) + "\n")
        out.flush()
        started = time.monotonic()
        outcome = harness.run_entry(entry, samples=samples)
        data = outcome.to_json()
        data["seconds"] = round(time.monotonic() - started, 3)
        out.write(PROTOCOL + json.dumps({"done": data}) + "\n")
        out.flush()


def _crash_outcome(entry: str, error_type: str, message: str, detail: str = "") -> dict:
    return {"entry": entry, "status": "fail", "error_type": error_type, "message": message,
            "detail": detail, "fallbacks": {}, "executor": {}, "samples": 0, "skipped": 0,
            "unchecked": None, "seconds": None}


def _tail(path: Path, lines: int = 12) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def run_queue(entries: list[str], samples: int, timeout: float, results: dict, progress) -> None:
    """Runs ``entries`` in worker subprocesses, one after another; a worker
    that dies or stalls on an entry is replaced, and that entry recorded."""
    pending = list(entries)
    env = dict(os.environ, OPENREG_FALLBACK="silent", PYTHONUNBUFFERED="1")
    while pending:
        with tempfile.NamedTemporaryFile("w+", suffix=".stderr", delete=False) as err:
            err_path = Path(err.name)
        with open(err_path, "w") as err_file:
            proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker",
                                     "--samples", str(samples)],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err_file,
                                    cwd=str(ROOT), env=env, start_new_session=True)
        proc.stdin.write(json.dumps(pending).encode())
        proc.stdin.close()
        selector = selectors.DefaultSelector()
        selector.register(proc.stdout, selectors.EVENT_READ)
        current = None
        # Start-up (import torch, op_db) gets its own allowance.
        deadline = time.monotonic() + max(timeout, 120)
        buffer = ""
        failure = None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                failure = ("Timeout", f"no result after {timeout:g} s")
                break
            if not selector.select(min(remaining, 5.0)):
                continue
            chunk = os.read(proc.stdout.fileno(), 1 << 16).decode(errors="replace")
            if not chunk:
                proc.wait()
                failure = None if not pending else ("Crash", _death(proc.returncode))
                break
            buffer += chunk
            *lines, buffer = buffer.split("\n")
            for line in lines:
                if not line.startswith(PROTOCOL):
                    continue
                message = json.loads(line[len(PROTOCOL):])
                if "start" in message:
                    current = message["start"]
                    deadline = time.monotonic() + timeout
                else:
                    data = message["done"]
                    results[data["entry"]] = data
                    pending.remove(data["entry"])
                    progress(data)
                    current = None
            if not pending:
                break
        selector.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        if failure is not None and pending:
            entry = current or pending[0]
            data = _crash_outcome(entry, failure[0], failure[1], _tail(err_path))
            results[entry] = data
            pending.remove(entry)
            progress(data)
        err_path.unlink(missing_ok=True)


def _death(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        return f"worker killed by {signal.Signals(-returncode).name}"
    return f"worker exited with code {returncode}"


def run_all(entries: list[str], samples: int, timeout: float, jobs: int, verbose: bool) -> dict:
    results: dict[str, dict] = {}
    lock = threading.Lock()
    done = [0]
    started = time.monotonic()

    def progress(data: dict) -> None:
        with lock:
            done[0] += 1
            if verbose:
                print(f"  [{done[0]}/{len(entries)}] {describe(data)}", flush=True)
            elif done[0] % 100 == 0:
                print(f"  ... {done[0]}/{len(entries)} entries, {time.monotonic() - started:.0f} s",
                      file=sys.stderr, flush=True)

    # Round-robin, so each worker gets a share of the slow ops (linalg, nn).
    queues = [entries[i::jobs] for i in range(jobs)]
    threads = [threading.Thread(target=run_queue, args=(q, samples, timeout, results, progress))
               for q in queues if q]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


# ----------------------------------------------------------------- report


def category(data: dict) -> str:
    if data["status"] == "pass":
        return "native" if not data["fallbacks"] else "fallback"
    return "failed" if data["status"] == "fail" else "untested"


def describe(data: dict) -> str:
    kind = category(data)
    line = f"{kind.upper():9s} {data['entry']}"
    if kind == "fallback":
        line += "  falls back: " + ", ".join(f"{k} x{v}" for k, v in sorted(data["fallbacks"].items()))
    elif kind in ("failed", "untested"):
        line += f"  {data['error_type']}: {data['message']}" if data["error_type"] else f"  {data['message']}"
        if kind == "failed" and data["fallbacks"]:
            line += "  [fell back: " + ", ".join(sorted(data["fallbacks"])) + "]"
    if data.get("unchecked"):
        line += f"  (values not compared: {data['unchecked']})"
    return line


def normalise(message: str) -> str:
    """A failure message with its particulars (numbers, shapes, names in
    quotes) blurred, so that failures of one cause group together."""
    text = re.sub(r"'[^']*'", "'…'", message)
    text = re.sub(r"\[[^\]]*\]", "[…]", text)
    text = re.sub(r"\([^)]*\)", "(…)", text)
    text = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", text)
    return text[:160]


def report(results: dict, entries: list[str], top: int) -> None:
    rows = [results[e] for e in entries if e in results]
    print("\nOpInfo coverage of openreg")
    print("=" * 26)
    for data in rows:
        print(describe(data))
    counts = collections.Counter(category(d) for d in rows)
    exercised = counts["native"] + counts["fallback"] + counts["failed"]
    no_fallback = sum(1 for d in rows if category(d) != "untested" and not d["fallbacks"])
    print("\nTotals")
    print(f"  entries run            {len(rows)}")
    print(f"  exercised              {exercised}  (untested: {counts['untested']})")
    print(f"  native                 {counts['native']}")
    print(f"  through CPU fallback   {counts['fallback']}")
    print(f"  failed                 {counts['failed']}")
    if exercised:
        print(f"  ran natively           {counts['native'] / exercised:.1%} of exercised "
              f"(passed without fallback)")
        print(f"  no fallback at all     {no_fallback / exercised:.1%} of exercised "
              f"(passed or failed)")
    fallen = collections.Counter()
    for d in rows:
        if category(d) != "untested":
            fallen.update(d["fallbacks"].keys())
    if fallen:
        print("\nAten ops taking the CPU fallback (entries using them)")
        for name, n in fallen.most_common():
            print(f"  {n:4d}  {name}")
    failures = collections.defaultdict(list)
    for d in rows:
        if category(d) == "failed":
            failures[(d["error_type"], normalise(d["message"]))].append(d)
    if failures:
        print(f"\nFailure categories (top {top})")
        ranked = sorted(failures.items(), key=lambda kv: -len(kv[1]))
        for (kind, _), group in ranked[:top]:
            example = group[0]
            names = ", ".join(d["entry"] for d in group[:6]) + (", ..." if len(group) > 6 else "")
            print(f"  {len(group):4d}  {kind}: {example['message']}")
            print(f"        e.g. {names}")
        if len(ranked) > top:
            rest = sum(len(g) for _, g in ranked[top:])
            print(f"  {rest:4d}  in {len(ranked) - top} other categories")


# ------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", help="comma-separated OpInfo names (name or name.variant); default: all")
    parser.add_argument("--samples", type=int, default=3, help="sample inputs per entry (default 3)")
    parser.add_argument("--dtypes", help="comma-separated dtypes instead of float32 (and substitutes)")
    parser.add_argument("--all-dtypes", action="store_true", help="float32, float16 and bfloat16 where supported")
    parser.add_argument("--backward", action="store_true", help="also float32 gradients (supports_autograd ops)")
    parser.add_argument("--write-expected", action="store_true", help="add passing entries to the expected list")
    parser.add_argument("--prune", action="store_true",
                        help="with --write-expected: also remove listed entries that ran here and did not pass")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--timeout", type=float, default=60, help="seconds per entry before it counts as hung")
    parser.add_argument("--json", type=Path, help="write every outcome (with details) to this file")
    parser.add_argument("--top", type=int, default=15, help="failure categories to list")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each entry as it finishes")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.samples)
        return
    if args.prune and not args.write_expected:
        parser.error("--prune only makes sense with --write-expected")

    import warnings

    warnings.filterwarnings("ignore")
    harness = load_harness()
    import torch  # noqa: F401  (after harness: the backend autoloads)

    table = harness.op_table()
    if args.ops:
        names = [n.strip() for n in args.ops.split(",") if n.strip()]
        unknown = [n for n in names if n not in table]
        if unknown:
            parser.error(f"unknown OpInfo names: {', '.join(unknown)}")
    else:
        names = list(table)
    entries: list[str] = []
    no_cpu = [name for name in names if not table[name].supported_dtypes("cpu")]
    if no_cpu:
        print(f"not run, no CPU dtype to compare with: {', '.join(no_cpu)}", file=sys.stderr)
    for name in names:
        op = table[name]
        if args.dtypes:
            dtypes = [harness.parse_dtype(d.strip()) for d in args.dtypes.split(",")]
        else:
            dtypes = harness.default_dtypes(op, extra_dtypes=args.all_dtypes)
        entries += [str(e) for e in harness.entries_for(op, dtypes, backward=args.backward)]
    print(f"{len(entries)} entries from {len(names)} OpInfos, {args.samples} samples each, "
          f"{args.jobs} workers", file=sys.stderr, flush=True)
    started = time.monotonic()
    results = run_all(entries, args.samples, args.timeout, max(1, args.jobs), args.verbose)
    elapsed = time.monotonic() - started
    report(results, entries, args.top)
    print(f"\n({elapsed:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps([results[e] for e in entries if e in results], indent=1))

    path = harness.EXPECTED_FILE
    listed = {str(e) for e in harness.read_expected(path)} if path.exists() else set()
    passing = {e for e in entries if results.get(e, {}).get("status") == "pass"}
    regressions = sorted(e for e in entries if e in listed and e not in passing)
    if regressions:
        print(f"\n{len(regressions)} listed entries did not pass here:")
        for e in regressions:
            print(f"  {describe(results[e])}")
    if args.write_expected:
        kept = listed - set(regressions) if args.prune else listed
        new = passing - listed
        harness.write_expected((harness.Entry.parse(e) for e in kept | passing), path)
        print(f"\n{path.relative_to(ROOT)}: {len(new)} entries added, "
              f"{len(listed - kept)} removed, {len(kept | passing)} listed")


if __name__ == "__main__":
    main()
