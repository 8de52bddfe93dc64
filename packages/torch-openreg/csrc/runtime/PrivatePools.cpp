// PrivatePools.cpp - see PrivatePools.h.
#include "runtime/PrivatePools.h"

#include <algorithm>

namespace torch_openreg {

void PrivatePools::beginCapture(c10::MempoolId_t id, orStream_t stream, bool othersForbidden) {
  auto& pool = pools_[id];
  if (pool == nullptr) pool = std::make_unique<PrivatePool>(PrivatePool{id});
  ++pool->graphs;
  captures_.push_back({stream, pool.get(), othersForbidden});
}

void PrivatePools::endCapture(orStream_t stream) {
  captures_.erase(std::remove_if(captures_.begin(), captures_.end(),
                                 [&](const CaptureTarget& c) { return c.stream == stream; }),
                  captures_.end());
}

PrivatePool* PrivatePools::releaseGraph(c10::MempoolId_t id) {
  auto found = pools_.find(id);
  if (found == pools_.end() || found->second->graphs == 0) return nullptr;
  --found->second->graphs;
  return found->second.get();
}

void PrivatePools::erase(const PrivatePool& pool) { pools_.erase(pool.id); }

PrivatePool* PrivatePools::targetFor(orStream_t stream) const {
  for (const CaptureTarget& capture : captures_) {
    if (capture.stream == stream) return capture.pool;
  }
  return nullptr;
}

std::optional<orStream_t> PrivatePools::captureForbiddingOthers() const {
  for (const CaptureTarget& capture : captures_) {
    if (capture.othersForbidden) return capture.stream;
  }
  return std::nullopt;
}

}  // namespace torch_openreg
