// Fallback.h - the global CPU fallback's controls and counters, for
// torch.openreg.fallback_counts() and friends.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace torch_openreg {

enum class FallbackMode { Warn, Silent, Error };

// Calls per operator ("aten::sin", "aten::add.Tensor") that took the fallback.
std::map<std::string, int64_t> fallbackCounts();
void resetFallbackCounts();
FallbackMode fallbackMode();
void setFallbackMode(FallbackMode mode);
// "warn", "silent", "error" (OPENREG_FALLBACK, torch.openreg.set_fallback_mode).
std::optional<FallbackMode> parseFallbackMode(const std::string& name);
const char* fallbackModeName(FallbackMode mode);

// The CPU fallback as a boxed kernel, for an operator sent to the CPU on
// purpose: m.impl(name, torch::CppFunction::makeFromBoxedFunction<&cpuFallbackKernel>()).
// It checks devices, counts and obeys the fallback mode as the global
// fallback does (see PerOperatorFallback.cpp).
void cpuFallbackKernel(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace torch_openreg
