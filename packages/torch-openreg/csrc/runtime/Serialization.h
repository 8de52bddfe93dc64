// Serialization.h - backend metadata that openreg keeps per tensor and that
// torch.save/torch.load carry along.
#pragma once

#include <ATen/core/Tensor.h>

namespace torch_openreg {

// A device-specific layout tag, standing in for what a real accelerator keeps
// beside a tensor (e.g. a tiled storage format). Absent means untagged.
void setLayoutTag(const at::Tensor& tensor, bool tiled);
bool layoutTag(const at::Tensor& tensor);

}  // namespace torch_openreg
