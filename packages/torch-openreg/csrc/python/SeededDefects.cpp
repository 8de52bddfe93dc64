// SeededDefects.cpp - torch_openreg._C._testing.seed_defect(name): breaks one
// contract of the integration on purpose, so that the conformance kit's
// negative controls can show the kit catches it
// (packages/openreg-conformance/tests/test_negative_controls.py).
//
// Nothing calls it unless the test-only environment variable
// TORCH_OPENREG_SEEDED_DEFECT names a defect (torch_openreg/_seeded_defects.py).
// Each defect wraps the registered piece (the device guard, the allocator,
// the metadata functions) and reregisters the wrapper, so the real ones
// carry no trace of it and a vendor leaves this file out.
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/jit/serialization/pickler_helper.h>
#include <torch/csrc/utils/pybind.h>

#include "profiler/ActivityDrain.h"
#include "python/Module.h"

#include <limits>
#include <string>

namespace torch_openreg {
namespace {

using c10::impl::DeviceGuardImplInterface;

// The guard's defects, by name. Each changes one answer of the real guard.
struct DefectiveGuard final : DeviceGuardImplInterface {
  DefectiveGuard(const DeviceGuardImplInterface* real, std::string defect) : real_(real), defect_(std::move(defect)) {}

  c10::DeviceType type() const override { return real_->type(); }
  c10::Device exchangeDevice(c10::Device device) const override {
    c10::Device previous = real_->exchangeDevice(device);
    return defect_ == "exchange-device-returns-the-new-device" ? device : previous;
  }
  c10::Device getDevice() const override {
    c10::Device device = real_->getDevice();
    return defect_ == "current-device-stuck-at-zero" ? c10::Device(device.type(), 0) : device;
  }
  void setDevice(c10::Device device) const override { real_->setDevice(device); }
  void uncheckedSetDevice(c10::Device device) const noexcept override { real_->uncheckedSetDevice(device); }
  c10::Stream getStream(c10::Device device) const override { return real_->getStream(device); }
  c10::Stream getDefaultStream(c10::Device device) const override { return real_->getDefaultStream(device); }
  c10::Stream getStreamFromGlobalPool(c10::Device device, bool isHighPriority) const override {
    return real_->getStreamFromGlobalPool(device, isHighPriority);
  }
  c10::Stream getNewStream(c10::Device device, int priority) const override {
    return real_->getNewStream(device, priority);
  }
  c10::Stream exchangeStream(c10::Stream stream) const override { return real_->exchangeStream(stream); }
  void destroyEvent(void* event, const c10::DeviceIndex device) const noexcept override {
    real_->destroyEvent(event, device);
  }
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device,
              const c10::EventFlag flag) const override {
    real_->record(event, stream, device, flag);
  }
  void block(void* event, const c10::Stream& stream) const override {
    if (defect_ != "stream-wait-ignored") real_->block(event, stream);
  }
  bool queryEvent(void* event) const override { return defect_ == "query-always-true" || real_->queryEvent(event); }
  c10::DeviceIndex deviceCount() const noexcept override { return real_->deviceCount(); }
  c10::DeviceCapability getDeviceCapability(c10::Device device) const override {
    return real_->getDeviceCapability(device);
  }
  bool queryStream(const c10::Stream& stream) const override {
    return defect_ == "query-always-true" || real_->queryStream(stream);
  }
  void synchronizeStream(const c10::Stream& stream) const override {
    if (defect_ != "stream-synchronize-returns-early") real_->synchronizeStream(stream);
  }
  bool isStreamCapturing(const c10::Stream& stream) const override { return real_->isStreamCapturing(stream); }
  void synchronizeEvent(void* event) const override {
    if (defect_ != "event-synchronize-returns-early") real_->synchronizeEvent(event);
  }
  void synchronizeDevice(const c10::DeviceIndex device) const override {
    if (defect_ != "synchronize-returns-early") real_->synchronizeDevice(device);
  }
  void recordDataPtrOnStream(const c10::DataPtr& data, const c10::Stream& stream) const override {
    real_->recordDataPtrOnStream(data, stream);
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex device) const override {
    double milliseconds = real_->elapsedTime(start, end, device);
    return defect_ == "elapsed-time-in-seconds" ? milliseconds / 1000 : milliseconds;
  }

