// AotShims.cpp - the C shims an AOTInductor model for openreg calls for the
// operators outside its generated kernels (include/torch_openreg/AotLaunch.h):
// each unpacks the shim's C arguments and runs the operator through
// PyTorch's dispatcher, so openreg's own kernel runs it. Not here: the
// generated kernels' launch (AotLaunch.cpp). A vendor whose models call
// other operators adds their shims here, with the signatures of torch's
// CPU shims (torch/csrc/inductor/aoti_torch/generated/c_shim_cpu.h).
#include <ATen/ATen.h>
#include <torch/csrc/inductor/aoti_torch/utils.h>
#include <torch_openreg/AotLaunch.h>

#include <optional>
#include <utility>

namespace {

using torch::aot_inductor::tensor_handle_to_tensor_pointer;

at::Tensor& tensor(AtenTensorHandle handle) { return *tensor_handle_to_tensor_pointer(handle); }

// An optional tensor argument: a pointer to a handle, null for None.
std::optional<at::Tensor> optionalTensor(const AtenTensorHandle* handle) {
  return handle ? std::make_optional(tensor(*handle)) : std::nullopt;
}

// A result the caller asked for (its ret pointer is not null): a new handle.
void giveResult(AtenTensorHandle* ret, at::Tensor result) {
  if (ret != nullptr) {
    *ret = torch::aot_inductor::new_tensor_handle(std::move(result));
  }
}

}  // namespace

// LITERALINCLUDE START: AOT_SHIM_EXAMPLE
AOTITorchError aoti_torch_openreg_addmm_out(AtenTensorHandle out, AtenTensorHandle self, AtenTensorHandle mat1,
                                            AtenTensorHandle mat2, double beta, double alpha) {
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE(
      { at::addmm_out(tensor(out), tensor(self), tensor(mat1), tensor(mat2), beta, alpha); });
}
// LITERALINCLUDE END: AOT_SHIM_EXAMPLE

AOTITorchError aoti_torch_openreg_mm_out(AtenTensorHandle out, AtenTensorHandle self, AtenTensorHandle mat2) {
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({ at::mm_out(tensor(out), tensor(self), tensor(mat2)); });
}

AOTITorchError aoti_torch_openreg_bmm_out(AtenTensorHandle out, AtenTensorHandle self, AtenTensorHandle mat2) {
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({ at::bmm_out(tensor(out), tensor(self), tensor(mat2)); });
}

AOTITorchError aoti_torch_openreg_baddbmm_out(AtenTensorHandle out, AtenTensorHandle self, AtenTensorHandle batch1,
                                              AtenTensorHandle batch2, double beta, double alpha) {
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE(
      { at::baddbmm_out(tensor(out), tensor(self), tensor(batch1), tensor(batch2), beta, alpha); });
}

AOTITorchError aoti_torch_openreg_convolution(AtenTensorHandle input, AtenTensorHandle weight, AtenTensorHandle* bias,
                                              const int64_t* stride, int64_t stride_len_, const int64_t* padding,
                                              int64_t padding_len_, const int64_t* dilation, int64_t dilation_len_,
                                              int32_t transposed, const int64_t* output_padding,
                                              int64_t output_padding_len_, int64_t groups, AtenTensorHandle* ret0) {
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({
    giveResult(ret0, at::convolution(tensor(input), tensor(weight), optionalTensor(bias),
                                     at::IntArrayRef(stride, stride_len_), at::IntArrayRef(padding, padding_len_),
                                     at::IntArrayRef(dilation, dilation_len_), transposed != 0,
                                     at::IntArrayRef(output_padding, output_padding_len_), groups));
  });
}

AOTITorchError aoti_torch_openreg__scaled_dot_product_fused_attention_overrideable(
    AtenTensorHandle query, AtenTensorHandle key, AtenTensorHandle value, AtenTensorHandle* attn_bias,
    double dropout_p, int32_t is_causal, int32_t return_debug_mask, double* scale, AtenTensorHandle* ret0,
    AtenTensorHandle* ret1, AtenTensorHandle* ret2, AtenTensorHandle* ret3, int64_t* ret4, int64_t* ret5,
    AtenTensorHandle* ret6, AtenTensorHandle* ret7, AtenTensorHandle* ret8) {
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({
    auto [output, logsumexp, cumSeqQ, cumSeqK, maxQ, maxK, philoxSeed, philoxOffset, debugMask] =
        at::_scaled_dot_product_fused_attention_overrideable(
            tensor(query), tensor(key), tensor(value), optionalTensor(attn_bias), dropout_p, is_causal != 0,
            return_debug_mask != 0, scale ? std::make_optional(*scale) : std::nullopt);
    giveResult(ret0, std::move(output));
    giveResult(ret1, std::move(logsumexp));
    giveResult(ret2, std::move(cumSeqQ));
    giveResult(ret3, std::move(cumSeqK));
    if (ret4 != nullptr) *ret4 = maxQ.expect_int();
    if (ret5 != nullptr) *ret5 = maxK.expect_int();
    giveResult(ret6, std::move(philoxSeed));
    giveResult(ret7, std::move(philoxOffset));
    giveResult(ret8, std::move(debugMask));
  });
}
