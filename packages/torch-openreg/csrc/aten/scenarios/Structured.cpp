// Structured.cpp - registration scenario "structured-style kernel": the
// out= variant of aten::logit is the one kernel; the functional and the
// in-place variants are derived from it, as PyTorch's structured kernels
// derive them. Not needed for operators whose functional and in-place
// variants PyTorch already derives from .out (see Stub.cpp).
#include <ATen/TensorIterator.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/logit.h>
#include <torch/library.h>

#include "aten/kernels/CpuProbe.h"

namespace torch_openreg {
namespace {

// LITERALINCLUDE START: STRUCTURED_KERNELS
// The primary kernel. TensorIterator is the "meta" step: it checks devices,
// computes the result dtype (integers become floating point) and resizes
// out to the result's shape, keeping self's memory format. It reads sizes
// and strides only, never device memory. The "impl" step is the kernel.
at::Tensor& logitOut(const at::Tensor& self, std::optional<double> eps, at::Tensor& out) {
  at::TensorIterator meta = at::TensorIterator::unary_float_op(out, self);
  launchAfterCpuProbe("logit", {out, self}, [eps](std::vector<at::Tensor>& v) {
    at::logit_out(v[0], v[1], eps);
  });
  return out;
}

// Functional: an empty output of the result dtype, which logitOut resizes.
at::Tensor logit(const at::Tensor& self, std::optional<double> eps) {
  at::ScalarType dtype = at::isIntegralType(self.scalar_type(), /*includeBool=*/true)
                             ? c10::typeMetaToScalarType(c10::get_default_dtype())
                             : self.scalar_type();
  at::Tensor out = at::empty({0}, self.options().dtype(dtype));
  return logitOut(self, eps, out);
}

// In-place: self is the output. An integer self is refused by the meta step,
// as on the CPU ("result type Float can't be cast to the desired output type").
at::Tensor& logitInplace(at::Tensor& self, std::optional<double> eps) {
  return logitOut(self, eps, self);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("logit.out", TORCH_FN(logitOut));
  m.impl("logit", TORCH_FN(logit));
  m.impl("logit_", TORCH_FN(logitInplace));
}
// LITERALINCLUDE END: STRUCTURED_KERNELS

}  // namespace
}  // namespace torch_openreg
