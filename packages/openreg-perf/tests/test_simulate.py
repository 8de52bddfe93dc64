"""simulate() on programs that run on openreg: what it captures (kernels with their operators, copies,
host waits, two devices), what it reports and exports, and the command line.
The numbers themselves are the model's (test_model.py, test_timeline.py); here, that the program's
structure reaches the prediction."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import openreg_perf
import pytest
import torch
import torch.nn as nn
from openreg_perf.model import copy_seconds

PACKAGE_ROOT = Path(__file__).resolve().parents[1]


def mlp_step():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)).to("openreg")
    optimizer = torch.optim.AdamW(model.parameters())
    x = torch.randn(32, 64, device="openreg")

    def step():
        model(x).sum().backward()
        optimizer.step()
        optimizer.zero_grad()

    step()  # warm-up: first calls of a dtype wait for their results (the executor's check)
    return step


def test_the_default_prediction_is_the_same_on_a_busy_machine():
    """A prediction depends only on the program and the profile: the same step predicted with a busy
    loop on every core beside it gives the same total time (to 0.1 %). With host="this-machine" the
    host is this machine's, and it is not (the opt-in says so)."""
    step = mlp_step()
    with openreg_perf.simulate("h100-sxm") as quiet:
        step()
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        with openreg_perf.simulate("h100-sxm") as loaded:
            step()
    finally:
        for process in busy:
            process.kill()
            process.wait()
    assert quiet.total_time_s > 0
    assert loaded.total_time_s == pytest.approx(quiet.total_time_s, rel=1e-3)
    assert loaded.predicted_again(host="this-machine").host == "this-machine"


def test_the_trace_notes_each_optimizer_step_module_and_call_python_made():
    """What the profile's [host] prices beyond launches: optimizer steps and module calls (global hooks)
    and the outermost calls, a few of every operator recorded (linear's t and addmm are inside it)."""
    step = mlp_step()
    with openreg_perf.simulate("h100-sxm") as run:
        step()
        step()
    trace = run.trace
    assert len(trace.optimizer_steps_ns) == 2 and trace.region_ns[0] < trace.optimizer_steps_ns[0]
    assert len(trace.module_calls_ns) == 2 * 4  # the Sequential and its three layers, each step
    assert 0 < len(trace.outermost_starts_ns) < len(trace.operator_starts_ns)
    assert set(trace.outermost_starts_ns) <= set(trace.operator_starts_ns)
    steps = trace.optimizer_steps_ns
    trace.optimizer_steps_ns = []  # the same region with no step priced: faster by about two
    faster = run.predicted_again().total_time_s
    trace.optimizer_steps_ns = steps
    assert run.total_time_s - faster == pytest.approx(2 * run.profile.host.optimizer_step_s, rel=0.2)


def test_a_training_step_is_predicted_kernel_by_kernel(tmp_path):
    step = mlp_step()
    with openreg_perf.simulate("h100-sxm") as run:
        step()
    ops = {kernel.op for kernel in run.kernels}
    assert {"aten::addmm", "aten::mm"} <= ops  # forward and backward matrix products
    assert all(kernel.seconds >= run.profile.chip.kernel_floor_s for kernel in run.kernels)
    addmm = next(kernel for kernel in run.kernels if kernel.op == "aten::addmm")
    assert addmm.flops == 2 * 32 * 64 * 128 + 32 * 128 and addmm.bound in ("compute", "memory", "latency")
    assert run.total_time_s >= max(kernel.start_s + kernel.seconds for kernel in run.kernels)
    assert run.peak_memory_bytes[0] > 0
    text = run.summary()
    assert "predicted on h100-sxm" in text and "datasheet roofline" in text and "aten::addmm" in text
    run.export_chrome_trace(tmp_path / "step.json")
    events = json.loads((tmp_path / "step.json").read_text())["traceEvents"]
    lanes = {event["pid"] for event in events}
    assert "predicted on h100-sxm, device 0" in lanes and "measured on openreg (simulator), device 0" in lanes
    run.plot(tmp_path / "step.svg")
    picture = (tmp_path / "step.svg").read_text()
    assert picture.startswith("<svg") and picture.count("<circle") >= 2  # kernels on the roofline


