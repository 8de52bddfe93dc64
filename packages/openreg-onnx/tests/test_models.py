"""End to end: the models of torch-openreg's training tests (MLP, CNN with
BatchNorm in eval mode, Transformer encoder, LSTM+GRU) and a model built on
openreg's custom operators, with parameters and inputs on openreg, exported,
checked with onnx.checker, run in onnxruntime and compared with the device's
results: in float32 on both devices, with float16 weights, and with dynamic
batch and sequence dimensions."""

from __future__ import annotations

import onnx
import onnxruntime
import openreg_onnx
import pytest
import torch
import torch.nn as nn
from onnxscript import ir
from torch.export import Dim

ONNX_DTYPES = {torch.float32: ir.DataType.FLOAT, torch.float16: ir.DataType.FLOAT16}


def _on_device(build, make_input, device: str, dtype: torch.dtype):
    torch.manual_seed(0)
    model = build().eval()
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):  # running statistics that eval mode must use
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 2.0)
    model = model.to(device, dtype)
    return model, make_input().to(device, dtype)


@pytest.mark.parametrize(("device", "dtype"), [("openreg:0", torch.float32), ("openreg:1", torch.float32),
                                               ("openreg:1", torch.float16)])
def test_training_models_export_and_match_the_device(model_name, device, dtype, training_models,
                                                      export_and_verify):
    build, make_input, _ = training_models[model_name]
    model, x = _on_device(build, make_input, device, dtype)
    assert {p.device for p in model.parameters()} == {torch.device(device)}
    assert {p.dtype for p in model.parameters()} == {dtype}
    program, _ = export_and_verify(model, (x,))
    # The weights are in the graph, in the model's dtype.
    weights = program.model.graph.initializers.values()
    assert {w.dtype for w in weights if w.dtype.is_floating_point()} == {ONNX_DTYPES[dtype]}


class CustomOpsNet(nn.Module):
    """An MLP whose activations are openreg's custom operators (C++ and Python)."""

    def __init__(self) -> None:
        super().__init__()
        self.first, self.second = nn.Linear(6, 16), nn.Linear(16, 4)
        self.bias = nn.Parameter(torch.randn(4))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = torch.ops.openreg.softclip(torch.ops.openreg.swish(self.first(x)), 1.5)
        out = torch.ops.openreg.scaled_add(self.second(hidden), self.bias, alpha=0.5)
        return out, torch.ops.openreg.all_finite(out)


def test_custom_ops_model_with_dynamic_batch_and_sequence(export_and_verify):
    torch.manual_seed(0)
    model = CustomOpsNet().eval().to("openreg:1")
    x = torch.randn(5, 3, 6, device="openreg:1")
    dims = {0: Dim("batch", min=2), 1: Dim("sequence", min=2)}
    program, results = export_and_verify(model, (x,), dynamic_shapes=(dims,),
                                         verify_on=[(torch.randn(9, 4, 6, device="openreg:1"),)])
    assert _input_dims(program) == [["batch", "sequence", 6]]
    ops = {node.op_type for node in program.model.graph}
    assert {"Sigmoid", "Tanh"} <= ops  # swish and softclip became ONNX operators
    assert results[1].outputs[0].shape == (9, 4, 4)
    assert results[1].outputs[1].dtype == torch.bool


def test_exported_program_exports_and_verifies(export_and_verify):
    # torch.onnx.export also takes what torch.export made; the reference is then its module.
    torch.manual_seed(0)
    x = torch.randn(5, 6, device="openreg:0")
    captured = torch.export.export(CustomOpsNet().eval().to("openreg:0"), (x,))
    program, _ = export_and_verify(captured, (x,))
    assert {"Sigmoid", "Tanh"} <= {node.op_type for node in program.model.graph}


def _input_dims(program) -> list[list[int | str]]:
    return [[d if isinstance(d, int) else str(d) for d in value.shape] for value in program.model.graph.inputs]


def test_mlp_with_dynamic_batch_and_sequence(training_models, export_and_verify):
    build, _, _ = training_models["mlp"]
    model, _ = _on_device(build, lambda: torch.empty(0), "openreg:0", torch.float32)
    x = torch.randn(4, 5, 10, device="openreg:0")
    dims = {0: Dim("batch", min=2), 1: Dim("sequence", min=2)}
    program, results = export_and_verify(model, (x,), dynamic_shapes=(dims,),
                                         verify_on=[(torch.randn(3, 11, 10, device="openreg:0"),),
                                                    (torch.randn(6, 2, 10, device="openreg:0"),)])
    assert _input_dims(program) == [["batch", "sequence", 10]]
    assert [r.outputs[0].shape for r in results] == [(4, 5, 3), (3, 11, 3), (6, 2, 3)]


# Only the batch is free here: torch.export makes the recurrent model's
# sequence length static (its RNN decomposition), and the CNN's image size is
# fixed by its layers.
@pytest.mark.parametrize(("name", "device"), [("lstm_gru", "openreg:0"), ("cnn", "openreg:1")])
def test_dynamic_batch(name, device, training_models, export_and_verify):
    build, make_input, _ = training_models[name]
    model, x = _on_device(build, make_input, device, torch.float32)
    other = torch.randn(7, *x.shape[1:], device=device)
    program, results = export_and_verify(model, (x,), dynamic_shapes=({0: Dim("batch", min=2)},),
                                         verify_on=[(other,)])
    assert _input_dims(program) == [["batch", *x.shape[1:]]]
    assert results[1].outputs[0].shape == (7, 3)


def test_saved_file_is_the_verified_model(tmp_path, training_models):
    build, make_input, _ = training_models["mlp"]
    model, x = _on_device(build, make_input, "openreg:1", torch.float32)
    path = tmp_path / "mlp.onnx"
    program = openreg_onnx.export(model, (x,), path, verbose=False, verify=True)
    onnx.checker.check_model(str(path), full_check=True)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (from_file,) = session.run(None, {session.get_inputs()[0].name: x.cpu().numpy()})
    (from_program,) = program(x.cpu())
    assert torch.equal(torch.from_numpy(from_file), from_program)
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(from_file), model(x).cpu(), rtol=1e-4, atol=1e-5)
