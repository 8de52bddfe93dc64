// Backend.cpp - how OcclBackend queues a collective with NCCL's stream
// semantics (Note [occl's stream semantics]), coalescing, split and
// shutdown. The collectives themselves are in Collectives.cpp.
#include "Backend.h"

#include <ATen/core/ivalue.h>

#include <algorithm>
#include <c10/core/DeviceGuard.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <openreg/openreg.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch_openreg/Kernel.h>

#include <string>

#include "Rendezvous.h"

namespace occl {

namespace {

// A failure as the group reports it: the collective and, for errors thrown
// below the collectives (a transport call), that they happened inside it.
std::string namedFailure(const CollectiveName& name, const std::string& message) {
  if (message.find(name.str()) != std::string::npos) return message;
  return "occl: " + name.str() + " failed: " + message;
}

}  // namespace

// Note [Each group meets under keys of its own]
// c10d hands a group the store under a prefix made of the group's name, and
// names are reused: the default group made again after
// destroy_process_group() is "0" again, and its old keys (the control
// blocks' handles, unreceived messages) are still in the store. So every
// group of this name that a rank makes gets the next number of a counter of
// the rank's own, and the group's keys live under that number: the ranks of
// one group agree on it (each has made the same groups of this name before),
// and no group ever reads a key of an earlier one. A rank that made a
// different number of them meets nobody, and the collective fails loudly
// with a timeout naming it, as gloo does.
namespace {

c10::intrusive_ptr<c10d::Store> keysOfThisGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank) {
  int64_t instance = store->add("occl/instances/" + std::to_string(rank), 1);
  return c10::make_intrusive<c10d::PrefixStore>("occl/" + std::to_string(instance), store);
}

}  // namespace

OcclBackend::OcclBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                         std::chrono::milliseconds timeout, std::string group, TransportFactory makeTransport)
    : c10d::Backend(rank, size),
      store_(keysOfThisGroup(store, rank)),
      timeout_(timeout),
      group_(std::move(group)),
      makeTransport_(std::move(makeTransport)),
      transport_(makeTransport_(store_, rank, size, timeout)) {}

OcclBackend::~OcclBackend() {
  try {
    shutdown();
  } catch (...) {
    // A destructor must not throw; shutdown already reported what it could.
  }
}

std::chrono::milliseconds OcclBackend::timeoutOf(std::chrono::milliseconds requested) const {
  return requested == c10d::kUnsetTimeout ? timeout_ : requested;
}

// Every tensor of a collective on the one openreg device the group uses.
c10::Device OcclBackend::bindDevice(const Collective& collective) {
  std::optional<c10::Device> seen;
  for (const auto* list : {&collective.inputs, &collective.outputs}) {
    for (const at::Tensor& t : *list) {
      TORCH_CHECK(torch_openreg::isOpenRegTensor(t), "occl: ", collective.op, " got a tensor on ",
                  t.defined() ? t.device().str() : "no device", "; occl moves openreg tensors only (use a "
                  "\"cpu:gloo,openreg:occl\" group for CPU tensors)");
      TORCH_CHECK(t.is_contiguous(), "occl: ", collective.op, " needs contiguous tensors; call .contiguous()");
      TORCH_CHECK(!seen || *seen == t.device(), "occl: ", collective.op, " got tensors on ", *seen, " and ",
                  t.device(), "; one rank uses one device");
      seen = t.device();
    }
  }
  c10::Device device = seen.value_or(c10::Device(c10::DeviceType::PrivateUse1,
                                                 c10::impl::VirtualGuardImpl(c10::DeviceType::PrivateUse1).getDevice().index()));
  if (!device_) {
    // A stream of the group's own, as each NCCL communicator has: its
    // failure (Note [A failed collective]) must not reach other groups.
    c10::DeviceGuard onDevice(device);
    openreg::check(orStreamCreateWithPriority(&commNative_, /*priority=*/-1));
    device_ = device;
    comm_ = torch_openreg::getStreamFromExternal(commNative_, device.index());
  }
  TORCH_CHECK(*device_ == device, "occl: ", collective.op, " got tensors on ", device, " but this group runs on ",
              *device_, " (the device of its first collective); each rank of a group uses one device: call "
              "torch.openreg.set_device() before the first collective");
  return device;
}

