// Fallback.h - the global CPU fallback's controls and counters, for
// torch.openreg.fallback_counts() and friends.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace torch_openreg {

enum class FallbackMode { Warn, Silent, Error };

// Calls per operator ("aten::sin", "aten::add.Tensor") that took the fallback.
std::map<std::string, int64_t> fallbackCounts();
void resetFallbackCounts();
FallbackMode fallbackMode();
void setFallbackMode(FallbackMode mode);

}  // namespace torch_openreg
