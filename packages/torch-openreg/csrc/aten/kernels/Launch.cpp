// Launch.cpp - the plain launch: the public launchKernel
// (torch_openreg/Kernel.h) and the device views its kernels see (Note
// [Running CPU kernels on device memory] in Launch.h). A speed layer may
// take over the launch after launchKernel's checks (SpeedLayer.h).
#include "aten/kernels/Launch.h"

#include <ATen/ops/_conj.h>
#include <ATen/ops/_neg_view.h>
#include <openreg/openreg.hpp>
#include <torch_openreg/Kernel.h>

#include <utility>

#include "aten/SpeedLayer.h"
#include "runtime/Stream.h"
#include "runtime/TimingOnlyMemory.h"

namespace torch_openreg {
namespace {

// The allocator of a device view's storage: a resize that needs new memory
// is refused, with a type of its own (Launch.h). The storage is resizable
// so that the refusal reaches this allocator instead of c10's generic
// "not resizable" check, which callers could only recognise by its text.
class RefuseResizeAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t bytes) override {
    throw DeviceViewResized({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                            c10::str("a CPU kernel tried to resize an openreg device view to ", bytes,
                                     " bytes; device memory cannot move under a kernel"));
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
};

RefuseResizeAllocator refuseResize;

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

// The device a launch runs on: its first tensor's (Kernel.h's checks).
c10::DeviceIndex kernelDevice(const char* name, const std::vector<at::Tensor>& tensors) {
  TORCH_CHECK(!tensors.empty(), "openreg kernel ", name, ": launched over no tensors; a kernel runs on the "
              "stream of its first tensor's device");
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK(isOpenRegTensor(t), "openreg kernel ", name, ": expected defined openreg tensors, got ",
                t.defined() ? "a tensor on " + t.device().str() : std::string("an undefined tensor"),
                "; move CPU operands to the device first, or pass them to the kernel by value");
  }
  return tensors.front().device().index();
}

// A plain kernel: the descriptions of its tensors and its body.
struct PlainKernel {
  c10::SmallVector<DeviceView, 4> operands;
  KernelBody body;

  void operator()() {
    std::vector<at::Tensor> views;
    views.reserve(operands.size());
    for (const DeviceView& operand : operands) views.push_back(cpuView(operand));
    auto call = [&] { body(views); };
    runKernelBody(call);
  }
};

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
  // What at::from_blob builds, without its general path (resolving the
  // options, computing the storage size from the strides again).
  c10::Storage storage(c10::Storage::use_byte_size_t(), view.span, c10::DataPtr(host, c10::Device(at::kCPU)),
                       &refuseResize, /*resizable=*/true);
  at::Tensor cpu = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), c10::DispatchKey::CPU,
                                                            c10::scalarTypeToTypeMeta(view.dtype));
  cpu.unsafeGetTensorImpl()->set_sizes_and_strides(view.sizes, view.strides);
  if (view.conj) cpu = cpu._conj();
  if (view.neg) cpu = cpu._neg_view();
  return cpu;
}

// LITERALINCLUDE START: PLAIN_LAUNCH
void launchKernel(const char* name, const std::vector<at::Tensor>& tensors, KernelBody body) {
  c10::DeviceIndex device = kernelDevice(name, tensors);
  for (const at::Tensor& t : tensors) checkOperandComputed(name, t);  // Note [Memory timing-only mode never computed]
  speedLayer().launch(name, device, tensors, std::move(body));  // plainLaunch, unless a speed layer steps in
}

void plainLaunch(const char* name, c10::DeviceIndex device, const std::vector<at::Tensor>& tensors,
                 KernelBody body) {
  PlainKernel kernel{{}, std::move(body)};
  for (const at::Tensor& t : tensors) describeInto(kernel.operands.emplace_back(), t);
  OPENREG_CHECK(openreg::launch(currentNativeStream(device), name, std::move(kernel)));
}
// LITERALINCLUDE END: PLAIN_LAUNCH

void launchOwnKernel(const char* name, const std::vector<at::Tensor>& tensors, KernelBody body) {
  // Note [Values the host knows in timing-only mode]: taken before launchKernel's checks forget them.
  std::optional<KernelOnKnownValues> onTheHost = KernelOnKnownValues::of(tensors, body);
  launchKernel(name, tensors, std::move(body));
  if (onTheHost) onTheHost->run();
}

orStream_t currentNativeStream(c10::DeviceIndex device) { return nativeStream(currentStream(device)); }

}  // namespace torch_openreg
