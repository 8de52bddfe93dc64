// KernelThreads.cpp - speed layer: which threads run a fast kernel's CPU code
// (Note [The threads of a kernel], Note [Who runs a fast kernel]).
// Measured when introduced: a small Transformer's training step in a
// continuous loop took 9.3 ms on openreg against 5.4 ms on the CPU; with
// small kernels kept to their worker, 5.2-6.3 ms against 6.1-6.7 ms. The
// figures of the second note are in docs/appendix/host-fast-path.md.
#include "fast/KernelThreads.h"

#include "runtime/Platform.h"

#include <ATen/Config.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <omp.h>
#include <torch_openreg/Kernel.h>

#include <memory>
#include <thread>

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
// runs on one thread, and splits its work only once its operands (the CPU
// views it builds, cpuView) reach kParallelKernelBytes, where each parallel
// region does enough work to pay for the polling that follows it, and only
// when a host thread that waits for the stream runs it, with the host's own
// team (Note [Who runs a fast kernel]). On the stream's worker a kernel
// always runs alone: a team of the worker's would be a second team in the
// process (Note [Who runs queued work] in the runtime's stream.cpp). So does
// a kernel on any host thread but the process's main thread, whose team the
// program's own CPU work uses: autograd runs openreg's backward on a thread
// of its own, and a team of that thread's, made when a launch into a full
// queue ran the queue there, slowed CPU `a + a` after training 3-4 times and
// a ResNet-18 step from 106 to 140 ms.
struct KernelThreads {
  bool inKernel = false;
  bool mayUseTeam = false;  // a waiting host thread runs the kernel, not the worker
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

KernelThreadsScope::KernelThreadsScope(bool onWorker) : outermost_(!kernelThreads.inKernel) {
  if (!outermost_) return;
  KernelThreads& state = kernelThreads;
  at::internal::lazy_init_num_threads();  // before we change what it would set
  state.teamThreads = at::get_num_threads();
  state.inKernel = true;
  // A split reduction rounds differently from one on one thread, so which
  // thread runs a kernel would change its results in the last bits from
  // one run to the next; torch.use_deterministic_algorithms(True) rules it out.
  state.mayUseTeam = !onWorker && platform::onMainThread() && !at::globalContext().deterministicAlgorithms();
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
  if (!state.inKernel || !state.mayUseTeam || state.operandBytes >= kParallelKernelBytes) return;
  state.operandBytes += bytes;
  if (state.operandBytes >= kParallelKernelBytes) keepToThisThread(false);
}

int kernelTeamThreads() { return kernelThreads.teamThreads; }

const at::ThreadLocalState& freshThreadState() {
  // Captured once, on a thread made for it; never destroyed (used until exit).
  static const at::ThreadLocalState* fresh = [] {
    const at::ThreadLocalState* captured = nullptr;
    std::thread([&captured] { captured = new at::ThreadLocalState(); }).join();
    return captured;
  }();
  return *fresh;
}

std::tuple<int, int, bool> kernelThreadsForTesting(const at::Tensor& operand, bool synchronize) {
  auto seen = std::make_shared<std::tuple<int, int, bool>>();
  launchKernel("kernel_threads_for_testing", {operand}, [seen](std::vector<at::Tensor>&) {
    int onWorker = 0;
    OPENREG_CHECK(orKernelIsOnWorker(&onWorker));
    *seen = {at::get_num_threads(), kernelTeamThreads(), onWorker != 0};
  });
  orStream_t stream = currentNativeStream(operand.device().index());
  if (synchronize) {
    OPENREG_CHECK(orStreamSynchronize(stream));
    return *seen;
  }
  orError_t status;
  while ((status = orStreamQuery(stream)) == orErrorNotReady) std::this_thread::yield();
  OPENREG_CHECK(status);
  return *seen;
}

}  // namespace torch_openreg
