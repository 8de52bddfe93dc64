// Launch.h - runs PyTorch CPU code on openreg device memory, as a kernel on
// the current openreg stream.
//
// Note [Running CPU kernels on device memory]
// Inside a kernel, libopenreg translates a device range to its host alias.
// launchOnViews wraps the alias of each device tensor in a CPU tensor with
// the same sizes and strides (no copy) and hands those views to fn, which
// runs on the stream's worker, after all work queued before it. The host
// returns as soon as the kernel is queued. An exception thrown by fn fails
// the kernel; the error surfaces, naming the kernel, at the next
// synchronising call, as a device-side assertion does on CUDA.
#pragma once

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>
#include <openreg/openreg.hpp>

#include <functional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "runtime/Check.h"
#include "runtime/KernelThreads.h"
#include "runtime/ScratchAllocator.h"

namespace torch_openreg {

using CpuKernel = std::function<void(std::vector<at::Tensor>& views)>;

// What a kernel needs to rebuild a CPU view of a device tensor: plain
// values, taken at launch, so the tensor may change or go away before the
// kernel runs. Its sizes and strides are inline, so moving one copies them:
// the launch path describes each tensor where its kernel keeps it
// (describeInto).
struct DeviceView {
  void* data = nullptr;
  c10::SmallVector<int64_t, 5> sizes;  // inline up to 5 dimensions: no allocation per launch
  c10::SmallVector<int64_t, 5> strides;
  at::ScalarType dtype = at::ScalarType::Undefined;
  size_t span = 0;  // bytes from data to the end of the last element
  bool conj = false;  // the lazy conjugate and negative bits of complex views
  bool neg = false;
};
// Throws unless t is an openreg tensor whose storage holds every byte it
// reaches: any other operand would fault inside a kernel or copy, as an
// illegal address that leaves the device unusable. describeInto checks.
void checkStorageHolds(const at::Tensor& t);
void describeInto(DeviceView& view, const at::Tensor& deviceTensor);
// The description of each tensor, in order, each written in place.
template <typename... Tensors>
c10::SmallVector<DeviceView, 4> describeAll(const Tensors&... deviceTensors) {
  c10::SmallVector<DeviceView, 4> views;
  (describeInto(views.emplace_back(), deviceTensors), ...);
  return views;
}
// Kernel only: the CPU tensor over the translated memory of view.
at::Tensor cpuView(const DeviceView& view);

// Test hook: queues a kernel over operand and returns how many threads its
// CPU code could use, with how many the worker's thread team has
// (Note [The threads of a kernel]).
std::pair<int, int> kernelThreadsForTesting(const at::Tensor& operand);

// The current openreg stream of device, as the runtime knows it.
orStream_t currentNativeStream(c10::DeviceIndex device);

namespace detail {

// A kernel body as openreg runs it (launchKernel). Body is constructed in
// place, where the runtime keeps the kernel's closure.
template <typename Body>
struct GuardedKernel {
  template <typename... Args>
  explicit GuardedKernel(std::in_place_t, Args&&... args) : body(std::forward<Args>(args)...) {}

  void operator()() {
    try {
      // A kernel works on plain CPU views, below autograd, as PyTorch's own
      // kernels run. Without this guard every view a CPU kernel makes
      // internally (a reduction makes several) would go through autograd's
      // view tracking on the worker: a quarter of a 1-element sum.
      at::AutoDispatchBelowADInplaceOrView belowAutograd;
      // The host memory the CPU kernel allocates for itself is cached for
      // the next kernel (Note [Why kernels' host memory is cached]).
      KernelScratchScope scratch;
      // Small kernels keep to the worker (Note [The threads of a kernel]).
      KernelThreadsScope threads;
      body();
    } catch (const c10::Error& error) {
      // The sticky error should read like the check that failed, not like
      // a C++ backtrace of the worker thread.
      throw std::runtime_error(error.what_without_backtrace());
    }
  }

  Body body;
};

// fn(views) over CPU views of the described device tensors (launchOnViews).
template <typename Fn>
struct ViewsKernel {
  ViewsKernel(c10::SmallVector<DeviceView, 4>&& described, Fn&& kernel)
      : specs(std::move(described)), fn(std::move(kernel)) {}
  // Describes the tensors right here, in the kernel's closure.
  template <typename... Tensors>
  explicit ViewsKernel(Fn&& kernel, const Tensors&... deviceTensors) : fn(std::move(kernel)) {
    (describeInto(specs.emplace_back(), deviceTensors), ...);
  }

  void operator()() {
    std::vector<at::Tensor> views;
    views.reserve(specs.size());
    for (const DeviceView& spec : specs) views.push_back(cpuView(spec));
    fn(views);
  }

  c10::SmallVector<DeviceView, 4> specs;
  Fn fn;
};

}  // namespace detail

// Queues body as a kernel named name on the current stream of device. A
// c10::Error that body throws fails the kernel with its message.
//
// A template rather than a std::function, like launchOnViews below: the
// kernel is then one heap object, whose memory openreg::launchInPlace recycles
// (Note [Who frees a kernel's closure]). Every further object that the host
// allocates and the worker frees costs a lock on the C library's allocator
// arena, which both threads contend for. The body is moved once, into that
// object (openreg::launchInPlace).
template <typename Body>
void launchKernel(const char* name, c10::DeviceIndex device, Body&& body) {
  using Kernel = detail::GuardedKernel<std::decay_t<Body>>;
  OPENREG_CHECK(openreg::launchInPlace<Kernel>(currentNativeStream(device), name, std::in_place,
                                               std::forward<Body>(body)));
}

// Queues fn(views) on the current stream of device, where views are CPU
// views of the described device tensors, in the same order. The
// descriptions are moved once, into the kernel's closure: each DeviceView
// holds its sizes and strides inline, so a move is a copy of them.
template <typename Fn>
void launchOnViews(const char* name, c10::DeviceIndex device, c10::SmallVector<DeviceView, 4>&& specs, Fn fn) {
  using Kernel = detail::GuardedKernel<detail::ViewsKernel<Fn>>;
  OPENREG_CHECK(openreg::launchInPlace<Kernel>(currentNativeStream(device), name, std::in_place, std::move(specs),
                                               std::move(fn)));
}

// launchOnViews(name, device, describeAll(deviceTensors...), fn), with
// each tensor described in the kernel's closure, not moved there: the
// cheapest launch, for the host fast path.
template <typename Fn, typename... Tensors>
void launchOnTensors(const char* name, c10::DeviceIndex device, Fn fn, const Tensors&... deviceTensors) {
  using Kernel = detail::GuardedKernel<detail::ViewsKernel<Fn>>;
  OPENREG_CHECK(openreg::launchInPlace<Kernel>(currentNativeStream(device), name, std::in_place, std::move(fn),
                                               deviceTensors...));
}

// tensors: openreg tensors on the current device (or peers); fn(views)
// receives CPU views of them in the same order. For tensors held one by one,
// launchOnTensors avoids building an array of them: copying a
// tensor that Python holds takes the GIL.
template <typename Fn>
void launchOnStream(const char* name, c10::ArrayRef<at::Tensor> tensors, Fn fn) {
  c10::SmallVector<DeviceView, 4> specs;
  for (const at::Tensor& t : tensors) describeInto(specs.emplace_back(), t);
  launchOnViews(name, tensors.at(0).device().index(), std::move(specs), std::move(fn));
}

}  // namespace torch_openreg
