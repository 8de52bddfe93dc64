// Device.cpp - device count and current device over libopenreg.
#include "runtime/Device.h"

#include <array>
#include <atomic>

#include <torch_openreg/Check.h>

namespace torch_openreg {
namespace {
std::array<std::atomic<bool>, kMaxDevices> initialized{};
}  // namespace

c10::DeviceIndex deviceCount() noexcept {
  // Fixed for the life of the process, so asked once. The device count must
  // never throw (PyTorch's contract): a runtime that cannot start reports 0.
  static const c10::DeviceIndex count = [] {
    int n = 0;
    return orGetDeviceCount(&n) == orSuccess ? static_cast<c10::DeviceIndex>(n) : c10::DeviceIndex{0};
  }();
  return count;
}

void checkDeviceIndex(c10::DeviceIndex device) {
  auto count = deviceCount();
  TORCH_CHECK_INDEX(device >= 0 && device < count, "openreg device index ", static_cast<int>(device),
                    " is out of range: there are ", static_cast<int>(count),
                    " openreg devices (valid indices 0 to ", count - 1,
                    "); set OPENREG_DEVICE_COUNT for more");
}

c10::DeviceIndex currentDevice() {
  int device = 0;
  OPENREG_CHECK(orGetDevice(&device));
  return static_cast<c10::DeviceIndex>(device);
}

void setDevice(c10::DeviceIndex device) {
  checkDeviceIndex(device);
  OPENREG_CHECK(orSetDevice(device));
}

c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) {
  auto previous = currentDevice();
  if (device != previous) setDevice(device);
  return previous;
}

bool deviceInitialized(c10::DeviceIndex device) {
  return device >= 0 && device < kMaxDevices && initialized[device].load();
}

void markDeviceInitialized(c10::DeviceIndex device) {
  if (device >= 0 && device < kMaxDevices) initialized[device].store(true);
}

}  // namespace torch_openreg
