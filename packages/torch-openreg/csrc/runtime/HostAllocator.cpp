// HostAllocator.cpp - the pinned host allocator: PyTorch's own caching host
// allocator (CachingHostAllocatorImpl) supplied with libopenreg's pinned
// memory, streams and events.
//
// Why pinned: libopenreg copies from pinned memory asynchronously, while a
// copy from pageable memory blocks the host (as on CUDA). A pinned block a
// non_blocking copy still reads is reused only after an event recorded on
// the copy's stream has completed.
#include "runtime/HostAllocator.h"

#include <c10/core/DeviceGuard.h>

#include "runtime/Check.h"
#include "runtime/Device.h"
#include "runtime/Stream.h"

namespace torch_openreg {
namespace {

// An owned orEvent_t: the caching host allocator moves these around.
class HostEvent {
 public:
  HostEvent() = default;
  explicit HostEvent(c10::Stream stream) {
    c10::DeviceGuard guard(stream.device());
    OPENREG_CHECK(orEventCreateWithFlags(&handle_, orEventDisableTiming));
    // On a faulted device the record fails with the sticky error: left
    // unrecorded, the event counts as completed, since the device runs
    // nothing more. Not thrown: the allocator records events while freeing.
    orEventRecord(handle_, nativeStream(stream));
  }
  HostEvent(HostEvent&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  HostEvent& operator=(HostEvent&& other) noexcept {
    std::swap(handle_, other.handle_);
    return *this;
  }
  ~HostEvent() { orEventDestroy(handle_); }

  // A sticky kernel error also counts as completed: the faulted device runs
  // nothing more, and the error surfaces at the next synchronising call.
  bool completed() const { return orEventQuery(handle_) != orErrorNotReady; }

 private:
  orEvent_t handle_ = nullptr;
};

// LITERALINCLUDE START: HOST_ALLOCATOR_HOOKS
struct OpenRegHostAllocatorImpl final : at::CachingHostAllocatorImpl<c10::Stream, HostEvent> {
 private:
  void allocate_host_memory(size_t size, void** ptr) override {
    OPENREG_CHECK(orMallocHost(ptr, size));
  }
  void free_block(at::HostBlock<c10::Stream>* block) override { OPENREG_CHECK(orFreeHost(block->ptr_)); }
  void record_stream(std::optional<std::vector<HostEvent>>& events, c10::Stream stream) override {
    events->emplace_back(stream);
  }
  bool query_event(HostEvent& event) override { return event.completed(); }
  c10::Stream get_current_stream() const override { return currentStream(currentDevice()); }
  bool stream_is_capturing(c10::Stream) const override { return false; }
};
// LITERALINCLUDE END: HOST_ALLOCATOR_HOOKS

// LITERALINCLUDE START: REGISTER_HOST_ALLOCATOR
DECLARE_HOST_ALLOCATOR(OpenRegHostAllocator, OpenRegHostAllocatorImpl, deletePinned,
                       hostAllocatorInstance)
REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &hostAllocatorInstance)
// LITERALINCLUDE END: REGISTER_HOST_ALLOCATOR

}  // namespace

at::HostAllocator* hostAllocator() { return &hostAllocatorInstance; }

bool isPinned(const void* ptr) {
  orPointerAttributes attributes;
  if (orPointerGetAttributes(&attributes, ptr) != orSuccess) return false;
  return attributes.type == orMemoryTypeHost;
}

}  // namespace torch_openreg
