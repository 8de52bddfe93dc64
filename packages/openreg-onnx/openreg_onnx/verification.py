"""Verification of an exported model: run it in onnxruntime on the same inputs
and compare each output with what the model computed on its own device,
under a tolerance per dtype. Not an accuracy test of the model itself: the
reference is the device's result, whatever it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import onnx
import onnxruntime
import torch
from torch.utils import _pytree as pytree

__all__ = ["TOLERANCES", "OutputCheck", "VerificationError", "VerificationResult", "verify"]

# LITERALINCLUDE START: ONNX_TOLERANCES
# (rtol, atol) per dtype, compared as torch.isclose does. onnxruntime and the
# device's CPU kernels sum in different orders (and onnxruntime fuses some
# operators), so results differ by a few units in the last place per layer;
# these bounds allow that for small models and no more. Other dtypes
# (integers, bool) must match exactly.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-7, 1e-9),
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-2, 1e-3),
}
# LITERALINCLUDE END: ONNX_TOLERANCES


class VerificationError(AssertionError):
    """The exported model's results differ from the device's beyond tolerance."""


@dataclass(frozen=True)
class OutputCheck:
    """One output: its largest absolute error against the device's result and
    whether every element is within (rtol, atol)."""
    name: str
    dtype: torch.dtype
    shape: tuple[int, ...]
    max_abs_error: float
    rtol: float
    atol: float
    passed: bool
    detail: str = ""  # why the output could not be compared, if it could not

    def __str__(self) -> str:
        verdict = "ok" if self.passed else f"MISMATCH {self.detail}".rstrip()
        return (f"{self.name}: {str(self.dtype).removeprefix('torch.')}{list(self.shape)} largest error "
                f"{self.max_abs_error:.3g} (rtol {self.rtol:g}, atol {self.atol:g}) {verdict}")


@dataclass(frozen=True)
class VerificationResult:
    outputs: tuple[OutputCheck, ...]

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.outputs)

    @property
    def max_abs_error(self) -> float:
        return max((check.max_abs_error for check in self.outputs), default=0.0)

    def __str__(self) -> str:
        lines = [f"onnxruntime vs device: {'ok' if self.passed else 'MISMATCH'}"]
        return "\n".join(lines + [f"  {check}" for check in self.outputs])

    def raise_if_failed(self) -> None:
        if not self.passed:
            raise VerificationError(f"the exported model does not match the device's results\n{self}")


# LITERALINCLUDE START: ONNX_VERIFY
def verify(program: torch.onnx.ONNXProgram, model: torch.nn.Module | torch.export.ExportedProgram,
           args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None,
           tolerances: dict[torch.dtype, tuple[float, float]] | None = None) -> VerificationResult:
    """Runs ``program`` in onnxruntime (CPU) and ``model`` on its device, both
    on ``args``/``kwargs`` (which may have other sizes than the export's
    inputs along dynamic dimensions), and compares output by output.
    ``tolerances`` overrides entries of TOLERANCES."""
    if isinstance(model, torch.export.ExportedProgram):
        model = model.module()
    _refuse_bfloat16(program)
    limits = {**TOLERANCES, **(tolerances or {})}
    session = onnxruntime.InferenceSession(program.model_proto.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    feeds = _feeds(session, args, kwargs)
    with torch.no_grad():
        expected = [t.cpu() for t in pytree.tree_leaves(model(*args, **(kwargs or {})))
                    if isinstance(t, torch.Tensor)]
    actual = session.run(None, feeds)
    if len(actual) != len(expected):
        raise VerificationError(f"the exported model has {len(actual)} outputs but the model "
                                f"returned {len(expected)} tensors")
    names = [output.name for output in session.get_outputs()]
    return VerificationResult(tuple(
        _check(name, torch.from_numpy(result), reference, limits)
        for name, result, reference in zip(names, actual, expected, strict=True)))
# LITERALINCLUDE END: ONNX_VERIFY


def _feeds(session: onnxruntime.InferenceSession, args, kwargs) -> dict[str, Any]:
    # The exporter makes one graph input per tensor of (args, kwargs), in
    # pytree order; other values were fixed into the graph at export time.
    tensors = [t for t in pytree.tree_leaves((tuple(args), kwargs or {})) if isinstance(t, torch.Tensor)]
    inputs = session.get_inputs()
    if len(tensors) != len(inputs):
        raise VerificationError(f"the exported model takes {len(inputs)} inputs but {len(tensors)} "
                                "tensors were given")
    return {spec.name: _host_array(t) for spec, t in zip(inputs, tensors, strict=True)}


_BFLOAT16_REFUSAL = ("openreg_onnx.verify does not support bfloat16: onnxruntime's CPU provider has no bfloat16 "
                     "kernel for most operators, and its Python API takes numpy arrays, which have no bfloat16; "
                     "verify a float32 copy of the model and its inputs (model.float(), x.float())")


def _refuse_bfloat16(program: torch.onnx.ONNXProgram) -> None:
    """Before onnxruntime is asked to load the model, which would fail with
    an error about a missing kernel rather than about bfloat16."""
    graph = program.model_proto.graph
    types = [value.type.tensor_type.elem_type for value in (*graph.input, *graph.output)]
    types += [initializer.data_type for initializer in graph.initializer]
    if onnx.TensorProto.BFLOAT16 in types:
        raise VerificationError(_BFLOAT16_REFUSAL)


def _host_array(tensor: torch.Tensor):
    if tensor.dtype == torch.bfloat16:
        raise VerificationError(_BFLOAT16_REFUSAL)
    return tensor.detach().cpu().numpy()


def _check(name: str, actual: torch.Tensor, expected: torch.Tensor,
           limits: dict[torch.dtype, tuple[float, float]]) -> OutputCheck:
    rtol, atol = limits.get(expected.dtype, (0.0, 0.0))
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        detail = f"(onnxruntime returned {actual.dtype}{list(actual.shape)})"
        return OutputCheck(name, expected.dtype, tuple(expected.shape), float("inf"), rtol, atol, False, detail)
    if expected.is_floating_point():
        error = (actual.double() - expected.double()).abs()
        # Where both are the same inf or both NaN there is no error.
        error = torch.where(torch.isclose(actual, expected, equal_nan=True) & ~error.isfinite(),
                            0.0, error)
        passed = bool(torch.isclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True).all())
    else:
        error = (actual.long() - expected.long()).abs()
        passed = bool(actual.eq(expected).all())
    largest = float(error.max()) if error.numel() else 0.0
    return OutputCheck(name, expected.dtype, tuple(expected.shape), largest, rtol, atol, passed)
