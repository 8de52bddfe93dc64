// FastPaths.h - the one switch over every speed layer in fast/.
//
// OPENREG_FAST_PATHS=0 (read once, when the extension loads) leaves only the
// plain reference path: the plain executor, the plain launch, the plain
// kernels. Everything in fast/ must leave results unchanged either way; CI
// runs the operator tests in both modes.
#pragma once

namespace torch_openreg {

// Whether the speed layers run (OPENREG_FAST_PATHS is not "0"). Constant for
// the life of the process.
bool fastPathsEnabled();

}  // namespace torch_openreg
