// fast/IpcAllreduce.h - a speed layer over occl's plain allreduce (pack into
// the mailbox, exchange, every rank reduces the whole tensor): on the IPC
// transport, a large allreduce works on the ranks' tensors where they lie:
// each rank reduces one chunk and writes the result into every rank's
// tensor, all ranks at once. Measured by tools/bench/distributed.py (64 MiB,
// 2 ranks): see docs/modules/distributed-transports.md. Off with OPENREG_FAST_PATHS=0,
// which leaves the plain path only.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <optional>
#include <string>

#include "../Backend.h"
#include "../SpeedLayer.h"

namespace occl::fast {

// Below this many bytes the plain path wins (the in-place path meets twice).
constexpr int64_t kInPlaceAllreduceMinBytes = 256 * 1024;

// Host, when the allreduce is queued: the in-place body for tensor, or
// nothing when the layer is off or does not apply (another transport, a
// small tensor, memory the runtime cannot export). The body computes the
// same bits as the plain path: every element is reduced in rank order.
std::optional<CollectiveBody> inPlaceAllreduce(Transport& transport, const at::Tensor& tensor,
                                               const std::string& signature, const c10d::ReduceOp& op,
                                               const at::Tensor& factor);

}  // namespace occl::fast
