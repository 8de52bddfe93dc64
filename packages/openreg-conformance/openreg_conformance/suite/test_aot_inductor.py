"""Needs AOTInductor: an exported model compiled ahead of time for the device.

The contract: torch._inductor.aoti_compile_and_package, then
aoti_load_package, gives a callable whose outputs on the device equal eager's.
"""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.conformance_capability("aot_inductor")


def test_a_package_runs_like_eager(device, tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to(device).eval()
    x = torch.randn(2, 8, device=device)
    with torch.no_grad():
        exported = torch.export.export(model, (x,))
        path = torch._inductor.aoti_compile_and_package(exported, package_path=str(tmp_path / "model.pt2"))
        loaded = torch._inductor.aoti_load_package(path)
        got, expected = loaded(x), model(x)
    assert got.device == device
    torch.testing.assert_close(got.cpu(), expected.cpu(),
                               msg=lambda m: f"contract: an AOTInductor package computes what eager does: {m}")
