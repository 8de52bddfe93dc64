// Device.cpp - device count and current device over libopenreg.
#include "runtime/Device.h"

#include <array>
#include <atomic>

#include <torch_openreg/Check.h>

namespace torch_openreg {
namespace {
std::array<std::atomic<bool>, kMaxDevices> initialized{};

// The device count, asked once (it is fixed for the life of the process),
// with the runtime's reason when it is 0.
struct DeviceCount {
  c10::DeviceIndex count = 0;
  std::string whyNone;
};

const DeviceCount& askedCount() noexcept {
  static const DeviceCount asked = [] {
    DeviceCount result;
    int n = 0;
    if (orGetDeviceCount(&n) == orSuccess) {
      result.count = static_cast<c10::DeviceIndex>(n);
    } else {
      result.whyNone = errorMessage(orErrorInitializationError);
    }
    return result;
  }();
  return asked;
}
}  // namespace

bool timingOnly() {
  int on = 0;
  return orGetTimingOnly(&on) == orSuccess && on != 0;
}

// LITERALINCLUDE START: TIMING_ONLY_REFUSAL
void checkValuesComputed(const std::string& what) {
  TORCH_CHECK(!timingOnly(), "openreg: ", what, " needs values of device memory, and openreg runs in timing-only "
              "mode (torch.openreg.set_timing_only(True), OPENREG_TIMING_ONLY=1, openreg_perf.simulate(..., "
              "execute=False)), which computes none: the program's shapes, allocations and kernels are real, its "
              "values are not. Leave it out of the region, or predict with execute=True");
}
// LITERALINCLUDE END: TIMING_ONLY_REFUSAL

c10::DeviceIndex deviceCount() noexcept {
  // The device count must never throw (PyTorch's contract): a runtime that
  // cannot start reports 0, and checkDeviceIndex says why.
  return askedCount().count;
}

void checkDeviceIndex(int device) {
  auto count = deviceCount();
  if (device >= 0 && device < count) return;
  // An AcceleratorError (a RuntimeError), as CUDA's invalid device ordinal,
  // so code written for CUDA that catches RuntimeError catches this too.
  // It opens with the sentence of the upstream reference backend, which
  // PyTorch's tests for out-of-tree backends match.
  std::string message =
      count == 0 ? c10::str("openreg is not available: ", askedCount().whyNone)
                 : c10::str("The device index is out of range. Got openreg device index ", device,
                            ", but there are ", static_cast<int>(count),
                            " openreg devices (valid indices 0 to ", count - 1,
                            "); set OPENREG_DEVICE_COUNT for more");
  throw c10::AcceleratorError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                              orErrorInvalidDevice, message);
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
