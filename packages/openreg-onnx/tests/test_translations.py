"""The ONNX translations of openreg's custom operators: every operator that
torch-openreg defines has one, and each exported translation computes in
onnxruntime what the operator computes on the device, per dtype."""

from __future__ import annotations

import openreg_onnx
import pytest
import torch
import torch.nn as nn

ops = torch.ops.openreg


def test_every_openreg_operator_has_a_translation():
    defined = {name for name in torch._C._dispatch_get_all_op_names() if name.startswith("openreg::")}
    # C++ (CustomOps.cpp, Fragment.cpp) and Python (custom_op.py, fragment.py).
    assert {"openreg::swish", "openreg::swish_backward", "openreg::all_finite", "openreg::softclip",
            "openreg::softclip_backward", "openreg::scaled_add"} <= defined
    assert {operator.name() for operator in openreg_onnx.translation_table()} == defined


class EveryOperator(nn.Module):
    def forward(self, x, grad, wide, scalar, finite, with_inf, with_nan, integers):
        return (ops.swish(x), ops.swish_backward(grad, x),
                ops.softclip(x, 1.5), ops.softclip_backward(grad, x, 1.5),
                ops.scaled_add(x, wide, alpha=-2.5),    # promoted to float64
                ops.scaled_add(x, scalar, alpha=0.75),  # a 0-dim float64 does not promote
                ops.all_finite(finite), ops.all_finite(with_inf), ops.all_finite(with_nan),
                ops.all_finite(integers))


def _inputs(dtype: torch.dtype, device: str) -> tuple[torch.Tensor, ...]:
    """EveryOperator's arguments: float ones in ``dtype``, except the float64
    ones that test scaled_add's type promotion, and integers for all_finite."""
    torch.manual_seed(0)
    x = torch.randn(3, 5) * 3  # well into softclip's saturation
    finite = torch.randn(3, 5)
    with_inf, with_nan = finite.clone(), finite.clone()
    with_inf[1, 2], with_nan[2, 4] = float("-inf"), float("nan")
    floats = [t.to(device, dtype) for t in (x, torch.randn(3, 5))]
    wide = [torch.randn(5, dtype=torch.float64, device=device), torch.tensor(1.25, dtype=torch.float64, device=device)]
    checked = [t.to(device, dtype) for t in (finite, with_inf, with_nan)]
    return (*floats, *wide, *checked, torch.arange(6, device=device).reshape(2, 3))


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
def test_translations_match_the_device(dtype, export_and_verify):
    args = _inputs(dtype, "openreg:1")
    program, (result,) = export_and_verify(EveryOperator().eval(), args)
    # Only standard ONNX operators: nothing the runtime would need a plugin for.
    assert {node.domain for node in program.model.graph} <= {""}
    outputs = result.outputs
    assert outputs[4].dtype == torch.float64 and outputs[5].dtype == dtype
    # The device's own answers, which onnxruntime matched, are the interesting ones.
    finite_flags = [flag.item() for flag in EveryOperator()(*args)[6:]]
    assert finite_flags == [True, False, False, True]


def test_translation_table_works_with_torch_onnx_export():
    x = torch.randn(4, 3, device="openreg:0")

    class Model(nn.Module):
        def forward(self, x):
            return ops.softclip(ops.swish(x), 2.0)

    program = torch.onnx.export(Model().eval(), (x,), dynamo=True, verbose=False,
                                custom_translation_table=openreg_onnx.translation_table())
    result = openreg_onnx.verify(program, Model(), (x,))
    assert result.passed, str(result)
    assert result.outputs[0].max_abs_error <= 1e-5
