// Generator.h - random number generators of openreg devices: one default
// generator per device, and new ones for torch.Generator("openreg:N").
#pragma once

#include <ATen/core/Generator.h>

namespace torch_openreg {

const at::Generator& defaultGenerator(c10::DeviceIndex device);
at::Generator newGenerator(c10::DeviceIndex device);

}  // namespace torch_openreg
