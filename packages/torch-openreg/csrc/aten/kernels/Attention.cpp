// Attention.cpp - scaled dot-product attention as one fused operator on
// openreg, forward and backward, written with ATen operators that run on
// the device. The forward keeps only the log-sum-exp of each row; the
// backward recomputes the probabilities from it, as fused GPU kernels do, so
// the attention matrix is never stored between the passes.
#include "aten/kernels/Attention.h"

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros_like.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace torch_openreg::native {
namespace {

constexpr int64_t kMath = 0;          // SDPBackend::math
constexpr int64_t kOverrideable = 4;  // SDPBackend::overrideable

double scaleOf(const at::Tensor& query, std::optional<double> scale) {
  return scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(query.size(-1)));
}

// The scaled scores q k^T, with the bias added and the causal mask applied.
at::Tensor scores(const at::Tensor& query, const at::Tensor& key, const at::Tensor& bias,
                  bool isCausal, double scale) {
  at::Tensor s = at::matmul(query, key.transpose(-2, -1)).mul_(scale);
  if (bias.defined()) s.add_(bias);
  if (isCausal) {
    // Top-left aligned, as PyTorch's is_causal is.
    at::Tensor allowed =
        at::ones({query.size(-2), key.size(-2)}, query.options().dtype(at::kBool)).tril(0);
    s.masked_fill_(allowed.logical_not(), -std::numeric_limits<double>::infinity());
  }
  return s;
}

// result, in the layout PyTorch's meta functions give this operator's
// results: like's order of dimensions by stride, over result's sizes
// (alloc_with_matching_layout, empty_like in torch/_meta_registrations.py).
// torch.compile plans memory with those layouts, so the device must agree.
at::Tensor inLayoutOf(const at::Tensor& result, const at::Tensor& like) {
  std::vector<int64_t> order(like.dim());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return like.stride(a) > like.stride(b); });
  std::vector<int64_t> strides(like.dim());
  int64_t stride = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    strides[*it] = stride;
    stride *= result.size(*it);
  }
  if (result.strides().vec() == strides) return result;
  return at::empty_strided(result.sizes(), strides, result.options()).copy_(result);
}

}  // namespace

// Fused path for what it supports (4-d inputs, equal head counts, no
// dropout, a floating or no mask); the math path of PyTorch otherwise.
int64_t sdpChoice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                  const std::optional<at::Tensor>& attnMask, double dropoutP, bool isCausal,
                  std::optional<double> scale, bool enableGqa) {
  bool maskOk = !attnMask.has_value() || !attnMask->defined() ||
                at::isFloatingType(attnMask->scalar_type());
  bool shapesOk = query.dim() == 4 && key.dim() == 4 && value.dim() == 4 &&
                  query.size(1) == key.size(1) && key.size(1) == value.size(1);
  bool fused = at::globalContext().userEnabledOverrideableSDP() && dropoutP == 0.0 && maskOk &&
               shapesOk && !(isCausal && maskOk && attnMask.has_value() && attnMask->defined());
  return fused ? kOverrideable : kMath;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor,
           at::Tensor, at::Tensor>
fusedAttention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
               const std::optional<at::Tensor>& attnBias, double dropoutP, bool isCausal,
               bool returnDebugMask, std::optional<double> scale) {
  TORCH_CHECK(dropoutP == 0.0, "openreg's fused attention does not support dropout");
  at::AutoDispatchBelowADInplaceOrView belowAutograd;  // one autograd node for the whole op
  at::Tensor bias = attnBias.has_value() ? *attnBias : at::Tensor();
  at::Tensor s = scores(query, key, bias, isCausal, scaleOf(query, scale));
  at::Tensor logsumexp = s.logsumexp(-1);
  at::Tensor output = inLayoutOf(at::matmul((s - logsumexp.unsqueeze(-1)).exp_(), value), query);
  // The other results as PyTorch's meta function has them: no sequence
  // offsets or debug mask, the sequence lengths, 0-dim RNG seed and offset.
  at::Tensor none = at::empty({0}, query.options());
  at::Tensor noRng = at::empty({}, query.options().dtype(at::kLong));
  return {output, logsumexp, none, none, query.sym_size(-2), key.sym_size(-2), noRng, noRng, none};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fusedAttentionBackward(
    const at::Tensor& gradOut, const at::Tensor& query, const at::Tensor& key,
    const at::Tensor& value, const at::Tensor& attnBias, std::array<bool, 4> gradInputMask,
    const at::Tensor& out, const at::Tensor& logsumexp, const at::Tensor& cumSeqQ,
    const at::Tensor& cumSeqK, int64_t maxQ, int64_t maxK, double dropoutP, bool isCausal,
    const at::Tensor& philoxSeed, const at::Tensor& philoxOffset, std::optional<double> scale) {
  at::AutoDispatchBelowADInplaceOrView belowAutograd;
  double s = scaleOf(query, scale);
  at::Tensor p = (scores(query, key, attnBias, isCausal, s) - logsumexp.unsqueeze(-1)).exp_();
  at::Tensor gradValue = at::matmul(p.transpose(-2, -1), gradOut);
  at::Tensor gradP = at::matmul(gradOut, value.transpose(-2, -1));
  at::Tensor rowDot = (gradOut * out).sum(-1, /*keepdim=*/true);
  at::Tensor gradScores = p * (gradP - rowDot);  // softmax backward
  at::Tensor gradQuery = at::matmul(gradScores, key).mul_(s);
  at::Tensor gradKey = at::matmul(gradScores.transpose(-2, -1), query).mul_(s);
  at::Tensor gradBias;
  if (gradInputMask[3] && attnBias.defined()) {
    gradBias = gradScores.sum_to_size(attnBias.sizes());
  }
  return {inLayoutOf(gradQuery, query), inLayoutOf(gradKey, key), inLayoutOf(gradValue, value), gradBias};
}

}  // namespace torch_openreg::native
