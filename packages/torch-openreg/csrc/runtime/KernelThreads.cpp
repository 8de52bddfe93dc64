// KernelThreads.cpp - see Note [The threads of a kernel].
#include "runtime/KernelThreads.h"

#include <ATen/Parallel.h>
#include <omp.h>

// MKL's per-thread thread count (0: back to MKL's global setting), by the
// name its C interface has (mkl_service.h makes mkl_set_num_threads_local
// a macro for it; the lower-case symbol is the Fortran entry point, which
// takes a pointer). MKL is linked into libtorch_cpu, which exports it.
extern "C" int MKL_Set_Num_Threads_Local(int threads);

namespace torch_openreg {
namespace {

// LITERALINCLUDE START: KERNEL_THREADS
// Note [The threads of a kernel]
// A kernel's CPU code may split its work across PyTorch's intra-op thread
// team (OpenMP and MKL), as it does on the CPU. After each parallel region
// the team's threads poll for the next one for about a millisecond before
// they sleep. On the CPU they poll on cores the program is not using; here
// the host thread is running the program's Python on one of them, so in a
// loop of small operators the polling takes the host's core: a small
// Transformer's training step took 1.7 times the CPU's time. So a kernel
// runs on its worker alone, and splits its work only once its operands (the
// CPU views it builds, cpuView) reach kParallelKernelBytes, where each
// parallel region does enough work to pay for the polling that follows it.
struct KernelThreads {
  bool inKernel = false;
  bool parallel = false;
  size_t operandBytes = 0;
  int teamThreads = 1;  // what PyTorch would use outside a kernel
};
thread_local KernelThreads kernelThreads;
// LITERALINCLUDE END: KERNEL_THREADS

void useThreads(int threads) {
  omp_set_num_threads(threads);
  MKL_Set_Num_Threads_Local(threads == kernelThreads.teamThreads ? 0 : threads);
}

}  // namespace

KernelThreadsScope::KernelThreadsScope() : outermost_(!kernelThreads.inKernel) {
  if (!outermost_) return;
  KernelThreads& state = kernelThreads;
  at::internal::lazy_init_num_threads();  // before we change what it would set
  state.teamThreads = at::get_num_threads();
  state.inKernel = true;
  state.parallel = false;
  state.operandBytes = 0;
  if (state.teamThreads > 1) useThreads(1);
}

KernelThreadsScope::~KernelThreadsScope() {
  if (!outermost_) return;
  KernelThreads& state = kernelThreads;
  if (!state.parallel && state.teamThreads > 1) useThreads(state.teamThreads);
  state.inKernel = false;
}

void countKernelOperand(size_t bytes) {
  KernelThreads& state = kernelThreads;
  if (!state.inKernel || state.parallel) return;
  state.operandBytes += bytes;
  if (state.operandBytes < kParallelKernelBytes) return;
  state.parallel = true;
  if (state.teamThreads > 1) useThreads(state.teamThreads);
}

int kernelTeamThreads() { return kernelThreads.teamThreads; }

}  // namespace torch_openreg
