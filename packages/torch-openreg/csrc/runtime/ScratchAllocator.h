// ScratchAllocator.h - the host memory that PyTorch's CPU kernels allocate
// for themselves (results, workspaces) while they run as openreg kernels on a
// stream worker, cached for the next kernel. Not device memory, not pinned
// memory, and not used for CPU tensors that the program allocates itself.
#pragma once

#include <cstddef>

namespace torch_openreg {

// While one is alive on a thread, that thread's large CPU allocations come
// from the scratch cache (Note [Why kernels' host memory is cached]).
// launchKernel holds one around every kernel body. Scopes nest.
class KernelScratchScope {
 public:
  KernelScratchScope();
  ~KernelScratchScope();
  KernelScratchScope(const KernelScratchScope&) = delete;
  KernelScratchScope& operator=(const KernelScratchScope&) = delete;

 private:
  bool outer_;  // the thread's state before this scope
};

struct ScratchStats {
  size_t inUseBytes;       // handed out and not yet freed
  size_t cachedBytes;      // freed and kept for reuse
  size_t allocationCount;  // blocks taken from the C library
  size_t reuseCount;       // allocations served from the cache
};
ScratchStats scratchStats();

// Returns every cached block to the C library (torch.openreg.empty_cache).
void emptyScratchCache();

}  // namespace torch_openreg
