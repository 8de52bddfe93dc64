#!/usr/bin/env python3
"""Measure a real GPU as openreg-perf models it: kernels, copies and launch overhead, into one CSV.

Plain PyTorch on a CUDA device, no OpenReg build: what no datasheet gives the performance model. The
output has the columns of tools/bench/perf_calibration.csv (workload, config, precision, hardware,
metric, value, unit, source) plus the spread of the samples, one row per figure:

  launch    back-to-back launches of a one-element kernel as PyTorch issues them (the device's launch
            floor when the host keeps up), the same kernels replayed from a CUDA graph, the host's round
            trip of a synchronisation, and an operator plus its synchronisation end to end
  gemm      torch.matmul in FP16, BF16, TF32 and FP32 over square, tall, wide and skinny shapes (wave
            quantisation included: sizes just past a tile) and 24 assorted ones, and FP8 through
            torch._scaled_mm
  kernels   elementwise, reduction, softmax, layer norm and cast kernels from 1K to 256M elements in
            FP32 and BF16: back to back in eager mode, and replayed from a graph up to 4M elements
            (their device time without the launch gaps); softmax and layer norm over rows of 128 to 16K
  copies    host to device and back, pinned and pageable, and device to device, 4 KiB to 1 GiB
  layers    ResNet-50's convolutions in BF16, FP32 and TF32 (forward alone, then with the weight's or
            the input's gradient), scaled dot-product attention, embedding, cross entropy and a fused
            AdamW step
  steps     training steps of tools/bench/torch_ops.py's and model_zoo.py's models (launch-bound at their
            sizes) and of GPT-2 small in BF16 (compute-bound), eager

Device time comes from CUDA events around a batch of calls, a sample lasting about 10 ms; each figure
is the median of 5 samples after a warm-up, on random data (never zeros). Sections run in the order
above until --budget-s is spent; the CSV is written row by row, so a run cut short keeps what it
measured. --device cpu runs the same code with host timers (to check the script without a GPU).

    python3 tools/bench/gpu_calibration.py --output OUT.csv [--budget-s 330] [--device cuda|cpu]
"""

import argparse
import datetime
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))  # torch_ops, model_zoo and gpu_timing beside it

from gpu_timing import DEVICE_ALONE, Rows, Timer  # noqa: E402

GRAPH_MAX_ELEMENTS = 1 << 22


DTYPES = {"FP32": torch.float32, "TF32": torch.float32, "FP16": torch.float16, "BF16": torch.bfloat16}


def randn(*shape, dtype=torch.float32, device="cuda") -> torch.Tensor:
    return torch.randn(*shape, device=device).to(dtype)


# ------------------------------------------------------------------------------------------- cases

@dataclass(frozen=True)
class Case:
    """One figure: what runs and how the CSV names it. make(device) makes the operands and returns the
    call to time, so the same case runs on a GPU here and on openreg in tools/bench/perf_measured.py."""

    workload: str
    config: str
    precision: str
    make: Callable[[str], Callable[[], object]]
    graph_row: tuple[str, str] | None = None  # also timed replayed from a CUDA graph, as this row
    device_row: bool = False  # also timed with the host ahead (Timer.device_per_call), config + DEVICE_ALONE
    tf32: bool | None = None  # FP32 matrix products and convolutions on TF32 units; None: PyTorch's defaults
    max_calls: int = 2000
    unit: str = "us"


def launch_cases() -> list[Case]:
    def add(allocating: bool):
        def make(device):
            a, b, out = randn(1, device=device), randn(1, device=device), torch.empty(1, device=device)
            return (lambda: a + b) if allocating else (lambda: torch.add(a, b, out=out))
        return make

    return [Case("launch: one-element add, back to back", "eager, out=, events around 1 sample", "FP32", add(False),
                 graph_row=("launch: one-element add, graph replay", "100 kernels per graph"), device_row=True),
            Case("launch: one-element add, back to back", "eager, allocating its output", "FP32", add(True),
                 device_row=True)]


GEMM_SHAPES = (
    [(n, n, n) for n in (128, 256, 512, 1024, 2048, 4096, 8192)]
    + [(m, 12288, 12288) for m in (64, 256, 1024, 4096, 16384)]  # the published A100 rows' shapes
    + [(8192, n, n) for n in (64, 256, 1024, 4096, 16384)]
    + [(m, 4096, 4096) for m in (1, 8, 32)]  # decoding
    + [(n, n, n) for n in (4000, 4224, 6144)]  # just under and past a 128 tile's wave
    + [(2048, 13312, 2048), (1024, 5120, 10240)]  # mamf-finder's best H100 / A100 shapes, M x K x N
)


