"""What a cost rule reads and returns: the operator call as recorded (OpCall), its arguments by their
schema names (_Args, Tensor), and the Cost."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

# Profiler dtype name -> (element bytes, precision key of the profile's peak rates).
DTYPES = {
    "double": (8, "fp64"),
    "float": (4, "fp32"),
    "c10::Half": (2, "fp16"),
    "c10::BFloat16": (2, "bf16"),
    "c10::Float8_e4m3fn": (1, "fp8"),
    "c10::Float8_e5m2": (1, "fp8"),
    "c10::Float8_e4m3fnuz": (1, "fp8"),
    "c10::Float8_e5m2fnuz": (1, "fp8"),
    "signed char": (1, "int8"),
    "unsigned char": (1, "int8"),
    "bool": (1, "fp32"),
    "short int": (2, "fp32"),
    "int": (4, "fp32"),
    "long int": (8, "fp32"),
    "c10::complex<float>": (8, "fp32"),
    "c10::complex<double>": (16, "fp64"),
}
# c10::ScalarType codes, as a `dtype=` argument appears among the concrete inputs.
SCALAR_TYPES = {0: "unsigned char", 1: "signed char", 2: "short int", 3: "int", 4: "long int", 5: "c10::Half",
                6: "float", 7: "double", 9: "c10::complex<float>", 10: "c10::complex<double>", 11: "bool",
                15: "c10::BFloat16", 23: "c10::Float8_e5m2", 24: "c10::Float8_e4m3fn"}
# A TensorList's dtype is not recorded; optimizer state is FP32 in the common (mixed-precision) case.
TENSOR_LIST_DTYPE = "float"

KINDS = ("matmul", "conv", "attention", "elementwise", "reduction", "norm", "copy", "index", "optimizer",
         "view", "default")


@dataclass(frozen=True)
class OpCall:
    """One operator call as the profiler records it; one entry per argument in each list.

    shapes: a tensor's sizes, [] for a non-tensor (and for a 0-dim tensor: its dtype tells them apart),
    a list of sizes for a TensorList (the profiler's structured_input_shapes()).
    dtypes: "float", "c10::Half", ... for a tensor; "Scalar", "ScalarList", "TensorList" or "" otherwise.
    concrete_inputs: the value of each scalar or int-list argument, None or "" for tensors.
    output_shapes, output_dtypes: what the call returned, described the same way; empty where a
    recording did not note it (a call written by hand, a profiler's trace).
    channels_last: a tensor argument is channels-last (torch.channels_last), as a recording notes it
    (torch.openreg.record_activity's OperatorRecord.channels_last); False: PyTorch's default, NCHW.
    """

    name: str
    shapes: Sequence = ()
    dtypes: Sequence = ()
    concrete_inputs: Sequence = ()
    output_shapes: Sequence = ()
    output_dtypes: Sequence = ()
    channels_last: bool = False


@dataclass(frozen=True)
class MatrixShape:
    """The matrix product a matmul, convolution or attention kernel tiles: batch x (m x k) @ (k x n)."""

    batch: int
    m: int
    n: int
    k: float  # reduction depth; for attention the depth that makes 2*batch*m*n*k its FLOPs


@dataclass(frozen=True)
class Cost:
    flops: float
    bytes_read: float
    bytes_written: float
    kind: str
    known: bool = True  # False when no rule knew the operator and the default estimate was used
    precision: str = "fp32"  # which of the profile's peak rates applies
    matrix: MatrixShape | None = field(default=None, compare=False)
    transcendentals: float = 0.0  # exp, log, tanh, erf, ...: counted apart from FLOPs (special-function units)
    role: str = ""  # a matrix kernel's pass: "forward", "backward", "input_grad", "weight_grad", "input_weight_grad";
    #                 a row-wise kernel's: "softmax", "softmax_backward" ("" for the norms); a reduction's:
    #                 "reduce", or "reduce_shared" where blocks share an output (model.py's Note [Reductions])
    rows: int = 0  # a row-wise kernel's independent rows (softmax, layer norm): one block each, see model.py
    reread_bytes: float = 0.0  # of bytes_read, a row-wise kernel's later passes over its rows (model.py's
    #                            Note [Rows read again]): from L2, where the rows in flight fit in it
    as_gemm: Cost | None = field(default=None, compare=False)  # a Winograd convolution as an implicit GEMM,
    #                            where no Winograd kernel runs (Note [Which convolutions run as Winograd])
    layout_copies: tuple = ()  # a convolution's tensors (bytes of each) that cuDNN converts between NCHW
    #                            and NHWC around a matrix-unit kernel (model.py's Note [Layout conversions])
    channels: int = 0  # an ungrouped convolution's input channels (model.py's Note [Unaligned channels])

    @property
    def bytes(self) -> float:
        return self.bytes_read + self.bytes_written


# ----------------------------------------------------------------------------------------- arguments

@dataclass(frozen=True)
class Tensor:
    shape: tuple[int, ...]
    dtype: str

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * element_size(self.dtype)


def element_size(dtype: str) -> int:
    return DTYPES.get(dtype, (4, "fp32"))[0]


def precision_of(dtype: str) -> str:
    """The profile peak that applies to a profiler dtype name ("c10::Half" -> "fp16")."""
    return DTYPES.get(dtype, (4, "fp32"))[1]


# Note [Arguments by name]
# A recording lists an operator's arguments by position, as its schema orders them. A rule reads them by
# the schema's names (args.tensor("weight"), args.value("stride")): argument_names finds the overload of
# aten::<name> whose arguments the recorded ones fit (a tensor where the schema has a Tensor, a list of
# tensors where it has Tensor[], a value where it has none), so an argument a PyTorch release adds, or
# an overload that puts one in front (_scaled_dot_product_flash_attention.quantized), moves nothing. A
# name the call's schema does not have reads as absent (None, the default, []). Positions still work for
# what has no fixed name: every argument of an elementwise operator, a compiled kernel's buffers.


def _kind_of(dtype: str) -> str:
    if dtype in DTYPES:
        return "tensor"
    return {"TensorList": "tensors", "Scalar": "value", "ScalarList": "values"}.get(dtype, "absent")


# What a schema type must be for a recorded argument of each kind: (takes tensors, a list). An "absent"
# one (None, a string, a device) fits any type.
_KIND_TYPES = {"tensor": (True, False), "tensors": (True, True), "value": (False, False), "values": (False, True)}


def _fits(kind: str, schema_type: str) -> bool:
    takes_tensors = "Tensor" in schema_type
    listed = schema_type.startswith(("List[", "Optional[List[")) or schema_type.endswith("[]")
    return kind not in _KIND_TYPES or _KIND_TYPES[kind] == (takes_tensors, listed)


@functools.lru_cache(maxsize=4096)
def argument_names(name: str, kinds: tuple[str, ...]) -> dict[str, int]:
    """The schema's argument names of a recorded call of aten::<name> with arguments of these kinds,
    by position: the first overload they fit exactly, else the first they fit as a prefix of (a call
    written with its trailing defaults left out). Empty for an operator that is not aten's."""
    import torch  # here: a rule's module stays importable without it, for reading costs of recordings

    packet = getattr(torch.ops.aten, name, None)
    if packet is None:
        return {}
    schemas = [getattr(packet, overload)._schema for overload in packet.overloads()]
    def fit(schema) -> bool:
        arguments = schema.arguments[:len(kinds)]
        return len(arguments) == len(kinds) and all(
            _fits(kind, str(argument.type)) for kind, argument in zip(kinds, arguments, strict=True))

    fitting = [schema for schema in schemas if fit(schema)]
    fitting.sort(key=lambda schema: len(schema.arguments) != len(kinds))
    return {argument.name: index for index, argument in enumerate(fitting[0].arguments)} if fitting else {}


Key = int | str  # an argument's schema name, or its position


class _Args:
    """A recorded call's arguments, by schema name (Note [Arguments by name]) or position."""

    def __init__(self, call: OpCall):
        self.name = call.name.removeprefix("aten::")
        self.channels_last = call.channels_last
        self.shapes = list(call.shapes)
        self.dtypes = list(call.dtypes)
        self.values = list(call.concrete_inputs) + [None] * (len(self.shapes) - len(call.concrete_inputs))
        plain = [dtype for dtype in self.dtypes if dtype in DTYPES]
        self.list_dtype = plain[0] if plain else TENSOR_LIST_DTYPE
        self._names = argument_names(self.name, tuple(_kind_of(dtype) for dtype in self.dtypes))
        self.outputs = [Tensor(tuple(shape), dtype) for shape, dtype in zip(call.output_shapes, call.output_dtypes,
                                                                             strict=True) if dtype in DTYPES]

    def __len__(self) -> int:
        return len(self.shapes)

    def position(self, key: Key) -> int | None:
        """Where an argument is in the call; None if the call's schema has no such name."""
        index = key if isinstance(key, int) else self._names.get(key)
        return index if index is not None and index < len(self.shapes) else None

    def tensor(self, key: Key) -> Tensor | None:
        index = self.position(key)
        if index is not None and self.dtypes[index] in DTYPES:
            return Tensor(tuple(self.shapes[index]), self.dtypes[index])
        return None

    def tensor_list(self, key: Key) -> list[Tensor]:
        """A TensorList (or a list of optional tensors, recorded with dtype "") given as a list of shapes."""
        index = self.position(key)
        if index is None or self.dtypes[index] not in ("TensorList", ""):
            return []
        shapes = self.shapes[index]
        if not all(isinstance(shape, list | tuple) for shape in shapes):
            return []
        return [Tensor(tuple(shape), self.list_dtype) for shape in shapes]

    def tensors(self) -> list[Tensor]:
        """Every tensor argument, in order, lists flattened."""
        found = []
        for index in range(len(self)):
            single = self.tensor(index)
            found.extend([single] if single else self.tensor_list(index))
        return found

    def value(self, key: Key, default=None):
        index = self.position(key)
        value = self.values[index] if index is not None and index < len(self.values) else None
        return default if value in (None, "") else value


def message_bytes(call: OpCall) -> int:
    """The size of a collective's message as nccl-tests counts it, from the collective operator's
    arguments: its largest tensor argument (a list of tensors counts as their sum): the buffer of an
    all_reduce or broadcast, the gathered output of an all_gather, the input of a reduce_scatter."""
    args = _Args(call)
    sizes = [_bytes([args.tensor(i)]) if args.tensor(i) else _bytes(args.tensor_list(i)) for i in range(len(args))]
    return max(sizes, default=0)


def _bytes(tensors) -> int:
    return sum(tensor.nbytes for tensor in tensors if tensor is not None)


def broadcast(*shapes: Sequence[int]) -> tuple[int, ...]:
    rank = max((len(shape) for shape in shapes), default=0)
    padded = [(1,) * (rank - len(shape)) + tuple(shape) for shape in shapes]
    return tuple(max(sizes) if min(sizes) != 0 else 0 for sizes in zip(*padded, strict=True))


def _cost(kind, flops, read, written, first: Tensor | None, matrix=None, known=True, transcendentals=0,
          role="", rows=0, reread=0, layout=(), channels=0) -> Cost:
    precision = precision_of(first.dtype) if first else "fp32"
    return Cost(float(flops), float(read), float(written), kind, known, precision, matrix, float(transcendentals),
                role, rows, float(reread), layout_copies=tuple(layout), channels=channels)
