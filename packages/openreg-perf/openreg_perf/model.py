"""Predicted seconds of one kernel or copy on a profiled device (a collective's: collectives.py), and the
datasheet roofline.

The model keeps what a roofline ignores: a kernel floor, the matrix library's choice of tile and split
(with the wave quantisation of each), achievable fractions of peak per kernel class that grow with
size, and a sustained clock below the boost clock.
Not a scheduler (timeline.py overlaps streams and hosts) and not a fitter (fit.py chooses the efficiencies).

Note [The equations] (all rates from the profile; e.* is its [efficiency], c.* its [collectives]):
  kernel    t = max(floor, own + max(t_compute, t_memory))   (own: chip.graph_kernel_floor_s, a kernel's own
            time beyond its work, as a CUDA graph's replay shows it; floor: chip.kernel_floor_s, the shortest
            time a kernel queued on a stream occupies it, which the front end's preparation of each launch
            sets and hides behind a longer kernel; the host's time per launch is the replay's)
  sustained every compute peak times chip.sustained_clock_hz / chip.clock_hz, an FP32 convolution's up
            to e.conv_clock_gain times more (Note [Sustained clock])
  matrix    the fastest candidate of Note [How a matrix kernel is chosen], plus a convolution's layout
            conversions (Note [Layout conversions]); over padded channels at e.conv_unaligned_fraction;
            a fused attention's compute adds its exponentials at peak[special] (Note [Attention's exponentials])
  other     t_compute = (flops + transcendentals * peak[vector] / peak[special]) / (peak[vector] * e.vector_fraction),
            a softmax's at least e.softmax_element_cycles per element (Note [A softmax's pace])
  memory    t_memory = (bytes / occupancy + e.memory_half_bytes) / (bandwidth * e.<class>_memory_fraction)
            (class: elementwise, reduction, norm, softmax or optimizer, from the cost's kind; occupancy 1 but for
            row-wise kernels, Note [Row-wise kernels]; bytes to and from memory, less a long row's later
            passes that L2 serves, Note [Rows read again]); a reduction adds e.reduction_fixed_s, and
            e.reduction_global_s where its blocks share an output (Note [Reductions]); a layer or RMS norm
            takes at least (rows * e.norm_row_s + bytes / e.norm_unit_bytes_per_s) / chip.compute_units
            (Note [Rows of a norm])
  copy      t = latency + bytes / (link rate * e.copy_fraction)
  collective (per algorithm, the faster protocol; collectives.py)  t = steps * alpha + traffic * bytes / (B * fraction)
            ring all_reduce: steps 2(n-1), traffic 2(n-1)/n (nccl-tests' bus bandwidth convention)
            tree all_reduce (across nodes only: NCCL's tree is a tree of nodes): steps 2 ceil(log2 n), traffic 2
            in-switch all_reduce (NVLink SHARP, messages of SWITCH_MIN_BYTES and more):
              t = c.switch_setup + bytes / (B * c.switch_fraction)

Note [How a matrix kernel is chosen]
A GEMM library (cuBLAS, hipBLASLt) has kernels for several output tiles and may split the reduction
into slices whose partial results a second pass adds; its heuristics aim at the fastest. The model
prices every candidate of the profile's [matrix] menu (the SIMT tiles for FP32/FP64, the matrix-unit
tiles otherwise; batched FP32 products the batched_simt_tiles where a profile names them: cuBLAS runs
those on one or a few kernels whatever the shape, waste and all) with every split 1, 2, 4, ... up to
matrix.max_split_k (each slice at least MIN_SLICE_DEPTH deep; splits only where the unsplit output
tiles leave units idle, as the libraries' heuristics do) and takes the fastest:
  resident  = clamp(largest tile's area / (tm * tn), 1, MAX_RESIDENT_TILES)  tiles one unit runs at once
  tiles     = batch * ceil(m / tm) * ceil(n / tn) * split;  waves = ceil(tiles / (units * resident))
  rate      = peak / (units * resident) * level / (1 + e.matrix_tile_overhead * (tm + tn) / (tm * tn))
  t_compute = setup + waves * 2 * tm * tn * (k / split + half_depth) / rate
  t_memory  = memory time of the operands
  t         = max(t_compute, t_memory), plus, when split > 1, a second kernel that reads and adds the
              FP32 partial results (2 * split * batch * m * n * 4 bytes)
setup and half_depth are e.matrix_setup_s and e.matrix_half_depth on the FP32/FP64 units,
e.matrix_unit_setup_s and e.matrix_unit_half_depth on the matrix units, whose kernels keep several
slices of K in flight (fitted: 255 against 4 for the FP32 units' kernels). A forward
convolution is never split: cuDNN's implicit-GEMM kernels reduce over channels x kernel window in one
pass (NeuSight's 1,224 FP32 convolutions on V100, T4, P100 and P4 name no split-K reduction kernel).
A tile computes all of its tm x tn outputs even where the matrix ends inside it: small and skinny
products waste part of a large tile, which is why the library has small ones. level is the precision's
e.gemm_*_fraction times the kind's factor (e.conv_*_factor, e.attention_*_factor; 1 for a GEMM).

Note [Layout conversions]
cuDNN's matrix-unit convolution kernels read and write channels-last (NHWC) tensors. Given NCHW ones,
PyTorch's default, each cuDNN call (the forward pass, each gradient) converts its operands to NHWC and,
mostly, its result back, a kernel per tensor (a 1 x 1 weight is the same bytes: none), unless it is a
plain product of the NCHW tensors (1 x 1 kernel, stride 1, no padding), mostly run as one. On the H200
(tools/bench/measured/kernels/2026-11-30_nvidia-h200_conv_kernels.csv) they took 23-77 % (median 42 %)
of the 54 of ResNet-50's 88 BF16 and TF32 passes that had them; none ran for channels-last tensors, and
in FP32 (NCHW kernels) five 1 x 1 weight gradients spent 4-8 % on them (not priced). Each is priced as
a kernel reading and writing its tensor at the elementwise rate, on NVIDIA's chips (CUDNN_ARCHITECTURES).
A recording notes whether a call's tensors are channels-last.

Note [Unaligned channels]
cuDNN's matrix-unit convolution kernels load a filter position's input channels 16 bytes at a time (named
align8 in BF16, aligna4 in TF32). Channels per group that are not a multiple (an image's 3 colours) are
padded with zeros (tools/bench/measured/kernels/2026-11-30_nvidia-h200_conv_kernels.csv: BF16's
nhwcAddPaddingKernel, TF32's "indexed" kernel), and the padded product runs slowly: at 10-11 % of the
matrix peak forward, 16-17 % for the weight gradient, where other convolutions reach 40-80 %. So it runs
at e.conv_unaligned_fraction of its precision's peak, every pass: one device-independent value, fitted to
the H100's and H200's stems (0.17). The FP32 units pad nothing (cuDNN's FP32 stem is an FFMA kernel),
and grouped convolutions (ResNeXt's 4 channels a group), which no row measures, keep their level.

Note [Sustained clock]
Datasheet peaks are quoted at the boost clock. A part held by its power limit (a 70 W card) runs long
compute-bound kernels at a lower clock: chip.sustained_clock_hz, which scales every compute peak. Memory
bandwidth is not scaled (the memory clock is not the one that drops). cuDNN's convolutions hold a higher
clock than the SGEMMs that sustained_clock_hz is read from: in NeuSight's rows of 3-30 ms (p90), the
P4's implicit-GEMM convolutions reach 0.77-0.81 of its boost-clock peak where its SGEMMs reach 0.42-0.47,
the T4's 0.60 against 0.43, while on the uncapped P100 and V100 convolutions reach 0.9 of what their
SGEMMs do. So an FP32 convolution runs at e.conv_clock_gain times the sustained clock, at most the boost
clock. No row shows what a power-limited chip's matrix units do in a convolution: those keep the GEMMs' clock.
The gain is one device-independent value, fitted to the capped chips' convolutions with their
convolution factor tied to the uncapped chips' (fit.py's Note [Which parameters a device gets]): 1.68
fitted to both, 1.49 to the P4's rows alone and 1.67 to the T4's, so each chip held out is predicted
with the gain the other's rows fitted.

Note [Reductions]
A reduction's blocks combine their partial results before the kernel ends, and where an output has many
inputs (SHARED_OUTPUT_INPUTS in costs/pointwise.py) PyTorch shares it between blocks: they write
partial results to a workspace, and the last block to finish (a semaphore tells it) adds them. Replayed
from a graph on an H100, a sum over rows of 1,024 takes 3.3 us from 16 K to 1 M elements, where an add
takes 1.0; a sum of all 65,536 or more takes 7.0-7.4 us (tools/bench/measured). A reduction adds
e.reduction_fixed_s to its streaming time, and e.reduction_global_s where it shares outputs; both are
fitted to every device at once. Without them the fit had priced the H100's and H200's large sums at 58-61 %
of their bandwidth, where they reach 90 %.

Note [Row-wise kernels]
Softmax, layer norm and RMS norm give each row of the normalised dimension to one block, which reads
it with a few loads in flight. With few rows the device has too few loads in flight to keep its
memory busy: NeuSight's layer norms of 500 rows reach 30-45 % of the bandwidth that 10,000 rows reach,
on every device. The model scales the bandwidth of such a kernel (Cost.rows > 0) by
  occupancy = rows / (rows + e.row_half_rows_per_unit * chip.compute_units)
(half of it at that many rows per compute unit), fitted to every device's rows at once.

Note [Rows of a norm]
PyTorch's layer norm (and RMS norm) gives each row a block that reduces it twice (mean, then variance)
and synchronises its threads for each, and a compute unit holds few such blocks at once: it works
through its share of the rows at a pace of its own, a fixed time per row plus the row's bytes at the
rate one unit streams them. The H200's layer norms over rows of 128 take 0.14 us per row per SM (BF16,
67 M elements: 555 us, 10 % of its bandwidth), where softmax's kernel for short rows, several rows to a
warp, takes 117 us; over rows of 1,024 the H100 takes what the H200 takes (815 against 757 us in FP32,
554 against 550 in BF16) with 30 % less bandwidth: both are held by their compute units, not their
memory. A norm with rows (not a softmax) takes the longer of its streaming time and
(rows * e.norm_row_s + bytes / e.norm_unit_bytes_per_s) / chip.compute_units, both values fitted to every
device at once.

Note [A softmax's pace]
PyTorch's softmax kernels spend several instructions on each element (the maximum, an exponential, the
sum, the division, conversions), a few at a time per row: in 16-bit they are held by that work, not by
their bytes. On the H200, 67 M elements in rows of 1,024 take 106 us in BF16 and 136 us in FP32: half
the bytes in 78 % of the time, 53 % of its bandwidth where FP32 reaches 82 %. A softmax's compute time is
at least elements * e.softmax_element_cycles / (compute units * sustained clock), one device-independent
value fitted to every device's rows (0.45 cycles). The H100's and H200's softmaxes held out went from
28 and 21 % to 18 and 12 %: the memory fraction no longer has to take in the 16-bit rows.

Note [Attention's exponentials]
A fused attention (FlashAttention's kernels, which scaled_dot_product_attention runs on NVIDIA's chips)
computes one exponential per query-key score beside its products (two in the forward; five in the
backward, which recomputes the probabilities and so the exponentials), on the special-function units (16
results per SM per clock), which FlashAttention-2 does not overlap with the matrix units' work. With a
head dimension of 64 an H100 takes as long for a score's exponential as for its 256 FLOPs of products,
at their peaks. The model adds transcendentals / (peak[special] * sustained fraction) to the matrix
model's compute time, whose level is the precision's GEMM level times e.attention_forward_factor or
e.attention_backward_factor, fitted to the H100's and the H200's attention rows (1.09 and 0.67: the
products run at the GEMMs' rate, the backward's atomics and recomputation at two thirds of it). Held
out, one Hopper chip predicted from the other's rows, the 12 rows of 2,048 and 8,192 positions come
within 8.9 % (bias -2.5 %), where the products alone at fitted factors gave 11.7 %.

Note [Optimizer steps]
An optimizer step on CUDA is multi_tensor_apply's kernels (fused Adam, the _foreach_ operators): each
thread streams the same chunk of several lists at once (Adam: parameter, gradient and both moments read,
three written) from a table of tensor addresses the launch carries. They reach less of the bandwidth than
a plain elementwise kernel: the fused AdamW step over 8 x 4096 x 4096 FP32 parameters (3.8 GB) takes
1.48 ms on the H100 and 1.13 ms on the H200, 76 and 70 % of their datasheet bandwidth, where a long add
reaches 90 and 87 %. Such kernels stream at e.optimizer_memory_fraction, a level fitted per device to
those rows (tools/bench/measured). Held out, one chip from the other's fraction, the two fused steps
come within 8 %; the _foreach_ step's kernels (the same memory, several passes) take it too.

Note [Rows read again]
A row too long to keep on chip is read more than once (softmax: for its maximum, the sum of its
exponentials, the result; Cost.reread_bytes is what the later passes read). Each block reads its row
again right after the first pass, so the later passes come from L2 while the rows in flight (two
blocks of 1,024 threads per compute unit) fit in it: 264 rows of 64 KiB on an H100 or H200 are 17 MiB
of a 50 MB L2, and the H200's FP32 softmax over rows of 16,384 runs at 64 % of its bandwidth counting
one pass (3.1 TB/s), 129 % counting three. Where they do not fit (a V100's 6 MB), every pass reads the
device's memory. Turing runs one such block per SM, GA10x and Ada one and a half: there the model
overstates what is in flight (a T4 is taken to spill rows of 64 KiB that its 4 MB would hold).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

from .costs import Cost, MatrixShape
from .profile import PRECISIONS, Profile

MATRIX_KINDS = ("matmul", "conv", "attention")
COPY_KINDS = ("h2d", "d2h", "d2d", "p2p")
MIN_SLICE_DEPTH = 128  # a split-K slice shallower than this costs more in partial results than it gains
MAX_RESIDENT_TILES = 4
PARTIAL_BYTES = 4  # split-K's partial results are FP32
# Which e.gemm_*_fraction applies to a product's precision (on the units that run it).
GEMM_LEVEL = {"fp64": "gemm_fp32_fraction", "fp32": "gemm_fp32_fraction", "tf32": "gemm_tf32_fraction",
              "bf16": "gemm_16bit_fraction", "fp16": "gemm_16bit_fraction", "fp8": "gemm_8bit_fraction",
              "int8": "gemm_8bit_fraction"}
# A matrix kernel's kind and role -> the factors on its level (a product of several: their mean).
KIND_FACTORS = {("conv", "forward"): ("conv_forward_factor",),
                ("conv", "forward_winograd"): ("conv_winograd_factor",),
                ("conv", "input_grad"): ("conv_input_grad_factor",),
                ("conv", "weight_grad"): ("conv_weight_grad_factor",),
                ("conv", "input_weight_grad"): ("conv_input_grad_factor", "conv_weight_grad_factor"),
                ("conv", "weight_grad_winograd"): ("conv_weight_grad_winograd_factor",),
                ("conv", "input_weight_grad_winograd"): ("conv_input_grad_factor", "conv_weight_grad_winograd_factor"),
                ("attention", "forward"): ("attention_forward_factor",),
                ("attention", "backward"): ("attention_backward_factor",)}
# Blocks of a long-row kernel (1,024 threads each) one compute unit runs at once: 2,048 threads per SM on
# Pascal, Volta, the A100 and Hopper (Note [Rows read again]).
ROWS_IN_FLIGHT_PER_UNIT = 2
# NVIDIA's architectures, whose convolutions cuDNN runs (Note [Layout conversions]); and those of them
# whose cuDNN runs an FP32 3x3 forward convolution as an implicit GEMM, not as Winograd (the H200's:
# costs/products.py's Note [Which convolutions run as Winograd]). Other chips keep the Winograd rule.
CUDNN_ARCHITECTURES = ("pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell")
NO_FP32_WINOGRAD = ("ampere", "ada", "hopper", "blackwell")
CHANNEL_ALIGNMENT_BYTES = 16  # Note [Unaligned channels]; below, an element's bytes on the matrix units
MATRIX_ELEMENT_BYTES = {"tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}
# Which memory fraction a kernel of each kind streams at.
MEMORY_CLASS = {"reduction": "reduction_memory_fraction", "norm": "norm_memory_fraction",
                "optimizer": "optimizer_memory_fraction"}  # Note [Optimizer steps]


@dataclass(frozen=True)
class Prediction:
    seconds: float
    bound: str  # "compute", "memory" or "latency" (the fixed costs outweigh the work)
    achieved_fraction_of_peak: float  # of the peak that bounds it: FLOP/s, or bytes/s if memory-bound


@dataclass(frozen=True)
class MatrixKernel:
    """The matrix library's kernel the model picked for a product: its tile, split and times."""

    tile_m: int
    tile_n: int
    split_k: int
    compute_seconds: float
    memory_seconds: float  # of the operands
    fixed_seconds: float  # the part of compute_seconds that does not grow with the work
    reduction_seconds: float = 0.0  # split-K's second pass over the partial results, after the first

    @property
    def seconds(self) -> float:
        return max(self.compute_seconds, self.memory_seconds) + self.reduction_seconds


