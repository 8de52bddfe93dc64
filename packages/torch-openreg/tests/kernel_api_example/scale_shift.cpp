// scale_shift.cpp - an out-of-tree extension written against torch-openreg's
// public kernel API only (torch_openreg/Kernel.h): the operator
// openreg_example::scale_shift(x, scale, shift) = x * scale + shift, with
// its backward, each a kernel on the current openreg stream. The tests build
// it against the installed torch-openreg (test_kernel_api.py); the guide's
// page for layer authors quotes it.
#include <ATen/ops/empty_like.h>
#include <torch/autograd.h>
#include <torch/library.h>
#include <torch_openreg/Kernel.h>

static_assert(TORCH_OPENREG_API_VERSION_MAJOR == 1, "written for version 1 of torch-openreg's kernel API");

namespace {

// LITERALINCLUDE START: KERNEL_API_EXAMPLE
// The kernel: x is checked on the host (here), then the arithmetic runs on
// the stream's worker over CPU views of the device memory (v[0] is out, v[1]
// is x, as launched).
at::Tensor scaleShift(const at::Tensor& x, double scale, double shift) {
  TORCH_CHECK(at::isFloatingType(x.scalar_type()), "scale_shift expects a floating-point tensor, got ",
              x.scalar_type());
  at::Tensor out = at::empty_like(x);
  torch_openreg::launchKernel("scale_shift", {out, x}, [scale, shift](std::vector<at::Tensor>& v) {
    at::mul_out(v[0], v[1], scale);
    v[0].add_(shift);
  });
  return out;
}

// Its gradient with respect to x is grad * scale: another kernel.
at::Tensor scaleShiftBackward(const at::Tensor& grad, double scale) {
  at::Tensor gradX = at::empty_like(grad);
  torch_openreg::launchKernel("scale_shift_backward", {gradX, grad},
                              [scale](std::vector<at::Tensor>& v) { at::mul_out(v[0], v[1], scale); });
  return gradX;
}
// LITERALINCLUDE END: KERNEL_API_EXAMPLE

class ScaleShift : public torch::autograd::Function<ScaleShift> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, double scale,
                            double shift) {
    at::AutoDispatchBelowADInplaceOrView belowAutograd;
    ctx->saved_data["scale"] = scale;
    return scaleShift(x, scale, shift);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    return {scaleShiftBackward(grads[0], ctx->saved_data["scale"].toDouble()), at::Tensor(), at::Tensor()};
  }
};

at::Tensor scaleShiftAutograd(const at::Tensor& x, double scale, double shift) {
  return ScaleShift::apply(x, scale, shift);
}

}  // namespace

// LITERALINCLUDE START: KERNEL_API_EXAMPLE_REGISTRATION
TORCH_LIBRARY(openreg_example, m) { m.def("scale_shift(Tensor x, float scale, float shift) -> Tensor"); }
TORCH_LIBRARY_IMPL(openreg_example, PrivateUse1, m) { m.impl("scale_shift", TORCH_FN(scaleShift)); }
TORCH_LIBRARY_IMPL(openreg_example, AutogradPrivateUse1, m) { m.impl("scale_shift", TORCH_FN(scaleShiftAutograd)); }
// LITERALINCLUDE END: KERNEL_API_EXAMPLE_REGISTRATION
