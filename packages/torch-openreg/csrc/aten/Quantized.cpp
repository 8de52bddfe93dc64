// Quantized.cpp - registration of PyTorch's legacy quantized tensors
// (torch.quantize_per_tensor and per_channel, dequantize, int_repr, the
// qparams) for openreg, as CUDA has them: qint8, quint8 and qint32, per
// tensor and per channel. The kernels are in kernels/Quantized.cpp (Note
// [Quantized tensors on openreg]); the quantized operators themselves
// (quantized::add, quantized::linear) are CPU-only in PyTorch and not here.
#include <ATen/native/DispatchStub.h>
#include <ATen/native/quantized/AffineQuantizer.h>
#include <ATen/ops/_empty_affine_quantized_native.h>
#include <ATen/ops/_empty_per_channel_affine_quantized_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/dequantize_native.h>
#include <ATen/ops/empty_quantized_native.h>
#include <ATen/ops/q_per_channel_axis_native.h>
#include <ATen/ops/q_per_channel_scales_native.h>
#include <ATen/ops/q_per_channel_zero_points_native.h>
#include <ATen/ops/q_scale_native.h>
#include <ATen/ops/q_zero_point_native.h>
#include <ATen/ops/qscheme_native.h>
#include <ATen/ops/quantize_per_channel_native.h>
#include <ATen/ops/quantize_per_tensor_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

#include "aten/kernels/Quantized.h"

// LITERALINCLUDE START: QUANTIZED_REGISTRATION
namespace at::native {
// ATen's quantizers reach the device's arithmetic through these stubs.
REGISTER_PRIVATEUSE1_DISPATCH(quantize_tensor_per_tensor_affine_stub, &torch_openreg::native::quantizePerTensor)
REGISTER_PRIVATEUSE1_DISPATCH(dequantize_tensor_per_tensor_affine_stub, &torch_openreg::native::dequantizePerTensor)
REGISTER_PRIVATEUSE1_DISPATCH(quantize_tensor_per_channel_affine_stub, &torch_openreg::native::quantizePerChannel)
REGISTER_PRIVATEUSE1_DISPATCH(dequantize_tensor_per_channel_affine_stub,
                              &torch_openreg::native::dequantizePerChannel)
}  // namespace at::native

namespace torch_openreg {

// Quantizing takes a float tensor: ATen's device-generic operators, which
// allocate through the quantizer and call the stubs above.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("quantize_per_tensor", TORCH_FN(at::native::quantize_per_tensor));
  m.impl("quantize_per_tensor.tensor_qparams", TORCH_FN(at::native::quantize_per_tensor_tensor_qparams));
  m.impl("quantize_per_channel", TORCH_FN(at::native::quantize_per_channel));
  m.impl("_make_per_tensor_quantized_tensor", TORCH_FN(native::makePerTensorQuantized));
}

// The rest takes a quantized tensor, whose dispatch key is
// QuantizedPrivateUse1: ATen's device-generic kernels, as CUDA registers
// them, and openreg's own where CUDA's are device-specific.
TORCH_LIBRARY_IMPL(aten, QuantizedPrivateUse1, m) {
  m.impl("_empty_affine_quantized", TORCH_FN(at::native::empty_affine_quantized));
  m.impl("_empty_per_channel_affine_quantized", TORCH_FN(at::native::empty_per_channel_affine_quantized));
  m.impl("empty_quantized", TORCH_FN(at::native::empty_quantized));
  m.impl("dequantize.self", TORCH_FN(at::native::dequantize_quantized));
  m.impl("q_scale", TORCH_FN(at::native::q_scale_quant));
  m.impl("q_zero_point", TORCH_FN(at::native::q_zero_point_quant));
  m.impl("q_per_channel_scales", TORCH_FN(at::native::q_per_channel_scales));
  m.impl("q_per_channel_zero_points", TORCH_FN(at::native::q_per_channel_zero_points));
  m.impl("q_per_channel_axis", TORCH_FN(at::native::q_per_channel_axis));
  m.impl("qscheme", TORCH_FN(at::native::qscheme_quant));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_qtensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("clone", TORCH_FN(at::native::quantized_clone));
  m.impl("int_repr", TORCH_FN(native::intRepr));
  m.impl("copy_", TORCH_FN(native::quantizedCopy));
  m.impl("_copy_from", TORCH_FN(native::quantizedCopyFrom));  // ATen's own copy_ (clone's) for other devices
}
// LITERALINCLUDE END: QUANTIZED_REGISTRATION

}  // namespace torch_openreg
