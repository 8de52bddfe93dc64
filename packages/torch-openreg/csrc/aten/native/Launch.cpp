// Launch.cpp - see Note [Running CPU kernels on device memory] in Launch.h.
#include "aten/native/Launch.h"

#include <ATen/ops/from_blob.h>
#include <openreg/openreg.hpp>

#include <stdexcept>

#include "runtime/Check.h"
#include "runtime/Stream.h"

namespace torch_openreg {
namespace {

// What the kernel needs to rebuild a view: plain values, copied at launch,
// so the caller's tensors may go away before the kernel runs.
struct ViewSpec {
  void* data;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  at::ScalarType dtype;
  size_t span;  // bytes from data to the last element's end
};

size_t spanBytes(const at::Tensor& t) {
  if (t.numel() == 0) return 0;
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  return static_cast<size_t>(last + 1) * t.element_size();
}

at::Tensor cpuView(const ViewSpec& spec) {
  void* host = spec.span == 0 ? nullptr : openreg::translate(static_cast<char*>(spec.data), spec.span);
  return at::from_blob(host, spec.sizes, spec.strides,
                       at::TensorOptions().dtype(spec.dtype).device(at::kCPU));
}

}  // namespace

void launchOnStream(const char* name, const std::vector<at::Tensor>& tensors, CpuKernel fn) {
  std::vector<ViewSpec> specs;
  specs.reserve(tensors.size());
  for (const at::Tensor& t : tensors) {
    specs.push_back({t.data_ptr(), t.sizes().vec(), t.strides().vec(), t.scalar_type(), spanBytes(t)});
  }
  orStream_t stream = nativeStream(currentStream(tensors.at(0).device().index()));
  OPENREG_CHECK(openreg::launch(stream, name, [specs = std::move(specs), fn = std::move(fn)] {
    std::vector<at::Tensor> views;
    views.reserve(specs.size());
    for (const ViewSpec& spec : specs) views.push_back(cpuView(spec));
    try {
      fn(views);
    } catch (const c10::Error& error) {
      // The sticky error should read like the check that failed, not like
      // a C++ backtrace of the worker thread.
      throw std::runtime_error(error.what_without_backtrace());
    }
  }));
}

}  // namespace torch_openreg