def test_the_picture_and_the_trace_mark_each_devices_default_stream(tmp_path):
    """Lanes are named by torch.openreg.Stream.stream_id, whose default stream's number differs by device:
    the reports say which lane is the default stream."""
    side = torch.openreg.Stream()
    with openreg_perf.simulate("h100-sxm") as run:
        x = torch.ones(1024, device="openreg")
        with torch.openreg.stream(side):
            (x * 2).sum()
    default = torch.openreg.default_stream(0).stream_id
    run.plot(tmp_path / "streams.svg")
    picture = (tmp_path / "streams.svg").read_text()
    assert f"device 0, stream {default} (default)" in picture
    assert f"device 0, stream {side.stream_id}<" in picture  # named, not marked
    run.export_chrome_trace(tmp_path / "streams.json")
    lanes = {event["tid"] for event in json.loads((tmp_path / "streams.json").read_text())["traceEvents"]}
    assert {f"stream {default} (default)", f"stream {side.stream_id}"} <= lanes


def test_a_summary_quotes_held_out_errors_only_where_they_were_measured():
    """The held-out errors come from accelerators' rows: a prediction for this machine's CPU (the host
    profile) says its error is not known rather than quote them."""
    step = mlp_step()
    for name, line in (("h100-sxm", "expected error     about "), ("host", "expected error     not known")):
        with openreg_perf.simulate(name) as run:
            step()
        assert line in run.summary(), name


def _model_zoo():
    """tools/bench/model_zoo.py, the benchmarks' models (transformers' BERT, GPT-2 and Llama, a ResNet-18,
    a ViT), loaded by path: it is no package."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("model_zoo", PACKAGE_ROOT.parents[1] / "tools/bench/model_zoo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_report_on_a_chip_without_measurements_names_what_stands_in_for_each_section(tmp_path):
    """The bundled server host stands in for [host], the architecture's levels for the fitted sections."""
    datasheet = Path(openreg_perf.load_profile("h100-sxm").path).read_text().split("\n[host]")[0]
    (tmp_path / "new-chip.toml").write_text(datasheet.replace('name = "h100-sxm"', 'name = "new-chip"'))
    x = torch.ones(64, 64, device="openreg")
    with openreg_perf.simulate(tmp_path / "new-chip.toml") as run:
        x @ x
    assert ("leaves out [host], [efficiency], [collectives]: used instead, [host] the bundled server host's, "
            "[efficiency] the hopper chips' defaults, [collectives] the hopper chips' defaults") in run.summary()


def test_the_summary_names_each_kernel_whole():
    """Attention's forward and backward differ only after the 48th character: both are named whole."""
    q = torch.randn(2, 4, 64, 32, device="openreg", requires_grad=True)
    with openreg_perf.simulate("h100-sxm") as run:
        nn.functional.scaled_dot_product_attention(q, q, q).sum().backward()
    lines = run.summary().splitlines()
    for name in ("aten::_scaled_dot_product_fused_attention_overrideable",
                 "aten::_scaled_dot_product_fused_attention_overrideable_backward"):
        assert any(line.split()[0] == name for line in lines), name