def _assorted_shapes(count: int, seed: int = 2026) -> list[tuple[int, int, int]]:
    """Shapes that no tile was chosen for: each dimension log-uniform from 64 to 8192, a multiple of 8
    (as NeuSight's training split draws them), at most 2^36 multiply-adds so that FP32 stays quick."""
    import random
    draw, shapes = random.Random(seed), []
    while len(shapes) < count:
        m, k, n = (8 * round(2 ** draw.uniform(6, 13) / 8) for _ in range(3))
        if m * k * n <= 1 << 36:
            shapes.append((m, k, n))
    return shapes


ASSORTED_GEMM_SHAPES = _assorted_shapes(24)
FP8_SHAPES = ((1024, 1024, 1024), (4096, 4096, 4096), (8192, 8192, 8192), (1024, 14336, 9216))


def gemm_cases() -> list[Case]:
    def matmul(m, k, n, dtype):
        def make(device):
            x, w = randn(m, k, dtype=dtype, device=device), randn(k, n, dtype=dtype, device=device)
            return lambda: x @ w
        return make

    def scaled_mm(m, k, n):
        def make(device):
            x = randn(m, k, device=device).to(torch.float8_e4m3fn)
            w = randn(n, k, device=device).to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm wants
            one = torch.ones((), device=device)
            return lambda: torch._scaled_mm(x, w, one, one, out_dtype=torch.bfloat16)
        return make

    cases = []
    for precision in ("BF16", "FP16", "TF32", "FP32"):
        for m, k, n in GEMM_SHAPES + ASSORTED_GEMM_SHAPES:
            cases.append(Case("GEMM torch.matmul", f"M={m} K={k} N={n}", precision,
                              matmul(m, k, n, DTYPES[precision]), tf32=precision == "TF32", device_row=True))
    cases += [Case("GEMM torch._scaled_mm", f"M={m} K={k} N={n}", "FP8 e4m3", scaled_mm(m, k, n))
              for m, k, n in FP8_SHAPES]
    return cases


def elementwise_calls(elements: int, dtype) -> dict:
    """name -> make(device) of the kernels timed at every size."""
    other = torch.bfloat16 if dtype == torch.float32 else torch.float32

    def kernel(call):
        def make(device):
            x, y = randn(elements, dtype=dtype, device=device), randn(elements, dtype=dtype, device=device)
            out = torch.empty_like(x)
            rows_of_1024 = x.view(-1, 1024) if elements >= 1024 else x.view(1, -1)
            return lambda: call(x, y, out, rows_of_1024)
        return make

    return {
        "copy (out.copy_)": kernel(lambda x, y, out, rows: out.copy_(x)),
        "add (out=)": kernel(lambda x, y, out, rows: torch.add(x, y, out=out)),
        "mul by a scalar": kernel(lambda x, y, out, rows: x * 1.5),
        "relu": kernel(lambda x, y, out, rows: torch.relu(x)),
        "gelu": kernel(lambda x, y, out, rows: F.gelu(x)),
        "exp": kernel(lambda x, y, out, rows: torch.exp(x)),
        "sum (all)": kernel(lambda x, y, out, rows: x.sum()),
        "sum over rows of 1024": kernel(lambda x, y, out, rows: rows.sum(-1)),
        "softmax over rows of 1024": kernel(lambda x, y, out, rows: torch.softmax(rows, -1)),
        "layer_norm over rows of 1024": kernel(lambda x, y, out, rows: F.layer_norm(rows, rows.shape[-1:])),
        f"cast to {str(other).split('.')[-1]}": kernel(lambda x, y, out, rows: x.to(other)),
    }


def kernel_cases() -> list[Case]:
    cases = []
    for precision, dtype in (("FP32", torch.float32), ("BF16", torch.bfloat16)):
        for log2 in range(10, 29, 2):
            elements = 1 << log2
            for name, make in elementwise_calls(elements, dtype).items():
                graph_row = (f"kernel: {name}", f"{elements} elements, graph replay")
                cases.append(Case(f"kernel: {name}", f"{elements} elements, eager back to back", precision, make,
                                  graph_row=graph_row if elements <= GRAPH_MAX_ELEMENTS else None))

    def half(shape, call):
        def make(device):
            x = randn(*shape, dtype=torch.float16, device=device)
            return lambda: call(x)
        return make

    # The published A100 rows' shapes, in FP16, on this device.
    cases += [Case("softmax (last dim)", f"M={m} N={n}, eager back to back", "FP16",
                   half((m, n), lambda x: torch.softmax(x, -1)))
              for m, n in ((4096, 32), (4096, 256), (4096, 2048), (4096, 32768))]
    cases.append(Case("layernorm", "M=32768 N=4096, eager back to back", "FP16",
                      half((32768, 4096), lambda x: F.layer_norm(x, (4096,)))))
    cases += [Case("gelu", f"{elements} elements, eager back to back", "FP16", half((elements,), F.gelu))
              for elements in (1024, 1 << 20, 1 << 29)]
    return cases + row_kernel_cases()


