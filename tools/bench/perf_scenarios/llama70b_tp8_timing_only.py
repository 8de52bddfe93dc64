"""A training step's forward and backward pass of Llama 2 70B (bf16, one sequence of 4096 tokens) as one
of 8 tensor-parallel ranks, predicted on h100-sxm without executing. The split is Megatron's: each rank
holds 1/8 of the attention heads, of the MLP's hidden units and of the vocabulary; an all_reduce joins
the ranks after the attention's output projection and after the MLP (and their inputs' gradients in
the backward pass), each layer's activations are recomputed in the backward pass (full recomputation),
and the loss is the vocabulary-parallel cross entropy. Every rank computes the same, so one process
(a process group of one) records rank 0, and simulate(ranks=8) prices its collectives for 8 ranks.
Prints JSON: the host's time and peak memory for the program and for the region, and the prediction.
Then, outside those figures, the same model on 8 x 8 H100s: 8 pipeline stages of 10 layers (the
embedding on the first, the head and the loss on the last), each a tensor-parallel group of 8, 32
micro-batches of one sequence, with 1F1B and interleaved 1F1B (2 chunks of 5 layers per device), from
one layer's forward and backward predicted once (predict_stage). Run by tools/bench/perf_model.py."""

import json
import time

from host_memory import peak_host_bytes

began = time.perf_counter()
import openreg_perf  # noqa: E402

openreg_perf.devices_for("h100-sxm")
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from openreg_perf.pipeline import predict_pipeline, predict_stage, stage_of  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402

TP, LAYERS, HIDDEN, HEADS, KV_HEADS, FFN, VOCAB, TOKENS = 8, 80, 8192, 64, 8, 28672, 32000, 4096
HEAD = HIDDEN // HEADS


class ReduceForward(torch.autograd.Function):
    """Megatron's g: the ranks' partial sums joined going forward, the gradient passed through."""

    @staticmethod
    def forward(ctx, x):
        dist.all_reduce(x)  # in place, on the fresh output of a projection
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


