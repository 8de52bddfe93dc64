// FastPaths.cpp - reads OPENREG_FAST_PATHS once (see FastPaths.h).
#include "fast/FastPaths.h"

#include <c10/util/env.h>

namespace torch_openreg {

bool fastPathsEnabled() {
  // Read once: kernels registered at load time and kernels launched later
  // must agree on the mode.
  static const bool enabled = c10::utils::get_env("OPENREG_FAST_PATHS") != "0";
  return enabled;
}

}  // namespace torch_openreg
