"""A training step's forward and backward pass of Llama 2 7B (bf16, one sequence of 2048 tokens), built
from its transformers configuration without weights, predicted on h100-sxm without executing. Prints
JSON: the host's time and peak memory for the whole program and for the region, and the prediction.
Run by tools/bench/perf_model.py."""

import json
import time

from host_memory import peak_host_bytes

began = time.perf_counter()
import openreg_perf  # noqa: E402

openreg_perf.devices_for("h100-sxm")
import torch  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

imported = time.perf_counter()
config = LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                     num_key_value_heads=32, vocab_size=32000)
torch.openreg.set_timing_only(True)
with torch.device("openreg"):
    model = LlamaForCausalLM._from_config(config, dtype=torch.bfloat16)
tokens = torch.zeros(1, 2048, dtype=torch.long, device="openreg")
region_began = time.perf_counter()
with openreg_perf.simulate("h100-sxm", execute=False) as run:
    model(input_ids=tokens, labels=tokens).loss.backward()
ended = time.perf_counter()
split = run.memory[0]
print(json.dumps({
    "parameters": sum(p.numel() for p in model.parameters()),
    "host_seconds": ended - began, "import_host_seconds": imported - began, "region_host_seconds": ended - region_began,
    "host_peak_bytes": peak_host_bytes(),
    "predicted_seconds": run.total_time_s, "device_busy_seconds": run.report.busy_s[0],
    "hardware_flop_utilisation": run.report.hardware_flop_utilisation, "flops": run.report.flops,
    "peak_device_bytes": run.peak_memory_bytes[0], "reserved_device_bytes": split.peak_reserved,
    "parameters_bytes": split.parameters, "gradients_bytes": split.gradients,
    "capacity_bytes": run.profile.memory.capacity_bytes,
}))
