// Module.h - what the files of openreg_distributed._C share with Module.cpp:
// the transport factory a Python makeGloo gives, and the bindings of files
// a vendor may leave out (SeededDefects.cpp), so Module.cpp includes none.
#pragma once

#include <torch/csrc/utils/pybind.h>

#include "Backend.h"

#include <vector>

namespace occl {

// makeGloo(store, rank, size, timeout_seconds) -> torch.distributed.ProcessGroupGloo,
// or None for the IPC transport.
TransportFactory transportFactory(pybind11::object makeGloo);

// A file that adds to _C defines `const ModuleBinding binding(&bindInto);`;
// PYBIND11_MODULE calls every one.
struct ModuleBinding {
  explicit ModuleBinding(void (*bindInto)(pybind11::module_&));
};
std::vector<void (*)(pybind11::module_&)>& moduleBindings();

}  // namespace occl
