"""The command line of openreg-perf:

    python -m openreg_perf profiles                      list the device profiles
    python -m openreg_perf run --profile h100-sxm [--ranks N] [--no-execute] [--trace T.json] [--plot P.svg]
                               script.py [args]          run script.py on openreg, print its prediction
    python -m openreg_perf calibrate-host [--output P]   measure this machine as the `host` profile
"""

from __future__ import annotations

import argparse
import runpy
import sys


def _profiles(_args) -> None:
    from openreg_perf import list_profiles, load_profile

    for name in list_profiles():
        profile = load_profile(name)
        print(f"{name:<16} {profile.description}  ({profile.path})")


# LITERALINCLUDE START: PERF_RUN_COMMAND
def _run(args) -> None:
    """The whole script is the region: every kernel it runs on openreg is predicted."""
    from openreg_perf import devices_for, simulate

    if args.no_execute:
        devices_for(args.profile)  # before the script imports torch
    sys.argv = [args.script, *args.script_args]
    with simulate(args.profile, ranks=args.ranks, execute=not args.no_execute) as run:
        runpy.run_path(args.script, run_name="__main__")
    print(run.summary(top=args.top))
    if args.trace:
        run.export_chrome_trace(args.trace)
        print(f"trace: {args.trace}")
    if args.plot:
        run.plot(args.plot)
        print(f"plot: {args.plot}")
# LITERALINCLUDE END: PERF_RUN_COMMAND


def _calibrate_host(args) -> None:
    from openreg_perf.calibrate import calibrate_host

    print(f"host profile written to {calibrate_host(args.output)}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m openreg_perf", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("profiles", help="list the device profiles").set_defaults(action=_profiles)
    run = commands.add_parser("run", help="run a script on openreg and predict it on a profile")
    run.add_argument("--profile", required=True, help="a profile's name (see `profiles`) or a TOML file")
    run.add_argument("--ranks", type=int, default=None, help="predict collectives for this many ranks")
    run.add_argument("--no-execute", action="store_true",
                     help="timing-only: compute nothing, on devices of the profile's capacity (a model larger "
                          "than this machine)")
    run.add_argument("--trace", help="write the predicted timeline as a Chrome/Perfetto trace")
    run.add_argument("--plot", help="write the report's picture (SVG)")
    run.add_argument("--top", type=int, default=10, help="kernels listed in the summary")
    run.add_argument("script")
    run.add_argument("script_args", nargs=argparse.REMAINDER)
    run.set_defaults(action=_run)
    calibrate = commands.add_parser("calibrate-host", help="measure this machine as the `host` profile")
    calibrate.add_argument("--output", help="where to write it (default: where `host` is looked up first)")
    calibrate.set_defaults(action=_calibrate_host)
    args = parser.parse_args(argv)
    args.action(args)


if __name__ == "__main__":
    main()
