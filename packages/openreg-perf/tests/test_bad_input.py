"""simulate() and its Run given what they cannot use, and regions that fail: arguments refused before the
program runs, a Run read before its prediction exists, and a region that raises, predicted up to that
point. The command line's refusals are test_cli.py's."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import openreg_perf
import pytest
import torch

BEFORE_THE_END = re.escape("openreg_perf: the prediction is made when simulate()'s with block ends")


def a_product():
    a = torch.randn(64, 64, device="openreg")
    return lambda: a @ a


@pytest.mark.parametrize("ranks", [0, -2, True, 1.5, "2", 2**62])
def test_simulate_refuses_ranks_that_are_not_a_whole_number_of_at_least_one(ranks):
    ran = []
    with pytest.raises(ValueError, match=re.escape(f"ranks must be a whole number from 1 to 1,048,576, not {ranks!r}")):
        with openreg_perf.simulate("h100-sxm", ranks=ranks):
            ran.append(True)
    assert not ran  # refused before the program ran


def test_simulate_refuses_an_unknown_host_model_before_the_program_runs():
    ran = []
    with pytest.raises(ValueError, match="host must be one of 'profile', 'this-machine', 'launches', not 'measured'"):
        with openreg_perf.simulate("h100-sxm", host="measured"):
            ran.append(True)
    assert not ran


def test_predicting_again_refuses_zero_ranks_and_an_unknown_host():
    product = a_product()
    with openreg_perf.simulate("h100-sxm", ranks=2) as run:
        product()
    assert not run.partial and run.error is None
    with pytest.raises(ValueError, match="ranks must be a whole number from 1 to 1,048,576, not 0"):
        run.predicted_again(ranks=0)
    with pytest.raises(ValueError, match="host must be one of .*, not 'measured'"):
        run.predicted_again(host="measured")
    assert run.predicted_again().ranks == 2 and run.predicted_again(ranks=64).ranks == 64


def test_a_prediction_at_another_rank_count_says_so_in_every_report(tmp_path):
    product = a_product()
    with openreg_perf.simulate("h100-sxm") as run:
        product()
    wider = run.predicted_again(ranks=64)
    wider.export_chrome_trace(tmp_path / "trace.json")
    wider.plot(tmp_path / "step.svg")
    assert wider.summary().startswith("openreg-perf: predicted on h100-sxm for 64 ranks (")
    lanes = {event["pid"] for event in json.loads((tmp_path / "trace.json").read_text())["traceEvents"]}
    assert "predicted on h100-sxm for 64 ranks, device 0" in lanes
    assert "predicted on h100-sxm for 64 ranks: " in (tmp_path / "step.svg").read_text()
    assert run.summary().startswith("openreg-perf: predicted on h100-sxm (")  # one rank: as before


@pytest.mark.parametrize("read", ["summary", "total_time_s", "export_chrome_trace", "plot", "predicted_again"])
def test_a_run_read_inside_its_with_block_says_when_its_prediction_is_made(tmp_path, read):
    product = a_product()
    with openreg_perf.simulate("h100-sxm") as run:
        product()
        reads = {"summary": run.summary, "export_chrome_trace": lambda: run.export_chrome_trace(tmp_path / "t.json"),
                 "plot": lambda: run.plot(tmp_path / "p.svg"), "predicted_again": lambda: run.predicted_again(ranks=2),
                 "total_time_s": lambda: run.total_time_s}
        with pytest.raises(RuntimeError, match=BEFORE_THE_END):
            reads[read]()
    assert not list(tmp_path.iterdir())  # nothing half written
    assert "predicted on h100-sxm" in run.summary()  # and once the block has ended, it is there


def test_a_region_that_raises_is_predicted_up_to_that_point_and_the_exception_goes_on():
    product = a_product()
    error = TypeError("the batch is not a tensor")
    with pytest.raises(TypeError) as raised:
        with openreg_perf.simulate("h100-sxm") as run:
            product()
            raise error
    assert raised.value is error and raised.traceback[-1].name == (
        "test_a_region_that_raises_is_predicted_up_to_that_point_and_the_exception_goes_on")
    assert run.partial and run.error == "TypeError: the batch is not a tensor"
    assert [kernel.op for kernel in run.kernels if kernel.category == "compute"] == ["aten::mm"]
    lines = run.summary().splitlines()
    assert lines[0] == "partial: the region raised TypeError: the batch is not a tensor; predicted up to that point"
    assert "predicted on h100-sxm" in "\n".join(lines[1:])
    again = run.predicted_again(ranks=8)
    assert again.partial and again.error == run.error  # the same region, cut short the same way


def test_a_logged_value_reads_as_nan_and_is_counted_and_strict_mode_raises():
    """Note [Values read in timing-only mode]: a loop that logs loss.item() is predicted whole; the
    summary counts the reads NaN stood for. strict=True makes the first read raise: the prediction up
    to it is kept, marked partial."""
    torch.openreg.set_timing_only(True)  # as simulate(..., execute=False) does, on devices of any capacity
    try:
        x = torch.randn(64, 64, device="openreg")
        with pytest.warns(UserWarning, match="NaN stands for it"):
            with openreg_perf.simulate("h100-sxm") as run:
                logged = [(x @ x).sum().item() for _ in range(3)]
        assert all(math.isnan(value) for value in logged) and run.values_read_as_nan == 3
        assert not run.partial and "3 reads of a value to the host" in run.summary()
        assert [kernel.op for kernel in run.kernels if kernel.category == "compute"].count("aten::mm") == 3
        with pytest.raises(RuntimeError, match="needs values of device memory") as refused:
            with openreg_perf.simulate("h100-sxm", strict=True) as strict:
                (x @ x).sum().item()
        assert strict.partial and strict.values_read_as_nan == 0
        assert "is refused in strict timing-only mode" in refused.value.__notes__[0]  # not "integer or boolean"
    finally:
        torch.openreg.set_timing_only(False)


def test_printing_a_tensor_in_timing_only_mode_prints_nan_and_is_counted_or_explained(capsys):
    x = torch.randn(4, device="openreg")
    torch.openreg.set_timing_only(True)  # as simulate(..., execute=False) does, on devices of any capacity
    try:
        with pytest.warns(UserWarning, match="print"), openreg_perf.simulate("h100-sxm") as run:
            print(x * 2)  # torch-openreg's Note [Printing a tensor in timing-only mode]
        assert capsys.readouterr().out == "tensor([nan, nan, nan, nan], device='openreg:0')\n"
        assert not run.partial and run.values_read_as_nan == 1 and "1 read of a value" in run.summary()
        with pytest.raises(RuntimeError, match="a copy from an openreg tensor to the CPU") as raised:
            with openreg_perf.simulate("h100-sxm") as run:
                print(x.long())
    finally:
        torch.openreg.set_timing_only(False)
    assert raised.value.__notes__ == ["openreg_perf: reading an integer or boolean tensor's values (print, .item(), "
                                      ".tolist()) is not possible in timing-only mode (torch.openreg.set_timing_only("
                                      "True)): nothing was computed, and NaN stands only for floating-point values"]
    assert run.partial and "aten::_copy_from" in {kernel.op for kernel in run.kernels}  # the read, queued and timed


def test_a_prediction_from_a_recording_that_dropped_records_says_it_is_incomplete():
    """The runtime drops records when its buffer fills faster than it is drained (it warns): a
    prediction made from such a trace misses work, and its summary says so first."""
    from openreg_perf.capture import Trace

    run = openreg_perf.Run(openreg_perf.load_profile("h100-sxm"), 1, True)
    with pytest.warns(RuntimeWarning, match="no work ran on openreg"):  # nor did any in these traces
        run._finish(Trace(complete=False), {})
    assert run.summary().startswith("incomplete: the recording dropped records")
    whole = openreg_perf.Run(openreg_perf.load_profile("h100-sxm"), 1, True)
    with pytest.warns(RuntimeWarning, match="no work ran on openreg"):
        whole._finish(Trace(), {})
    assert not whole.summary().startswith("incomplete")


def test_a_region_that_runs_nothing_on_openreg_warns_and_says_so_first(tmp_path):
    """A model left on the CPU (or written for "cuda") runs, but nothing of it is predicted: 0 s is no answer."""
    weight = torch.randn(64, 64)
    with pytest.warns(RuntimeWarning, match=r"no work ran on openreg in the region.*\.to\(\"openreg\"\)"):
        with openreg_perf.simulate("h100-sxm") as run:
            weight @ weight
    assert run.summary().startswith("no work ran on openreg in the region")
    run.plot(tmp_path / "empty.svg")  # its picture says so, its time axis from 0 to 0, not to a made-up 1 s
    picture = (tmp_path / "empty.svg").read_text()
    assert "no work ran in the region" in picture and ">0.0 us</text>" in picture and "1000.000 ms" not in picture
    with pytest.warns(RuntimeWarning, match="it allocated openreg memory and ran no kernel or copy"):
        with openreg_perf.simulate("h100-sxm"):  # tensors on openreg, but only allocated: not left on the CPU
            torch.empty(1024, 1024, device="openreg")


def test_a_region_larger_than_the_profiles_device_warns_that_it_does_not_fit():
    """On a device of the profile's capacity the region runs out of memory: its time is no answer either,
    whether simulate() or predicted_again() finds it."""
    from dataclasses import replace

    h100 = openreg_perf.load_profile("h100-sxm")
    small = replace(h100, name="small", memory=replace(h100.memory, capacity_bytes=2**20))
    with openreg_perf.simulate(h100) as run:
        torch.ones(2**20, device="openreg").sum()  # 4 MiB
    assert "does not fit" not in run.summary()
    with pytest.warns(RuntimeWarning, match=r"does not fit: the region's peak memory on openreg:0, 4\.\d+ MB"):
        again = run.predicted_again(profile=small)
    assert re.match(r"does not fit: the region's peak memory on openreg:0, 4\.\d+ MB, is more than small's 1\.05 MB; "
                    "on it this program runs out of memory", again.summary())


def test_simulate_inside_simulate_is_refused_before_it_touches_the_outer_region():
    product = a_product()
    with openreg_perf.simulate("h100-sxm") as outer:
        product()
        with pytest.raises(RuntimeError, match=r"simulate\(\) regions do not nest, and one is running"):
            with openreg_perf.simulate("h100-sxm"):
                pass
    assert not outer.partial and [kernel.op for kernel in outer.kernels] == ["aten::mm"]
    assert outer.peak_memory_bytes[0] >= 64 * 64 * 4  # its statistics were not reset by the refused region
    with openreg_perf.simulate("h100-sxm") as after:  # and the next region runs
        product()
    assert after.total_time_s > 0


def test_simulate_leaves_the_strict_mode_it_found():
    """A program in strict timing-only mode stays in it after a prediction (it read NaN after one)."""
    torch.openreg.set_timing_only(True, strict=True)
    try:
        with pytest.raises(RuntimeError, match="needs values of device memory"):
            with openreg_perf.simulate("h100-sxm"):  # runs in the strict mode it found: a read raises
                assert torch.openreg.is_timing_only_strict()
                torch.ones(4, device="openreg").sum().item()
        assert torch.openreg.is_timing_only() and torch.openreg.is_timing_only_strict()
    finally:
        torch.openreg.set_timing_only(False)
    assert not torch.openreg.is_timing_only_strict()


def test_a_region_cannot_start_inside_a_graph_capture_and_the_capture_survives_the_refusal():
    """The region's end waits for its work, which would invalidate the capture with an error that names
    neither: refused before anything is recorded, and the graph captures and replays as if not asked."""
    x = torch.zeros(4, device="openreg")
    x.add_(1)  # a first call of its dtypes runs synchronously, which a capture refuses
    torch.openreg.synchronize()
    graph = torch.accelerator.Graph()
    with torch.Stream(device="openreg"), graph:
        with pytest.raises(RuntimeError, match="cannot start while openreg:0's current stream captures a graph"):
            with openreg_perf.simulate("h100-sxm"):
                pass
        x.add_(1)
    graph.replay()
    torch.openreg.synchronize()
    assert x.cpu().tolist() == [2.0] * 4


def test_an_exception_whose_message_cannot_be_made_still_goes_on_with_its_partial_prediction():
    class Unprintable(Exception):
        def __str__(self):
            raise ValueError("no message")

    x = torch.ones(8, 8, device="openreg")
    with pytest.raises(Unprintable):
        with openreg_perf.simulate("h100-sxm") as run:
            x @ x
            raise Unprintable
    assert run.partial and run.error == "Unprintable" and run.total_time_s > 0


def test_running_out_of_memory_in_a_region_says_how_to_predict_the_program():
    """The allocator's advice (raise OPENREG_DEVICE_MEMORY) would predict a device that does not exist: the
    note says to predict without executing, on devices of the profile's capacity."""
    with pytest.raises(torch.OutOfMemoryError) as refused:
        with openreg_perf.simulate("h100-sxm") as run:
            torch.empty(2**40, dtype=torch.uint8, device="openreg")
    assert run.partial
    assert re.match(r"openreg_perf: openreg's devices hold [\d.]+ GiB here, h100-sxm's 80\.0 GiB: predict without "
                    r"executing on devices of its capacity \(openreg_perf\.devices_for\('h100-sxm'\)",
                    refused.value.__notes__[0])


