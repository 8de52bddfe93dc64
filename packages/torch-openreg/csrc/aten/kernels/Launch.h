// Launch.h - the plain launch's pieces: how a kernel sees openreg tensors.
// The launch itself is the public launchKernel (torch_openreg/Kernel.h,
// implemented in Launch.cpp); a speed layer's launch reuses these pieces.
//
// LITERALINCLUDE START: DEVICE_VIEWS_NOTE
// Note [Running CPU kernels on device memory]
// Inside a kernel, libopenreg translates a device range to its host alias.
// A launch records a DeviceView of each tensor on the host (plain values:
// the tensor may change or go away before the kernel runs); the kernel
// wraps the alias of each one in a CPU tensor with the same sizes and
// strides (cpuView, no copy) and hands those views to its body, which runs
// on the stream's worker after all work queued before it. The host returns
// as soon as the kernel is queued. An exception thrown by the body fails the
// kernel: the error surfaces, naming the kernel, at the next synchronising
// call, as a device-side assertion does on CUDA.
// LITERALINCLUDE END: DEVICE_VIEWS_NOTE
#pragma once

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>
#include <torch_openreg/Kernel.h>

#include <stdexcept>

namespace torch_openreg {

// What a kernel needs to rebuild a CPU view of a device tensor. Its sizes
// and strides are inline (no allocation per launch).
struct DeviceView {
  void* data = nullptr;
  c10::SmallVector<int64_t, 5> sizes;
  c10::SmallVector<int64_t, 5> strides;
  at::ScalarType dtype = at::ScalarType::Undefined;
  size_t span = 0;  // bytes from data to the end of the last element
  bool conj = false;  // the lazy conjugate and negative bits of complex views
  bool neg = false;
};
// Throws unless t is an openreg tensor whose storage holds every byte it
// reaches: any other operand would fault inside a kernel or copy, as an
// illegal address that leaves the device unusable. describeInto checks.
void checkStorageHolds(const at::Tensor& t);
void describeInto(DeviceView& view, const at::Tensor& deviceTensor);

// Kernel only: the CPU tensor over the translated memory of view. Its
// storage cannot move: a CPU kernel that resizes it beyond its bytes (an
// out= kernel holding an intermediate in its output) gets a
// DeviceViewResized error, which the caller may catch by type to run the
// kernel again with temporary outputs (runOnCpu in OperatorCall.cpp).
at::Tensor cpuView(const DeviceView& view);

// launchKernel for torch-openreg's own kernels (the device executor's),
// each a function of its tensors alone: in timing-only mode, one over
// values the host knows also runs on the host (Note [Values the host knows
// in timing-only mode]). A package's kernel may reach beyond its tensors
// (occl's reaches the other ranks), so the public launchKernel never does.
void launchOwnKernel(const char* name, const std::vector<at::Tensor>& tensors, KernelBody body);

// The plain launch: body over tensors on device's current stream, once
// launchKernel has checked them (the speed layer's launch replaces it).
void plainLaunch(const char* name, c10::DeviceIndex device, const std::vector<at::Tensor>& tensors,
                 KernelBody body);

// What resizing a device view's storage throws.
class DeviceViewResized : public c10::Error {
 public:
  using c10::Error::Error;
};

// Kernel only: runs body as every openreg kernel body runs. Below autograd,
// as PyTorch's own kernels run: otherwise every view a CPU kernel makes
// internally would go through autograd's view tracking on the worker. A
// c10::Error becomes the kernel's error message without the C++ backtrace
// of the worker thread, so the sticky error reads like the check that failed.
template <typename Body>
void runKernelBody(Body& body) {
  try {
    at::AutoDispatchBelowADInplaceOrView belowAutograd;
    body();
  } catch (const c10::Error& error) {
    throw std::runtime_error(error.what_without_backtrace());
  }
}

}  // namespace torch_openreg
