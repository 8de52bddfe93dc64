// Event.cpp - see Event.h.
#include "runtime/Event.h"

#include <c10/core/DeviceGuard.h>
#include <torch_openreg/Check.h>

#include <string>
#include <utility>

namespace torch_openreg {
namespace {

c10::DeviceIndex deviceOf(orStream_t stream) {
  int device = 0;
  OPENREG_CHECK(orStreamGetDevice(stream, &device));
  return static_cast<c10::DeviceIndex>(device);
}

}  // namespace

orEvent_t createEvent(c10::DeviceIndex device, unsigned flags) {
  c10::DeviceGuard guard(c10::Device(c10::kPrivateUse1, device));
  orEvent_t event = nullptr;
  OPENREG_CHECK(orEventCreateWithFlags(&event, flags));
  return event;
}

RecordedEvent::RecordedEvent(orStream_t stream) : handle_(createEvent(deviceOf(stream), orEventDisableTiming)) {
  orError_t status = orEventRecord(handle_, stream);
  if (status == orSuccess) return;
  std::string message = errorMessage(status);  // before another call replaces it
  orEventDestroy(std::exchange(handle_, nullptr));  // no destructor runs for a throwing constructor
  TORCH_CHECK(false, "openreg error ", orGetErrorName(status), ": ", message);
}

std::optional<RecordedEvent> RecordedEvent::unlessFinished(orStream_t stream) {
  int device = 0;
  if (orStreamGetDevice(stream, &device) != orSuccess) {  // destroyed: its work has finished
    orGetLastError();
    return std::nullopt;
  }
  RecordedEvent event;
  event.handle_ = createEvent(static_cast<c10::DeviceIndex>(device), orEventDisableTiming);
  if (orEventRecord(event.handle_, stream) != orSuccess) {  // its work is skipped
    orGetLastError();
    return std::nullopt;  // the destructor frees the event
  }
  return event;
}

RecordedEvent::RecordedEvent(RecordedEvent&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}

RecordedEvent& RecordedEvent::operator=(RecordedEvent&& other) noexcept {
  std::swap(handle_, other.handle_);
  return *this;
}

RecordedEvent::~RecordedEvent() { orEventDestroy(handle_); }

bool RecordedEvent::completed() const { return orEventQuery(handle_) != orErrorNotReady; }

orError_t RecordedEvent::synchronize() const { return orEventSynchronize(handle_); }

void streamWaitStream(orStream_t waiting, orStream_t producer) {
  RecordedEvent produced(producer);
  OPENREG_CHECK(orStreamWaitEvent(waiting, produced.get()));
  // Destroying the event when this returns is fine: a queued wait still happens.
}

}  // namespace torch_openreg
