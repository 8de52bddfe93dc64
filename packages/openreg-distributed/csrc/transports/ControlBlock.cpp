// ControlBlock.cpp - meeting through counters in shared device memory
// (ControlBlock.h).
#include "ControlBlock.h"

#include "../Platform.h"

#include <openreg/openreg.hpp>

#include <c10/util/Exception.h>

#include <cstddef>
#include <algorithm>
#include <cstring>
#include <functional>
#include <thread>

namespace occl {

// Note [The control block]
// Each rank of an IPC group owns a Region in device memory. When the group's
// first collective runs, every rank opens every peer's Region once (its IPC
// handle travels through the store, the only store round trip of the group's
// collectives); from then on a collective costs no store access. A rank
// raises its `stage` counter to 2 * seq + 1 once its record for
// collective seq is written (arrival), then to 2 * seq + 2 when it leaves
// an algorithm that works on the peers' memory in place
// (fast/IpcAllreduce.cpp). Counters only grow and are published after a
// full fence (the copies before them may use non-temporal stores, which a
// release store alone does not order on x86) and read with acquire loads,
// so a peer that sees a counter sees every byte written before it.
// Records alternate: seq writes records[seq % 2]. A rank writes
// records[seq % 2] again at seq + 2, after seeing every peer arrive at
// seq + 1, which a peer does only after it finished reading seq: no peer
// can still be reading it.
// A rank that never arrives is found by the deadline; one whose process
// exited is found sooner, through the pid in its Region.
// Each rank also counts the collectives it has finished (`done`). Before a
// rank frees memory its peers read (destroy), it waits for their `done` to
// reach its own: a peer that has opened the memory keeps it alive, but one
// that has yet to open it would find its handle stale.

namespace {

constexpr uint64_t kStages = 2;  // per collective: arrived, left

// Raises one of this rank's counters; see the Note for the fence.
void publish(std::atomic<uint64_t>* counter, uint64_t value) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  counter->store(value, std::memory_order_release);
}

uint64_t signatureHash(const std::string& signature) { return std::hash<std::string>{}(signature); }

}  // namespace

struct ControlBlock::Region {
  struct Record {
    uint64_t signatureHash;
    uint32_t signatureChars;  // of the (possibly cut) text below
    uint32_t extraCount;
    char signature[kMaxSignatureChars];
    char memory[OR_IPC_HANDLE_SIZE];
    uint32_t hasMemory;
    int64_t offset;
    int64_t bytes;
    int64_t extras[kMaxExtras];
  };
  // Lock-free atomics work between processes that map the same memory.
  std::atomic<uint64_t> stage;  // written with release stores only (see the Note)
  std::atomic<uint64_t> done;   // collectives this rank has finished, likewise
  std::atomic<int32_t> pid;
  Record records[2];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<int32_t>::is_always_lock_free,
              "the counters are shared between processes: only lock-free atomics are address-free");

ControlBlock::ControlBlock(c10::intrusive_ptr<c10d::Store> store, int rank, int size)
    : store_(std::move(store)), rank_(rank), size_(size), opened_(size, nullptr) {
  for (int r = 0; r < size; ++r) everyRank_.push_back(r);
}

void ControlBlock::allocate() {
  if (mine_) return;
  openreg::check(orMalloc(&mine_, sizeof(Region)));
  openreg::check(orMemset(mine_, 0, sizeof(Region)));
  // The pid lets peers tell a rank that exited from one that is late.
  int32_t pid = platform::processId();
  openreg::check(orMemcpy(static_cast<char*>(mine_) + offsetof(Region, pid), &pid, sizeof(pid), orMemcpyHostToDevice));
  orIpcMemHandle_t handle;
  openreg::check(orIpcGetMemHandle(&handle, mine_));
  handle_.assign(handle.reserved, sizeof(handle.reserved));
  store_->set("occl/ipc/control/" + std::to_string(rank_), std::vector<uint8_t>(handle_.begin(), handle_.end()));
}

