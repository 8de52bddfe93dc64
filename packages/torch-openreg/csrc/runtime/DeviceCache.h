// DeviceCache.h - one device's share of the caching allocator: its pools of
// free blocks, its statistics and its cap (DeviceAllocator.cpp puts
// c10's allocator interface over the devices' caches). Included by
// DeviceAllocator.cpp alone.
//
// LITERALINCLUDE START: ALLOCATOR_REUSE_NOTE
// Note [How the caching allocator reuses memory]
// orMalloc waits for the whole device on free (as cudaFree does) and costs a
// free-list search, so freed tensor memory is kept in per-device pools and
// handed out again. A block belongs to the stream it was allocated on: work
// on that stream is ordered, so the block can be reused on it at once. If
// the block was also used on other streams (Tensor.record_stream), freeing
// it records an event on each of them, and the block returns to its pool
// only after all those events completed. Requests up to 1 MiB share 2 MiB
// segments; larger ones get segments of their own, rounded to 2 MiB, and
// both are split so the unused rest of a segment serves later requests.
// On out-of-memory, cached free segments are returned to the runtime and
// the request is retried once before torch.OutOfMemoryError is raised.
// LITERALINCLUDE END: ALLOCATOR_REUSE_NOTE
//
// Note [Per-process memory fraction]
// torch.openreg.set_per_process_memory_fraction(f) caps the memory the
// allocator reserves from a device at f times its total, as CUDA's caching
// allocator does: a new segment that would take the reserved bytes past
// the cap is treated as the runtime's out-of-memory, so cached segments are
// given back and the request retried before OutOfMemoryError is raised.
// The cap is computed when the fraction is set; blocks already reserved
// stay, and only reserving new segments is refused.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/util/env.h>

#include <algorithm>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include <torch_openreg/Check.h>

#include "runtime/AllocatorBlocks.h"
#include "runtime/Device.h"
#include "runtime/Event.h"
#include "runtime/PrivatePools.h"

namespace torch_openreg::cache {


using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatArray;
using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

constexpr size_t kMinBlockSize = 512;              // every size is rounded to this
constexpr size_t kSmallSize = size_t{1} << 20;     // largest "small" request
constexpr size_t kSmallSegment = size_t{2} << 20;  // segment size for small requests
constexpr size_t kMinLargeSegment = size_t{10} << 20;
constexpr size_t kLargeSegment = size_t{20} << 20;  // segment for mid-size requests
constexpr size_t kRoundLarge = size_t{2} << 20;

inline std::string formatBytes(size_t bytes);

// n rounded up to a multiple of to. A size so large that rounding it would
// wrap around (a negative size converted to size_t, say) is refused as
// out-of-memory, as CUDA refuses it, instead of becoming a small block
// that aliases the next allocation.
inline size_t roundUp(size_t n, size_t to) {
  size_t padded = 0;
  TORCH_CHECK_WITH(OutOfMemoryError, !__builtin_add_overflow(n, to - 1, &padded),
                   "openreg out of memory. Tried to allocate ", formatBytes(n), " (", n,
                   " bytes; as a signed size ", static_cast<int64_t>(n),
                   "), more than any openreg device holds. A negative size is not a size.");
  return padded / to * to;
}



inline void updateStat(StatArray& stats, bool small, int64_t delta) {
  for (auto type : {StatType::AGGREGATE, small ? StatType::SMALL_POOL : StatType::LARGE_POOL}) {
    Stat& stat = stats[static_cast<size_t>(type)];
    if (delta >= 0) {
      stat.increase(static_cast<size_t>(delta));
    } else {
      stat.decrease(static_cast<size_t>(-delta));
    }
  }
}

inline std::string formatBytes(size_t bytes) {
  if (bytes >= (size_t{1} << 60)) return c10::str(bytes / double(size_t{1} << 60), " EiB");
  if (bytes >= (size_t{1} << 30)) return c10::str(bytes / double(size_t{1} << 30), " GiB");
  if (bytes >= (size_t{1} << 20)) return c10::str(bytes / double(size_t{1} << 20), " MiB");
  return c10::str(bytes, " bytes");
}

// All cached state of one device. Every member is guarded by mutex.
class DeviceCache {
 public:
  explicit DeviceCache(c10::DeviceIndex device, bool caching) : device_(device), caching_(caching) {}

