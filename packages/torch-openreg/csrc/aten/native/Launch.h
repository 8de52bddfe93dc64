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
#include "runtime/ScratchAllocator.h"

namespace torch_openreg {

using CpuKernel = std::function<void(std::vector<at::Tensor>& views)>;

// What a kernel needs to rebuild a CPU view of a device tensor: plain
// values, taken at launch, so the tensor may change or go away before the
// kernel runs.
struct DeviceView {
  void* data;
  c10::SmallVector<int64_t, 5> sizes;  // inline up to 5 dimensions: no allocation per launch
  c10::SmallVector<int64_t, 5> strides;
  at::ScalarType dtype;
  size_t span;  // bytes from data to the end of the last element
  bool conj;    // the lazy conjugate and negative bits of complex views
  bool neg;
};
DeviceView describe(const at::Tensor& deviceTensor);
// describe() of each tensor, in order. Each description is moved in; a
// braced list of them would be copied, sizes and strides included.
template <typename... Tensors>
c10::SmallVector<DeviceView, 4> describeAll(const Tensors&... deviceTensors) {
  c10::SmallVector<DeviceView, 4> views;
  (views.push_back(describe(deviceTensors)), ...);
  return views;
}
// Kernel only: the CPU tensor over the translated memory of view.
at::Tensor cpuView(const DeviceView& view);

// The current openreg stream of device, as the runtime knows it.
orStream_t currentNativeStream(c10::DeviceIndex device);

// Queues body as a kernel named name on the current stream of device. A
// c10::Error that body throws fails the kernel with its message.
//
// A template rather than a std::function, like launchOnViews below: the
// kernel is then one heap object, whose memory openreg::launch recycles
// (Note [Who frees a kernel's closure]). Every further object that the host
// allocates and the worker frees costs a lock on the C library's allocator
// arena, which both threads contend for.
template <typename Body>
void launchKernel(const char* name, c10::DeviceIndex device, Body body) {
  OPENREG_CHECK(openreg::launch(currentNativeStream(device), name, [body = std::move(body)]() mutable {
    try {
      // A kernel works on plain CPU views, below autograd, as PyTorch's own
      // kernels run. Without this guard every view a CPU kernel makes
      // internally (a reduction makes several) would go through autograd's
      // view tracking on the worker: a quarter of a 1-element sum.
      at::AutoDispatchBelowADInplaceOrView belowAutograd;
      // The host memory the CPU kernel allocates for itself is cached for
      // the next kernel (Note [Why kernels' host memory is cached]).
      KernelScratchScope scratch;
      body();
    } catch (const c10::Error& error) {
      // The sticky error should read like the check that failed, not like
      // a C++ backtrace of the worker thread.
      throw std::runtime_error(error.what_without_backtrace());
    }
  }));
}

// Queues fn(views) on the current stream of device, where views are CPU
// views of the described device tensors, in the same order.
template <typename Fn>
void launchOnViews(const char* name, c10::DeviceIndex device, c10::SmallVector<DeviceView, 4> specs, Fn fn) {
  launchKernel(name, device, [specs = std::move(specs), fn = std::move(fn)]() mutable {
    std::vector<at::Tensor> views;
    views.reserve(specs.size());
    for (const DeviceView& spec : specs) views.push_back(cpuView(spec));
    fn(views);
  });
}

// tensors: openreg tensors on the current device (or peers); fn(views)
// receives CPU views of them in the same order. For tensors held one by one,
// launchOnViews with describe() avoids building an array of them: copying a
// tensor that Python holds takes the GIL.
template <typename Fn>
void launchOnStream(const char* name, c10::ArrayRef<at::Tensor> tensors, Fn fn) {
  c10::SmallVector<DeviceView, 4> specs;
  for (const at::Tensor& t : tensors) specs.push_back(describe(t));
  launchOnViews(name, tensors.at(0).device().index(), std::move(specs), std::move(fn));
}

}  // namespace torch_openreg
