"""The command line of openreg-perf:

    python -m openreg_perf profiles                      list the device profiles
    python -m openreg_perf run --profile h100-sxm [--ranks N] [--no-execute [--strict]] [--trace T.json] [--plot P.svg]
                               script.py [args]          run script.py on openreg, print its prediction
    python -m openreg_perf pipeline --profile h100-sxm --micro-batches M [--schedule 1f1b] [--chunks V]
                               [--tp N] [--dp N] [--recompute full] stages.py
                                                         predict a pipeline-parallel step of stages.py's stages
    python -m openreg_perf calibrate-host [--output P]   measure this machine as the `host` profile

A mistake on the command line (an unknown profile, a script that is not there) is one line on stderr
and status 2; a script that fails still gets its prediction up to the failure, then its traceback.
"""

from __future__ import annotations

import argparse
import itertools
import os
import runpy
import sys
import traceback
from pathlib import Path

from openreg_perf.pipeline import RECOMPUTATION, SCHEDULES

PROG = "openreg-perf"


class UsageError(Exception):
    """A mistake the user made on the command line: told in one line, status 2, no traceback."""


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors told as every other mistake of the command line is."""

    def error(self, message: str):
        raise UsageError(message)


def _profiles(_args) -> int:
    """Every profile, one a line; one that does not load (a user's, being written) says why on stderr,
    and the status is 1, but the others are still listed."""
    from openreg_perf import ProfileError, list_profiles, load_profile

    status = 0
    for name in list_profiles():
        try:
            profile = load_profile(name)
        except ProfileError as error:
            print(f"{PROG}: error: {error}", file=sys.stderr)
            status = 1
            continue
        print(f"{name:<16} {profile.description}  ({profile.path})")
    return status


# LITERALINCLUDE START: PERF_RUN_COMMAND
def _run(args) -> int:
    """The whole script is the region: every kernel it runs on openreg is predicted. It runs as
    `python script.py` would (its folder first on sys.path, its own sys.argv); when it fails, the
    prediction up to the failure is printed before its traceback."""
    from openreg_perf import devices_for, simulate

    if not Path(args.script).exists():
        raise UsageError(f"{args.script}: no such script")
    if args.strict and not args.no_execute:
        raise UsageError("--strict is for --no-execute, where no value is computed")
    for output in filter(None, (args.trace, args.plot)):  # before the script, which may take long, runs
        folder = Path(output).resolve().parent
        if Path(output).is_dir() or not folder.is_dir() or not os.access(folder, os.W_OK):
            raise UsageError(f"{output}: cannot be written (its folder must exist and be writable)")
    profile = _load_profile(args.profile)
    if args.no_execute:
        devices_for(profile)  # before the script imports torch
    sys.argv = [args.script, *args.script_args]
    if Path(args.script).is_file():  # runpy puts a folder or a zip file on sys.path itself
        sys.path.insert(0, str(Path(args.script).resolve().parent))
    run = None
    try:
        with simulate(profile, ranks=args.ranks, execute=not args.no_execute, strict=args.strict) as run:
            _run_script(args.script)
    except (Exception, SystemExit, KeyboardInterrupt) as error:
        if run is None or not run.partial:
            raise  # openreg-perf's own failure, not the script's
        _print_prediction(run, args)
        return _script_failed(error, args)
    _print_prediction(run, args)
    return 0
# LITERALINCLUDE END: PERF_RUN_COMMAND


def _run_script(path: str) -> None:
    """Runs the script as its __main__. sys.exit(0) (a script's `sys.exit(main())`) ends it as
    falling off its end does; any other exit status is a failure, as an exception is."""
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as ending:
        if ending.code not in (None, 0):
            raise


def _print_prediction(run, args) -> None:
    if run.timeline is None:  # a partial prediction that could not be made (simulate warned)
        return
    if run.partial and not run.trace.work:  # the script failed before it ran anything (a syntax error)
        return
    print(run.summary(top=args.top))
    if args.trace:
        run.export_chrome_trace(args.trace)
        print(f"trace: {args.trace}")
    if args.plot:
        run.plot(args.plot)
        print(f"plot: {args.plot}")


def _script_failed(error: BaseException, args) -> int:
    """Tells how the script failed, as Python would have; the exit status."""
    from openreg_perf import _reads_values_in_timing_only_mode, _value_read_refusal

    sys.stdout.flush()  # the prediction before the traceback, when both go to one terminal
    if isinstance(error, SystemExit):
        raise error  # Python prints a message given to sys.exit, and exits with the script's status
    if _reads_values_in_timing_only_mode(error):
        # The refusal names an operator torch's printing called, not what the user wrote: say that.
        where = _script_frame(error, args.script)
        at = f" (at {where.filename}, line {where.lineno}: {where.line})" if where else ""
        how = "--no-execute" if args.no_execute else "torch.openreg.set_timing_only(True)"
        print(f"{PROG}: error: {_value_read_refusal(how, args.strict)}{at}", file=sys.stderr)
        return 1
    traceback.print_exception(type(error), error, _from_script(error.__traceback__, args.script))
    return 130 if isinstance(error, KeyboardInterrupt) else 1  # 130: as Python's own status after Ctrl-C


def _from_script(tb, script: str):
    """The traceback from the script's own frame on: runpy's and openreg-perf's frames before it are
    none of the user's business. All of it if the script's frame is not there (a syntax error)."""
    frame = tb
    while frame is not None and frame.tb_frame.f_code.co_filename != script:
        frame = frame.tb_next
    return frame or tb


def _script_frame(error: BaseException, script: str) -> traceback.FrameSummary | None:
    """The user's line that the error came from: the last frame from the script's own on before torch's
    code (printing a tensor goes through torch's formatter)."""
    import torch

    torch_folder = Path(torch.__file__).parent
    frames = traceback.extract_tb(_from_script(error.__traceback__, script))
    users = list(itertools.takewhile(lambda frame: torch_folder not in Path(frame.filename).parents, frames))
    return users[-1] if users else None


def _load_profile(name_or_path: str):
    """The profile, or a UsageError that says what is wrong with it (load_profile names the profile a
    mistyped name most likely meant)."""
    from openreg_perf import ProfileError, load_profile

    try:
        return load_profile(name_or_path)
    except ProfileError as error:
        raise UsageError(str(error)) from None


def _at_least_one(text: str) -> int:
    """--ranks, --micro-batches, --chunks, --tp, --dp: a whole number of at least 1 (0 is not "the default")."""
    from . import MOST_COUNTED

    try:
        ranks = int(text)
    except ValueError:
        ranks = 0
    if not 1 <= ranks <= MOST_COUNTED:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {MOST_COUNTED:,}, not {text!r}")
    return ranks


# LITERALINCLUDE START: PERF_PIPELINE_COMMAND
def _pipeline(args) -> int:
    """stages.py defines stages(): the model split into stages, in order, as (module, example input) pairs,
    one per stage (devices x chunks of them); each is predicted without executing, then the schedule."""
    from openreg_perf import devices_for
    from openreg_perf.pipeline import predict_pipeline, predict_stage

    if not Path(args.stages).is_file():
        raise UsageError(f"{args.stages}: no such file")
    if args.chunks > 1 and args.schedule != "interleaved-1f1b":  # before the stages take their time
        raise UsageError(f"{args.schedule} runs one chunk per device; --chunks {args.chunks} needs interleaved-1f1b")
    profile = _load_profile(args.profile)
    devices_for(profile)  # before stages.py imports torch
    sys.path.insert(0, str(Path(args.stages).resolve().parent))
    stages = runpy.run_path(args.stages, run_name="__stages__").get("stages")
    if not callable(stages):
        raise UsageError(f"{args.stages} defines no stages(): a function returning (module, example input) pairs")
    predicted = [predict_stage(module, example, profile, ranks=args.tp) for module, example in stages()]
    for index, stage in enumerate(predicted):
        print(f"stage {index}: forward {stage.forward_s * 1e3:.3f} ms, backward {stage.backward_s * 1e3:.3f} ms, "
              f"sends {stage.activation_bytes / 1e6:.1f} MB")
    try:
        step = predict_pipeline(predicted, profile, args.micro_batches, args.schedule, args.chunks, args.tp, args.dp,
                                args.recompute)
    except ValueError as error:
        raise UsageError(str(error)) from None
    print(step.summary())
    print("\n".join(step.device_lines()))
    return 0
# LITERALINCLUDE END: PERF_PIPELINE_COMMAND


def _calibrate_host(args) -> int:
    from openreg_perf.calibrate import calibrate_host

    print(f"host profile written to {calibrate_host(args.output)}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m openreg_perf", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("profiles", help="list the device profiles").set_defaults(action=_profiles)
    run = commands.add_parser("run", help="run a script on openreg and predict it on a profile")
    run.add_argument("--profile", required=True, help="a profile's name (see `profiles`) or a TOML file")
    run.add_argument("--ranks", type=_at_least_one, default=None, help="predict collectives for this many ranks")
    run.add_argument("--no-execute", action="store_true",
                     help="timing-only: compute nothing, on devices of the profile's capacity (a model larger "
                          "than this machine)")
    run.add_argument("--strict", action="store_true",
                     help="with --no-execute: a value read to the host (.item(), .cpu()) raises instead of reading "
                          "as NaN")
    run.add_argument("--trace", help="write the predicted timeline as a Chrome/Perfetto trace")
    run.add_argument("--plot", help="write the report's picture (SVG)")
    run.add_argument("--top", type=int, default=10, help="kernels listed in the summary")
    run.add_argument("script")
    run.add_argument("script_args", nargs=argparse.REMAINDER)
    run.set_defaults(action=_run)
    pipeline = commands.add_parser("pipeline", help="predict a pipeline-parallel training step")
    pipeline.add_argument("--profile", required=True, help="a profile's name (see `profiles`) or a TOML file")
    pipeline.add_argument("--micro-batches", type=_at_least_one, required=True, help="micro-batches per step")
    pipeline.add_argument("--schedule", default="1f1b", type=str.lower, choices=SCHEDULES,
                          help="gpipe, 1f1b or interleaved-1f1b (default: 1f1b)")
    pipeline.add_argument("--chunks", type=_at_least_one, default=1, help="stages per device (interleaved-1f1b)")
    pipeline.add_argument("--tp", type=_at_least_one, default=1, help="tensor-parallel devices per stage")
    pipeline.add_argument("--dp", type=_at_least_one, default=1, help="data-parallel replicas of the pipeline")
    pipeline.add_argument("--recompute", default="none", choices=RECOMPUTATION,
                          help="none or full (activation checkpointing)")
    pipeline.add_argument("stages", help="a Python file defining stages()")
    pipeline.set_defaults(action=_pipeline)
    calibrate = commands.add_parser("calibrate-host", help="measure this machine as the `host` profile")
    calibrate.add_argument("--output", help="where to write it (default: where `host` is looked up first)")
    calibrate.set_defaults(action=_calibrate_host)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The command's exit status: 0, the failed script's status, or 2 for a mistake on the command line."""
    try:
        args = _parser().parse_args(argv)
        return args.action(args)
    except UsageError as error:
        words = sys.argv[1:] if argv is None else argv
        if "required: --profile" in str(error) and "--profile" in words:  # given after the script: its own
            error = UsageError("openreg-perf's options go before the script; what follows it is the script's: "
                               "python -m openreg_perf run --profile NAME [options] script.py [its arguments]")
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
