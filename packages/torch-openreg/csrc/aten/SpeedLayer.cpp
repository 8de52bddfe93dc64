// SpeedLayer.cpp - the seam's plain defaults (Note [Deletable speed layers]
// in SpeedLayer.h).
#include "aten/SpeedLayer.h"

#include <atomic>

#include "aten/OperatorCall.h"
#include "aten/kernels/Launch.h"
#include "runtime/DeviceAllocator.h"

namespace torch_openreg {
namespace {

std::optional<c10::OperatorHandle> noOutVariant(const c10::FunctionSchema&) { return std::nullopt; }

bool copyResultsInstead(const c10::OperatorHandle&, const std::optional<c10::OperatorHandle>&, const std::string&,
                        c10::ArrayRef<c10::IValue>, const std::vector<c10::IValue>&, c10::DeviceIndex) {
  return false;
}

void computeThenCopy(const char*, c10::ArrayRef<at::Tensor>, c10::IntArrayRef, c10::ArrayRef<at::Tensor> outputs,
                     const std::function<std::vector<at::Tensor>()>& compute) {
  std::vector<at::Tensor> results = compute();
  TORCH_INTERNAL_ASSERT(results.size() == outputs.size(), "one result per output");
  for (size_t i = 0; i < outputs.size(); ++i) storeResult(results[i], outputs[i]);
}

void nothingCached() {}

void noTestingHooks(void*) {}

SpeedLayer layer{&inferOnMeta, &noOutVariant, &copyResultsInstead, &plainLaunch,
                 &computeThenCopy, &nothingCached, &noTestingHooks};
std::atomic<bool> installed{false};

// torch.openreg.empty_cache() (and torch.accelerator's) releases the speed
// layer's caches with the allocator's.
const bool releasedWithTheAllocator = [] {
  alsoOnEmptyCache([] { layer.emptyCache(); });
  return true;
}();

}  // namespace

const SpeedLayer& speedLayer() { return layer; }

void installSpeedLayer(const SpeedLayer& speed) {
  if (speed.inferOnMeta) layer.inferOnMeta = speed.inferOnMeta;
  if (speed.findOutVariant) layer.findOutVariant = speed.findOutVariant;
  if (speed.launchIntoOutputs) layer.launchIntoOutputs = speed.launchIntoOutputs;
  if (speed.launch) layer.launch = speed.launch;
  if (speed.computeInto) layer.computeInto = speed.computeInto;
  if (speed.emptyCache) layer.emptyCache = speed.emptyCache;
  if (speed.addTestingHooks) layer.addTestingHooks = speed.addTestingHooks;
  installed.store(true);
}

bool fastPathsEnabled() { return installed.load(std::memory_order_relaxed); }

}  // namespace torch_openreg