// Polls the store (abortable) for every peer's handle, then opens them.
void ControlBlock::connect(const CollectiveName& name, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<std::string> missing;
  for (auto pause = std::chrono::milliseconds(1);; pause = std::min(pause * 2, std::chrono::milliseconds(50))) {
    missing.clear();
    for (int r = 0; r < size_; ++r) {
      if (!store_->check({"occl/ipc/control/" + std::to_string(r)})) missing.push_back(std::to_string(r));
    }
    if (missing.empty()) break;
    if (aborted_ || std::chrono::steady_clock::now() > deadline) {
      std::string ranks;
      for (const auto& r : missing) ranks += (ranks.empty() ? "" : ", ") + r;
      throw CollectiveError("occl: " + name.str() + (aborted_ ? " was aborted" : " did not complete within " +
                            std::to_string(timeout.count()) + " ms") + " on rank " + std::to_string(rank_) +
                            ": rank(s) that did not join: " + ranks + ". A rank that died or skipped the "
                            "collective leaves the group unusable: destroy it and restart the job.");
    }
    std::this_thread::sleep_for(pause);
  }
  regions_.assign(size_, nullptr);
  for (int r = 0; r < size_; ++r) {
    void* device = mine_;
    if (r != rank_) {
      std::vector<uint8_t> bytes = store_->get("occl/ipc/control/" + std::to_string(r));
      orIpcMemHandle_t handle;
      TORCH_CHECK(bytes.size() == sizeof(handle.reserved), "occl: malformed control handle in the store");
      std::memcpy(handle.reserved, bytes.data(), bytes.size());
      orError_t status = orIpcOpenMemHandle(&opened_[r], handle, 0);
      if (status != orSuccess) {
        throw CollectiveError("occl: " + name.str() + ": cannot read the shared device memory of rank " +
                              std::to_string(r) + ": " + orGetLastErrorMessage());
      }
      device = opened_[r];
    }
    regions_[r] = openreg::translate(static_cast<Region*>(device));
  }
}

std::string ControlBlock::lateRanks(std::atomic<uint64_t> Region::*field, const std::vector<int>& ranks, uint64_t target) const {
  std::string late;
  for (int r : ranks) {
    if (r == rank_ || (regions_[r]->*field).load(std::memory_order_acquire) >= target) continue;
    int32_t pid = regions_[r]->pid.load(std::memory_order_acquire);
    late += (late.empty() ? "" : ", ") + std::to_string(r) + (pid && platform::processExited(pid) ? " (its process exited)" : "");
  }
  return late;
}

// LITERALINCLUDE START: OCCL_CONTROL_WAIT
void ControlBlock::waitFor(const CollectiveName& name, std::atomic<uint64_t> Region::*field, const std::vector<int>& ranks,
                           uint64_t target, const char* what, std::chrono::milliseconds timeout) {
  auto start = std::chrono::steady_clock::now();
  auto deadline = start + timeout, nextLivenessCheck = start + std::chrono::milliseconds(100);
  for (int round = 0;; ++round) {
    bool all = true;
    for (size_t i = 0; i < ranks.size() && all; ++i) {
      all = (regions_[ranks[i]]->*field).load(std::memory_order_acquire) >= target;
    }
    if (all) return;
    // Spin briefly (the peer is usually a few microseconds behind), then
    // yield the core, then sleep: the ranks may share few cores.
    if (round < 64) continue;
    if (round < 2048) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(round < 4096 ? 20 : 200));
    auto now = std::chrono::steady_clock::now();
    bool exited = false;
    if (now > nextLivenessCheck) {
      exited = lateRanks(field, ranks, target).find("exited") != std::string::npos;
      nextLivenessCheck = now + std::chrono::milliseconds(100);
    }
    if (aborted_ || exited || now > deadline) {
      std::string why = aborted_ ? " was aborted" : exited ? " cannot complete" : " did not complete within " +
                        std::to_string(timeout.count()) + " ms";
      throw CollectiveError("occl: " + name.str() + why + " on rank " + std::to_string(rank_) + " (" + what +
                            "): rank(s) that did not join: " + lateRanks(field, ranks, target) + ". A rank that "
                            "died or skipped the collective leaves the group unusable: destroy it and restart "
                            "the job.");
    }
  }
}
// LITERALINCLUDE END: OCCL_CONTROL_WAIT