class DemoCNN(nn.Module):
    """tools/demo.py's CNN, its loss included, as the benchmarks' models have theirs."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                                 nn.Flatten(), nn.Linear(8 * 8 * 8, 2))

    def forward(self, images, labels):
        return nn.functional.cross_entropy(self.net(images), labels)


@pytest.mark.parametrize("name", ["demo CNN", "BERT", "GPT-2", "Llama", "ResNet-18", "ViT (tiny)"])
def test_every_operator_of_the_demos_and_benchmarks_models_has_a_cost_rule(name):
    """A training step of each: no operator is priced by the default rule."""
    zoo = _model_zoo()
    if name == "demo CNN":
        model, batch = DemoCNN(), {"images": torch.randn(32, 1, 16, 16), "labels": torch.randint(0, 2, (32,))}
    else:
        model, batch = zoo.MODELS[name]()
    model = model.to("openreg")
    batch = {key: value.to("openreg") for key, value in batch.items()}
    optimizer = torch.optim.AdamW(model.parameters())
    with openreg_perf.simulate("h100-sxm") as run:
        zoo.loss_of(model(**batch)).backward()
        optimizer.step()
    assert run.report.unknown_operators == []


def test_a_module_called_with_computed_weights_is_predicted_and_keeps_none_of_them():
    """torch.func.functional_call with computed weights (MAML's adapted ones), which accumulate no
    gradient: the memory samples neither hook them (a non-leaf refuses a post-accumulate-grad hook) nor
    keep them alive."""
    from torch.func import functional_call

    model, x = nn.Linear(64, 64).to("openreg"), torch.randn(8, 64, device="openreg")

    def adapted_step():
        fast = {name: p - 0.1 * torch.ones_like(p) for name, p in model.named_parameters()}
        functional_call(model, fast, (x,)).pow(2).mean().backward()

    adapted_step()
    before = torch.openreg.memory_allocated()
    with openreg_perf.simulate("h100-sxm") as run:
        adapted_step()
    assert not run.partial and run.total_time_s > 0
    assert torch.openreg.memory_allocated() == before


def test_kernels_replayed_from_a_graph_captured_before_the_region_are_named_as_left_out():
    """A graph's replay launches kernels no recorded operator launched (its capture recorded them): each is
    priced at the kernel floor, and the warning and the summary say so instead of a silent 500x too fast."""
    a = torch.randn(256, 256, device="openreg")
    (a @ a).sum()  # the first calls of a dtype run synchronously, which a capture refuses
    torch.openreg.synchronize()
    graph = torch.accelerator.Graph()
    with torch.Stream(device="openreg"), graph:
        (a @ a) @ a
    with pytest.warns(RuntimeWarning, match=r"no operator recorded for 2 kernels \(aten::mm x2\), priced at the"):
        with openreg_perf.simulate("h100-sxm") as run:
            graph.replay()
            torch.openreg.synchronize()
    assert run.report.without_operator == {"aten::mm": 2}
    assert "no operator for    2 kernels (aten::mm x2)" in run.summary()


def test_the_copies_the_simulator_makes_for_itself_are_left_out():
    """nonzero runs synchronously on openreg: its kernel computes on the host and the simulator copies the result
    over (torch.openreg.SIMULATOR_TRANSFER), which a real device does not; the prediction keeps the kernel only."""
    x = torch.randn(256, device="openreg")
    with openreg_perf.simulate("h100-sxm") as run:
        torch.nonzero(x)
    assert [kernel.op for kernel in run.kernels] == ["aten::nonzero"]
    assert run.trace.simulator_transfers == 1
    assert [wait.name for wait in run.trace.waits] == ["orStreamSynchronize"]  # as on CUDA: the size is the data's
    assert "left out           1 copies the simulator made for itself and 1 host waits" in run.summary()


FIRST_CALL = """
import torch, openreg_perf
x = torch.randn(64, device="openreg", dtype=torch.float64)
torch.openreg.synchronize()
for _ in range(2):
    with openreg_perf.simulate("h100-sxm") as run:
        torch.atan2(x, x)
    print(len(run.trace.waits), run.trace.simulator_waits, run.total_time_s)
"""


def test_the_executors_check_of_a_first_call_is_no_wait_of_the_prediction():
    """A first call with new dtypes waits on openreg while the executor checks it against its Meta kernel,
    where a real device queues it and goes on: the prediction leaves that wait (and its copy's) out, and
    predicts the first call as the second. In a fresh process, so that the first call is one."""
    done = subprocess.run([sys.executable, "-c", FIRST_CALL], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    first, second = (line.split() for line in done.stdout.splitlines())
    assert (first[:2], second[:2]) == (["0", "2"], ["0", "0"])
    assert float(first[2]) == pytest.approx(float(second[2]), rel=1e-9)


def test_a_host_synchronisation_waits_for_the_predicted_work():
    a = torch.randn(1024, 1024, device="openreg")
    with openreg_perf.simulate("a100-sxm-80gb") as run:
        b = a @ a
        total = b.sum().item()  # the host waits for the work before it
        c = a @ a
    assert isinstance(total, float) and c.shape == (1024, 1024)
    (wait,) = [w for w in run.timeline.waits if w.wait.name == "memcpyDtoH wait"]
    first_mm = next(item for item in run.timeline.items if item.work.op and item.work.op.name == "aten::mm")
    copy = next(item for item in run.timeline.items if item.category == "copy")
    # The host resumes when the copy ends, after the target host's synchronisation cost.
    assert wait.end_s == pytest.approx(copy.end_s + run.profile.host.synchronize_s) and copy.start_s >= first_mm.end_s
    second_mm = [item for item in run.timeline.items if item.work.op and item.work.op.name == "aten::mm"][1]
    assert second_mm.start_s >= wait.end_s  # queued after the host resumed
    # The recording noted what each call returned.
    assert first_mm.work.op.output_shapes == [[1024, 1024]] and first_mm.work.op.output_dtypes == ["float"]


def test_a_region_across_two_devices_keeps_their_streams_apart():
    x0, x1 = torch.randn(512, 512, device="openreg:0"), torch.randn(512, 512, device="openreg:1")
    with openreg_perf.simulate("h100-sxm") as run:
        y0, y1 = x0 @ x0, x1 @ x1
        moved = y1.to("openreg:0")
    assert {kernel.device for kernel in run.kernels} == {0, 1}
    assert set(run.report.busy_s) == {0, 1}
    (copy,) = [kernel for kernel in run.kernels if kernel.category == "copy"]
    # Between devices: over the device link, not through one device's memory.
    h100 = openreg_perf.load_profile("h100-sxm")
    assert copy.name == "memcpyPtoP"
    assert copy.seconds == pytest.approx(copy_seconds(512 * 512 * 4, "p2p", True, h100))
    # The report measures it against the peer link's datasheet rate (it said 0.0 %).
    assert copy.achieved_fraction == pytest.approx(512 * 512 * 4 / copy.seconds / h100.links.device_link_bytes_per_s)
    del y0, moved


def _predicted_kernel(fn, profile):
    fn()
    with openreg_perf.simulate(profile) as run:
        fn()
    (kernel,) = [kernel for kernel in run.kernels if kernel.category == "compute"]
    return kernel


def test_a_channels_last_convolution_skips_the_layout_conversions():
    """Note [Layout conversions] in model.py: the recording notes the layout, and the BF16 convolution of
    NCHW tensors pays for converting them."""
    from openreg_perf import capture
    from openreg_perf.costs import cost_of
    from openreg_perf.model import layout_conversion_seconds

    h100 = openreg_perf.load_profile("h100-sxm")
    image = torch.randn(8, 64, 28, 28, device="openreg", dtype=torch.bfloat16)
    weight = torch.randn(64, 64, 3, 3, device="openreg", dtype=torch.bfloat16)
    last = image.to(memory_format=torch.channels_last), weight.to(memory_format=torch.channels_last)
    nchw = _predicted_kernel(lambda: torch.nn.functional.conv2d(image, weight), h100)
    channels_last = _predicted_kernel(lambda: torch.nn.functional.conv2d(*last), h100)
    with capture.record() as trace:
        torch.nn.functional.conv2d(image, weight)
        torch.nn.functional.conv2d(*last)
    calls = [work.op for work in trace.work if work.op is not None and "conv" in work.op.name]
    assert [call.channels_last for call in calls] == [False, True]
    assert cost_of(calls[1]).layout_copies == () and len(cost_of(calls[0]).layout_copies) == 3
    converting = layout_conversion_seconds(cost_of(calls[0]), None, h100)
    assert converting > 0 and nchw.seconds == pytest.approx(channels_last.seconds + converting)


def test_fp32_matrix_products_use_tf32_where_pytorch_s_flags_allow_it():
    a = torch.randn(2048, 2048, device="openreg")
    h100 = openreg_perf.load_profile("h100-sxm")
    matmul = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False  # PyTorch's default: FP32 on the FP32 units
        fp32 = _predicted_kernel(lambda: a @ a, h100)
        torch.backends.cuda.matmul.allow_tf32 = True  # as set_float32_matmul_precision("high")
        tf32 = _predicted_kernel(lambda: a @ a, h100)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = matmul
    image, weight = torch.randn(32, 64, 56, 56, device="openreg"), torch.randn(64, 64, 3, 3, device="openreg")
    convolution = lambda: torch.nn.functional.conv2d(image, weight)  # noqa: E731
    # cudnn's flags through their context manager: PyTorch's test utilities,
    # once imported, forbid setting them directly.
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=True):  # PyTorch's default for convolutions
        conv_tf32 = _predicted_kernel(convolution, h100)
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        conv_fp32 = _predicted_kernel(convolution, h100)
    efficiency = h100.efficiency
    rates = (h100.peak.tf32_flops_per_s * efficiency.gemm_tf32_fraction) / (
        h100.peak.fp32_flops_per_s * efficiency.gemm_fp32_fraction)
    # Faster by the ratio of the rates each precision reaches, less what the fixed costs (setup, kernel
    # floor) and the tile each picks take of it.
    assert rates / 2 < fp32.seconds / tf32.seconds <= rates * 1.01
    # This small convolution's operands take a third of its TF32 time: less of the gain shows.
    assert rates / 3 < conv_fp32.seconds / conv_tf32.seconds <= rates * 1.01


def test_an_fp8_product_runs_on_openreg_and_is_priced_on_the_fp8_units():
    """torch._scaled_mm, which FP8 training (torchao's float8) calls for every linear layer: it runs on
    openreg, and the prediction prices it at the FP8 rate, twice the BF16 one on an H100."""
    h100 = openreg_perf.load_profile("h100-sxm")
    x = torch.randn(4096, 4096, device="openreg").to(torch.float8_e4m3fn)
    w = torch.randn(4096, 4096, device="openreg").to(torch.float8_e4m3fn).t()  # column-major, as CUDA's needs
    one = torch.ones((), device="openreg")
    fp8 = _predicted_kernel(lambda: torch._scaled_mm(x, w, one, one, out_dtype=torch.bfloat16), h100)
    a, b = x.to(torch.bfloat16), w.to(torch.bfloat16)
    bf16 = _predicted_kernel(lambda: a @ b, h100)
    assert (fp8.op, fp8.precision, fp8.known) == ("aten::_scaled_mm", "fp8", True)
    assert 1.5 < bf16.seconds / fp8.seconds <= 2.1


def test_the_command_line_runs_a_script_and_prints_its_report(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import sys, torch
        model = torch.nn.Linear(16, 4).to("openreg")
        model(torch.randn(8, 16, device="openreg")).sum().backward()
        print("script ran with", sys.argv[1:])
    """))
    env = {k: v for k, v in os.environ.items() if k != "TORCH_DEVICE_BACKEND_AUTOLOAD"}
    result = subprocess.run([sys.executable, "-m", "openreg_perf", "run", "--profile", "h100-sxm", "--plot",
                             str(tmp_path / "p.svg"), str(script), "--flag"], capture_output=True, text=True,
                            timeout=120, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "script ran with ['--flag']" in result.stdout
    assert "predicted on h100-sxm" in result.stdout and "aten::addmm" in result.stdout
    assert (tmp_path / "p.svg").exists()
    listing = subprocess.run([sys.executable, "-m", "openreg_perf", "profiles"], capture_output=True, text=True,
                             timeout=60, env=env, cwd=tmp_path)
    assert all(name in listing.stdout for name in ("a100-sxm-40gb", "a100-sxm-80gb", "h100-sxm", "h200", "mi300x"))


# ----------------------------------------------------------------------------------- memory


def adam_step(model: nn.Module, x: torch.Tensor):
    optimizer = torch.optim.Adam(model.parameters(), foreach=False)

    def step():
        model(x).sum().backward()
        optimizer.step()

    return step


def parameter_bytes(*shapes) -> int:
    return 4 * sum(torch.Size(shape).numel() for shape in shapes)


def test_an_mlp_step_with_adam_splits_its_memory_as_counted_by_hand():
    # Every tensor a multiple of 512 bytes, the allocator's rounding: counts are exact.
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 128)).to("openreg")
    step = adam_step(model, torch.randn(64, 256, device="openreg"))
    weights = parameter_bytes((512, 256), (512,), (128, 512), (128,))
    with openreg_perf.simulate("h100-sxm") as run:
        step()
    split = run.memory[0]
    # The busiest moment is the end of the step: weights, their gradients, and Adam's exp_avg and
    # exp_avg_sq (its step counters live on the CPU), beside the input.
    assert split.parameters == weights and split.gradients == weights and split.optimizer_state == 2 * weights
    assert split.activations >= 64 * 256 * 4  # the input, at least
    assert split.peak_allocated >= split.sampled == weights * 4 + split.activations
    assert "optimizer state" in run.summary()


