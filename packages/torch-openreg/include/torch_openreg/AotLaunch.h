// AotLaunch.h - the C ABI through which a model that AOTInductor compiled for
// openreg launches its kernels on the device: the generated C++ wrapper finds
// torch_openreg_launch_kernel in the already-loaded libtorch_openreg.so and
// calls it once per kernel call. Not here: the C++ kernel API for packages
// (Kernel.h), or how the model is loaded (csrc/compile/AotRunner.cpp).
//
// Plain C types only (the handles of torch's AOTI C shim), so the model's
// library depends on no torch-openreg header at run time and no C++ ABI.
#pragma once

#include <stdint.h>
#ifdef __cplusplus
#include <stdexcept>
#endif
#include <torch/csrc/inductor/aoti_torch/c/shim.h>

#include "Export.h"  // quoted: a model's wrapper includes this header by its path
#include "Version.h"  // the kernel API version a model records (aot_inductor.py, kernel_api_record)
#include "platform_symbols.h"  // torch_openreg_find_symbol: how a model finds the launch function

#ifdef __cplusplus
extern "C" {
#endif

// LITERALINCLUDE START: AOT_LAUNCH_ABI
// What one argument of a generated kernel is, in the order of its signature.
enum TorchOpenRegArgKind {
  TORCH_OPENREG_ARG_TENSOR = 0,  // tensor: an openreg tensor, or a 0-dim CPU tensor read by value
  TORCH_OPENREG_ARG_INT = 1,     // int_value: an integer (a size, an index, a seed)
  TORCH_OPENREG_ARG_FLOAT = 2,   // float_value: a floating-point scalar
};

// One argument. The tensor handle is borrowed for the call only: the launch
// keeps the tensor alive until the kernel has run.
typedef struct TorchOpenRegKernelArg {
  int32_t kind;  // a TorchOpenRegArgKind
  AtenTensorHandle tensor;
  int64_t int_value;
  double float_value;
} TorchOpenRegKernelArg;

// A kernel's entry point: params[i] points at the value of argument i
// (Note [How a generated kernel receives its arguments] in
// csrc/compile/CompiledKernel.h).
typedef void (*TorchOpenRegKernelEntry)(void* const* params);

// Queues entry as a kernel named `name` on the current openreg stream of the
// first tensor argument's device and returns at once (asynchronous, like an
// eager openreg operator); the kernel receives each tensor's device memory
// as translated for it. Returns AOTI_TORCH_SUCCESS, or AOTI_TORCH_FAILURE
// with the error recorded as the AOTI shim records its own (no tensor
// argument, a tensor on another device, a sticky error of an earlier
// kernel). Thread-safe. Since API 1.3.
//   name      in: names the kernel in errors and traces (copied)
//   entry     in: the kernel's entry point, in the model's library
//   args      in: num_args arguments, borrowed
//   num_args  in: how many; at least one must be a tensor
// Related: torch_openreg::launchKernel (Kernel.h), which it queues through.
TORCH_OPENREG_API AOTITorchError torch_openreg_launch_kernel(const char* name, TorchOpenRegKernelEntry entry,
                                                             const TorchOpenRegKernelArg* args, int64_t num_args);

// LITERALINCLUDE END: AOT_LAUNCH_ABI

// The C shims of the operators an openreg model calls outside its generated
// kernels (matrix products, convolutions, attention), named and typed as
// AOTInductor names a device's shims: aoti_torch_<device>_<op>, with the
// CPU's signatures (torch/csrc/inductor/aoti_torch/generated/c_shim_cpu.h).
// Each runs the operator through PyTorch's dispatcher, so openreg's own
// kernel runs it, on the current stream. Each returns AOTI_TORCH_SUCCESS, or
// AOTI_TORCH_FAILURE with the error recorded as for
// torch_openreg_launch_kernel. Handles are borrowed; a result handle
// (ret0...) is new and owned by the caller. Thread-safe. Since API 1.3.

// out = self @ mat2 (aten::mm.out).
//   out  out: written in place
//   self, mat2  in
// Returns as above. Related: aoti_torch_openreg_addmm_out.
TORCH_OPENREG_API AOTITorchError aoti_torch_openreg_mm_out(AtenTensorHandle out, AtenTensorHandle self,
                                                           AtenTensorHandle mat2);
// out = beta * self + alpha * (mat1 @ mat2) (aten::addmm.out).
//   out  out: written in place
//   self, mat1, mat2, beta, alpha  in
// Returns as above. Related: aoti_torch_openreg_mm_out.
TORCH_OPENREG_API AOTITorchError aoti_torch_openreg_addmm_out(AtenTensorHandle out, AtenTensorHandle self,
                                                              AtenTensorHandle mat1, AtenTensorHandle mat2,
                                                              double beta, double alpha);
// out = self @ mat2, batched (aten::bmm.out).
//   out  out: written in place
//   self, mat2  in
// Returns as above. Related: aoti_torch_openreg_baddbmm_out.
TORCH_OPENREG_API AOTITorchError aoti_torch_openreg_bmm_out(AtenTensorHandle out, AtenTensorHandle self,
                                                            AtenTensorHandle mat2);
// out = beta * self + alpha * (batch1 @ batch2) (aten::baddbmm.out).
//   out  out: written in place
//   self, batch1, batch2, beta, alpha  in
// Returns as above. Related: aoti_torch_openreg_bmm_out.
TORCH_OPENREG_API AOTITorchError aoti_torch_openreg_baddbmm_out(AtenTensorHandle out, AtenTensorHandle self,
                                                                AtenTensorHandle batch1, AtenTensorHandle batch2,
                                                                double beta, double alpha);
// *ret0 = aten::convolution(input, weight, bias, ...). Outputs last, as
// torch's C shims.
//   input, weight  in
//   bias  in: null for none
//   stride, stride_len_, padding, padding_len_, dilation, dilation_len_  in
//   transposed, output_padding, output_padding_len_, groups  in
//   ret0  out: the new result
// Returns as above. Related: aoti_torch_openreg_mm_out.
TORCH_OPENREG_API AOTITorchError aoti_torch_openreg_convolution(
    AtenTensorHandle input, AtenTensorHandle weight, AtenTensorHandle* bias, const int64_t* stride,
    int64_t stride_len_, const int64_t* padding, int64_t padding_len_, const int64_t* dilation,
    int64_t dilation_len_, int32_t transposed, const int64_t* output_padding, int64_t output_padding_len_,
    int64_t groups, AtenTensorHandle* ret0);
// The nine results of aten::_scaled_dot_product_fused_attention_overrideable
// (PyTorch's attention for PrivateUse1 devices), each written where its ret
// pointer is not null. Outputs last, as torch's C shims.
//   query, key, value  in
//   attn_bias, scale  in: null for none
//   dropout_p, is_causal, return_debug_mask  in
//   ret0, ret1, ret2, ret3, ret4, ret5, ret6, ret7, ret8  out: null when not wanted
// Returns as above. Related: aoti_torch_openreg_bmm_out.
TORCH_OPENREG_API AOTITorchError aoti_torch_openreg__scaled_dot_product_fused_attention_overrideable(
    AtenTensorHandle query, AtenTensorHandle key, AtenTensorHandle value, AtenTensorHandle* attn_bias,
    double dropout_p, int32_t is_causal, int32_t return_debug_mask, double* scale, AtenTensorHandle* ret0,
    AtenTensorHandle* ret1, AtenTensorHandle* ret2, AtenTensorHandle* ret3, int64_t* ret4, int64_t* ret5,
    AtenTensorHandle* ret6, AtenTensorHandle* ret7, AtenTensorHandle* ret8);

#ifdef __cplusplus
}  // extern "C"

// LITERALINCLUDE START: AOT_SHIM_LOOKUP
// What a model's C++ wrapper calls in place of a function declared above:
// the function, found once in the loaded libtorch_openreg.so (each lambda
// has its own static). The declaration gives it its type; the model's
// library never refers to the symbol itself, so it loads without a link to
// libtorch_openreg.so and fails with this message when that is not loaded.
#define TORCH_OPENREG_FUNCTION(function)                                                         \
  ([]() {                                                                                        \
    static const auto found = reinterpret_cast<decltype(&function)>(torch_openreg_find_symbol(#function)); \
    if (found == nullptr) {                                                                      \
      throw std::runtime_error("this model runs on openreg: load libtorch_openreg.so first "   \
                               "(import torch_openreg, or link the library)");                   \
    }                                                                                            \
    return found;                                                                                \
  }())
// The C shim of operator op (aoti_torch_openreg_<op>).
#define TORCH_OPENREG_SHIM(op) TORCH_OPENREG_FUNCTION(aoti_torch_openreg_##op)
// LITERALINCLUDE END: AOT_SHIM_LOOKUP
#endif
