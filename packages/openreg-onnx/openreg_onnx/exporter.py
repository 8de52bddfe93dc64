"""openreg_onnx.export: torch.onnx.export (the dynamo path) with openreg's
translations added, optional verification in onnxruntime, and a named error
for an operator that has no translation. Not a second exporter: everything
else, and every other error, is PyTorch's own.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from onnxscript import ir

from openreg_onnx.translations import translation_table
from openreg_onnx.verification import verify as verify_program

__all__ = ["MissingTranslationError", "export"]

# Operators the exporter translates itself: ATen, its primitives, and the
# ONNX operators PyTorch exposes as torch.ops.onnx.*.
_BUILT_IN_NAMESPACES = {"aten", "prims", "onnx"}


class MissingTranslationError(RuntimeError):
    """An operator of the model has no ONNX translation. Raised from
    PyTorch's own export error, which stays attached as ``__cause__``."""


# LITERALINCLUDE START: ONNX_EXPORT
def export(
    model: torch.nn.Module | torch.export.ExportedProgram,
    args: tuple[Any, ...] = (),
    f: str | os.PathLike | None = None,
    *,
    kwargs: dict[str, Any] | None = None,
    verbose: bool | None = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    opset_version: int | None = None,
    dynamo: bool = True,
    external_data: bool = True,
    dynamic_shapes: dict[str, Any] | tuple[Any, ...] | list[Any] | None = None,
    custom_translation_table: dict[Callable, Callable] | None = None,
    report: bool = False,
    optimize: bool = True,
    verify: bool = False,
    profile: bool = False,
    dump_exported_program: bool = False,
    artifacts_dir: str | os.PathLike = ".",
    export_params: bool = True,
    keep_initializers_as_inputs: bool = False,
    dynamic_axes: Mapping[str, Mapping[int, str]] | Mapping[str, Sequence[int]] | None = None,
) -> torch.onnx.ONNXProgram:
    """``torch.onnx.export(..., dynamo=True)`` with openreg's translations in
    ``custom_translation_table`` (the caller's entries win). With ``verify``,
    the exported model runs in onnxruntime on ``args``/``kwargs`` and must
    match what ``model`` computes on its device (see ``openreg_onnx.verify``);
    a mismatch raises ``VerificationError``. The TorchScript path
    (``dynamo=False``) and its deprecated options are not supported."""
    if dynamo is not True:
        raise ValueError("openreg_onnx.export exports through torch.export only (dynamo=True); "
                         "for the TorchScript exporter call torch.onnx.export(..., dynamo=False)")
    table = {**translation_table(), **(custom_translation_table or {})}
    try:
        # Optimised and saved below, once the weights are on the host.
        program = torch.onnx.export(
            model, args, None, kwargs=kwargs, verbose=verbose, input_names=input_names,
            output_names=output_names, opset_version=opset_version, dynamo=True,
            dynamic_shapes=dynamic_shapes, custom_translation_table=table, report=report,
            optimize=False, profile=profile, dump_exported_program=dump_exported_program,
            artifacts_dir=artifacts_dir, dynamic_axes=dynamic_axes)
    except torch.onnx.OnnxExporterError as error:
        missing = _untranslated_operators(model, args, kwargs, dynamic_shapes, table)
        if missing:
            raise MissingTranslationError(_how_to_translate(missing)) from error
        raise  # PyTorch's own error, unchanged
    program.model = _on_host(program.model)
    if optimize:
        program.optimize()
    if f is not None:
        program.save(f, include_initializers=export_params, external_data=external_data,
                     keep_initializers_as_inputs=keep_initializers_as_inputs)
    if verify:
        result = verify_program(program, model, args, kwargs)
        if verbose is not False:
            print(result)
        result.raise_if_failed()
    return program
# LITERALINCLUDE END: ONNX_EXPORT


def _on_host(model: ir.Model) -> ir.Model:
    """The same model rebuilt from its serialized form, before it is optimised:
    its weights are host copies, and nothing in it refers to device memory.

    The exporter leaves each weight as a view of the device tensor (copied to
    the host at every serialization), and keeps views of unused buffers too,
    but an ONNX model lives on the host. And onnxscript's graph optimiser keeps
    the last graph it optimised alive (its rewrite rules hold on to the last
    node they matched): with device views in it, the last exported model's
    device memory would stay taken for the life of the process."""
    return ir.from_proto(ir.to_proto(model))


def _untranslated_operators(model, args, kwargs, dynamic_shapes, table) -> list[torch._ops.OpOverload]:
    """Operators outside the built-in namespaces that the model calls and the
    table does not translate. Runs only after an export failed: it captures
    the model again with torch.export, and finds nothing if that fails too."""
    if isinstance(model, torch.export.ExportedProgram):
        program = model
    else:
        try:
            program = torch.export.export(model, tuple(args), kwargs, dynamic_shapes=dynamic_shapes,
                                          strict=False)
        except Exception:  # not a translation problem: PyTorch's error says what is
            return []
    targets = {node.target for node in program.graph.nodes if node.op == "call_function"}
    return sorted((t for t in targets if isinstance(t, torch._ops.OpOverload)
                   and t.namespace not in _BUILT_IN_NAMESPACES and t not in table), key=str)


def _how_to_translate(operators: list[torch._ops.OpOverload]) -> str:
    first = operators[0]
    names = ", ".join(op.name() for op in operators)
    parameters = ", ".join(argument.name for argument in first._schema.arguments)
    function = first._schema.name.split("::")[-1]
    return (
        f"no ONNX translation for {names}. The exporter translates ATen operators; every other "
        "operator needs a function, written with onnxscript, that builds the ONNX nodes computing "
        f"what it computes. For {first.name()}, whose schema is\n    {first._schema}\n"
        "write, for example:\n\n"
        "    from onnxscript import opset18 as op\n\n"
        f"    def {function}({parameters}):\n"
        "        return op.Identity(...)  # the ONNX operators that compute its result\n\n"
        "and pass it to the export:\n\n"
        f"    openreg_onnx.export(model, args, custom_translation_table={{\n"
        f"        torch.ops.{first.namespace}.{first._opname}.{first._overloadname}: {function}}})\n\n"
        "openreg's own translations (openreg_onnx/translations.py) are examples.")
