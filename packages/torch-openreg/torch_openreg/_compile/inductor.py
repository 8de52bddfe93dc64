"""Inductor's backend for the "openreg" device: Inductor's C++ code
generation for the CPU writes each kernel, and openreg's wrapper launches it
on the current openreg stream through torch_openreg._C._launch_compiled_kernel
(csrc/compile/CompiledKernel.cpp), which hands it translated device pointers.
Not here: a code generator of openreg's own (the kernels are Inductor's), or
any host call of a generated kernel (it would fault on device memory).
"""

from __future__ import annotations

import ctypes
import sys
import weakref
from typing import Any

import torch
from torch._inductor import config
from torch._inductor.codegen.common import (
    DeviceOpOverrides,
    register_backend_for_device,
    register_device_op_overrides,
)
from torch._inductor.codegen.cpp import CppScheduling
from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen
from torch._inductor.utils import Placeholder
from torch._inductor.virtualized import V

import torch_openreg._C as _C

DEVICE = "openreg"
# The entry point appended to every generated kernel (Note [How a generated
# kernel receives its arguments] in csrc/compile/CompiledKernel.cpp).
ENTRY_POINT = "openreg_entry"
# Ahead of time, the entry point of kernel K is K + AOT_ENTRY_SUFFIX.
AOT_ENTRY_SUFFIX = "_openreg_entry"
# What makes a generated function visible outside its library, in the words
# of the compiler that builds kernels on this platform (MSVC on Windows).
EXPORTED = "__declspec(dllexport)" if sys.platform == "win32" else '__attribute__((visibility("default")))'


# LITERALINCLUDE START: KERNEL_ENTRY_POINT
def _param(arg_type: str, index: int) -> str:
    """The C++ expression reading the kernel's argument `index` of declared
    type `arg_type` from params[index] (a pointer, an int64 or a double slot)."""
    slot = f"params[{index}]"
    if arg_type.endswith("*"):  # a buffer: its device pointer, translated
        return f"static_cast<{arg_type}>(*static_cast<void* const*>({slot}))"
    value_type = arg_type.removeprefix("const ").strip()
    if value_type in ("float", "double"):
        return f"static_cast<{value_type}>(*static_cast<const double*>({slot}))"
    return f"static_cast<{value_type}>(*static_cast<const int64_t*>({slot}))"


def entry_point_source(arg_types: list[str], ahead_of_time: bool = False) -> str:
    """C++ appended to a generated kernel's source: an entry point taking
    `params` that calls the kernel with each argument read at its declared
    type. torch.compile loads each kernel's library alone and finds
    `openreg_entry` in it; ahead of time (AOTInductor) every kernel lives in
    the model's one library, so kernel K's entry is `K_openreg_entry`, which
    the C++ wrapper calls by name."""
    kernel = str(Placeholder.KERNEL_NAME)  # Inductor writes the kernel's name there
    arguments = ",\n        ".join(_param(t, i) for i, t in enumerate(arg_types))
    if ahead_of_time:
        # No attribute: Inductor reads this last `extern "C"` line, up to its
        # first ')', as the declaration its C++ wrapper calls.
        head = f'extern "C" void {kernel}{AOT_ENTRY_SUFFIX}(void* const* params)'
    else:
        head = f'extern "C" {EXPORTED} void {ENTRY_POINT}(void* const* params)'
    return f"\n{head} {{\n    {kernel}({arguments});\n}}\n"
# LITERALINCLUDE END: KERNEL_ENTRY_POINT


# LITERALINCLUDE START: OPENREG_SCHEDULING
class OpenRegScheduling(CppScheduling):
    """Inductor's C++ scheduling for the CPU, whose kernels gain the openreg
    entry point. Everything else (fusion, vectorisation, the kernel bodies)
    is the CPU's: the device runs CPU code over translated memory."""

    def define_kernel(self, src_code: str, nodes: Any, kernel_args: Any = None) -> str:
        args = self.kernel_group.args if kernel_args is None else kernel_args
        _, _, arg_types = args.cpp_argdefs()
        # Appended after the kernel, which it calls. (The base class takes the
        # last `extern "C"` line as the kernel's declaration, which only the
        # C++ wrapper of AOTInductor uses: the entry point is what it calls.)
        entry = entry_point_source(arg_types, ahead_of_time=V.graph.cpp_wrapper)
        return super().define_kernel(src_code + entry, nodes, kernel_args)
# LITERALINCLUDE END: OPENREG_SCHEDULING


