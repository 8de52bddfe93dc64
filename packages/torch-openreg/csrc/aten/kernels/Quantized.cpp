// Quantized.cpp - the device's part of PyTorch's legacy quantized tensors.
//
// Note [Quantized tensors on openreg]
// A quantized tensor is a QTensorImpl: integers in ordinary device memory
// plus a Quantizer (scale, zero point, dtype) on the host. ATen's quantized
// operators are mostly device-generic (allocation, the qparams, views): they
// call the device only through four DispatchStubs for the arithmetic and
// through three operators whose kernels are device-specific (int_repr,
// _make_per_tensor_quantized_tensor, copy_). Here each stub runs the CPU's
// stub on views of device memory, so the rounding is the CPU's bit for bit;
// the integers move as a plain tensor of the underlying type (integersOf),
// so copies and int_repr are the device's ordinary copies.
#include "aten/kernels/Quantized.h"

#include <ATen/Dispatch.h>
#include <ATen/native/quantized/AffineQuantizer.h>
#include <ATen/ops/empty.h>
#include <ATen/quantized/QTensorImpl.h>
#include <ATen/quantized/Quantizer.h>
#include <torch_openreg/Kernel.h>

#include <limits>
#include <optional>

#include "runtime/Device.h"

namespace torch_openreg::native {
namespace {

bool isSubByte(c10::ScalarType type) { return type == c10::kQUInt4x2 || type == c10::kQUInt2x4; }

// The integers behind a quantized tensor, as a plain tensor of its
// underlying type (int8 for qint8) on the same storage and device. A
// sub-byte type (quint4x2: two values a byte) packs its values, always
// dense: its integers are the packed bytes, flat, as the CPU's int_repr
// gives them.
at::Tensor integersOf(const at::Tensor& quantized) {
  c10::DispatchKey backend = quantized.is_cpu() ? c10::DispatchKey::CPU : c10::DispatchKey::PrivateUse1;
  if (isSubByte(quantized.scalar_type())) {
    TORCH_CHECK(quantized.is_contiguous() && quantized.storage_offset() == 0, "a ", quantized.scalar_type(),
                " tensor's values are packed: only a whole, contiguous one is supported, as on the CPU");
    at::Tensor bytes = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(quantized.storage()),
                                                                c10::DispatchKeySet(backend),
                                                                c10::scalarTypeToTypeMeta(at::kByte));
    int64_t perByte = quantized.scalar_type() == c10::kQUInt4x2 ? 2 : 4;
    bytes.unsafeGetTensorImpl()->set_sizes_contiguous({(quantized.numel() + perByte - 1) / perByte});
    return bytes;
  }
  at::Tensor integers = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(quantized.storage()), c10::DispatchKeySet(backend),
      c10::scalarTypeToTypeMeta(c10::toUnderlying(quantized.scalar_type())));
  integers.unsafeGetTensorImpl()->set_sizes_and_strides(quantized.sizes(), quantized.strides(),
                                                        quantized.storage_offset());
  return integers;
}

// Inside a kernel: a CPU quantized tensor over the view of a quantized
// tensor's integers, which the CPU's stubs take as their quantized operand.
// sizes: the quantized tensor's, given for a sub-byte one, whose integers
// are its packed bytes (integersOf).
at::Tensor quantizedCpuView(const at::Tensor& integers, const at::QuantizerPtr& quantizer,
                            std::optional<c10::IntArrayRef> sizes = std::nullopt) {
  at::Tensor view = at::detail::make_tensor<at::QTensorImpl>(
      c10::Storage(integers.storage()), c10::DispatchKeySet(c10::DispatchKey::QuantizedCPU),
      c10::scalarTypeToTypeMeta(quantizer->scalar_type()), quantizer);
  if (sizes.has_value()) {
    view.unsafeGetTensorImpl()->set_sizes_contiguous(*sizes);
  } else {
    view.unsafeGetTensorImpl()->set_sizes_and_strides(integers.sizes(), integers.strides(),
                                                      integers.storage_offset());
  }
  return view;
}

at::QuantizerPtr quantizerOf(const at::Tensor& quantized) { return at::get_qtensorimpl(quantized)->quantizer(); }

// A per-channel quantizer's scales and zero points go to the kernel as
// device tensors; a user may have made them on the CPU.
at::Tensor onDeviceOf(const at::Tensor& t, const at::Tensor& like) { return t.to(like.device()); }

