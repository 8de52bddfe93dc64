// Launch.h - runs PyTorch CPU code on openreg device memory, as a kernel on
// the current openreg stream.
//
// Note [Running CPU kernels on device memory]
// Inside a kernel, libopenreg translates a device range to its host alias.
// launchOnStream wraps the alias of each device tensor in a CPU tensor with
// the same sizes and strides (no copy) and hands those views to fn, which
// runs on the stream's worker, after all work queued before it. The host
// returns as soon as the kernel is queued. An exception thrown by fn fails
// the kernel; the error surfaces, naming the kernel, at the next
// synchronising call, as a device-side assertion does on CUDA.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

namespace torch_openreg {

using CpuKernel = std::function<void(std::vector<at::Tensor>& views)>;

// tensors: openreg tensors on the current device (or peers); fn receives
// CPU views of them in the same order.
void launchOnStream(const char* name, const std::vector<at::Tensor>& tensors, CpuKernel fn);

}  // namespace torch_openreg
