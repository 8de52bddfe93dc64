"""AOTInductor for the "openreg" device: the C++ wrapper that
torch._inductor.aoti_compile_and_package writes for a graph on openreg. Its
kernels are Inductor's C++ kernels for the CPU (OpenRegScheduling in
inductor.py), launched on the current openreg stream through
torch_openreg_launch_kernel (include/torch_openreg/AotLaunch.h); its weights
are placed in openreg memory by the model's constant-folding step, which the
runner registered for "openreg" runs at load (csrc/compile/AotRunner.cpp).
Not here: running the model (that runner), or a host call of a kernel.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch._inductor import config
from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
from torch._inductor.virtualized import V

import torch_openreg
from torch_openreg._compile.inductor import AOT_ENTRY_SUFFIX, DEVICE, EXPORTED, HoldsCppCodegenConfig

# The kernels are compiled as the CPU's: the model's library includes the
# CPU's AOTI headers.
KERNEL_DEVICE = "cpu"


# Note [The precompiled header AOTInductor asks of each device]
# Before it compiles a model, AOTInductor precompiles the header
# torch/csrc/inductor/aoti_include/<device type>.h of torch's include
# directory (codecache.py, AotCodeCompiler.compile and
# _get_cpp_wrapper_header), a file a device outside torch cannot add, so the
# step fails for "openreg" (the model itself includes the CPU's header). It is
# a speed-up only: config.aot_inductor.precompile_headers turns it off, and
# it is read after the wrapper has generated its code, while the graph still
# holds the wrapper. So an openreg C++ wrapper turns it off until the wrapper
# is collected; a compilation for another device in between merely compiles
# its headers without the precompiled copy.
_precompile_off_holders = 0
_precompile_before = True


def _hold_precompile_off() -> None:
    global _precompile_off_holders, _precompile_before
    if _precompile_off_holders == 0:
        _precompile_before = config.aot_inductor.precompile_headers
        config.aot_inductor.precompile_headers = False
    _precompile_off_holders += 1


def _release_precompile_off() -> None:
    global _precompile_off_holders
    _precompile_off_holders -= 1
    if _precompile_off_holders == 0:
        config.aot_inductor.precompile_headers = _precompile_before


# LITERALINCLUDE START: AOT_LAUNCH_PRELUDE
def launch_header() -> str:
    """The include written at the top of an openreg model: the launch ABI and
    the shims (include/torch_openreg/AotLaunch.h), by their installed path,
    since AOTInductor gives a device no include directory of its own."""
    return f'#include "{torch_openreg.get_include()}/torch_openreg/AotLaunch.h"'


# The kernel API's MAJOR version the model is compiled against, as the model
# records it: the runner refuses a model of another MAJOR version
# (csrc/compile/AotRunner.cpp), whose launches would pass arguments laid out
# for another torch_openreg_launch_kernel.
KERNEL_API_MAJOR = "TORCH_OPENREG_API_VERSION_MAJOR"


def kernel_api_record() -> str:
    return (f'extern "C" {EXPORTED} int torch_openreg_model_kernel_api_major() '
            f'{{ return {KERNEL_API_MAJOR}; }}')
# LITERALINCLUDE END: AOT_LAUNCH_PRELUDE


# LITERALINCLUDE START: AOT_CONSTANT_PLACEMENT
# The constant-folding step of an openreg model (Note [Where an AOTInductor
# model for openreg keeps its weights] in csrc/compile/AotRunner.cpp): a copy
# in openreg memory of each constant still on the host, on the current
# device, under the constant's name. The container puts the copies in place
# of the host constants; a second call finds none left on the host.
CONSTANT_PLACEMENT = """
std::unordered_map<std::string, AtenTensorHandle> placed;
for (size_t i = 0; i < this->num_constants(); ++i) {
    AtenTensorHandle host = constants_->at(i).get();
    int32_t device_type;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(host, &device_type));
    if (device_type != aoti_torch_device_type_cpu()) {
        continue;
    }
    int64_t dim;
    int64_t* sizes;
    int64_t* strides;
    int32_t dtype;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_dim(host, &dim));
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_sizes(host, &sizes));
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_strides(host, &strides));
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(host, &dtype));
    AtenTensorHandle device;
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(
        dim, sizes, strides, dtype, aoti_torch_device_type_privateuse1(), -1, &device));
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_copy_(device, host, /*non_blocking=*/0));
    placed.emplace(this->constant_name(static_cast<int64_t>(i)), device);
}
return placed;
"""
# LITERALINCLUDE END: AOT_CONSTANT_PLACEMENT


# LITERALINCLUDE START: OPENREG_CPP_WRAPPER
class OpenRegCppWrapperCodegen(HoldsCppCodegenConfig, CppWrapperCpu):
    """Inductor's C++ wrapper for the CPU, for a graph on openreg (AOTInductor):
    the same model, with openreg's allocations, kernel launches and weights."""

    def __init__(self) -> None:
        if not V.graph.aot_mode:
            # The launches and shims are declared by the prelude of AOT mode;
            # torch.compile's Python wrapper serves the other case.
            raise NotImplementedError("openreg does not support torch.compile with cpp_wrapper=True: "
                                      "its C++ wrapper serves AOTInductor only")
        self.device = DEVICE  # read by the base class's constructor
        super().__init__()
        # The kernels are the CPU's vectorised C++ code: build them with the
        # CPU's instruction-set flags (the base class asks only for "cpu").
        self.needs_vec_isa = True
        # The base class writes a constant's device where the model runtime
        # loads it; Note [Where an AOTInductor model for openreg keeps its
        # weights] says why that is the host for openreg.
        self._constants_on_host = False
        # Note [Inductor's choices keyed on the device type "cpu"] (inductor.py).
        self.hold_config_until_generated()
        _hold_precompile_off()  # Note [The precompiled header AOTInductor asks of each device]
        weakref.finalize(self, _release_precompile_off)

    @staticmethod
    def create(is_subgraph: bool, subgraph_name: str | None, parent_wrapper: Any,
               partition_signatures: Any = None) -> CppWrapperCpu:
        if is_subgraph:
            raise NotImplementedError("openreg does not support control flow (subgraphs) in AOTInductor models")
        return OpenRegCppWrapperCodegen()

    def add_device_include(self, device: str) -> None:
        if device != DEVICE:
            super().add_device_include(device)
            return
        if device in self.included_devices:
            return
        self.included_devices.add(device)
        super().add_device_include(KERNEL_DEVICE)
        if V.graph.aot_mode:
            self.header.writeline(launch_header())
            self.header.writeline(kernel_api_record())

    def codegen_device(self, device: torch.device) -> str:
        # The model runtime names openreg as the PrivateUse1 device type. The
        # index stays the base class's: this->device_idx_, which the runner
        # leaves at -1 (the current device, which it sets).
        if device.type != DEVICE:
            return super().codegen_device(device)
        if self._constants_on_host:
            return super().codegen_device(torch.device(KERNEL_DEVICE))
        self.used_cached_devices.add("privateuse1")
        return f"cached_torch_device_type_privateuse1, {device.index or 0}"

    def codegen_model_constructor(self) -> None:
        self._constants_on_host = True
        try:
            super().codegen_model_constructor()
        finally:
            self._constants_on_host = False

    def codegen_const_run_driver(self) -> None:
        if config.aot_inductor.use_runtime_constant_folding:
            raise NotImplementedError("openreg does not support aot_inductor.use_runtime_constant_folding: "
                                      "its constant-folding step places the weights on the device")
        self.prefix.splice(f"""
            std::unordered_map<std::string, AtenTensorHandle> {self.aoti_model_class_name}::const_run_impl(
                DeviceStreamType stream,
                AOTIProxyExecutorHandle proxy_executor,
                bool initialization
            ) {{""")
        with self.prefix.indent():
            self.prefix.splice(CONSTANT_PLACEMENT)
        self.prefix.writeline("}")

    def _generate_kernel_call_helper(self, kernel_name: str, call_args: list[Any], *,
                                     device: torch.device | None = None, triton: bool = True,
                                     arg_types: list[Any] | None = None, **kwargs: Any) -> None:
        device = device or V.graph.get_current_device_or_throw()
        if device.type != DEVICE:
            super()._generate_kernel_call_helper(kernel_name, call_args, device=device, triton=triton,
                                                 arg_types=arg_types, **kwargs)
            return
        if triton:
            raise RuntimeError("openreg runs Inductor's C++ kernels, not Triton kernels: leave "
                               "torch._inductor.config.cpu_backend at 'cpp'")
        args = [_launch_arg(arg, arg_type) for arg, arg_type in zip(call_args, arg_types or [], strict=True)]
        array = self._generate_temporary_array_pointer("TorchOpenRegKernelArg", args)
        launch = "TORCH_OPENREG_FUNCTION(torch_openreg_launch_kernel)"
        self.writeline(f'AOTI_TORCH_ERROR_CODE_CHECK({launch}("{kernel_name}", '
                       f"{kernel_name}{AOT_ENTRY_SUFFIX}, {array}, {len(args)}));")

    @staticmethod
    def get_c_shim_func_name(kernel: str, device: str) -> str:
        # Operators outside the generated kernels: openreg's C shims, looked up
        # in libtorch_openreg.so (TORCH_OPENREG_SHIM in AotLaunch.h).
        if kernel.startswith("TORCH_OPENREG_SHIM("):
            return kernel  # Inductor asks again with the name it was given
        name = CppWrapperCpu.get_c_shim_func_name(kernel, device)
        prefix = f"aoti_torch_{DEVICE}_"
        if device != DEVICE or not name.startswith(prefix):
            return name
        return f"TORCH_OPENREG_SHIM({name.removeprefix(prefix)})"


def _launch_arg(arg: Any, arg_type: Any) -> str:
    """One TorchOpenRegKernelArg initialiser for a kernel argument of the
    declared C++ type arg_type: a buffer (a tensor handle), or a value."""
    if isinstance(arg_type, str) and "*" in arg_type:
        return f"TorchOpenRegKernelArg{{TORCH_OPENREG_ARG_TENSOR, {arg}.get(), 0, 0.0}}"
    if isinstance(arg_type, str) and arg_type.removeprefix("const ").strip() in ("float", "double"):
        return f"TorchOpenRegKernelArg{{TORCH_OPENREG_ARG_FLOAT, nullptr, 0, static_cast<double>({arg})}}"
    return f"TorchOpenRegKernelArg{{TORCH_OPENREG_ARG_INT, nullptr, static_cast<int64_t>({arg}), 0.0}}"
# LITERALINCLUDE END: OPENREG_CPP_WRAPPER