  Block* allocate(size_t requested, orStream_t stream) {
    std::unique_lock<std::mutex> lock(mutex_);
    completeFinishedFrees();
    size_t size = roundUp(std::max<size_t>(requested, 1), kMinBlockSize);
    bool small = size <= kSmallSize;
    PrivatePool* target = captureTargetFor(stream, lock);
    Block* block = takeFree(target, small, size, stream);
    if (block == nullptr) block = newSegment(target, small, size, stream, lock);
    if (target != nullptr) ++target->allocatedBlocks;
    if (block->size - size >= (small ? kMinBlockSize : kSmallSize + 1)) split(block, size);
    updateStat(stats_.active, small, 1);
    updateStat(stats_.active_bytes, small, static_cast<int64_t>(block->size));
    block->allocated = true;
    block->requested = requested;
    updateStat(stats_.allocation, small, 1);
    updateStat(stats_.allocated_bytes, small, static_cast<int64_t>(block->size));
    updateStat(stats_.requested_bytes, small, static_cast<int64_t>(requested));
    return block;
  }

  void free(Block* block) {
    std::lock_guard<std::mutex> lock(mutex_);
    block->allocated = false;
    PrivatePool* privatePool = block->privatePool;
    updateStat(stats_.allocation, block->small, -1);
    updateStat(stats_.allocated_bytes, block->small, -static_cast<int64_t>(block->size));
    updateStat(stats_.requested_bytes, block->small, -static_cast<int64_t>(block->requested));
    // Note [How the caching allocator reuses memory]: wait for other streams.
    for (orStream_t stream : block->otherStreams) {
      // Nothing waits on a stream that is gone or whose work is skipped
      // (a faulted device, a failed stream): nothing there touches the
      // block any more.
      std::optional<RecordedEvent> event = RecordedEvent::unlessFinished(stream);
      if (!event) continue;
      pending_.emplace_back(std::move(*event), block);
      ++block->pendingEvents;
    }
    block->otherStreams.clear();
    if (block->pendingEvents > 0) return;
    release(block);
    if (privatePool != nullptr) releasePrivatePoolIfIdle(privatePool);
  }

  void recordStream(Block* block, orStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stream != block->stream) block->otherStreams.insert(stream);
  }

  void emptyCache() {
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK(!graphPools_.capturing(), "openreg: empty_cache() is not permitted while a graph is being captured on "
                "device ", static_cast<int>(device_), "; call it after capture_end()");
    waitForAllFrees();
    OPENREG_CHECK(releaseCachedSegments());
  }

  DeviceStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  // Note [Per-process memory fraction]
  void setMemoryFraction(double fraction) {
    TORCH_CHECK_VALUE(fraction >= 0 && fraction <= 1, "Invalid fraction value: ", fraction,
                      ". Allowed range: 0~1");
    c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_));
    size_t free = 0, total = 0;
    OPENREG_CHECK(orMemGetInfo(&free, &total));
    std::lock_guard<std::mutex> lock(mutex_);
    fraction_ = fraction;
    allowedMaximum_ = static_cast<size_t>(fraction * static_cast<double>(total));
  }

  double memoryFraction() {
    std::lock_guard<std::mutex> lock(mutex_);
    return fraction_.value_or(1.0);
  }

  // Note [Graph memory pools] (runtime/PrivatePools.h)
  void beginAllocateToPool(c10::MempoolId_t id, orStream_t stream, bool othersForbidden) {
    std::lock_guard<std::mutex> lock(mutex_);
    graphPools_.beginCapture(id, stream, othersForbidden);
  }

  void endAllocateToPool(orStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    graphPools_.endCapture(stream);
  }

  void releasePool(c10::MempoolId_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (PrivatePool* privatePool = graphPools_.releaseGraph(id)) releasePrivatePoolIfIdle(privatePool);
  }

  void resetAccumulated() {
    std::lock_guard<std::mutex> lock(mutex_);
    forEachStatArray([](StatArray& array) {
      for (Stat& stat : array) stat.reset_accumulated();
    });
    stats_.num_alloc_retries = 0;
    stats_.num_ooms = 0;
    stats_.num_device_alloc = 0;
    stats_.num_device_free = 0;
  }

  void resetPeak() {
    std::lock_guard<std::mutex> lock(mutex_);
    forEachStatArray([](StatArray& array) {
      for (Stat& stat : array) stat.reset_peak();
    });
  }

  size_t allocatedBytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_.allocated_bytes[0].current;
  }
  size_t reservedBytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_.reserved_bytes[0].current;
  }

 private:
  template <typename F>
  void forEachStatArray(F f) {
    for (StatArray* array :
         {&stats_.allocation, &stats_.segment, &stats_.active, &stats_.inactive_split,
          &stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.active_bytes,
          &stats_.inactive_split_bytes, &stats_.requested_bytes}) {
      f(*array);
    }
  }

  Pool& pool(PrivatePool* privatePool, bool small) {
    if (privatePool != nullptr) return small ? privatePool->small : privatePool->large;
    return small ? small_ : large_;
  }
  Pool& pool(const Block* block) { return pool(block->privatePool, block->small); }

  Block* takeFree(PrivatePool* target, bool small, size_t size, orStream_t stream) {
    Block key;
    key.stream = stream;
    key.size = size;
    Pool& candidates = pool(target, small);
    auto it = candidates.lower_bound(&key);
    if (it == candidates.end() || (*it)->stream != stream) return nullptr;
    Block* block = *it;
    candidates.erase(it);
    if (!block->wholeSegment()) {
      updateStat(stats_.inactive_split, small, -1);
      updateStat(stats_.inactive_split_bytes, small, -static_cast<int64_t>(block->size));
    }
    return block;
  }

  // orMalloc, refused as out-of-memory (without asking the runtime) when
  // the segment would take the reserved bytes past the per-process cap
  // (Note [Per-process memory fraction]).
  orError_t mallocWithinFraction(void** ptr, size_t segment) {
    size_t reserved = stats_.reserved_bytes[0].current;
    // reserved + segment > cap, written so that a huge segment cannot wrap around.
    bool overCap = segment > allowedMaximum_ || reserved > allowedMaximum_ - segment;
    if (fraction_ && overCap) return orErrorMemoryAllocation;
    return orMalloc(ptr, segment);
  }

  // Asks the runtime for a new segment; on out-of-memory gives back every
  // cached segment and tries once more before raising OutOfMemoryError.
  Block* newSegment(PrivatePool* target, bool small, size_t size, orStream_t stream,
                    std::unique_lock<std::mutex>& lock) {
    size_t segment = small ? kSmallSegment
                     : size < kMinLargeSegment ? kLargeSegment
                                               : roundUp(size, kRoundLarge);
    if (!caching_) segment = size;
    c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_));
    void* ptr = nullptr;
    orError_t status = mallocWithinFraction(&ptr, segment);
    if (status == orErrorMemoryAllocation && !graphPools_.capturing()) {  // orFree is refused during capture
      ++stats_.num_alloc_retries;
      waitForAllFrees();
      releaseCachedSegments();
      status = mallocWithinFraction(&ptr, segment);
    }
    if (status == orErrorMemoryAllocation) {
      ++stats_.num_ooms;
      size_t free = 0, total = 0;
      orMemGetInfo(&free, &total);
      size_t allocated = stats_.allocated_bytes[0].current;
      size_t reserved = stats_.reserved_bytes[0].current;
      std::string allowed = fraction_ ? c10::str(" The per-process memory fraction ", *fraction_, " allows ",
                                                 formatBytes(allowedMaximum_), " of it to be reserved.")
                                      : std::string();
      lock.unlock();
      TORCH_CHECK_WITH(OutOfMemoryError, false, "openreg out of memory. Tried to allocate ",
                       formatBytes(size), ". openreg:", static_cast<int>(device_),
                       " has a total capacity of ", formatBytes(total), " of which ",
                       formatBytes(free), " is free.", allowed, " Of the memory in use, ",
                       formatBytes(allocated), " is allocated by PyTorch, and ",
                       formatBytes(reserved - allocated),
                       " is reserved by PyTorch but unallocated. Free tensors you no longer need, ",
                       fraction_ ? "raise the fraction with torch.openreg.set_per_process_memory_fraction, " : "",
                       "or raise the capacity with OPENREG_DEVICE_MEMORY.");
    }
    OPENREG_CHECK(status);
    ++stats_.num_device_alloc;
    markDeviceInitialized(device_);
    auto* block = new Block();
    block->device = device_;
    block->privatePool = target;
    block->stream = stream;
    block->size = segment;
    block->ptr = static_cast<char*>(ptr);
    block->small = small;
    updateStat(stats_.segment, small, 1);
    updateStat(stats_.reserved_bytes, small, static_cast<int64_t>(segment));
    return block;
  }

  // Cuts block down to size; the rest becomes a free block of the same segment.
  void split(Block* block, size_t size) {
    auto* rest = new Block();
    rest->device = block->device;
    rest->privatePool = block->privatePool;
    rest->stream = block->stream;
    rest->small = block->small;
    rest->ptr = block->ptr + size;
    rest->size = block->size - size;
    rest->prev = block;
    rest->next = block->next;
    if (block->next != nullptr) block->next->prev = rest;
    block->next = rest;
    block->size = size;
    updateStat(stats_.inactive_split, rest->small, 1);
    updateStat(stats_.inactive_split_bytes, rest->small, static_cast<int64_t>(rest->size));
    pool(rest).insert(rest);
  }

  // Returns a block no stream still uses to its pool, merged with free
  // neighbours; without caching, whole segments go straight back.
  void release(Block* block) {
    if (block->privatePool != nullptr) --block->privatePool->allocatedBlocks;
    updateStat(stats_.active, block->small, -1);
    updateStat(stats_.active_bytes, block->small, -static_cast<int64_t>(block->size));
    for (Block* neighbour : {block->prev, block->next}) {
      if (neighbour == nullptr || neighbour->allocated || neighbour->pendingEvents > 0) continue;
      pool(neighbour).erase(neighbour);
      updateStat(stats_.inactive_split, neighbour->small, -1);
      updateStat(stats_.inactive_split_bytes, neighbour->small, -static_cast<int64_t>(neighbour->size));
      merge(block, neighbour);
    }
    if (block->wholeSegment() && !caching_ && freeSegment(block)) return;
    if (!block->wholeSegment()) {
      updateStat(stats_.inactive_split, block->small, 1);
      updateStat(stats_.inactive_split_bytes, block->small, static_cast<int64_t>(block->size));
    }
    pool(block).insert(block);
  }

  // Folds neighbour (free, adjacent) into block.
  void merge(Block* block, Block* neighbour) {
    if (neighbour == block->prev) {
      block->ptr = neighbour->ptr;
      block->prev = neighbour->prev;
      if (block->prev != nullptr) block->prev->next = block;
    } else {
      block->next = neighbour->next;
      if (block->next != nullptr) block->next->prev = block;
    }
    block->size += neighbour->size;
    delete neighbour;
  }

  // Gives a whole free segment back to the runtime. Returns false, leaving
  // the block alone, when called from inside a kernel of this device: orFree
  // would wait for that kernel, so the runtime refuses (orErrorNotPermitted)
  // and the segment stays cached.
  bool freeSegment(Block* block) {
    c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_));
    // Cannot fail otherwise for a live segment; never lose memory on error.
    if (orFree(block->ptr) == orErrorNotPermitted) return false;
    ++stats_.num_device_free;
    updateStat(stats_.segment, block->small, -1);
    updateStat(stats_.reserved_bytes, block->small, -static_cast<int64_t>(block->size));
    delete block;
    return true;
  }

  // orErrorNotPermitted (the runtime's message set) if a segment had to stay
  // cached because this runs inside a kernel of the device.
  orError_t releaseCachedSegments() {
    orError_t status = orSuccess;
    for (Pool* candidates : {&small_, &large_}) {
      for (auto it = candidates->begin(); it != candidates->end();) {
        Block* block = *it;
        if (!block->wholeSegment()) {
          ++it;
          continue;
        }
        it = candidates->erase(it);
        if (!freeSegment(block)) {
          candidates->insert(block);  // lands before it: not visited again
          status = orErrorNotPermitted;
        }
      }
    }
    return status;
  }

  // The private pool a capturing stream allocates from, or null. Refuses
  // an allocation on another stream of the device while a strict capture
  // is under way: that memory would be outside the graph's pool.
  PrivatePool* captureTargetFor(orStream_t stream, std::unique_lock<std::mutex>& lock) {
    if (PrivatePool* target = graphPools_.targetFor(stream)) return target;
    if (std::optional<orStream_t> capturing = graphPools_.captureForbiddingOthers()) {
      lock.unlock();
      TORCH_CHECK(false, "openreg: allocating device memory on stream ", static_cast<void*>(stream),
                  " while a graph is being captured on stream ", static_cast<void*>(*capturing),
                  " of device ", static_cast<int>(device_), " would allocate outside the graph's memory pool. "
                  "Allocate before the capture, on the capturing stream, or capture with "
                  "capture_error_mode=\"relaxed\"");
    }
    return nullptr;
  }

  // Frees a released pool's segments once all its blocks are back (merged whole).
  void releasePrivatePoolIfIdle(PrivatePool* privatePool) {
    if (!privatePool->idle()) return;
    for (Pool* blocks : {&privatePool->small, &privatePool->large}) {
      for (Block* block : *blocks) freeSegment(block);
    }
    graphPools_.erase(*privatePool);
  }

  void finishPendingFree(Block* block) {
    if (--block->pendingEvents != 0) return;
    release(block);
    if (block->privatePool != nullptr) releasePrivatePoolIfIdle(block->privatePool);
  }

  // Returns blocks whose other-stream work has finished to their pools.
  void completeFinishedFrees() {
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (!it->first.completed()) {
        ++it;
        continue;
      }
      finishPendingFree(it->second);
      it = pending_.erase(it);
    }
  }

  void waitForAllFrees() {
    while (!pending_.empty()) {
      auto& [event, block] = pending_.front();
      orError_t status = event.synchronize();  // a sticky error must not leak the block
      // Inside a kernel, the event may await that very kernel: the free stays pending.
      if (status == orErrorNotPermitted) OPENREG_CHECK(status);
      finishPendingFree(block);
      pending_.pop_front();
    }
  }

  const c10::DeviceIndex device_;
  const bool caching_;
  std::mutex mutex_;
  Pool small_, large_;
  PrivatePools graphPools_;
  std::deque<std::pair<RecordedEvent, Block*>> pending_;
  DeviceStats stats_;
  // Note [Per-process memory fraction]: unset until set_per_process_memory_fraction.
  std::optional<double> fraction_;
  size_t allowedMaximum_ = 0;  // bytes: fraction_ times the device's total
};

}  // namespace torch_openreg::cache
