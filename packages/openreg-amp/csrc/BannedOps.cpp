// BannedOps.cpp - operators that autocast refuses on openreg, as on CUDA:
// binary_cross_entropy, whose float16 input is unsafe. Not here: the
// operators autocast casts (CastPolicy.cpp).
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <optional>

namespace {

// LITERALINCLUDE START: BANNED_KERNEL
// Registered on AutocastPrivateUse1 only, so it runs only inside an enabled
// torch.autocast("openreg") region; outside one, or under
// autocast(enabled=False), the key is off and binary_cross_entropy runs.
// The message is CUDA's, so users find the same advice.
at::Tensor binaryCrossEntropyBanned(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                    int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
              "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
              "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
              "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
              "safe to autocast.");
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  m.impl("binary_cross_entropy", TORCH_FN(binaryCrossEntropyBanned));
}
// LITERALINCLUDE END: BANNED_KERNEL

}  // namespace