// Note [Per-channel zero points are checked on the host]
// ATen checks that a per-channel quantizer's zero points fit the quantized
// type only for the CPU; for CUDA and PrivateUse1 it leaves the check to
// the stub (ATen's AffineQuantizer.cpp). CUDA clamps instead; openreg
// refuses as the CPU does, with the CPU's words, on the host before the
// kernel is queued, so the error is raised by the call itself rather than
// by the next synchronisation. Zero points on the device are copied to
// the host for it (a synchronisation, and few values), except in
// timing-only mode, where the device holds no values to check.
// function names the ATen function in the message, as the CPU's does.
void checkZeroPoints(const char* function, const at::Tensor& zeroPoints, c10::ScalarType quantizedType) {
  if (zeroPoints.device().is_privateuseone() && timingOnly()) return;
  at::Tensor values = zeroPoints.to(at::kCPU).to(at::kLong).contiguous();  // converted on the host
  const int64_t* data = values.const_data_ptr<int64_t>();
  AT_DISPATCH_QINT_TYPES(quantizedType, "checkZeroPoints", [&] {
    for (int64_t i = 0; i < values.numel(); ++i) {
      TORCH_CHECK(data[i] <= std::numeric_limits<underlying_t>::max(), function, " zero_point ", data[i],
                  " is above upper bound.");
      TORCH_CHECK(data[i] >= std::numeric_limits<underlying_t>::min(), function, " zero_point ", data[i],
                  " is below lower bound.");
    }
  });
}

}  // namespace

void quantizePerTensor(const at::Tensor& real, at::Tensor& quantized, double scale, int64_t zeroPoint) {
  launchKernel("quantize_per_tensor", {real, integersOf(quantized)},
               [quantizer = quantizerOf(quantized), scale, zeroPoint](std::vector<at::Tensor>& views) {
                 at::Tensor q = quantizedCpuView(views[1], quantizer);
                 at::native::quantize_tensor_per_tensor_affine_stub(c10::DeviceType::CPU, views[0], q, scale,
                                                                    zeroPoint);
               });
}

void dequantizePerTensor(const at::Tensor& quantized, at::Tensor& real, double scale, int64_t zeroPoint) {
  launchKernel("dequantize_per_tensor", {integersOf(quantized), real},
               [quantizer = quantizerOf(quantized), scale, zeroPoint](std::vector<at::Tensor>& views) {
                 at::native::dequantize_tensor_per_tensor_affine_stub(
                     c10::DeviceType::CPU, quantizedCpuView(views[0], quantizer), views[1], scale, zeroPoint);
               });
}

namespace {

// Per channel, affine or with float zero points: the CPU's stub of that
// scheme over the device's views.
template <typename CpuStub>
void quantizeByChannel(const char* name, CpuStub& cpuStub, const at::Tensor& real, at::Tensor& quantized,
                       const at::Tensor& scales, const at::Tensor& zeroPoints, int64_t axis) {
  launchKernel(name, {real, integersOf(quantized), onDeviceOf(scales, real), onDeviceOf(zeroPoints, real)},
               [&cpuStub, quantizer = quantizerOf(quantized), axis](std::vector<at::Tensor>& views) {
                 at::Tensor q = quantizedCpuView(views[1], quantizer);
                 cpuStub(c10::DeviceType::CPU, views[0], q, views[2], views[3], axis);
               });
}

template <typename CpuStub>
void dequantizeByChannel(const char* name, CpuStub& cpuStub, const at::Tensor& quantized, at::Tensor& real,
                         const at::Tensor& scales, const at::Tensor& zeroPoints, int64_t axis) {
  launchKernel(name, {integersOf(quantized), real, onDeviceOf(scales, real), onDeviceOf(zeroPoints, real)},
               [&cpuStub, quantizer = quantizerOf(quantized), axis](std::vector<at::Tensor>& views) {
                 cpuStub(c10::DeviceType::CPU, quantizedCpuView(views[0], quantizer), views[1], views[2], views[3],
                         axis);
               });
}

}  // namespace

void quantizePerChannel(const at::Tensor& real, at::Tensor& quantized, const at::Tensor& scales,
                        const at::Tensor& zeroPoints, int64_t axis) {
  checkZeroPoints("quantize_tensor_per_channel_affine", zeroPoints, quantized.scalar_type());
  quantizeByChannel("quantize_per_channel", at::native::quantize_tensor_per_channel_affine_stub, real, quantized,
                    scales, zeroPoints, axis);
}

void dequantizePerChannel(const at::Tensor& quantized, at::Tensor& real, const at::Tensor& scales,
                          const at::Tensor& zeroPoints, int64_t axis) {
  checkZeroPoints("dequantize_tensor_per_channel_affine", zeroPoints, quantized.scalar_type());
  dequantizeByChannel("dequantize_per_channel", at::native::dequantize_tensor_per_channel_affine_stub, quantized,
                      real, scales, zeroPoints, axis);
}

