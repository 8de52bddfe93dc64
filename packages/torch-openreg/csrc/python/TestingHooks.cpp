// TestingHooks.cpp - torch_openreg._C._testing: what tests need to observe
// the backend (forced scenarios, statistics). Not an API: nothing in
// torch.openreg exposes these, and they may change. A speed layer adds its
// own (SpeedLayer.h).
#include <torch/csrc/utils/pybind.h>

#include "python/Module.h"

#include "aten/SpeedLayer.h"
#include "profiler/ActivityDrain.h"

namespace py = pybind11;

namespace torch_openreg {

namespace {

void bindTestingHooks(py::module_ module) {
  py::module_ m = module.def_submodule("_testing", "Hooks for tests; not an API.");
  m.def("pause_draining", [](bool paused) { pauseDrainingForTesting(paused); });
  speedLayer().addTestingHooks(m.ptr());
}

const ModuleBinding binding(&bindTestingHooks);

}  // namespace

}  // namespace torch_openreg
