#!/usr/bin/env python3
"""Measure a real GPU as openreg-perf models it: kernels, copies and launch overhead, into one CSV.

Plain PyTorch on a CUDA device, no OpenReg build: what no datasheet gives the performance model. The
output has the columns of tools/bench/perf_calibration.csv (workload, config, precision, hardware,
metric, value, unit, source) plus the spread of the samples, one row per figure:

  launch    back-to-back launches of a one-element kernel as PyTorch issues them (the device's launch
            floor when the host keeps up), the same kernels replayed from a CUDA graph, the host's round
            trip of a synchronisation, and an operator plus its synchronisation end to end
  gemm      torch.matmul in FP16, BF16, TF32 and FP32 over square, tall, wide and skinny shapes (wave
            quantisation included: sizes just past a tile), and FP8 through torch._scaled_mm
  kernels   elementwise, reduction, softmax, layer norm and cast kernels from 1K to 256M elements in
            FP32 and BF16: back to back in eager mode, and replayed from a graph up to 4M elements
            (their device time without the launch gaps)
  copies    host to device and back, pinned and pageable, and device to device, 4 KiB to 1 GiB
  layers    convolutions of ResNet-50's shapes, scaled dot-product attention, embedding, cross entropy
            and a fused AdamW step
  steps     training steps of tools/bench/torch_ops.py's and model_zoo.py's models (launch-bound at their
            sizes) and of GPT-2 small in BF16 (compute-bound), eager

Device time comes from CUDA events around a batch of calls, a sample lasting about 10 ms; each figure
is the median of 5 samples after a warm-up, on random data (never zeros). Sections run in the order
above until --budget-s is spent; the CSV is written row by row, so a run cut short keeps what it
measured. --device cpu runs the same code with host timers (to check the script without a GPU).

    python3 tools/bench/gpu_calibration.py --output OUT.csv [--budget-s 330] [--device cuda|cpu]
"""

import argparse
import csv
import datetime
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))  # torch_ops and model_zoo: plain PyTorch models

SAMPLE_SECONDS = 0.010
SAMPLES = 5
GRAPH_MAX_ELEMENTS = 1 << 22


