// Random.cpp - random fills run PyTorch's CPU kernels inside an openreg
// kernel, each with a private CPU generator.
//
// LITERALINCLUDE START: RANDOM_STREAMS_NOTE
// Note [Random numbers on openreg streams]
// Kernels run later and possibly on several streams at once, so they must
// not share a generator. At launch, in program order, each random kernel
// draws one 64-bit seed from the openreg generator (under its lock); the
// kernel seeds a private CPU generator with it. The same seed and the same
// sequence of random operators therefore give the same numbers, whatever
// the streams' timing, and each device's default generator is independent.
// (CUDA reaches the same goal by reserving Philox offsets at launch.)
// LITERALINCLUDE END: RANDOM_STREAMS_NOTE
#include "aten/kernels/Random.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/ones_like.h>

#include <torch_openreg/Kernel.h>

#include "aten/kernels/Launch.h"
#include "runtime/Generator.h"
#include "runtime/TimingOnlyMemory.h"

namespace torch_openreg::native {
namespace {

// LITERALINCLUDE START: RANDOM_KERNEL
template <typename Fill>
at::Tensor& randomFill(const char* name, at::Tensor& self, const std::optional<at::Generator>& gen,
                       Fill fill) {
  KernelSeed seed = drawKernelSeed(gen, self.device().index());
  WritesWithoutReading fills(self);  // Note [Memory timing-only mode never computed]
  launchKernel(name, {self}, [seed, fill](std::vector<at::Tensor>& views) {
    at::Generator kernelGenerator = at::detail::createCPUGenerator(seed.value());
    fill(views[0], kernelGenerator);
  });
  return self;
}
// LITERALINCLUDE END: RANDOM_KERNEL

}  // namespace

at::Tensor& normal(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  return randomFill("normal_", self, gen,
                    [=](at::Tensor& t, at::Generator& g) { t.normal_(mean, std, g); });
}

at::Tensor& uniform(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  return randomFill("uniform_", self, gen,
                    [=](at::Tensor& t, at::Generator& g) { t.uniform_(from, to, g); });
}

at::Tensor& random(at::Tensor& self, std::optional<at::Generator> gen) {
  return randomFill("random_", self, gen, [](at::Tensor& t, at::Generator& g) { t.random_(g); });
}

at::Tensor& randomTo(at::Tensor& self, int64_t to, std::optional<at::Generator> gen) {
  return randomFill("random_", self, gen, [=](at::Tensor& t, at::Generator& g) { t.random_(to, g); });
}

at::Tensor& randomFrom(at::Tensor& self, int64_t from, std::optional<int64_t> to,
                       std::optional<at::Generator> gen) {
  return randomFill("random_", self, gen,
                    [=](at::Tensor& t, at::Generator& g) { t.random_(from, to, g); });
}

at::Tensor& bernoulli(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  return randomFill("bernoulli_", self, gen,
                    [=](at::Tensor& t, at::Generator& g) { t.bernoulli_(p, g); });
}

std::tuple<at::Tensor, at::Tensor> nativeDropout(const at::Tensor& input, double p,
                                                 std::optional<bool> train) {
  if (input.numel() == 0 || !train.value_or(true) || p == 0) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  at::Tensor mask = at::empty_like(input, input.options().dtype(at::kBool));
  bernoulli(mask, 1 - p, std::nullopt);
  at::Tensor output = p == 1 ? input.mul(0) : input.mul(mask).mul_(1 / (1 - p));
  return {output, mask};
}

}  // namespace torch_openreg::native
