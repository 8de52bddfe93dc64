// GlooTransport.h - the transport for ranks on different hosts: device bytes
// are copied into pinned host staging buffers and moved by a
// ProcessGroupGloo, created by PyTorch and driven only through the
// c10d::Backend interface (Gloo's own headers are not shipped with torch).
// Not here: any network protocol of our own.
//
// One of occl's engines, which a vendor replaces (Note [Replacing occl's
// transports] in Transport.h).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <mutex>
#include <utility>
#include <vector>

#include "../Rendezvous.h"
#include "../Transport.h"

namespace occl {

class GlooTransport final : public Transport {
 public:
  GlooTransport(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                c10::intrusive_ptr<c10d::Backend> gloo);
  const char* name() const override { return "gloo"; }
  // Staging comes from the pinned host allocator's cache, inside the kernel.
  void reserve(int64_t bytes) override {}
  void reserveSend(int dst, int tag, int64_t bytes) override {}
  Contributions exchange(const CollectiveName& name, const Contribution& mine,
                         std::chrono::milliseconds timeout) override;
  void send(const CollectiveName& name, const at::Tensor& tensor, int dst, int tag,
            std::chrono::milliseconds timeout) override;
  int recv(const CollectiveName& name, const at::Tensor& into, int src, int tag,
           std::chrono::milliseconds timeout) override;
  void shutdown(const CollectiveName& last, std::chrono::milliseconds wait) override;

 private:
  at::Tensor staging(int64_t bytes) const;
  void finishSends(bool all);

  int size_;
  Rendezvous rendezvous_;
  c10::intrusive_ptr<c10d::Backend> gloo_;
  // Sends in flight: gloo's work and the staging it reads.
  std::vector<std::pair<c10::intrusive_ptr<c10d::Work>, at::Tensor>> sends_;
  std::mutex mutex_;  // guards sends_ between the comm stream and shutdown
};

}  // namespace occl
