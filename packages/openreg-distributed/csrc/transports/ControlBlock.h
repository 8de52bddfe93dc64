// ControlBlock.h - how the ranks of an IPC group meet for each collective
// without the store: each rank owns a small region of device memory, opened
// once by its peers, where it writes what it brings to a collective and then
// raises a progress counter that the peers watch. See Note [The control
// block]. Not here: the collective's bytes (IpcTransport reads them where
// they lie) nor point-to-point messages (they still go through the store).
//
// One of occl's engines, which a vendor replaces (Note [Replacing occl's
// transports] in Transport.h).
#pragma once

#include <openreg/openreg.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "../Rendezvous.h"

namespace occl {

// What one rank brings to one collective, as its peers read it.
struct Share {
  std::string signature;        // what every rank must agree on
  std::vector<int64_t> extras;  // per-rank facts (split sizes)
  std::string memory;           // orIpcMemHandle_t bytes of the allocation holding them, or empty
  int64_t offset = 0;           // of the bytes in that allocation
  int64_t bytes = 0;
};

class ControlBlock {
 public:
  // store: a connection of its own, used once, when the peers connect.
  ControlBlock(c10::intrusive_ptr<c10d::Store> store, int rank, int size);

  // Host, on the group's device, before the first collective's kernel:
  // allocates this rank's region (a kernel may not allocate).
  void allocate();
  // Kernel: posts mine as this rank's part of collective name.seq, waits for
  // every rank's and returns them in rank order. Throws CollectiveError
  // naming the ranks that did not arrive within timeout (or whose process
  // exited), or those whose signature differs.
  std::vector<Share> meet(const CollectiveName& name, const Share& mine, std::chrono::milliseconds timeout);
  // Kernel, for an algorithm that works on the peers' memory in place:
  // marks this rank done with it for collective name.seq and waits until
  // every rank is, so that no rank's memory changes while a peer still
  // reads or writes it; what names the wait in errors.
  void leave(const CollectiveName& name, const char* what, std::chrono::milliseconds timeout);
  // Kernel, once collective name.seq has ended on this rank (its reads of
  // the peers' memory are over): the peers may free what it read.
  void finished(const CollectiveName& name);
  // Host, before freeing: waits until every peer has finished `count`
  // collectives, at most `wait` (less if a peer exited or the group was
  // aborted); a peer that cannot finish costs no more than that.
  void awaitPeersFinished(uint64_t count, std::chrono::milliseconds wait);
  // Any thread: every wait, now and later, fails at once (abort, destroy).
  void abort() { aborted_.store(true); }
  bool aborted() const { return aborted_.load(); }
  // Host, with no kernel running: closes the peers' regions, frees ours.
  void release();

  static constexpr int kMaxSignatureChars = 1024;
  static constexpr int kMaxExtras = 256;
  struct Region;  // the layout in shared memory (ControlBlock.cpp)

 private:
  void connect(const CollectiveName& name, std::chrono::milliseconds timeout);
  // Waits until every peer's counter reaches target; what names the wait.
  // Until counter `field` of every rank in `ranks` reaches target; what
  // names the wait in errors.
  void waitFor(const CollectiveName& name, std::atomic<uint64_t> Region::*field, const std::vector<int>& ranks, uint64_t target,
               const char* what, std::chrono::milliseconds timeout);
  std::string lateRanks(std::atomic<uint64_t> Region::*field, const std::vector<int>& ranks, uint64_t target) const;
  std::vector<int> everyRank_;

  c10::intrusive_ptr<c10d::Store> store_;
  int rank_;
  int size_;
  void* mine_ = nullptr;                 // device pointer of this rank's region
  std::string handle_;                   // its orIpcMemHandle_t bytes
  std::vector<void*> opened_;            // peers' regions as opened here (null: ours / not yet)
  std::vector<Region*> regions_;         // host aliases of every rank's region, once connected
  std::atomic<bool> aborted_{false};
};

}  // namespace occl
