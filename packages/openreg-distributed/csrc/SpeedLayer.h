// SpeedLayer.h - the seam where occl's speed layer (csrc/fast/) plugs into
// the plain collectives.
//
// LITERALINCLUDE START: OCCL_SPEED_LAYER_SEAM
// Note [occl's deletable speed layer]
// The plain path never includes a speed layer's header: a speed layer
// installs itself here when the library loads, and the plain allreduce asks
// the seam. Deleting csrc/fast/, or building with -DOCCL_SPEED_LAYERS=OFF,
// leaves the plain path alone, unchanged (CI builds and tests it so).
// LITERALINCLUDE END: OCCL_SPEED_LAYER_SEAM
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <optional>
#include <string>

#include "Backend.h"

namespace occl {

// Host, when an allreduce is queued: a body that replaces the plain one for
// tensor, or nothing (the layer does not apply). It must compute the same
// bits as the plain body.
using AllreduceSpeedLayer = std::optional<CollectiveBody> (*)(Transport& transport, const at::Tensor& tensor,
                                                               const std::string& signature,
                                                               const c10d::ReduceOp& op, const at::Tensor& factor);

// The installed allreduce speed layer; null on the plain path.
AllreduceSpeedLayer& allreduceSpeedLayer();

// Called by a speed layer's static initialiser.
struct InstallAllreduceSpeedLayer {
  explicit InstallAllreduceSpeedLayer(AllreduceSpeedLayer layer) { allreduceSpeedLayer() = layer; }
};

}  // namespace occl