# ------------------------------------------------------------ the wrapper

# Generated kernel (the loaded Python binding of its .so) -> entry address.
_entry_addresses: dict[Any, int] = {}


def _entry_address(kernel: Any) -> int:
    """Address of openreg_entry in the shared library Inductor built for
    `kernel`: the library is already loaded, dlopen only finds it again."""
    library = ctypes.CDLL(kernel.__self__.__file__)
    return ctypes.cast(getattr(library, ENTRY_POINT), ctypes.c_void_p).value


# LITERALINCLUDE START: LAUNCH_GENERATED_KERNEL
def launch_compiled_kernel(kernel: Any, name: str, *args: Any) -> None:
    """What the generated wrapper calls instead of `kernel(*args)`: queues
    the kernel on the current stream of its first tensor's device and
    returns at once (asynchronous, like an eager openreg operator)."""
    entry = _entry_addresses.get(kernel)
    if entry is None:
        entry = _entry_addresses[kernel] = _entry_address(kernel)
    _C._launch_compiled_kernel(name, entry, args)
# LITERALINCLUDE END: LAUNCH_GENERATED_KERNEL


# LITERALINCLUDE START: OPENREG_WRAPPER
class _OpenRegWrapperLines:
    """The lines of the generated Python wrapper that differ for openreg:
    the hard-coded device checks a new device meets in PythonWrapperCodegen."""

    def write_header(self) -> None:
        super().write_header()
        self.imports.writeline(f"from {__name__} import launch_compiled_kernel")

    def _generate_kernel_call_helper(self, kernel_name: str, call_args: list[str], *,
                                     device: torch.device | None = None, triton: bool = True,
                                     **kwargs: Any) -> None:
        # The base class calls a C++ kernel on the host for "cpu" and "mps"
        # only; an openreg kernel must run on the device instead.
        device = device or V.graph.get_current_device_or_throw()
        if device.type != DEVICE:
            super()._generate_kernel_call_helper(kernel_name, call_args, device=device, triton=triton, **kwargs)
            return
        if triton:
            raise RuntimeError("openreg runs Inductor's C++ kernels, not Triton kernels: leave "
                               "torch._inductor.config.cpu_backend at 'cpp'")
        self.writeline(f"launch_compiled_kernel({', '.join([kernel_name, repr(kernel_name), *call_args])})")

    def make_allocation(self, name: str, device: torch.device, dtype: torch.dtype, shape: Any, stride: Any,
                        allocation_shape: Any = None, is_pinned: bool = False) -> str:
        # The base class names only the device type for devices it does not
        # know (it puts a device guard around GPU code instead), which would
        # allocate on the current device rather than on device.index.
        if device.type != DEVICE:
            return super().make_allocation(name, device, dtype, shape, stride, allocation_shape, is_pinned)
        allocation_shape = shape if allocation_shape is None else allocation_shape
        line = (f"{name} = empty_strided({self.codegen_python_shape_tuple(allocation_shape)}, "
                f"{self.codegen_python_shape_tuple(stride)}, device='{device}', dtype={dtype})")
        if allocation_shape != shape:
            line += (f".as_strided({self.codegen_python_shape_tuple(shape)}, "
                     f"{self.codegen_python_shape_tuple(stride)})")
        return line


# Note [Inductor's choices keyed on the device type "cpu"]
# Inductor makes two choices for a node by asking whether its device type is
# "cpu", with no per-device switch, only config keys:
# - Its ops handlers read the device's code generation backend from
#   torch._inductor.utils.get_current_backend(), which answers
#   config.cpu_backend ("cpp") for "cpu" and config.cuda_backend ("triton")
#   for every device it does not name. Under "triton" the C++ kernels of an
#   openreg graph would follow Triton's data-type rules: a `masked` value
#   takes the dtype of its body's result, which the C++ code generation
#   leaves unset (the vectorised kernel then cannot broadcast it: the backward
#   of cross_entropy), and float16/bfloat16 values are typed float32 (Triton
#   upcasts them; the C++ code generation types them as they are).
# - When fusing, the scheduler may reorder, reindex or invert a node's loops.
#   Those transforms read a node's group as a SIMD (Triton-style) kernel has
#   it, (numel, reduction numel), and are skipped for nodes whose device type
#   is "cpu" (SchedulerNode.is_cpu), whose C++ kernels group nodes by their
#   loop sizes.
# An openreg node is scheduled by that C++ code generation, so it needs the
# CPU's answers. Inductor creates the wrapper of a graph just before the
# graph's scheduler, and generates the wrapper's code last, after every
# kernel: the keys below hold the CPU's answers in between, for graphs holding
# openreg kernels only. (config.cuda_backend is read once more, when Inductor
# registers its backends, which happens before the first graph's wrapper.)
CPP_CODEGEN_CONFIG = {
    "cuda_backend": "cpp",
    "loop_ordering_after_fusion": False,
    "loop_reindexing_after_fusion": False,
    "loop_index_inversion_in_fusion": False,
}