def error_class(cost: Cost, precision: str | None = None) -> str:
    """The kernel class whose held-out error (tools/bench/perf_model.py) a kernel's prediction carries:
    gemm_fp32, gemm_tensor (a product on matrix units), conv, attention, elementwise, norm, reduction."""
    if cost.kind == "matmul":
        return "gemm_fp32" if (precision or cost.precision) in ("fp32", "fp64") else "gemm_tensor"
    if cost.kind in ("conv", "attention", "norm", "reduction"):
        return cost.kind
    return "elementwise"


def roofline_seconds(cost: Cost, dtype: str | None, profile: Profile) -> float:
    """The plain datasheet roofline: max(FLOPs / peak, bytes / bandwidth), no launch cost, no efficiency,
    at the peak of the precision the kernel runs in, of the bytes that reach memory (memory_bytes)."""
    return max(cost.flops / peak_rate(cost, dtype, profile),
               memory_bytes(cost, profile) / profile.memory.bandwidth_bytes_per_s)


def kernel_seconds(cost: Cost, dtype: str | None, profile: Profile) -> Prediction:
    """Predicted time of the kernel that does `cost`. dtype: a precision key ("tf32" to model TF32
    matrix products of FP32 tensors) or None for the cost's own precision. Views take no time."""
    if cost.kind == "view":
        return Prediction(0.0, "latency", 0.0)
    if cost.as_gemm is not None and _winograd_runs_direct(cost, dtype, profile):
        cost = cost.as_gemm
    peak, nbytes = peak_rate(cost, dtype, profile), memory_bytes(cost, profile)
    if cost.matrix is not None and cost.kind in MATRIX_KINDS:
        chosen = matrix_kernel(cost, dtype, profile)
        around = chosen.reduction_seconds + layout_conversion_seconds(cost, dtype, profile)
        compute = chosen.compute_seconds + around + _attention_exponential_seconds(cost, profile)
        memory, fixed = chosen.memory_seconds + around, chosen.fixed_seconds
    else:
        compute, fixed = _vector_seconds(cost, profile), 0.0
        memory = max(_memory_seconds(nbytes, profile, _memory_fraction(cost, profile), _row_occupancy(cost, profile)),
                     _norm_units_seconds(cost, nbytes, profile)) + _reduction_fixed_seconds(cost, profile)
    floor = profile.chip.graph_floor_s
    seconds = queued_seconds(max(compute, memory), profile)
    if compute >= memory:
        bound, fraction = "compute", cost.flops / (seconds * peak)
    else:
        bound, fraction = "memory", nbytes / (seconds * profile.memory.bandwidth_bytes_per_s)
        fraction_of_bandwidth = _memory_fraction(cost, profile)  # a small transfer's latency
        fixed = profile.efficiency.memory_half_bytes / (profile.memory.bandwidth_bytes_per_s * fraction_of_bandwidth)
    if floor + fixed > seconds / 2 or seconds <= profile.chip.kernel_floor_s:
        bound = "latency"
    return Prediction(seconds, bound, fraction)


