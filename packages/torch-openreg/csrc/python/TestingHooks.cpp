// TestingHooks.cpp - torch_openreg._C._testing: what tests need to observe
// the backend (forced scenarios, statistics). Not an API: nothing in
// torch.openreg exposes these, and they may change. A speed layer adds its
// own (SpeedLayer.h).
#include "python/TestingHooks.h"

#include "aten/SpeedLayer.h"
#include "profiler/ActivityDrain.h"

namespace py = pybind11;

namespace torch_openreg {

void bindTestingHooks(py::module_ m) {
  m.def("pause_draining", [](bool paused) { pauseDrainingForTesting(paused); });
  speedLayer().addTestingHooks(m.ptr());
}

}  // namespace torch_openreg
