"""A training step's forward and backward pass of Llama 2 70B (bf16, one sequence of 4096 tokens) as one
of 8 tensor-parallel ranks, predicted on h100-sxm without executing. The split is Megatron's: each rank
holds 1/8 of the attention heads, of the MLP's hidden units and of the vocabulary; an all_reduce joins
the ranks after the attention's output projection and after the MLP (and their inputs' gradients in
the backward pass), each layer's activations are recomputed in the backward pass (full recomputation),
and the loss is the vocabulary-parallel cross entropy. Every rank computes the same, so one process
(a process group of one) records rank 0, and simulate(ranks=8) prices its collectives for 8 ranks.
Prints JSON: the host's time and peak memory for the program and for the region, and the prediction.
Run by tools/bench/perf_model.py."""

import json
import resource
import time

began = time.perf_counter()
import openreg_perf  # noqa: E402

openreg_perf.devices_for("h100-sxm")
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
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
    return torch.empty(*shape, dtype=torch.bfloat16, device="openreg").requires_grad_()


def rms_norm(x, scale):
    return F.rms_norm(x, (HIDDEN,), scale)


class Layer:
    def __init__(self):
        self.norms = [torch.ones(HIDDEN, dtype=torch.bfloat16, device="openreg").requires_grad_() for _ in range(2)]
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
final_norm = torch.ones(HIDDEN, dtype=torch.bfloat16, device="openreg").requires_grad_()
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
dist.destroy_process_group()
split = run.memory[0]
print(json.dumps({
    "parameters_per_rank": parameters, "host_seconds": ended - began, "region_host_seconds": ended - region_began,
    "host_peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    "predicted_seconds": run.total_time_s, "device_busy_seconds": run.report.busy_s[0],
    "exposed_communication_seconds": run.report.exposed_communication_s, "flops": run.report.flops,
    "peak_device_bytes": run.peak_memory_bytes[0], "capacity_bytes": run.profile.memory.capacity_bytes,
    "kernels": len(run.kernels),
}))
