// Attention.cpp - scaled dot-product attention as one fused operator on
// openreg, forward and backward, each pass one kernel whose body computes
// with ATen's CPU operators. The forward keeps only the log-sum-exp of each
// row; the backward recomputes the probabilities from it, as fused GPU
// kernels do, so the attention matrix is never stored between the passes.
#include "aten/kernels/Attention.h"

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/repeat_interleave.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/DeviceGuard.h>
#include <torch_openreg/Kernel.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "aten/kernels/SameDevice.h"

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

// An empty device tensor of sizes in the layout PyTorch's meta functions
// give this operator's results: like's order of dimensions by stride
// (alloc_with_matching_layout, empty_like in torch/_meta_registrations.py).
// torch.compile plans memory with those layouts, so the device must agree.
at::Tensor emptyInLayoutOf(at::IntArrayRef sizes, const at::Tensor& like) {
  std::vector<int64_t> order(like.dim());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return like.stride(a) > like.stride(b); });
  std::vector<int64_t> strides(like.dim());
  int64_t stride = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    strides[*it] = stride;
    stride *= sizes[*it];
  }
  return at::empty_strided(sizes, strides, like.options());
}

// LITERALINCLUDE START: GROUPED_QUERY_HEADS
// Grouped-query attention (enable_gqa): key and value have fewer heads than
// the query, each serving a group of query heads, as CUDA's flash attention
// takes them without copies. Inside a kernel body: each key or value head
// repeated for its group, and a gradient for the repeated heads summed back
// onto the head it came from.
at::Tensor forEachQueryHead(const at::Tensor& keyOrValue, int64_t queryHeads) {
  int64_t groups = queryHeads / keyOrValue.size(1);
  return groups == 1 ? keyOrValue : keyOrValue.repeat_interleave(groups, 1);
}

at::Tensor backToItsHeads(const at::Tensor& grad, int64_t heads) {
  int64_t groups = grad.size(1) / heads;
  if (groups == 1) return grad;
  std::vector<int64_t> grouped{grad.size(0), heads, groups, grad.size(2), grad.size(3)};
  return grad.reshape(grouped).sum(2);
}
// LITERALINCLUDE END: GROUPED_QUERY_HEADS

}  // namespace

// Fused path for what it supports (4-d inputs, query heads a multiple of
// the key's and value's, the same only without enable_gqa, no dropout, a
// floating or no mask); the math path of PyTorch otherwise.
int64_t sdpChoice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                  const std::optional<at::Tensor>& attnMask, double dropoutP, bool isCausal,
                  std::optional<double> scale, bool enableGqa) {
  bool maskOk = !attnMask.has_value() || !attnMask->defined() ||
                at::isFloatingType(attnMask->scalar_type());
  bool shapesOk = query.dim() == 4 && key.dim() == 4 && value.dim() == 4 && key.size(1) == value.size(1) &&
                  key.size(1) > 0 && query.size(1) % key.size(1) == 0 &&
                  (enableGqa || query.size(1) == key.size(1));
  bool fused = at::globalContext().userEnabledOverrideableSDP() && dropoutP == 0.0 && maskOk &&
               shapesOk && !(isCausal && maskOk && attnMask.has_value() && attnMask->defined());
  return fused ? kOverrideable : kMath;
}

// Each pass is one kernel, as a GPU's fused attention is: the scores live
// only inside it (in host memory while the simulator's kernel runs), never
// in device memory, and a trace shows one attention kernel per pass.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor,
           at::Tensor, at::Tensor>
fusedAttention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
               const std::optional<at::Tensor>& attnBias, double dropoutP, bool isCausal,
               bool returnDebugMask, std::optional<double> scale) {
  TORCH_CHECK(dropoutP == 0.0, "openreg's fused attention does not support dropout");
  checkSameDevice("scaled_dot_product_attention", {{"query", &query}, {"key", &key}, {"value", &value}});
  c10::DeviceGuard guard(query.device());
  std::vector<int64_t> outputSizes = query.sizes().vec();
  outputSizes.back() = value.size(-1);
  at::Tensor output = emptyInLayoutOf(outputSizes, query);
  at::Tensor logsumexp = at::empty(query.sizes().slice(0, query.dim() - 1), query.options());
  std::vector<at::Tensor> operands{output, logsumexp, query, key, value};
  bool hasBias = attnBias.has_value() && attnBias->defined();
  if (hasBias) operands.push_back(*attnBias);
  double s = scaleOf(query, scale);
  int64_t heads = query.size(1);
  launchKernel("scaled_dot_product_fused_attention", operands, [=](std::vector<at::Tensor>& v) {
    at::Tensor scores_ = scores(v[2], forEachQueryHead(v[3], heads), hasBias ? v[5] : at::Tensor(), isCausal, s);
    v[1].copy_(scores_.logsumexp(-1));
    v[0].copy_(at::matmul((scores_ - v[1].unsqueeze(-1)).exp_(), forEachQueryHead(v[4], heads)));
  });
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
  c10::DeviceGuard guard(query.device());
  at::Tensor gradQuery = emptyInLayoutOf(query.sizes(), query);
  at::Tensor gradKey = emptyInLayoutOf(key.sizes(), key);
  at::Tensor gradValue = emptyInLayoutOf(value.sizes(), value);
  bool hasBias = attnBias.defined();
  at::Tensor gradBias = gradInputMask[3] && hasBias ? at::empty(attnBias.sizes(), attnBias.options()) : at::Tensor();
  // Inputs first, then the gradients it writes, then the optional ones.
  enum { kGradOut, kQuery, kKey, kValue, kOut, kLogsumexp, kGradQuery, kGradKey, kGradValue, kFirstOptional };
  std::vector<at::Tensor> operands{gradOut, query, key, value, out, logsumexp, gradQuery, gradKey, gradValue};
  if (hasBias) operands.push_back(attnBias);
  if (gradBias.defined()) operands.push_back(gradBias);
  double s = scaleOf(query, scale);
  bool wantsGradBias = gradBias.defined();
  int64_t heads = query.size(1), keyHeads = key.size(1);
  launchKernel("scaled_dot_product_fused_attention_backward", operands, [=](std::vector<at::Tensor>& v) {
    at::Tensor bias = hasBias ? v[kFirstOptional] : at::Tensor();
    at::Tensor key_ = forEachQueryHead(v[kKey], heads), value_ = forEachQueryHead(v[kValue], heads);
    at::Tensor p = (scores(v[kQuery], key_, bias, isCausal, s) - v[kLogsumexp].unsqueeze(-1)).exp_();
    at::Tensor gradP = at::matmul(v[kGradOut], value_.transpose(-2, -1));
    at::Tensor rowDot = (v[kGradOut] * v[kOut]).sum(-1, /*keepdim=*/true);
    at::Tensor gradScores = p * (gradP - rowDot);  // softmax backward
    v[kGradValue].copy_(backToItsHeads(at::matmul(p.transpose(-2, -1), v[kGradOut]), keyHeads));
    v[kGradQuery].copy_(at::matmul(gradScores, key_).mul_(s));
    v[kGradKey].copy_(backToItsHeads(at::matmul(gradScores.transpose(-2, -1), v[kQuery]).mul_(s), keyHeads));
    if (wantsGradBias) v[kFirstOptional + 1].copy_(gradScores.sum_to_size(bias.sizes()));
  });
  return {gradQuery, gradKey, gradValue, gradBias};
}

}  // namespace torch_openreg::native
