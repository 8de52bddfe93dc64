// Fallthrough.cpp - registration scenario "fallthrough for one operator":
// openreg::all_finite skips the AutogradPrivateUse1 key. Not the global
// AutocastPrivateUse1 fallthrough, which is in Fallback.cpp.
#include <torch/library.h>

namespace torch_openreg {

// LITERALINCLUDE START: FALLTHROUGH
// all_finite has nothing to differentiate (its result is a bool), so the
// dispatcher goes straight past autograd to the PrivateUse1 kernel. Without
// this, every call would go through PyTorch's autograd fallback, which
// looks at each input and output for gradients the operator cannot compute.
TORCH_LIBRARY_IMPL(openreg, AutogradPrivateUse1, m) {
  m.impl("all_finite", torch::CppFunction::makeFallthrough());
}
// LITERALINCLUDE END: FALLTHROUGH

}  // namespace torch_openreg
