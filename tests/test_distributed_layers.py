"""openreg-distributed with the other layers: GradScaler and autocast under
DDP over "occl", and torch.compile of a DDP model. Two ranks on loopback
(tests/ddp_worker.py), each bounded by a timeout and always reaped; the
trained parameters of both ranks must agree with each other and with the
same training on the whole batch on the CPU in one process."""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve().parent
WORLD_SIZE = 2
_spec = importlib.util.spec_from_file_location("openreg_ddp_worker", HERE / "ddp_worker.py")
worker = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(worker)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _train_on_ranks(scenario: str, tmp_path: Path) -> list[dict]:
    """Each rank's {"parameters": name -> tensor, "scale": GradScaler's final scale or None}."""
    port = _free_port()
    outputs = [tmp_path / f"rank{rank}.pt" for rank in range(WORLD_SIZE)]
    ranks = [subprocess.Popen([sys.executable, HERE / "ddp_worker.py", scenario, str(rank), str(WORLD_SIZE),
                               str(port), outputs[rank]], cwd=HERE.parent, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for rank in range(WORLD_SIZE)]
    try:
        logs = [rank.communicate(timeout=240)[0] for rank in ranks]
    finally:
        for rank in ranks:
            rank.kill()
            rank.wait()
    for rank, log in zip(ranks, logs, strict=True):
        assert rank.returncode == 0, log
    return [torch.load(output) for output in outputs]


def _cpu_reference() -> dict[str, torch.Tensor]:
    """The same steps on the whole batch in one process: DDP's averaged
    gradient of equal shards is the gradient of the whole batch's mean loss."""
    model = worker.model()
    inputs, targets = worker.batch()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(worker.STEPS):
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(model(inputs), targets).backward()
        optimizer.step()
    return {name: p.detach() for name, p in model.named_parameters()}


@pytest.mark.needs_packages("openreg-distributed", "openreg-amp")
def test_grad_scaler_and_autocast_under_ddp(tmp_path):
    rank0, rank1 = _train_on_ranks("amp", tmp_path)
    assert rank0["scale"] == rank1["scale"] == 256.0  # no step skipped for an overflow
    rank0, rank1 = rank0["parameters"], rank1["parameters"]
    reference = _cpu_reference()
    for name, expected in reference.items():
        torch.testing.assert_close(rank1[name], rank0[name], rtol=0, atol=0)  # DDP keeps ranks identical
        torch.testing.assert_close(rank0[name], expected, rtol=2e-2, atol=2e-3)  # float16 compute


@pytest.mark.needs_packages("openreg-distributed")
def test_torch_compile_of_a_ddp_model(tmp_path):
    rank0, rank1 = (rank["parameters"] for rank in _train_on_ranks("compile", tmp_path))
    reference = _cpu_reference()
    for name, expected in reference.items():
        torch.testing.assert_close(rank1[name], rank0[name], rtol=0, atol=0)
        torch.testing.assert_close(rank0[name], expected, rtol=1e-4, atol=1e-5)
