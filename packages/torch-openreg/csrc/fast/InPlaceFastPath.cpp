// InPlaceFastPath.cpp - speed layer: the host fast path (Note [The host fast
// path]) for the in-place operators of an optimizer step: add_, mul_ (tensor
// and scalar), addcmul_, addcdiv_ and lerp_ with a scalar weight, and
// div by a scalar. AdamW's single-tensor step is ten such operators per
// parameter; through the device executor each cost the host 3-7 us more
// than through this path (medians of 3,000 calls on 64 elements, load
// average 5 on 2 cores: executor 15-19 us, fast path 12 us, CPU 4-9 us).
//
// Not here: the general route, which this calls for everything it does not
// take, and which is all that runs with OPENREG_FAST_PATHS=0.
#include <ATen/MemoryOverlap.h>
#include <ATen/ScalarOps.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/add_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/add_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/add_cpu_dispatch.h>
#include <ATen/ops/addcdiv_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/addcdiv_cpu_dispatch.h>
#include <ATen/ops/addcmul_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/addcmul_cpu_dispatch.h>
#include <ATen/ops/div_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/div_cpu_dispatch.h>
#include <ATen/ops/lerp_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/lerp_cpu_dispatch.h>
#include <ATen/ops/mul_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/mul_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/mul_cpu_dispatch.h>
#include <torch/library.h>

#include "aten/kernels/Minimal.h"
#include "fast/FastLaunch.h"
#include "fast/FastPaths.h"
#include "fast/HostFastPath.h"

