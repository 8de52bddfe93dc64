// Attention.cpp - registers scaled_dot_product_attention's "overrideable"
// path for openreg: _fused_sdp_choice picks it, and the fused operator and
// its backward implement it. PyTorch's math path remains for the rest.
#include <torch/library.h>

#include "aten/native/Attention.h"

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
