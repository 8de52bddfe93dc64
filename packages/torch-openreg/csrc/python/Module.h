// Module.h - bindModule fills torch_openreg._C (Module.cpp). It lives in
// libtorch_openreg.so, with the rest of the backend, and is the one symbol
// the library exports besides the public kernel API: for ModuleInit.cpp.
#pragma once

#include <torch/csrc/utils/pybind.h>
#include <torch_openreg/Export.h>

#include <vector>

namespace torch_openreg {

TORCH_OPENREG_API void bindModule(pybind11::module_ module);

// LITERALINCLUDE START: MODULE_BINDING
// A part of torch_openreg._C that lives in a file a vendor may leave out
// (the source map's skip files: _C._testing, record_activity): a static
// ModuleBinding in that file adds it, and bindModule binds every one, so
// Module.cpp includes none of them.
struct ModuleBinding {
  explicit ModuleBinding(void (*bindInto)(pybind11::module_));
  void (*bind)(pybind11::module_);
};
std::vector<const ModuleBinding*>& moduleBindings();
// LITERALINCLUDE END: MODULE_BINDING

}  // namespace torch_openreg
