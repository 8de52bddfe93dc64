"""Quantization on openreg with torchao, PyTorch's quantization library:
quantize_ applied to a model on openreg gives the results the same
configuration gives on the CPU, with no operator falling back to the CPU,
eagerly and under torch.compile, and quantization-aware training and float8
training train to the CPU's bits. (PyTorch's legacy quantized tensors, torch.quantize_per_tensor
and friends: test_quantized_tensors.py.)"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn

torchao_quantization = pytest.importorskip("torchao.quantization", reason="the 'quantization' dependency group")
torchao_float8 = pytest.importorskip("torchao.float8", reason="the 'quantization' dependency group")

CONFIGS = {
    "int8_weight_only": torchao_quantization.Int8WeightOnlyConfig,
    "int8_dynamic_activation_int8_weight": torchao_quantization.Int8DynamicActivationInt8WeightConfig,
    "float8_weight_only": torchao_quantization.Float8WeightOnlyConfig,
}


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 16))


def transformer_layer() -> nn.Module:
    return nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.0, batch_first=True)


MODELS = {"mlp": (mlp, (8, 64)), "transformer_layer": (transformer_layer, (2, 10, 64))}


@pytest.fixture(autouse=True)
def _no_cpu_fallback():
    """An operator without an openreg kernel fails the test instead of running on the CPU."""
    torch.openreg.set_fallback_mode("error")
    torch.openreg.reset_fallback_counts()
    yield
    torch.openreg.set_fallback_mode("warn")


def quantized_pair(model_name: str, config_name: str) -> tuple[nn.Module, nn.Module, torch.Tensor]:
    """The same model quantized with the same configuration on the CPU and on openreg, and an input."""
    build, input_shape = MODELS[model_name]
    torch.manual_seed(0)
    model = build().eval()
    on_cpu, on_openreg = copy.deepcopy(model), copy.deepcopy(model).to("openreg")
    torchao_quantization.quantize_(on_cpu, CONFIGS[config_name]())
    torchao_quantization.quantize_(on_openreg, CONFIGS[config_name]())
    return on_cpu, on_openreg, torch.randn(*input_shape)


@pytest.mark.parametrize("model_name", MODELS)
@pytest.mark.parametrize("config_name", CONFIGS)
def test_a_quantized_model_on_openreg_matches_the_cpu(model_name, config_name):
    on_cpu, on_openreg, x = quantized_pair(model_name, config_name)
    # A plain nn.Linear (torchao leaves attention's NonDynamicallyQuantizableLinear alone).
    linear = next(m for m in on_openreg.modules() if type(m) is nn.Linear)
    assert linear.weight.device.type == "openreg"
    assert type(linear.weight).__module__.startswith("torchao"), "quantize_ left the weight as it was"
    with torch.no_grad():
        expected, result = on_cpu(x), on_openreg(x.to("openreg"))
    assert result.device.type == "openreg"
    # openreg runs the CPU's kernels on device memory: the same bits.
    torch.testing.assert_close(result.cpu(), expected, rtol=0, atol=0)
    assert torch.openreg.fallback_counts() == {}


def test_a_compiled_quantized_model_on_openreg_matches_the_cpu(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    on_cpu, on_openreg, x = quantized_pair("mlp", "int8_weight_only")
    torch._dynamo.reset()
    compiled = torch.compile(on_openreg)
    with torch.no_grad():
        result = compiled(x.to("openreg"))
    torch._dynamo.reset()
    torch.testing.assert_close(result.cpu(), on_cpu(x), rtol=1e-5, atol=1e-5)
    assert torch.openreg.fallback_counts() == {}


# LITERALINCLUDE START: QAT_ON_OPENREG
QAT_CONFIG = torchao_quantization.Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4)


def qat_trained(model: nn.Module, device: str) -> list[float]:
    """Quantization-aware training: fake-quantized int8 activations and int4
    weights in the forward, full-precision gradients; the losses per step."""
    torchao_quantization.quantize_(model, torchao_quantization.qat.QATConfig(QAT_CONFIG, step="prepare"))
    return sgd_losses(model, device, batch=8)


def sgd_losses(model: nn.Module, device: str, batch: int, steps: int = 3) -> list[float]:
    """A few SGD steps on random batches drawn on the CPU (the same on every
    device); the losses per step."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(1)
    losses = []
    for _ in range(steps):
        x, target = torch.randn(batch, 64).to(device), torch.randn(batch, 16).to(device)
        loss = nn.functional.mse_loss(model(x), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses
# LITERALINCLUDE END: QAT_ON_OPENREG


def test_quantization_aware_training_on_openreg_matches_the_cpu():
    torch.manual_seed(0)
    model = mlp()
    on_cpu, on_openreg = copy.deepcopy(model), copy.deepcopy(model).to("openreg")
    assert qat_trained(on_openreg, "openreg") == qat_trained(on_cpu, "cpu")
    for trained, reference in zip(on_openreg.parameters(), on_cpu.parameters(), strict=True):
        torch.testing.assert_close(trained.detach().cpu(), reference.detach(), rtol=0, atol=0)
    # Converted to the real quantized model: int4 weights, int8 activations.
    for model in (on_openreg, on_cpu):
        torchao_quantization.quantize_(model, torchao_quantization.qat.QATConfig(QAT_CONFIG, step="convert"))
    x = torch.randn(4, 64)
    torch.testing.assert_close(on_openreg(x.to("openreg")).cpu(), on_cpu(x), rtol=0, atol=0)
    assert torch.openreg.fallback_counts() == {}



# LITERALINCLUDE START: FLOAT8_TRAINING_ON_OPENREG
def float8_trained(model: nn.Module, device: str) -> list[float]:
    """torchao's float8 training: each nn.Linear casts its input, weight and
    output gradient to float8 with a scale per tensor (dynamic scaling) and
    multiplies them with torch._scaled_mm; the losses per step (sgd_losses,
    above)."""
    torchao_float8.convert_to_float8_training(model)
    return sgd_losses(model, device, batch=16)
# LITERALINCLUDE END: FLOAT8_TRAINING_ON_OPENREG


def test_float8_training_on_openreg_matches_the_cpu():
    torch.manual_seed(0)
    model = mlp()
    on_cpu, on_openreg = copy.deepcopy(model), copy.deepcopy(model).to("openreg")
    assert float8_trained(on_openreg, "openreg") == float8_trained(on_cpu, "cpu")
    assert type(on_openreg[0]).__name__ == "Float8Linear"
    for trained, reference in zip(on_openreg.parameters(), on_cpu.parameters(), strict=True):
        torch.testing.assert_close(trained.detach().cpu(), reference.detach(), rtol=0, atol=0)
    assert torch.openreg.fallback_counts() == {}
