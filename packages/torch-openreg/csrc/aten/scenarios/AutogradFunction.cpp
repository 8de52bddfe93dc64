// AutogradFunction.cpp - registration scenario "autograd.Function in C++":
// openreg::swish becomes differentiable through a torch::autograd::Function
// registered for the AutogradPrivateUse1 key. Not twice differentiable:
// swish_backward itself has no autograd kernel.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>
#include <torch/library.h>

namespace torch_openreg {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// LITERALINCLUDE START: AUTOGRAD_FUNCTION
class SwishFunction : public torch::autograd::Function<SwishFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self) {
    ctx->save_for_backward({self});
    // Redispatch below autograd, to the PrivateUse1 kernel (or, while
    // torch.compile traces, to the Meta kernel). Without this guard the call
    // would come back to this autograd kernel and recurse forever.
    at::AutoDispatchBelowADInplaceOrView below;
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("openreg::swish", "")
                         .typed<at::Tensor(const at::Tensor&)>();
    return op.call(self);
  }

  // The gradient is an operator too, so that autograd, torch.compile and
  // torch.export all see the backward as one openreg kernel.
  static variable_list backward(AutogradContext* ctx, variable_list gradOutputs) {
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("openreg::swish_backward", "")
                         .typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
    return {op.call(gradOutputs[0], ctx->get_saved_variables()[0])};
  }
};

at::Tensor swishAutograd(const at::Tensor& self) { return SwishFunction::apply(self); }

TORCH_LIBRARY_IMPL(openreg, AutogradPrivateUse1, m) {
  m.impl("swish", TORCH_FN(swishAutograd));
}
// LITERALINCLUDE END: AUTOGRAD_FUNCTION

}  // namespace
}  // namespace torch_openreg
