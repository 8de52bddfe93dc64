// Convolution.h - convolution forward and backward for openreg. PyTorch
// routes convolutions of backends it does not know to the "overrideable"
// operators, whose default implementation only raises.
#pragma once

#include <ATen/core/Tensor.h>

#include <tuple>

namespace torch_openreg::native {

at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight,
                       const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                       at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                       at::IntArrayRef outputPadding, int64_t groups);

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolutionBackward(
    const at::Tensor& gradOutput, const at::Tensor& input, const at::Tensor& weight,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
    at::IntArrayRef outputPadding, int64_t groups, std::array<bool, 3> outputMask);

}  // namespace torch_openreg::native
