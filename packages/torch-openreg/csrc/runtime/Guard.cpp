// Guard.cpp - the device guard: how PyTorch switches devices, streams and
// events for openreg (c10::DeviceGuard, torch.Stream, torch.Event,
// torch.accelerator). Registered once with C10_REGISTER_GUARD_IMPL.
//
// Every method is a thin mapping onto libopenreg. Above each, its contract:
// what it guarantees and what it may assume, as c10's
// DeviceGuardImplInterface asks of every backend. Unless a method says
// otherwise it may be called from any thread, throws c10::Error (an
// AcceleratorError for a bad device index) naming what was wrong, and a
// "device" of index -1 means the calling thread's current device.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <torch_openreg/Check.h>

#include "runtime/Device.h"
#include "runtime/Event.h"
#include "runtime/DeviceAllocator.h"
#include "runtime/Stream.h"

namespace torch_openreg {
namespace {

constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;

orEvent_t asEvent(void* event) { return static_cast<orEvent_t>(event); }

// Runs the callable with device current, restoring the previous one.
template <typename F>
auto onDevice(c10::DeviceIndex device, F&& f) {
  struct Restore {
    c10::DeviceIndex previous;
    ~Restore() { orSetDevice(previous); }
  } restore{exchangeDevice(device)};
  return f();
}

// LITERALINCLUDE START: GUARD_IMPL
struct OpenRegGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  // Constant: the guard's device type.
  c10::DeviceType type() const override { return kType; }

  // Makes device current on this thread and returns the one it replaces.
  // Throws for a device of another type or index; then nothing changed.
  c10::Device exchangeDevice(c10::Device device) const override {
    TORCH_CHECK(device.type() == kType, "expected an openreg device, got ", device);
    return c10::Device(kType, torch_openreg::exchangeDevice(device.index()));
  }
  // This thread's current device (openreg:0 on a new thread). Never throws.
  c10::Device getDevice() const override { return c10::Device(kType, currentDevice()); }
  // As exchangeDevice, without the answer.
  void setDevice(c10::Device device) const override {
    TORCH_CHECK(device.type() == kType, "expected an openreg device, got ", device);
    torch_openreg::setDevice(device.index());
  }
  // A guard's destructor restores the device through this: it must not
  // throw, and may assume the index came from getDevice (so it is valid).
  void uncheckedSetDevice(c10::Device device) const noexcept override { orSetDevice(device.index()); }
  // Must not throw and must not initialise a device: 0 when the runtime
  // cannot start (checkDeviceIndex then says why).
  c10::DeviceIndex deviceCount() const noexcept override { return torch_openreg::deviceCount(); }
  // Kernels are PyTorch's CPU kernels on device memory: a dtype is supported
  // where the CPU's kernels convert it, and quantized tensors are the CPU's
  // (aten/Quantized.cpp). Left out: the bit containers and the sub-byte
  // integers, which no device converts, and float4_e2m1fn_x2 (a test checks
  // the set against what runs).
  c10::DeviceCapability getDeviceCapability(c10::Device device) const override {
    checkDeviceIndex(device.index());
    c10::DeviceCapability capability;  // every dtype
    for (auto unsupported :
         {c10::kIndex_Bits1x8, c10::kIndex_Bits2x4, c10::kIndex_Bits4x2, c10::kIndex_Bits8, c10::kIndex_Bits16,
          c10::kIndex_UInt1, c10::kIndex_UInt2, c10::kIndex_UInt3, c10::kIndex_UInt4, c10::kIndex_UInt5,
          c10::kIndex_UInt6, c10::kIndex_UInt7, c10::kIndex_Int1, c10::kIndex_Int2, c10::kIndex_Int3,
          c10::kIndex_Int4, c10::kIndex_Int5, c10::kIndex_Int6, c10::kIndex_Int7, c10::kIndex_Float4_e2m1fn_x2}) {
      capability.capability_data.capability_bits &= ~(uint64_t{1} << unsupported);
    }
    return capability;
  }

