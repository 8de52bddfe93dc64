// Recurrent.h - the fused LSTM and GRU cells that PyTorch's recurrent layers
// call on accelerators (CUDA, XPU, PrivateUse1) and that have no CPU kernel.
#pragma once

#include <ATen/core/Tensor.h>

#include <tuple>

namespace torch_openreg::native {

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstmCell(
    const at::Tensor& inputGates, const at::Tensor& hiddenGates, const at::Tensor& cx,
    const std::optional<at::Tensor>& inputBias, const std::optional<at::Tensor>& hiddenBias);
std::tuple<at::Tensor, at::Tensor, at::Tensor> lstmCellBackward(
    const std::optional<at::Tensor>& gradHy, const std::optional<at::Tensor>& gradCy,
    const at::Tensor& cx, const at::Tensor& cy, const at::Tensor& workspace, bool hasBias);
std::tuple<at::Tensor, at::Tensor> gruCell(
    const at::Tensor& inputGates, const at::Tensor& hiddenGates, const at::Tensor& hx,
    const std::optional<at::Tensor>& inputBias, const std::optional<at::Tensor>& hiddenBias);
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> gruCellBackward(
    const at::Tensor& gradHy, const at::Tensor& workspace, bool hasBias);

}  // namespace torch_openreg::native
