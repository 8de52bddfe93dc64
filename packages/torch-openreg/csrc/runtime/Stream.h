// Stream.h - c10::Stream <-> orStream_t, stream pools and the per-thread
// current stream of each device.
//
// A c10::Stream's id *is* the runtime's opaque orStream_t value, so no table
// is needed to go from one to the other; the runtime rejects ids it never
// issued with orErrorInvalidResourceHandle.
#pragma once

#include <c10/core/Stream.h>
#include <openreg/openreg.h>

namespace torch_openreg {

orStream_t nativeStream(const c10::Stream& stream);
c10::Stream wrapStream(orStream_t stream);
c10::Stream defaultStream(c10::DeviceIndex device);
// The calling thread's current stream on device (initially the default one).
c10::Stream currentStream(c10::DeviceIndex device);
// Makes stream current for its device on this thread; returns the previous.
c10::Stream exchangeStream(const c10::Stream& stream);
// One of a fixed pool of streams per device and priority, handed out round
// robin as CUDA does. priority is clamped to the runtime's range.
c10::Stream streamFromPool(c10::DeviceIndex device, int priority);
// Throws unless stream is an openreg stream of a valid device.
void checkStream(const c10::Stream& stream);

// Whether the calling thread's current stream on device is capturing a
// graph: work queued now is recorded, not run, and nothing may wait for it.
bool streamIsCapturing(c10::DeviceIndex device);

}  // namespace torch_openreg
