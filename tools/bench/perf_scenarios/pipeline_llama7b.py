"""Llama 2 7B (bf16, micro-batches of one 4096-token sequence) trained pipeline-parallel on h100-sxm:
each part of a stage predicted once without executing (one decoder layer, the embedding, the final norm
with the head and the loss), forward and backward, then GPipe, 1F1B and interleaved 1F1B (2 chunks per
device) played out over stages of equal layer counts at PP 4 and 8, 32 micro-batches. Prints JSON: each
schedule's step, bubble and micro-batches in flight, and the bubble that (p-1)/(m+p-1) gives for equal
stages. Run by tools/bench/perf_model.py."""

import json

import openreg_perf

openreg_perf.devices_for("h100-sxm")
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from openreg_perf.pipeline import StageTimes, predict_pipeline, predict_stage, stage_of  # noqa: E402

LAYERS, HIDDEN, HEADS, FFN, VOCAB, TOKENS, MICRO_BATCHES = 32, 4096, 32, 11008, 32000, 4096, 32
PROFILE = "h100-sxm"


class DecoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention_norm, self.mlp_norm = nn.RMSNorm(HIDDEN), nn.RMSNorm(HIDDEN)
        self.qkv, self.out = nn.Linear(HIDDEN, 3 * HIDDEN, bias=False), nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.gate_up, self.down = nn.Linear(HIDDEN, 2 * FFN, bias=False), nn.Linear(FFN, HIDDEN, bias=False)

    def forward(self, x):
        q, k, v = (t.view(1, TOKENS, HEADS, -1).transpose(1, 2) for t in self.qkv(self.attention_norm(x)).chunk(3, -1))
        x = x + self.out(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(x.shape))
        gate, up = self.gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class Head(nn.Module):
    """The last stage's end: the final norm, the output projection and the loss."""

    def __init__(self):
        super().__init__()
        self.norm, self.project = nn.RMSNorm(HIDDEN), nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, x):
        logits = self.project(self.norm(x)).float()
        return F.cross_entropy(logits.view(TOKENS, VOCAB), torch.zeros(TOKENS, dtype=torch.long, device=x.device))


def on_device(make):
    """The module's weights on openreg, never initialised: made on the meta device, then only allocated."""
    with torch.device("meta"):
        module = make().to(torch.bfloat16)
    return module.to_empty(device="openreg")


hidden = torch.empty(1, TOKENS, HIDDEN, dtype=torch.bfloat16, device="openreg", requires_grad=True)
tokens = torch.empty(1, TOKENS, dtype=torch.long, device="openreg")
layer = predict_stage(on_device(DecoderLayer), hidden, PROFILE)
embedding = predict_stage(on_device(lambda: nn.Embedding(VOCAB, HIDDEN)), tokens, PROFILE)
head = predict_stage(on_device(Head), hidden, PROFILE)


def stages(count: int) -> list[StageTimes]:
    """count stages of LAYERS / count layers each, the embedding before the first, the head after the last."""
    layers = [layer] * (LAYERS // count)
    return [stage_of([embedding] * (index == 0) + layers + [head] * (index == count - 1)) for index in range(count)]


rows = []
for devices in (4, 8):
    for schedule, chunks in (("gpipe", 1), ("1f1b", 1), ("interleaved-1f1b", 2)):
        step = predict_pipeline(stages(devices * chunks), PROFILE, MICRO_BATCHES, schedule, chunks)
        # The analytic check: the layers alone, in equal stages, against (p-1)/(vm+p-1).
        equal = [stage_of([layer] * (LAYERS // (devices * chunks)))] * (devices * chunks)
        rows.append({"devices": devices, "schedule": schedule, "chunks": chunks, "step_seconds": step.step_time_s,
                     "bubble": step.bubble_fraction,
                     "equal_stages_played": predict_pipeline(equal, PROFILE, MICRO_BATCHES, schedule,
                                                             chunks).bubble_fraction,
                     "equal_stages_bubble": (devices - 1) / (chunks * MICRO_BATCHES + devices - 1),
                     "in_flight": max(step.in_flight(d) for d in range(devices))})
print(json.dumps({"micro_batches": MICRO_BATCHES, "layer_forward_seconds": layer.forward_s,
                  "layer_backward_seconds": layer.backward_s, "rows": rows}))
