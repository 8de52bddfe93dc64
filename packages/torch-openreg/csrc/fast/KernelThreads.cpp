// KernelThreads.cpp - speed layer: see Note [The threads of a kernel].
// Measured when introduced: a small Transformer's training step in a
// continuous loop took 9.3 ms on openreg against 5.4 ms on the CPU; with
// small kernels kept to their worker, 5.2-6.3 ms against 6.1-6.7 ms.
#include "fast/KernelThreads.h"

#include <ATen/Config.h>
#include <ATen/Parallel.h>
#include <omp.h>
#include <torch_openreg/Kernel.h>

#include <memory>

#if AT_MKL_ENABLED()
// MKL's per-thread thread count; returns the previous one. This is the name
// of its C interface (mkl_service.h makes mkl_set_num_threads_local a macro
// for it; the lower-case symbol is the Fortran entry point, which takes a
// pointer). PyTorch builds with MKL link it into libtorch_cpu, which
// exports it.
extern "C" int MKL_Set_Num_Threads_Local(int threads);
#endif

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
  size_t operandBytes = 0;  // the team is in use once this reaches kParallelKernelBytes
  int teamThreads = 1;      // what PyTorch would use outside a kernel
  int mklThreads = 0;       // MKL's per-thread setting outside a kernel
};
thread_local KernelThreads kernelThreads;
// LITERALINCLUDE END: KERNEL_THREADS

// One thread for the kernel's CPU code, or back to the team outside it.
void keepToThisThread(bool alone) {
  KernelThreads& state = kernelThreads;
  if (state.teamThreads <= 1) return;  // nothing to restrict
  omp_set_num_threads(alone ? 1 : state.teamThreads);
#if AT_MKL_ENABLED()
  int previous = MKL_Set_Num_Threads_Local(alone ? 1 : state.mklThreads);
  if (alone) state.mklThreads = previous;
#endif
}

}  // namespace

KernelThreadsScope::KernelThreadsScope() : outermost_(!kernelThreads.inKernel) {
  if (!outermost_) return;
  KernelThreads& state = kernelThreads;
  at::internal::lazy_init_num_threads();  // before we change what it would set
  state.teamThreads = at::get_num_threads();
  state.inKernel = true;
  state.operandBytes = 0;
  keepToThisThread(true);
}

KernelThreadsScope::~KernelThreadsScope() {
  if (!outermost_) return;
  KernelThreads& state = kernelThreads;
  if (state.operandBytes < kParallelKernelBytes) keepToThisThread(false);
  state.inKernel = false;
}

void countKernelOperand(size_t bytes) {
  KernelThreads& state = kernelThreads;
  if (!state.inKernel || state.operandBytes >= kParallelKernelBytes) return;
  state.operandBytes += bytes;
  if (state.operandBytes >= kParallelKernelBytes) keepToThisThread(false);
}

int kernelTeamThreads() { return kernelThreads.teamThreads; }

std::pair<int, int> kernelThreadsForTesting(const at::Tensor& operand) {
  auto seen = std::make_shared<std::pair<int, int>>();
  launchKernel("kernel_threads_for_testing", {operand}, [seen](std::vector<at::Tensor>&) {
    seen->second = kernelTeamThreads();
    seen->first = at::get_num_threads();
  });
  OPENREG_CHECK(orStreamSynchronize(currentNativeStream(operand.device().index())));
  return *seen;
}

}  // namespace torch_openreg
