"""simulate() on programs that run on openreg: what it captures (kernels with their operators, copies,
host waits, two devices, collectives of two ranks), what it reports and exports, and the command line.
The numbers themselves are the model's (test_model.py, test_timeline.py); here, that the program's
structure reaches the prediction."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import openreg_perf
import pytest
import torch
import torch.nn as nn

PACKAGE_ROOT = Path(__file__).resolve().parents[1]


def mlp_step():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)).to("openreg")
    optimizer = torch.optim.AdamW(model.parameters())
    x = torch.randn(32, 64, device="openreg")

    def step():
        model(x).sum().backward()
        optimizer.step()
        optimizer.zero_grad()

    step()  # warm-up: first calls of a dtype wait for their results (the executor's check)
    return step


def test_a_training_step_is_predicted_kernel_by_kernel(tmp_path):
    step = mlp_step()
    with openreg_perf.simulate("h100-sxm") as run:
        step()
    ops = {kernel.op for kernel in run.kernels}
    assert {"aten::addmm", "aten::mm"} <= ops  # forward and backward matrix products
    assert all(kernel.seconds >= run.profile.chip.launch_overhead_s for kernel in run.kernels)
    addmm = next(kernel for kernel in run.kernels if kernel.op == "aten::addmm")
    assert addmm.flops == 2 * 32 * 64 * 128 + 32 * 128 and addmm.bound in ("compute", "memory", "latency")
    assert run.total_time_s >= max(kernel.start_s + kernel.seconds for kernel in run.kernels)
    assert run.peak_memory_bytes[0] > 0
    text = run.summary()
    assert "predicted on h100-sxm" in text and "datasheet roofline" in text and "aten::addmm" in text
    run.export_chrome_trace(tmp_path / "step.json")
    events = json.loads((tmp_path / "step.json").read_text())["traceEvents"]
    lanes = {event["pid"] for event in events}
    assert "predicted on h100-sxm, device 0" in lanes and "measured on openreg (simulator), device 0" in lanes
    run.plot(tmp_path / "step.svg")
    picture = (tmp_path / "step.svg").read_text()
    assert picture.startswith("<svg") and picture.count("<circle") >= 2  # kernels on the roofline


def test_a_host_synchronisation_waits_for_the_predicted_work():
    a = torch.randn(1024, 1024, device="openreg")
    with openreg_perf.simulate("a100-sxm-80gb") as run:
        b = a @ a
        total = b.sum().item()  # the host waits for the work before it
        c = a @ a
    assert isinstance(total, float) and c.shape == (1024, 1024)
    (wait,) = [w for w in run.timeline.waits if w.wait.name == "memcpyDtoH wait"]
    first_mm = next(item for item in run.timeline.items if item.work.op and item.work.op.name == "aten::mm")
    copy = next(item for item in run.timeline.items if item.category == "copy")
    assert wait.end_s == pytest.approx(copy.end_s) and copy.start_s >= first_mm.end_s
    second_mm = [item for item in run.timeline.items if item.work.op and item.work.op.name == "aten::mm"][1]
    assert second_mm.start_s >= wait.end_s  # queued after the host resumed


def test_a_region_across_two_devices_keeps_their_streams_apart():
    x0, x1 = torch.randn(512, 512, device="openreg:0"), torch.randn(512, 512, device="openreg:1")
    with openreg_perf.simulate("h100-sxm") as run:
        y0, y1 = x0 @ x0, x1 @ x1
        moved = y1.to("openreg:0")
    assert {kernel.device for kernel in run.kernels} == {0, 1}
    assert set(run.report.busy_s) == {0, 1}
    assert any(kernel.category == "copy" for kernel in run.kernels)
    del y0, moved


def test_the_command_line_runs_a_script_and_prints_its_report(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import sys, torch
        model = torch.nn.Linear(16, 4).to("openreg")
        model(torch.randn(8, 16, device="openreg")).sum().backward()
        print("script ran with", sys.argv[1:])
    """))
    env = {k: v for k, v in os.environ.items() if k != "TORCH_DEVICE_BACKEND_AUTOLOAD"}
    result = subprocess.run([sys.executable, "-m", "openreg_perf", "run", "--profile", "h100-sxm", "--plot",
                             str(tmp_path / "p.svg"), str(script), "--flag"], capture_output=True, text=True,
                            timeout=120, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "script ran with ['--flag']" in result.stdout
    assert "predicted on h100-sxm" in result.stdout and "aten::addmm" in result.stdout
    assert (tmp_path / "p.svg").exists()
    listing = subprocess.run([sys.executable, "-m", "openreg_perf", "profiles"], capture_output=True, text=True,
                             timeout=60, env=env, cwd=tmp_path)
    assert all(name in listing.stdout for name in ("a100-sxm-40gb", "a100-sxm-80gb", "h100-sxm", "h200", "mi300x"))


RANK = """
import json, sys, torch, torch.distributed as dist, openreg_perf
rank = int(sys.argv[1])
torch.openreg.set_device(rank)
dist.init_process_group("openreg:occl", init_method="file://" + sys.argv[2], rank=rank, world_size=2)
t = torch.ones(1 << 18, device="openreg")
dist.all_reduce(t)  # the group's first collective connects the ranks: outside the region
with openreg_perf.simulate("h100-sxm") as run:
    y = t * 2
    dist.all_reduce(y)
    z = y.sum()
print(json.dumps({"value": z.item(), "kernels": [[k.name, k.category, k.seconds] for k in run.kernels],
                  "ranks": run.ranks, "communication": run.report.communication_s}))
dist.destroy_process_group()
"""


def test_a_collective_of_two_ranks_is_predicted_as_one():
    import tempfile

    store = tempfile.mktemp(prefix="openreg-perf-store-")
    env = {k: v for k, v in os.environ.items() if k != "TORCH_DEVICE_BACKEND_AUTOLOAD"}
    ranks = [subprocess.Popen([sys.executable, "-c", RANK, str(rank), store], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for rank in range(2)]
    try:
        outputs = [rank.communicate(timeout=120) for rank in ranks]
    finally:
        for rank in ranks:
            rank.kill()
        if os.path.exists(store):
            os.unlink(store)
    for process, (out, err) in zip(ranks, outputs, strict=True):
        assert process.returncode == 0, err
        result = json.loads(out.strip().splitlines()[-1])
        assert result["value"] == 8 * (1 << 18) and result["ranks"] == 2  # (2 ranks of 1, reduced, doubled) reduced
        (collective,) = [k for k in result["kernels"] if k[1] == "collective"]
        assert collective[0] == "allreduce" and collective[2] > 0
        assert result["communication"] == pytest.approx(collective[2])
