// CompositeOverride.cpp - registration scenario "override a composite
// operator": aten::relu6 is CompositeImplicitAutograd (PyTorch runs it as
// hardtanh(self, 0, 6) on every backend); openreg gives it a kernel of its
// own, and restores its autograd, which that kernel alone would lose. See
// Note [Overriding a CompositeImplicitAutograd operator].
#include <ATen/TensorIterator.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/hardtanh.h>
#include <ATen/ops/hardtanh_backward.h>
#include <ATen/ops/relu6.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include "aten/kernels/CpuProbe.h"
#include "aten/kernels/SameDevice.h"

namespace torch_openreg {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// LITERALINCLUDE START: COMPOSITE_OVERRIDE_NOTE
// Note [Overriding a CompositeImplicitAutograd operator]
// A CompositeImplicitAutograd kernel fills every backend key and every
// Autograd<backend> key: it is differentiated through the operators it
// calls. Registering a PrivateUse1 kernel replaces it for PrivateUse1 and,
// by the dispatcher's rules, for AutogradPrivateUse1 too, which falls back
// to PyTorch's "autograd not implemented" kernel. Forward results stay
// right; backward warns and silently drops the gradient that should flow
// through the operator. So the override comes with an AutogradPrivateUse1
// kernel that computes the gradient the composite's decomposition had.
// LITERALINCLUDE END: COMPOSITE_OVERRIDE_NOTE

// LITERALINCLUDE START: COMPOSITE_OVERRIDE_KERNELS
// One device kernel instead of the composite's redispatch to hardtanh.
at::Tensor relu6(const at::Tensor& self) {
  at::Tensor out = at::empty_like(self);
  launchAfterCpuProbe("relu6", {out, self}, [](std::vector<at::Tensor>& v) {
    at::hardtanh_out(v[0], v[1], 0, 6);
  });
  return out;
}

// relu6's gradient is hardtanh_backward's; giving that operator an openreg
// kernel keeps the backward on the device instead of the CPU fallback.
at::Tensor hardtanhBackward(const at::Tensor& gradOutput, const at::Tensor& self,
                            const at::Scalar& minVal, const at::Scalar& maxVal) {
  checkSameDevice("aten::hardtanh_backward", {{"grad_output", &gradOutput}, {"self", &self}});
  at::Tensor gradInput;  // TensorIterator allocates it: broadcast shape, promoted dtype
  at::TensorIterator iter = at::TensorIterator::binary_op(gradInput, gradOutput, self);
  launchAfterCpuProbe("hardtanh_backward", {iter.output(), gradOutput, self},
                        [minVal, maxVal](std::vector<at::Tensor>& v) {
                          at::hardtanh_backward_out(v[0], v[1], v[2], minVal, maxVal);
                        });
  return iter.output();
}
// LITERALINCLUDE END: COMPOSITE_OVERRIDE_KERNELS

// LITERALINCLUDE START: COMPOSITE_OVERRIDE_AUTOGRAD
class Relu6Function : public torch::autograd::Function<Relu6Function> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self) {
    ctx->save_for_backward({self});
    at::AutoDispatchBelowADInplaceOrView below;  // to the PrivateUse1 kernel
    return at::relu6(self);
  }
  // The composite's gradient: hardtanh(self, 0, 6) differentiated.
  static variable_list backward(AutogradContext* ctx, variable_list gradOutputs) {
    return {at::hardtanh_backward(gradOutputs[0], ctx->get_saved_variables()[0], 0, 6)};
  }
};

at::Tensor relu6Autograd(const at::Tensor& self) { return Relu6Function::apply(self); }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("relu6", TORCH_FN(relu6));
  m.impl("hardtanh_backward", TORCH_FN(hardtanhBackward));
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("relu6", TORCH_FN(relu6Autograd));
}
// LITERALINCLUDE END: COMPOSITE_OVERRIDE_AUTOGRAD

}  // namespace
}  // namespace torch_openreg
