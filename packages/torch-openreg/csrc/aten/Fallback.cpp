// Fallback.cpp - registration scenario "fallbacks": the global fallback that
// every operator without an openreg kernel reaches, and the
// AutocastPrivateUse1 fallthrough.
//
// The global fallback first offers the operator to the device executor
// (Executor.cpp), which runs it on the device. Only what the executor
// declines takes the classic CPU fallback (copy inputs to the host, run,
// copy results back): the documented last resort, slow and synchronous, so
// every such call is counted per operator and, by default, the first call of
// each operator warns.
// OPENREG_FALLBACK=warn|silent|error (or torch.openreg.set_fallback_mode)
// chooses what happens; "error" turns a missing kernel into an exception.
#include "aten/Fallback.h"

#include "aten/Executor.h"
#include "aten/OperatorCall.h"
#include "runtime/Device.h"

#include <ATen/native/CPUFallback.h>
#include <c10/util/env.h>
#include <torch/library.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <set>

namespace torch_openreg {
namespace {

FallbackMode modeFromEnvironment() {
  auto value = c10::utils::get_env("OPENREG_FALLBACK");
  if (!value.has_value()) return FallbackMode::Warn;
  std::optional<FallbackMode> mode = parseFallbackMode(*value);
  if (!mode.has_value()) TORCH_WARN("OPENREG_FALLBACK=", *value, " is not one of warn, silent, error; using warn");
  return mode.value_or(FallbackMode::Warn);
}

std::atomic<FallbackMode> mode{modeFromEnvironment()};
std::mutex countsMutex;
std::map<std::string, int64_t> counts;

// The device check that PyTorch generates for the kernels of built-in
// backends, which the fallback would otherwise skip (it moves everything to
// the CPU, so mixing openreg:0, openreg:1 and CPU tensors would "work").
// Every tensor argument must be on one device; CPU tensors are accepted as
// 0-dim scalars only, as TensorIterator does. Lists of optional tensors (the
// indices of index and index_put_) are left to the operator, which accepts
// CPU indices as on CUDA; _foreach_ operators work element by element.
void checkCommonDevice(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  if (op.schema().name().rfind("aten::_foreach_", 0) == 0) return;
  const auto& schema = op.schema().arguments();
  auto arguments = torch::jit::last(stack, schema.size());
  std::optional<c10::Device> common;
  auto visit = [&](const at::Tensor& t, const std::string& argument) {
    if (!t.defined() || (t.device().is_cpu() && t.dim() == 0)) return;
    if (!common.has_value()) {
      common = t.device();
      return;
    }
    c10::Device first = *common, second = t.device();
    if (first == second) return;
    if (first.is_cpu()) std::swap(first, second);
    TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two "
                "devices, ", first, " and ", second, "! (when checking argument ", argument,
                " of ", operatorName(op), ")");
  };
  for (size_t i = 0; i < arguments.size(); ++i) {
    const c10::IValue& value = arguments[i];
    if (value.isTensor()) {
      visit(value.toTensor(), schema[i].name());
    } else if (value.isTensorList()) {
      for (const at::Tensor& t : value.toTensorList()) visit(t, schema[i].name());
    }
  }
}

// LITERALINCLUDE START: CPU_FALLBACK
// Runs op on the CPU, its devices checked by the caller.
void runOnCpuChecked(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  std::string name = operatorName(op);
  FallbackMode current = mode.load();
  TORCH_CHECK_NOT_IMPLEMENTED(current != FallbackMode::Error, "openreg has no kernel for ", name,
                              ", and the CPU fallback is disabled (OPENREG_FALLBACK=error)");
  checkValuesComputed(name + ", which has no openreg kernel and would run on the CPU (the CPU fallback),");
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(countsMutex);
    first = counts[name]++ == 0;
  }
  if (first && current == FallbackMode::Warn) {
    TORCH_WARN("openreg has no kernel for ", name, "; it runs on the CPU (inputs and outputs are "
               "copied through the host). torch.openreg.fallback_counts() lists every such operator.");
  }
  at::native::cpu_fallback(op, stack);
}

// Note [An operator pinned to the CPU in timing-only mode]
// Timing-only mode computes no values, so the CPU has none to compute from
// and none to copy back. An operator pinned to the CPU (histc, which
// Mixtral's router calls) then goes to the device executor, which launches
// a kernel that computes nothing with outputs Meta sized, as the real
// device's own kernel for it would be launched; one Meta cannot size is
// refused there. OPENREG_FALLBACK=error still refuses it here.
void cpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  checkCommonDevice(op, *stack);
  if (timingOnly() && mode.load() != FallbackMode::Error && runOnDevice(op, stack)) return;
  runOnCpuChecked(op, stack);
}

// Every operator without an openreg kernel: on the device if the executor
// can run it, else on the CPU. Its devices are checked once, for both.
void globalFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  checkCommonDevice(op, *stack);
  if (runOnDevice(op, stack)) return;
  runOnCpuChecked(op, stack);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&globalFallback>());
}
// LITERALINCLUDE END: CPU_FALLBACK

// LITERALINCLUDE START: EXECUTOR_REPLACES_COMPOSITES
// Note [Composite kernels the executor replaces]
// A few operators have a CompositeExplicitAutograd kernel written in terms
// of other operators, which PyTorch gives every backend without a kernel of
// its own: native_layer_norm becomes batch_norm and addcmul, native_group_norm
// a chain of reductions, addr an outer product and an add. The CPU (like
// CUDA) has a fused kernel for each, and the decompositions round
// differently and cost several launches. _grouped_mm (a Mixture-of-Experts
// layer's products) is a loop over its groups that copies the offsets to
// the host; CUDA's one kernel reads them on the device, and timing-only mode
// has none to copy. Registered here, these operators run the CPU's kernel
// through the executor instead, as one launch. (Structured operators'
// functional kernels are composite too, but they call the out= kernel.)
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name : {"native_layer_norm", "native_group_norm", "addr", "addr.out", "_grouped_mm"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&globalFallback>());
  }
}
// LITERALINCLUDE END: EXECUTOR_REPLACES_COMPOSITES

// LITERALINCLUDE START: AUTOCAST_FALLTHROUGH
// Operators without an autocast policy (openreg-amp registers the policies)
// pass straight through the AutocastPrivateUse1 key.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}
// LITERALINCLUDE END: AUTOCAST_FALLTHROUGH

}  // namespace

std::map<std::string, int64_t> fallbackCounts() {
  std::lock_guard<std::mutex> lock(countsMutex);
  return counts;
}

void resetFallbackCounts() {
  std::lock_guard<std::mutex> lock(countsMutex);
  counts.clear();
}

FallbackMode fallbackMode() { return mode.load(); }
void setFallbackMode(FallbackMode m) { mode.store(m); }

void cpuFallbackKernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  cpuFallback(op, stack);
}

std::optional<FallbackMode> parseFallbackMode(const std::string& name) {
  if (name == "warn") return FallbackMode::Warn;
  if (name == "silent") return FallbackMode::Silent;
  if (name == "error") return FallbackMode::Error;
  return std::nullopt;
}

const char* fallbackModeName(FallbackMode mode) {
  switch (mode) {
    case FallbackMode::Warn:
      return "warn";
    case FallbackMode::Silent:
      return "silent";
    case FallbackMode::Error:
      return "error";
  }
  return "warn";
}

}  // namespace torch_openreg
