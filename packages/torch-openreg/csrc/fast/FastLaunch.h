// FastLaunch.h - speed layer: the launches the fast paths use. Same kernels
// as the plain launch (aten/kernels/Launch.cpp), with three differences:
//  - the closure is built in place in memory recycled between the host and
//    the worker (ClosureStash.h), not allocated per launch;
//  - the host fast path describes its tensors straight into the closure
//    (launchOnTensors), without building a vector of them;
//  - the body runs inside the scratch and kernel-threads scopes
//    (ScratchAllocator.h, KernelThreads.h);
//  - a host thread that waits for the stream may run it (Note [Who runs a
//    fast kernel]).
// Measured when introduced (tools/bench/torch_ops.py): the closure stash and
// in-place descriptions took a 1-element `a + b`'s extra host cost over the
// CPU from 1.0 us to 0.5-0.6 us; the scopes took a small Transformer's
// training step from 9.3 ms to 5.2-6.3 ms (CPU 6.1-6.7 ms).
#pragma once

#include <torch_openreg/Kernel.h>

#include <optional>
#include <utility>
#include <vector>

#include "aten/kernels/Launch.h"
#include "fast/ClosureStash.h"
#include "fast/KernelThreads.h"
#include "fast/ScratchAllocator.h"
#include "runtime/TimingOnlyMemory.h"

namespace torch_openreg::fast {
namespace detail {

// fn(views) over CPU views of the tensors described, inside the speed
// layer's scopes. Built in place, in the kernel's closure.
template <typename Fn>
struct FastKernel {
  // Describes the tensors right here, in the closure.
  template <typename... Tensors>
  explicit FastKernel(Fn&& kernel, const Tensors&... deviceTensors) : fn(std::move(kernel)) {
    (describeInto(operands.emplace_back(), deviceTensors), ...);
  }
  FastKernel(Fn&& kernel, const std::vector<at::Tensor>& deviceTensors) : fn(std::move(kernel)) {
    for (const at::Tensor& t : deviceTensors) describeInto(operands.emplace_back(), t);
  }

  void operator()() {
    int onWorker = 1;
    OPENREG_CHECK(orKernelIsOnWorker(&onWorker));
    // LITERALINCLUDE START: WHO_RUNS_A_FAST_KERNEL
    // Note [Who runs a fast kernel]
    // The runtime may run this kernel on a host thread that waits for its
    // stream (Note [Who runs queued work] in the runtime's stream.cpp),
    // inside whatever that thread was doing: a profiler recording its
    // operators, a TorchDispatchMode, CPU autocast. None of that is the
    // kernel's, so there it runs in the thread-local state of a fresh
    // thread, as on the worker.
    std::optional<at::ThreadLocalStateGuard> freshState;
    if (onWorker == 0) freshState.emplace(freshThreadState());
    // LITERALINCLUDE END: WHO_RUNS_A_FAST_KERNEL
    // The host memory CPU code allocates is cached for the next kernel
    // (Note [Why kernels' host memory is cached]); small kernels keep to
    // one thread (Note [The threads of a kernel]).
    KernelScratchScope scratch;
    KernelThreadsScope threads(onWorker != 0);
    std::vector<at::Tensor> views;
    views.reserve(operands.size());
    for (const DeviceView& operand : operands) {
      countKernelOperand(operand.span);
      views.push_back(cpuView(operand));
    }
    auto call = [&] { fn(views); };
    runKernelBody(call);
  }

  c10::SmallVector<DeviceView, 4> operands;
  Fn fn;
};

}  // namespace detail

// The host fast path's launch: fn(views) over the tensors given one by one,
// on the current stream of device, with no vector of tensors built (copying
// a tensor costs an atomic reference count each way).
template <typename Fn, typename... Tensors>
void launchOnTensors(const char* name, c10::DeviceIndex device, Fn fn, const Tensors&... deviceTensors) {
  (checkOperandComputed(name, deviceTensors), ...);  // as launchKernel does
  OPENREG_CHECK(launchInPlace<detail::FastKernel<Fn>>(currentNativeStream(device), name, std::move(fn),
                                                       deviceTensors...));
}

// The public launchKernel's fast form, after its checks.
inline void launchErased(const char* name, c10::DeviceIndex device, const std::vector<at::Tensor>& tensors,
                         KernelBody body) {
  OPENREG_CHECK(launchInPlace<detail::FastKernel<KernelBody>>(currentNativeStream(device), name, std::move(body),
                                                               tensors));
}

}  // namespace torch_openreg::fast
