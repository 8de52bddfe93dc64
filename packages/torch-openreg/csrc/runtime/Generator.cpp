// Generator.cpp - openreg generators reuse the CPU generator's engine
// (mt19937), so random operators can run PyTorch's CPU kernels on device
// memory and a seed gives the same stream of numbers on every machine. Each
// device has its own default generator, so devices are independent.
#include "runtime/Generator.h"

#include <ATen/CPUGeneratorImpl.h>

#include <mutex>
#include <vector>

#include "runtime/Device.h"

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

uint64_t drawKernelSeed(const std::optional<at::Generator>& gen, c10::DeviceIndex device) {
  at::Generator generator = gen.has_value() && gen->defined() ? *gen : defaultGenerator(device);
  TORCH_CHECK(generator.device().type() == c10::DeviceType::PrivateUse1,
              "expected an openreg generator for a tensor on openreg:", static_cast<int>(device),
              ", got a generator on ", generator.device());
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get<at::CPUGeneratorImpl>()->random64();
}

at::Generator newGenerator(c10::DeviceIndex device) {
  if (device == -1) device = currentDevice();
  checkDeviceIndex(device);
  return at::make_generator<OpenRegGeneratorImpl>(device);
}

}  // namespace torch_openreg
