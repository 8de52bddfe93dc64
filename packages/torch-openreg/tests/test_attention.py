"""scaled_dot_product_attention on openreg: the fused "overrideable" path
(forward and backward) and PyTorch's math path, against the CPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode


def run(device, q, k, v, **kwargs):
    leaves = [t.to(device).detach().requires_grad_() for t in (q, k, v)]
    mask = kwargs.pop("attn_mask", None)
    if mask is not None:
        mask = mask.to(device)
    out = F.scaled_dot_product_attention(*leaves, attn_mask=mask, **kwargs)
    (out * out.detach().sin()).sum().backward()
    return [out.detach().cpu()] + [leaf.grad.cpu() for leaf in leaves]


CASES = {
    "plain": {},
    "causal": {"is_causal": True},
    "float_mask": {"attn_mask": torch.randn(5, 7)},
    "scale": {"scale": 0.3},
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fused_attention_matches_cpu(name):
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 8)
    if name == "causal":
        k, v = k[:, :, :5], v[:, :, :5]
    kwargs = dict(CASES[name])
    mask = kwargs.get("attn_mask")
    choice = torch._fused_sdp_choice(q.to("openreg"), k.to("openreg"), v.to("openreg"),
                                     mask.to("openreg") if mask is not None else None)
    assert choice == SDPBackend.OVERRIDEABLE.value
    expected = run("cpu", q, k, v, **dict(kwargs))
    actual = run("openreg", q, k, v, **dict(kwargs))
    for got, want in zip(actual, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


class RecordAtenCalls(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(func.__name__)
        return func(*args, **(kwargs or {}))


def test_fused_path_is_the_one_taken():
    # The math path runs softmax; the fused one works from log-sum-exp.
    q = torch.randn(1, 2, 4, 8, device="openreg")
    torch.openreg.reset_fallback_counts()
    with RecordAtenCalls() as fused:
        F.scaled_dot_product_attention(q, q, q)
    assert "_scaled_dot_product_fused_attention_overrideable.default" in fused.names
    assert not any("softmax" in name for name in fused.names)
    assert not torch.openreg.fallback_counts()
    with sdpa_kernel([SDPBackend.MATH]), RecordAtenCalls() as math:
        F.scaled_dot_product_attention(q, q, q)
    assert any("softmax" in name for name in math.names)


def test_each_pass_of_the_fused_path_is_one_kernel():
    # As a GPU's fused attention: the scores never reach device memory, and a
    # trace (the profiler, openreg-perf) shows one attention kernel per pass.
    q = torch.randn(2, 3, 16, 8, device="openreg", requires_grad=True)
    torch.openreg.synchronize()
    with torch.openreg.record_activity() as forward:
        out = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    with torch.openreg.record_activity() as backward:
        (grad,) = torch.autograd.grad(out, q, torch.ones_like(out))
    kernels = [[r.name for r in recording.activity if r.kind == "kernel"] for recording in (forward, backward)]
    assert kernels[0] == ["scaled_dot_product_fused_attention"]
    assert "scaled_dot_product_fused_attention_backward" in kernels[1]
    assert not any("bmm" in name or "softmax" in name for names in kernels for name in names)


@pytest.mark.parametrize("is_causal", [False, True])
def test_grouped_query_attention_takes_the_fused_path_and_matches_cpu(is_causal):
    # enable_gqa: 6 query heads share 2 key and value heads, 3 each, as Llama's and Mistral's do; the
    # gradients of a shared head are the sums over its group.
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 6, 5, 8), torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8)
    qo, ko, vo = q.to("openreg"), k.to("openreg"), v.to("openreg")
    assert torch._fused_sdp_choice(qo, ko, vo, enable_gqa=True) == SDPBackend.OVERRIDEABLE.value
    with RecordAtenCalls() as calls:
        run("openreg", q, k, v, is_causal=is_causal, enable_gqa=True)
    assert "_scaled_dot_product_fused_attention_overrideable_backward.default" in calls.names
    assert not any("softmax" in name for name in calls.names)
    expected = run("cpu", q, k, v, is_causal=is_causal, enable_gqa=True)
    actual = run("openreg", q, k, v, is_causal=is_causal, enable_gqa=True)
    for got, want in zip(actual, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_unequal_heads_without_enable_gqa_are_refused_as_on_the_cpu():
    q, k = torch.randn(1, 4, 3, 8), torch.randn(1, 2, 3, 8)
    qo, ko = q.to("openreg"), k.to("openreg")
    assert torch._fused_sdp_choice(qo, ko, ko) == SDPBackend.MATH.value
    with pytest.raises(RuntimeError) as cpu:
        F.scaled_dot_product_attention(q, k, k)
    with pytest.raises(RuntimeError) as device:
        F.scaled_dot_product_attention(qo, ko, ko)
    assert str(device.value).splitlines()[0] == str(cpu.value).splitlines()[0]


def test_dropout_and_bool_masks_use_the_math_path_and_match_shapes():
    q = torch.randn(1, 2, 4, 8)
    qo = q.to("openreg")
    assert torch._fused_sdp_choice(qo, qo, qo, None, 0.1) == SDPBackend.MATH.value
    mask = torch.ones(4, 4, dtype=torch.bool).tril()
    assert torch._fused_sdp_choice(qo, qo, qo, mask.to("openreg")) == SDPBackend.MATH.value
    torch.testing.assert_close(
        F.scaled_dot_product_attention(qo, qo, qo, attn_mask=mask.to("openreg")).cpu(),
        F.scaled_dot_product_attention(q, q, q, attn_mask=mask))


def test_math_backend_can_be_forced():
    q = torch.randn(1, 2, 4, 8)
    with sdpa_kernel([SDPBackend.MATH]):
        result = F.scaled_dot_product_attention(q.to("openreg"), q.to("openreg"), q.to("openreg"))
    torch.testing.assert_close(result.cpu(), F.scaled_dot_product_attention(q, q, q))
