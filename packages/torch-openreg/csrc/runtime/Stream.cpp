// Stream.cpp - stream pools and current streams over libopenreg streams.
#include "runtime/Stream.h"

#include <array>
#include <atomic>
#include <mutex>
#include <vector>

#include <torch_openreg/Check.h>
#include <torch_openreg/Kernel.h>

#include "runtime/Device.h"

namespace torch_openreg {
namespace {

constexpr int kPoolSize = 8;        // streams per device and priority
constexpr int kPriorityLevels = 2;  // 0 (normal) and -1 (high)

struct Pool {
  std::once_flag created;
  std::array<orStream_t, kPoolSize> streams{};
  std::atomic<uint32_t> next{0};
};
std::array<std::array<Pool, kPriorityLevels>, kMaxDevices> pools;

// This thread's current stream per device; null means the default stream.
thread_local std::array<orStream_t, kMaxDevices> current{};

c10::DeviceIndex deviceOf(orStream_t stream) {
  int device = 0;
  OPENREG_CHECK(orStreamGetDevice(stream, &device));
  return static_cast<c10::DeviceIndex>(device);
}

// LITERALINCLUDE START: STREAM_ID_IS_HANDLE
c10::Stream asStream(c10::DeviceIndex device, orStream_t stream) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device),
                     static_cast<c10::StreamId>(reinterpret_cast<uintptr_t>(stream)));
}
// LITERALINCLUDE END: STREAM_ID_IS_HANDLE

}  // namespace

orStream_t nativeStream(const c10::Stream& stream) {
  return reinterpret_cast<orStream_t>(static_cast<uintptr_t>(stream.id()));
}

c10::Stream wrapStream(orStream_t stream) {
  return asStream(deviceOf(stream), stream);
}

c10::Stream getStreamFromExternal(orStream_t stream, c10::DeviceIndex device) {
  checkDeviceIndex(device);
  c10::DeviceIndex owner = deviceOf(stream);  // raises for a handle that is not a live stream
  TORCH_CHECK(owner == device, "getStreamFromExternal: the stream belongs to openreg:", static_cast<int>(owner),
              ", not to openreg:", static_cast<int>(device));
  return asStream(device, stream);
}

void checkStream(const c10::Stream& stream) {
  TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1,
              "expected an openreg stream, got a stream of device type ", stream.device_type());
  checkDeviceIndex(stream.device_index());
  int device = 0;
  OPENREG_CHECK(orStreamGetDevice(nativeStream(stream), &device));
  TORCH_CHECK(device == stream.device_index(), "stream ", stream.id(), " belongs to openreg:",
              device, ", not to openreg:", static_cast<int>(stream.device_index()));
}

// -1 means the current device, as for CUDA (torch.Stream("openreg") passes it).
static c10::DeviceIndex resolveDevice(c10::DeviceIndex device) {
  return device == -1 ? currentDevice() : device;
}

// A device's default stream lives as long as the process, so its handle is
// asked for once: every launch on the default stream looks it up.
static orStream_t defaultHandle(c10::DeviceIndex device) {
  static std::array<std::atomic<orStream_t>, kMaxDevices> handles{};
  orStream_t stream = handles[device].load(std::memory_order_relaxed);
  if (stream == nullptr) {
    OPENREG_CHECK(orDeviceGetDefaultStream(&stream, device));
    handles[device].store(stream, std::memory_order_relaxed);
  }
  return stream;
}

c10::Stream defaultStream(c10::DeviceIndex device) {
  device = resolveDevice(device);
  checkDeviceIndex(device);
  return asStream(device, defaultHandle(device));
}

c10::Stream currentStream(c10::DeviceIndex device) {
  device = resolveDevice(device);
  checkDeviceIndex(device);
  orStream_t stream = current[device];
  return asStream(device, stream != nullptr ? stream : defaultHandle(device));
}

c10::Stream exchangeStream(const c10::Stream& stream) {
  checkStream(stream);
  c10::Stream previous = currentStream(stream.device_index());
  current[stream.device_index()] = nativeStream(stream);
  return previous;
}

c10::Stream streamFromPool(c10::DeviceIndex device, int priority) {
  device = resolveDevice(device);
  checkDeviceIndex(device);
  int least = 0, greatest = 0;
  OPENREG_CHECK(orDeviceGetStreamPriorityRange(&least, &greatest));
  int level = priority < least ? 1 : 0;  // any priority above the least counts as high
  Pool& pool = pools[device][level];
  std::call_once(pool.created, [&] {
    c10::DeviceIndex previous = exchangeDevice(device);
    for (auto& stream : pool.streams) {
      OPENREG_CHECK(orStreamCreateWithPriority(&stream, level == 1 ? greatest : least));
    }
    exchangeDevice(previous);
  });
  orStream_t stream = pool.streams[pool.next.fetch_add(1) % kPoolSize];
  return asStream(device, stream);
}

bool streamIsCapturing(c10::DeviceIndex device) {
  orStreamCaptureStatus status = orStreamCaptureStatusNone;
  OPENREG_CHECK(orStreamIsCapturing(nativeStream(currentStream(device)), &status));
  return status != orStreamCaptureStatusNone;
}

}  // namespace torch_openreg
