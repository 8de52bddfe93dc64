#!/usr/bin/env python3.11
"""OpInfo coverage of openreg: which of PyTorch's OpInfo operators (and
ModuleInfo modules) run on the device's own kernels, which take the CPU
fallback, and which fail.

    .venv/bin/python tools/opinfo_coverage.py                  every test
    .venv/bin/python tools/opinfo_coverage.py -k "erf or mm"   some, by pytest's -k
    .venv/bin/python tools/opinfo_coverage.py --all            one line per test, native ones too

It runs the conformance kit's operators group, the project's one OpInfo
runner (openreg_conformance/suite/test_operators.py), with OpenReg's
overrides (packages/torch-openreg/tests/conformance_overrides.py: float32,
float16 and bfloat16, and float32 gradients), in this process, and reads
torch.openreg.fallback_counts() around each test. A test is then

  native    it passed and nothing went through the CPU fallback: only
            dedicated kernels and the device executor ran;
  fallback  it passed, but these aten operators took the CPU fallback;
  failed    the device raised where the CPU did not, or the values differ;
  skipped   with the reason the overrides or PyTorch's databases give.

A crash ends this tool; the kit's own command (python -m openreg_conformance
--device openreg --groups operators) runs the group with crash recovery.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OVERRIDES = ROOT / "packages" / "torch-openreg" / "tests" / "conformance_overrides.py"


class FallbackCounts:
    """A pytest plugin: each test's outcome and the aten operators that took the CPU fallback in it."""

    def __init__(self):
        self.outcomes: dict[str, str] = {}
        self.fallbacks: dict[str, dict[str, int]] = {}
        self.details: dict[str, str] = {}

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        import torch

        torch.openreg.reset_fallback_counts()
        try:
            return (yield)
        finally:
            self.fallbacks[item.nodeid] = dict(torch.openreg.fallback_counts())

    def pytest_runtest_logreport(self, report):
        if report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            self.outcomes[report.nodeid], self.details[report.nodeid] = "skipped", reason.removeprefix("Skipped: ")
        elif report.failed:
            self.outcomes[report.nodeid] = "failed"
            self.details[report.nodeid] = report.longreprtext.strip().splitlines()[-1][:200]
        elif report.when == "call":
            self.outcomes[report.nodeid] = "passed"

    def category(self, nodeid: str) -> str:
        outcome = self.outcomes[nodeid]
        if outcome == "passed":
            return "fallback" if self.fallbacks.get(nodeid) else "native"
        return outcome

    def describe(self, nodeid: str) -> str:
        kind, name = self.category(nodeid), nodeid.rsplit("::", 1)[-1]
        if kind == "fallback":
            return f"FALLBACK  {name}  falls back: " + ", ".join(
                f"{op} x{count}" for op, count in sorted(self.fallbacks[nodeid].items()))
        return f"{kind.upper():9s} {name}" + (f"  {self.details[nodeid]}" if nodeid in self.details else "")


def report(counts: FallbackCounts, every_test: bool) -> None:
    print("\nOpInfo and ModuleInfo coverage of openreg")
    for nodeid in counts.outcomes:
        if every_test or counts.category(nodeid) != "native":
            print(counts.describe(nodeid))
    totals = collections.Counter(counts.category(n) for n in counts.outcomes)
    ran = totals["native"] + totals["fallback"] + totals["failed"]
    print("\nTotals")
    for kind in ("native", "fallback", "failed", "skipped"):
        print(f"  {kind:9s} {totals[kind]}")
    if ran:
        print(f"  {totals['native'] / ran:.1%} of the tests that ran passed on the device's own kernels alone")
    fallen = collections.Counter(op for nodeid, ops in counts.fallbacks.items() for op in ops
                                 if counts.category(nodeid) != "skipped")
    if fallen:
        print("\nAten operators taking the CPU fallback (tests using them)")
        for op, tests in fallen.most_common():
            print(f"  {tests:4d}  {op}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-k", dest="keyword", help="pytest's -k: only the tests whose names match")
    parser.add_argument("--all", action="store_true", help="one line per test, native ones too")
    args = parser.parse_args()
    os.environ.setdefault("OPENREG_FALLBACK", "silent")  # counted, not warned about
    import openreg_conformance

    suite = Path(openreg_conformance.__file__).parent / "suite" / "test_operators.py"
    counts = FallbackCounts()
    pytest_args = [str(suite), "-q", "-p", "no:cacheprovider", "--no-header", "--tb=no", "-W", "ignore",
                   "--conformance-device", "openreg", "--conformance-overrides", str(OVERRIDES)]
    code = pytest.main(pytest_args + (["-k", args.keyword] if args.keyword else []), plugins=[counts])
    report(counts, args.all)
    return 0 if code in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) else int(code)


if __name__ == "__main__":
    sys.exit(main())
