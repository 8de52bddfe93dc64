// KernelThreads.h - speed layer: how many threads the CPU code of one openreg kernel may
// use on its stream's worker (Note [The threads of a kernel]).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <utility>

namespace torch_openreg {

// Operands (bytes of all the CPU views a kernel builds) from which a kernel
// may split its work across PyTorch's intra-op thread team.
constexpr size_t kParallelKernelBytes = size_t{256} << 10;

// While one is alive on a thread, PyTorch's CPU code on that thread runs on
// that thread alone, until the kernel's operands reach kParallelKernelBytes
// (countKernelOperand). the fast launch (FastLaunch.h) holds one around every kernel body.
class KernelThreadsScope {
 public:
  KernelThreadsScope();
  ~KernelThreadsScope();
  KernelThreadsScope(const KernelThreadsScope&) = delete;
  KernelThreadsScope& operator=(const KernelThreadsScope&) = delete;

 private:
  bool outermost_;  // nested scopes leave the decision to the outer one
};

// Counts bytes of the running kernel's operands (cpuView calls it).
void countKernelOperand(size_t bytes);

// Inside a kernel: the threads PyTorch's CPU code would use outside it.
int kernelTeamThreads();

// Tests only: queues a kernel over operand and returns how many threads its
// CPU code could use, with how many the worker's thread team has.
std::pair<int, int> kernelThreadsForTesting(const at::Tensor& operand);

}  // namespace torch_openreg
