// ScratchAllocator.h - speed layer: the host memory that PyTorch's CPU kernels allocate
// for themselves (results, workspaces) while they run as openreg kernels on a
// stream worker, cached for the next kernel. Not device memory, not pinned
// memory, and not used for CPU tensors that the program allocates itself.
#pragma once

#include <c10/util/SmallVector.h>

#include <cstddef>
#include <utility>

namespace torch_openreg {

// The smallest allocation the scratch allocator caches, or lends from a
// device output: smaller blocks stay in the C library's arenas between
// calls anyway.
constexpr size_t kSmallestScratchBytes = size_t{64} << 10;

// While one is alive on a thread, that thread's large CPU allocations come
// from the scratch cache (Note [Why kernels' host memory is cached]).
// The fast launch (FastLaunch.h) holds one around every kernel body. Scopes nest.
class KernelScratchScope {
 public:
  KernelScratchScope();
  ~KernelScratchScope();
  KernelScratchScope(const KernelScratchScope&) = delete;
  KernelScratchScope& operator=(const KernelScratchScope&) = delete;

 private:
  bool outer_;  // the thread's state before this scope
};

// The memory of a kernel's fresh device outputs (their host aliases), on
// offer to the large CPU allocations its CPU kernel makes, and what became
// of it (Note [Results written straight into device memory]).
struct LentOutputs {
  struct Block {
    void* data = nullptr;
    size_t bytes = 0;  // 0: not on offer
    int skip = 0;      // allocations of this size to pass over before lending it
    bool taken = false;
  };
  c10::SmallVector<Block, 4> blocks;  // one per output
  // Each allocation of a size some block has, in order: its size, where it went.
  c10::SmallVector<std::pair<size_t, const void*>, 4> allocations;

  // The block an allocation of bytes takes (the skip-th of that size), or null.
  Block* claim(size_t bytes);
  // Records an allocation, if its size is one on offer.
  void record(size_t bytes, const void* where);
  // Which allocation of its size the live one at where is (0: the first), or -1.
  int indexOf(size_t bytes, const void* where) const;
};

// While one is alive on a kernel's thread, that thread's large CPU
// allocations may take the blocks of outputs. The kernel must not keep a
// tensor over a lent block beyond its own end. Scopes do not nest: an inner
// one replaces the outer.
class LendingScope {
 public:
  explicit LendingScope(LentOutputs& outputs);  // outputs must outlive the scope
  ~LendingScope();
  LendingScope(const LendingScope&) = delete;
  LendingScope& operator=(const LendingScope&) = delete;

 private:
  LentOutputs* outer_;
};

struct ScratchStats {
  size_t inUseBytes;       // handed out and not yet freed
  size_t cachedBytes;      // freed and kept for reuse
  size_t allocationCount;  // blocks taken from the C library
  size_t reuseCount;       // allocations served from the cache
  size_t lentCount;        // allocations served from a LendingScope's device memory
  size_t lentInUseCount;   // of those, not yet freed (0 between kernels, or a kernel broke the contract)
};
ScratchStats scratchStats();

// Returns every cached block to the C library (torch.openreg.empty_cache).
void emptyScratchCache();

}  // namespace torch_openreg