 private:
  const DeviceGuardImplInterface* real_;
  const std::string defect_;
};

// The allocator's defects: statistics that ignore frees, a cache never emptied.
struct DefectiveAllocator final : c10::DeviceAllocator {
  DefectiveAllocator(c10::DeviceAllocator* real, std::string defect) : real_(real), defect_(std::move(defect)) {}

  c10::DataPtr allocate(size_t bytes) override { return real_->allocate(bytes); }
  c10::DeleterFnPtr raw_deleter() const override { return real_->raw_deleter(); }
  void copy_data(void* dest, const void* src, std::size_t count) const override { real_->copy_data(dest, src, count); }
  bool initialized() override { return real_->initialized(); }
  void emptyCache(c10::MempoolId_t pool) override {
    if (defect_ != "empty-cache-keeps-memory") real_->emptyCache(pool);
  }
  void recordStream(const c10::DataPtr& data, c10::Stream stream) override { real_->recordStream(data, stream); }
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    auto stats = real_->getDeviceStats(device);
    if (defect_ == "allocator-stats-ignore-frees") {
      for (auto& stat : stats.allocated_bytes) stat.current = stat.allocated;
    }
    return stats;
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override { real_->resetAccumulatedStats(device); }
  void resetPeakStats(c10::DeviceIndex device) override { real_->resetPeakStats(device); }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override { return real_->getMemoryInfo(device); }

 private:
  c10::DeviceAllocator* real_;
  const std::string defect_;
};

// The metadata defect: restoring a tensor's fields (torch.load, and
// set_tensor_metadata, which share the function) loses format_number.
torch::jit::BackendMetaPtr realRestore = nullptr;
void restoreAllButFormatNumber(const at::Tensor& tensor, std::unordered_map<std::string, bool>& metadata) {
  auto kept = metadata;
  kept.erase("format_number");
  realRestore(tensor, kept);
}

bool seedDefect(const std::string& name) {
  constexpr auto kDevice = c10::DeviceType::PrivateUse1;
  if (name == "exchange-device-returns-the-new-device" || name == "current-device-stuck-at-zero" ||
      name == "stream-wait-ignored" || name == "query-always-true" || name == "event-synchronize-returns-early" ||
      name == "stream-synchronize-returns-early" || name == "synchronize-returns-early" ||
      name == "elapsed-time-in-seconds") {
    // Leaked, as c10 leaks every registered guard.
    auto* guard = new DefectiveGuard(c10::impl::getDeviceGuardImpl(kDevice), name);
    c10::impl::device_guard_impl_registry[static_cast<size_t>(kDevice)].store(guard);
    return true;
  }
  if (name == "allocator-stats-ignore-frees" || name == "empty-cache-keeps-memory") {
    auto* allocator = new DefectiveAllocator(c10::getDeviceAllocator(kDevice), name);  // leaked, as registered ones are
    c10::SetAllocator(kDevice, allocator, std::numeric_limits<uint8_t>::max());
    return true;
  }
  if (name == "backend-metadata-drops-a-field") {
    auto& entry = torch::jit::GetBackendMetaSerialization()[static_cast<size_t>(kDevice)];
    realRestore = entry->second;
    entry = std::make_pair(entry->first, &restoreAllButFormatNumber);
    return true;
  }
  if (name == "profiler-drops-device-events") {
    discardRecordsForTesting(true);
    return true;
  }
  return false;
}

void bindSeededDefects(pybind11::module_ module) {
  // The same submodule as TestingHooks.cpp's, whichever binds first.
  pybind11::module_ testing = module.def_submodule("_testing", "Hooks for tests; not an API.");
  testing.def("seed_defect", &seedDefect,
              "Breaks one contract on purpose (a seeded defect); False if the name is none of this file's.");
}

const ModuleBinding binding(&bindSeededDefects);

}  // namespace
}  // namespace torch_openreg