std::vector<Share> ControlBlock::meet(const CollectiveName& name, const Share& mine,
                                      std::chrono::milliseconds timeout) {
  if (regions_.empty()) connect(name, timeout);
  if (mine.extras.size() > static_cast<size_t>(kMaxExtras)) {
    throw CollectiveError("occl: " + name.str() + ": the IPC transport carries at most " +
                          std::to_string(kMaxExtras) + " split sizes per rank");
  }
  Region::Record& record = regions_[rank_]->records[name.seq % 2];
  record.signatureHash = signatureHash(mine.signature);
  record.signatureChars = static_cast<uint32_t>(std::min<size_t>(mine.signature.size(), kMaxSignatureChars));
  std::memcpy(record.signature, mine.signature.data(), record.signatureChars);
  record.hasMemory = !mine.memory.empty();
  if (record.hasMemory) std::memcpy(record.memory, mine.memory.data(), OR_IPC_HANDLE_SIZE);
  record.offset = mine.offset;
  record.bytes = mine.bytes;
  record.extraCount = static_cast<uint32_t>(mine.extras.size());
  std::copy(mine.extras.begin(), mine.extras.end(), record.extras);
  publish(&regions_[rank_]->stage, name.seq * kStages + 1);
  waitFor(name, &Region::stage, everyRank_, name.seq * kStages + 1, "arriving", timeout);

  std::vector<Share> all(size_);
  for (int r = 0; r < size_; ++r) {
    const Region::Record& theirs = regions_[r]->records[name.seq % 2];
    Share& share = all[r];
    share.signature.assign(theirs.signature, theirs.signatureChars);
    if (theirs.hasMemory) share.memory.assign(theirs.memory, OR_IPC_HANDLE_SIZE);
    share.offset = theirs.offset;
    share.bytes = theirs.bytes;
    share.extras.assign(theirs.extras, theirs.extras + std::min<uint32_t>(theirs.extraCount, kMaxExtras));
    if (theirs.signatureHash != record.signatureHash) {
      throw CollectiveError("occl: " + name.str() + ": ranks disagree on the tensors: rank " + std::to_string(rank_) +
                            " has " + mine.signature + ", rank " + std::to_string(r) + " has " + share.signature +
                            ". Every rank must pass tensors of the same dtype and shape (and the same root and "
                            "reduce op) to a collective.");
    }
  }
  return all;
}

void ControlBlock::leave(const CollectiveName& name, const char* what, std::chrono::milliseconds timeout) {
  uint64_t target = name.seq * kStages + 2;
  publish(&regions_[rank_]->stage, target);
  waitFor(name, &Region::stage, everyRank_, target, what, timeout);
}

void ControlBlock::finished(const CollectiveName& name) {
  if (regions_.empty()) return;  // the collective failed before the ranks connected
  publish(&regions_[rank_]->done, name.seq + 1);
}

void ControlBlock::awaitPeersFinished(uint64_t count, std::chrono::milliseconds wait) {
  if (regions_.empty() || count == 0) return;
  try {
    waitFor(CollectiveName{"destroy", count, ""}, &Region::done, everyRank_, count, "finishing", wait);
  } catch (const CollectiveError&) {
    // Late or gone: it cannot need our memory for long, or it opened it
    // already (an open mapping outlives our free).
  }
}

void ControlBlock::release() {
  // Errors are ignored: the process is leaving the group whatever happens.
  for (void*& device : opened_) {
    if (device) (void)orIpcCloseMemHandle(device);
    device = nullptr;
  }
  if (mine_) (void)orFree(mine_);
  mine_ = nullptr;
  regions_.clear();
}

}  // namespace occl
