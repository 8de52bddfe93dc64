#!/usr/bin/env python3
"""Check openreg-perf against a GPU this project measured itself, a device the model was never fitted to.

tools/bench/measured/ holds the CSVs that tools/bench/gpu_calibration.py wrote on real GPUs (the date
and the device are in each file's name and header); the rows of the profile's chip are compared. Every
measured case is rebuilt from that script's own case list (gpu_calibration.CASES), run on openreg under
openreg_perf.simulate(PROFILE, host="launches") (in timing-only mode, execute=False, except copies to the
host), and its predicted time per call set beside the measurement (the mean of the runs in the folder;
of rows timed with the host ahead, the fastest). host="launches" is the device's view: a host that does
nothing but launch, as a GPU measured with events back to back sees it when its host keeps up (--host
profile: the profile's [host] model, the default of simulate(), which host-paced rows show). Rows
measured from a CUDA graph's replay are compared with the predicted kernel time alone, each kernel at the
chip's graph floor (a graph has no launch gaps), and so are rows measured with the host ahead of the
device (", host ahead": a spinning kernel holds the stream while the host queues a sample), at the
stream's floor. Host round trips (host: ...) are the host's, not the model's: they are listed as not
predicted, and so is a case that fails on openreg, with its error.

Prints one line per row (measured, predicted, ratio) with --rows, and always the mean absolute
percentage error per class: a row is "launch-bound" if it was measured under 20 us, else it takes its
family's class (GEMM, kernels, copies, layers, training steps). A few figures of the bundled profiles
were read off these measurements (launch overhead, kernel floor, a copy's latency, the pageable rate),
and perf_model.py's fit takes their kernel rows among its calibration rows: for the kernels these
figures are in-sample, and perf_model.py's held-out table is the accuracy; the training steps were
fitted to nothing.

    .venv/bin/python tools/bench/perf_measured.py [--profile h100-sxm] [--rows] [--host profile] [--match TEXT ...]
                                                  [--measured DIR]
"""

import argparse
import csv
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import openreg_perf

HERE = Path(__file__).resolve().parent
LAUNCH_BOUND_SECONDS = 20e-6
UNITS = {"us": 1e-6, "ms": 1e-3}


def measured_rows(folder: Path, profile: str) -> dict[tuple[str, str, str], list[float]]:
    """(workload, config, precision) -> the seconds each run measured on the profile's chip, over every
    CSV in folder (the folder holds runs on several GPUs)."""
    from openreg_perf.published import chip_of

    rows: dict[tuple[str, str, str], list[float]] = {}
    for path in sorted(folder.glob("*.csv")):
        with open(path, newline="") as file:
            for row in csv.DictReader(line for line in file if not line.startswith("#")):
                if chip_of(row["hardware"]) != profile:
                    continue
                key = (row["workload"], row["config"], row["precision"])
                rows.setdefault(key, []).append(float(row["value"]) * UNITS[row["unit"]])
    return rows


def row_class(workload: str, seconds: float) -> str:
    if seconds < LAUNCH_BOUND_SECONDS:
        return "launch-bound (under 20 us)"
    for prefix, name in (("GEMM", "GEMM"), ("kernel", "kernels"), ("softmax", "kernels"), ("layernorm", "kernels"),
                         ("gelu", "kernels"), ("copy", "copies"), ("training step", "training steps")):
        if workload.startswith(prefix):
            return name
    return "layers"


def predict(case, profile: str, calls: int = 10, host: str = "launches") -> tuple[float, float, float]:
    """Predicted (seconds per call back to back, kernel seconds per call, kernel seconds per call
    replayed from a CUDA graph) of a gpu_calibration case (recorded())."""
    run = recorded(case, profile, calls, host)
    graph = run.predicted_again(profile=run.profile.replayed_from_graph())
    return (run.total_time_s / calls, sum(kernel.seconds for kernel in run.kernels) / calls,
            sum(kernel.seconds for kernel in graph.kernels) / calls)


FITTED_HOST = ("outer_call_s", "module_call_s", "optimizer_step_s")  # the [host] figures --fit-host fits


def fit_host(steps: list[tuple[object, float]], profile: str, calls: int = 10) -> tuple[dict[str, float], int]:
    """[host] outer_call_s, module_call_s and optimizer_step_s fitted to the training steps measured back
    to back (case, seconds per step) that their host paces (the device's view under half the step), the
    other [host] figures as measured: least squares of the relative error, and how many steps. Such a
    step's predicted time is linear in them: a base, plus each figure times how often the step pays it."""
    import numpy as np

    rows, targets = [], []
    for case, seconds in steps:
        run = recorded(case, profile, calls)
        if run.total_time_s / calls <= seconds / 2:
            base = _per_step(run, calls, {})
            rows.append([(_per_step(run, calls, {name: 1e-3}) - base) / 1e-3 / seconds for name in FITTED_HOST])
            targets.append(1 - base / seconds)
    fitted, *_ = np.linalg.lstsq(np.array(rows), np.array(targets), rcond=None)
    return dict(zip(FITTED_HOST, fitted, strict=True)), len(rows)


def _per_step(run, calls: int, figures: dict[str, float]) -> float:
    host = replace(run.profile.host, **({name: 0.0 for name in FITTED_HOST} | figures))
    return run.predicted_again(profile=replace(run.profile, host=host), host="profile").total_time_s / calls


