// DeviceAllocator.h - the caching allocator for openreg device memory that
// PyTorch uses for every openreg tensor (registered with REGISTER_ALLOCATOR).
//
// It caches orMalloc'd segments per device and per stream, splits them into
// blocks, and honours record_stream, and gives graph captures private pools
// (Graph.cpp). It has no expandable segments and no user-made memory pools.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>
#include <openreg/openreg.h>

namespace torch_openreg {

c10::DeviceAllocator* deviceAllocator();

// release runs whenever the cache is emptied: a part of the backend that
// caches memory of its own (a speed layer) lets it go with the allocator's.
// Called at load (static initialisers), before any emptyCache.
void alsoOnEmptyCache(void (*release)());

struct Block;
// The block behind memory from deviceAllocator(); null for any other memory.
Block* blockOf(const c10::DataPtr& memory);

// Graph captures (Note [Graph memory pools] in runtime/PrivatePools.h).
// From now until endAllocateToPool, allocations on stream come from the
// private pool pool of device (created on first use; each call counts one
// more graph using it). othersForbidden: allocations on the device's other
// streams raise meanwhile.
void beginAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t pool, orStream_t stream, bool othersForbidden);
void endAllocateToPool(c10::DeviceIndex device, orStream_t stream);
// One graph fewer uses pool; its memory returns to the runtime once no
// graph uses it and no tensor holds its blocks.
void releasePool(c10::DeviceIndex device, c10::MempoolId_t pool);

// torch.openreg.set_per_process_memory_fraction and its getter, named as
// CUDA's caching allocator names them (Note [Per-process memory fraction]
// in DeviceAllocator.cpp). From now on the allocator reserves at most
// fraction times device's total memory; what it holds already stays.
// Throws c10::ValueError for a fraction outside [0, 1] (NaN included) and
// c10::Error for an index that is no openreg device. getMemoryFraction
// gives 1.0 while no fraction was set. Thread-safe.
void setMemoryFraction(double fraction, c10::DeviceIndex device);
double getMemoryFraction(c10::DeviceIndex device);

}  // namespace torch_openreg
