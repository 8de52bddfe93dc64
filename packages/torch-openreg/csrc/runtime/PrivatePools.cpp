// GraphPools.cpp - see GraphPools.h.
#include "graphs/GraphPools.h"

#include <algorithm>

namespace torch_openreg {

void GraphPools::beginCapture(c10::MempoolId_t id, orStream_t stream, bool othersForbidden) {
  auto& pool = pools_[id];
  if (pool == nullptr) pool = std::make_unique<PrivatePool>(PrivatePool{id});
  ++pool->graphs;
  captures_.push_back({stream, pool.get(), othersForbidden});
}

void GraphPools::endCapture(orStream_t stream) {
  captures_.erase(std::remove_if(captures_.begin(), captures_.end(),
                                 [&](const CaptureTarget& c) { return c.stream == stream; }),
                  captures_.end());
}

PrivatePool* GraphPools::releaseGraph(c10::MempoolId_t id) {
  auto found = pools_.find(id);
  if (found == pools_.end() || found->second->graphs == 0) return nullptr;
  --found->second->graphs;
  return found->second.get();
}

void GraphPools::erase(const PrivatePool& pool) { pools_.erase(pool.id); }

PrivatePool* GraphPools::targetFor(orStream_t stream) const {
  for (const CaptureTarget& capture : captures_) {
    if (capture.stream == stream) return capture.pool;
  }
  return nullptr;
}

std::optional<orStream_t> GraphPools::captureForbiddingOthers() const {
  for (const CaptureTarget& capture : captures_) {
    if (capture.othersForbidden) return capture.stream;
  }
  return std::nullopt;
}

}  // namespace torch_openreg
