// TimingOnly.cpp - occl's collectives in timing-only mode: those on
// metadata also run on the host, on the values the host knows
// (Note [Collectives in timing-only mode]). Not here: queuing the kernel
// every collective still is (Backend.cpp), the collectives' bodies
// (Collectives.cpp).
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/record_function.h>
#include <ATen/ops/zeros.h>
#include <torch_openreg/Kernel.h>

#include <algorithm>

#include "Backend.h"
#include "Rendezvous.h"

namespace occl {

// LITERALINCLUDE START: OCCL_TIMING_ONLY_NOTE
// Note [Collectives in timing-only mode]
// In timing-only mode no kernel runs, a collective's neither: the ranks do
// not meet and the outputs get no values. That is right for a step's
// gradients, and wrong for the metadata a training script exchanges and
// reads back: DDP broadcasts every parameter's shape from rank 0 and
// compares, and its buckets' order; broadcast_object_list sends a length,
// then the pickled bytes. So a collective over at most kLargestKnownValues
// bytes (torch-openreg's Kernel.h) also runs on the host when it is
// queued, on the values the host knows (Note [Values the host knows in
// timing-only mode]): the ranks meet through the store, each saying
// whether the values it brings are known, and where every rank's are, the
// outputs are stated with the result, exact. Otherwise they stay unknown,
// as before. The kernel is still queued, so the prediction prices the
// collective, and device memory is never touched. Whether a collective runs
// on the host depends only on sizes every rank agrees on: all-to-all,
// scatter and point-to-point messages, whose sizes differ between ranks,
// never do, nor does a barrier, which moves nothing.
// LITERALINCLUDE END: OCCL_TIMING_ONLY_NOTE

namespace {

// An exchange through the store, on host tensors: each rank's record is the
// signature, its extras, whether the values it brings are known, then its
// packed bytes.
class HostTransport final : public Transport {
 public:
  HostTransport(Rendezvous& rendezvous, int size, bool bringsKnownValues)
      : rendezvous_(rendezvous), size_(size), bringsKnownValues_(bringsKnownValues) {}

  const char* name() const override { return "host"; }
  void reserve(int64_t) override {}  // host memory, allocated as it comes
  void reserveSend(int, int, int64_t) override {}
  Contributions exchange(const CollectiveName& name, const Contribution& mine,
                         std::chrono::milliseconds timeout) override {
    at::Tensor packed = at::empty({packedBytes(mine.tensors)}, at::kByte);
    packInto(packed, mine.tensors);
    std::string record = joinFields({mine.signature, joinInts(mine.extras), bringsKnownValues_ ? "1" : "0"}) + "\n";
    record.append(static_cast<const char*>(packed.data_ptr()), static_cast<size_t>(packed.numel()));
    std::vector<std::string> records = rendezvous_.meet(name, record, timeout);
    Contributions all;
    for (int r = 0; r < size_; ++r) {
      // Three fields, then the bytes, which may hold any character.
      size_t bytesAt = 0;
      for (int field = 0; field < 3; ++field) bytesAt = records[r].find('\n', bytesAt) + 1;
      std::vector<std::string> fields = splitFields(records[r].substr(0, bytesAt));
      all.extras.push_back(splitInts(fields[1]));
      allKnown_ = allKnown_ && fields[2] == "1";
      std::string bytes = records[r].substr(bytesAt);
      all.bytes.push_back(at::from_blob(bytes.data(), {static_cast<int64_t>(bytes.size())}, at::kByte).clone());
    }
    if (mine.checkExtras) mine.checkExtras(all.extras);
    return all;
  }
  void send(const CollectiveName& name, const at::Tensor&, int, int, std::chrono::milliseconds) override {
    throw CollectiveError("occl: " + name.str() + ": a message does not run on the host in timing-only mode");
  }
  int recv(const CollectiveName& name, const at::Tensor&, int, int, std::chrono::milliseconds) override {
    throw CollectiveError("occl: " + name.str() + ": a message does not run on the host in timing-only mode");
  }
  void shutdown(const CollectiveName&, std::chrono::milliseconds) override {}

  // After the exchange: whether every rank brought known values.
  bool allKnown() const { return allKnown_; }

