// AllocatorBlocks.h - the device allocator's unit of memory: a block of a
// segment the runtime gave (orMalloc), and the pools that order free blocks
// for reuse (Note [How the caching allocator reuses memory] in
// DeviceAllocator.cpp). Shared by the allocator and the graphs' private
// pools (runtime/PrivatePools.h); guarded by the device cache's mutex.
#pragma once

#include <c10/core/Device.h>
#include <openreg/openreg.h>

#include <atomic>
#include <cstddef>
#include <set>
#include <vector>

namespace torch_openreg {

struct PrivatePool;

struct Block {
  c10::DeviceIndex device = 0;
  PrivatePool* privatePool = nullptr;  // a graph's pool, or null for the shared pools
  orStream_t stream = nullptr;  // the stream it was allocated on
  size_t size = 0;
  size_t requested = 0;
  char* ptr = nullptr;
  bool small = false;
  bool allocated = false;
  Block* prev = nullptr;  // neighbours inside the same segment
  Block* next = nullptr;
  std::set<orStream_t> otherStreams;  // from record_stream
  int pendingEvents = 0;
  // The work that made its contents in timing-only mode without computing
  // them, "" before any did, null for computed values (Note [Memory
  // timing-only mode never computed]). Read by launches without the mutex.
  std::atomic<const char*> uncomputedBy{nullptr};
  // Its values as the host knows them in timing-only mode (Note [Values the
  // host knows in timing-only mode]): the bytes of the storage it holds,
  // valid while hasKnownValues. Guarded by TimingOnlyMemory.cpp's lock.
  std::vector<char> knownValues;
  std::atomic<bool> hasKnownValues{false};

  bool wholeSegment() const { return prev == nullptr && next == nullptr; }
};

// Pools order blocks by (stream, size, address): best fit on one stream.
struct BlockOrder {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) return a->stream < b->stream;
    if (a->size != b->size) return a->size < b->size;
    return a->ptr < b->ptr;
  }
};
using Pool = std::set<Block*, BlockOrder>;

}  // namespace torch_openreg
