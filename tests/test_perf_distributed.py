"""openreg-perf with openreg-distributed: collectives of two ranks over "occl" reach the prediction
as one collective (two groups' collectives sharing the device's links), and a DDP step run on two
ranks is predicted again at N ranks. Two processes on
loopback, each bounded by a timeout and always reaped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_packages("openreg-perf", "openreg-distributed")

WORLD_SIZE = 2


def _run_on_two_ranks(script: str, *args: str, timeout: float) -> list[str]:
    """Runs `script` as ranks 0 and 1 of a group over a fresh file store; each rank's stdout."""
    store = tempfile.mktemp(prefix="openreg-perf-store-")
    # The ranks load the backend through PyTorch's autoload, whatever the test runner set.
    env = {k: v for k, v in os.environ.items() if k != "TORCH_DEVICE_BACKEND_AUTOLOAD"}
    ranks = [subprocess.Popen([sys.executable, "-c", script, str(rank), store, *args], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for rank in range(WORLD_SIZE)]
    try:
        outputs = [rank.communicate(timeout=timeout) for rank in ranks]
    finally:
        for rank in ranks:
            rank.kill()
        if os.path.exists(store):
            os.unlink(store)
    for process, (_, err) in zip(ranks, outputs, strict=True):
        assert process.returncode == 0, err
    return [out for out, _ in outputs]


def _last_json_line(output: str) -> dict:
    return json.loads(output.strip().splitlines()[-1])


ALL_REDUCE_RANK = """
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
other = dist.new_group([0, 1])  # a second group: a stream of its own on each device
dist.all_reduce(t, group=other)
torch.openreg.set_timing_only(True)  # 64 MiB each, long beside a launch: neither computed nor sent
with openreg_perf.simulate("h100-sxm") as two_groups:
    u, v = torch.empty(1 << 24, device="openreg"), torch.empty(1 << 24, device="openreg")
    works = [dist.all_reduce(u, async_op=True), dist.all_reduce(v, group=other, async_op=True)]
    for work in works:
        work.wait()
torch.openreg.set_timing_only(False)
print(json.dumps({"value": z.item(), "kernels": [[k.name, k.category, k.seconds] for k in run.kernels],
                  "ranks": run.ranks, "communication": run.report.communication_s,
                  "two groups": [[k.work.stream, k.start_s, k.end_s] for k in two_groups.timeline.items
                                 if k.category == "collective"]}))
dist.destroy_process_group()
"""


def test_a_collective_of_two_ranks_is_predicted_as_one():
    for output in _run_on_two_ranks(ALL_REDUCE_RANK, timeout=120):
        result = _last_json_line(output)
        assert result["value"] == 8 * (1 << 18) and result["ranks"] == 2  # (2 ranks of 1, reduced, doubled) reduced
        (collective,) = [k for k in result["kernels"] if k[1] == "collective"]
        assert collective[0] == "allreduce" and collective[2] > 0
        assert result["communication"] == pytest.approx(collective[2])
        # Note [Transfers share their link]: two groups' collectives, each on its group's stream, take the
        # device's links one after the other.
        (first_stream, _, first_end), (second_stream, second_start, _) = sorted(result["two groups"],
                                                                                key=lambda item: item[1])
        assert first_stream != second_stream and second_start == pytest.approx(first_end)


DDP_RANK = """
import json, sys, torch, torch.distributed as dist, torch.nn as nn, openreg_perf
from torch.nn.parallel import DistributedDataParallel
rank = int(sys.argv[1])
torch.openreg.set_device(rank)
dist.init_process_group("openreg:occl", init_method="file://" + sys.argv[2], rank=rank, world_size=2)
torch.manual_seed(0)
layers = [nn.Linear(512, 512) for _ in range(6)]
model = DistributedDataParallel(nn.Sequential(*layers).to("openreg"), bucket_cap_mb=1)
x = torch.randn(32, 512, device="openreg")

def step():
    model(x).sum().backward()
    torch.openreg.synchronize()

for _ in range(2):  # DDP builds its buckets again after its first step
    step()
with openreg_perf.simulate("h100-sxm", host="launches") as run:
    step()
data = model._get_ddp_logging_data()
slow = sys.argv[3]
result = {"bucket_bytes": sorted(int(n) for n in data["rebuilt_bucket_sizes"].split(", ")),
          "collectives": sorted(openreg_perf.costs.message_bytes(k.work.op) for k in run.timeline.items
                                if k.category == "collective"),
          "per_ranks": {n: [k.seconds for k in run.predicted_again(ranks=n).timeline.items
                            if k.category == "collective"] for n in (2, 4, 8, 16, 64)},
          "exposed": {name: run.predicted_again(profile=name, ranks=16).report.exposed_communication_s
                      for name in ("h100-sxm", slow)},
          "compute": {n: run.predicted_again(ranks=n).report.compute_s for n in (2, 64)}}
if rank == 0:
    print(json.dumps(result))
dist.destroy_process_group()
"""


def test_a_ddp_step_predicted_at_n_ranks_from_a_run_of_two(tmp_path):
    import openreg_perf
    from openreg_perf.collectives import collective_seconds

    # The H100 profile with a network ten times slower between nodes (8 GPUs each).
    slow = tmp_path / "slow-network.toml"
    text = Path(openreg_perf.load_profile("h100-sxm").path).read_text()
    slow.write_text(text.replace('name = "h100-sxm"', 'name = "h100-slow-network"')
                    .replace("network_bytes_per_s = 50e9", "network_bytes_per_s = 5e9"))
    result = _last_json_line(_run_on_two_ranks(DDP_RANK, str(slow), timeout=180)[0])
    # The prediction at 2 ranks has the structure the simulator ran: one all_reduce per DDP bucket.
    assert len(result["bucket_bytes"]) >= 2 and result["collectives"] == result["bucket_bytes"]
    # Each all_reduce takes the alpha-beta time of its rank count; compute per rank stays.
    h100 = openreg_perf.load_profile("h100-sxm")
    for n, seconds in result["per_ranks"].items():
        expected = sorted(max(collective_seconds("all_reduce", b, int(n), h100), h100.chip.kernel_floor_s)
                          for b in result["bucket_bytes"])
        assert sorted(seconds) == pytest.approx(expected)
    assert sum(result["per_ranks"]["16"]) > sum(result["per_ranks"]["8"])  # crossing nodes costs more
    assert result["compute"]["2"] == pytest.approx(result["compute"]["64"])
    # Across nodes, a slower network leaves more communication exposed.
    assert result["exposed"]["h100-sxm"] < result["exposed"][str(slow)]


TENSOR_PARALLEL_RANK = """
import json, sys, torch, torch.distributed as dist, openreg_perf
rank = int(sys.argv[1])
torch.openreg.set_device(rank)
dist.init_process_group("openreg:occl", init_method="file://" + sys.argv[2], rank=rank, world_size=2)
torch.manual_seed(0)
# A row-parallel MLP block, Megatron's way: each rank holds half of each weight; the partial outputs of
# the second matmul are summed by an all_reduce. Two layers, on the compute stream and occl's.
w1 = [torch.randn(512, 1024, device="openreg") for _ in range(2)]
w2 = [torch.randn(1024, 512, device="openreg") for _ in range(2)]
x = torch.randn(64, 512, device="openreg")

def block():
    h = x
    for a, b in zip(w1, w2):
        partial = torch.relu(h @ a) @ b
        dist.all_reduce(partial)
        h = h + partial
    return h

block()  # the group's first collective connects the ranks: outside the regions
totals = []
for _ in range(10):
    with openreg_perf.simulate("h100-sxm") as run:
        block()
        torch.openreg.synchronize()
    totals.append(run.total_time_s)
print(json.dumps({"totals": totals}))
dist.destroy_process_group()
"""


def test_a_tensor_parallel_program_is_predicted_the_same_ten_times_on_both_ranks():
    """Stream dependencies come from the program (events, collectives), and the host from the profile:
    ten predictions of the same region agree to 0.1 %, on both ranks."""
    results = [_last_json_line(output)["totals"] for output in _run_on_two_ranks(TENSOR_PARALLEL_RANK, timeout=180)]
    every = [total for totals in results for total in totals]
    assert min(every) > 0
    assert max(every) <= min(every) * 1.001, results


TRAINING_SCRIPT_RANK = """
import json, sys, openreg_perf
openreg_perf.devices_for("h100-sxm")
import torch, torch.distributed as dist, torch.nn as nn
from torch.nn.parallel import DistributedDataParallel
rank, parallelism = int(sys.argv[1]), sys.argv[3]
torch.openreg.set_device(rank)
dist.init_process_group("openreg:occl", init_method="file://" + sys.argv[2], rank=rank, world_size=2)


def wrapped(model):
    if parallelism == "ddp":
        return DistributedDataParallel(model, bucket_cap_mb=1)
    from torch.distributed.fsdp import fully_shard
    for layer in model:
        fully_shard(layer)
    return fully_shard(model)


def train(execute):
    '''The script as people write it: built, then trained with a loss logged each step. The first region
    builds the model and takes two steps (DDP rebuilds its buckets after its first); the second is predicted.'''
    with openreg_perf.simulate("h100-sxm", execute=execute):
        torch.manual_seed(0)
        model = wrapped(nn.Sequential(*[nn.Linear(512, 512) for _ in range(6)]).to("openreg"))
        optimizer = torch.optim.AdamW(model.parameters())
        x = torch.randn(32, 512, device="openreg")

        def step():
            loss = model(x).square().mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            print(f"loss {loss.item()}", file=sys.stderr)

        for _ in range(2):
            step()
    with openreg_perf.simulate("h100-sxm", execute=execute) as run:
        step()
    return {"collectives": sorted([k.work.name, openreg_perf.costs.message_bytes(k.work.op)] for k in run.timeline.items
                                  if k.category == "collective"),
            "kernels": len(run.kernels), "seconds": run.total_time_s, "values read as NaN": run.values_read_as_nan,
            "rebuilt buckets": getattr(model, "_has_rebuilt_buckets", None), "fsdp world size": run.fsdp_world_size,
            "at 8 ranks": run.predicted_again(ranks=8).summary()}


print(json.dumps({"executed": train(True), "timing-only": train(False)}))
dist.destroy_process_group()
"""


@pytest.mark.parametrize("parallelism", ["ddp", "fsdp2"])
def test_a_training_script_is_predicted_without_executing_as_it_is_executed(parallelism):
    """DDP's parameter check and bucket rebuild, and FSDP2's, run in timing-only mode on the metadata the
    ranks exchange for real (Note [Collectives in timing-only mode]); the step predicted is the one
    executed: the same collectives of the same sizes, the same kernels, the same time."""
    for output in _run_on_two_ranks(TRAINING_SCRIPT_RANK, parallelism, timeout=240):
        result = _last_json_line(output)
        executed, timing_only = result["executed"], result["timing-only"]
        assert timing_only["collectives"] == executed["collectives"] and len(executed["collectives"]) >= 2
        assert timing_only["kernels"] == executed["kernels"]
        assert timing_only["seconds"] == pytest.approx(executed["seconds"], rel=1e-9)
        assert (executed["values read as NaN"], timing_only["values read as NaN"]) == (0, 1)
        assert timing_only["rebuilt buckets"] is (True if parallelism == "ddp" else None)
        # FSDP2's shards are the two ranks': at 8, the report says what they would be.
        assert timing_only["fsdp world size"] == (2 if parallelism == "fsdp2" else None)
        assert ("are 2/8 of what this report shows" in timing_only["at 8 ranks"]) is (parallelism == "fsdp2")


def test_fsdp2_run_at_world_size_one_is_not_predicted_at_more_ranks_in_silence():
    """At world size 1 FSDP2 shards nothing and issues no collectives: predicted at 8 ranks, the region
    would have no communication at all; the prediction warns and says what to run instead."""
    import openreg_perf
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.distributed.fsdp import fully_shard

    dist.init_process_group("occl", store=dist.HashStore(), rank=0, world_size=1)
    try:
        model = nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 64)).to("openreg")
        for layer in model:
            fully_shard(layer)
        fully_shard(model)
        x = torch.randn(8, 64, device="openreg")
        model(x).sum().backward()
        with openreg_perf.simulate("h100-sxm") as run:
            model(x).sum().backward()
        assert run.fsdp_world_size == 1 and run.report.communication_s == 0
        with pytest.warns(RuntimeWarning, match="FSDP2 ran at world size 1, where it shards nothing and issues no"):
            wider = run.predicted_again(ranks=8)
        assert "run the script on 2 or more ranks" in wider.summary()
    finally:
        dist.destroy_process_group()