// Note [occl's stream semantics]
// As ProcessGroupNCCL on CUDA: the collective is one kernel on the group's
// comm stream, which first waits on an event recorded on the tensors'
// current stream, so it sees the work queued before it; the host returns
// at once. The tensors are recorded on the comm stream (record_stream), so
// the caching allocator does not hand their memory to other work before
// the collective ends even if the caller drops them. Work::wait() makes
// the caller's stream wait on an event recorded after the kernel; the
// future is completed when the collective is queued, stream-ordered as
// NCCL's is: waiting on it orders the waiter's stream after the kernel.
//
// LITERALINCLUDE START: OCCL_FAILED_COLLECTIVE
// Note [A failed collective]
// A collective that cannot complete (a peer gone, late or out of step,
// mismatched tensors) must not hand anyone its output: the kernel records
// the failure in the group, which refuses its later collectives, and fails
// its stream (orKernelFailStream, the runtime's Note [Stream errors]). So
// everything ordered after it fails with the collective's message, naming
// the group and the ranks: a stream that waited for it through wait() or
// the future, any synchronisation or copy through such a stream, and the
// group's later kernels; ordinary compute that does not wait for it and the
// other groups, each on a comm stream of its own, go on. NCCL's kernel
// would instead hang until the watchdog aborts the communicator.
// LITERALINCLUDE END: OCCL_FAILED_COLLECTIVE
// LITERALINCLUDE START: OCCL_LAUNCH
c10::intrusive_ptr<c10d::Work> OcclBackend::launch(Collective collective) {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(!shutDown_, "occl: ", collective.op, " on a group that was destroyed");
  failure_->check();
  c10::Device device = bindDevice(collective);
  c10::DeviceGuard deviceGuard(device);
  if (collective.sendTo >= 0) {
    transport_->reserveSend(collective.sendTo, collective.tag, collective.contributionBytes);
  } else {
    transport_->reserve(collective.contributionBytes);
  }
  // Committed only once the kernel is queued: a launch that throws leaves
  // the counters where every rank still agrees on them.
  uint64_t& counter = collective.pointToPoint ? messages_ : seq_;
  uint64_t seq = counter;
  c10::impl::VirtualGuardImpl guard(device.type());
  c10::Event ready(device.type());
  ready.record(guard.getStream(device));
  ready.block(*comm_);

  std::optional<HostRun> onTheHost;  // Note [Collectives in timing-only mode]
  if (runsOnTheHost(collective)) onTheHost = hostRunOf(collective);
  std::vector<at::Tensor> launched = collective.inputs;
  launched.insert(launched.end(), collective.outputs.begin(), collective.outputs.end());
  if (launched.empty()) launched.push_back(at::empty({0}, at::TensorOptions().device(device)));  // barrier
  c10::StreamGuard onComm(*comm_);
  CollectiveName name{collective.op, seq, group_};
  auto body = [transport = transport_, failure = failure_, name, run = std::move(collective.body),
               timeout = collective.timeout, counted = !collective.pointToPoint](std::vector<at::Tensor>& views) {
    // Note [A failed collective]: the group's and the dependent work's
    // failure, never the device's, so the kernel itself returns normally.
    if (!failure->failed()) {  // else the group was aborted, or an earlier collective failed
      try {
        run(*transport, name, views, timeout);
        if (counted) transport->ended(name);
        return;
      } catch (const c10::Error& e) {
        failure->record(namedFailure(name, e.what_without_backtrace()));
      } catch (const std::exception& e) {
        failure->record(namedFailure(name, e.what()));
      }
    }
    std::string message = failure->message();
    orKernelFailStream(orErrorLaunchFailure, message.c_str());
  };
  torch_openreg::launchKernel(collective.op, launched, std::move(body));
  // In timing-only mode the body never runs, so it never tells the transport
  // that this rank is done with the collective; it has nothing to read, so
  // say it now, or destroy would wait for it (kLongestDestroyWaitMs).
  if (!collective.pointToPoint && inTimingOnlyMode()) transport_->ended(name);
  ++counter;
  for (const at::Tensor& t : launched) guard.recordDataPtrOnStream(t.storage().data_ptr(), *comm_);

  auto end = std::make_unique<c10::Event>(device.type());
  end->record(*comm_);
  if (coalescing_) coalescedOutputs_.insert(coalescedOutputs_.end(), collective.outputs.begin(), collective.outputs.end());
  if (onTheHost) runOnTheHost(std::move(*onTheHost));
  return c10::make_intrusive<OcclWork>(getRank(), collective.type, seq, device, std::move(end), collective.outputs,
                                       queuedFuture(collective.outputs), failure_, collective.source,
                                       collective.blocksHost);
}

