// Transport.h - what occl asks of a way to move bytes between ranks: make
// every rank's contribution to one collective readable by every rank, and
// move one message from a rank to another. Not here: the collectives
// themselves (Collectives.cpp builds each one on these two calls) nor
// streams (every call below runs inside a kernel on the comm stream).
//
// Note [Replacing occl's transports]
// transports/ holds occl's engines: the same-host one over the runtime's IPC
// (IpcTransport, ControlBlock) and the cross-host one over gloo
// (GlooTransport). They are the part a vendor replaces with its own
// collective library, as NCCL is CUDA's: this interface is all that the
// collectives (Collectives.cpp) and the c10d integration (Backend.cpp) ask
// of them.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace occl {

// Names one collective in errors: "allreduce #12 in group 'default'".
struct CollectiveName {
  const char* op;
  uint64_t seq;
  std::string group;
  std::string str() const { return std::string(op) + " #" + std::to_string(seq) + " in group '" + group + "'"; }
};

// One rank's part of a collective, as the transport sees it.
struct Contribution {
  // Bytes this rank makes readable by the others: host views (CPU tensors
  // over device memory, valid while the kernel runs), laid out one after
  // the other at kAlignment boundaries. Empty: this rank contributes nothing.
  std::vector<at::Tensor> tensors;
  // What every rank must agree on (dtypes, shapes, root, reduce op).
  std::string signature;
  // Per-rank facts the others need but that may differ (split sizes).
  std::vector<int64_t> extras;
  // Checks every rank's extras (throwing on a disagreement) as soon as the
  // transport knows them, before it reads any rank's bytes: every rank then
  // finds a disagreement from the descriptions alone, and none reads the
  // memory of a peer that has already given up (and may have released it).
  std::function<void(const std::vector<std::vector<int64_t>>& extras)> checkExtras;
};

// Every rank's part, after the exchange. bytes[r] is rank r's tensors laid
// out as Contribution::tensors describes (an empty tensor if it gave
// nothing); valid until the next call on the transport.
struct Contributions {
  std::vector<at::Tensor> bytes;
  std::vector<std::vector<int64_t>> extras;
};

constexpr int64_t kAlignment = 64;

// Packing.cpp: bytes tensors take laid out one after the other at
// kAlignment boundaries.
int64_t packedBytes(const std::vector<at::Tensor>& tensors);
// The tensor of dtype and sizes starting `offset` bytes into a rank's bytes.
at::Tensor unpack(const at::Tensor& bytes, int64_t offset, c10::ScalarType dtype, at::IntArrayRef sizes);
// Copies tensors into bytes, laid out as packedBytes counts them.
void packInto(const at::Tensor& bytes, const std::vector<at::Tensor>& tensors);

// A transport belongs to one process group. Its kernel-side calls
// (exchange, send, recv) run on the group's comm stream worker, one at a
// time; reserve/reserveSend and shutdown run on host threads meanwhile, so
// what both sides touch is guarded by the transport's own lock.
// Every call either completes or throws std::runtime_error naming the
// collective; none waits longer than the timeout it is given.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  // Called on the host when a collective is queued, before its kernel:
  // reserve what the kernel will need for a contribution of `bytes` bytes
  // (device memory cannot be allocated or freed inside a kernel).
  virtual void reserve(int64_t bytes) = 0;
  // The same for a send of `bytes` bytes to dst, called in send order.
  virtual void reserveSend(int dst, int tag, int64_t bytes) = 0;
  // The exchange: blocks until every rank's contribution is readable; runs
  // mine.checkExtras, if any, before reading any rank's bytes.
  virtual Contributions exchange(const CollectiveName& name, const Contribution& mine,
                                 std::chrono::milliseconds timeout) = 0;
  // Point to point. send may return before the receiver has the data (the
  // bytes are copied out first); recv fills `into` from rank src, or from
  // the first sender when src is -1, and returns the sender's rank.
  virtual void send(const CollectiveName& name, const at::Tensor& tensor, int dst, int tag,
                    std::chrono::milliseconds timeout) = 0;
  virtual int recv(const CollectiveName& name, const at::Tensor& into, int src, int tag,
                   std::chrono::milliseconds timeout) = 0;
  // Kernel, after a collective's body returned on this rank: what the
  // transport lent its peers for it may be freed once they have ended it
  // too. A transport that frees nothing a peer reads does nothing here.
  virtual void ended(const CollectiveName& name) {}
  // Any thread, at any time: the calls in flight and every later one fail
  // at once instead of waiting for peers (abort, destroy of a group whose
  // collective cannot complete). A transport whose engine cannot be
  // interrupted lets its calls end at their timeout.
  virtual void abort() {}
  // Called on the host once the comm stream is idle: release everything.
  // A transport whose peers may still need this rank's memory (a message
  // not yet received) waits for them first, at most `wait` (zero: do not
  // wait, the group failed or was aborted). `last` names the group's end.
  virtual void shutdown(const CollectiveName& last, std::chrono::milliseconds wait) = 0;
};

}  // namespace occl
