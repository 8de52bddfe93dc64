// ScratchAllocator.cpp - speed layer: PyTorch's CPU allocator, wrapped: inside an openreg
// kernel, large blocks are cached for the next kernel; everywhere else every
// call goes to the allocator that was registered before, unchanged. With
// fast paths off it is not installed.
// Measured when introduced: a 1M-element conv2d on a worker went from 5-7 ms
// to the CPU's 0.4-1 ms (Note [Why kernels' host memory is cached]).
//
// Note [Why kernels' host memory is cached]
// A CPU kernel that openreg runs on device memory still allocates host memory
// of its own: a functional kernel's result before it is copied to the device
// output, oneDNN's workspaces (ideep allocates them through c10's CPU
// allocator). That memory is allocated and freed on the stream worker, a
// thread whose C library arena gives freed pages back to the OS at once, so
// each call faults every page in again: a 1M-element conv2d faulted 13 MB
// per call and took 5-7 ms against 0.4-1 ms on the host thread. CUDA's
// kernels have no such cost: their workspaces come from the caching device
// allocator. This cache gives the worker the same: blocks freed by a kernel
// wait here, bounded, for the next kernel. CPU memory profiling does not see
// cached blocks change hands; torch.openreg.empty_cache() releases them.
//
// LITERALINCLUDE START: RESULTS_IN_PLACE_NOTE
// Note [Results written straight into device memory]
// A functional CPU kernel (convolution has no out= form) allocates its
// result, and openreg then copies it into the device output: for a 4 MB
// conv2d result the copy cost 15-20 % of the call. A kernel launch that
// knows its outputs lends their memory: inside a LendingScope, an
// allocation of exactly an output's size is served from that output's
// device memory (its host alias), so the CPU kernel writes its result where
// it belongs and the copy is skipped (computeInto in fast/ResultsInPlace.h).
// Which allocation of that size becomes the result is the kernel's affair:
// oneDNN computes a convolution in its own blocked layout first, often of
// the same size, then reorders it into the plain result. So the launch site
// learns, per call, how many same-sized allocations to pass over, or not to
// lend at all (LendingPlan). A wrong guess costs a copy, never a result: a
// temporary that takes the block is dead by the time the real result is
// copied over it (the contract of computeInto).
// LITERALINCLUDE END: RESULTS_IN_PLACE_NOTE
#include "fast/ScratchAllocator.h"

#include "fast/FastPaths.h"
#include "runtime/Platform.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <algorithm>
#include <map>
#include <new>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace torch_openreg {
namespace {

thread_local bool inKernel = false;
thread_local LentOutputs* lending = nullptr;

// A block freed while this much is already cached goes back to the C library.
constexpr size_t kMostCachedBytes = size_t{512} << 20;

class ScratchAllocator final : public c10::Allocator {
 public:
  // previous must have a raw deleter (c10's default allocator has one).
  explicit ScratchAllocator(c10::Allocator* previous)
      : previous_(previous), previousDeleter_(previous->raw_deleter()) {}

  // Thread-safe. A cached block may be freed on any thread: a kernel's
  // result can outlive the kernel (a lent block must not, see LendingScope).
  c10::DataPtr allocate(size_t bytes) override {
    if (!inKernel || bytes < kSmallestScratchBytes) return previous_->allocate(bytes);
    if (lending == nullptr) {
      void* block = take(bytes);
      return {block, block, &release, c10::Device(c10::kCPU)};
    }
    LentOutputs::Block* claimed = lending->claim(bytes);
    lending->allocations.reserve(lending->allocations.size() + 1);  // nothing throws once a block is handed out
    void* block = claimed != nullptr ? borrow(*claimed) : take(bytes);
    lending->record(bytes, block);
    return {block, block, &release, c10::Device(c10::kCPU)};
  }

  // ideep frees through raw_deallocate, which calls this for blocks from
  // either path; release tells them apart.
  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  void copy_data(void* dest, const void* src, size_t count) const override {
    default_copy_data(dest, src, count);
  }

  ScratchStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return {inUseBytes_, cachedBytes_, allocationCount_, reuseCount_, lentCount_, lent_.size()};
  }

