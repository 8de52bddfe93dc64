"""AMP training loops on openreg: an MLP, a CNN (with BatchNorm) and a small
Transformer trained with float16 autocast and GradScaler, fused and foreach
optimizers, converge and track the same loop in float32 on openreg, with no
operator leaving the device (the fallback mode is 'error', see conftest)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

MODELS = {
    "mlp": (lambda: nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 4)),
            lambda: torch.randn(32, 20)),
    "cnn": (lambda: nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 4 * 4, 4)),
            lambda: torch.randn(16, 3, 8, 8)),
    "transformer": (lambda: nn.Sequential(
                        nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0,
                                                                         batch_first=True), 1),
                        nn.Flatten(), nn.Linear(16 * 6, 4)),
                    lambda: torch.randn(8, 6, 16)),
}
STEPS = 30
# The float16 loop may differ from the float32 one by this much at any step
# (absolute, on a cross-entropy loss that starts near 1.5): float16 matmuls
# round to ~1e-3 relative. Measured: at most 3.3e-4 over the three models.
TRACKING_TOLERANCE = 5e-3


def _losses(name: str, amp: bool, fused: bool) -> list[float]:
    build, make_input = MODELS[name]
    torch.manual_seed(0)
    model = build().to("openreg")
    x, y = make_input().to("openreg"), torch.randint(0, 4, (make_input().shape[0],)).to("openreg")
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3, **({"fused": True} if fused else {"foreach": True}))
    scaler = torch.amp.GradScaler("openreg", enabled=amp)
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        with torch.autocast("openreg", dtype=torch.float16, enabled=amp):
            logits = model(x)
            loss = nn.functional.cross_entropy(logits, y)
        assert logits.dtype == (torch.float16 if amp else torch.float32)
        assert loss.dtype == torch.float32  # cross_entropy's log_softmax and nll_loss run in float32
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("fused", [False, True], ids=["foreach", "fused"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_amp_training_converges_and_tracks_float32(name, fused):
    torch.openreg.reset_fallback_counts()
    amp, full = _losses(name, amp=True, fused=fused), _losses(name, amp=False, fused=fused)
    assert amp[-1] < 0.5 * amp[0], f"AMP loss did not converge: {amp[0]:.3f} -> {amp[-1]:.3f}"
    worst = max(abs(a - f) for a, f in zip(amp, full, strict=True))
    assert worst <= TRACKING_TOLERANCE, f"AMP loss strays {worst:.4f} from float32's"
    assert torch.openreg.fallback_counts() == {}