  // Streams: this thread's current stream of device (its default stream
  // until exchangeStream), the default stream, and streams from a pool
  // that lives as long as the process, so a handle never dangles.
  c10::Stream getStream(c10::Device device) const override { return currentStream(device.index()); }
  c10::Stream getDefaultStream(c10::Device device) const override { return defaultStream(device.index()); }
  c10::Stream getStreamFromGlobalPool(c10::Device device, bool isHighPriority) const override {
    return streamFromPool(device.index(), isHighPriority ? -1 : 0);
  }
  c10::Stream getNewStream(c10::Device device, int priority) const override {
    return streamFromPool(device.index(), priority);
  }
  // Makes stream current on its device for this thread (not the current
  // device) and returns the stream it replaces. Throws for a stream of
  // another type, or one that is not of the device it names.
  c10::Stream exchangeStream(c10::Stream stream) const override { return torch_openreg::exchangeStream(stream); }
  // The orStream_t behind stream, valid as long as the stream is.
  void* getStreamNativeHandle(const c10::Stream stream) const override { return nativeStream(stream); }
  // Whether all work queued on stream has finished; never waits. Throws the
  // device's sticky error or the stream's error (Note [Stream errors]).
  bool queryStream(const c10::Stream& stream) const override {
    orError_t status = orStreamQuery(nativeStream(stream));
    if (status == orErrorNotReady) return false;
    OPENREG_CHECK(status);
    return true;
  }
  // torch.Stream.is_capturing(): a graph capture is under way (Graph.cpp).
  bool isStreamCapturing(const c10::Stream& stream) const override {
    orStreamCaptureStatus status = orStreamCaptureStatusNone;
    OPENREG_CHECK(orStreamIsCapturing(nativeStream(stream), &status));
    return status != orStreamCaptureStatusNone;
  }
  // Blocks until the stream's (the device's) work has finished; throws its
  // error as queryStream does, and refuses a call from a kernel running on
  // that stream (device), which would wait for itself.
  void synchronizeStream(const c10::Stream& stream) const override {
    OPENREG_CHECK(orStreamSynchronize(nativeStream(stream)));
  }
  void synchronizeDevice(const c10::DeviceIndex device) const override {
    checkDeviceIndex(device);
    onDevice(device, [] { OPENREG_CHECK(orDeviceSynchronize()); });
  }

  // Events. *event is null until the first record, which creates it on the
  // stream's device (timing only with EventFlag::BACKEND_DEFAULT, as on
  // CUDA); later records must use a stream of that device. block makes the
  // stream wait without blocking the host; a null event (never recorded)
  // imposes no wait and has completed. destroyEvent runs from destructors:
  // it must not throw, and accepts null.
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device == -1 || device == stream.device_index(), "event on openreg:",
                static_cast<int>(device), " cannot be recorded on a stream of openreg:",
                static_cast<int>(stream.device_index()));
    if (*event == nullptr) {
      // PyTorch's default events do not time, as on CUDA; BACKEND_DEFAULT does.
      unsigned flags = flag == c10::EventFlag::BACKEND_DEFAULT ? orEventDefault : orEventDisableTiming;
      *event = createEvent(stream.device_index(), flags);
    }
    OPENREG_CHECK(orEventRecord(asEvent(*event), nativeStream(stream)));
  }
  void block(void* event, const c10::Stream& stream) const override {
    if (event != nullptr) OPENREG_CHECK(orStreamWaitEvent(nativeStream(stream), asEvent(event)));
  }
  bool queryEvent(void* event) const override {
    if (event == nullptr) return true;
    orError_t status = orEventQuery(asEvent(event));
    if (status == orErrorNotReady) return false;
    OPENREG_CHECK(status);
    return true;
  }
  void synchronizeEvent(void* event) const override {
    if (event != nullptr) OPENREG_CHECK(orEventSynchronize(asEvent(event)));
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex device) const override {
    TORCH_CHECK(start != nullptr && end != nullptr,
                "both events must be recorded before calculating elapsed time");
    float ms = 0;
    OPENREG_CHECK(orEventElapsedTime(&ms, asEvent(start), asEvent(end)));
    return ms;
  }
  void destroyEvent(void* event, const c10::DeviceIndex device) const noexcept override {
    orEventDestroy(asEvent(event));
  }

  // Tensor.record_stream: data's memory is not handed to other work until
  // the work queued on stream so far has finished (the device allocator).
  void recordDataPtrOnStream(const c10::DataPtr& data, const c10::Stream& stream) const override {
    deviceAllocator()->recordStream(data, stream);
  }
};
// LITERALINCLUDE END: GUARD_IMPL

}  // namespace

// LITERALINCLUDE START: REGISTER_GUARD
C10_REGISTER_GUARD_IMPL(PrivateUse1, OpenRegGuardImpl);
// LITERALINCLUDE END: REGISTER_GUARD

}  // namespace torch_openreg
