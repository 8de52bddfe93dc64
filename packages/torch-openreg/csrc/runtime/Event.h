// Event.h - openreg events as the backend itself uses them: a marker
// recorded on a stream, which the host or another stream can wait for.
// Every event the backend makes is made here, on the device of the stream
// that records it (the runtime requires that), and destroyed exactly once.
// Not torch.Event's implementation, which is the guard's (Guard.cpp, over
// createEvent).
#pragma once

#include <c10/core/Device.h>
#include <openreg/openreg.h>

#include <optional>

namespace torch_openreg {

// A new event on device; flags as orEventCreateWithFlags takes them
// (orEventDisableTiming unless it is to be timed). The caller destroys it.
orEvent_t createEvent(c10::DeviceIndex device, unsigned flags);

// An event recorded on a stream when constructed, destroyed with the
// object. Move-only; timing disabled.
class RecordedEvent {
 public:
  RecordedEvent() = default;
  explicit RecordedEvent(orStream_t stream);
  // An event recorded on stream, or none when there is nothing to wait for:
  // the stream was destroyed (orStreamDestroy waited for its work), or its
  // device's sticky error or its own error (the runtime's Note [Stream
  // errors]) makes it skip its work. Never throws for those.
  static std::optional<RecordedEvent> unlessFinished(orStream_t stream);
  RecordedEvent(RecordedEvent&& other) noexcept;
  RecordedEvent& operator=(RecordedEvent&& other) noexcept;
  RecordedEvent(const RecordedEvent&) = delete;
  RecordedEvent& operator=(const RecordedEvent&) = delete;
  ~RecordedEvent();

  // Whether the work queued before the record has finished. A sticky kernel
  // error counts as finished: the faulted device runs nothing more, and the
  // error surfaces at the next synchronising call.
  bool completed() const;
  // Waits on the host for that work (orEventSynchronize's status: a sticky
  // error, or orErrorNotPermitted from inside a kernel of that stream).
  orError_t synchronize() const;
  orEvent_t get() const { return handle_; }

 private:
  orEvent_t handle_ = nullptr;
};

// Makes waiting wait for the work queued on producer so far (both may be on
// different devices). Returns at once, as cudaStreamWaitEvent does.
void streamWaitStream(orStream_t waiting, orStream_t producer);

}  // namespace torch_openreg
