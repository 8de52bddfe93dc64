// Module.cpp - the contents of torch_openreg._C: the few entry points the
// Python device module (torch.openreg) needs that PyTorch's generic APIs do
// not provide. Compiled into libtorch_openreg.so; ModuleInit.cpp is _C.
// Everything reachable through torch.accelerator, torch.Stream or
// torch.Event is deliberately not duplicated here.
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

#include <c10/core/DeviceGuard.h>
#include <c10/core/ScalarTypeToTypeMeta.h>
#include <torch_openreg/Check.h>
#include <torch_openreg/Kernel.h>

#include <optional>
#include <string>

#include "aten/Executor.h"
#include "aten/Fallback.h"
#include "compile/CompiledKernel.h"
#include "python/Module.h"
#include "runtime/Device.h"
#include "runtime/DeviceAllocator.h"
#include "runtime/Generator.h"
#include "profiler/Profiler.h"
#include "runtime/Serialization.h"
#include "runtime/Stream.h"
#include "runtime/TimingOnlyMemory.h"

namespace py = pybind11;

namespace torch_openreg {
namespace {

py::bytes activityBytes(const std::vector<orActivity>& records) {
  return py::bytes(reinterpret_cast<const char*>(records.data()), records.size() * sizeof(orActivity));
}

// The caching allocator's statistics under the keys torch.cuda.memory_stats
// uses ("allocated_bytes.all.current", ...), so tools written for CUDA read them.
py::dict memoryStats(c10::DeviceIndex device) {
  checkDeviceIndex(device);
  auto stats = deviceAllocator()->getDeviceStats(device);
  py::dict out;
  auto addArray = [&](const char* name, const c10::CachingAllocator::StatArray& array) {
    const char* pools[] = {"all", "small_pool", "large_pool"};
    for (size_t i = 0; i < array.size(); ++i) {
      std::string prefix = std::string(name) + "." + pools[i] + ".";
      out[py::str(prefix + "current")] = array[i].current;
      out[py::str(prefix + "peak")] = array[i].peak;
      out[py::str(prefix + "allocated")] = array[i].allocated;
      out[py::str(prefix + "freed")] = array[i].freed;
    }
  };
  addArray("allocation", stats.allocation);
  addArray("segment", stats.segment);
  addArray("active", stats.active);
  addArray("inactive_split", stats.inactive_split);
  addArray("allocated_bytes", stats.allocated_bytes);
  addArray("reserved_bytes", stats.reserved_bytes);
  addArray("active_bytes", stats.active_bytes);
  addArray("inactive_split_bytes", stats.inactive_split_bytes);
  addArray("requested_bytes", stats.requested_bytes);
  out["num_alloc_retries"] = stats.num_alloc_retries;
  out["num_ooms"] = stats.num_ooms;
  out["num_sync_all_streams"] = stats.num_sync_all_streams;
  out["num_device_alloc"] = stats.num_device_alloc;
  out["num_device_free"] = stats.num_device_free;
  return out;
}

c10::Stream streamOf(int64_t id, int device) {
  return c10::Stream(c10::Stream::UNSAFE,
                     c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device)),
                     id);
}

}  // namespace
}  // namespace torch_openreg

