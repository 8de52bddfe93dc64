// IpcTransport.h - the same-host transport: ranks read each other's device
// memory directly, opened with the runtime's IPC calls (orIpcGetMemHandle,
// orIpcOpenMemHandle), so a collective is device-to-device copies and
// reductions with no host staging. Not here: reaching another host (the
// gloo transport does), nor deciding which transport a group uses
// (openreg_distributed/registration.py does).
//
// One of occl's engines, which a vendor replaces (Note [Replacing occl's
// transports] in Transport.h).
#pragma once

#include <openreg/openreg.h>

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ControlBlock.h"
#include "../Rendezvous.h"
#include "../Transport.h"

namespace occl {

// A device allocation of this process that peers can open.
struct SharedBuffer {
  void* device = nullptr;
  int64_t bytes = 0;
  std::string handle;  // the bytes of its orIpcMemHandle_t
};

class IpcTransport final : public Transport {
 public:
  // store: the group's store; the transport clones two connections of its
  // own (one for the comm stream's waits, one for the host's checks).
  IpcTransport(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size);
  ~IpcTransport() override;
  const char* name() const override { return "ipc"; }
  void reserve(int64_t bytes) override;
  void reserveSend(int dst, int tag, int64_t bytes) override;
  Contributions exchange(const CollectiveName& name, const Contribution& mine,
                         std::chrono::milliseconds timeout) override;
  void send(const CollectiveName& name, const at::Tensor& tensor, int dst, int tag,
            std::chrono::milliseconds timeout) override;
  int recv(const CollectiveName& name, const at::Tensor& into, int src, int tag,
           std::chrono::milliseconds timeout) override;
  void shutdown(const CollectiveName& last, std::chrono::milliseconds wait) override;
  void ended(const CollectiveName& name) override { control_.finished(name); }
  void abort() override { control_.abort(); }

  // For algorithms that work on the ranks' tensors where they lie
  // (fast/IpcAllreduce.cpp).
  int rank() const { return rank_; }
  // Host: where a device tensor lies, for the peers (Share::memory and
  // offset), or nothing if the runtime cannot export its memory.
  std::optional<Share> locate(const at::Tensor& deviceTensor);
  // Kernel: meets the peers, each bringing the tensor `where` locates
  // (view is this rank's host view of it), and returns every rank's bytes
  // in rank order, writable. The caller leaves through control()
  // (ControlBlock::leave) before its kernel ends.
  std::vector<at::Tensor> meetInPlace(const CollectiveName& name, const std::string& signature, const at::Tensor& view,
                                      const Share& where, std::chrono::milliseconds timeout);
  ControlBlock& control() { return control_; }

 private:
  // A send slot: a buffer and the message number last written into it.
  struct Slot {
    SharedBuffer buffer;
    int64_t lastMessage = -1;
  };
  struct Channel {  // this rank -> one peer, one tag
    std::vector<std::unique_ptr<Slot>> slots;
    std::deque<std::pair<int64_t, Slot*>> reserved;  // filled by the host, drained by send()
    int64_t nextMessage = 0;
  };

  SharedBuffer allocate(int64_t bytes);  // on the current device (the group's)
  // Rank peer's shared memory; a failure names the collective and the peer.
  at::Tensor peerBytes(const CollectiveName& name, int peer, const std::string& handle, int64_t offset,
                       int64_t bytes);
  std::string channelKey(int src, int dst, int tag, int64_t message) const;
  // Bounded by wait: until every message sent has been received (the
  // receiver reads it from our memory).
  void waitForReceivers(std::chrono::milliseconds wait);

  int rank_;
  int size_;
  ControlBlock control_;              // collectives meet here
  Rendezvous kernelSide_;             // messages, used by the comm stream only
  Rendezvous hostSide_;               // messages, used by the host thread only
  std::mutex mutex_;                  // guards mailbox_ and channels_ between host and kernel
  SharedBuffer mailbox_;              // two halves: collective seq writes half seq % 2
  std::vector<SharedBuffer> retired_; // outgrown mailboxes, still open in peers until shutdown
  std::map<std::pair<int, int>, Channel> channels_;  // (dst, tag)
  std::map<std::pair<int, int>, int64_t> received_;  // (src, tag) -> next message number
  std::map<std::string, void*> opened_;              // peer allocation's handle -> our mapping
  std::vector<std::string> mailboxesRead_;           // per rank, its mailbox read last (Note [The IPC mailbox])
  bool shutDown_ = false;
};

}  // namespace occl