def queued_seconds(work_seconds: float, profile: Profile) -> float:
    """A kernel queued on a stream behind others: its own floor plus its work, and never less than the
    stream's floor (Note [The equations])."""
    return max(profile.chip.kernel_floor_s, profile.chip.graph_floor_s + work_seconds)


def peak_rate(cost: Cost, dtype: str | None, profile: Profile) -> float:
    """The datasheet peak a kernel runs at: matrix kernels their precision's matrix rate (FP32's plain
    rate where a chip lacks the unit: PyTorch then computes in FP32); every other kernel the vector rate."""
    precision = dtype or cost.precision
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; one of {', '.join(PRECISIONS)}")
    if cost.kind not in MATRIX_KINDS:
        return profile.peak.vector_flops_per_s
    return profile.peak_of(precision)


def matrix_kernel(cost: Cost, dtype: str | None, profile: Profile) -> MatrixKernel:
    """The candidate of the profile's menu predicted fastest for a matrix cost (Note [How a matrix
    kernel is chosen])."""
    precision = profile.matrix_precision(dtype or cost.precision)
    padded = _padded_channels(cost, precision, profile)
    product = replace(cost.matrix, k=cost.matrix.k * padded / cost.channels) if padded else cost.matrix
    tiles = _menu(profile, precision, product.batch)
    level = (profile.efficiency.conv_unaligned_fraction if padded
             else getattr(profile.efficiency, GEMM_LEVEL[precision]) * _kind_factor(cost, profile, precision))
    rate = profile.peak_of(precision) * _clock_fraction(cost, precision, profile) * level
    efficiency = profile.efficiency
    setup, half_depth = ((efficiency.matrix_unit_setup_s, efficiency.matrix_unit_half_depth)
                         if _on_matrix_units(precision) else (efficiency.matrix_setup_s, efficiency.matrix_half_depth))
    memory = _memory_seconds(cost.bytes, profile, efficiency.elementwise_memory_fraction)
    best, best_seconds = None, math.inf
    most_split = 1 if _forward_convolution(cost) else profile.matrix.max_split_k
    for shape in _candidate_shapes(product, tiles, profile.chip.compute_units, most_split):
        edge = 1 + efficiency.matrix_tile_overhead * shape.edge
        depth = shape.slice_depth + half_depth
        compute = setup + shape.unit_work * edge * depth / rate
        reduction = 0.0
        if shape.split > 1:  # the partial results are written, then read and added by a second kernel
            reduction = queued_seconds(_memory_seconds(shape.partial_bytes, profile,
                                                       efficiency.elementwise_memory_fraction), profile)
        if max(compute, memory) + reduction < best_seconds:
            best, best_seconds = (shape, compute, reduction), max(compute, memory) + reduction
    shape, compute, reduction = best
    return MatrixKernel(shape.tile_m, shape.tile_n, shape.split, compute, memory, setup, reduction)


