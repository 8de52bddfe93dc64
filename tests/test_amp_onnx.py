"""openreg-amp and openreg-onnx together: a model trained on openreg with
autocast and GradScaler exports to ONNX, and onnxruntime computes what
PyTorch computes on the CPU with the trained weights (and what the device
computes, which openreg_onnx.verify checks)."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.needs_packages("openreg-amp", "openreg-onnx")


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.LayerNorm(32), torch.nn.GELU(),
                               torch.nn.Linear(32, 4))


def _train_with_amp(model: torch.nn.Module, steps: int) -> list[float]:
    """Fits a fixed linear target in float16 autocast with a GradScaler; returns the losses."""
    generator = torch.Generator().manual_seed(1)
    inputs = torch.randn(64, 16, generator=generator)
    targets = inputs @ torch.randn(16, 4, generator=generator)
    inputs, targets = inputs.to("openreg"), targets.to("openreg")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler("openreg")
    losses = []
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("openreg", dtype=torch.float16):
            output = model(inputs)
            assert output.dtype == torch.float16  # the amp layer's cast policy is in force
            loss = torch.nn.functional.mse_loss(output.float(), targets)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses


def test_a_model_trained_with_amp_exports_and_runs_in_onnxruntime_as_on_the_cpu():
    import onnxruntime
    import openreg_onnx

    model = _model().to("openreg")
    losses = _train_with_amp(model, steps=30)
    assert losses[-1] < 0.5 * losses[0], losses  # it trained
    model.eval()
    example = torch.randn(8, 16, generator=torch.Generator().manual_seed(2))
    program = openreg_onnx.export(model, (example.to("openreg"),), verbose=False, verify=True)

    session = onnxruntime.InferenceSession(program.model_proto.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    (feed,) = session.get_inputs()
    (onnx_output,) = session.run(None, {feed.name: example.numpy()})
    with torch.no_grad():
        cpu_output = model.to("cpu")(example)
    torch.testing.assert_close(torch.from_numpy(onnx_output), cpu_output, rtol=1e-4, atol=1e-5)