def test_optimizer_state_from_an_earlier_step_counts_as_such_at_a_peak_before_the_step():
    # Large activations: the busiest moment is in the backward pass, before the optimizer is seen
    # in the region; its state, made by the step before the region, was there all along.
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 128)).to("openreg")
    step = adam_step(model, torch.randn(4096, 256, device="openreg"))
    weights = parameter_bytes((512, 256), (512,), (128, 512), (128,))
    step()
    with openreg_perf.simulate("h100-sxm") as run:
        step()
    split = run.memory[0]
    assert split.parameters == weights and split.optimizer_state == 2 * weights
    assert split.activations >= 4096 * (256 + 512) * 4  # the input and the hidden layer, at least
    assert split.sampled == split.parameters + split.gradients + split.optimizer_state + split.activations


def test_a_transformer_layer_with_adam_splits_its_memory_as_counted_by_hand():
    d, heads, hidden = 64, 4, 128
    layer = nn.TransformerEncoderLayer(d, heads, hidden, dropout=0.0, batch_first=True).to("openreg")
    step = adam_step(layer, torch.randn(1, 4, d, device="openreg"))  # few activations: Adam's state peaks
    weights = parameter_bytes((3 * d, d), (3 * d,),  # attention's input projection
                              (d, d), (d,),  # its output projection
                              (hidden, d), (hidden,), (d, hidden), (d,),  # the feed-forward block
                              (d,), (d,), (d,), (d,))  # two layer norms
    with openreg_perf.simulate("h100-sxm") as run:
        step()
    split = run.memory[0]
    assert split.parameters == weights and split.optimizer_state == 2 * weights
    assert split.gradients == weights


