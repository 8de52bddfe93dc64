"""End to end: training loops of an MLP, a CNN with BatchNorm, a small
Transformer encoder and an LSTM/GRU on openreg match the same loops on the
CPU step by step, with no operator leaving the device; inference too."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F


class Recurrent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(6, 12, batch_first=True)
        self.gru = nn.GRU(12, 8, batch_first=True)
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.gru(self.lstm(x)[0])[0][:, -1])


MODELS = {
    "mlp": (lambda: nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Dropout(0.0), nn.Linear(32, 3)),
            lambda: torch.randn(8, 10),
            lambda params: torch.optim.Adam(params, lr=1e-2)),
    "cnn": (lambda: nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.MaxPool2d(2), nn.Conv2d(8, 8, 3), nn.AdaptiveAvgPool2d(1),
                                  nn.Flatten(), nn.Linear(8, 3)),
            lambda: torch.randn(4, 3, 12, 12),
            lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9)),
    "transformer": (lambda: nn.Sequential(
                        nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0,
                                                                         batch_first=True), 2),
                        nn.Flatten(), nn.Linear(16 * 5, 3)),
                    lambda: torch.randn(4, 5, 16),
                    lambda params: torch.optim.SGD(params, lr=0.05)),
    "lstm_gru": (Recurrent, lambda: torch.randn(4, 7, 6),
                 lambda params: torch.optim.AdamW(params, lr=1e-2)),
}


def train_side_by_side(name: str, steps: int = 4):
    build, make_input, make_optimizer = MODELS[name]
    torch.manual_seed(0)
    cpu_model = build()
    device_model = copy.deepcopy(cpu_model).to("openreg")
    optimizers = [make_optimizer(cpu_model.parameters()), make_optimizer(device_model.parameters())]
    batches = [(make_input(), torch.randint(0, 3, (make_input().shape[0],))) for _ in range(steps)]
    for x, y in batches:
        losses = []
        for model, optimizer, device in zip((cpu_model, device_model), optimizers, ("cpu", "openreg"),
                                            strict=True):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x.to(device)), y.to(device))
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        assert losses[1] == pytest.approx(losses[0], rel=1e-4, abs=1e-5)
    for (pname, expected), actual in zip(cpu_model.named_parameters(), device_model.parameters(),
                                         strict=True):
        assert actual.device.type == "openreg"
        torch.testing.assert_close(actual.detach().cpu(), expected.detach(), rtol=1e-3, atol=1e-4,
                                   msg=lambda m, pname=pname: f"{pname}: {m}")
    return cpu_model, device_model, make_input


@pytest.mark.parametrize("name", sorted(MODELS))
def test_training_matches_cpu_step_by_step_without_fallback(name):
    torch.openreg.reset_fallback_counts()
    train_side_by_side(name)
    assert torch.openreg.fallback_counts() == {}


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_inference_matches_cpu(name, mode):
    cpu_model, device_model, make_input = train_side_by_side(name, steps=1)
    cpu_model.eval()
    device_model.eval()
    x = make_input()
    context = torch.no_grad if mode == "no_grad" else torch.inference_mode
    with context():
        expected = cpu_model(x)
        actual = device_model(x.to("openreg"))
    assert not actual.requires_grad
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------ tied weights


class TiedLanguageModel(nn.Module):
    """An embedding and an output layer sharing one weight, as GPT-2's."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(11, 6)
        self.mix = nn.Linear(6, 6)
        self.out = nn.Linear(6, 11, bias=False)
        self.out.weight = self.embed.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.mix(self.embed(tokens))))


def test_module_to_keeps_tied_weights_tied():
    m = nn.Sequential(nn.Linear(4, 4, bias=False), nn.Linear(4, 4, bias=False))
    m[1].weight = m[0].weight
    original = m[0].weight
    m.to("openreg")
    assert m[0].weight is m[1].weight is original  # the same Parameter, now on the device
    assert original.device == torch.device("openreg", 0)
    m.to("openreg:1")
    assert m[0].weight is m[1].weight and m[0].weight.device == torch.device("openreg", 1)
    m.to("cpu")
    assert m[0].weight is m[1].weight is original and original.device.type == "cpu"


def test_data_assignment_between_cpu_and_openreg():
    p = nn.Parameter(torch.randn(3))
    p.data = torch.arange(3.0).to("openreg")
    assert p.device == torch.device("openreg", 0) and p.cpu().tolist() == [0.0, 1.0, 2.0]
    p.data = torch.ones(3)
    assert p.device.type == "cpu" and p.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(RuntimeError, match="incompatible tensor type"):
        p.data = torch.ones(3).to_sparse()  # still refused, as on CUDA


def test_tied_weights_train_like_the_cpu():
    torch.manual_seed(0)
    cpu_model = TiedLanguageModel()
    device_model = copy.deepcopy(cpu_model).to("openreg")
    assert device_model.out.weight is device_model.embed.weight
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.5) for m in (cpu_model, device_model)]
    for _ in range(3):
        tokens = torch.randint(0, 11, (4, 5))
        for model, optimizer, device in zip((cpu_model, device_model), optimizers, ("cpu", "openreg"),
                                            strict=True):
            optimizer.zero_grad()
            logits = model(tokens.to(device))
            F.cross_entropy(logits.reshape(-1, 11), tokens.to(device).reshape(-1)).backward()
            optimizer.step()
        torch.testing.assert_close(device_model.embed.weight.grad.cpu(), cpu_model.embed.weight.grad,
                                   rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(device_model.embed.weight.detach().cpu(), cpu_model.embed.weight.detach(),
                               rtol=1e-4, atol=1e-5)
