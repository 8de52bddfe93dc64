// CustomOps.cpp - registration scenario "custom operators": defines the
// operator namespace openreg (torch.ops.openreg) and its swish operators
// with their openreg kernels. This is the only TORCH_LIBRARY(openreg, ...):
// other files and Python add to the namespace with fragments. Swish's
// autograd is in AutogradFunction.cpp and its Meta kernels in Meta.cpp.
#include <ATen/ops/empty_like.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/silu_backward.h>
#include <torch/library.h>

#include "aten/kernels/CpuProbe.h"
#include "aten/kernels/SameDevice.h"

namespace torch_openreg {
namespace {

// LITERALINCLUDE START: CUSTOM_OPS_KERNELS
// swish(x) = x * sigmoid(x). Arguments are checked on the host, here and by
// launchAfterCpuProbe: a failure inside the kernel would surface only
// later, as a sticky error.
at::Tensor swish(const at::Tensor& self) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "openreg::swish expects a floating-point tensor, got ", self.scalar_type());
  at::Tensor out = at::empty_like(self);
  launchAfterCpuProbe("swish", {out, self}, [](std::vector<at::Tensor>& v) {
    at::silu_out(v[0], v[1]);
  });
  return out;
}

at::Tensor swishBackward(const at::Tensor& gradOutput, const at::Tensor& self) {
  checkSameDevice("openreg::swish_backward", {{"grad_output", &gradOutput}, {"self", &self}});
  TORCH_CHECK(gradOutput.sizes() == self.sizes() && gradOutput.dtype() == self.dtype(),
              "openreg::swish_backward expects grad_output shaped like self, got ",
              gradOutput.sizes(), " ", gradOutput.dtype(), " and ", self.sizes(), " ",
              self.dtype());
  at::Tensor gradInput = at::empty_like(self);
  launchAfterCpuProbe("swish_backward", {gradInput, gradOutput, self},
                        [](std::vector<at::Tensor>& v) {
                          at::silu_backward_out(v[0], v[1], v[2]);
                        });
  return gradInput;
}
// LITERALINCLUDE END: CUSTOM_OPS_KERNELS

}  // namespace

// LITERALINCLUDE START: CUSTOM_OPS_LIBRARY
TORCH_LIBRARY(openreg, m) {
  m.def("swish(Tensor self) -> Tensor");
  m.def("swish_backward(Tensor grad_output, Tensor self) -> Tensor");
}

TORCH_LIBRARY_IMPL(openreg, PrivateUse1, m) {
  m.impl("swish", TORCH_FN(swish));
  m.impl("swish_backward", TORCH_FN(swishBackward));
}
// LITERALINCLUDE END: CUSTOM_OPS_LIBRARY

}  // namespace torch_openreg
