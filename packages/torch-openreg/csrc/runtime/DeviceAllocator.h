// DeviceAllocator.h - the caching allocator for openreg device memory that
// PyTorch uses for every openreg tensor (registered with REGISTER_ALLOCATOR).
//
// It caches orMalloc'd segments per device and per stream, splits them into
// blocks, and honours record_stream. It is not a general memory pool: there
// are no private pools, graphs or expandable segments.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

namespace torch_openreg {

c10::DeviceAllocator* deviceAllocator();

}  // namespace torch_openreg
