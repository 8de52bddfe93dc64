// Launch.cpp - see Note [Running CPU kernels on device memory] in Launch.h.
#include "aten/native/Launch.h"

#include <ATen/ops/_conj.h>
#include <ATen/ops/_neg_view.h>
#include <ATen/ops/from_blob.h>
#include <openreg/openreg.hpp>

#include "runtime/Stream.h"

namespace torch_openreg {
namespace {

size_t spanBytes(const at::Tensor& t) {
  if (t.numel() == 0) return 0;
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  return static_cast<size_t>(last + 1) * t.element_size();
}

}  // namespace

void describeInto(DeviceView& view, const at::Tensor& t) {
  view.data = t.data_ptr();
  view.sizes.assign(t.sizes().begin(), t.sizes().end());
  view.strides.assign(t.strides().begin(), t.strides().end());
  view.dtype = t.scalar_type();
  view.span = spanBytes(t);
  view.conj = t.is_conj();
  view.neg = t.is_neg();
}

at::Tensor cpuView(const DeviceView& view) {
  void* host = view.span == 0 ? nullptr : openreg::translate(static_cast<char*>(view.data), view.span);
  at::Tensor cpu = at::from_blob(host, view.sizes, view.strides,
                                 at::TensorOptions().dtype(view.dtype).device(at::kCPU));
  if (view.conj) cpu = cpu._conj();
  if (view.neg) cpu = cpu._neg_view();
  return cpu;
}

orStream_t currentNativeStream(c10::DeviceIndex device) { return nativeStream(currentStream(device)); }

}  // namespace torch_openreg
