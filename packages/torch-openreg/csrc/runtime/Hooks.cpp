// Hooks.cpp - PrivateUse1HooksInterface: what generic PyTorch code asks of
// "the PrivateUse1 backend" (availability, generators, pinned memory,
// device of a pointer, storage resizing). Registered once, at load time.
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/StorageImpl.h>

#include <torch_openreg/Check.h>

#include "runtime/Device.h"
#include "runtime/DeviceAllocator.h"
#include "runtime/Generator.h"
#include "runtime/HostAllocator.h"
#include "runtime/TimingOnlyMemory.h"

namespace torch_openreg {
namespace {

// LITERALINCLUDE START: HOOKS_IMPL
// Above each method, its contract. Every method may be called from any
// thread; one that takes a device throws c10::Error (an AcceleratorError)
// for an index that is not an openreg device.
struct OpenRegHooks final : public at::PrivateUse1HooksInterface {
  // Constant: the backend is compiled in.
  bool isBuilt() const override { return true; }
  // Must not throw, and must not initialise a device (no device memory or
  // streams are touched by counting devices): torch.openreg.is_available()
  // stays cheap and safe before a fork.
  bool isAvailable() const override { return deviceCount() > 0; }
  // Whether device was initialised (memory or a stream used), without
  // initialising it; an index out of range has none.
  bool hasPrimaryContext(c10::DeviceIndex device) const override { return deviceInitialized(device); }
  // Lazy initialisation of the backend: reads the configuration, touches no
  // device. Idempotent.
  void init() const override { deviceCount(); }

  // As the guard's (Guard.cpp): never throws, 0 when the runtime cannot start.
  c10::DeviceIndex deviceCount() const override { return torch_openreg::deviceCount(); }
  // This thread's current device: set, read, and exchanged (returning the
  // previous one). maybeExchangeDevice may assume a valid index, as CUDA's.
  void setCurrentDevice(c10::DeviceIndex device) const override { setDevice(device); }
  c10::DeviceIndex getCurrentDevice() const override { return currentDevice(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    return torch_openreg::exchangeDevice(device);
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return torch_openreg::exchangeDevice(device);
  }

  // A device's default generator (one per device, living as long as the
  // process; torch.manual_seed reaches it) and fresh ones, owned by the caller.
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device) const override {
    return defaultGenerator(device);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device) const override { return newGenerator(device); }

  // The device of a pointer into openreg device memory (interior pointers
  // too); throws for any other pointer.
  at::Device getDeviceFromPtr(void* data) const override {
    orPointerAttributes attributes;
    OPENREG_CHECK(orPointerGetAttributes(&attributes, data));
    TORCH_CHECK(attributes.type == orMemoryTypeDevice, data, " is not openreg device memory");
    return at::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(attributes.device));
  }
  // Whether data lies in pinned host memory from the host allocator; never
  // throws, false for any other pointer. The allocator lives as long as the
  // process.
  bool isPinnedPtr(const void* data) const override { return isPinned(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return hostAllocator(); }

  // Storage.resize_() on an openreg storage: new memory on the storage's
  // device, the first min(old, new) bytes copied, after the device's queued
  // work (orMemcpy waits for it). Throws for a storage that is not
  // resizable; out of memory leaves the storage as it was.
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
    c10::DeviceGuard guard(impl->device());
    c10::DataPtr fresh = impl->allocator()->allocate(newsize);
    size_t keep = std::min(newsize, impl->nbytes());
    if (keep > 0) OPENREG_CHECK(orMemcpy(fresh.get(), impl->data(), keep, orMemcpyDeviceToDevice));
    carryKnownValues(impl->data_ptr(), fresh, newsize);  // Note [Values the host knows in timing-only mode]
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(newsize);
  }
};
// LITERALINCLUDE END: HOOKS_IMPL

// LITERALINCLUDE START: REGISTER_HOOKS
const bool hooksRegistered = [] {
  static OpenRegHooks hooks;
  at::RegisterPrivateUse1HooksInterface(&hooks);
  return true;
}();
// LITERALINCLUDE END: REGISTER_HOOKS

}  // namespace
}  // namespace torch_openreg