class Timer:
    """Seconds per call of fn: CUDA events on a GPU, the host clock (after a synchronisation) elsewhere."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.cuda = device == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def batch(self, fn, calls: int) -> float:
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3 / calls
        began = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - began) / calls

    def per_call(self, fn, max_calls: int = 2000) -> tuple[float, list[float]]:
        """Median seconds per call over SAMPLES samples of about SAMPLE_SECONDS, and the samples."""
        fn()
        self.sync()
        once = self.batch(fn, 1)
        calls = max(1, min(max_calls, round(SAMPLE_SECONDS / max(once, 1e-7))))
        self.batch(fn, calls)  # warm-up at the sample's length (clocks up, caches and allocator settled)
        samples = [self.batch(fn, calls) for _ in range(SAMPLES)]
        return statistics.median(samples), samples

    def graph_per_call(self, fn, kernels_per_graph: int = 100) -> tuple[float, list[float]]:
        """Median seconds per call of fn replayed from a CUDA graph of kernels_per_graph calls."""
        for _ in range(3):  # warm up on a side stream, as graph capture requires
            fn()
        self.sync()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(kernels_per_graph):
                fn()
        seconds, samples = self.per_call(graph.replay, max_calls=200)
        del graph
        return seconds / kernels_per_graph, [s / kernels_per_graph for s in samples]


class Rows:
    """The CSV, written and flushed row by row."""

    FIELDS = ("workload", "config", "precision", "hardware", "metric", "value", "unit", "source", "samples",
              "spread")

    def __init__(self, path: Path, hardware: str, source: str, header: list[str]) -> None:
        self.file = open(path, "w", newline="")
        for line in header:
            self.file.write(f"# {line}\n")
        self.writer = csv.DictWriter(self.file, self.FIELDS)
        self.writer.writeheader()
        self.hardware, self.source, self.count = hardware, source, 0

    def add(self, workload: str, config: str, precision: str, seconds: float, samples: list[float],
            metric: str = "device time", unit: str = "us") -> None:
        scale = {"us": 1e6, "ms": 1e3}[unit]
        spread = f"{min(samples) * scale:.4g}-{max(samples) * scale:.4g}"
        self.writer.writerow(dict(workload=workload, config=config, precision=precision, hardware=self.hardware,
                                  metric=metric, value=f"{seconds * scale:.4g}", unit=unit, source=self.source,
                                  samples=len(samples), spread=spread))
        self.file.flush()
        self.count += 1
        print(f"  {workload:<40} {config:<44} {precision:<9} {seconds * scale:>10.4g} {unit}", flush=True)

    def note(self, text: str) -> None:
        self.file.write(f"# {text}\n")
        self.file.flush()
        print(f"  note: {text}", flush=True)


DTYPES = {"FP32": torch.float32, "TF32": torch.float32, "FP16": torch.float16, "BF16": torch.bfloat16}


def randn(*shape, dtype=torch.float32, device="cuda") -> torch.Tensor:
    return torch.randn(*shape, device=device).to(dtype)


# ------------------------------------------------------------------------------------------ sections

def launch(rows: Rows, timer: Timer) -> None:
    device = timer.device
    a, b, out = randn(1, device=device), randn(1, device=device), torch.empty(1, device=device)
    add = lambda: torch.add(a, b, out=out)  # noqa: E731
    seconds, samples = timer.per_call(add)
    rows.add("launch: one-element add, back to back", "eager, out=, events around 1 sample", "FP32", seconds, samples)
    seconds, samples = timer.per_call(lambda: a + b)
    rows.add("launch: one-element add, back to back", "eager, allocating its output", "FP32", seconds, samples)
    if timer.cuda:
        seconds, samples = timer.graph_per_call(add)
        rows.add("launch: one-element add, graph replay", "100 kernels per graph", "FP32", seconds, samples)

    def host_seconds(fn, calls: int = 200) -> tuple[float, list[float]]:
        taken = []
        for _ in range(calls):
            began = time.perf_counter()
            fn()
            taken.append(time.perf_counter() - began)
        return statistics.median(taken), taken

    seconds, spread = host_seconds(timer.sync)
    rows.add("host: synchronize an idle device", "time.perf_counter, median of 200", "n/a", seconds, spread,
             metric="host time")
    seconds, spread = host_seconds(lambda: (add(), timer.sync()))
    rows.add("host: one-element add then synchronize", "time.perf_counter, median of 200", "FP32", seconds, spread,
             metric="host time")
    m1, m2 = randn(64, 64, device=device), randn(64, 64, device=device)
    seconds, spread = host_seconds(lambda: (m1 @ m2, timer.sync()))
    rows.add("host: 64x64 matmul then synchronize", "time.perf_counter, median of 200", "FP32", seconds, spread,
             metric="host time")
    seconds, spread = host_seconds(lambda: a.item())
    rows.add("host: item() of a one-element tensor", "time.perf_counter, median of 200", "FP32", seconds, spread,
             metric="host time")


GEMM_SHAPES = (
    [(n, n, n) for n in (128, 256, 512, 1024, 2048, 4096, 8192)]
    + [(m, 12288, 12288) for m in (64, 256, 1024, 4096, 16384)]  # the published A100 rows' shapes
    + [(8192, n, n) for n in (64, 256, 1024, 4096, 16384)]
    + [(m, 4096, 4096) for m in (1, 8, 32)]  # decoding
    + [(n, n, n) for n in (4000, 4224, 6144)]  # just under and past a 128 tile's wave
    + [(2048, 13312, 2048), (1024, 5120, 10240)]  # mamf-finder's best H100 / A100 shapes, M x K x N
)


def gemm(rows: Rows, timer: Timer) -> None:
    device = timer.device
    for precision in ("BF16", "FP16", "TF32", "FP32"):
        torch.backends.cuda.matmul.allow_tf32 = precision == "TF32"
        shapes = GEMM_SHAPES if precision in ("BF16", "FP16") else [s for s in GEMM_SHAPES if s[0] == s[1] == s[2]]
        for m, k, n in shapes:
            if device == "cpu" and m * k * n > 1 << 27:
                continue
            x, w = randn(m, k, dtype=DTYPES[precision], device=device), randn(k, n, dtype=DTYPES[precision], device=device)
            seconds, samples = timer.per_call(lambda: x @ w)
            rows.add("GEMM torch.matmul", f"M={m} K={k} N={n}", precision, seconds, samples)
            rows.note(f"GEMM M={m} K={k} N={n} {precision}: {2 * m * k * n / seconds / 1e12:.1f} TFLOP/s")
            del x, w
    torch.backends.cuda.matmul.allow_tf32 = False
    if not timer.cuda:
        return
    for m, k, n in [(1024, 1024, 1024), (4096, 4096, 4096), (8192, 8192, 8192), (1024, 14336, 9216)]:
        x = randn(m, k, device=device).to(torch.float8_e4m3fn)
        w = randn(n, k, device=device).to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm wants
        one = torch.ones((), device=device)
        seconds, samples = timer.per_call(lambda: torch._scaled_mm(x, w, one, one, out_dtype=torch.bfloat16))
        rows.add("GEMM torch._scaled_mm", f"M={m} K={k} N={n}", "FP8 e4m3", seconds, samples)
        rows.note(f"FP8 M={m} K={k} N={n}: {2 * m * k * n / seconds / 1e12:.1f} TFLOP/s")


def elementwise_cases(elements: int, dtype, device: str) -> dict:
    x, y = randn(elements, dtype=dtype, device=device), randn(elements, dtype=dtype, device=device)
    out = torch.empty_like(x)
    rows_of_1024 = x.view(-1, 1024) if elements >= 1024 else x.view(1, -1)
    norm_shape = rows_of_1024.shape[-1:]
    other = torch.bfloat16 if dtype == torch.float32 else torch.float32
    return {
        "copy (out.copy_)": lambda: out.copy_(x),
        "add (out=)": lambda: torch.add(x, y, out=out),
        "mul by a scalar": lambda: x * 1.5,
        "relu": lambda: torch.relu(x),
        "gelu": lambda: F.gelu(x),
        "exp": lambda: torch.exp(x),
        "sum (all)": lambda: x.sum(),
        "sum over rows of 1024": lambda: rows_of_1024.sum(-1),
        "softmax over rows of 1024": lambda: torch.softmax(rows_of_1024, -1),
        "layer_norm over rows of 1024": lambda: F.layer_norm(rows_of_1024, norm_shape),
        f"cast to {str(other).split('.')[-1]}": lambda: x.to(other),
    }


def kernels(rows: Rows, timer: Timer) -> None:
    device = timer.device
    for precision, dtype in (("FP32", torch.float32), ("BF16", torch.bfloat16)):
        for log2 in range(10, 29, 2):
            if device == "cpu" and log2 > 20:
                continue
            elements = 1 << log2
            for name, fn in elementwise_cases(elements, dtype, device).items():
                seconds, samples = timer.per_call(fn)
                rows.add(f"kernel: {name}", f"{elements} elements, eager back to back", precision, seconds, samples)
                if timer.cuda and elements <= GRAPH_MAX_ELEMENTS:
                    seconds, samples = timer.graph_per_call(fn)
                    rows.add(f"kernel: {name}", f"{elements} elements, graph replay", precision, seconds, samples)
            if timer.cuda:
                torch.cuda.empty_cache()
    # The published A100 rows' shapes, in FP16, on this device.
    for m, n in ((4096, 32), (4096, 256), (4096, 2048), (4096, 32768)):
        x = randn(m, n, dtype=torch.float16, device=device)
        seconds, samples = timer.per_call(lambda: torch.softmax(x, -1))
        rows.add("softmax (last dim)", f"M={m} N={n}, eager back to back", "FP16", seconds, samples)
    x = randn(32768, 4096, dtype=torch.float16, device=device)
    seconds, samples = timer.per_call(lambda: F.layer_norm(x, (4096,)))
    rows.add("layernorm", "M=32768 N=4096, eager back to back", "FP16", seconds, samples)
    for elements in (1024, 1 << 20, 1 << 29):
        if device == "cpu" and elements > 1 << 20:
            continue
        x = randn(elements, dtype=torch.float16, device=device)
        seconds, samples = timer.per_call(lambda: F.gelu(x))
        rows.add("gelu", f"{elements} elements, eager back to back", "FP16", seconds, samples)
        del x


COPY_SIZES = [1 << log2 for log2 in range(12, 31, 3)]  # 4 KiB to 1 GiB


def copies(rows: Rows, timer: Timer) -> None:
    if not timer.cuda:
        return
    for size in COPY_SIZES:
        elements = size // 4
        device = torch.empty(elements, device="cuda").normal_()
        other = torch.empty(elements, device="cuda")
        pinned, pageable = torch.randn(elements).pin_memory(), torch.randn(elements)
        cases = {
            "host to device, pinned": lambda: device.copy_(pinned, non_blocking=True),
            "host to device, pageable": lambda: device.copy_(pageable),
            "device to host, pinned": lambda: pinned.copy_(device, non_blocking=True),
            "device to host, pageable": lambda: pageable.copy_(device),
            "device to device": lambda: other.copy_(device),
        }
        for name, fn in cases.items():
            seconds, samples = timer.per_call(fn, max_calls=500)
            rows.add(f"copy: {name}", f"{size} bytes", "n/a", seconds, samples)
            rows.note(f"copy {name} {size} bytes: {size / seconds / 1e9:.1f} GB/s")
        del device, other, pinned, pageable
    torch.cuda.empty_cache()


RESNET50_CONVOLUTIONS = (  # (channels in, channels out, kernel, stride, image side), batch 32
    (3, 64, 7, 2, 224), (64, 64, 3, 1, 56), (256, 64, 1, 1, 56), (128, 128, 3, 1, 28),
    (256, 256, 3, 1, 14), (512, 2048, 1, 1, 7),
)


def layers(rows: Rows, timer: Timer) -> None:
    if not timer.cuda:
        return
    device = "cuda"
    for precision, dtype, memory_format in (("BF16", torch.bfloat16, torch.channels_last),
                                            ("FP32", torch.float32, torch.contiguous_format)):
        torch.backends.cudnn.allow_tf32 = False
        for c_in, c_out, k, stride, side in RESNET50_CONVOLUTIONS:
            image = randn(32, c_in, side, side, dtype=dtype, device=device).contiguous(memory_format=memory_format)
            weight = randn(c_out, c_in, k, k, dtype=dtype, device=device).contiguous(memory_format=memory_format)
            image.requires_grad_(c_in != 3)
            weight.requires_grad_()
            forward = lambda: F.conv2d(image, weight, stride=stride, padding=k // 2)  # noqa: E731
            seconds, samples = timer.per_call(forward)
            config = f"N=32 C={c_in} K={c_out} R=S={k} stride={stride} H=W={side}"
            rows.add("conv2d forward", config, precision, seconds, samples)
            output = forward()
            grad = torch.randn_like(output)
            seconds, samples = timer.per_call(lambda: torch.autograd.grad(forward(), (weight,), grad))
            rows.add("conv2d forward + weight gradient", config, precision, seconds, samples)
    for batch, heads, sequence, dim, causal in ((8, 16, 512, 64, False), (8, 16, 2048, 64, False),
                                                (8, 16, 2048, 128, True), (1, 32, 8192, 128, True)):
        q, k, v = (randn(batch, heads, sequence, dim, dtype=torch.bfloat16, device=device).requires_grad_()
                   for _ in range(3))
        attention = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
        config = f"B={batch} H={heads} S={sequence} D={dim} causal={causal}"
        seconds, samples = timer.per_call(attention)
        rows.add("scaled_dot_product_attention forward", config, "BF16", seconds, samples)
        grad = torch.randn_like(attention())
        seconds, samples = timer.per_call(lambda: torch.autograd.grad(attention(), (q, k, v), grad))
        rows.add("scaled_dot_product_attention forward + backward", config, "BF16", seconds, samples)
    table = randn(50257, 768, device=device)
    ids = torch.randint(0, 50257, (8, 512), device=device)
    seconds, samples = timer.per_call(lambda: F.embedding(ids, table))
    rows.add("embedding", "50257 x 768 table, 8 x 512 ids", "FP32", seconds, samples)
    logits, labels = randn(4096, 50257, dtype=torch.bfloat16, device=device), torch.randint(0, 50257, (4096,), device=device)
    seconds, samples = timer.per_call(lambda: F.cross_entropy(logits, labels))
    rows.add("cross_entropy", "4096 x 50257 logits", "BF16", seconds, samples)
    parameters = [torch.nn.Parameter(randn(4096, 4096, device=device)) for _ in range(8)]
    for p in parameters:
        p.grad = torch.randn_like(p)
    for fused in (True, False):
        optimizer = torch.optim.AdamW(parameters, lr=1e-4, fused=fused, foreach=None if fused else True)
        seconds, samples = timer.per_call(optimizer.step)
        rows.add("AdamW step", f"8 x 4096 x 4096 FP32 parameters, {'fused' if fused else 'foreach'}", "FP32",
                 seconds, samples)


def steps(rows: Rows, timer: Timer) -> None:
    import model_zoo
    import torch_ops

    device = timer.device
    for name, (build, make_batch) in torch_ops.MODELS.items():
        step = torch_ops.training_step(build, make_batch, device)
        seconds, samples = timer.per_call(step, max_calls=200)
        rows.add(f"training step: tools/bench/torch_ops.py {name}", "SGD, eager", "FP32", seconds, samples)
    for name, builder in model_zoo.MODELS.items():
        try:
            torch.manual_seed(0)
            model, batch = builder()
        except ImportError as error:
            rows.note(f"{name} skipped: {error}")
            continue
        model = model.to(device)
        batch = {key: value.to(device) for key, value in batch.items()}
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step():
            optimizer.zero_grad()
            model_zoo.loss_of(model(**batch)).backward()
            optimizer.step()
        seconds, samples = timer.per_call(step, max_calls=200)
        rows.add(f"training step: tools/bench/model_zoo.py {name}", "AdamW, eager", "FP32", seconds, samples)
    if not timer.cuda:
        return
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).to(device)  # GPT-2 small: 124M parameters
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    ids = torch.randint(0, 50257, (8, 512), device=device)

    def gpt2_step():
        optimizer.zero_grad()
        with torch.autocast("cuda", torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
    seconds, samples = timer.per_call(gpt2_step, max_calls=50)
    rows.add("training step: GPT-2 small (transformers GPT2Config())", "batch 8 x 512 tokens, autocast, fused AdamW",
             "BF16 autocast", seconds, samples, unit="ms")


SECTIONS = {"launch": launch, "gemm": gemm, "kernels": kernels, "copies": copies, "steps": steps,
            "layers": layers}


def environment(device: str) -> tuple[str, list[str]]:
    lines = [f"measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC by tools/bench/gpu_calibration.py",
             f"torch {torch.__version__}, Python {platform.python_version()}, {platform.machine()}"]
    if device != "cuda":
        return f"host CPU ({platform.processor() or platform.machine()})", lines
    props = torch.cuda.get_device_properties(0)
    lines.append(f"{props.name}: {props.multi_processor_count} SMs, L2 {props.L2_cache_size} bytes, "
                 f"{props.total_memory} bytes of memory, compute capability {props.major}.{props.minor}, "
                 f"CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}")
    query = "driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,pstate"
    try:
        smi = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20).stdout.strip()
        lines.append(f"nvidia-smi {query}: {smi}")
    except (OSError, subprocess.TimeoutExpired) as error:
        lines.append(f"nvidia-smi failed: {error}")
    return f"{props.name} ({props.multi_processor_count} SMs)", lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True, type=Path)
    parser.add_argument("--budget-s", type=float, default=330.0, help="start no section after this many seconds")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--sections", default=",".join(SECTIONS))
    args = parser.parse_args()
    began = time.monotonic()
    timer = Timer(args.device)
    torch.manual_seed(0)
    hardware, header = environment(args.device)
    source = f"measured: tools/bench/gpu_calibration.py, {datetime.date.today()}, torch {torch.__version__}"
    rows = Rows(args.output, hardware, source, header)
    for line in header:
        print(line, flush=True)
    for name in args.sections.split(","):
        spent = time.monotonic() - began
        if spent > args.budget_s:
            rows.note(f"section {name} not run: {spent:.0f} s of the {args.budget_s:.0f} s budget spent")
            continue
        print(f"== {name} (at {spent:.0f} s)", flush=True)
        try:
            SECTIONS[name](rows, timer)
        except Exception as error:  # keep the other sections' figures: note what failed and go on
            rows.note(f"section {name} stopped: {type(error).__name__}: {str(error)[:300]}")
        rows.note(f"section {name} took {time.monotonic() - began - spent:.1f} s")
    if args.device == "cuda":
        rows.note(environment("cuda")[1][-1].replace("nvidia-smi", "nvidia-smi at the end:"))
    print(f"{rows.count} rows in {time.monotonic() - began:.0f} s -> {args.output}", flush=True)


if __name__ == "__main__":
    main()
