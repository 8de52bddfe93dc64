// PerOperatorFallback.cpp - registration scenario "per-operator fallback":
// aten::nonzero is sent to the CPU on purpose, whatever the global fallback
// in Fallback.cpp does. It reuses that file's CPU path (device check,
// counting in torch.openreg.fallback_counts(), OPENREG_FALLBACK modes).
#include <torch/library.h>

#include "aten/Fallback.h"

namespace torch_openreg {

// LITERALINCLUDE START: PER_OPERATOR_FALLBACK
// The size of nonzero's result depends on the data, so the host must wait
// for the input and read it whichever way it runs: the CPU is the simplest
// correct kernel, and registering it explicitly keeps it there even when
// the global fallback changes.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("nonzero", torch::CppFunction::makeFromBoxedFunction<&cpuFallbackKernel>());
  m.impl("nonzero.out", torch::CppFunction::makeFromBoxedFunction<&cpuFallbackKernel>());
}
// LITERALINCLUDE END: PER_OPERATOR_FALLBACK

}  // namespace torch_openreg
