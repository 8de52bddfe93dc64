// Backend.h - OcclBackend, the "occl" c10d::Backend for openreg tensors. It
// queues every collective as one kernel on a comm stream of its own that
// first waits for the tensors' current stream, as ProcessGroupNCCL does on
// CUDA; the kernel moves the bytes through a Transport, and a collective
// that fails fails the work ordered after it (Note [A failed collective]).
// Not here: how bytes cross processes (IpcTransport, GlooTransport), the
// Python registration (openreg_distributed/registration.py).
#pragma once

#include <c10/core/Stream.h>
#include <openreg/openreg.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "Transport.h"
#include "Work.h"

namespace occl {

class Rendezvous;

// Makes the transport of a group (a new one for each split).
using TransportFactory = std::function<std::shared_ptr<Transport>(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout)>;

// What runs inside a collective's kernel: the transport, the collective's
// name, the host views of the launched tensors (inputs, then outputs), the
// timeout.
using CollectiveBody = std::function<void(Transport&, const CollectiveName&, std::vector<at::Tensor>&,
                                          std::chrono::milliseconds)>;

class OcclBackend : public c10d::Backend {  // not final: SeededDefects.cpp derives a broken one for tests
 public:
  OcclBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout,
              std::string group, TransportFactory makeTransport);
  ~OcclBackend() override;

  const std::string getBackendName() const override { return "occl"; }
  const char* transportName() const { return transport_->name(); }
  bool supportsCoalescing() const override { return true; }
  bool supportsSplitting() const override { return true; }
  // c10d asks the ranks outside a new subgroup to take part in the split
  // (NCCL's ncclCommSplit needs every rank of the parent). An occl group is
  // made by its members alone (each new group meets through its own store
  // keys), so a rank outside it has nothing to do: the call checks the
  // device it is given and returns.
  void performNocolorSplit(const c10::Device& device);
  void setTimeout(std::chrono::milliseconds timeout) override { timeout_ = timeout; }
  // Sequence numbers of collectives: every rank's counter starts at 0 when
  // the group is made and counts the same collectives, so the ranks agree
  // without exchanging anything (gloo's and NCCL's agree through the store).
  void setSequenceNumberForGroup() override { TORCH_CHECK(seq_ == 0, "occl: the group has already run collectives"); }
  uint64_t getSequenceNumberForGroup() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return seq_;
  }
  // What split_group copies into its children: the backend name and timeout.
  c10::intrusive_ptr<Options> getBackendOptions() override;
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& options) override;
  // Waits for the comm stream, then releases the transport's device memory
  // and the comm stream. Waits at most kLongestDestroyWaitMs for the peers
  // to finish with this rank's shared memory (they destroy the group too).
  void shutdown() override;
  static constexpr int64_t kLongestDestroyWaitMs = 10000;
  // As shutdown, but at once: the collectives in flight fail now instead of
  // waiting for their peers (the IPC transport; gloo's end at its timeout).
  void abort() override;

  // The collectives of c10d::Backend (Collectives.cpp).
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits, std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  using Body = CollectiveBody;
  // One collective as the collectives describe it to launch().
  struct Collective {
    const char* op;
    c10d::OpType type;
    std::vector<at::Tensor> inputs;   // launched first; ordered after their current stream
    std::vector<at::Tensor> outputs;  // launched next; Work::result() and the future's value
    int64_t contributionBytes = 0;    // what the transport must reserve for this rank's part
    int sendTo = -1;                  // a send: reserve a message to this rank instead
    int tag = 0;
    std::chrono::milliseconds timeout;
    Body body;
    std::shared_ptr<std::atomic<int>> source;  // recv from any source: who sent
    bool blocksHost = false;                   // barrier: wait() blocks the host too
    bool pointToPoint = false;                 // not counted in the collective sequence
    std::vector<at::Tensor> contributed;       // the tensors whose values this rank brings
  };

  // Note [Collectives in timing-only mode] (TimingOnly.cpp): whether the
  // collective also runs on the host, and that run, taken from the
  // collective before its kernel is queued (which makes the values the host
  // knew of its tensors unknown again) and run after.
  struct HostRun {
    // The host's copy of the memory of some of the collective's tensors.
    struct Memory {
      at::Tensor device;  // all of that memory, as bytes
      at::Tensor host;
      bool known;                // the host knew its values before
      int64_t outputBytes = 0;   // what the collective's outputs cover of it
    };
    const char* op;
    Body body;
    bool bringsKnownValues;
    std::chrono::milliseconds timeout;
    std::vector<Memory> memories;
    std::vector<at::Tensor> views;  // the inputs, then the outputs, over memories
  };
  static bool inTimingOnlyMode();  // the runtime's Note [Timing-only mode]: no kernel runs
  bool runsOnTheHost(const Collective& collective) const;
  HostRun hostRunOf(const Collective& collective) const;
  void runOnTheHost(HostRun run);

  // A collective of op over inputs, then outputs, to which this rank
  // contributes `contributed` (packed) and waits at most `requested`
  // (kUnsetTimeout: the group's); its body and flags are the caller's.
  Collective collective(const char* op, c10d::OpType type, std::vector<at::Tensor> inputs,
                        std::vector<at::Tensor> outputs, const std::vector<at::Tensor>& contributed,
                        std::chrono::milliseconds requested) const;
  c10::intrusive_ptr<c10d::Work> launch(Collective collective);
  // The future of work just queued on the comm stream: completed now with
  // outputs, stream-ordered after it (Note [occl's stream semantics]).
  c10::intrusive_ptr<c10::ivalue::Future> queuedFuture(const std::vector<at::Tensor>& outputs);
  c10::Device bindDevice(const Collective& collective);
  std::chrono::milliseconds timeoutOf(std::chrono::milliseconds requested) const;

  // Several host threads may queue collectives on one group (DDP's reducer
  // and the main thread, FSDP2's): the lazily bound device and stream, the
  // counters and the coalescing state change only under this lock.
  std::mutex mutex_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::chrono::milliseconds timeout_;
  std::string group_;
  TransportFactory makeTransport_;
  std::shared_ptr<Transport> transport_;
  std::shared_ptr<GroupFailure> failure_ = std::make_shared<GroupFailure>();
  std::optional<c10::Device> device_;  // bound by the first collective
  orStream_t commNative_ = nullptr;    // the group's own stream on device_, created by bindDevice
  std::optional<c10::Stream> comm_;    // the same, as torch sees it
  uint64_t seq_ = 0;                   // collectives queued so far
  uint64_t messages_ = 0;              // sends and receives queued so far
  int splits_ = 0;
  bool coalescing_ = false;
  std::vector<at::Tensor> coalescedOutputs_;
  bool shutDown_ = false;
  std::unique_ptr<Rendezvous> knownValues_;  // the host's runs meet here, made by the first
  uint64_t hostSeq_ = 0;                     // collectives run on the host so far
};

}  // namespace occl
