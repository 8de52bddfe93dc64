"""The command line's answers to what a user can get wrong or a script can do: mistakes on the command
line are one line and status 2; a script runs as `python script.py` would (sibling imports, sys.exit);
a script that fails still gets its prediction up to the failure. Each case runs the command in a
process of its own, as a user would. A normal run's report is test_simulate.py's."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PARTIAL = "predicted up to that point"


def openreg_perf(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    # The command loads the backend through PyTorch's autoload, whatever the test runner set, on
    # devices of this machine's default capacity (--no-execute sets the profile's).
    env = {k: v for k, v in os.environ.items() if k not in ("TORCH_DEVICE_BACKEND_AUTOLOAD", "OPENREG_DEVICE_MEMORY")}
    return subprocess.run([sys.executable, "-m", "openreg_perf", *args], capture_output=True, text=True,
                          timeout=120, env=env, cwd=cwd)


def script(folder: Path, text: str, name: str = "train.py") -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def a_mistake(result: subprocess.CompletedProcess) -> str:
    """The one line a mistake on the command line is told in (status 2, no traceback)."""
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("openreg-perf: error: ")
    return line


SMALL = textwrap.dedent("""
    import torch
    torch.ones(8, device="openreg") * 2
""")


@pytest.mark.parametrize("name", ["h100", "h100sxm", "H100-SXM"])
def test_a_mistyped_profile_name_is_refused_with_the_name_it_most_likely_meant(tmp_path, name):
    line = a_mistake(openreg_perf("run", "--profile", name, str(script(tmp_path, SMALL)), cwd=tmp_path))
    assert f"no profile named {name!r}; did you mean " in line
    meant = line.split("did you mean ", 1)[1].split("?")[0]
    assert "'h100-sxm'" in meant.split(" or ")  # among them, when others begin alike (h100-pcie)


def test_a_profile_file_that_is_not_valid_is_refused_in_one_line(tmp_path):
    profile = tmp_path / "mine.toml"
    profile.write_text('name = "mine"\n')
    line = a_mistake(openreg_perf("run", "--profile", str(profile), str(script(tmp_path, SMALL)), cwd=tmp_path))
    assert str(profile) in line and "did you mean" not in line


def test_a_script_that_is_not_there_is_refused_in_one_line(tmp_path):
    line = a_mistake(openreg_perf("run", "--profile", "h100-sxm", "missing.py", cwd=tmp_path))
    assert line == "openreg-perf: error: missing.py: no such script"


@pytest.mark.parametrize("ranks", ["0", "-1", "two"])
def test_ranks_that_are_not_a_whole_number_of_at_least_one_are_refused(tmp_path, ranks):
    line = a_mistake(openreg_perf("run", "--profile", "h100-sxm", "--ranks", ranks, str(script(tmp_path, SMALL)),
                                  cwd=tmp_path))
    assert line.endswith(f"argument --ranks: must be a whole number from 1 to 1,048,576, not {ranks!r}")


def test_a_script_runs_as_python_runs_it_and_may_end_with_sys_exit(tmp_path):
    folder = tmp_path / "project"
    script(folder, """
        def double(t):
            return t * 2
    """, name="helper.py")
    train = script(folder, """
        import sys, torch
        from helper import double  # beside the script: its folder is first on sys.path

        def main():
            double(torch.ones(8, device="openreg"))
            print("script ran with", sys.argv)
            return 0

        if __name__ == "__main__":
            sys.exit(main())
    """)
    result = openreg_perf("run", "--profile", "h100-sxm", str(train), "--flag", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"script ran with [{str(train)!r}, '--flag']" in result.stdout
    assert "predicted on h100-sxm" in result.stdout and "aten::mul" in result.stdout and PARTIAL not in result.stdout


def test_a_script_that_exits_with_a_failure_gets_its_prediction_and_its_exit_status(tmp_path):
    failing = script(tmp_path, SMALL + "import sys; sys.exit(3)\n")
    result = openreg_perf("run", "--profile", "h100-sxm", str(failing), cwd=tmp_path)
    assert result.returncode == 3, result.stderr
    assert f"partial: the region raised SystemExit: 3; {PARTIAL}" in result.stdout
    assert "aten::mul" in result.stdout


@pytest.mark.parametrize(("error", "status"), [("ValueError: the batch is empty", 1), ("KeyboardInterrupt", 130)])
def test_a_script_that_raises_gets_its_prediction_up_to_there_then_its_traceback(tmp_path, error, status):
    kind, _, message = error.partition(": ")
    failing = script(tmp_path, SMALL + f"raise {kind}({message!r})\n")
    result = openreg_perf("run", "--profile", "h100-sxm", str(failing), cwd=tmp_path)
    assert result.returncode == status
    assert result.stdout.startswith(f"partial: the region raised {error}; {PARTIAL}\n")
    assert "aten::mul" in result.stdout
    traceback = result.stderr.strip().splitlines()
    assert traceback[0] == "Traceback (most recent call last):" and traceback[-1] == error
    assert f'File "{failing}"' in traceback[1]  # from the script on: runpy's frames are not the user's


def test_printing_without_executing_prints_nan_and_refuses_integers(tmp_path):
    printing = script(tmp_path, """
        import torch
        t = torch.ones(8, device="openreg") * 2
        print(t)
        print(t.long())
    """)
    result = openreg_perf("run", "--profile", "h100-sxm", "--no-execute", str(printing), cwd=tmp_path)
    assert result.returncode == 1
    assert "tensor([nan, nan, nan, nan, nan, nan, nan, nan], device='openreg:0')" in result.stdout
    assert PARTIAL in result.stdout and "aten::mul" in result.stdout
    warning, _, error = result.stderr.strip().splitlines()  # the NaN read's warning names its line
    assert warning.startswith(f"{printing}:4: UserWarning: openreg: print(t) in timing-only mode reads values")
    assert error == ("openreg-perf: error: reading an integer or boolean tensor's values (print, .item(), .tolist()) "
                     "is not possible in timing-only mode (--no-execute): nothing was computed, and NaN stands only "
                     f"for floating-point values (at {printing}, line 5: print(t.long()))")


STAGES = textwrap.dedent("""
    import torch

    def stages():
        x = torch.randn(256, 512, device="openreg", requires_grad=True)
        return [(torch.nn.Linear(512, 512).to("openreg"), x) for _ in range(2)]