void quantizePerChannelFloatQparams(const at::Tensor& real, at::Tensor& quantized, const at::Tensor& scales,
                                    const at::Tensor& zeroPoints, int64_t axis) {
  quantizeByChannel("quantize_per_channel_float_qparams", at::native::quantize_tensor_per_channel_float_qparams_stub,
                    real, quantized, scales, zeroPoints, axis);
}

void dequantizePerChannelFloatQparams(const at::Tensor& quantized, at::Tensor& real, const at::Tensor& scales,
                                      const at::Tensor& zeroPoints, int64_t axis) {
  dequantizeByChannel("dequantize_per_channel_float_qparams",
                      at::native::dequantize_tensor_per_channel_float_qparams_stub, quantized, real, scales,
                      zeroPoints, axis);
}

void quantizeSubByte(const at::Tensor& real, at::Tensor& quantized, float scale, float zeroPoint) {
  launchKernel("quantize_per_tensor_sub_byte", {real, integersOf(quantized)},
               [quantizer = quantizerOf(quantized), sizes = quantized.sizes().vec(), scale,
                zeroPoint](std::vector<at::Tensor>& views) {
                 at::Tensor q = quantizedCpuView(views[1], quantizer, sizes);
                 at::native::quantize_tensor_per_tensor_affine_sub_byte_stub(c10::DeviceType::CPU, views[0], q,
                                                                             scale, zeroPoint);
               });
}

void dequantizeSubByte(const at::Tensor& quantized, at::Tensor& real, float scale, float zeroPoint) {
  launchKernel("dequantize_per_tensor_sub_byte", {integersOf(quantized), real},
               [quantizer = quantizerOf(quantized), sizes = quantized.sizes().vec(), scale,
                zeroPoint](std::vector<at::Tensor>& views) {
                 at::native::dequantize_tensor_per_tensor_affine_sub_byte_stub(
                     c10::DeviceType::CPU, quantizedCpuView(views[0], quantizer, sizes), views[1], scale, zeroPoint);
               });
}

at::Tensor intRepr(const at::Tensor& self) { return integersOf(self).clone(self.suggest_memory_format()); }

at::Tensor makePerTensorQuantized(const at::Tensor& self, double scale, int64_t zeroPoint) {
  c10::ScalarType dtype = c10::toQIntType(self.scalar_type());
  at::Tensor quantized =
      at::new_qtensor(self.sizes(), self.options().dtype(dtype).memory_format(self.suggest_memory_format()),
                      at::make_per_tensor_affine_quantizer(scale, zeroPoint, dtype));
  integersOf(quantized).copy_(self);
  return quantized;
}

// copy_ reaches here when either side is an openreg quantized tensor (the
// other may be on the CPU), with the CPU's rules: quantized to quantized
// takes the source's quantizer; a float source is quantized with the
// destination's parameters; quantized to float is refused.
at::Tensor& quantizedCopy(at::Tensor& self, const at::Tensor& src, bool nonBlocking) {
  TORCH_CHECK(self.is_quantized(), "Copying from quantized Tensor to non-quantized Tensor is not allowed, "
              "please use dequantize to get a float Tensor from a quantized Tensor");
  if (!src.is_quantized()) {
    TORCH_CHECK(self.qscheme() == at::kPerTensorAffine, "copying a float tensor into a quantized tensor "
                "needs a per-tensor affine destination, got ", toString(self.qscheme()));
    at::native::quantize_tensor_per_tensor_affine(src.to(self.device()).contiguous(self.suggest_memory_format()),
                                                  self, self.q_scale(), self.q_zero_point());
    return self;
  }
  TORCH_CHECK(self.qscheme() == src.qscheme(), "Quantized Copy only works with same qscheme, got ",
              toString(self.qscheme()), " and ", toString(src.qscheme()));
  TORCH_CHECK(self.scalar_type() == src.scalar_type(), "Quantized Copy only works with the same dtype, got ",
              self.scalar_type(), " and ", src.scalar_type());
  at::set_quantizer_(self, src.quantizer());
  integersOf(self).copy_(integersOf(src), nonBlocking);
  return self;
}

at::Tensor quantizedCopyFrom(const at::Tensor& self, const at::Tensor& dst, bool nonBlocking) {
  at::Tensor target = dst;
  return quantizedCopy(target, self, nonBlocking);
}

}  // namespace torch_openreg::native
