// FusedOptimizers.cpp - the fused optimizer kernels PyTorch enables on
// PrivateUse1, so torch.optim.Adam/AdamW/SGD(..., fused=True) step on openreg
// in one kernel per parameter group, GradScaler's grad_scale and found_inf
// read on the device (no host synchronisation). Not here: the optimizers'
// Python side (PyTorch's) and GradScaler's own kernels (GradScalerKernels.cpp).
#include <ATen/ops/_fused_adam.h>
#include <ATen/ops/_fused_adamw.h>
#include <ATen/ops/_fused_sgd.h>
#include <torch/library.h>

#include "LaunchOperands.h"

namespace openreg_amp {
namespace {

using OptionalTensor = std::optional<at::Tensor>;

void checkSameLength(const char* op, at::TensorList params, at::TensorList other, const char* name) {
  TORCH_CHECK(other.size() == params.size(), op, " expects one tensor of ", name, " per parameter: got ",
              params.size(), " parameters and ", other.size(), " ", name, ".");
}

// How the kernel gets the learning rate. A float is captured. A tensor on the
// CPU (an optimizer's lr=torch.tensor(...)) is captured by value and read in
// the kernel; an openreg tensor is launched with the other operands and read
// on the device (returned undefined here, found in the views later).
double holdLr(LaunchOperands& operands, double lr) {
  operands.optional("lr", std::nullopt);
  return lr;
}
at::Tensor holdLr(LaunchOperands& operands, const at::Tensor& lr) {
  if (lr.is_cpu()) {
    operands.optional("lr", std::nullopt);
    return lr;
  }
  operands.one("lr", lr);
  return at::Tensor();
}
double lrInKernel(const OperandViews&, size_t, double lr) { return lr; }
at::Tensor lrInKernel(const OperandViews& v, size_t group, const at::Tensor& held) {
  return held.defined() ? held : v.one(group);
}

// LITERALINCLUDE START: FUSED_ADAM
// Operand groups of an Adam/AdamW launch, in the order they are added.
enum AdamGroup : size_t { kParams, kGrads, kExpAvgs, kExpAvgSqs, kMaxExpAvgSqs, kSteps, kGradScale, kFoundInf, kLr };

// _fused_adam_ and _fused_adamw_ (Decoupled: weight decay applied to the
// parameter, not the gradient), with lr a float or a tensor. One kernel
// updates every parameter of the group; with grad_scale it unscales the
// gradients first, and with found_inf == 1 it leaves everything unchanged.
template <bool Decoupled, typename Lr>
void fusedAdam(at::TensorList params, at::TensorList grads, at::TensorList expAvgs, at::TensorList expAvgSqs,
               at::TensorList maxExpAvgSqs, at::TensorList steps, Lr lr, double beta1, double beta2,
               double weightDecay, double eps, bool amsgrad, bool maximize, const OptionalTensor& gradScale,
               const OptionalTensor& foundInf) {
  const char* op = Decoupled ? "_fused_adamw_" : "_fused_adam_";
  if (params.empty()) return;
  checkSameLength(op, params, grads, "grads");
  checkSameLength(op, params, expAvgs, "exp_avgs");
  checkSameLength(op, params, expAvgSqs, "exp_avg_sqs");
  checkSameLength(op, params, steps, "state_steps");
  if (amsgrad) checkSameLength(op, params, maxExpAvgSqs, "max_exp_avg_sqs");
  LaunchOperands operands(op, params[0]);
  operands.list("params", params).list("grads", grads).list("exp_avgs", expAvgs).list("exp_avg_sqs", expAvgSqs);
  operands.list("max_exp_avg_sqs", maxExpAvgSqs).list("state_steps", steps);
  operands.optional("grad_scale", gradScale).optional("found_inf", foundInf);
  auto held = holdLr(operands, lr);
  operands.launch(Decoupled ? "fused_adamw" : "fused_adam", [=](const OperandViews& v) {
    auto adam = [](auto&&... args) {
      if constexpr (Decoupled) at::_fused_adamw_(args...);
      else at::_fused_adam_(args...);
    };
    adam(v.list(kParams), v.list(kGrads), v.list(kExpAvgs), v.list(kExpAvgSqs), v.list(kMaxExpAvgSqs),
         v.list(kSteps), lrInKernel(v, kLr, held), beta1, beta2, weightDecay, eps, amsgrad, maximize,
         v.optional(kGradScale), v.optional(kFoundInf));
  });
}
// LITERALINCLUDE END: FUSED_ADAM

enum SgdGroup : size_t { kSgdParams, kSgdGrads, kMomentumBuffers, kSgdGradScale, kSgdFoundInf, kSgdLr };

// _fused_sgd_: momentum buffers are updated in place (and initialised from
// the gradient on the first step, is_first_step); same grad_scale/found_inf
// handling as Adam.
template <typename Lr>
void fusedSgd(at::TensorList params, at::TensorList grads, at::TensorList momentumBuffers, double weightDecay,
              double momentum, Lr lr, double dampening, bool nesterov, bool maximize, bool isFirstStep,
              const OptionalTensor& gradScale, const OptionalTensor& foundInf) {
  const char* op = "_fused_sgd_";
  if (params.empty()) return;
  checkSameLength(op, params, grads, "grads");
  if (momentum == 0) {
    // PyTorch's kernel would fail on the device; say it here instead.
    TORCH_CHECK(momentumBuffers.empty(), op, " with momentum=0 expects an empty momentum_buffer_list, got ",
                momentumBuffers.size(), " tensors.");
  } else {
    checkSameLength(op, params, momentumBuffers, "momentum_buffer_list");
  }
  LaunchOperands operands(op, params[0]);
  operands.list("params", params).list("grads", grads).list("momentum_buffer_list", momentumBuffers);
  operands.optional("grad_scale", gradScale).optional("found_inf", foundInf);
  auto held = holdLr(operands, lr);
  operands.launch("fused_sgd", [=](const OperandViews& v) {
    at::_fused_sgd_(v.list(kSgdParams), v.list(kSgdGrads), v.list(kMomentumBuffers), weightDecay, momentum,
                    lrInKernel(v, kSgdLr, held), dampening, nesterov, maximize, isFirstStep,
                    v.optional(kSgdGradScale), v.optional(kSgdFoundInf));
  });
}

// LITERALINCLUDE START: FUSED_OPTIMIZER_REGISTRATION
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_adam_", TORCH_FN((fusedAdam<false, double>)));
  m.impl("_fused_adam_.tensor_lr", TORCH_FN((fusedAdam<false, const at::Tensor&>)));
  m.impl("_fused_adamw_", TORCH_FN((fusedAdam<true, double>)));
  m.impl("_fused_adamw_.tensor_lr", TORCH_FN((fusedAdam<true, const at::Tensor&>)));
  m.impl("_fused_sgd_", TORCH_FN(fusedSgd<double>));
  m.impl("_fused_sgd_.tensor_lr", TORCH_FN(fusedSgd<const at::Tensor&>));
}
// LITERALINCLUDE END: FUSED_OPTIMIZER_REGISTRATION

}  // namespace
}  // namespace openreg_amp
