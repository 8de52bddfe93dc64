// Generator.cpp - openreg generators reuse the CPU generator's engine
// (mt19937), so random operators can run PyTorch's CPU kernels on device
// memory and a seed gives the same stream of numbers on every machine. Each
// device has its own default generator, so devices are independent.
#include "runtime/Generator.h"

#include <ATen/CPUGeneratorImpl.h>
#include <openreg/openreg.hpp>
#include <torch_openreg/Check.h>

#include <algorithm>
#include <iterator>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "runtime/Device.h"
#include "runtime/Stream.h"

namespace torch_openreg {
namespace {

// LITERALINCLUDE START: GENERATOR_IMPL
class OpenRegGeneratorImpl final : public at::CPUGeneratorImpl {
 public:
  explicit OpenRegGeneratorImpl(c10::DeviceIndex device, uint64_t seed = c10::default_rng_seed_val)
      : at::CPUGeneratorImpl(seed) {
    device_ = c10::Device(c10::DeviceType::PrivateUse1, device);
    key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
  }

  // A device generator's pickle (Generator.__reduce__) carries an offset
  // besides the state, for counter-based engines such as CUDA's Philox.
  // The mt19937 engine has none: its whole position is in get_state(),
  // which the pickle also carries. So the offset is always 0, and only 0 is
  // accepted back.
  uint64_t get_offset() const override { return 0; }
  void set_offset(uint64_t offset) override {
    TORCH_CHECK(offset == 0, "openreg generators use the CPU's mt19937 engine, which has no offset (got ",
                offset, "); save and restore the position with get_state() and set_state()");
  }

 private:
  OpenRegGeneratorImpl* clone_impl() const override {
    auto* copy = new OpenRegGeneratorImpl(device_.index());
    copy->set_state(*get_state());  // engine, seed and cached normal samples
    return copy;
  }
};
// LITERALINCLUDE END: GENERATOR_IMPL

}  // namespace

const at::Generator& defaultGenerator(c10::DeviceIndex device) {
  static std::once_flag created;
  static std::vector<at::Generator> generators;
  std::call_once(created, [] {
    for (c10::DeviceIndex d = 0; d < deviceCount(); ++d) {
      generators.push_back(at::make_generator<OpenRegGeneratorImpl>(d));
    }
  });
  if (device == -1) device = currentDevice();
  checkDeviceIndex(device);
  return generators[device];
}

// LITERALINCLUDE START: GRAPH_RANDOMNESS
// Note [Random numbers in graphs]
// A graph replays the work it captured, so a random kernel whose seed was
// drawn at capture would repeat its numbers at every replay: dropout would
// drop the same elements each step. Inside a capture, a random kernel
// instead records its position among the capture's random kernels, and its
// generator joins the capture's GraphRandomness. Each replay first queues,
// on the replay's stream, the setting of a replay seed per generator, drawn
// from the generator at that moment; when the kernels run (in stream
// order, after that setting) each mixes the replay seed with its position.
// So every replay draws new numbers and advances the generator in program
// order, as CUDA graphs do with their Philox offsets (which CUDA registers
// for the default generator; here every openreg generator is registered).
namespace {

uint64_t draw(at::Generator generator) {  // a handle: copies share the generator
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get<at::CPUGeneratorImpl>()->random64();
}

// splitmix64's finaliser: distinct positions give unrelated seeds.
uint64_t mix(uint64_t seed, uint64_t position) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (position + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The captures under way, by the stream they record.
std::mutex capturesMutex;
std::unordered_map<orStream_t, std::shared_ptr<GraphRandomness>> captures;
std::atomic<int> captureCount{0};  // lets a launch outside any capture skip the lock

std::shared_ptr<GraphRandomness> captureOn(orStream_t stream) {
  if (captureCount.load(std::memory_order_relaxed) == 0) return nullptr;
  std::lock_guard<std::mutex> lock(capturesMutex);
  auto found = captures.find(stream);
  return found == captures.end() ? nullptr : found->second;
}

}  // namespace

uint64_t KernelSeed::value() const {
  return replaySeed_ == nullptr ? fixed_ : mix(replaySeed_->load(std::memory_order_acquire), index_);
}

KernelSeed drawKernelSeed(const std::optional<at::Generator>& gen, c10::DeviceIndex device) {
  at::Generator generator = gen.has_value() && gen->defined() ? *gen : defaultGenerator(device);
  TORCH_CHECK(generator.device().type() == c10::DeviceType::PrivateUse1,
              "expected an openreg generator for a tensor on openreg:", static_cast<int>(device),
              ", got a generator on ", generator.device());
  std::shared_ptr<GraphRandomness> capture = captureOn(nativeStream(currentStream(device)));
  if (capture == nullptr) return KernelSeed(draw(generator));
  auto source = std::find_if(capture->sources_.begin(), capture->sources_.end(),
                             [&](const auto& s) { return s.generator == generator; });
  if (source == capture->sources_.end()) {
    capture->sources_.push_back({generator, std::make_shared<std::atomic<uint64_t>>(0)});
    source = std::prev(capture->sources_.end());
  }
  return KernelSeed(source->replaySeed, capture->kernels_++);
}

void GraphRandomness::queueReplaySeeds(orStream_t stream) {
  for (const Source& source : sources_) {
    uint64_t seed = draw(source.generator);
    OPENREG_CHECK(openreg::launch(stream, "graph_replay_seed",
                                  [target = source.replaySeed, seed] { target->store(seed, std::memory_order_release); }));
  }
}
// LITERALINCLUDE END: GRAPH_RANDOMNESS

std::shared_ptr<GraphRandomness> beginGraphRandomness(orStream_t stream) {
  auto state = std::make_shared<GraphRandomness>();
  std::lock_guard<std::mutex> lock(capturesMutex);
  captures[stream] = state;
  captureCount.fetch_add(1);
  return state;
}

void endGraphRandomness(orStream_t stream) {
  std::lock_guard<std::mutex> lock(capturesMutex);
  if (captures.erase(stream) != 0) captureCount.fetch_sub(1);
}

at::Generator newGenerator(c10::DeviceIndex device) {
  if (device == -1) device = currentDevice();
  checkDeviceIndex(device);
  return at::make_generator<OpenRegGeneratorImpl>(device);
}

}  // namespace torch_openreg
