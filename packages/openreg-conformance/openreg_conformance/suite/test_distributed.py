"""Needs a c10d backend for the device: torch.distributed on 2 ranks.

Each test starts two processes on this machine (a FileStore, no network),
each joining a group on dist.get_default_backend_for_device(device): every
collective against the values the CPU computes, then one DDP step and one
FSDP2 (fully_shard) step against the CPU's step over every rank's batch.
The ranks are killed if they outlive the test's bound.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.conformance_capability("distributed")

WORLD = 2
BOUND_S = 120
RANKS = Path(__file__).resolve().parent / "_ranks.py"


def run_ranks(scenario: str, device_type: str, scratch: Path) -> dict[int, dict]:
    outputs = [scratch / f"rank{rank}.json" for rank in range(WORLD)]
    logs = [scratch / f"rank{rank}.log" for rank in range(WORLD)]  # files: a chatty rank never blocks on a pipe
    processes = []
    for rank in range(WORLD):
        with open(logs[rank], "w") as log:
            processes.append(subprocess.Popen([sys.executable, str(RANKS), scenario, str(rank), str(WORLD),
                                               str(scratch / "store"), device_type, str(outputs[rank])],
                                              stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ)))
    deadline = time.monotonic() + BOUND_S
    try:
        for process in processes:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pytest.fail(f"contract: the {scenario} ranks finish; they were still running after {BOUND_S} s")
    finally:
        for process in processes:
            process.kill()
            process.wait()
    results = {}
    for rank, output in enumerate(outputs):
        assert output.exists(), f"rank {rank} wrote no result; its output:\n{logs[rank].read_text()[-3000:]}"
        results[rank] = json.loads(output.read_text())
    return results


def failures(results: dict[int, dict]) -> list[str]:
    return [message for checks in results.values() for message in checks.values() if message]


@pytest.mark.parametrize("scenario", ["collectives", "ddp", "fsdp2"])
def test_two_ranks_match_the_cpu(device_type, scenario, tmp_path):
    broken = failures(run_ranks(scenario, device_type, tmp_path))
    assert not broken, "contract: the device's c10d backend computes what the CPU computes:\n" + "\n".join(broken)