@pytest.mark.parametrize(("arguments", "error", "message"), [
    (dict(profile=5), openreg_perf.ProfileError, "a profile is a bundled profile's name .*, not 5"),
    (dict(profile=""), openreg_perf.ProfileError, "not ''"),
    (dict(execute="no"), TypeError, "execute and strict are True or False, not 'no'"),
    (dict(strict=True), ValueError, r"strict=True is for timing-only mode \(execute=False\)"),
])
def test_simulate_refuses_arguments_it_would_misread_before_the_program_runs(arguments, error, message):
    ran = []
    with pytest.raises(error, match=message):
        with openreg_perf.simulate(**{"profile": "h100-sxm", **arguments}):
            ran.append(True)
    assert not ran


def test_a_run_refuses_a_negative_top_and_a_trace_path_of_none():
    product = a_product()
    with openreg_perf.simulate("h100-sxm") as run:
        product()
    with pytest.raises(ValueError, match="top \\(how many kernels to list\\) must be a whole number from 0"):
        run.summary(top=-2)
    assert run.summary(top=np.int64(1)) == run.summary(top=1)  # a count numpy made is a count
    with pytest.raises(TypeError):
        run.export_chrome_trace(None)


GEMM_ROW = {"workload": "GEMM torch.matmul", "config": "M=64 K=64 N=64", "precision": "FP16",
            "hardware": "NVIDIA H100 80GB HBM3", "metric": "latency", "value": "0.01", "unit": "ms", "source": "x"}


@pytest.mark.parametrize(("change", "named"), [
    ({"workload": "add", "config": "16777216 elements"}, "no model for the workload 'add'"),  # was fitted as a copy
    ({"precision": "bf16"}, "KeyError: 'bf16'"),
    ({"config": "4096x4096x4096"}, "AttributeError"),
    ({"unit": "s"}, "KeyError: 's'"),
])
def test_a_calibration_row_the_model_cannot_read_is_refused_naming_it_and_what_a_row_may_say(change, named):
    from openreg_perf import published

    published.cases_of([GEMM_ROW])  # as shipped: read
    with pytest.raises(published.CalibrationRowError) as refused:
        published.cases_of([GEMM_ROW, GEMM_ROW | change])
    message = str(refused.value)
    assert message.startswith("calibration row 2 (") and named in message
    assert "precision: FP16, BF16, FP8 e4m3, FP32; unit: ms, us" in message
