// Minimal.h - the kernels of the guide's minimal operator set: what PyTorch
// needs from a backend before any math runs (create, view, resize, copy).
// Registered in aten/Minimal.cpp; implemented in Memory.cpp and Copy.cpp.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Stream.h>

namespace torch_openreg::native {

at::Tensor empty(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                 std::optional<at::Layout> layout, std::optional<at::Device> device,
                 std::optional<bool> pinMemory, std::optional<at::MemoryFormat> memoryFormat);
at::Tensor emptyStrided(at::IntArrayRef size, at::IntArrayRef stride,
                        std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                        std::optional<at::Device> device, std::optional<bool> pinMemory);
at::Tensor asStrided(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride,
                     std::optional<int64_t> storageOffset);
const at::Tensor& resize(const at::Tensor& self, at::IntArrayRef size,
                         std::optional<at::MemoryFormat> memoryFormat);
at::Tensor reshapeAlias(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride);
at::Tensor view(const at::Tensor& self, at::IntArrayRef size);
at::Tensor& setSourceTensor(at::Tensor& self, const at::Tensor& source);
at::Tensor& setSourceStorage(at::Tensor& self, at::Storage source);
at::Tensor& setSourceStorageOffset(at::Tensor& self, at::Storage source, int64_t storageOffset,
                                   at::IntArrayRef size, at::IntArrayRef stride);

at::Tensor copyFrom(const at::Tensor& self, const at::Tensor& dst, bool nonBlocking);
at::Tensor copyFromAndResize(const at::Tensor& self, const at::Tensor& dst);
at::Scalar localScalarDense(const at::Tensor& self);
// Whether self.data = from may swap self's implementation for from's;
// Module.to relies on it to keep tied parameters tied.
bool hasCompatibleShallowCopyType(const at::Tensor& self, const at::Tensor& from);
// Tensor.record_stream(s): the caching allocator keeps self's memory from
// being reused until the work queued on s so far has finished.
void recordStream(at::Tensor& self, c10::Stream stream);

}  // namespace torch_openreg::native
