// PerOperatorFallback.cpp - registration scenario "per-operator fallback":
// aten::histc is sent to the CPU on purpose, whatever the global fallback
// in Fallback.cpp (the device executor first) does. It reuses that file's CPU path (device check,
// counting in torch.openreg.fallback_counts(), OPENREG_FALLBACK modes).
#include <torch/library.h>

#include "aten/Fallback.h"

namespace torch_openreg {

// LITERALINCLUDE START: PER_OPERATOR_FALLBACK
// A vendor pins an operator to the CPU this way while its device kernel is
// missing or under suspicion; here histc stands in for such an operator.
// Registering it explicitly keeps it on the CPU whatever the global
// fallback does, and it is still counted and obeys the fallback modes.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("histc", torch::CppFunction::makeFromBoxedFunction<&cpuFallbackKernel>());
  m.impl("histc.out", torch::CppFunction::makeFromBoxedFunction<&cpuFallbackKernel>());
}
// LITERALINCLUDE END: PER_OPERATOR_FALLBACK

}  // namespace torch_openreg
