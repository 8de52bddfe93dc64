// Memory.cpp - creating, viewing and resizing openreg tensors. None of these
// touch tensor data, so none of them queue work on a stream.
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>

#include "aten/kernels/Minimal.h"
#include "runtime/Device.h"
#include "runtime/DeviceAllocator.h"

namespace torch_openreg::native {
namespace {

constexpr c10::DispatchKeySet kKeys{c10::DispatchKey::PrivateUse1};

c10::Device resolve(std::optional<at::Device> device) {
  c10::Device d = device.value_or(c10::Device(c10::DeviceType::PrivateUse1));
  TORCH_CHECK(d.type() == c10::DeviceType::PrivateUse1, "expected an openreg device, got ", d);
  c10::DeviceIndex index = d.has_index() ? d.index() : currentDevice();
  checkDeviceIndex(index);
  return c10::Device(c10::DeviceType::PrivateUse1, index);
}

void checkCreationOptions(std::optional<at::Layout> layout, std::optional<bool> pinMemory) {
  TORCH_CHECK(layout.value_or(at::kStrided) == at::kStrided, "openreg does not support layout ",
              *layout, "; only strided tensors");
  TORCH_CHECK(!pinMemory.value_or(false), "Only dense CPU tensors can be pinned");
}

// Grows self's storage, through the hooks' resizePrivateUse1Bytes, until it
// holds bytes; storage is never shrunk, as on CPU and CUDA.
void ensureStorageBytes(const at::Tensor& self, size_t bytes) {
  if (bytes > self.storage().nbytes()) at::native::resize_bytes_nocuda(self.storage(), bytes);
}

}  // namespace

// LITERALINCLUDE START: EMPTY_KERNEL
at::Tensor empty(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                 std::optional<at::Layout> layout, std::optional<at::Device> device,
                 std::optional<bool> pinMemory, std::optional<at::MemoryFormat> memoryFormat) {
  checkCreationOptions(layout, pinMemory);
  c10::DeviceGuard guard(resolve(device));
  return at::detail::empty_generic(size, deviceAllocator(), kKeys,
                                   c10::dtype_or_default(dtype), memoryFormat);
}
// LITERALINCLUDE END: EMPTY_KERNEL

at::Tensor emptyStrided(at::IntArrayRef size, at::IntArrayRef stride,
                        std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                        std::optional<at::Device> device, std::optional<bool> pinMemory) {
  checkCreationOptions(layout, pinMemory);
  c10::DeviceGuard guard(resolve(device));
  return at::detail::empty_strided_generic(size, stride, deviceAllocator(), kKeys,
                                           c10::dtype_or_default(dtype));
}

at::Tensor asStrided(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride,
                     std::optional<int64_t> storageOffset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storageOffset);
}

const at::Tensor& resize(const at::Tensor& self, at::IntArrayRef size,
                         std::optional<at::MemoryFormat> memoryFormat) {
  c10::DeviceGuard guard(self.device());
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  if (memoryFormat.has_value()) {
    TORCH_CHECK(*memoryFormat != at::MemoryFormat::Preserve,
                "Unsupported memory format Preserve for resize_");
    impl->empty_tensor_restride(*memoryFormat);
  }
  size_t bytes = at::detail::computeStorageNbytes(self.sizes(), self.strides(), self.itemsize(),
                                                  self.storage_offset());
  ensureStorageBytes(self, bytes);
  return self;
}

at::Tensor reshapeAlias(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

at::Tensor view(const at::Tensor& self, at::IntArrayRef size) { return at::native::view(self, size); }

at::Tensor& setSourceStorageOffset(at::Tensor& self, at::Storage source, int64_t storageOffset,
                                   at::IntArrayRef size, at::IntArrayRef stride) {
  TORCH_CHECK(source.device() == self.device(), "set_: expected a storage on ", self.device(),
              " but got one on ", source.device());
  TORCH_CHECK(storageOffset >= 0, "set_: storage offset must be >= 0, got ", storageOffset);
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(std::move(source));
  impl->set_storage_offset(storageOffset);
  if (stride.empty()) {
    impl->set_sizes_contiguous(size);
  } else {
    impl->set_sizes_and_strides(size, stride);
  }
  ensureStorageBytes(self, at::detail::computeStorageNbytes(self.sizes(), self.strides(),
                                                            self.itemsize(), storageOffset));
  return self;
}

at::Tensor& setSourceStorage(at::Tensor& self, at::Storage source) {
  int64_t elements = static_cast<int64_t>(source.nbytes() / self.itemsize());
  return setSourceStorageOffset(self, std::move(source), 0, {elements}, {});
}

// LITERALINCLUDE START: SHALLOW_COPY_TYPE
// `param.data = t` and Module.to (which assigns .data, so that tied
// parameters stay one tensor) ask this first. PyTorch's own answer,
// TensorImpl::has_compatible_shallow_copy_type, knows only the dense
// backends built into it and leaves PrivateUse1 to the backend: a dense
// openreg tensor and a dense CPU or openreg tensor are interchangeable, as
// CUDA's and the CPU's are. Without this, Module.to("openreg") unties
// every tied weight.
bool hasCompatibleShallowCopyType(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](const at::Tensor& t) {
    return t.layout() == at::kStrided && !t.is_quantized() && !t.is_nested() &&
           (t.is_cpu() || t.device().type() == c10::DeviceType::PrivateUse1);
  };
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set()) ||
         (dense(self) && dense(from));
}
// LITERALINCLUDE END: SHALLOW_COPY_TYPE

void recordStream(at::Tensor& self, c10::Stream stream) {
  // The allocator knows allocations by their start: the storage's pointer.
  deviceAllocator()->recordStream(self.storage().data_ptr(), stream);
}

at::Tensor& setSourceTensor(at::Tensor& self, const at::Tensor& source) {
  if (self.is_same(source)) return self;
  return setSourceStorageOffset(self, source.storage(), source.storage_offset(), source.sizes(),
                                source.strides());
}

}  // namespace torch_openreg::native