 private:
  Rendezvous& rendezvous_;
  int size_;
  bool bringsKnownValues_;
  bool allKnown_ = true;
};

bool allKnown(const std::vector<at::Tensor>& tensors) {
  return std::all_of(tensors.begin(), tensors.end(),
                     [](const at::Tensor& t) { return torch_openreg::knownValues(t).has_value(); });
}

// The whole memory t lies in, as bytes: a collective may write views of one known tensor (all_gather_object's
// sizes), whose values the host can only state whole.
at::Tensor wholeMemoryOf(const at::Tensor& t) {
  int64_t bytes = static_cast<int64_t>(t.storage().nbytes());
  return at::empty({0}, t.options().dtype(at::kByte)).set_(t.storage(), 0, {bytes});
}

// A host tensor laid out as t, over the host's copy of t's whole memory.
at::Tensor laidOutAs(const at::Tensor& hostMemory, const at::Tensor& t) {
  return at::empty({0}, t.options().device(at::kCPU)).set_(hostMemory.storage(), t.storage_offset(), t.sizes(),
                                                            t.strides());
}

}  // namespace

bool OcclBackend::inTimingOnlyMode() {
  int on = 0;
  return orGetTimingOnly(&on) == orSuccess && on != 0;
}

bool OcclBackend::runsOnTheHost(const Collective& collective) const {
  using c10d::OpType;
  if (collective.pointToPoint || !inTimingOnlyMode()) return false;
  for (OpType differsByRank : {OpType::ALLTOALL, OpType::ALLTOALL_BASE, OpType::SCATTER, OpType::BARRIER}) {
    if (collective.type == differsByRank) return false;
  }
  // The tensors every rank passes alike: the inputs, or the tensors of an in-place collective.
  const std::vector<at::Tensor>& alike = collective.inputs.empty() ? collective.outputs : collective.inputs;
  return packedBytes(alike) <= torch_openreg::kLargestKnownValues;
}

OcclBackend::HostRun OcclBackend::hostRunOf(const Collective& collective) const {
  at::DisableRecordFunctionGuard unseen;  // the host's own work: no operator of the program (openreg-perf records them)
  HostRun run{collective.op, collective.body, allKnown(collective.contributed), collective.timeout, {}, {}};
  for (const auto* list : {&collective.inputs, &collective.outputs}) {
    for (const at::Tensor& t : *list) {
      at::Tensor whole = wholeMemoryOf(t);
      auto copied = std::find_if(run.memories.begin(), run.memories.end(),
                                 [&](const HostRun::Memory& m) { return m.device.is_alias_of(t); });
      if (copied == run.memories.end()) {
        std::optional<at::Tensor> known = torch_openreg::knownValues(whole);
        // Unknown memory: what the collective writes there is stated only if it writes all of it.
        at::Tensor host = known ? *known : at::zeros({whole.numel()}, at::kByte);
        copied = run.memories.insert(run.memories.end(), HostRun::Memory{whole, host, known.has_value()});
      }
      run.views.push_back(laidOutAs(copied->host, t));
      if (list == &collective.outputs) copied->outputBytes += static_cast<int64_t>(t.nbytes());
    }
  }
  return run;
}

void OcclBackend::runOnTheHost(HostRun run) {
  at::DisableRecordFunctionGuard unseen;
  if (!knownValues_) knownValues_ = std::make_unique<Rendezvous>(store_->clone(), getRank(), getSize(), "occl/known");
  // A count of the host's own: the keys of its rendezvous follow one another (Rendezvous.cpp deletes the last).
  CollectiveName name{run.op, hostSeq_++, group_ + " (on the host, timing-only mode)"};
  HostTransport transport(*knownValues_, getSize(), run.bringsKnownValues);
  try {
    run.body(transport, name, run.views, run.timeout);
  } catch (const std::exception& e) {
    // As a failed kernel's (Note [A failed collective]): the ranks are out of step, the group unusable.
    failure_->record(e.what());
    TORCH_CHECK(false, e.what());
  }
  if (!transport.allKnown()) return;
  for (const HostRun::Memory& memory : run.memories) {
    // Known before, or all of it written by the collective (its outputs do not overlap).
    if (memory.known || memory.outputBytes == memory.device.numel()) {
      torch_openreg::stateKnownValues(memory.device, memory.host);
    }
  }
}

}  // namespace occl
