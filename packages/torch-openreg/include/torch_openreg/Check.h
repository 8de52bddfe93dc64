// Check.h - OPENREG_CHECK: turns a failed libopenreg call into a C++
// exception through PyTorch's error machinery (file and line included),
// carrying the runtime's own message. Python sees a RuntimeError. Part of
// the public kernel API (Kernel.h): header-only.
#pragma once

#include <c10/util/Exception.h>
#include <openreg/openreg.h>

// LITERALINCLUDE START: OPENREG_CHECK
#define OPENREG_CHECK(EXPR)                                                   \
  do {                                                                        \
    const orError_t openreg_status_ = (EXPR);                                 \
    TORCH_CHECK(openreg_status_ == orSuccess, "openreg error ",               \
                orGetErrorName(openreg_status_), ": ",                        \
                ::torch_openreg::errorMessage(openreg_status_));              \
  } while (0)
// LITERALINCLUDE END: OPENREG_CHECK

namespace torch_openreg {
// The runtime's message for the failure just seen on this thread.
inline const char* errorMessage(orError_t status) {
  const char* message = orGetLastErrorMessage();
  return *message != '\0' ? message : orGetErrorString(status);
}
}  // namespace torch_openreg