def _padded_channels(cost: Cost, precision: str, profile: Profile) -> int:
    """Note [Unaligned channels]: the channels cuDNN pads an ungrouped matrix-unit convolution's input to (0: none)."""
    if cost.kind != "conv" or not _on_matrix_units(precision) or profile.architecture not in CUDNN_ARCHITECTURES:
        return 0
    per_load = CHANNEL_ALIGNMENT_BYTES // MATRIX_ELEMENT_BYTES[precision]
    return 0 if cost.channels % per_load == 0 else math.ceil(cost.channels / per_load) * per_load


def layout_conversion_seconds(cost: Cost, dtype: str | None, profile: Profile) -> float:
    """Note [Layout conversions]: a kernel per converted tensor, which reads and writes it, where cuDNN
    runs the convolution on the matrix units."""
    if (not cost.layout_copies or profile.architecture not in CUDNN_ARCHITECTURES
            or not _on_matrix_units(profile.matrix_precision(dtype or cost.precision))):
        return 0.0
    fraction = profile.efficiency.elementwise_memory_fraction
    return sum(queued_seconds(_memory_seconds(2 * size, profile, fraction), profile) for size in cost.layout_copies)


def _menu(profile: Profile, precision: str, batch: int) -> tuple:
    """The tiles the library chooses between for a product in precision, batched or not."""
    matrix = profile.matrix
    if precision not in ("fp32", "fp64"):
        return matrix.tensor_tiles
    return matrix.batched_simt_tiles if batch > 1 and matrix.batched_simt_tiles else matrix.simt_tiles


