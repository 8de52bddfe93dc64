// Generator.h - random number generators of openreg devices: one default
// generator per device, and new ones for torch.Generator("openreg:N").
#pragma once

#include <ATen/core/Generator.h>

namespace torch_openreg {

const at::Generator& defaultGenerator(c10::DeviceIndex device);
at::Generator newGenerator(c10::DeviceIndex device);

// Draws, at launch and in program order, the seed of one random kernel's
// private CPU generator from gen (or device's default generator). See Note
// [Random numbers on openreg streams] in aten/kernels/Random.cpp.
uint64_t drawKernelSeed(const std::optional<at::Generator>& gen, c10::DeviceIndex device);

}  // namespace torch_openreg
