"""Needs onnx, onnxscript and onnxruntime: ONNX export of a model on the device.

The contract: torch.onnx.export (the dynamo exporter) takes a model whose
parameters and inputs are on the device, and onnxruntime, running the
exported model on the CPU, computes what the model computes on the device.
"""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.conformance_capability("onnx")


def test_an_exported_model_runs_in_onnxruntime(device):
    import onnxruntime

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                                torch.nn.Linear(16, 4)).to(device).eval()
    x = torch.randn(3, 8, device=device)
    program = torch.onnx.export(model, (x,), dynamo=True, verbose=False)
    session = onnxruntime.InferenceSession(program.model_proto.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {session.get_inputs()[0].name: x.cpu().numpy()})
    with torch.no_grad():
        expected = model(x).cpu()
    torch.testing.assert_close(torch.from_numpy(got), expected, atol=1e-5, rtol=1e-4,
                               msg=lambda m: f"contract: onnxruntime computes what the device does: {m}")
