// KernelThreads.h - speed layer: how many threads the CPU code of one openreg kernel may
// use on its stream's worker (Note [The threads of a kernel]).
#pragma once

#include <ATen/ThreadLocalState.h>
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <tuple>

namespace torch_openreg {

// Operands (bytes of all the CPU views a kernel builds) from which a kernel
// may split its work across PyTorch's intra-op thread team.
constexpr size_t kParallelKernelBytes = size_t{256} << 10;

// While one is alive on a thread, PyTorch's CPU code on that thread runs on
// that thread alone; on a host thread that runs queued work (not on a
// stream's worker), only until the kernel's operands reach
// kParallelKernelBytes (countKernelOperand). The fast launch (FastLaunch.h)
// holds one around every kernel body.
class KernelThreadsScope {
 public:
  explicit KernelThreadsScope(bool onWorker);
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

// The thread-local state of a thread that has never run PyTorch code, which
// a kernel run by a waiting host thread runs in (Note [Who runs a fast kernel]).
const at::ThreadLocalState& freshThreadState();

// Tests only: queues a kernel over operand, lets the host run it
// (synchronize) or leaves it to the worker (polls until the stream is idle),
// and returns how many threads its CPU code could use, how many PyTorch
// would use outside the kernel, and whether the worker ran it.
std::tuple<int, int, bool> kernelThreadsForTesting(const at::Tensor& operand, bool synchronize);

}  // namespace torch_openreg
