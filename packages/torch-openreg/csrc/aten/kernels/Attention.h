// Attention.h - scaled_dot_product_attention's "overrideable" fused path for
// openreg: the backend choice, the fused forward and its backward.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>

#include <array>
#include <tuple>

namespace torch_openreg::native {

int64_t sdpChoice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                  const std::optional<at::Tensor>& attnMask, double dropoutP, bool isCausal,
                  std::optional<double> scale, bool enableGqa);

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor,
           at::Tensor, at::Tensor>
fusedAttention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
               const std::optional<at::Tensor>& attnBias, double dropoutP, bool isCausal,
               bool returnDebugMask, std::optional<double> scale);

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fusedAttentionBackward(
    const at::Tensor& gradOut, const at::Tensor& query, const at::Tensor& key,
    const at::Tensor& value, const at::Tensor& attnBias, std::array<bool, 4> gradInputMask,
    const at::Tensor& out, const at::Tensor& logsumexp, const at::Tensor& cumSeqQ,
    const at::Tensor& cumSeqK, int64_t maxQ, int64_t maxK, double dropoutP, bool isCausal,
    const at::Tensor& philoxSeed, const at::Tensor& philoxOffset, std::optional<double> scale);

}  // namespace torch_openreg::native