class ReduceBackward(torch.autograd.Function):
    """Megatron's f: the input passed through, its gradient's partial sums joined going backward."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        dist.all_reduce(grad)
        return grad


def weight(*shape):
    return torch.nn.Parameter(torch.empty(*shape, dtype=torch.bfloat16, device="openreg"))


def rms_norm(x, scale):
    return F.rms_norm(x, (HIDDEN,), scale)


class Layer:
    def __init__(self):
        self.norms = [torch.nn.Parameter(torch.ones(HIDDEN, dtype=torch.bfloat16, device="openreg")) for _ in range(2)]
        self.qkv = weight((HEADS + 2 * KV_HEADS) // TP * HEAD, HIDDEN)
        self.out = weight(HIDDEN, HEADS // TP * HEAD)
        self.gate_up = weight(2 * FFN // TP, HIDDEN)
        self.down = weight(HIDDEN, FFN // TP)

    def attention(self, x):
        q, k, v = F.linear(ReduceBackward.apply(rms_norm(x, self.norms[0])), self.qkv).split(
            [HEADS // TP * HEAD, KV_HEADS // TP * HEAD, KV_HEADS // TP * HEAD], dim=-1)
        q, k, v = (t.view(1, TOKENS, -1, HEAD).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return x + ReduceForward.apply(F.linear(y.transpose(1, 2).reshape(1, TOKENS, -1), self.out))

    def mlp(self, x):
        gate, up = F.linear(ReduceBackward.apply(rms_norm(x, self.norms[1])), self.gate_up).chunk(2, dim=-1)
        return x + ReduceForward.apply(F.linear(F.silu(gate) * up, self.down))

    def __call__(self, x):
        return self.mlp(self.attention(x))


def vocabulary_parallel_loss(logits, targets):
    """Cross entropy over a vocabulary split across the ranks: the maximum and the sum of exponentials
    joined by all_reduce, each rank's share of the target logits too."""
    maximum = logits.detach().amax(dim=-1, keepdim=True)
    dist.all_reduce(maximum, op=dist.ReduceOp.MAX)
    shifted = logits - maximum
    total = shifted.exp().sum(dim=-1, keepdim=True)
    dist.all_reduce(total)
    mine = targets % (VOCAB // TP)  # the targets this rank's shard holds, as one rank sees them
    target_logits = shifted.gather(-1, mine.unsqueeze(-1))
    dist.all_reduce(target_logits)
    return (total.log() - target_logits).mean()


dist.init_process_group("occl", store=dist.HashStore(), rank=0, world_size=1)
torch.openreg.set_timing_only(True)
embedding, head = weight(VOCAB // TP, HIDDEN), weight(VOCAB // TP, HIDDEN)
final_norm = torch.nn.Parameter(torch.ones(HIDDEN, dtype=torch.bfloat16, device="openreg"))
layers = [Layer() for _ in range(LAYERS)]
tokens = torch.zeros(1, TOKENS, dtype=torch.long, device="openreg")
parameters = sum(t.numel() for t in [embedding, head, final_norm] + [p for layer in layers for p in
                 [*layer.norms, layer.qkv, layer.out, layer.gate_up, layer.down]])
region_began = time.perf_counter()
with openreg_perf.simulate("h100-sxm", ranks=TP, execute=False) as run:
    x = ReduceForward.apply(F.embedding(tokens % (VOCAB // TP), embedding))
    for layer in layers:
        x = checkpoint(layer, x, use_reentrant=False)
    logits = F.linear(ReduceBackward.apply(rms_norm(x, final_norm)), head)
    vocabulary_parallel_loss(logits.float(), tokens).backward()
ended = time.perf_counter()


class Part(torch.nn.Module):
    """A piece of a pipeline stage as predict_stage takes it: run(x) with these parameters."""

    def __init__(self, run, parameters):
        super().__init__()
        self.run = run
        for index, parameter in enumerate(parameters):
            self.register_parameter(f"p{index}", parameter)

    def forward(self, x):
        return self.run(x)


PIPELINE_STAGES, MICRO_BATCHES = 8, 32
layer = layers[0]
hidden = torch.empty(1, TOKENS, HIDDEN, dtype=torch.bfloat16, device="openreg", requires_grad=True)
one_layer = predict_stage(Part(lambda x: checkpoint(layer, x, use_reentrant=False),
                               [*layer.norms, layer.qkv, layer.out, layer.gate_up, layer.down]), hidden, "h100-sxm", TP)
first = predict_stage(Part(lambda t: ReduceForward.apply(F.embedding(t % (VOCAB // TP), embedding)), [embedding]),
                      tokens, "h100-sxm", TP)
last = predict_stage(Part(lambda x: vocabulary_parallel_loss(
    F.linear(ReduceBackward.apply(rms_norm(x, final_norm)), head).float(), tokens), [final_norm, head]),
    hidden, "h100-sxm", TP)
dist.destroy_process_group()


def pipeline_stages(count: int) -> list:
    per_stage = [one_layer] * (LAYERS // count)
    return [stage_of([first] * (i == 0) + per_stage + [last] * (i == count - 1)) for i in range(count)]


pipeline = []
for schedule, chunks in (("1f1b", 1), ("interleaved-1f1b", 2)):
    step = predict_pipeline(pipeline_stages(PIPELINE_STAGES * chunks), "h100-sxm", MICRO_BATCHES, schedule, chunks,
                            tensor_parallel=TP)
    pipeline.append({"schedule": schedule, "chunks": chunks, "step_seconds": step.step_time_s,
                     "bubble": step.bubble_fraction, "in_flight": max(step.in_flight(d) for d in range(step.devices)),
                     "tokens_per_second": MICRO_BATCHES * TOKENS / step.step_time_s})
split = run.memory[0]
print(json.dumps({
    "parameters_per_rank": parameters, "host_seconds": ended - began, "region_host_seconds": ended - region_began,
    "host_peak_bytes": peak_host_bytes(),
    "predicted_seconds": run.total_time_s, "device_busy_seconds": run.report.busy_s[0],
    "exposed_communication_seconds": run.report.exposed_communication_s, "flops": run.report.flops,
    "peak_device_bytes": run.peak_memory_bytes[0], "capacity_bytes": run.profile.memory.capacity_bytes,
    "kernels": len(run.kernels),
    "pipeline": {"stages": PIPELINE_STAGES, "micro_batches": MICRO_BATCHES, "rows": pipeline,
                 "layer_forward_seconds": one_layer.forward_s, "layer_backward_seconds": one_layer.backward_s},
}))
