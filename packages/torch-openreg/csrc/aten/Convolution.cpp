// Convolution.cpp - registers openreg's convolution for the "overrideable"
// operators, the entry points PyTorch reserves for backends it does not know.
#include <torch/library.h>

#include "aten/kernels/Convolution.h"

namespace torch_openreg {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", TORCH_FN(native::convolution));
  m.impl("convolution_backward_overrideable", TORCH_FN(native::convolutionBackward));
}

}  // namespace torch_openreg
