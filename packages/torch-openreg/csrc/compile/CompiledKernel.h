// CompiledKernel.h - launching a kernel that Inductor generated and compiled
// on the current openreg stream: for torch.compile (the Python wrapper calls
// torch_openreg._C._launch_compiled_kernel) and for AOTInductor (the model's
// C++ wrapper calls torch_openreg_launch_kernel, AotLaunch.cpp). Not here: the
// code generation itself (torch_openreg/_compile/ drives Inductor's C++ codegen).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/utils/pybind.h>

#include <cstdint>
#include <vector>

namespace torch_openreg {

// LITERALINCLUDE START: COMPILED_KERNEL_ENTRY
// Note [How a generated kernel receives its arguments]
// Inductor compiles each kernel as `extern "C" void kernel(const float* in0,
// float* out0, const int64_t ks0, ...)`, a signature known only when the
// model is compiled. The openreg scheduling (torch_openreg/_compile/inductor.py)
// appends to its source a fixed-signature entry point,
//   extern "C" void openreg_entry(void* const* params),
// whose params[i] points at the value of the kernel's i-th argument and which
// calls the kernel with each argument cast to its declared type: the
// convention of a CUDA driver's cuLaunchKernel(kernelParams). So this launch
// needs no knowledge of the signature and passes no value through the wrong
// register class. (Ahead of time, where all kernels share one library, the
// entry of kernel K is named K_openreg_entry.)
using CompiledEntry = void (*)(void* const* params);

// One argument of the kernel, as the wrapper passed it.
struct CompiledArg {
  enum class Kind { DeviceTensor, HostScalar, Int, Float } kind;
  size_t tensorIndex = 0;  // DeviceTensor: its index among the launched tensors
  at::Tensor hostScalar;   // HostScalar: a copy of the 0-dim CPU tensor, taken at launch
  int64_t intValue = 0;
  double floatValue = 0.0;
};
// LITERALINCLUDE END: COMPILED_KERNEL_ENTRY

// Sorts one tensor argument: an openreg tensor is launched (appended to
// tensors); a 0-dim CPU tensor is read by value, copied now (Inductor passes
// an optimizer's step count so, as CUDA kernels read it). Anything else is
// refused with a c10::Error naming the kernel and the argument's position.
CompiledArg tensorArg(const char* name, size_t position, const at::Tensor& t, std::vector<at::Tensor>& tensors);

// Queues entry on the current stream of the first tensor's device and returns
// at once; the kernel calls entry with params built from layout, over the
// views launchKernel hands it. Raises what launchKernel raises. Thread-safe.
void launchCompiledEntry(const char* name, CompiledEntry entry, const std::vector<at::Tensor>& tensors,
                         std::vector<CompiledArg> layout);

// Adds torch_openreg._C._launch_compiled_kernel (CompiledKernel.cpp).
void bindCompiledKernel(pybind11::module_ module);

}  // namespace torch_openreg
