// Module.h - bindModule fills torch_openreg._C (Module.cpp). It lives in
// libtorch_openreg.so, with the rest of the backend, and is the one symbol
// the library exports besides the public kernel API: for ModuleInit.cpp.
#pragma once

#include <torch/csrc/utils/pybind.h>

namespace torch_openreg {

__attribute__((visibility("default"))) void bindModule(pybind11::module_ module);

}  // namespace torch_openreg
