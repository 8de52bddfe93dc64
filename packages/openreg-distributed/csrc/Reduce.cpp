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

void combine(const at::Tensor& acc, const at::Tensor& next, const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::AVG:
    case c10d::ReduceOp::PREMUL_SUM:
      if (acc.scalar_type() == at::kBool) {
        acc.logical_or_(next);
      } else {
        acc.add_(next);
      }
      return;
    case c10d::ReduceOp::PRODUCT:
      if (acc.scalar_type() == at::kBool) {
        acc.logical_and_(next);
      } else {
        acc.mul_(next);
      }
      return;
    case c10d::ReduceOp::MIN: at::minimum_out(const_cast<at::Tensor&>(acc), acc, next); return;
    case c10d::ReduceOp::MAX: at::maximum_out(const_cast<at::Tensor&>(acc), acc, next); return;
    case c10d::ReduceOp::BAND: acc.bitwise_and_(next); return;
    case c10d::ReduceOp::BOR: acc.bitwise_or_(next); return;
    case c10d::ReduceOp::BXOR: acc.bitwise_xor_(next); return;
    default: TORCH_CHECK(false, "occl: unsupported ReduceOp ", reduceOpName(op));
  }
}

}  // namespace

// LITERALINCLUDE START: OCCL_REDUCE
void reduceInto(const at::Tensor& out, const std::vector<at::Tensor>& parts, const c10d::ReduceOp& op,
                const at::Tensor& factor) {
  // parts[0] may be out itself (an in-place allreduce reads its own input).
  if (!parts[0].is_same(out)) out.copy_(parts[0]);
  for (size_t r = 1; r < parts.size(); ++r) combine(out, parts[r], op);
  if (op.op_ == c10d::ReduceOp::AVG) out.div_(static_cast<int64_t>(parts.size()));
  if (op.op_ == c10d::ReduceOp::PREMUL_SUM) out.mul_(factor);
}
// LITERALINCLUDE END: OCCL_REDUCE

}  // namespace occl