# ---------------------------------------------------------------------------- without executing

TIMING_ONLY_7B = """
import json, resource, openreg_perf
openreg_perf.devices_for("h100-sxm")  # 80 GiB devices, before torch starts the runtime
import torch
from transformers import LlamaConfig, LlamaForCausalLM

config = LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                     num_key_value_heads=32, vocab_size=32000)  # Llama 2 7B
torch.openreg.set_timing_only(True)  # the model is built on the device, never computed
with torch.device("openreg"):
    model = LlamaForCausalLM._from_config(config, dtype=torch.bfloat16)
    ids = torch.zeros(1, 512, dtype=torch.long)
with openreg_perf.simulate("h100-sxm", execute=False) as run:
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    logged = loss.item()  # a training loop's log line: NaN stands for the value never computed
try:
    model(input_ids=ids).logits.argmax(-1)[0, -1].item()  # a token id: nothing can stand in for it
except RuntimeError as error:
    refusal = str(error)
with open("/proc/meminfo") as meminfo:
    machine = int(meminfo.readline().split()[1]) * 1024
print(json.dumps({"parameters": sum(p.numel() for p in model.parameters()), "peak": run.peak_memory_bytes[0],
                  "split": [run.memory[0].parameters, run.memory[0].gradients], "time": run.total_time_s,
                  "machine": machine, "host_peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "refusal": refusal, "logged": str(logged), "reads": run.values_read_as_nan}))
"""