c10::intrusive_ptr<c10::ivalue::Future> OcclBackend::queuedFuture(const std::vector<at::Tensor>& outputs) {
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                         std::vector<c10::Device>{*device_});
  c10::StreamGuard onComm(*comm_);  // the future's events are recorded here, after the kernel
  future->markCompleted(c10::IValue(outputs));
  return future;
}
// LITERALINCLUDE END: OCCL_LAUNCH

c10::intrusive_ptr<c10d::Backend::Options> OcclBackend::getBackendOptions() {
  auto options = c10::make_intrusive<Options>("occl", timeout_);
  options->group_name = group_;
  return options;
}

void OcclBackend::startCoalescing() {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(!coalescing_, "occl: startCoalescing called twice without endCoalescing");
  coalescing_ = true;
  coalescedOutputs_.clear();
}

// The collectives queued since startCoalescing already run in order on the
// comm stream; the coalesced work ends when the last of them does.
c10::intrusive_ptr<c10d::Work> OcclBackend::endCoalescing() {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(coalescing_, "occl: endCoalescing called without startCoalescing");
  coalescing_ = false;
  TORCH_CHECK(device_, "occl: endCoalescing with no collective queued on this group");
  c10::DeviceGuard deviceGuard(*device_);
  // A failure in the batch fails the comm stream from there on, so the
  // event after its last collective carries it.
  auto end = std::make_unique<c10::Event>(device_->type());
  end->record(*comm_);
  // Named after the last collective it holds (seq_ already counts it).
  uint64_t last = seq_ > 0 ? seq_ - 1 : 0;
  auto future = queuedFuture(coalescedOutputs_);
  return c10::make_intrusive<OcclWork>(getRank(), c10d::OpType::COALESCED, last, *device_, std::move(end),
                                       std::move(coalescedOutputs_), future, failure_, nullptr, false);
}

c10::intrusive_ptr<c10d::Backend> OcclBackend::split(const c10::intrusive_ptr<c10d::Store>& store,
                                                     const std::vector<int>& ranks,
                                                     const c10::intrusive_ptr<Options>& options) {
  auto position = std::find(ranks.begin(), ranks.end(), getRank());
  if (position == ranks.end()) return nullptr;  // this rank is in no part of the split
  int rank = static_cast<int>(position - ranks.begin());
  std::string group = group_ + ":split" + std::to_string(splits_);
  ++splits_;
  auto child = c10::make_intrusive<OcclBackend>(store, rank, static_cast<int>(ranks.size()),
                                                options ? options->timeout : timeout_, group, makeTransport_);
  return child;
}

void OcclBackend::performNocolorSplit(const c10::Device& device) {
  TORCH_CHECK(device.is_privateuseone(), "occl: perform_nocolor_split got ", device,
              "; occl groups run on openreg devices");
}

void OcclBackend::shutdown() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (shutDown_) return;
  shutDown_ = true;
  c10::OptionalDeviceGuard deviceGuard(device_);
  // Every collective has ended (each is bounded by its timeout); a failed
  // one was reported to whoever waited for it: here it is not an error.
  if (commNative_ != nullptr && orStreamSynchronize(commNative_) != orSuccess) orGetLastError();
  // A failed group skips the final meeting: its peers are gone or out of step.
  auto wait = failure_->failed() ? std::chrono::milliseconds(0)
                                 : std::min(timeout_, std::chrono::milliseconds(kLongestDestroyWaitMs));
  transport_->shutdown(CollectiveName{"destroy", seq_, group_}, wait);
  // The comm stream goes last: tensors recorded on it may still be freed
  // (the caching allocator then finds it gone and waits for nothing).
  if (commNative_ != nullptr) orStreamDestroy(commNative_);
  commNative_ = nullptr;
}

void OcclBackend::abort() {
  transport_->abort();
  failure_->record("occl: group '" + group_ + "' was aborted");
  shutdown();
}

}  // namespace occl
