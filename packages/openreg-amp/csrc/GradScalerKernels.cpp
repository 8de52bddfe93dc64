// GradScalerKernels.cpp - the two device kernels torch.amp.GradScaler calls
// every step: unscale the gradients while looking for inf/nan, and update
// the scale. Both are queued on the current openreg stream and return at
// once: nothing here waits for the device (the step's one synchronisation
// is GradScaler's own found_inf.item()). Not here: the optimizers' fused
// kernels (FusedOptimizers.cpp).
#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale.h>
#include <ATen/ops/_amp_update_scale.h>
#include <torch/library.h>

#include "LaunchOperands.h"

namespace openreg_amp {
namespace {

// The same host-side checks CUDA makes, so a wrong call fails at once and
// not later as a sticky kernel error.
void checkOneElement(const at::Tensor& tensor, const char* name, at::ScalarType dtype) {
  TORCH_CHECK(tensor.numel() == 1, name, " must be a 1-element tensor.");
  TORCH_CHECK(tensor.scalar_type() == dtype, name, " must be ", dtype == at::kFloat ? "a float" : "an int",
              " tensor.");
}

// LITERALINCLUDE START: GRAD_SCALER_KERNELS
// grads *= inv_scale, and found_inf = 1 if any gradient holds an inf or a
// nan. The host only checks and queues; the kernel body reuses PyTorch's CPU
// kernel on the device memory.
void nonFiniteCheckAndUnscale(at::TensorList grads, at::Tensor& foundInf, const at::Tensor& invScale) {
  if (grads.empty()) return;
  checkOneElement(invScale, "inv_scale", at::kFloat);
  checkOneElement(foundInf, "found_inf", at::kFloat);
  LaunchOperands operands("_amp_foreach_non_finite_check_and_unscale_", grads[0]);
  operands.list("scaled_grads", grads).one("found_inf", foundInf).one("inv_scale", invScale);
  operands.launch("amp_non_finite_check_and_unscale", [](const OperandViews& v) {
    at::Tensor found = v.one(1);
    at::_amp_foreach_non_finite_check_and_unscale_(v.list(0), found, v.one(2));
  });
  // Timing-only mode computes no gradient, so none overflows: GradScaler
  // reads found_inf = 0 and steps (Note [Values read in timing-only mode]).
  torch_openreg::stateTimingOnlyValue(foundInf, 0.0);
}

// scale *= backoff after an inf/nan step; scale *= growth after
// growth_interval clean steps in a row (counted in growth_tracker). Reads
// found_inf on the device: the host never learns whether the step was
// skipped.
at::Tensor& updateScale(at::Tensor& scale, at::Tensor& growthTracker, const at::Tensor& foundInf,
                        double growthFactor, double backoffFactor, int64_t growthInterval) {
  checkOneElement(scale, "current_scale", at::kFloat);
  checkOneElement(growthTracker, "growth_tracker", at::kInt);
  checkOneElement(foundInf, "found_inf", at::kFloat);
  LaunchOperands operands("_amp_update_scale_", scale);
  operands.one("current_scale", scale).one("growth_tracker", growthTracker).one("found_inf", foundInf);
  operands.launch("amp_update_scale", [=](const OperandViews& v) {
    at::Tensor scaleView = v.one(0), tracker = v.one(1);  // non-const: updated in place
    at::_amp_update_scale_(scaleView, tracker, v.one(2), growthFactor, backoffFactor, growthInterval);
  });
  return scale;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_amp_foreach_non_finite_check_and_unscale_", TORCH_FN(nonFiniteCheckAndUnscale));
  m.impl("_amp_update_scale_", TORCH_FN(updateScale));
}
// LITERALINCLUDE END: GRAD_SCALER_KERNELS

}  // namespace
}  // namespace openreg_amp
