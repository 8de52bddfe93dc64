"""Real models: BERT, GPT-2 and Llama from `transformers` (small configs,
random weights, nothing downloaded) train on openreg as on the CPU, step by
step, with no operator leaving the device (the CPU fallback in error mode).
And CPU work in a process that used openreg computes what it computed
before: the same bits, with the same number of threads."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
)

VOCAB, BATCH, TOKENS = 64, 2, 12


def bert():
    config = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, num_labels=3, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    return BertForSequenceClassification(config), torch.randint(0, 3, (BATCH,))


def gpt2():
    config = GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=2, n_positions=32, resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(config), None


def llama():
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32, bos_token_id=0,
                         eos_token_id=0)
    return LlamaForCausalLM(config), None


MODELS = {"bert": bert, "gpt2": gpt2, "llama": llama}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_transformers_model_trains_like_the_cpu(name):
    torch.openreg.set_fallback_mode("error")  # the autouse fixture restores the previous mode
    torch.manual_seed(0)
    cpu_model, labels = MODELS[name]()
    device_model = copy.deepcopy(cpu_model).to("openreg")
    models = {"cpu": cpu_model, "openreg": device_model}
    optimizers = {device: torch.optim.SGD(model.parameters(), lr=0.1) for device, model in models.items()}
    for _ in range(3):
        ids = torch.randint(0, VOCAB, (BATCH, TOKENS))
        losses = {}
        for device, model in models.items():
            optimizers[device].zero_grad()
            target = ids if labels is None else labels
            loss = model(input_ids=ids.to(device), labels=target.to(device)).loss
            loss.backward()
            optimizers[device].step()
            losses[device] = loss.item()
        assert losses["openreg"] == pytest.approx(losses["cpu"], rel=1e-4, abs=1e-5)
    for (pname, expected), actual in zip(cpu_model.named_parameters(), device_model.parameters(), strict=True):
        assert actual.device.type == "openreg"
        torch.testing.assert_close(actual.detach().cpu(), expected.detach(), rtol=1e-3, atol=1e-4,
                                   msg=lambda m, pname=pname: f"{pname}: {m}")


# Large enough that the CPU splits every one of these across its threads,
# where a different thread count would round the reductions differently.
CPU_WORK_BEFORE_AND_AFTER_OPENREG = """
import json
import torch
import torch.nn.functional as F

torch.manual_seed(0)
a, image, weight = torch.randn(1024, 1024), torch.randn(4, 3, 64, 64), torch.randn(8, 3, 3, 3)

def cpu_work():
    return [a + a, a @ a, a.sum(), a.sum(0), torch.softmax(a, -1), F.conv2d(image, weight), F.layer_norm(a, (1024,))]

before, threads_before = cpu_work(), torch.get_num_threads()
z = a.to("openreg")
(z + z).cpu(), (z @ z).cpu(), z.sum().item(), torch.softmax(z, -1).cpu()
torch.openreg.synchronize()
after = cpu_work()
print(json.dumps({"identical": [torch.equal(x, y) for x, y in zip(before, after)],
                  "threads": [threads_before, torch.get_num_threads()]}))
"""


def test_cpu_work_after_openreg_work_is_bit_identical(python):
    facts = python.json(CPU_WORK_BEFORE_AND_AFTER_OPENREG)
    assert facts["identical"] == [True] * 7
    assert facts["threads"][0] == facts["threads"][1]
