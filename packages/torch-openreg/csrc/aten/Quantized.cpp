// Quantized.cpp - registration of PyTorch's legacy quantized tensors
// (torch.quantize_per_tensor and per_channel, dequantize, int_repr, the
// qparams) for openreg, as CUDA has them: qint8, quint8 and qint32, per
// tensor and per channel, and, as the CPU has them, quint4x2 and quint2x4
// per tensor. The kernels are in kernels/Quantized.cpp (Note
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
#include <ATen/ops/set_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <optional>
#include <utility>

#include "aten/kernels/Quantized.h"

// LITERALINCLUDE START: QUANTIZED_REGISTRATION
namespace at::native {
// ATen's quantizers reach the device's arithmetic through these stubs.
REGISTER_PRIVATEUSE1_DISPATCH(quantize_tensor_per_tensor_affine_stub, &torch_openreg::native::quantizePerTensor)
REGISTER_PRIVATEUSE1_DISPATCH(dequantize_tensor_per_tensor_affine_stub, &torch_openreg::native::dequantizePerTensor)
REGISTER_PRIVATEUSE1_DISPATCH(quantize_tensor_per_channel_affine_stub, &torch_openreg::native::quantizePerChannel)
REGISTER_PRIVATEUSE1_DISPATCH(dequantize_tensor_per_channel_affine_stub,
                              &torch_openreg::native::dequantizePerChannel)
// Per tensor, the sub-byte types (quint4x2, quint2x4).
REGISTER_PRIVATEUSE1_DISPATCH(quantize_tensor_per_tensor_affine_sub_byte_stub, &torch_openreg::native::quantizeSubByte)
REGISTER_PRIVATEUSE1_DISPATCH(dequantize_tensor_per_tensor_affine_sub_byte_stub,
                              &torch_openreg::native::dequantizeSubByte)
// Per channel with float zero points (torch.quantize_per_channel given float zero_points).
REGISTER_PRIVATEUSE1_DISPATCH(quantize_tensor_per_channel_float_qparams_stub,
                              &torch_openreg::native::quantizePerChannelFloatQparams)
REGISTER_PRIVATEUSE1_DISPATCH(dequantize_tensor_per_channel_float_qparams_stub,
                              &torch_openreg::native::dequantizePerChannelFloatQparams)
}  // namespace at::native

namespace torch_openreg {
namespace {

// LITERALINCLUDE START: QUANTIZED_DEVICE_GUARD
// ATen's device-generic quantized kernels allocate on the current device
// (new_qtensor), so each runs with the device of its arguments current: the
// explicit device= of a factory, else its first tensor's, as the wrappers
// PyTorch generates for CUDA do. Without it, q.to("openreg:1") would land on
// openreg:0.
std::optional<c10::Device> deviceOf(const at::Tensor& t) {
  return t.defined() ? std::optional<c10::Device>(t.device()) : std::nullopt;
}
std::optional<c10::Device> deviceOf(const std::optional<c10::Device>& device) { return device; }
template <typename Other>
std::optional<c10::Device> deviceOf(const Other&) {
  return std::nullopt;
}

template <typename Signature, Signature* kernel>
struct OnArgumentsDevice;
template <typename Result, typename... Args, Result (*kernel)(Args...)>
struct OnArgumentsDevice<Result(Args...), kernel> {
  static Result call(Args... args) {
    std::optional<c10::Device> device;
    ((device = device.has_value() ? device : deviceOf(args)), ...);
    c10::OptionalDeviceGuard guard(device);
    return kernel(std::forward<Args>(args)...);
  }
};
// LITERALINCLUDE END: QUANTIZED_DEVICE_GUARD
#define ON_ARGUMENTS_DEVICE(kernel) TORCH_FN((OnArgumentsDevice<decltype(kernel), &kernel>::call))

}  // namespace

// Quantizing takes a float tensor: ATen's device-generic operators, which
// allocate through the quantizer and call the stubs above.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("quantize_per_tensor", ON_ARGUMENTS_DEVICE(at::native::quantize_per_tensor));
  m.impl("quantize_per_tensor.tensor_qparams", ON_ARGUMENTS_DEVICE(at::native::quantize_per_tensor_tensor_qparams));
  m.impl("quantize_per_channel", ON_ARGUMENTS_DEVICE(at::native::quantize_per_channel));
  m.impl("_make_per_tensor_quantized_tensor", ON_ARGUMENTS_DEVICE(native::makePerTensorQuantized));
}

// The rest takes a quantized tensor, whose dispatch key is
// QuantizedPrivateUse1: ATen's device-generic kernels, as CUDA registers
// them, and openreg's own where CUDA's are device-specific.
TORCH_LIBRARY_IMPL(aten, QuantizedPrivateUse1, m) {
  m.impl("_empty_affine_quantized", ON_ARGUMENTS_DEVICE(at::native::empty_affine_quantized));
  m.impl("_empty_per_channel_affine_quantized", ON_ARGUMENTS_DEVICE(at::native::empty_per_channel_affine_quantized));
  m.impl("empty_quantized", ON_ARGUMENTS_DEVICE(at::native::empty_quantized));
  m.impl("dequantize.self", ON_ARGUMENTS_DEVICE(at::native::dequantize_quantized));
  m.impl("q_scale", ON_ARGUMENTS_DEVICE(at::native::q_scale_quant));
  m.impl("q_zero_point", ON_ARGUMENTS_DEVICE(at::native::q_zero_point_quant));
  m.impl("q_per_channel_scales", ON_ARGUMENTS_DEVICE(at::native::q_per_channel_scales));
  m.impl("q_per_channel_zero_points", ON_ARGUMENTS_DEVICE(at::native::q_per_channel_zero_points));
  m.impl("q_per_channel_axis", ON_ARGUMENTS_DEVICE(at::native::q_per_channel_axis));
  m.impl("qscheme", ON_ARGUMENTS_DEVICE(at::native::qscheme_quant));
  m.impl("as_strided", ON_ARGUMENTS_DEVICE(at::native::as_strided_qtensorimpl));
  m.impl("view", ON_ARGUMENTS_DEVICE(at::native::view));
  m.impl("set_.source_Storage_storage_offset", ON_ARGUMENTS_DEVICE(at::native::set_storage_quantized_));  // torch.load
  m.impl("clone", ON_ARGUMENTS_DEVICE(at::native::quantized_clone));
  m.impl("int_repr", ON_ARGUMENTS_DEVICE(native::intRepr));
  m.impl("copy_", ON_ARGUMENTS_DEVICE(native::quantizedCopy));
  m.impl("_copy_from", ON_ARGUMENTS_DEVICE(native::quantizedCopyFrom));  // ATen's own copy_ (clone's) for other devices
}
// LITERALINCLUDE END: QUANTIZED_REGISTRATION

}  // namespace torch_openreg
