"""Bad input to openreg_onnx: an operator without a translation is named with
the way to add one; PyTorch's own export errors come through unchanged;
verification refuses what it cannot compare and reports a mismatch."""

from __future__ import annotations

import openreg_onnx
import pytest
import torch
import torch.nn as nn
from onnxscript import opset18 as op


# A custom operator of the user's own, in its own namespace, with no ONNX
# translation anywhere. It runs on openreg (its body is aten's mul).
@torch.library.custom_op("openreg_onnx_test::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@twice.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class UsesTwice(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.openreg.swish(torch.ops.openreg_onnx_test.twice(x))


def test_missing_translation_names_the_operator_and_how_to_add_one():
    x = torch.randn(3, 4, device="openreg:1")
    with pytest.raises(openreg_onnx.MissingTranslationError) as caught:
        openreg_onnx.export(UsesTwice().eval(), (x,), verbose=False)
    message = str(caught.value)
    assert message.startswith("no ONNX translation for openreg_onnx_test::twice.")
    assert "openreg_onnx_test::twice(Tensor x) -> Tensor" in message  # its schema
    assert "def twice(x):" in message
    assert "custom_translation_table={\n        torch.ops.openreg_onnx_test.twice.default: twice}" in message
    assert "openreg::swish" not in message  # openreg's own operators are translated
    # PyTorch's error is kept, not lost.
    assert isinstance(caught.value.__cause__, torch.onnx.OnnxExporterError)

    # Doing what the message says exports the model, and it verifies.
    def twice_translation(x):
        return op.Mul(x, op.CastLike(2.0, x))

    program = openreg_onnx.export(UsesTwice().eval(), (x,), verbose=False, verify=True,
                                  custom_translation_table={torch.ops.openreg_onnx_test.twice.default:
                                                            twice_translation})
    assert {node.op_type for node in program.model.graph} >= {"Mul", "Sigmoid"}


class DataDependent(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:  # control flow on a value: torch.export cannot capture it
            return x * 2
        return x


class MakesSparse(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.to_sparse()  # openreg has no sparse layout


@pytest.mark.parametrize(("model", "pytorch_says"), [
    (DataDependent(), "Could not guard on data-dependent expression"),
    (MakesSparse(), "could not find kernel for aten._sparse_coo_tensor_with_dims_and_tensors.default"),
])
def test_pytorch_export_errors_come_through_unchanged(model, pytorch_says):
    x = torch.randn(3, 3, device="openreg:0")
    with pytest.raises(torch.onnx.OnnxExporterError) as direct:
        torch.onnx.export(model, (x,), dynamo=True, verbose=False)
    with pytest.raises(torch.onnx.OnnxExporterError) as through_openreg_onnx:
        openreg_onnx.export(model, (x,), verbose=False)
    assert type(through_openreg_onnx.value) is type(direct.value)
    assert str(through_openreg_onnx.value) == str(direct.value)
    assert pytorch_says in str(through_openreg_onnx.value)


def test_torchscript_exporter_is_refused_by_name():
    with pytest.raises(ValueError, match=r"dynamo=True.*torch.onnx.export\(\.\.\., dynamo=False\)"):
        openreg_onnx.export(nn.Identity(), (torch.randn(2, device="openreg:0"),), dynamo=False)


def test_wrong_translation_fails_verification_with_the_largest_error():
    x = torch.randn(3, 4, device="openreg:1")
    wrong = {torch.ops.openreg_onnx_test.twice.default: lambda x: op.Mul(x, op.CastLike(3.0, x))}
    with pytest.raises(openreg_onnx.VerificationError) as caught:
        openreg_onnx.export(UsesTwice().eval(), (x,), verbose=False, verify=True,
                            custom_translation_table=wrong)
    message = str(caught.value)
    assert "does not match the device's results" in message and "MISMATCH" in message
    program = openreg_onnx.export(UsesTwice().eval(), (x,), verbose=False, custom_translation_table=wrong)
    result = openreg_onnx.verify(program, UsesTwice(), (x,))
    check = result.outputs[0]
    expected_error = (torch.nn.functional.silu(3 * x) - torch.nn.functional.silu(2 * x)).abs().max().item()
    assert not result.passed and not check.passed
    assert check.max_abs_error == pytest.approx(expected_error, rel=1e-3)
    assert f"largest error {check.max_abs_error:.3g}" in str(result)


def test_verify_refuses_inputs_that_do_not_fit():
    model = nn.Linear(4, 2).to("openreg:0").eval()
    x = torch.randn(3, 4, device="openreg:0")
    program = openreg_onnx.export(model, (x,), verbose=False)
    with pytest.raises(openreg_onnx.VerificationError, match="takes 1 inputs but 2 tensors were given"):
        openreg_onnx.verify(program, lambda a, b: model(a), (x, x))
    bf16 = model.to(torch.bfloat16)
    with pytest.raises(openreg_onnx.VerificationError, match="does not support bfloat16"):
        openreg_onnx.verify(program, bf16, (x.to(torch.bfloat16),))


def test_verify_refuses_a_bfloat16_model_before_onnxruntime_fails_on_it():
    # A model exported in bfloat16: onnxruntime would fail to load it, naming
    # a missing Gemm kernel rather than the dtype.
    model = nn.Linear(4, 3).to("openreg:0", dtype=torch.bfloat16).eval()
    x = torch.randn(2, 4, device="openreg:0", dtype=torch.bfloat16)
    program = openreg_onnx.export(model, (x,), verbose=False)
    with pytest.raises(openreg_onnx.VerificationError, match="does not support bfloat16.*float32 copy"):
        openreg_onnx.verify(program, model, (x,))


def test_verify_tolerances_can_be_tightened():
    model = nn.Sequential(nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 1)).to("openreg:0").eval()
    x = torch.randn(64, 16, device="openreg:0")
    program = openreg_onnx.export(model, (x,), verbose=False)
    loose = openreg_onnx.verify(program, model, (x,))
    assert loose.passed and loose.outputs[0].rtol == openreg_onnx.TOLERANCES[torch.float32][0]
    exact = openreg_onnx.verify(program, model, (x,), tolerances={torch.float32: (0.0, 0.0)})
    assert exact.outputs[0].max_abs_error == loose.outputs[0].max_abs_error
    assert exact.passed == (loose.max_abs_error == 0.0)
