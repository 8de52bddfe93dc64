// CompiledKernel.h - launching a kernel that Inductor generated and compiled
// (torch.compile) on the current openreg stream. Not here: the code
// generation itself (torch_openreg/_compile/inductor.py drives Inductor's C++ codegen).
#pragma once

#include <torch/csrc/utils/pybind.h>

namespace torch_openreg {

// Adds torch_openreg._C._launch_compiled_kernel (CompiledKernel.cpp).
void bindCompiledKernel(pybind11::module_ module);

}  // namespace torch_openreg
