// Meta.cpp - registration scenario "Meta kernels": what the C++ openreg
// operators return, computed without data, so that torch.compile and
// torch.export can trace them with fake tensors. Meta kernels allocate
// nothing and never launch; they check what the real kernels check.
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

namespace torch_openreg {
namespace {

// LITERALINCLUDE START: META_KERNELS
// Sizes are read as SymInts: under torch.compile with dynamic shapes they
// are symbols, and sizes() would throw.
at::Tensor swishMeta(const at::Tensor& self) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "openreg::swish expects a floating-point tensor, got ", self.scalar_type());
  return at::empty_like(self);
}

at::Tensor swishBackwardMeta(const at::Tensor& gradOutput, const at::Tensor& self) {
  TORCH_CHECK(gradOutput.sym_sizes() == self.sym_sizes() && gradOutput.dtype() == self.dtype(),
              "openreg::swish_backward expects grad_output shaped like self, got ",
              gradOutput.sym_sizes(), " ", gradOutput.dtype(), " and ", self.sym_sizes(), " ",
              self.dtype());
  return at::empty_like(self);
}

at::Tensor allFiniteMeta(const at::Tensor& self) {
  return at::empty({}, self.options().dtype(at::kBool));
}

TORCH_LIBRARY_IMPL(openreg, Meta, m) {
  m.impl("swish", TORCH_FN(swishMeta));
  m.impl("swish_backward", TORCH_FN(swishBackwardMeta));
  m.impl("all_finite", TORCH_FN(allFiniteMeta));
}
// LITERALINCLUDE END: META_KERNELS

}  // namespace
}  // namespace torch_openreg
