// HostFastPath.cpp - speed layer: a host fast path for the commonest operators: the
// pointwise add, sub, mul, div and clamp_min (which relu calls), the unary
// neg, exp, log, tanh, sigmoid, sqrt, rsqrt, sin, cos and silu, and the
// full sum, softmax, log_softmax and mm. Their kernels are PyTorch's CPU
// out= kernels, as through the device executor, but the host skips the work
// that the common case does not need.
//
// Measured when introduced: a 1-element `exp` took 7.3-8.8 us through the
// executor and 3.6 us here (CPU 3.7-3.9 us); see tools/bench/torch_ops.py.
//
// Not here: the operators' general route (PyTorch's structured kernel or
// composite, then the device executor), which this calls for everything it
// does not take, and which is all that runs with OPENREG_FAST_PATHS=0.
#include <ATen/core/Tensor.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/_log_softmax_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/_log_softmax_cpu_dispatch.h>
#include <ATen/ops/_softmax_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/_softmax_cpu_dispatch.h>
#include <ATen/ops/add_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/add_cpu_dispatch.h>
#include <ATen/ops/clamp_min_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/clamp_min_cpu_dispatch.h>
#include <ATen/ops/cos_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/cos_cpu_dispatch.h>
#include <ATen/ops/div_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/div.h>
#include <ATen/ops/div_cpu_dispatch.h>
#include <ATen/ops/exp_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/exp_cpu_dispatch.h>
#include <ATen/ops/log_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/log_cpu_dispatch.h>
#include <ATen/ops/mm_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/mm_cpu_dispatch.h>
#include <ATen/ops/mul_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/mul_cpu_dispatch.h>
#include <ATen/ops/neg_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/neg_cpu_dispatch.h>
#include <ATen/ops/rsqrt_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/rsqrt_cpu_dispatch.h>
#include <ATen/ops/sigmoid_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/sigmoid_cpu_dispatch.h>
#include <ATen/ops/silu_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/silu_cpu_dispatch.h>
#include <ATen/ops/sin_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/sin_cpu_dispatch.h>
#include <ATen/ops/sqrt_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/sqrt_cpu_dispatch.h>
#include <ATen/ops/sub_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/sub_cpu_dispatch.h>
#include <ATen/ops/sum_compositeexplicitautograd_dispatch.h>
#include <ATen/ops/sum_cpu_dispatch.h>
#include <ATen/ops/tanh_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/tanh_cpu_dispatch.h>
#include <torch/library.h>

#include "aten/ExecutorRules.h"
#include "fast/FastLaunch.h"
#include "fast/HostFastPath.h"
#include "fast/FastPaths.h"
#include "runtime/TimingOnlyMemory.h"
#include "aten/kernels/Minimal.h"

