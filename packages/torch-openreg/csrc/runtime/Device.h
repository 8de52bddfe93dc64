// Device.h - the current device and device count, as the rest of the backend
// and PyTorch's hooks see them. Thin wrappers over orGetDevice/orSetDevice
// that validate indices with messages a user can act on.
#pragma once

#include <c10/core/Device.h>

#include <string>

namespace torch_openreg {

// The most devices the backend keeps per-device tables for; the runtime
// refuses an OPENREG_DEVICE_COUNT above it.
constexpr int kMaxDevices = 64;

// Number of devices; 0 (never an exception) if the runtime cannot start.
c10::DeviceIndex deviceCount() noexcept;
c10::DeviceIndex currentDevice();
void setDevice(c10::DeviceIndex device);
// Sets device and returns the previous current device.
c10::DeviceIndex exchangeDevice(c10::DeviceIndex device);
// Throws torch.AcceleratorError unless 0 <= device < deviceCount(), naming
// the valid range (or, without devices, the runtime's reason).
void checkDeviceIndex(int device);
// Timing-only mode (the runtime's Note [Timing-only mode]): kernels and
// copies run for their timing alone, device memory holds no values.
bool timingOnly();
// Throws c10::Error unless the runtime computes values: `what` needs them
// (an operator, .item(), a copy to the host), and timing-only mode has none.
void checkValuesComputed(const std::string& what);

// Whether the caching allocator has taken memory from device yet.
bool deviceInitialized(c10::DeviceIndex device);
void markDeviceInitialized(c10::DeviceIndex device);

}  // namespace torch_openreg
