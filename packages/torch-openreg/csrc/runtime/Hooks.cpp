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

namespace torch_openreg {
namespace {

// LITERALINCLUDE START: HOOKS_IMPL
struct OpenRegHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  // Must not throw, and must not initialise a device (no device memory or
  // streams are touched by counting devices).
  bool isAvailable() const override { return deviceCount() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex device) const override { return deviceInitialized(device); }
  void init() const override { deviceCount(); }

  c10::DeviceIndex deviceCount() const override { return torch_openreg::deviceCount(); }
  void setCurrentDevice(c10::DeviceIndex device) const override { setDevice(device); }
  c10::DeviceIndex getCurrentDevice() const override { return currentDevice(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    return torch_openreg::exchangeDevice(device);
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return torch_openreg::exchangeDevice(device);
  }

  const at::Generator& getDefaultGenerator(c10::DeviceIndex device) const override {
    return defaultGenerator(device);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device) const override { return newGenerator(device); }

  at::Device getDeviceFromPtr(void* data) const override {
    orPointerAttributes attributes;
    OPENREG_CHECK(orPointerGetAttributes(&attributes, data));
    TORCH_CHECK(attributes.type == orMemoryTypeDevice, data, " is not openreg device memory");
    return at::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(attributes.device));
  }
  bool isPinnedPtr(const void* data) const override { return isPinned(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return hostAllocator(); }

  // Storage.resize_() on an openreg storage: new memory, old bytes copied.
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
    c10::DeviceGuard guard(impl->device());
    c10::DataPtr fresh = impl->allocator()->allocate(newsize);
    size_t keep = std::min(newsize, impl->nbytes());
    if (keep > 0) OPENREG_CHECK(orMemcpy(fresh.get(), impl->data(), keep, orMemcpyDeviceToDevice));
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
