// Copy.cpp - every copy that involves an openreg tensor: host to device,
// device to host, within a device and between devices, for any strides and
// dtypes, blocking or non_blocking; and .item().
//
// Bytes move with orMemcpyAsync on the current stream whenever both sides
// have the same dtype and dense layout; anything else (strides, casts,
// broadcasting) is done by PyTorch's CPU copy, on the host for host tensors
// and inside a kernel for device tensors (Note [Running CPU kernels on
// device memory] in Launch.h). A non_blocking copy from or to pinned memory
// returns at once; every other copy returns when its bytes have arrived.
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/record_function.h>
#include <c10/core/DeviceGuard.h>

#include <limits>

#include <torch_openreg/Kernel.h>

#include "aten/kernels/Launch.h"
#include "aten/kernels/Minimal.h"
#include "runtime/Device.h"
#include "runtime/Event.h"
#include "runtime/HostAllocator.h"
#include "runtime/Stream.h"
#include "runtime/TimingOnlyMemory.h"

namespace torch_openreg::native {
namespace {

bool hasMathBits(const at::Tensor& t) { return t.is_conj() || t.is_neg(); }

// Same dtype, shape and strides, with no gaps or overlaps: a byte copy will do.
bool byteCopyable(const at::Tensor& dst, const at::Tensor& src) {
  return dst.scalar_type() == src.scalar_type() && dst.sizes() == src.sizes() &&
         dst.strides() == src.strides() && dst.is_non_overlapping_and_dense() &&
         !hasMathBits(dst) && !hasMathBits(src);
}

orStream_t current(const at::Tensor& deviceTensor) {
  return nativeStream(currentStream(deviceTensor.device().index()));
}

// A CPU tensor with dst's shape, dtype and strides (dense), holding src.
at::Tensor stagedLike(const at::Tensor& dst, const at::Tensor& src) {
  at::Tensor staging = at::empty_strided(dst.sizes(), dst.strides(),
                                         dst.options().device(at::kCPU).pinned_memory(false));
  staging.copy_(src);
  return staging;
}

// A non_blocking copy still reading or writing pinned memory: keep the block
// from being reused until the stream has passed this point.
void protectPinned(const at::Tensor& host, const at::Tensor& deviceTensor) {
  at::getHostAllocator(at::kPrivateUse1)
      ->record_event(host.data_ptr(), host.storage().data_ptr().get_context(),
                     currentStream(deviceTensor.device().index()));
}

// LITERALINCLUDE START: COPY_BYTES
// Copies bytes between host tensor and device tensor laid out alike.
void copyBytes(const at::Tensor& dst, const at::Tensor& src, bool nonBlocking) {
  const at::Tensor& host = isOpenRegTensor(dst) ? src : dst;
  const at::Tensor& device = isOpenRegTensor(dst) ? dst : src;
  orMemcpyKind kind = isOpenRegTensor(dst) ? orMemcpyHostToDevice : orMemcpyDeviceToHost;
  size_t bytes = static_cast<size_t>(dst.numel()) * dst.element_size();
  OPENREG_CHECK(orMemcpyAsync(dst.data_ptr(), src.data_ptr(), bytes, kind, current(device)));
  // With pageable memory the runtime's copy returns when its bytes have
  // arrived, as CUDA's does; a pinned one is queued.
  if (!isPinned(host.data_ptr())) return;
  if (nonBlocking) {
    protectPinned(host, device);
  } else {
    OPENREG_CHECK(orStreamSynchronize(current(device)));
  }
}
// LITERALINCLUDE END: COPY_BYTES

// LITERALINCLUDE START: COPY_HOST_TO_DEVICE
void copyHostToDevice(const at::Tensor& dst, const at::Tensor& src, bool nonBlocking) {
  if (!dst.is_non_overlapping_and_dense()) {
    // Land in a dense device tensor first, then scatter into dst's strides.
    at::Tensor dense = at::empty(dst.sizes(), dst.options());
    copyHostToDevice(dense, src, nonBlocking);
    dst.copy_(dense);
    return;
  }
  copyBytes(dst, byteCopyable(dst, src) ? src : stagedLike(dst, src), nonBlocking);
}
// LITERALINCLUDE END: COPY_HOST_TO_DEVICE

void copyDeviceToHost(const at::Tensor& dst, const at::Tensor& src, bool nonBlocking) {
  if (byteCopyable(dst, src)) {
    copyBytes(dst, src, nonBlocking);
    return;
  }
  // Bring src's bytes over as they are, then let the CPU cast and restride.
  at::Tensor dense = src.is_non_overlapping_and_dense() ? src : src.contiguous();
  at::Tensor landing = at::empty_strided(dense.sizes(), dense.strides(),
                                         dense.options().device(at::kCPU));
  copyBytes(landing, dense, /*nonBlocking=*/false);
  dst.copy_(landing);
}

void copyWithinDevice(const at::Tensor& dst, const at::Tensor& src) {
  if (byteCopyable(dst, src)) {
    size_t bytes = static_cast<size_t>(dst.numel()) * dst.element_size();
    OPENREG_CHECK(orMemcpyAsync(dst.data_ptr(), src.data_ptr(), bytes, orMemcpyDeviceToDevice,
                                current(dst)));
    return;
  }
  launchOwnKernel("copy_", {dst, src}, [](std::vector<at::Tensor>& v) { v[0].copy_(v[1]); });
}

// Between devices, the copy runs on dst's current stream, after src's
// current stream has produced src; src's stream then waits for the copy, so
// src's memory is not reused while the copy still reads it (as on CUDA).
void copyBetweenDevices(const at::Tensor& dst, const at::Tensor& src) {
  orStream_t srcStream = current(src), dstStream = current(dst);
  streamWaitStream(dstStream, srcStream);
  copyWithinDevice(dst, src);
  streamWaitStream(srcStream, dstStream);
}

// LITERALINCLUDE START: COPY_MATH_BITS
// A lazily conjugated or negated view (x.conj(), x.mH) carries its bit, not
// changed bytes. Copies on the device apply it in the kernel (the CPU views
// carry the bits); a copy to the host first resolves it on the device.
at::Tensor resolvedOnDevice(const at::Tensor& src) {
  at::Tensor plain = at::empty_strided(src.sizes(), src.strides(), src.options());
  copyWithinDevice(plain, src);
  return plain;
}
// LITERALINCLUDE END: COPY_MATH_BITS

// Note [Values read in timing-only mode]: what `what`, a copy to the host, reads instead of device memory in
// timing-only mode: the values the host knows (known), else NaN, where NaN may stand in (readsAsNaN throws
// where it may not). Outside timing-only mode: nothing, the copy reads device memory.
std::optional<at::Tensor> readInstead(const char* what, const std::optional<at::Tensor>& known, at::ScalarType type) {
  if (!timingOnly()) return std::nullopt;
  if (known) return known;
  readsAsNaN(what, type);
  at::DisableRecordFunctionGuard unseen;
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  return c10::isComplexType(type) ? at::scalar_tensor(c10::complex<double>(kNaN, kNaN), at::kComplexDouble)
                                  : at::scalar_tensor(kNaN, at::kDouble);
}

// Every copy, named `what` where it reads device memory into the host's.
at::Tensor copyNamed(const char* what, const at::Tensor& self, const at::Tensor& dst, bool nonBlocking) {
  TORCH_CHECK(self.defined() && dst.defined(), "copy_: undefined tensor");
  // Note [Values the host knows in timing-only mode]
  std::optional<at::Tensor> knownSource = isOpenRegTensor(self) ? knownValues(self) : std::nullopt;
  bool toHost = isOpenRegTensor(self) && !isOpenRegTensor(dst);
  std::optional<at::Tensor> read = toHost ? readInstead(what, knownSource, dst.scalar_type()) : std::nullopt;
  if (dst.numel() == 0) return dst;
  TORCH_CHECK(!hasMathBits(dst), "openreg does not support copying into a conjugated or negated view");
  for (const at::Tensor* side : {&self, &dst}) {
    if (isOpenRegTensor(*side)) checkStorageHolds(*side);
  }
  // Note [Memory timing-only mode never computed]: a copy reads self, and writes dst without reading it.
  if (isOpenRegTensor(self)) checkOperandComputed("aten::copy_", self, /*onlyReads=*/true);
  if (isOpenRegTensor(dst)) noteOverwritten("aten::copy_", dst);
  WritesWithoutReading writes(dst);
  const at::Tensor& device = isOpenRegTensor(dst) ? dst : self;
  c10::DeviceGuard guard(device.device());
  if (toHost && hasMathBits(self)) {
    copyDeviceToHost(dst, resolvedOnDevice(self), nonBlocking);
  } else if (!isOpenRegTensor(self)) {
    copyHostToDevice(dst, self, nonBlocking);
    keepCopiedValues(dst, self);  // Note [Values the host knows in timing-only mode]
  } else if (toHost) {
    copyDeviceToHost(dst, self, nonBlocking);  // in timing-only mode, queued and timed; it writes nothing
  } else if (self.device() == dst.device()) {
    copyWithinDevice(dst, self.expand(dst.sizes()));
  } else {
    copyBetweenDevices(dst, self.expand(dst.sizes()));
  }
  if (knownSource && !toHost) keepCopiedValues(dst, knownSource->expand(dst.sizes()));
  if (read) {
    at::DisableRecordFunctionGuard unseen;  // the host's own work: no operator of the program
    dst.copy_(*read);
  }
  return dst;
}

}  // namespace

at::Tensor copyFrom(const at::Tensor& self, const at::Tensor& dst, bool nonBlocking) {
  return copyNamed("a copy from an openreg tensor to the CPU (.cpu(), .to(\"cpu\"), .numpy(), print)", self, dst,
                   nonBlocking);
}

at::Tensor copyFromAndResize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) dst.resize_(self.sizes());
  return copyFrom(self, dst, /*nonBlocking=*/false);
}

// .item(): like CUDA, this waits for the work that produces the value.
at::Scalar localScalarDense(const at::Tensor& self) {
  // Same shape as self: .item() also accepts one-element tensors of any rank.
  at::Tensor host = at::empty(self.sizes(), self.options().device(at::kCPU));
  copyNamed("aten::_local_scalar_dense (.item(), or bool(), int() or float() of a tensor)", self, host,
            /*nonBlocking=*/false);
  return host.item();
}

}  // namespace torch_openreg::native
