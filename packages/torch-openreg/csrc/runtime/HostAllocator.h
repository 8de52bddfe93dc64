// HostAllocator.h - pinned host memory for openreg (Tensor.pin_memory()),
// cached and reused only after the device work that read it has finished.
#pragma once

#include <ATen/core/CachingHostAllocator.h>

namespace torch_openreg {

at::HostAllocator* hostAllocator();
// Whether ptr lies in pinned memory from orMallocHost.
bool isPinned(const void* ptr);

}  // namespace torch_openreg
