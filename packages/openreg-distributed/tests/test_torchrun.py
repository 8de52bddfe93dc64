"""torchrun --nproc_per_node=2 runs the example DDP training script that ships in the wheel on
openreg over occl, with each transport, and the ranks end with the same
parameters and a falling loss."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from occl_workers import free_port

# The example as installed by the wheel, as a user runs it.
EXAMPLE = "openreg_distributed.examples.train_ddp"


@pytest.mark.parametrize("transport", ["ipc", "gloo"])
def test_torchrun_trains_with_ddp(transport):
    env = dict(os.environ, STEPS="11", OCCL_TRANSPORT=transport)
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
               f"--master_port={free_port()}", "-m", EXAMPLE]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"2 ranks over occl ({transport} transport); parameters identical on every rank: True" in done.stdout
    losses = [float(x) for x in re.findall(r"loss (\d+\.\d+)", done.stdout)]
    assert len(losses) == 3 and losses[-1] < losses[0], done.stdout
