// Generator.h - random number generators of openreg devices: one default
// generator per device, and new ones for torch.Generator("openreg:N").
#pragma once

#include <ATen/core/Generator.h>
#include <openreg/openreg.h>

#include <atomic>
#include <memory>
#include <vector>

namespace torch_openreg {

const at::Generator& defaultGenerator(c10::DeviceIndex device);
at::Generator newGenerator(c10::DeviceIndex device);

// The seed of one random kernel's private CPU generator. Drawn at launch,
// in program order (Note [Random numbers on openreg streams] in
// aten/kernels/Random.cpp); inside a graph capture, drawn again by every
// replay (Note [Random numbers in graphs]).
class KernelSeed {
 public:
  explicit KernelSeed(uint64_t fixed) : fixed_(fixed) {}
  KernelSeed(std::shared_ptr<const std::atomic<uint64_t>> replaySeed, uint64_t index)
      : replaySeed_(std::move(replaySeed)), index_(index) {}
  // Kernel only: the seed for this run of the kernel.
  uint64_t value() const;

 private:
  uint64_t fixed_ = 0;
  std::shared_ptr<const std::atomic<uint64_t>> replaySeed_;  // set: the replay's seed
  uint64_t index_ = 0;  // the kernel's position among its capture's random kernels
};

// Draws the seed of one random kernel from gen (or device's default
// generator), at launch.
KernelSeed drawKernelSeed(const std::optional<at::Generator>& gen, c10::DeviceIndex device);

// The random state of one graph capture: each generator its random kernels
// used, with the seed the replay now running gives them.
class GraphRandomness {
 public:
  // Graph.cpp, on the host at each replay, before the graph's work: queues
  // on stream, in order, the setting of every generator's replay seed to a
  // value drawn from the generator now.
  void queueReplaySeeds(orStream_t stream);

 private:
  friend KernelSeed drawKernelSeed(const std::optional<at::Generator>&, c10::DeviceIndex);
  struct Source {
    at::Generator generator;
    std::shared_ptr<std::atomic<uint64_t>> replaySeed;
  };
  std::vector<Source> sources_;
  uint64_t kernels_ = 0;
};

// Graph.cpp: random kernels queued on stream from now until the capture
// ends draw their seeds from the returned state (kept by the graph).
std::shared_ptr<GraphRandomness> beginGraphRandomness(orStream_t stream);
void endGraphRandomness(orStream_t stream);

}  // namespace torch_openreg
