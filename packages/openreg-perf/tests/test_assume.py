"""openreg_perf.assume (Note [Assumed selections]): in timing-only mode an operator whose output size
depends on the data takes the size the user states, the run lists each assumption, and without one the
refusal says how to state it."""

from __future__ import annotations

import openreg_perf
import pytest
import torch
import torch.nn as nn


def test_every_data_dependent_selection_takes_the_stated_fraction(h100_here):
    x = torch.randn(8, 4, device="openreg")
    mask, rows = x > 0, x[:, 0] > 0
    with openreg_perf.simulate(h100_here, execute=False) as run, openreg_perf.assume(selected=0.25):
        shapes = {"nonzero": mask.nonzero().shape, "where": torch.where(mask)[1].shape,
                  "argwhere": torch.argwhere(mask).shape, "mask": x[mask].shape, "rows": x[rows].shape,
                  "masked_select": torch.masked_select(x, rows[:, None]).shape}
        x[mask] = 0.0
    assert shapes == {"nonzero": (8, 2), "where": (8,), "argwhere": (8, 2), "mask": (8,), "rows": (2, 4),
                      "masked_select": (8,)}
    # One assumption a mask: each later use of it (where, argwhere, indexing, assigning) selects as many.
    assert [(a.operator, a.candidates, a.selected) for a in run.assumptions] == [
        ("aten::nonzero", (8, 4), 8), ("aten::index", (8,), 2), ("aten::masked_select", (8, 4), 8)]
    assert "aten::nonzero selected 8 of 32 candidates (8, 4), once (openreg_perf.assume)" in run.summary()
    assert any(kernel.op == "aten::nonzero_static" for kernel in run.kernels)  # the selection is priced


def test_without_an_assumption_the_refusal_says_how_to_state_one(h100_here):
    x = torch.randn(8, 4, device="openreg")
    with pytest.raises(RuntimeError, match="output shape depends on the data") as refusal:
        with openreg_perf.simulate(h100_here, execute=False) as run:
            x[x > 0]
    assert "openreg_perf.assume(selected=FRACTION)" in "".join(refusal.value.__notes__)
    assert run.partial


@pytest.mark.parametrize("operator, call", [("aten::_unique2", torch.unique), ("aten::bincount", torch.bincount),
                                             ("aten::equal", lambda x: torch.equal(x, x))])
def test_a_data_dependent_result_assume_cannot_state_is_not_sent_to_assume(h100_here, operator, call):
    x = torch.randint(0, 4, (16,), device="openreg")
    with pytest.raises(RuntimeError, match="output shape depends on the data") as refusal:
        with openreg_perf.simulate(h100_here, execute=False):
            call(x)
    note = "".join(refusal.value.__notes__)
    assert f"{operator}'s result depends on the data in a way openreg_perf.assume cannot state" in note
    assert "selected=FRACTION" not in note


def test_an_executed_region_selects_what_its_data_selects():
    x = torch.randn(64, 4, device="openreg")
    with openreg_perf.simulate("h100-sxm") as run, openreg_perf.assume(selected=0.25):
        selected = x[x > 0]
    torch.testing.assert_close(selected.cpu(), x.cpu()[x.cpu() > 0])
    assert run.assumptions == []


class MixtureOfExperts(nn.Module):
    """Top-k routing as Mixtral writes it: each expert takes the tokens that chose it."""

    def __init__(self, width: int = 64, experts: int = 8, top_k: int = 2):
        super().__init__()
        self.router = nn.Linear(width, experts)
        self.experts = nn.ModuleList(nn.Linear(width, 4 * width) for _ in range(experts))
        self.top_k = top_k

    def forward(self, x):
        weights, chosen = self.router(x).softmax(-1).topk(self.top_k, dim=-1)
        out = torch.zeros(x.shape[0], 4 * x.shape[1], device=x.device)
        for number, expert in enumerate(self.experts):
            token, slot = torch.where(chosen == number)
            out.index_add_(0, token, expert(x[token]) * weights[token, slot, None])
        return out


def test_a_mixture_of_experts_is_predicted_with_uniform_routing(h100_here):
    layer, x = MixtureOfExperts().to("openreg"), torch.randn(256, 64, device="openreg")
    with openreg_perf.simulate(h100_here, execute=False) as run, openreg_perf.assume(selected=1 / 8):
        layer(x).sum().backward()
    # Uniform top-2 routing over 8 experts: 256 * 2 / 8 = 64 tokens for each expert, forward and backward.
    assert [a.selected for a in run.assumptions] == [64] * 8
    experts = [k.shapes for k in run.kernels if k.op == "aten::addmm" and list(k.shapes[1]) == [64, 64]]
    assert len(experts) == 8, [k.shapes for k in run.kernels if k.op == "aten::addmm"]
    assert "aten::nonzero selected 64 of 512 candidates (256, 2), 8 times" in run.summary()
    assert run.report.unknown_operators == []  # topk, nonzero_static and the indexing each have a rule


def test_transformers_mixtral_trains_in_timing_only_mode_each_operator_priced(h100_here):
    """transformers' Mixtral routes with histc and runs its experts as one _grouped_mm (no selection to
    assume): both run without values, as on CUDA, and have cost rules."""
    from transformers import MixtralConfig, MixtralForCausalLM

    config = MixtralConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                           num_attention_heads=4, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2)
    model, tokens = MixtralForCausalLM(config).to("openreg", torch.bfloat16), torch.zeros(2, 16, dtype=torch.long)
    with openreg_perf.simulate(h100_here, execute=False) as run:
        model(input_ids=tokens.to("openreg"), labels=tokens.to("openreg")).loss.backward()
    operators = {kernel.op for kernel in run.kernels}
    assert {"aten::histc", "aten::_grouped_mm"} <= operators and run.report.unknown_operators == []
    assert all(p.grad.shape == p.shape for p in model.parameters() if p.requires_grad)


def test_the_backward_pass_of_boolean_indexing_selects_what_its_forward_did(h100_here):
    """out[mask] += f(x[mask])'s backward selects the gradient's rows through the mask again: wrapped in an
    assume() of its own, whatever its fraction, each mask keeps its forward's size (another gives a
    gradient of the wrong shape); not wrapped, the refusal says to wrap it."""
    router, x = nn.Linear(32, 8).to("openreg"), torch.randn(64, 32, device="openreg", requires_grad=True)

    def routed():
        chosen, out = router(x).topk(2, dim=-1).indices, torch.zeros_like(x)
        for expert in range(8):
            mask = (chosen == expert).any(-1)
            out[mask] += x[mask] * (expert + 1)
        return out.sum()

    with openreg_perf.simulate(h100_here, execute=False) as run:
        with openreg_perf.assume(selected=2 / 8):
            loss = routed()
        with openreg_perf.assume(selected=0.5):
            loss.backward()
    assert [a.selected for a in run.assumptions] == [16] * 8 and x.grad.shape == x.shape
    with pytest.raises(RuntimeError, match="output shape depends on the data") as refusal:
        with openreg_perf.simulate(h100_here, execute=False):
            with openreg_perf.assume(selected=2 / 8):
                loss = routed()
            loss.backward()
    assert "wrap loss.backward() in assume() too" in "".join(refusal.value.__notes__)


def test_a_fraction_outside_zero_to_one_is_refused():
    with pytest.raises(ValueError, match="between 0 and 1"):
        with openreg_perf.assume(selected=1.5):
            pass
