// PrivatePools.h - the device allocator's private pools, for graph captures:
// which pool a capturing stream allocates from, and when a pool may go.
// Not here: the blocks themselves (runtime/AllocatorBlocks.h) or giving a
// pool's segments back to the runtime (the device cache does, in
// DeviceAllocator.cpp). Not thread-safe: the device cache calls it under
// its mutex.
#pragma once

#include <c10/core/Allocator.h>
#include <openreg/openreg.h>

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "runtime/AllocatorBlocks.h"

namespace torch_openreg {

// LITERALINCLUDE START: GRAPH_PRIVATE_POOL
// Note [Graph memory pools]
// Kernels captured into a graph keep the addresses they were captured with,
// so the memory a capture allocates must not be handed to anyone else while
// the graph can still replay. A capture therefore allocates from a private
// pool (per MempoolId, shared by graphs given the same id): blocks freed
// during the capture are reused only by that pool's later allocations, in
// the same stream order that every replay follows. The pool's segments go
// back to the runtime when its last graph releases it (Graph.reset()) and
// none of its blocks is still held by a tensor.
struct PrivatePool {
  c10::MempoolId_t id;
  Pool small, large;
  int graphs = 0;              // graphs using the pool; 0: release it when idle
  size_t allocatedBlocks = 0;  // blocks not back in the pool (held, or waiting for record_stream's events)

  // Neither a graph nor a tensor needs its memory: its segments can go back.
  bool idle() const { return graphs == 0 && allocatedBlocks == 0; }
};

// A capture under way: its stream's allocations go to pool.
struct CaptureTarget {
  orStream_t stream;
  PrivatePool* pool;
  bool othersForbidden;  // allocations on other streams of the device raise
};
// LITERALINCLUDE END: GRAPH_PRIVATE_POOL

class PrivatePools {
 public:
  // From now on stream's allocations come from pool id (made on first use),
  // which one more graph uses. othersForbidden: another stream of the device
  // may not allocate meanwhile (a capture in "global" or "thread_local" mode).
  void beginCapture(c10::MempoolId_t id, orStream_t stream, bool othersForbidden);
  // stream allocates from the shared pools again.
  void endCapture(orStream_t stream);
  // One graph fewer uses pool id: the pool, for the caller to release if it
  // is idle; null if no graph used it.
  PrivatePool* releaseGraph(c10::MempoolId_t id);
  // Forgets an idle pool whose segments the caller gave back.
  void erase(const PrivatePool& pool);

  // The pool a capturing stream allocates from, or null.
  PrivatePool* targetFor(orStream_t stream) const;
  // The capturing stream that forbids allocations on the others, if any.
  std::optional<orStream_t> captureForbiddingOthers() const;
  bool capturing() const { return !captures_.empty(); }

 private:
  std::map<c10::MempoolId_t, std::unique_ptr<PrivatePool>> pools_;
  std::vector<CaptureTarget> captures_;
};

}  // namespace torch_openreg
