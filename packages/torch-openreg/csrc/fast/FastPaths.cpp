// FastPaths.cpp - reads OPENREG_FAST_PATHS once, and installs the speed
// layer's hooks at the plain path's seam (see FastPaths.h).
#include "fast/FastPaths.h"

#include <c10/util/env.h>

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <string>

#include "aten/SpeedLayer.h"
#include "fast/FastLaunch.h"
#include "fast/OutVariant.h"
#include "fast/ResultsInPlace.h"
#include "fast/ScratchAllocator.h"
#include "fast/ShapeCache.h"
#include "fast/TestingHooks.h"

namespace torch_openreg {
namespace {

// One LendingPlan per call site that computes into its outputs. Never
// destroyed: stream workers may still use one while the process exits.
LendingPlan& planNamed(const char* site) {
  // Call sites name themselves with string literals: each thread keeps the
  // last few plans it used by the name's address, so a kernel finds its
  // plan without the lock (a worker runs a convolution's forward and
  // backward in turn).
  thread_local std::array<std::pair<const char*, LendingPlan*>, 4> recent{};
  for (const auto& [name, plan] : recent) {
    if (name == site) return *plan;
  }
  static std::mutex mutex;
  static auto& plans = *new std::map<std::string, LendingPlan>();
  LendingPlan* plan = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex);
    plan = &plans[site];
  }
  std::rotate(recent.rbegin(), recent.rbegin() + 1, recent.rend());  // the oldest goes
  recent[0] = {site, plan};
  return *plan;
}

void computeIntoPlanned(const char* site, c10::ArrayRef<at::Tensor> tensors, c10::IntArrayRef arguments,
                        c10::ArrayRef<at::Tensor> outputs, const std::function<std::vector<at::Tensor>()>& compute) {
  computeInto(planNamed(site), tensors, arguments, outputs, compute);
}

const bool installed = [] {
  if (!speedLayersRequested()) return false;
  installSpeedLayer(SpeedLayer{&fast::cachedInferOnMeta, &fast::findOutVariant, &fast::launchIntoOutputs,
                               &fast::launchErased, &computeIntoPlanned, &emptyScratchCache,
                               &fast::addTestingHooks});
  return true;
}();

}  // namespace

bool speedLayersRequested() {
  // Read once: kernels registered at load time and kernels launched later
  // must agree on the mode.
  static const bool requested = c10::utils::get_env("OPENREG_FAST_PATHS") != "0";
  return requested;
}

}  // namespace torch_openreg
