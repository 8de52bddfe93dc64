// TestingHooks.h - binds torch_openreg._C._testing (see TestingHooks.cpp).
#pragma once

#include <torch/csrc/utils/pybind.h>

namespace torch_openreg {

void bindTestingHooks(pybind11::module_ testing);

}  // namespace torch_openreg
