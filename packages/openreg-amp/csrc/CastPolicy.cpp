// CastPolicy.cpp - CUDA's autocast cast policy, installed for openreg: every
// operator of PyTorch's shared lists in ATen/autocast_mode.h, registered on
// the AutocastPrivateUse1 key. Not here: the fallthrough that lets every other
// operator pass the key and the dtypes autocast accepts (torch-openreg owns
// them), and the banned operators (BannedOps.cpp).
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace {

// The lists below name their C++ types unqualified, as ATen's own
// registration file (inside namespace at) can.
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

// LITERALINCLUDE START: CAST_POLICY
// Each AT_FORALL_* list calls its argument once per operator, with (op) or
// (op, overload); these adapters append the policy and register the
// operator's autocast wrapper for PrivateUse1 (KERNEL_PRIVATEUSEONE expands
// to m.impl("aten::op[.overload]", WrapFunction<policy, PrivateUse1, ...>)).
#define OPENREG_AMP_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define OPENREG_AMP_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define OPENREG_AMP_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define OPENREG_AMP_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  // Matrix products, convolutions, RNN cells, attention: run in the autocast
  // dtype (float16 by default, bfloat16 on request).
  AT_FORALL_LOWER_PRECISION_FP(OPENREG_AMP_LOWER_PRECISION_FP)
  // Operators whose range or accumulation needs float32: inputs cast up.
  AT_FORALL_FP32(OPENREG_AMP_FP32)
  // Reductions that take an optional dtype: run with dtype=float32.
  AT_FORALL_FP32_SET_OPT_DTYPE(OPENREG_AMP_FP32_SET_OPT_DTYPE)
  // norm's overloads without a dtype argument redispatch to the ones with one.
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  // Operators of several inputs: all cast to the widest floating input's type.
  AT_FORALL_PROMOTE(OPENREG_AMP_PROMOTE)
}
// LITERALINCLUDE END: CAST_POLICY

}  // namespace
