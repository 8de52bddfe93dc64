// LaunchOperands.h - packs an operator's tensor lists and optional tensors
// into the one flat list that torch_openreg::launchKernel takes, checks on
// the host that they all live on one openreg device, and cuts the kernel's
// views back into the same lists. Not a kernel: GradScalerKernels.cpp and
// FusedOptimizers.cpp hold those.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <torch_openreg/Kernel.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace openreg_amp {

// The views one kernel receives, grouped as the operands were added.
class OperandViews {
 public:
  OperandViews(std::vector<at::Tensor>& views, const std::vector<size_t>& starts) : views_(views), starts_(starts) {}
  // The views of group `group`, added as a list.
  std::vector<at::Tensor> list(size_t group) const {
    return {views_.begin() + starts_[group], views_.begin() + starts_[group + 1]};
  }
  // The view of group `group`, added as an optional tensor: nullopt if absent.
  std::optional<at::Tensor> optional(size_t group) const {
    if (starts_[group] == starts_[group + 1]) return std::nullopt;
    return views_[starts_[group]];
  }
  const at::Tensor& one(size_t group) const { return views_[starts_[group]]; }

 private:
  std::vector<at::Tensor>& views_;
  const std::vector<size_t>& starts_;
};

// Operands of one launch, in groups, on the device of `anchor` (the first
// parameter or gradient). `op` names the operator in errors.
class LaunchOperands {
 public:
  LaunchOperands(const char* op, const at::Tensor& anchor) : op_(op), device_(anchor.device()) {
    TORCH_CHECK(torch_openreg::isOpenRegTensor(anchor), op, " on openreg expects its first tensor on an openreg ",
                "device, but it is ", anchor.defined() ? anchor.device().str() : std::string("undefined"), ".");
  }

  // Adds a list; every tensor must be an openreg tensor on the launch's device.
  LaunchOperands& list(const char* what, at::TensorList tensors) {
    for (size_t i = 0; i < tensors.size(); ++i) check(tensors[i], std::string(what) + "[" + std::to_string(i) + "]");
    tensors_.insert(tensors_.end(), tensors.begin(), tensors.end());
    starts_.push_back(tensors_.size());
    return *this;
  }
  // Adds an optional tensor (an empty group when absent or undefined).
  LaunchOperands& optional(const char* what, const std::optional<at::Tensor>& tensor) {
    if (tensor.has_value() && tensor->defined()) {
      check(*tensor, what);
      tensors_.push_back(*tensor);
    }
    starts_.push_back(tensors_.size());
    return *this;
  }
  // Adds one tensor, which must be there.
  LaunchOperands& one(const char* what, const at::Tensor& tensor) {
    check(tensor, what);
    tensors_.push_back(tensor);
    starts_.push_back(tensors_.size());
    return *this;
  }

  // LITERALINCLUDE START: LAUNCH_OPERANDS
  // Queues body(OperandViews) as kernel `name` on the device's current
  // stream. Only the group boundaries (sizes) are captured: the tensors go
  // through launchKernel, which hands the body CPU views of their memory.
  template <typename Body>
  void launch(const char* name, Body body) {
    torch_openreg::launchKernel(name, tensors_, [starts = starts_, body](std::vector<at::Tensor>& views) {
      body(OperandViews(views, starts));
    });
  }
  // LITERALINCLUDE END: LAUNCH_OPERANDS

 private:
  void check(const at::Tensor& tensor, const std::string& what) const {
    TORCH_CHECK(torch_openreg::isOpenRegTensor(tensor) && tensor.device() == device_, op_, " on openreg expects ",
                what, " on ", device_, ", but it is ",
                tensor.defined() ? tensor.device().str() : std::string("undefined"),
                "; move it to the device of the parameters (or gradients) first.");
  }

  const char* op_;
  c10::Device device_;
  std::vector<at::Tensor> tensors_;
  std::vector<size_t> starts_{0};  // group g is tensors_[starts_[g], starts_[g + 1])
};

}  // namespace openreg_amp
