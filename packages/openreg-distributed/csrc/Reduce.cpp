// Reduce.cpp - the reduce ops of Reduce.h over CPU views, with ATen's CPU
// kernels (vectorised, exact for integers). Not here: any dtype dispatch
// of our own.
#include "Reduce.h"

#include <ATen/ATen.h>

namespace occl {

std::string reduceOpName(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

void checkReduceOp(const c10d::ReduceOp& op, c10::ScalarType dtype, const char* collective) {
  bool floating = c10::isFloatingType(dtype) || c10::isComplexType(dtype);
  bool integral = c10::isIntegralType(dtype, /*includeBool=*/true);
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::PRODUCT:
      return;
    case c10d::ReduceOp::AVG:
    case c10d::ReduceOp::PREMUL_SUM:
      TORCH_CHECK(floating, "occl: ", collective, " with ReduceOp.", reduceOpName(op), " needs a floating-point ",
                  "or complex tensor, got ", dtype, "; reduce with SUM and divide yourself");
      return;
    case c10d::ReduceOp::MIN:
    case c10d::ReduceOp::MAX:
      TORCH_CHECK(!c10::isComplexType(dtype), "occl: ", collective, " with ReduceOp.", reduceOpName(op),
                  " is not defined for complex tensors (", dtype, "); reduce the real and imaginary parts");
      return;
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      TORCH_CHECK(integral, "occl: ", collective, " with ReduceOp.", reduceOpName(op),
                  " needs an integer or bool tensor, got ", dtype);
      return;
    default:
      TORCH_CHECK(false, "occl: ", collective, " does not support ReduceOp ", reduceOpName(op));
  }
}

namespace {

// out = a op b, elementwise (out may be a or b).
void combine(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const c10d::ReduceOp& op) {
  at::Tensor& result = const_cast<at::Tensor&>(out);
  bool isBool = out.scalar_type() == at::kBool;
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::AVG:
    case c10d::ReduceOp::PREMUL_SUM:
      isBool ? at::logical_or_out(result, a, b) : at::add_out(result, a, b);
      return;
    case c10d::ReduceOp::PRODUCT:
      isBool ? at::logical_and_out(result, a, b) : at::mul_out(result, a, b);
      return;
    case c10d::ReduceOp::MIN: at::minimum_out(result, a, b); return;
    case c10d::ReduceOp::MAX: at::maximum_out(result, a, b); return;
    case c10d::ReduceOp::BAND: at::bitwise_and_out(result, a, b); return;
    case c10d::ReduceOp::BOR: at::bitwise_or_out(result, a, b); return;
    case c10d::ReduceOp::BXOR: at::bitwise_xor_out(result, a, b); return;
    default: TORCH_CHECK(false, "occl: unsupported ReduceOp ", reduceOpName(op));
  }
}

}  // namespace

// LITERALINCLUDE START: OCCL_REDUCE
void reduceInto(const at::Tensor& out, const std::vector<at::Tensor>& parts, const c10d::ReduceOp& op,
                const at::Tensor& factor) {
  // One pass over the first two parts, then one more per further part.
  if (parts.size() == 1) {
    out.copy_(parts[0]);
  } else {
    combine(out, parts[0], parts[1], op);
  }
  for (size_t r = 2; r < parts.size(); ++r) combine(out, out, parts[r], op);
  if (op.op_ == c10d::ReduceOp::AVG) out.div_(static_cast<int64_t>(parts.size()));
  if (op.op_ == c10d::ReduceOp::PREMUL_SUM) out.mul_(factor);
}
// LITERALINCLUDE END: OCCL_REDUCE

}  // namespace occl
