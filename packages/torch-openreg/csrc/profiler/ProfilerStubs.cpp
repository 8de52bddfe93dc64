// ProfilerStubs.cpp - the legacy profiler's device methods for PrivateUse1:
// the timed events that torch.autograd.profiler.profile(use_device="openreg")
// records around each operator, and device synchronisation.
// Not here: the Kineto activity profiler (Profiler.cpp).
#include <torch/csrc/profiler/stubs/base.h>

#include <c10/core/DeviceGuard.h>
#include <c10/util/ApproximateClock.h>

#include <torch_openreg/Check.h>

#include "runtime/Device.h"
#include "runtime/Event.h"
#include "runtime/Stream.h"

namespace torch_openreg {
namespace {

// LITERALINCLUDE START: PROFILER_STUBS
struct OpenRegProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
  // A timed event on the current stream of the current device, and the
  // host time at which it was queued.
  void record(c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpuNs) const override {
    c10::DeviceIndex current = currentDevice();
    if (device != nullptr) *device = current;
    orEvent_t created = createEvent(current, orEventDefault);
    *event = std::shared_ptr<void>(created, [](void* e) { orEventDestroy(static_cast<orEvent_t>(e)); });
    if (cpuNs != nullptr) *cpuNs = c10::getTime();
    OPENREG_CHECK(orEventRecord(created, nativeStream(currentStream(current))));
  }

  // Microseconds between two recorded events, as the CUDA stubs return.
  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* start,
                const torch::profiler::impl::ProfilerVoidEventStub* end) const override {
    auto first = static_cast<orEvent_t>(start->get());
    auto second = static_cast<orEvent_t>(end->get());
    OPENREG_CHECK(orEventSynchronize(first));
    OPENREG_CHECK(orEventSynchronize(second));
    float ms = 0;
    OPENREG_CHECK(orEventElapsedTime(&ms, first, second));
    return ms * 1000.0f;
  }

  // openreg has no range annotations for outside tools to show (CUDA's
  // NVTX): marks and ranges appear only in the profiler's own CPU events.
  void mark(const char* /*name*/) const override {}
  void rangePush(const char* /*name*/) const override {}
  void rangePop() const override {}

  bool enabled() const override { return true; }

  void onEachDevice(std::function<void(int)> op) const override {
    for (c10::DeviceIndex d = 0; d < deviceCount(); ++d) {
      c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, d));
      op(d);
    }
  }

  void synchronize() const override { OPENREG_CHECK(orDeviceSynchronize()); }
};

struct RegisterStubs {
  RegisterStubs() {
    static OpenRegProfilerStubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
} registerStubs;
// LITERALINCLUDE END: PROFILER_STUBS

}  // namespace
}  // namespace torch_openreg
