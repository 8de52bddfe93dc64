// Guard.cpp - the device guard: how PyTorch switches devices, streams and
// events for openreg (c10::DeviceGuard, torch.Stream, torch.Event,
// torch.accelerator). Registered once with C10_REGISTER_GUARD_IMPL.
//
// Every method is a thin mapping onto libopenreg; the contracts are those of
// c10::impl::DeviceGuardImplInterface (deviceCount and uncheckedSetDevice
// must not throw; events are created lazily on first record).
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
  c10::DeviceType type() const override { return kType; }

  c10::Device exchangeDevice(c10::Device device) const override {
    TORCH_CHECK(device.type() == kType, "expected an openreg device, got ", device);
    return c10::Device(kType, torch_openreg::exchangeDevice(device.index()));
  }
  c10::Device getDevice() const override { return c10::Device(kType, currentDevice()); }
  void setDevice(c10::Device device) const override {
    TORCH_CHECK(device.type() == kType, "expected an openreg device, got ", device);
    torch_openreg::setDevice(device.index());
  }
  void uncheckedSetDevice(c10::Device device) const noexcept override { orSetDevice(device.index()); }
  c10::DeviceIndex deviceCount() const noexcept override { return torch_openreg::deviceCount(); }
  // Kernels are PyTorch's CPU kernels on device memory: every dtype works but
  // the quantized ones, whose QuantizedPrivateUse1 key has no kernels here.
  c10::DeviceCapability getDeviceCapability(c10::Device device) const override {
    checkDeviceIndex(device.index());
    c10::DeviceCapability capability;  // every dtype
    for (auto quantized : {c10::kIndex_QInt8, c10::kIndex_QUInt8, c10::kIndex_QInt32, c10::kIndex_QUInt4x2,
                           c10::kIndex_QUInt2x4}) {
      capability.capability_data.capability_bits &= ~(uint64_t{1} << quantized);
    }
    return capability;
  }

  c10::Stream getStream(c10::Device device) const override { return currentStream(device.index()); }
  c10::Stream getDefaultStream(c10::Device device) const override { return defaultStream(device.index()); }
  c10::Stream getStreamFromGlobalPool(c10::Device device, bool isHighPriority) const override {
    return streamFromPool(device.index(), isHighPriority ? -1 : 0);
  }
  c10::Stream getNewStream(c10::Device device, int priority) const override {
    return streamFromPool(device.index(), priority);
  }
  c10::Stream exchangeStream(c10::Stream stream) const override { return torch_openreg::exchangeStream(stream); }
  void* getStreamNativeHandle(const c10::Stream stream) const override { return nativeStream(stream); }
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
  void synchronizeStream(const c10::Stream& stream) const override {
    OPENREG_CHECK(orStreamSynchronize(nativeStream(stream)));
  }
  void synchronizeDevice(const c10::DeviceIndex device) const override {
    checkDeviceIndex(device);
    onDevice(device, [] { OPENREG_CHECK(orDeviceSynchronize()); });
  }

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