@dataclass(frozen=True)
class _CandidateShape:
    """What a candidate kernel's time needs that no efficiency changes: computed once per product."""

    tile_m: int
    tile_n: int
    split: int
    unit_work: float  # waves * 2 * tm * tn * units * resident: the FLOPs per unit of depth the waves cost
    edge: float  # (tm + tn) / (tm * tn)
    slice_depth: float  # k / split
    partial_bytes: float  # split-K's FP32 partial results, written and read


@functools.lru_cache(maxsize=1 << 16)
def _candidate_shapes(shape: MatrixShape, tiles: tuple, units: int, max_split_k: int) -> tuple[_CandidateShape, ...]:
    largest = max(rows * columns for rows, columns in tiles)
    found = []
    for tile_m, tile_n in tiles:
        resident = min(MAX_RESIDENT_TILES, max(1, largest // (tile_m * tile_n)))
        output_tiles = shape.batch * math.ceil(shape.m / tile_m) * math.ceil(shape.n / tile_n)
        # Splitting the reduction only pays where the output tiles leave units idle.
        most = max_split_k if output_tiles < units * resident else 1
        for split in _splits(shape.k, most):
            count = output_tiles * split
            waves = math.ceil(count / (units * resident))
            found.append(_CandidateShape(
                tile_m, tile_n, split, waves * 2 * tile_m * tile_n * units * resident,
                (tile_m + tile_n) / (tile_m * tile_n), shape.k / split,
                2 * split * shape.batch * shape.m * shape.n * PARTIAL_BYTES if split > 1 else 0))
    return tuple(candidate for index, candidate in enumerate(found)
                 if not any(_never_slower(earlier, candidate) for earlier in found[:index]))


def _never_slower(one: _CandidateShape, other: _CandidateShape) -> bool:
    """Whether one is predicted no slower than other whatever the efficiencies: matrix_kernel's time
    grows with each of these. A candidate with such an earlier one is never chosen (the first of equal
    times is), so leaving it out changes no prediction: the fit prices products some 600,000 times, and
    most of a product's candidates are such."""
    return (one.unit_work <= other.unit_work and one.edge <= other.edge and one.slice_depth <= other.slice_depth
            and one.partial_bytes <= other.partial_bytes)


def _splits(depth: float, most: int) -> list[int]:
    splits, split = [1], 2
    while split <= most and depth / split >= MIN_SLICE_DEPTH:
        splits.append(split)
        split *= 2
    return splits


def _on_matrix_units(precision: str) -> bool:
    return precision not in ("fp32", "fp64")


def _forward_convolution(cost: Cost) -> bool:
    """A convolution's forward pass (direct or Winograd): cuDNN never splits its reduction."""
    return cost.kind == "conv" and cost.role.startswith("forward")


def _winograd_runs_direct(cost: Cost, dtype: str | None, profile: Profile) -> bool:
    """Whether a convolution that cuDNN could run as Winograd runs its implicit GEMM instead: on the
    matrix units (TF32), and a forward pass from Ampere on (Note [Which convolutions run as Winograd] in
    costs/products.py)."""
    if _on_matrix_units(profile.matrix_precision(dtype or cost.precision)):
        return True
    return cost.role == "forward_winograd" and profile.architecture in NO_FP32_WINOGRAD


def _clock_fraction(cost: Cost, precision: str, profile: Profile) -> float:
    """The share of the boost clock a matrix kernel runs at (Note [Sustained clock])."""
    sustained = profile.chip.sustained_fraction
    if cost.kind == "conv" and not _on_matrix_units(precision):
        return min(1.0, sustained * profile.efficiency.conv_clock_gain)
    return sustained


def _kind_factor(cost: Cost, profile: Profile, precision: str) -> float:
    tf32 = profile.efficiency.conv_tf32_factor if cost.kind == "conv" and precision == "tf32" else 1.0
    if _forward_convolution(cost) and _on_matrix_units(precision):
        return profile.efficiency.conv_matrix_forward_factor * tf32  # an implicit GEMM: Winograd is FP32's
    names = KIND_FACTORS.get((cost.kind, cost.role), ())
    if not names:
        return 1.0
    return sum(getattr(profile.efficiency, name) for name in names) / len(names) * tf32


def _vector_seconds(cost: Cost, profile: Profile) -> float:
    """Non-matrix arithmetic on the vector units; transcendentals at the special-function rate."""
    peak = profile.peak
    work = cost.flops + cost.transcendentals * peak.vector_flops_per_s / peak.special_functions_per_s
    seconds = work / (peak.vector_flops_per_s * profile.chip.sustained_fraction * profile.efficiency.vector_fraction)
    if cost.role == "softmax":  # Note [A softmax's pace]: one exponential per element
        cycles = cost.transcendentals * profile.efficiency.softmax_element_cycles / profile.chip.compute_units
        seconds = max(seconds, cycles / profile.chip.sustained_clock_hz)
    return seconds


def _attention_exponential_seconds(cost: Cost, profile: Profile) -> float:
    """Note [Attention's exponentials]: the special-function units' time for a fused attention's scores."""
    if cost.kind != "attention":
        return 0.0
    return cost.transcendentals / (profile.peak.special_functions_per_s * profile.chip.sustained_fraction)


def _memory_fraction(cost: Cost, profile: Profile) -> float:
    if cost.role == "softmax":
        return profile.efficiency.softmax_memory_fraction
    return getattr(profile.efficiency, MEMORY_CLASS.get(cost.kind, "elementwise_memory_fraction"))


def _row_occupancy(cost: Cost, profile: Profile) -> float:
    """Note [Row-wise kernels]: the share of the memory system a row-wise kernel keeps busy."""
    if not cost.rows:
        return 1.0
    half = profile.efficiency.row_half_rows_per_unit * profile.chip.compute_units
    return cost.rows / (cost.rows + half)


def _norm_units_seconds(cost: Cost, nbytes: float, profile: Profile) -> float:
    """Note [Rows of a norm]: the time a layer or RMS norm's compute units take over their shares of its rows."""
    if cost.kind != "norm" or not cost.rows or cost.role.startswith("softmax"):
        return 0.0
    efficiency = profile.efficiency
    return (cost.rows * efficiency.norm_row_s + nbytes / efficiency.norm_unit_bytes_per_s) / profile.chip.compute_units


def _reduction_fixed_seconds(cost: Cost, profile: Profile) -> float:
    """Note [Reductions]: a reduction's own time beyond its bytes, more where its blocks share an output (not
    a pooling's or a scan's, which combine nothing between blocks)."""
    if not cost.role.startswith("reduce"):
        return 0.0
    efficiency = profile.efficiency
    return efficiency.reduction_fixed_s + (efficiency.reduction_global_s if cost.role == "reduce_shared" else 0.0)


def memory_bytes(cost: Cost, profile: Profile) -> float:
    """The bytes a kernel moves to and from device memory: Note [Rows read again]."""
    if not cost.reread_bytes or not cost.rows:
        return cost.bytes
    row_bytes = (cost.bytes_read - cost.reread_bytes) / cost.rows  # one pass over one row
    in_flight = min(cost.rows, ROWS_IN_FLIGHT_PER_UNIT * profile.chip.compute_units)
    return cost.bytes - cost.reread_bytes if in_flight * row_bytes <= profile.chip.l2_bytes else cost.bytes


def _memory_seconds(nbytes: float, profile: Profile, fraction: float, occupancy: float = 1.0) -> float:
    if nbytes <= 0:
        return 0.0
    rate = profile.memory.bandwidth_bytes_per_s * fraction
    return (nbytes / occupancy + profile.efficiency.memory_half_bytes) / rate


def copy_seconds(nbytes: float, kind: str, pinned: bool, profile: Profile) -> float:
    """A copy of nbytes: "h2d"/"d2h" over the host link (pageable memory at the driver's staging rate,
    which already is an effective rate), "d2d" within one device's memory, "p2p" to a peer device."""
    links = profile.links
    if kind in ("h2d", "d2h"):
        if not pinned:
            return links.host_latency_s + nbytes / links.host_pageable_bytes_per_s
        return links.host_latency_s + nbytes / (copy_rate(kind, profile) * profile.efficiency.copy_fraction)
    if kind == "d2d":  # read and write the same memory
        return queued_seconds(_memory_seconds(2 * nbytes, profile, profile.efficiency.elementwise_memory_fraction),
                              profile)
    if kind == "p2p":
        return links.device_link_latency_s + nbytes / (copy_rate(kind, profile) * profile.efficiency.copy_fraction)
    raise ValueError(f"unknown copy kind {kind!r}; one of {', '.join(COPY_KINDS)}")


def copy_rate(kind: str, profile: Profile) -> float:
    """The datasheet rate a copy of this kind moves its bytes at, against which the report measures it:
    the pinned host link, the peer link, or half the memory bandwidth within a device (read and write)."""
    if kind in ("h2d", "d2h"):
        return profile.links.host_pinned_bytes_per_s
    if kind == "p2p":
        return device_link_rate(profile, ranks=2)
    return profile.memory.bandwidth_bytes_per_s / 2


def device_link_rate(profile: Profile, ranks: int) -> float:
    """One direction, one device: a switch gives every device its full rate to any peer, and so does
    PCIe (each card's own lanes to the host bridge); a mesh gives one link per peer, so a collective
    over n devices uses n-1 of the node's links."""
    links = profile.links
    if links.device_link_topology in ("switch", "pcie") or links.devices_per_node <= 1:
        return links.device_link_bytes_per_s
    peers_in_use = min(ranks, links.devices_per_node) - 1
    return links.device_link_bytes_per_s * peers_in_use / (links.devices_per_node - 1)
