// DeviceAllocator.cpp - a stream-aware caching allocator over orMalloc.
//
// c10's allocator interface (OpenRegDeviceAllocator) over one DeviceCache per
// device (DeviceCache.h: the pools, statistics and cap, and their Notes).
#include "runtime/DeviceAllocator.h"

#include <c10/core/DeviceGuard.h>
#include <c10/util/env.h>

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include <torch_openreg/Check.h>

#include "runtime/DeviceCache.h"
#include "runtime/PrivatePools.h"
#include "runtime/AllocatorBlocks.h"
#include "runtime/Device.h"
#include "runtime/Event.h"
#include "runtime/Stream.h"
#include "runtime/TimingOnlyMemory.h"

namespace torch_openreg {
namespace {

using c10::CachingDeviceAllocator::DeviceStats;
using cache::DeviceCache;

void deleteBlock(void* context);

// LITERALINCLUDE START: DEVICE_ALLOCATOR_CLASS
// Above each method, its contract. Every method is thread-safe (each
// device's cache has its own mutex); a method that takes a device throws
// c10::Error for an index that is not an openreg device.
class OpenRegDeviceAllocator final : public c10::DeviceAllocator {
 public:
  // size bytes on the current device, usable by work queued on its current
  // stream from now on (the block was free, or its earlier users' work has
  // finished: Note [How the caching allocator reuses memory]). Size 0 gives
  // a null pointer that still names the device. The DataPtr owns the block;
  // its deleter returns it to the cache (to the runtime with
  // PYTORCH_NO_OPENREG_MEMORY_CACHING=1). Throws
  // torch.OutOfMemoryError when neither the cache nor the runtime (after
  // freeing the cache) has room; nothing is leaked then.
  c10::DataPtr allocate(size_t size) override {
    c10::DeviceIndex device = currentDevice();
    if (size == 0) return {nullptr, nullptr, &deleteBlock, c10::Device(c10::DeviceType::PrivateUse1, device)};
    Block* block = cache(device).allocate(size, nativeStream(currentStream(device)));
    markIfTimingOnly(*block);  // Note [Memory timing-only mode never computed]
    reportToProfiler(block->ptr, static_cast<int64_t>(block->size), device);
    return {block->ptr, block, &deleteBlock, c10::Device(c10::DeviceType::PrivateUse1, device)};
  }

  // The deleter of every DataPtr above, for raw_allocate/raw_deallocate.
  c10::DeleterFnPtr raw_deleter() const override { return &deleteBlock; }

  // Copies count bytes between two blocks of this allocator, after the
  // device's queued work, and returns when done (Storage copies use it).
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    OPENREG_CHECK(orMemcpy(dest, src, count, orMemcpyDeviceToDevice));
  }

  // Usable at once: the caches are made on first use.
  bool initialized() override { return true; }

  // Returns every cached block no live tensor holds to the runtime, on every
  // device (torch.openreg.empty_cache, torch.accelerator.empty_cache), then
  // runs the releases added by alsoOnEmptyCache. Blocks waiting for a
  // stream's work stay until it finishes.
  void emptyCache(c10::MempoolId_t /*pool*/) override {
    for (c10::DeviceIndex d = 0; d < deviceCount(); ++d) cache(d).emptyCache();
    for (void (*release)() : cacheReleases()) release();
  }

  static std::vector<void (*)()>& cacheReleases() {
    static std::vector<void (*)()> releases;
    return releases;
  }

  // Tensor.record_stream: ptr's block is not reused, once freed, until the
  // work queued on stream so far has finished. Throws for memory this
  // allocator did not hand out, or a stream that is not openreg's.
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {
    if (ptr.get() == nullptr) return;
    TORCH_CHECK(ptr.get_deleter() == &deleteBlock,
                "record_stream: the tensor's memory does not come from the openreg allocator");
    checkStream(stream);
    auto* block = static_cast<Block*>(ptr.get_context());
    cache(block->device).recordStream(block, nativeStream(stream));
  }