def test_a_7b_model_larger_than_this_machine_runs_forward_and_backward_without_executing():
    env = {k: v for k, v in os.environ.items() if k not in ("TORCH_DEVICE_BACKEND_AUTOLOAD", "OPENREG_DEVICE_MEMORY")}
    result = subprocess.run([sys.executable, "-c", TIMING_ONLY_7B], capture_output=True, text=True, timeout=300,
                            env=env)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert 6.7e9 < found["parameters"] < 6.8e9
    bf16 = 2 * found["parameters"]
    assert found["split"] == [bf16, bf16]  # weights and their gradients, at the busiest moment
    assert found["peak"] > found["machine"]  # the step needs more memory than this machine has
    assert found["host_peak"] < 3 * 2**30  # of which the host holds none
    assert found["time"] > 0
    assert "aten::_local_scalar_dense" in found["refusal"] and "timing-only mode" in found["refusal"]
    assert (found["logged"], found["reads"]) == ("nan", 1)


def test_without_executing_the_same_kernels_take_the_same_predicted_time(h100_here):
    step = mlp_step()
    runs = {}
    for execute in (True, False):
        with openreg_perf.simulate(h100_here, execute=execute, host="launches") as run:
            step()
        runs[execute] = run
    executed, skipped = runs[True], runs[False]
    key = lambda k: (k.name, k.op, k.shapes, k.dtypes, k.stream)  # noqa: E731
    assert [key(k) for k in executed.kernels] == [key(k) for k in skipped.kernels]
    assert skipped.total_time_s == pytest.approx(executed.total_time_s)
    assert not torch.openreg.is_timing_only()  # simulate() switched it back


def test_predicting_without_executing_needs_devices_of_the_profiles_capacity():
    with pytest.raises(RuntimeError, match=r"needs openreg devices of its capacity.*devices_for\('h100-sxm'\)"):
        with openreg_perf.simulate("h100-sxm", execute=False):
            pass


def test_a_compiled_region_is_priced_by_inductors_fused_kernels():
    """torch.compile fuses gelu(x * 2 + 1) into one kernel that reads x and writes the result once:
    the prediction prices that kernel (torch-openreg describes each launch with its buffers), not the
    three eager operators, and not a bare kernel floor."""
    x = torch.randn(1 << 22, device="openreg")  # 32 MiB moved: well above a kernel floor
    compiled = torch.compile(lambda t: torch.nn.functional.gelu(t * 2 + 1))
    compiled(x)
    with openreg_perf.simulate("h100-sxm", host="launches") as run:
        compiled(x)
    (kernel,) = [k for k in run.kernels if k.category == "compute"]
    assert kernel.op.startswith("cpp_fused_") and kernel.known
    assert kernel.bytes == 2 * x.numel() * 4
    assert kernel.seconds > 2 * run.profile.chip.kernel_floor_s
