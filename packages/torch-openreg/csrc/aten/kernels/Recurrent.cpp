// Recurrent.cpp - fused LSTM and GRU cells, written as compositions of ATen
// operators, which run on the device through openreg's kernels and executor.
//
// The workspace a forward cell returns is private to this file: it holds
// exactly what the matching backward needs (the activated gates, and for
// GRU the hidden state and the hidden candidate), so no layout has to agree
// with any other backend. Gate order is PyTorch's: LSTM (i, f, g, o), GRU
// (r, z, n).
#include "aten/kernels/Recurrent.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/zeros_like.h>

namespace torch_openreg::native {
namespace {

at::Tensor withBiases(const at::Tensor& gates, const std::optional<at::Tensor>& bias) {
  return bias.has_value() && bias->defined() ? gates + *bias : gates;
}

at::Tensor orZeros(const std::optional<at::Tensor>& grad, const at::Tensor& like) {
  return grad.has_value() && grad->defined() ? *grad : at::zeros_like(like);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstmCell(
    const at::Tensor& inputGates, const at::Tensor& hiddenGates, const at::Tensor& cx,
    const std::optional<at::Tensor>& inputBias, const std::optional<at::Tensor>& hiddenBias) {
  // Below autograd: PyTorch records this cell as one node with its own backward.
  at::AutoDispatchBelowADInplaceOrView belowAutograd;
  at::Tensor gates = withBiases(withBiases(inputGates + hiddenGates, inputBias), hiddenBias);
  auto chunks = gates.chunk(4, 1);
  at::Tensor i = chunks[0].sigmoid(), f = chunks[1].sigmoid(), g = chunks[2].tanh(),
             o = chunks[3].sigmoid();
  at::Tensor cy = f * cx + i * g;
  at::Tensor hy = o * cy.tanh();
  return {hy, cy, at::cat({i, f, g, o}, 1)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstmCellBackward(
    const std::optional<at::Tensor>& gradHy, const std::optional<at::Tensor>& gradCy,
    const at::Tensor& cx, const at::Tensor& cy, const at::Tensor& workspace, bool hasBias) {
  at::AutoDispatchBelowADInplaceOrView belowAutograd;
  auto gates = workspace.chunk(4, 1);
  const at::Tensor &i = gates[0], &f = gates[1], &g = gates[2], &o = gates[3];
  at::Tensor tanhCy = cy.tanh();
  at::Tensor dHy = orZeros(gradHy, cy);
  at::Tensor dCy = orZeros(gradCy, cy) + dHy * o * (1 - tanhCy * tanhCy);
  at::Tensor gradGates = at::cat({dCy * g * i * (1 - i), dCy * cx * f * (1 - f),
                                  dCy * i * (1 - g * g), dHy * tanhCy * o * (1 - o)},
                                 1);
  at::Tensor gradBias = hasBias ? gradGates.sum(0) : at::Tensor();
  return {gradGates, dCy * f, gradBias};
}

std::tuple<at::Tensor, at::Tensor> gruCell(
    const at::Tensor& inputGates, const at::Tensor& hiddenGates, const at::Tensor& hx,
    const std::optional<at::Tensor>& inputBias, const std::optional<at::Tensor>& hiddenBias) {
  at::AutoDispatchBelowADInplaceOrView belowAutograd;
  auto in = withBiases(inputGates, inputBias).chunk(3, 1);
  auto hidden = withBiases(hiddenGates, hiddenBias).chunk(3, 1);
  at::Tensor r = (in[0] + hidden[0]).sigmoid();
  at::Tensor z = (in[1] + hidden[1]).sigmoid();
  at::Tensor n = (in[2] + r * hidden[2]).tanh();
  at::Tensor hy = (1 - z) * n + z * hx;
  return {hy, at::cat({r, z, n, hidden[2], hx}, 1)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> gruCellBackward(
    const at::Tensor& gradHy, const at::Tensor& workspace, bool hasBias) {
  at::AutoDispatchBelowADInplaceOrView belowAutograd;
  auto saved = workspace.chunk(5, 1);
  const at::Tensor &r = saved[0], &z = saved[1], &n = saved[2], &hn = saved[3], &hx = saved[4];
  at::Tensor dN = gradHy * (1 - z) * (1 - n * n);  // through tanh
  at::Tensor dZ = gradHy * (hx - n) * z * (1 - z);  // through sigmoid
  at::Tensor dR = dN * hn * r * (1 - r);
  at::Tensor gradInputGates = at::cat({dR, dZ, dN}, 1);
  at::Tensor gradHiddenGates = at::cat({dR, dZ, dN * r}, 1);
  at::Tensor gradInputBias = hasBias ? gradInputGates.sum(0) : at::Tensor();
  at::Tensor gradHiddenBias = hasBias ? gradHiddenGates.sum(0) : at::Tensor();
  return {gradInputGates, gradHiddenGates, gradHy * z, gradInputBias, gradHiddenBias};
}

}  // namespace torch_openreg::native
