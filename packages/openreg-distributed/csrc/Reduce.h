// Reduce.h - the reduce ops of c10d (SUM, AVG, PRODUCT, MIN, MAX, PREMUL_SUM,
// BAND, BOR, BXOR) on host views of device memory, run inside occl's
// kernels. Not here: which bytes are reduced (Collectives.cpp decides).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <vector>

namespace occl {

// On the host, when the collective is queued: refuses an op the dtype does
// not support, saying what to do instead (c10::Error).
void checkReduceOp(const c10d::ReduceOp& op, c10::ScalarType dtype, const char* collective);

// Inside the kernel: out = parts[0] op parts[1] op ... in rank order, so
// every rank computes the same bits. factor is PREMUL_SUM's multiplier (a
// CPU scalar tensor, undefined otherwise); AVG divides by parts.size().
void reduceInto(const at::Tensor& out, const std::vector<at::Tensor>& parts, const c10d::ReduceOp& op,
                const at::Tensor& factor);

// A short, stable description of op for signatures ("SUM", "PREMUL_SUM").
std::string reduceOpName(const c10d::ReduceOp& op);

}  // namespace occl