namespace torch_openreg {

namespace general = at::compositeexplicitautogradnonfunctional;

// The dtypes that every CPU kernel below accepts. (at::isFloatingType also
// counts the Float8 and Float4 types, which most CPU kernels refuse.)
bool fastPathDtype(at::ScalarType dtype) {
  return dtype == at::kFloat || dtype == at::kDouble || dtype == at::kHalf || dtype == at::kBFloat16;
}

// A scalar argument (add's alpha, clamp_min's min) that the CPU kernels take
// for dtype: not a bool, complex or symbolic one, nor one that overflows
// dtype. The general route raises the errors of the others at the call.
bool plainScalar(const at::Scalar& scalar, at::ScalarType dtype) {
  return !scalar.isBoolean() && !scalar.isComplex() && !scalar.isSymbolic() && !scalarOverflows(scalar, dtype);
}

// LITERALINCLUDE START: HOST_FAST_PATH
// Note [The host fast path]
// On the general route, `a + b` costs the host two shape computations:
// PyTorch's structured kernel builds a TensorIterator to learn the output's
// shape, dtype and layout, and the device executor then looks its out= call
// up in the shape cache. Together they are most of the host's time for a
// small tensor. When every operand is a contiguous openreg tensor of one
// floating dtype (fastPathDtype) on one device, each operator below knows
// its output from the sizes alone. Anything else (and so every error:
// operands on two devices, a broadcast, a promotion, mismatched matrices)
// takes the general route, and what the CPU kernel would still refuse is
// checked here, so a queued kernel never meets an argument it refuses.
bool plainOperands(std::initializer_list<const at::Tensor*> operands) {
  const at::Tensor& first = **operands.begin();
  if (first.device().type() != c10::DeviceType::PrivateUse1 || !fastPathDtype(first.scalar_type())) {
    return false;
  }
  for (const at::Tensor* t : operands) {
    if (t->device() != first.device() || t->scalar_type() != first.scalar_type() || !t->is_contiguous()) {
      return false;
    }
    if (hasKnownValues(*t)) return false;  // launchKernel computes it on the host (TimingOnlyMemory.h)
  }
  return true;
}

namespace {

// Queues kernel(views) on the current stream of the operands' device, with
// views = {out, operands...}; out is a new tensor of outSizes with the first
// operand's dtype.
template <typename Kernel, typename... Operands>
at::Tensor launchWithNewOutput(const char* name, c10::IntArrayRef outSizes, Kernel kernel, const at::Tensor& first,
                               const Operands&... rest) {
  // native::empty directly: a dispatcher round trip costs as much as the checks above.
  at::Tensor out = native::empty(outSizes, first.scalar_type(), std::nullopt, first.device(), std::nullopt,
                                 std::nullopt);
  // Described in place: copying a tensor that Python holds would take the GIL twice.
  fast::launchOnTensors(name, out.device().index(), std::move(kernel), out, first, rest...);
  return out;
}
// LITERALINCLUDE END: HOST_FAST_PATH

using Views = std::vector<at::Tensor>;

bool pointwiseFastPath(const at::Tensor& self, const at::Tensor& other) {
  return plainOperands({&self, &other}) && self.sizes() == other.sizes();
}

// LITERALINCLUDE START: HOST_FAST_PATH_KERNELS
at::Tensor add(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (!pointwiseFastPath(self, other) || !plainScalar(alpha, self.scalar_type())) {
    return general::add(self, other, alpha);
  }
  return launchWithNewOutput(
      "aten::add", self.sizes(), [alpha](Views& v) { at::cpu::add_out(v[0], v[1], v[2], alpha); }, self, other);
}

at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2) {
  if (!plainOperands({&self, &mat2}) || self.dim() != 2 || mat2.dim() != 2 || self.size(1) != mat2.size(0)) {
    return general::mm(self, mat2);
  }
  return launchWithNewOutput(
      "aten::mm", {self.size(0), mat2.size(1)}, [](Views& v) { at::cpu::mm_out(v[0], v[1], v[2]); }, self, mat2);
}
// LITERALINCLUDE END: HOST_FAST_PATH_KERNELS

at::Tensor sub(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (!pointwiseFastPath(self, other) || !plainScalar(alpha, self.scalar_type())) {
    return general::sub(self, other, alpha);
  }
  return launchWithNewOutput(
      "aten::sub", self.sizes(), [alpha](Views& v) { at::cpu::sub_out(v[0], v[1], v[2], alpha); }, self, other);
}

at::Tensor mul(const at::Tensor& self, const at::Tensor& other) {
  if (!pointwiseFastPath(self, other)) return general::mul(self, other);
  return launchWithNewOutput(
      "aten::mul", self.sizes(), [](Views& v) { at::cpu::mul_out(v[0], v[1], v[2]); }, self, other);
}

at::Tensor div(const at::Tensor& self, const at::Tensor& other) {
  // `a / 3`: the scalar form's fast path (InPlaceFastPath.cpp), only where
  // that takes it (its general route comes back here with a wrapped number).
  if (other.device().is_cpu() && other.dim() == 0 && other.unsafeGetTensorImpl()->is_wrapped_number() &&
      plainOperands({&self}) && plainScalar(other.item(), self.scalar_type())) {
    return at::div(self, other.item());
  }
  if (!pointwiseFastPath(self, other)) return general::div(self, other);
  return launchWithNewOutput(
      "aten::div", self.sizes(), [](Views& v) { at::cpu::div_out(v[0], v[1], v[2]); }, self, other);
}

at::Tensor clampMin(const at::Tensor& self, const at::Scalar& min) {
  if (!plainOperands({&self}) || !plainScalar(min, self.scalar_type())) return general::clamp_min(self, min);
  return launchWithNewOutput(
      "aten::clamp_min", self.sizes(), [min](Views& v) { at::cpu::clamp_min_out(v[0], v[1], min); }, self);
}

// Unary floating-point operators: the result has self's sizes and dtype.
template <typename CpuOut, typename General>
at::Tensor unaryOp(const char* name, const at::Tensor& self, CpuOut cpuOut, General general) {
  if (!plainOperands({&self})) return general(self);
  return launchWithNewOutput(name, self.sizes(), [cpuOut](Views& v) { cpuOut(v[0], v[1]); }, self);
}

namespace unary {  // named after their operators, which <cmath> also declares
at::Tensor neg(const at::Tensor& self) { return unaryOp("aten::neg", self, &at::cpu::neg_out, &general::neg); }
at::Tensor exp(const at::Tensor& self) { return unaryOp("aten::exp", self, &at::cpu::exp_out, &general::exp); }
at::Tensor log(const at::Tensor& self) { return unaryOp("aten::log", self, &at::cpu::log_out, &general::log); }
at::Tensor tanh(const at::Tensor& self) { return unaryOp("aten::tanh", self, &at::cpu::tanh_out, &general::tanh); }
at::Tensor sigmoid(const at::Tensor& self) {
  return unaryOp("aten::sigmoid", self, &at::cpu::sigmoid_out, &general::sigmoid);
}
at::Tensor sqrt(const at::Tensor& self) { return unaryOp("aten::sqrt", self, &at::cpu::sqrt_out, &general::sqrt); }
at::Tensor rsqrt(const at::Tensor& self) {
  return unaryOp("aten::rsqrt", self, &at::cpu::rsqrt_out, &general::rsqrt);
}
at::Tensor sin(const at::Tensor& self) { return unaryOp("aten::sin", self, &at::cpu::sin_out, &general::sin); }
at::Tensor cos(const at::Tensor& self) { return unaryOp("aten::cos", self, &at::cpu::cos_out, &general::cos); }
at::Tensor silu(const at::Tensor& self) { return unaryOp("aten::silu", self, &at::cpu::silu_out, &general::silu); }
}  // namespace unary

// The sum of every element, in the tensor's own dtype.
at::Tensor sum(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  if (!plainOperands({&self}) || (dtype.has_value() && *dtype != self.scalar_type())) {
    return at::compositeexplicitautograd::sum(self, dtype);
  }
  return launchWithNewOutput(
      "aten::sum", {}, [](Views& v) { at::cpu::sum_out(v[0], v[1], std::nullopt); }, self);
}

// softmax and log_softmax: the dimension is checked here, on the host, so
// that a bad one is an IndexError now and not a device error later.
at::Tensor softmax(const at::Tensor& self, int64_t dim, bool halfToFloat) {
  if (!plainOperands({&self}) || halfToFloat) return general::_softmax(self, dim, halfToFloat);
  dim = c10::maybe_wrap_dim(dim, self.dim());
  return launchWithNewOutput(
      "aten::_softmax", self.sizes(), [dim](Views& v) { at::cpu::_softmax_out(v[0], v[1], dim, false); }, self);
}

at::Tensor logSoftmax(const at::Tensor& self, int64_t dim, bool halfToFloat) {
  if (!plainOperands({&self}) || halfToFloat) return general::_log_softmax(self, dim, halfToFloat);
  dim = c10::maybe_wrap_dim(dim, self.dim());
  return launchWithNewOutput(
      "aten::_log_softmax", self.sizes(), [dim](Views& v) { at::cpu::_log_softmax_out(v[0], v[1], dim, false); },
      self);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // With fast paths off these operators take their general route.
  if (!speedLayersRequested()) return;
  m.impl("add.Tensor", TORCH_FN(add));
  m.impl("sub.Tensor", TORCH_FN(sub));
  m.impl("mul.Tensor", TORCH_FN(mul));
  m.impl("div.Tensor", TORCH_FN(div));
  m.impl("clamp_min", TORCH_FN(clampMin));
  m.impl("neg", TORCH_FN(unary::neg));
  m.impl("exp", TORCH_FN(unary::exp));
  m.impl("log", TORCH_FN(unary::log));
  m.impl("tanh", TORCH_FN(unary::tanh));
  m.impl("sigmoid", TORCH_FN(unary::sigmoid));
  m.impl("sqrt", TORCH_FN(unary::sqrt));
  m.impl("rsqrt", TORCH_FN(unary::rsqrt));
  m.impl("sin", TORCH_FN(unary::sin));
  m.impl("cos", TORCH_FN(unary::cos));
  m.impl("silu", TORCH_FN(unary::silu));
  m.impl("sum", TORCH_FN(sum));
  m.impl("_softmax", TORCH_FN(softmax));
  m.impl("_log_softmax", TORCH_FN(logSoftmax));
  m.impl("mm", TORCH_FN(mm));
}

}  // namespace torch_openreg
