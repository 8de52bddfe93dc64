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

#include <torch_openreg/Check.h>

#include "runtime/Device.h"
#include "runtime/Event.h"
#include "runtime/Stream.h"

namespace torch_openreg {
namespace {

// LITERALINCLUDE START: HOST_ALLOCATOR_HOOKS
struct OpenRegHostAllocatorImpl final : at::CachingHostAllocatorImpl<c10::Stream, RecordedEvent> {
 private:
  void allocate_host_memory(size_t size, void** ptr) override {
    OPENREG_CHECK(orMallocHost(ptr, size));
  }
  void free_block(at::HostBlock<c10::Stream>* block) override { OPENREG_CHECK(orFreeHost(block->ptr_)); }
  void record_stream(std::optional<std::vector<RecordedEvent>>& events, c10::Stream stream) override {
    // Not thrown on a destroyed stream, a faulted device or a failed stream:
    // the allocator records events while freeing, and none of those runs
    // anything more that could use the block.
    if (auto event = RecordedEvent::unlessFinished(nativeStream(stream))) events->push_back(std::move(*event));
  }
  bool query_event(RecordedEvent& event) override { return event.completed(); }
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