# How many openreg wrappers hold the keys, and the values to restore when the
# last one lets go. A compilation that fails lets go only when its wrapper is
# collected, maybe during a later compilation: the count keeps that from
# turning the keys back under it.
_config_holders = 0
_config_before: dict[str, Any] = {}


def _hold_cpp_codegen_config() -> None:
    global _config_holders, _config_before
    if _config_holders == 0:
        _config_before = {name: getattr(config, name) for name in CPP_CODEGEN_CONFIG}
        for name, value in CPP_CODEGEN_CONFIG.items():
            setattr(config, name, value)
    _config_holders += 1


def _release_cpp_codegen_config() -> None:
    global _config_holders
    _config_holders -= 1
    if _config_holders == 0:
        for name, value in _config_before.items():
            setattr(config, name, value)


class HoldsCppCodegenConfig:
    """Base of openreg's wrappers (this Python one, and AOTInductor's C++ one
    in aot_inductor.py): holds CPP_CODEGEN_CONFIG from the wrapper's creation
    until its code is generated, or until a failed compilation drops the
    wrapper before that (a finalizer runs once)."""

    def hold_config_until_generated(self) -> None:
        _hold_cpp_codegen_config()
        self._restore_config = weakref.finalize(self, _release_cpp_codegen_config)

    def generate(self, is_inference: bool) -> Any:
        try:
            return super().generate(is_inference)
        finally:
            self._restore_config()


class OpenRegWrapperCodegen(HoldsCppCodegenConfig, _OpenRegWrapperLines, PythonWrapperCodegen):
    """Inductor's Python wrapper for graphs holding openreg kernels."""

    def __init__(self) -> None:
        super().__init__()
        self.hold_config_until_generated()

    @staticmethod
    def create(is_subgraph: bool, subgraph_name: str | None, parent_wrapper: PythonWrapperCodegen | None,
               partition_signatures: Any = None) -> PythonWrapperCodegen:
        if is_subgraph:
            return OpenRegSubgraphWrapperCodegen(subgraph_name, parent_wrapper, partition_signatures)
        return OpenRegWrapperCodegen()


class OpenRegSubgraphWrapperCodegen(_OpenRegWrapperLines, SubgraphPythonWrapperCodegen):
    """The same, for the subgraphs of control flow (torch.cond, while_loop)."""
# LITERALINCLUDE END: OPENREG_WRAPPER


# LITERALINCLUDE START: DEVICE_OP_OVERRIDES
class OpenRegDeviceOpOverrides(DeviceOpOverrides):
    """The Python snippets Inductor writes into wrappers for device
    management on openreg."""

    def import_get_raw_stream_as(self, name: str) -> str:
        return f"from torch_openreg._compile.device_interface import get_raw_stream as {name}"

    def set_device(self, device_idx: int) -> str:
        return f"torch.openreg.set_device({device_idx})"

    def synchronize(self) -> str:
        return "torch.openreg.synchronize()"

    def device_guard(self, device_idx: int) -> str:
        return f"torch.openreg.device({device_idx})"

    def current_stream(self) -> str:
        return "torch.openreg.current_stream()"

    def cpp_kernel_type(self) -> str:
        # AOTInductor's C++ wrapper declares a member of this type per kernel,
        # for devices that load kernels at run time; openreg's kernels are
        # functions of the model's own library, as the CPU's are.
        return "void*"


def register() -> None:
    # The C++ wrapper is AOTInductor's (aot_inductor.py), which imports this module.
    from torch_openreg._compile.aot_inductor import OpenRegCppWrapperCodegen

    register_backend_for_device(DEVICE, OpenRegScheduling, OpenRegWrapperCodegen,
                                device_cpp_wrapper_codegen=OpenRegCppWrapperCodegen)
    register_device_op_overrides(DEVICE, OpenRegDeviceOpOverrides())
# LITERALINCLUDE END: DEVICE_OP_OVERRIDES
