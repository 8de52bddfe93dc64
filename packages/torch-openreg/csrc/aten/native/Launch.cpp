// Launch.cpp - see Note [Running CPU kernels on device memory] in Launch.h.
#include "aten/native/Launch.h"

#include <ATen/Parallel.h>
#include <ATen/ops/_conj.h>
#include <ATen/ops/_neg_view.h>
#include <openreg/openreg.hpp>

#include <memory>
#include <utility>

#include "runtime/KernelThreads.h"
#include "runtime/Stream.h"

namespace torch_openreg {
namespace {

size_t spanBytes(const at::Tensor& t) {
  if (t.numel() == 0) return 0;
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  return static_cast<size_t>(last + 1) * t.element_size();
}

void checkHolds(const at::Tensor& t, size_t span) {
  if (span == 0) return;
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "openreg kernel operand: expected a tensor "
              "on an openreg device, got one on ", t.device(), "; move it with .to(\"openreg\")");
  size_t needed = static_cast<size_t>(t.storage_offset()) * t.element_size() + span;
  size_t held = t.storage().nbytes();
  TORCH_CHECK(needed <= held, "the tensor's storage is empty or too small: it holds ", held,
              " bytes, but the tensor (sizes ", t.sizes(), ", strides ", t.strides(), ", storage offset ",
              t.storage_offset(), ") needs ", needed, "; its storage was resized after the tensor was made "
              "(untyped_storage().resize_); resize it back or make the tensor again");
}

}  // namespace

void checkStorageHolds(const at::Tensor& t) { checkHolds(t, spanBytes(t)); }

void describeInto(DeviceView& view, const at::Tensor& t) {
  size_t span = spanBytes(t);
  checkHolds(t, span);
  view.data = t.data_ptr();
  view.sizes.assign(t.sizes().begin(), t.sizes().end());
  view.strides.assign(t.strides().begin(), t.strides().end());
  view.dtype = t.scalar_type();
  view.span = span;
  view.conj = t.is_conj();
  view.neg = t.is_neg();
}

at::Tensor cpuView(const DeviceView& view) {
  void* host = view.span == 0 ? nullptr : openreg::translate(static_cast<char*>(view.data), view.span);
  countKernelOperand(view.span);
  // What at::from_blob builds, without its general path (resolving the
  // options, computing the storage size from the strides again): that path
  // was a seventh of the worker's time for a 1-element add (perf).
  c10::Storage storage(c10::Storage::use_byte_size_t(), view.span, c10::DataPtr(host, c10::Device(at::kCPU)),
                       /*allocator=*/nullptr, /*resizable=*/false);
  at::Tensor cpu = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), c10::DispatchKey::CPU,
                                                            c10::scalarTypeToTypeMeta(view.dtype));
  cpu.unsafeGetTensorImpl()->set_sizes_and_strides(view.sizes, view.strides);
  if (view.conj) cpu = cpu._conj();
  if (view.neg) cpu = cpu._neg_view();
  return cpu;
}

std::pair<int, int> kernelThreadsForTesting(const at::Tensor& operand) {
  auto seen = std::make_shared<std::pair<int, int>>();
  launchKernel("kernel_threads_for_testing", operand.device().index(),
               [seen, view = describeAll(operand)] {
                 seen->second = kernelTeamThreads();
                 cpuView(view[0]);
                 seen->first = at::get_num_threads();
               });
  OPENREG_CHECK(orStreamSynchronize(currentNativeStream(operand.device().index())));
  return *seen;
}

orStream_t currentNativeStream(c10::DeviceIndex device) { return nativeStream(currentStream(device)); }

}  // namespace torch_openreg
