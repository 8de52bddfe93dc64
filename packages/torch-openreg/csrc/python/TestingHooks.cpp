// TestingHooks.cpp - torch_openreg._C._testing: what the speed layers' tests
// need to observe them (statistics, forced scenarios). Not an API: nothing
// in torch.openreg exposes these, and they may change with the speed layers.
#include "python/TestingHooks.h"

#include <ATen/core/Tensor.h>

#include "fast/KernelThreads.h"
#include "fast/ResultsInPlace.h"
#include "fast/ScratchAllocator.h"
#include "runtime/ActivityDrain.h"

namespace py = pybind11;

namespace torch_openreg {

void bindTestingHooks(py::module_ m) {
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
  m.def("pause_draining", [](bool paused) { pauseDrainingForTesting(paused); });
  // Without the GIL: the wait may be for a kernel that needs it (a test's gate).
  m.def("kernel_threads_for_testing", [](const at::Tensor& operand, bool synchronize) {
    return kernelThreadsForTesting(operand, synchronize);
  }, py::call_guard<py::gil_scoped_release>());
}

}  // namespace torch_openreg