""")


def test_the_pipeline_command_predicts_each_stage_then_the_schedule(tmp_path):
    result = openreg_perf("pipeline", "--profile", "h100-sxm", "--micro-batches", "4",
                          str(script(tmp_path, STAGES, "stages.py")), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines[:2]] == ["stage 0", "stage 1"]
    assert "sends 0.5 MB" in lines[0]
    assert lines[2].startswith("1f1b: 2 devices, 1 chunk each, 4 micro-batches: step ")
    assert [line.split(":")[0] for line in lines[3:]] == ["device 0", "device 1"]


@pytest.mark.parametrize(("arguments", "message"), [
    (["--schedule", "zero-bubble"], "invalid choice: 'zero-bubble' (choose from 'gpipe', '1f1b', 'interleaved-1f1b')"),
    (["--recompute", "selective"], "invalid choice: 'selective' (choose from 'none', 'full')"),
    (["--chunks", "2"], "needs interleaved-1f1b"),
])
def test_a_pipeline_that_cannot_run_is_one_line_before_its_stages_are_predicted(tmp_path, arguments, message):
    result = openreg_perf("pipeline", "--profile", "h100-sxm", "--micro-batches", "4", *arguments,
                          str(script(tmp_path, STAGES, "stages.py")), cwd=tmp_path)
    assert message in a_mistake(result) and result.stdout == ""


@pytest.mark.parametrize(("arguments", "message"), [
    (["train.py", "--profile", "h100-sxm"], "openreg-perf's options go before the script; what follows it is the "
                                            "script's"),
    (["--profile", "h100-sxm", "--trace", "missing/t.json", "train.py"], "missing/t.json: cannot be written"),
])
def test_what_the_command_cannot_do_is_told_before_the_script_runs(tmp_path, arguments, message):
    script(tmp_path, "print('ran')\n")
    result = openreg_perf("run", *arguments, cwd=tmp_path)
    assert message in a_mistake(result) and "ran" not in result.stdout


def test_a_stages_file_without_stages_is_one_line(tmp_path):
    result = openreg_perf("pipeline", "--profile", "h100-sxm", "--micro-batches", "4",
                          str(script(tmp_path, "x = 1\n", "stages.py")), cwd=tmp_path)
    assert "defines no stages()" in a_mistake(result)


def test_a_profile_that_does_not_load_is_told_and_the_others_are_still_listed(tmp_path, monkeypatch, capsys):
    from openreg_perf.__main__ import main

    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "half-written.toml").write_text("[chip]\nname = \n")
    monkeypatch.setenv("OPENREG_PERF_HOME", str(tmp_path))
    assert main(["profiles"]) == 1
    printed = capsys.readouterr()
    assert "h100-sxm" in printed.out and "half-written" not in printed.out
    (line,) = printed.err.strip().splitlines()
    assert line.startswith("openreg-perf: error: ") and "half-written.toml" in line


def test_a_script_that_failed_before_running_anything_prints_no_empty_prediction(capsys):
    """A syntax error fails the region before any work: its 'partial ... 0.0 us' report would be noise."""
    import argparse

    import openreg_perf
    from openreg_perf.__main__ import _print_prediction
    from openreg_perf.capture import Trace

    run = openreg_perf.Run(openreg_perf.load_profile("h100-sxm"), 1, True)
    run._finish(Trace(), {}, error="SyntaxError: invalid syntax")
    _print_prediction(run, argparse.Namespace(top=10, trace=None, plot=None))
    assert capsys.readouterr().out == ""