  // torch.openreg.memory_stats and its resets, counted as CUDA's caching
  // allocator counts them (allocated, reserved, active, per pool).
  DeviceStats getDeviceStats(c10::DeviceIndex device) override { return cache(device).stats(); }
  void resetAccumulatedStats(c10::DeviceIndex device) override { cache(device).resetAccumulated(); }
  void resetPeakStats(c10::DeviceIndex device) override { cache(device).resetPeak(); }

  // (free, total) bytes of device as the runtime sees them: the cache's
  // reserved blocks count as used.
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
    size_t free = 0, total = 0;
    OPENREG_CHECK(orMemGetInfo(&free, &total));
    return {free, total};
  }

  void free(Block* block) {
    c10::DeviceIndex device = block->device;
    size_t size = block->size;
    void* ptr = block->ptr;
    cache(device).free(block);
    reportToProfiler(ptr, -static_cast<int64_t>(size), device);
  }

  DeviceCache& cache(c10::DeviceIndex device) {
    checkDeviceIndex(device);
    std::call_once(created_, [this] {
      // PYTORCH_NO_OPENREG_MEMORY_CACHING=1 sends every free straight back to
      // the runtime, as PYTORCH_NO_CUDA_MEMORY_CACHING does, for debugging.
      bool caching = c10::utils::get_env("PYTORCH_NO_OPENREG_MEMORY_CACHING") != "1";
      for (c10::DeviceIndex d = 0; d < deviceCount(); ++d) {
        caches_.push_back(std::make_unique<DeviceCache>(d, caching));
      }
    });
    return *caches_[device];
  }

 private:
  // torch.profiler's memory view; the statistics are read only while it listens.
  void reportToProfiler(void* ptr, int64_t delta, c10::DeviceIndex device) {
    if (!c10::memoryProfilingEnabled()) return;
    c10::reportMemoryUsageToProfiler(ptr, delta, cache(device).allocatedBytes(),
                                     cache(device).reservedBytes(),
                                     c10::Device(c10::DeviceType::PrivateUse1, device));
  }

  std::once_flag created_;
  std::vector<std::unique_ptr<DeviceCache>> caches_;
};
// LITERALINCLUDE END: DEVICE_ALLOCATOR_CLASS

OpenRegDeviceAllocator allocatorInstance;

void deleteBlock(void* context) {
  if (context != nullptr) allocatorInstance.free(static_cast<Block*>(context));
}

}  // namespace

c10::DeviceAllocator* deviceAllocator() { return &allocatorInstance; }

Block* blockOf(const c10::DataPtr& memory) {
  return memory.get_deleter() == &deleteBlock ? static_cast<Block*>(memory.get_context()) : nullptr;
}

void alsoOnEmptyCache(void (*release)()) { OpenRegDeviceAllocator::cacheReleases().push_back(release); }

void beginAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t pool, orStream_t stream, bool othersForbidden) {
  allocatorInstance.cache(device).beginAllocateToPool(pool, stream, othersForbidden);
}

void endAllocateToPool(c10::DeviceIndex device, orStream_t stream) {
  allocatorInstance.cache(device).endAllocateToPool(stream);
}

void releasePool(c10::DeviceIndex device, c10::MempoolId_t pool) { allocatorInstance.cache(device).releasePool(pool); }

void setMemoryFraction(double fraction, c10::DeviceIndex device) {
  allocatorInstance.cache(device).setMemoryFraction(fraction);
}

double getMemoryFraction(c10::DeviceIndex device) { return allocatorInstance.cache(device).memoryFraction(); }

// LITERALINCLUDE START: REGISTER_DEVICE_ALLOCATOR
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &allocatorInstance);
// LITERALINCLUDE END: REGISTER_DEVICE_ALLOCATOR

}  // namespace torch_openreg
