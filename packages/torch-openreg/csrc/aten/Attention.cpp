// Attention.cpp - registers scaled_dot_product_attention's "overrideable"
// path for openreg: _fused_sdp_choice picks it, and the fused operator and
// its backward implement it. PyTorch's math path remains for the rest.
#include <ATen/native/transformers/attention.h>
#include <torch/library.h>

#include "aten/kernels/Attention.h"

// scaled_dot_product_attention asks the device's _fused_sdp_choice_stub, not
// the _fused_sdp_choice operator (which torch._fused_sdp_choice calls): the
// choice is registered both ways, or the fused path is never taken.
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_openreg::native::sdpChoice)
}  // namespace at::native

namespace torch_openreg {

// LITERALINCLUDE START: SDPA_REGISTRATION
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", TORCH_FN(native::sdpChoice));
  m.impl("_scaled_dot_product_fused_attention_overrideable", TORCH_FN(native::fusedAttention));
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward",
         TORCH_FN(native::fusedAttentionBackward));
}
// LITERALINCLUDE END: SDPA_REGISTRATION

}  // namespace torch_openreg
