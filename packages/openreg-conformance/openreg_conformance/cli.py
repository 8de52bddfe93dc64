"""python -m openreg_conformance --device NAME [options]: the kit's command."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from openreg_conformance import report as reporting
from openreg_conformance import runner
from openreg_conformance.groups import BY_NAME, GROUPS


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m openreg_conformance", description=__doc__)
    parser.add_argument("--device", help="the device type under test: openreg, cuda, or your backend's name")
    parser.add_argument("--groups", nargs="+", default=None, metavar="GROUP",
                        help="groups to run (default: all; --list-groups names them)")
    parser.add_argument("--skip-groups", nargs="+", default=[], metavar="GROUP", help="groups not to run")
    parser.add_argument("--list-groups", action="store_true", help="print the groups and exit")
    parser.add_argument("--report", type=Path, help="write the JSON report here")
    parser.add_argument("--junit", type=Path, help="write JUnit XML here")
    parser.add_argument("--markdown", type=Path, help="write the Markdown summary here (it is also printed)")
    parser.add_argument("--overrides", type=Path, help="your overrides: a Python file (see the guide)")
    parser.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                        help="import MODULE first (a backend that torch does not load by itself)")
    parser.add_argument("--pytorch-tests", type=Path, help="the test/ folder of a PyTorch checkout of the installed "
                        "release: runs its device-generic files (the pytorch_files group)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per group file (default 600)")
    parser.add_argument("--retries", type=int, default=2, help="reruns of a failed test before it counts as "
                        "failing consistently (default 2)")
    parser.add_argument("--log", type=Path, default=Path("conformance.log"), help="pytest's output (default "
                        "conformance.log)")
    parser.add_argument("-k", dest="keyword", help="pytest's -k: only tests whose names match")
    args = parser.parse_args(argv)
    if not args.list_groups and not args.device:
        parser.error("--device NAME is required")
    unknown = [g for g in (args.groups or []) + args.skip_groups if g not in BY_NAME]
    if unknown:
        parser.error(f"unknown groups {unknown}; the groups are {', '.join(BY_NAME)}")
    return args


def pytest_args(args: argparse.Namespace) -> list[str]:
    extra = []
    if args.overrides:
        extra += ["--conformance-overrides", str(args.overrides.resolve())]
    for module in args.imports:
        extra += ["--conformance-import", module]
    if args.pytorch_tests:
        extra += ["--conformance-pytorch-tests", str(args.pytorch_tests.resolve())]
    if args.keyword:
        extra += ["-k", args.keyword]
    return extra


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.list_groups:
        for group in GROUPS:
            kind = "required" if group.required else f"needs {group.capability}"
            print(f"{group.name:14} {kind:24} {group.checks}")
        return 0
    selected = [g.name for g in GROUPS if (args.groups is None or g.name in args.groups)
                and g.name not in args.skip_groups]
    if not selected:
        sys.exit("python -m openreg_conformance: --groups and --skip-groups leave no group to run")
    options = runner.Options(device=args.device, files=[BY_NAME[name].file for name in selected],
                             pytest_args=pytest_args(args), timeout_s=args.timeout, retries=args.retries)
    with open(args.log, "w") as log:
        results = runner.run(options, log)
    report = reporting.write(results, selected, args.keyword is not None, args.report, args.junit, args.markdown)
    print(reporting.markdown(report), end="")
    print(f"pytest's output: {args.log}")
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
