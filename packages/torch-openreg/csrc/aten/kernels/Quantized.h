// Quantized.h - PyTorch's legacy quantized tensors (torch.quantize_per_tensor
// and per_channel, dequantize, int_repr) on openreg: the device's part of
// ATen's quantization, which ATen's own quantizers call through DispatchStubs.
#pragma once

#include <ATen/core/Tensor.h>

namespace torch_openreg::native {

// ATen's DispatchStubs (ATen/native/quantized/AffineQuantizer.h): the
// arithmetic of quantizing into and dequantizing from a quantized tensor
// that ATen has allocated and checked, with the CPU's rounding.
void quantizePerTensor(const at::Tensor& real, at::Tensor& quantized, double scale, int64_t zeroPoint);
void dequantizePerTensor(const at::Tensor& quantized, at::Tensor& real, double scale, int64_t zeroPoint);
void quantizePerChannel(const at::Tensor& real, at::Tensor& quantized, const at::Tensor& scales,
                        const at::Tensor& zeroPoints, int64_t axis);
void dequantizePerChannel(const at::Tensor& quantized, at::Tensor& real, const at::Tensor& scales,
                          const at::Tensor& zeroPoints, int64_t axis);

// The operators whose CPU and CUDA kernels are device-specific.
// The same, with float zero points (not range-checked: the CPU's kernels take any).
void quantizePerChannelFloatQparams(const at::Tensor& real, at::Tensor& quantized, const at::Tensor& scales,
                                    const at::Tensor& zeroPoints, int64_t axis);
void dequantizePerChannelFloatQparams(const at::Tensor& quantized, at::Tensor& real, const at::Tensor& scales,
                                      const at::Tensor& zeroPoints, int64_t axis);

// Per tensor, into and out of the sub-byte types (quint4x2, quint2x4).
void quantizeSubByte(const at::Tensor& real, at::Tensor& quantized, float scale, float zeroPoint);
void dequantizeSubByte(const at::Tensor& quantized, at::Tensor& real, float scale, float zeroPoint);

at::Tensor intRepr(const at::Tensor& self);
at::Tensor makePerTensorQuantized(const at::Tensor& self, double scale, int64_t zeroPoint);
at::Tensor& quantizedCopy(at::Tensor& self, const at::Tensor& src, bool nonBlocking);
at::Tensor quantizedCopyFrom(const at::Tensor& self, const at::Tensor& dst, bool nonBlocking);

}  // namespace torch_openreg::native