def row_kernel_cases() -> list[Case]:
    """Softmax and LayerNorm over rows of other widths than 1024: narrow rows leave most of a block idle,
    wide ones take a block each."""
    def over_rows(width, elements, dtype, call):
        def make(device):
            rows = randn(elements // width, width, dtype=dtype, device=device)
            return lambda: call(rows)
        return make

    calls = {"softmax": lambda rows: torch.softmax(rows, -1),
             "layer_norm": lambda rows: F.layer_norm(rows, rows.shape[-1:])}
    return [Case(f"kernel: {name} over rows of {width}", f"{elements} elements, eager back to back", precision,
                 over_rows(width, elements, dtype, call))
            for precision, dtype in (("FP32", torch.float32), ("BF16", torch.bfloat16))
            for name, call in calls.items()
            for width in (128, 4096, 16384) for elements in (1 << 22, 1 << 26)]


COPY_SIZES = [1 << log2 for log2 in range(12, 31, 3)]  # 4 KiB to 1 GiB


def copy_cases() -> list[Case]:
    def copy(size, direction, pinned):
        def make(device):
            elements = size // 4
            on_device = torch.empty(elements, device=device).normal_()
            if direction == "device to device":
                other = torch.empty(elements, device=device)
                return lambda: other.copy_(on_device)
            host = torch.randn(elements).pin_memory() if pinned else torch.randn(elements)
            if direction == "host to device":
                return lambda: on_device.copy_(host, non_blocking=pinned)
            return lambda: host.copy_(on_device, non_blocking=pinned)
        return make

    kinds = (("host to device", True), ("host to device", False), ("device to host", True),
             ("device to host", False), ("device to device", False))
    return [Case(f"copy: {direction}" + ("" if direction == "device to device" else
                                         ", pinned" if pinned else ", pageable"),
                 f"{size} bytes", "n/a", copy(size, direction, pinned), max_calls=500)
            for size in COPY_SIZES for direction, pinned in kinds]


RESNET50_CONVOLUTIONS = (  # (channels in, channels out, kernel, stride, image side), batch 32
    (3, 64, 7, 2, 224), (64, 64, 3, 1, 56), (256, 64, 1, 1, 56), (128, 128, 3, 1, 28),
    (256, 256, 3, 1, 14), (512, 2048, 1, 1, 7),
    # the rest of ResNet-50 v1.5's distinct convolutions (stride 2 in the 3x3 and the shortcut)
    (64, 256, 1, 1, 56), (128, 128, 3, 2, 56), (128, 512, 1, 1, 28), (512, 128, 1, 1, 28),
    (256, 512, 1, 2, 56), (256, 1024, 1, 1, 14), (1024, 256, 1, 1, 14), (512, 512, 3, 1, 7),
    (2048, 512, 1, 1, 7),
)
CONVOLUTION_PASSES = {  # workload -> the gradients taken after the forward (weight, input)
    "conv2d forward": (False, False), "conv2d forward + weight gradient": (True, False),
    "conv2d forward + input gradient": (False, True),
}
# TF32: FP32 tensors with cuDNN's TF32 on, PyTorch's default for convolutions.
CONVOLUTION_PRECISIONS = (("BF16", torch.bfloat16, torch.channels_last),
                          ("FP32", torch.float32, torch.contiguous_format),
                          ("TF32", torch.float32, torch.contiguous_format))
ATTENTION_SHAPES = ((8, 16, 512, 64, False), (8, 16, 2048, 64, False), (8, 16, 2048, 128, True),
                    (1, 32, 8192, 128, True))


def convolution(c_in, c_out, k, stride, side, dtype, memory_format, gradients):
    """make(device) of a batch-32 conv2d, then the gradients asked for (weight, input)."""
    def make(device):
        image = randn(32, c_in, side, side, dtype=dtype, device=device).contiguous(memory_format=memory_format)
        weight = randn(c_out, c_in, k, k, dtype=dtype, device=device).contiguous(memory_format=memory_format)
        image.requires_grad_(c_in != 3)
        weight.requires_grad_()
        forward = lambda: F.conv2d(image, weight, stride=stride, padding=k // 2)  # noqa: E731
        wrt = [t for t, wanted in zip((weight, image), gradients, strict=True) if wanted]
        if not wrt:
            return forward
        grad = torch.randn_like(forward())
        return lambda: torch.autograd.grad(forward(), wrt, grad)
    return make


def layer_cases() -> list[Case]:
    def attention(batch, heads, sequence, dim, causal, backward):
        def make(device):
            q, k, v = (randn(batch, heads, sequence, dim, dtype=torch.bfloat16, device=device).requires_grad_()
                       for _ in range(3))
            forward = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
            if not backward:
                return forward
            grad = torch.randn_like(forward())
            return lambda: torch.autograd.grad(forward(), (q, k, v), grad)
        return make

    def embedding(device):
        table, ids = randn(50257, 768, device=device), torch.randint(0, 50257, (8, 512), device=device)
        return lambda: F.embedding(ids, table)

    def cross_entropy(device):
        logits = randn(4096, 50257, dtype=torch.bfloat16, device=device)
        labels = torch.randint(0, 50257, (4096,), device=device)
        return lambda: F.cross_entropy(logits, labels)

    def adamw(fused):
        def make(device):
            parameters = [torch.nn.Parameter(randn(4096, 4096, device=device)) for _ in range(8)]
            for p in parameters:
                p.grad = torch.randn_like(p)
            return torch.optim.AdamW(parameters, lr=1e-4, fused=fused, foreach=None if fused else True).step
        return make

    cases = []
    for precision, dtype, memory_format in CONVOLUTION_PRECISIONS:
        for c_in, c_out, k, stride, side in RESNET50_CONVOLUTIONS:
            config = f"N=32 C={c_in} K={c_out} R=S={k} stride={stride} H=W={side}"
            for name, gradients in CONVOLUTION_PASSES.items():
                if c_in == 3 and gradients[1]:
                    continue  # nothing takes the gradient of the images
                cases.append(Case(name, config, precision, tf32=precision == "TF32", device_row=True,
                                  make=convolution(c_in, c_out, k, stride, side, dtype, memory_format, gradients)))
    for batch, heads, sequence, dim, causal in ATTENTION_SHAPES:
        config = f"B={batch} H={heads} S={sequence} D={dim} causal={causal}"
        for name, backward in (("scaled_dot_product_attention forward", False),
                               ("scaled_dot_product_attention forward + backward", True)):
            cases.append(Case(name, config, "BF16", attention(batch, heads, sequence, dim, causal, backward)))
    cases.append(Case("embedding", "50257 x 768 table, 8 x 512 ids", "FP32", embedding))
    cases.append(Case("cross_entropy", "4096 x 50257 logits", "BF16", cross_entropy))
    cases += [Case("AdamW step", f"8 x 4096 x 4096 FP32 parameters, {'fused' if fused else 'foreach'}", "FP32",
                   adamw(fused)) for fused in (True, False)]
    return cases


def step_cases() -> list[Case]:
    import model_zoo
    import torch_ops

    def small_model(build, make_batch):
        return lambda device: torch_ops.training_step(build, make_batch, device)

    def zoo_model(builder):
        def make(device):
            torch.manual_seed(0)
            model, batch = builder()
            model = model.to(device)
            batch = {key: value.to(device) for key, value in batch.items()}
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

            def step():
                optimizer.zero_grad()
                model_zoo.loss_of(model(**batch)).backward()
                optimizer.step()
            return step
        return make

    def gpt2_small(device):
        from transformers import GPT2Config, GPT2LMHeadModel
        torch.manual_seed(0)
        model = GPT2LMHeadModel(GPT2Config()).to(device)  # GPT-2 small: 124M parameters
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        ids = torch.randint(0, 50257, (8, 512), device=device)

        def step():
            optimizer.zero_grad()
            with torch.autocast(device, torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            optimizer.step()
        return step

    cases = [Case(f"training step: tools/bench/torch_ops.py {name}", "SGD, eager", "FP32", small_model(*model),
                  max_calls=200, device_row=True) for name, model in torch_ops.MODELS.items()]
    cases += [Case(f"training step: tools/bench/model_zoo.py {name}", "AdamW, eager", "FP32", zoo_model(builder),
                   max_calls=200, device_row=True) for name, builder in model_zoo.MODELS.items()]
    cases.append(Case("training step: GPT-2 small (transformers GPT2Config())",
                      "batch 8 x 512 tokens, autocast, fused AdamW", "BF16 autocast", gpt2_small, max_calls=50,
                      unit="ms", device_row=True))
    return cases


CASES = {"launch": launch_cases, "gemm": gemm_cases, "kernels": kernel_cases, "copies": copy_cases,
         "steps": step_cases, "layers": layer_cases}


@contextmanager
def tf32(enabled: bool | None) -> Iterator[None]:
    """TF32 for FP32 matrix products (torch.backends.cuda.matmul.allow_tf32, off by default) and
    convolutions (torch.backends.cudnn.allow_tf32, on by default), or PyTorch's defaults if None."""
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    before = matmul.allow_tf32, cudnn.allow_tf32
    matmul.allow_tf32, cudnn.allow_tf32 = (False, True) if enabled is None else (enabled, enabled)
    try:
        yield
    finally:
        matmul.allow_tf32, cudnn.allow_tf32 = before


# ------------------------------------------------------------------------------------------ measuring

def too_big_for_a_dry_run(case: Case) -> bool:
    """--device cpu checks the script: cases beyond a few hundred MB of work are left out there."""
    numbers = [int(n) for n in re.findall(r"\d+", case.config)]
    if case.workload.startswith("GEMM"):
        return numbers[0] * numbers[1] * numbers[2] > 1 << 27
    if case.workload.startswith(("kernel", "gelu")):
        return numbers[0] > 1 << 20
    return case.workload.startswith(("copy", "conv2d", "training step: GPT-2 small", "scaled_dot", "embedding",
                                     "cross_entropy", "AdamW", "softmax", "layernorm"))


def measure(cases: list[Case], rows: Rows, timer: Timer) -> None:
    for case in cases:
        if not timer.cuda and too_big_for_a_dry_run(case):
            continue
        fn = None
        try:
            with tf32(case.tf32):
                fn = case.make(timer.device)
                eager, samples = timer.per_call(fn, case.max_calls)
                rows.add(case.workload, case.config, case.precision, eager, samples, unit=case.unit)
                if case.graph_row and timer.cuda:
                    seconds, samples = timer.graph_per_call(fn)
                    rows.add(*case.graph_row, case.precision, seconds, samples, unit=case.unit)
                if case.device_row and timer.cuda:
                    try:
                        seconds, samples = timer.device_per_call(fn, eager)
                        rows.add(case.workload, case.config + DEVICE_ALONE, case.precision, seconds, samples,
                                 unit=case.unit)
                    except Exception as error:  # noqa: BLE001 - keep the eager row and the other cases
                        rows.note(f"{case.workload} | {case.config}{DEVICE_ALONE} | {case.precision} not run: "
                                  f"{error}"[:300])
        except ImportError as error:
            rows.note(f"{case.workload} | {case.config} not run: {error}")
        del fn
        if timer.cuda:
            torch.cuda.empty_cache()


def host_round_trips(rows: Rows, timer: Timer) -> None:
    """Host time of a synchronisation and of small work waited for, from the host clock."""
    device = timer.device
    a, b, out = randn(1, device=device), randn(1, device=device), torch.empty(1, device=device)
    m1, m2 = randn(64, 64, device=device), randn(64, 64, device=device)
    calls = {"host: synchronize an idle device": ("n/a", timer.sync),
             "host: one-element add then synchronize": ("FP32", lambda: (torch.add(a, b, out=out), timer.sync())),
             "host: 64x64 matmul then synchronize": ("FP32", lambda: (m1 @ m2, timer.sync())),
             "host: item() of a one-element tensor": ("FP32", a.item)}
    for workload, (precision, fn) in calls.items():
        taken = []
        for _ in range(200):
            began = time.perf_counter()
            fn()
            taken.append(time.perf_counter() - began)
        rows.add(workload, "time.perf_counter, median of 200", precision, statistics.median(taken), taken,
                 metric="host time")


def environment(device: str) -> tuple[str, list[str]]:
    now = datetime.datetime.now(datetime.UTC)
    lines = [f"measured {now:%Y-%m-%d %H:%M} UTC by tools/bench/gpu_calibration.py",
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
    parser.add_argument("--sections", default=",".join(CASES))
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
            measure(CASES[name](), rows, timer)
            if name == "launch":
                host_round_trips(rows, timer)
        except Exception as error:  # keep the other sections' figures: note what failed and go on
            rows.note(f"section {name} stopped: {type(error).__name__}: {str(error)[:300]}")
        rows.note(f"section {name} took {time.monotonic() - began - spent:.1f} s")
    if args.device == "cuda":
        rows.note(environment("cuda")[1][-1].replace("nvidia-smi", "nvidia-smi at the end:"))
    print(f"{rows.count} rows in {time.monotonic() - began:.0f} s -> {args.output}", flush=True)


if __name__ == "__main__":
    main()