def recorded(case, profile: str, calls: int, host: str = "launches"):
    """calls of a gpu_calibration case predicted on profile: in timing-only mode, except a copy to the
    host, which needs values and is executed."""
    import gpu_calibration
    import torch

    execute = case.workload.startswith("copy: device to host")
    torch.openreg.set_timing_only(not execute)  # the operands too: without execute, nothing is computed
    try:
        with gpu_calibration.tf32(case.tf32):
            fn = case.make("openreg")
            fn()  # the first call of each operator runs synchronously on openreg: keep it out of the region
            with openreg_perf.simulate(profile, execute=execute, host=host) as run:
                for _ in range(calls):
                    fn()
        del fn
    finally:
        torch.openreg.set_timing_only(False)
        torch.openreg.empty_cache()
    return run


def _matches(row: str, texts: list[str]) -> bool:
    return not texts or any(text in row for text in texts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="h100-sxm")
    parser.add_argument("--measured", type=Path, default=HERE / "measured")
    parser.add_argument("--rows", action="store_true", help="print every row")
    parser.add_argument("--host", default="launches", choices=("launches", "profile"), help="the host model")
    parser.add_argument("--match", action="append", default=[],
                        help="only the cases whose 'workload | config | precision' has this (repeat: any of them)")
    parser.add_argument("--fit-host", action="store_true",
                        help="fit [host]'s calls, modules and steps to the training steps measured back to back")
    args = parser.parse_args()
    openreg_perf.devices_for(args.profile)  # timing-only prediction: devices of the target's capacity
    sys.path.insert(0, str(HERE))
    import gpu_calibration

    measured = measured_rows(args.measured, args.profile)
    if not measured:
        sys.exit(f"no row of {args.measured} was measured on {args.profile}'s chip")
    if args.fit_host:
        steps = [(case, statistics.mean(measured[(case.workload, case.config, case.precision)]))
                 for case in gpu_calibration.step_cases() if (case.workload, case.config, case.precision) in measured]
        figures, fitted = fit_host(steps, args.profile)
        print(f"[host] fitted to the {fitted} host-paced training steps measured on {args.profile}'s chip: "
              + ", ".join(f"{name} = {value:.3g}" for name, value in figures.items()))
        return
    errors: dict[str, list[float]] = {}
    not_predicted: list[str] = []
    for make_cases in gpu_calibration.CASES.values():
        for case in make_cases():
            rows = [(case.workload, case.config, case.precision)]
            if rows[0] not in measured or not _matches(" | ".join(rows[0]), args.match):
                continue
            try:
                per_call, kernels, replayed = predict(case, args.profile, host=args.host)
            except Exception as error:  # noqa: BLE001 - report the row and go on with the others
                not_predicted.append(f"{case.workload} | {case.config}: {type(error).__name__}: {error}"[:200])
                continue
            predictions = {rows[0]: per_call}
            if case.graph_row:
                predictions[(*case.graph_row, case.precision)] = replayed
            if case.device_row:  # timed with the host ahead: the device's work without launch gaps
                predictions[(case.workload, case.config + gpu_calibration.DEVICE_ALONE, case.precision)] = kernels
            for key, predicted in predictions.items():
                if key not in measured:
                    continue
                # a row timed with the host ahead is only ever lengthened by the host: its fastest run
                fastest = key[1].endswith(gpu_calibration.DEVICE_ALONE)
                seconds = min(measured[key]) if fastest else statistics.mean(measured[key])
                errors.setdefault(row_class(key[0], seconds), []).append(abs(predicted - seconds) / seconds)
                if args.rows:
                    print(f"{key[0][:44]:<44} {key[1][:40]:<40} {key[2]:<9} measured {seconds * 1e6:>10.1f} us"
                          f"  predicted {predicted * 1e6:>10.1f} us  ratio {predicted / seconds:5.2f}", flush=True)
    if not errors:
        sys.exit(f"no measured row matches {' or '.join(map(repr, args.match))}")
    host_rows = sum(1 for key in measured if key[0].startswith("host:"))
    print(f"\nopenreg-perf's {args.profile} profile against {args.measured.relative_to(HERE.parents[1])} "
          "(its launch, kernel floors, copy latency and pageable rate come from those rows, and its kernel\n"
          " levels are fitted to them with the published rows: in-sample but for the training steps):\n"
          "mean absolute error of the predicted time per call")
    print(f"{'class':<28} {'rows':>5} {'error':>8} {'within 25 %':>12}")
    everything = []
    for name in ("GEMM", "kernels", "copies", "layers", "training steps", "launch-bound (under 20 us)"):
        values = errors.get(name, [])
        everything += values
        if values:
            within = sum(value <= 0.25 for value in values) / len(values)
            print(f"{name:<28} {len(values):>5} {statistics.mean(values):>8.1%} {within:>12.0%}")
    print(f"{'all':<28} {len(everything):>5} {statistics.mean(everything):>8.1%}")
    print(f"not predicted: {host_rows} host round trips (the host's, not the device's)"
          + (", and" if not_predicted else ""))
    for line in not_predicted:
        print(f"  {line}")


if __name__ == "__main__":
    main()