  void emptyCache() {
    std::vector<void*> blocks;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& [bytes, block] : cached_) {
        sizes_.erase(block);
        blocks.push_back(block);
      }
      cached_.clear();
      cachedBytes_ = 0;
    }
    for (void* block : blocks) c10::free_cpu(block);
  }

  // A stream worker may hold mutex_ when the process forks; the child's only
  // thread must not inherit it locked (platform::aroundFork, below).
  void lockForFork() { mutex_.lock(); }
  void unlockAfterFork() { mutex_.unlock(); }

 private:
  static void release(void* block);

  // A LendingScope's block, remembered until it is given back: it belongs
  // to a device tensor, so it is never freed nor cached.
  void* borrow(LentOutputs::Block& claimed) {
    std::lock_guard<std::mutex> lock(mutex_);
    lent_.insert(claimed.data);
    claimed.taken = true;
    ++lentCount_;
    return claimed.data;
  }

  // The smallest cached block that fits, unless it is over twice the size
  // asked for; else a new one.
  void* take(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto fit = cached_.lower_bound(bytes);
      if (fit != cached_.end() && fit->first / 2 <= bytes) {
        void* block = fit->second;
        cachedBytes_ -= fit->first;
        inUseBytes_ += fit->first;
        ++reuseCount_;
        cached_.erase(fit);
        return block;
      }
    }
    void* block = c10::alloc_cpu(bytes);  // throws c10::Error when the host is out of memory
    try {
      std::lock_guard<std::mutex> lock(mutex_);
      sizes_.emplace(block, bytes);
      inUseBytes_ += bytes;
      ++allocationCount_;
    } catch (...) {
      c10::free_cpu(block);
      throw;
    }
    return block;
  }

  // Runs inside tensor destructors: must not throw.
  void giveBack(void* block) noexcept {
    std::unique_lock<std::mutex> lock(mutex_);
    if (auto lent = lent_.find(block); lent != lent_.end()) {
      lent_.erase(lent);  // device memory: its device tensor owns it
      return;
    }
    auto known = sizes_.find(block);
    if (known == sizes_.end()) {
      // Allocated by the previous allocator (outside a kernel, or small).
      lock.unlock();
      previousDeleter_(block);
      return;
    }
    const size_t bytes = known->second;
    inUseBytes_ -= bytes;
    if (cachedBytes_ + bytes <= kMostCachedBytes) {
      try {
        cached_.emplace(bytes, block);
        cachedBytes_ += bytes;
        return;
      } catch (const std::bad_alloc&) {
        // no room to remember it: free it below
      }
    }
    sizes_.erase(known);
    lock.unlock();
    c10::free_cpu(block);
  }


  c10::Allocator* const previous_;
  const c10::DeleterFnPtr previousDeleter_;
  std::mutex mutex_;
  std::unordered_map<void*, size_t> sizes_;  // every block this cache owns, in use or cached
  std::multimap<size_t, void*> cached_;       // free blocks by size
  std::unordered_multiset<void*> lent_;       // LendingScope blocks handed out and not yet given back
  size_t inUseBytes_ = 0;
  size_t cachedBytes_ = 0;
  size_t allocationCount_ = 0;
  size_t reuseCount_ = 0;
  size_t lentCount_ = 0;
};

// LITERALINCLUDE START: REGISTER_SCRATCH_ALLOCATOR
ScratchAllocator& scratchAllocator() {
  // Never destroyed: tensors can be freed while the process exits.
  static auto* instance = new ScratchAllocator(c10::GetCPUAllocator());
  return *instance;
}

// Loading torch_openreg._C installs the wrapper in place of the CPU allocator
// registered before it, which it delegates to outside kernels.
[[maybe_unused]] const bool registered = [] {
  if (!speedLayersRequested()) return false;  // the plain path leaves the CPU allocator alone
  if (c10::GetCPUAllocator()->raw_deleter() == nullptr) return false;  // cannot wrap it: leave it alone
  c10::SetCPUAllocator(&scratchAllocator());
  platform::aroundFork([] { scratchAllocator().lockForFork(); }, [] { scratchAllocator().unlockAfterFork(); },
                       [] { scratchAllocator().unlockAfterFork(); });
  return true;
}();
// LITERALINCLUDE END: REGISTER_SCRATCH_ALLOCATOR

void ScratchAllocator::release(void* block) { scratchAllocator().giveBack(block); }

}  // namespace

KernelScratchScope::KernelScratchScope() : outer_(inKernel) { inKernel = true; }
KernelScratchScope::~KernelScratchScope() { inKernel = outer_; }

LentOutputs::Block* LentOutputs::claim(size_t bytes) {
  auto sameSize = [&](const std::pair<size_t, const void*>& a) { return a.first == bytes; };
  auto seen = std::count_if(allocations.begin(), allocations.end(), sameSize);  // of this size so far
  for (Block& block : blocks) {
    if (!block.taken && block.bytes == bytes && block.skip == seen) return &block;
  }
  return nullptr;
}

void LentOutputs::record(size_t bytes, const void* where) {
  for (const Block& block : blocks) {
    if (block.bytes == bytes) {
      allocations.emplace_back(bytes, where);
      return;
    }
  }
}

int LentOutputs::indexOf(size_t bytes, const void* where) const {
  // The last one at where: an address is handed out again only after it
  // was freed, so earlier ones there are dead.
  int index = 0, found = -1;
  for (const auto& [size, at] : allocations) {
    if (size != bytes) continue;
    if (at == where) found = index;
    ++index;
  }
  return found;
}

LendingScope::LendingScope(LentOutputs& outputs) : outer_(lending) { lending = &outputs; }
LendingScope::~LendingScope() { lending = outer_; }

ScratchStats scratchStats() { return scratchAllocator().stats(); }

void emptyScratchCache() { scratchAllocator().emptyCache(); }

}  // namespace torch_openreg