namespace torch_openreg {

void bindModule(py::module_ m) {
  m.def("_device_count", [] { return static_cast<int>(deviceCount()); });
  m.def("_current_device", [] { return static_cast<int>(currentDevice()); });
  m.def("_set_device", [](int device) { setDevice(static_cast<c10::DeviceIndex>(device)); });
  m.def("_exchange_device", [](int device) {
    return static_cast<int>(exchangeDevice(static_cast<c10::DeviceIndex>(device)));
  });
  m.def("_check_device_index", [](int device) { checkDeviceIndex(device); });
  m.def("_has_primary_context", [](int device) { return deviceInitialized(static_cast<c10::DeviceIndex>(device)); });
  m.def("_default_generator", [](int device) {
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(defaultGenerator(static_cast<c10::DeviceIndex>(device))));
  });
  m.def("_synchronize", [](int device) {
    checkDeviceIndex(static_cast<c10::DeviceIndex>(device));
    c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device)));
    py::gil_scoped_release unlocked;
    OPENREG_CHECK(orDeviceSynchronize());
  });
  // Streams cross into Python as (stream_id, device_index); torch.Stream
  // takes them apart and back the same way.
  m.def("_current_stream", [](int device) { return currentStream(static_cast<c10::DeviceIndex>(device)).id(); });
  m.def("_default_stream", [](int device) { return defaultStream(static_cast<c10::DeviceIndex>(device)).id(); });
  m.def("_exchange_stream", [](int64_t id, int device) { return exchangeStream(streamOf(id, device)).id(); });
  m.def("_memory_stats", [](int device) { return memoryStats(static_cast<c10::DeviceIndex>(device)); });
  // memory_allocated() and friends without building the whole dictionary: tools sample them often.
  m.def("_memory_bytes", [](int device) {
    checkDeviceIndex(device);
    auto stats = deviceAllocator()->getDeviceStats(static_cast<c10::DeviceIndex>(device));
    const auto& allocated = stats.allocated_bytes[0];
    const auto& reserved = stats.reserved_bytes[0];
    return py::make_tuple(allocated.current, allocated.peak, reserved.current, reserved.peak);
  });
  m.def("_reset_peak_memory_stats", [](int device) {
    checkDeviceIndex(static_cast<c10::DeviceIndex>(device));
    deviceAllocator()->resetPeakStats(static_cast<c10::DeviceIndex>(device));
  });
  m.def("_reset_accumulated_memory_stats", [](int device) {
    checkDeviceIndex(static_cast<c10::DeviceIndex>(device));
    deviceAllocator()->resetAccumulatedStats(static_cast<c10::DeviceIndex>(device));
  });
  m.def("_set_memory_fraction", [](double fraction, int device) {
    checkDeviceIndex(device);
    setMemoryFraction(fraction, static_cast<c10::DeviceIndex>(device));
  });
  m.def("_get_memory_fraction", [](int device) {
    checkDeviceIndex(device);
    return getMemoryFraction(static_cast<c10::DeviceIndex>(device));
  });
  m.def("_empty_cache", [] {
    deviceAllocator()->emptyCache({0, 0});
  });
  bindCompiledKernel(m);
  m.def("_fast_paths_enabled", [] { return fastPathsEnabled(); });
  // A Python kernel's CPU views of device memory (ops/launch.py) are valid
  // only while the kernel runs: afterwards they, and every view of them,
  // let go of the memory and raise on any access to their data, so a view
  // the kernel let escape cannot reach device memory from the host.
  m.def("_revoke_kernel_views", [](const std::vector<at::Tensor>& views, const std::string& kernel) {
    for (const at::Tensor& view : views) {
      c10::StorageImpl* storage = view.storage().unsafeGetStorageImpl();
      storage->reset();
      storage->release_data_and_set_meta_custom_data_ptr_error_msg_(c10::str(
          "this CPU view of openreg device memory was made for kernel '", kernel,
          "' and was valid only while that kernel ran; copy what you need inside the kernel "
          "(view.clone()), or return device tensors and read them with .cpu()"));
    }
  });
  m.def("_mem_get_info", [](int device) {
    checkDeviceIndex(static_cast<c10::DeviceIndex>(device));
    return deviceAllocator()->getMemoryInfo(static_cast<c10::DeviceIndex>(device));
  });
  m.def("_fallback_counts", [] { return fallbackCounts(); });
  m.def("_profiler_activity", [] { return py::make_tuple(activityBytes(lastSessionRecords()), sizeof(orActivity)); });
  m.def("_reset_fallback_counts", [] { resetFallbackCounts(); });
  m.def("_executor_counts", [] {
    py::dict out;
    for (const auto& [name, c] : executorCounts()) out[py::str(name)] = py::make_tuple(c.async, c.sync);
    return out;
  });
  m.def("_reset_executor_counts", [] { resetExecutorCounts(); });
  m.def("_meta_disagreements", [] {
    py::dict out;
    for (const auto& [name, d] : metaDisagreements()) out[py::str(name)] = py::make_tuple(d.count, d.first);
    return out;
  });
  m.def("_set_executor_enabled", [](bool on) { setExecutorEnabled(on); });
  m.def("_executor_enabled", [] { return executorEnabled(); });
  m.def("_set_fallback_mode", [](const std::string& name) {
    std::optional<FallbackMode> mode = parseFallbackMode(name);
    TORCH_CHECK_VALUE(mode.has_value(), "fallback mode must be 'warn', 'silent' or 'error', not '", name, "'");
    setFallbackMode(*mode);
  });
  m.def("_get_fallback_mode", [] { return std::string(fallbackModeName(fallbackMode())); });
  m.def("_check_exportable", [](const at::Tensor& t) { checkExportable(t); });
  m.def("_set_strict_value_reads", [](bool strict) { setStrictValueReads(strict); });
  m.def("_strict_value_reads", [] { return strictValueReadsOn(); });
  m.def("_values_read_as_nan", [] { return valuesReadAsNaN(); });
  m.def("_set_quiet_value_reads", [](bool quiet) { return setQuietValueReads(quiet); });
  m.def("_set_layout_tag", [](const at::Tensor& t, bool tiled) { setLayoutTag(t, tiled); });
  m.def("_get_layout_tag", [](const at::Tensor& t) { return layoutTag(t); });
  // The rest comes from files a vendor may leave out (ModuleBinding).
  for (const ModuleBinding* binding : moduleBindings()) binding->bind(m);
}

ModuleBinding::ModuleBinding(void (*bindInto)(pybind11::module_)) : bind(bindInto) {
  moduleBindings().push_back(this);
}

std::vector<const ModuleBinding*>& moduleBindings() {
  static std::vector<const ModuleBinding*> bindings;
  return bindings;
}

}  // namespace torch_openreg
