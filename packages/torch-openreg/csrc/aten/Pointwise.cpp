// Pointwise.cpp - a host fast path for the commonest pointwise operators
// (add, sub, mul, div, clamp_min, which relu calls): their kernels are
// PyTorch's CPU out= kernels, as through the device executor, but the host
// skips the work that the common case does not need.
//
// Not here: the operators' general route (PyTorch's structured kernel, then
// the device executor), which this calls for everything it does not take.
#include <ATen/ops/add.h>
#include <ATen/ops/add_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/clamp_min_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/div.h>
#include <ATen/ops/div_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/mul_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sub_compositeexplicitautogradnonfunctional_dispatch.h>
#include <torch/library.h>

#include "aten/native/Launch.h"
#include "aten/native/Minimal.h"

namespace torch_openreg {
namespace {

namespace general = at::compositeexplicitautogradnonfunctional;

// LITERALINCLUDE START: POINTWISE_FAST_PATH
// Note [The pointwise fast path]
// On the general route, `a + b` costs the host two shape computations:
// PyTorch's structured kernel builds a TensorIterator to learn the output's
// shape, dtype and layout, and the device executor then looks its out= call
// up in the shape cache. Together they are most of the host's time for a
// small tensor. When every operand is a contiguous openreg tensor of one
// floating dtype and one shape on one device, the answer is known without
// either: the output looks like the first operand. Anything else (and so
// every error: operands on two devices, a broadcast, a promotion) takes the
// general route.
bool takesFastPath(std::initializer_list<const at::Tensor*> operands) {
  const at::Tensor& first = **operands.begin();
  if (first.device().type() != c10::DeviceType::PrivateUse1 || !at::isFloatingType(first.scalar_type())) {
    return false;
  }
  for (const at::Tensor* t : operands) {
    if (t->device() != first.device() || t->scalar_type() != first.scalar_type() || t->sizes() != first.sizes() ||
        !t->is_contiguous()) {
      return false;
    }
  }
  return true;
}

// Queues kernel(views) on the current stream of the operands' device, with
// views = {out, operands...}; out is a new tensor like the first operand.
template <typename Kernel, typename... Operands>
at::Tensor launchLikeFirst(const char* name, Kernel kernel, const at::Tensor& first, const Operands&... rest) {
  // native::empty directly: a dispatcher round trip costs as much as the checks above.
  at::Tensor out = native::empty(first.sizes(), first.scalar_type(), std::nullopt, first.device(), std::nullopt,
                                 std::nullopt);
  launchOnStream(name, {out, first, rest...}, std::move(kernel));
  return out;
}
// LITERALINCLUDE END: POINTWISE_FAST_PATH

using Views = std::vector<at::Tensor>;

// LITERALINCLUDE START: POINTWISE_KERNELS
at::Tensor add(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (!takesFastPath({&self, &other}) || alpha.isComplex()) return general::add(self, other, alpha);
  return launchLikeFirst("aten::add", [alpha](Views& v) { at::add_out(v[0], v[1], v[2], alpha); }, self, other);
}
// LITERALINCLUDE END: POINTWISE_KERNELS

at::Tensor sub(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (!takesFastPath({&self, &other}) || alpha.isComplex()) return general::sub(self, other, alpha);
  return launchLikeFirst("aten::sub", [alpha](Views& v) { at::sub_out(v[0], v[1], v[2], alpha); }, self, other);
}

at::Tensor mul(const at::Tensor& self, const at::Tensor& other) {
  if (!takesFastPath({&self, &other})) return general::mul(self, other);
  return launchLikeFirst("aten::mul", [](Views& v) { at::mul_out(v[0], v[1], v[2]); }, self, other);
}

at::Tensor div(const at::Tensor& self, const at::Tensor& other) {
  if (!takesFastPath({&self, &other})) return general::div(self, other);
  return launchLikeFirst("aten::div", [](Views& v) { at::div_out(v[0], v[1], v[2]); }, self, other);
}

at::Tensor clampMin(const at::Tensor& self, const at::Scalar& min) {
  if (!takesFastPath({&self}) || min.isComplex()) return general::clamp_min(self, min);
  return launchLikeFirst("aten::clamp_min", [min](Views& v) { at::clamp_min_out(v[0], v[1], min); }, self);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("add.Tensor", TORCH_FN(add));
  m.impl("sub.Tensor", TORCH_FN(sub));
  m.impl("mul.Tensor", TORCH_FN(mul));
  m.impl("div.Tensor", TORCH_FN(div));
  m.impl("clamp_min", TORCH_FN(clampMin));
}

}  // namespace torch_openreg
