// Executor.h - the generic device executor: runs any ATen operator that has
// a CPU kernel on openreg tensors, in place, as a kernel on the current
// openreg stream. See Note [The device executor] in Executor.cpp.
//
// It is what the global fallback (Fallback.cpp) tries first; the classic
// copy-to-the-CPU fallback is used only for what it declines.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <cstdint>
#include <map>
#include <string>

namespace torch_openreg {

// Runs op on the device and leaves its results on the stack. Returns false,
// with the stack untouched, for the operators it cannot run.
bool runOnDevice(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// OPENREG_DEVICE_EXECUTOR=0 (or setExecutorEnabled(false)) sends every
// operator without a kernel to the classic CPU fallback: a debugging switch
// for telling an executor problem from an operator problem.
bool executorEnabled();
void setExecutorEnabled(bool enabled);

// Calls per operator that the executor ran without waiting ("async") and
// that had to wait for their results ("sync": data-dependent shapes,
// non-tensor results, first calls with new dtypes).
struct ExecutorCounts {
  int64_t async = 0;
  int64_t sync = 0;
};
std::map<std::string, ExecutorCounts> executorCounts();
void resetExecutorCounts();

// Operators whose Meta kernel promised other results than their CPU kernel
// produced (Note [A Meta kernel that disagrees with the CPU]): the count of
// such calls and the first difference, in words.
struct MetaDisagreement {
  int64_t count = 0;
  std::string first;
};
std::map<std::string, MetaDisagreement> metaDisagreements();

}  // namespace torch_openreg
