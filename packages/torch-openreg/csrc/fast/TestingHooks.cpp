// TestingHooks.cpp - speed layer: what its tests need to observe it
// (statistics, forced scenarios), added to torch_openreg._C._testing through
// the seam (SpeedLayer.h). Not an API.
#include "fast/TestingHooks.h"

#include <ATen/core/Tensor.h>
#include <torch/csrc/utils/pybind.h>

#include "fast/KernelThreads.h"
#include "fast/ResultsInPlace.h"
#include "fast/ScratchAllocator.h"

namespace py = pybind11;

namespace torch_openreg::fast {

void addTestingHooks(void* testing) {
  auto m = py::reinterpret_borrow<py::module_>(static_cast<PyObject*>(testing));
  m.def("scratch_stats", [] {
    ScratchStats s = scratchStats();
    py::dict out;
    out["in_use_bytes"] = s.inUseBytes;
    out["cached_bytes"] = s.cachedBytes;
    out["allocation_count"] = s.allocationCount;
    out["reuse_count"] = s.reuseCount;
    out["lent_count"] = s.lentCount;
    out["lent_in_use_count"] = s.lentInUseCount;
    return out;
  });
  m.def("results_in_place_counts", [] {
    ResultsInPlaceCounts c = resultsInPlaceCounts();
    py::dict out;
    out["in_place"] = c.inPlace;
    out["copied"] = c.copied;
    return out;
  });
  m.def("compute_into_for_testing", [](std::vector<at::Tensor> outputs, std::vector<int64_t> order) {
    computeIntoForTesting(outputs, std::move(order));
  });
  // Without the GIL: the wait may be for a kernel that needs it (a test's gate).
  m.def("kernel_threads_for_testing", [](const at::Tensor& operand, bool synchronize) {
    return kernelThreadsForTesting(operand, synchronize);
  }, py::call_guard<py::gil_scoped_release>());
}

}  // namespace torch_openreg::fast