namespace torch_openreg {
namespace {

using Views = std::vector<at::Tensor>;

// self written in place from operands of its own sizes: plain operands
// (plainOperands) that do not partly overlap self, which the CPU kernel
// would refuse on the worker, where a refusal is a device error.
bool inPlaceFastPath(const at::Tensor& self, std::initializer_list<const at::Tensor*> operands) {
  if (!plainOperands({&self}) || !plainOperands(operands) || (*operands.begin())->device() != self.device() ||
      (*operands.begin())->scalar_type() != self.scalar_type()) {
    return false;
  }
  for (const at::Tensor* t : operands) {
    if (t->sizes() != self.sizes() || at::get_overlap_status(self, *t) == at::MemOverlapStatus::Partial) {
      return false;
    }
  }
  return true;
}

// A Python number operand (`a.mul_(0.9)` passes it as a 0-dim CPU tensor
// marked wrapped) that the scalar form's fast path takes. Only then: the
// scalar form's general route comes back to the tensor form.
bool plainWrappedNumber(const at::Tensor& self, const at::Tensor& t) {
  return t.device().is_cpu() && t.dim() == 0 && t.unsafeGetTensorImpl()->is_wrapped_number() &&
         plainOperands({&self}) && plainScalar(t.item(), self.scalar_type());
}

at::Tensor& mulScalar_(at::Tensor& self, const at::Scalar& other);
at::Tensor& addScalar_(at::Tensor& self, const at::Scalar& other, const at::Scalar& alpha);

// Queues kernel(views), views = {self, operands...}, and returns self.
template <typename Kernel, typename... Operands>
at::Tensor& launchOnSelf(const char* name, at::Tensor& self, Kernel kernel, const Operands&... operands) {
  fast::launchOnTensors(name, self.device().index(), std::move(kernel), self, operands...);
  return self;
}

at::Tensor& add_(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (plainWrappedNumber(self, other)) return addScalar_(self, other.item(), alpha);
  if (!inPlaceFastPath(self, {&other}) || !plainScalar(alpha, self.scalar_type())) {
    return at::compositeexplicitautogradnonfunctional::add_(self, other, alpha);
  }
  return launchOnSelf("aten::add_", self, [alpha](Views& v) { at::cpu::add_(v[0], v[1], alpha); }, other);
}

at::Tensor& mul_(at::Tensor& self, const at::Tensor& other) {
  if (plainWrappedNumber(self, other)) return mulScalar_(self, other.item());
  if (!inPlaceFastPath(self, {&other})) return at::compositeexplicitautogradnonfunctional::mul_(self, other);
  return launchOnSelf("aten::mul_", self, [](Views& v) { at::cpu::mul_(v[0], v[1]); }, other);
}

// A scalar operand, as PyTorch's own kernels take it: a wrapped number,
// made inside the kernel, which spares the host (the busier thread) the
// allocation.
at::Tensor& mulScalar_(at::Tensor& self, const at::Scalar& other) {
  if (!plainOperands({&self}) || !plainScalar(other, self.scalar_type())) {
    return at::compositeexplicitautograd::mul_(self, other);
  }
  return launchOnSelf("aten::mul_", self,
                      [other](Views& v) { at::cpu::mul_(v[0], at::native::wrapped_scalar_tensor(other)); });
}

at::Tensor& addScalar_(at::Tensor& self, const at::Scalar& other, const at::Scalar& alpha) {
  if (!plainOperands({&self}) || !plainScalar(other, self.scalar_type()) || !plainScalar(alpha, self.scalar_type())) {
    return at::compositeexplicitautograd::add_(self, other, alpha);
  }
  return launchOnSelf("aten::add_", self, [other, alpha](Views& v) {
    at::cpu::add_(v[0], at::native::wrapped_scalar_tensor(other), alpha);
  });
}

// self / other, into a new tensor.
at::Tensor divScalar(const at::Tensor& self, const at::Scalar& other) {
  if (!plainOperands({&self}) || !plainScalar(other, self.scalar_type())) {
    return at::compositeexplicitautograd::div(self, other);
  }
  at::Tensor out = native::empty(self.sizes(), self.scalar_type(), std::nullopt, self.device(), std::nullopt,
                          std::nullopt);
  fast::launchOnTensors("aten::div", self.device().index(), [other](Views& v) {
    at::cpu::div_out(v[0], v[1], at::native::wrapped_scalar_tensor(other));
  }, out, self);
  return out;
}

at::Tensor& addcmul_(at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                     const at::Scalar& value) {
  if (!inPlaceFastPath(self, {&tensor1, &tensor2}) || !plainScalar(value, self.scalar_type())) {
    return at::compositeexplicitautogradnonfunctional::addcmul_(self, tensor1, tensor2, value);
  }
  return launchOnSelf(
      "aten::addcmul_", self, [value](Views& v) { at::cpu::addcmul_(v[0], v[1], v[2], value); }, tensor1, tensor2);
}

at::Tensor& addcdiv_(at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                     const at::Scalar& value) {
  if (!inPlaceFastPath(self, {&tensor1, &tensor2}) || !plainScalar(value, self.scalar_type())) {
    return at::compositeexplicitautogradnonfunctional::addcdiv_(self, tensor1, tensor2, value);
  }
  return launchOnSelf(
      "aten::addcdiv_", self, [value](Views& v) { at::cpu::addcdiv_(v[0], v[1], v[2], value); }, tensor1, tensor2);
}

at::Tensor& lerp_(at::Tensor& self, const at::Tensor& end, const at::Scalar& weight) {
  if (!inPlaceFastPath(self, {&end}) || !plainScalar(weight, self.scalar_type())) {
    return at::compositeexplicitautogradnonfunctional::lerp_(self, end, weight);
  }
  return launchOnSelf("aten::lerp_", self, [weight](Views& v) { at::cpu::lerp_(v[0], v[1], weight); }, end);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // With fast paths off these operators take their general route.
  if (!speedLayersRequested()) return;
  m.impl("add_.Tensor", TORCH_FN(add_));
  m.impl("add_.Scalar", TORCH_FN(addScalar_));
  m.impl("mul_.Tensor", TORCH_FN(mul_));
  m.impl("mul_.Scalar", TORCH_FN(mulScalar_));
  m.impl("div.Scalar", TORCH_FN(divScalar));
  m.impl("addcmul_", TORCH_FN(addcmul_));
  m.impl("addcdiv_", TORCH_FN(addcdiv_));
  m.impl("lerp_.Scalar", TORCH_FN(lerp_));
}

}  // namespace torch_openreg
