// Convolution.cpp - convolution on openreg: output shapes computed on the
// host with PyTorch's own shape formulas, the arithmetic from PyTorch's CPU
// convolution inside a kernel on the current stream.
#include "aten/kernels/Convolution.h"

#include <ATen/native/ConvUtils.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>

#include <torch_openreg/Kernel.h>

#include "aten/SpeedLayer.h"
#include "aten/kernels/SameDevice.h"

namespace torch_openreg::native {
namespace {

// The layout of the results: the one PyTorch's fake tensors give an
// "overrideable" convolution (torch._C._conv_determine_backend_memory_format
// for ConvBackend::Overrideable), whatever the operands' layouts. torch.compile
// and torch.export plan memory with that answer, so the device must agree
// with it, even where the CPU's own convolution would answer channels-last.
c10::MemoryFormat layoutOf(const at::Tensor& input, const at::Tensor& weight) {
  return c10::MemoryFormat::Contiguous;
}

// Convolution parameters, captured by value: inline up to three dimensions,
// so the kernel's closure is the only allocation a launch makes.
using Dims = c10::SmallVector<int64_t, 3>;

// A device tensor of sizes on like's device, or undefined when not wanted.
at::Tensor emptyIf(bool wanted, at::IntArrayRef sizes, const at::Tensor& like, c10::MemoryFormat format) {
  if (!wanted) return at::Tensor();
  return at::empty(sizes, like.options(), format);
}

// A convolution's arguments besides its tensors: with the tensors, they key
// a speed layer's plan for where the results may be computed in place.
c10::SmallVector<int64_t, 16> planArguments(const Dims& s, const Dims& p, const Dims& d, const Dims& o,
                                            bool transposed, int64_t groups, std::array<bool, 3> outputMask = {}) {
  c10::SmallVector<int64_t, 16> arguments;
  for (const Dims* values : {&s, &p, &d, &o}) arguments.append(values->begin(), values->end());
  for (int64_t flag : {int64_t{transposed}, groups, int64_t{outputMask[0]}, int64_t{outputMask[1]},
                       int64_t{outputMask[2]}}) {
    arguments.push_back(flag);
  }
  return arguments;
}

}  // namespace

at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight,
                       const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                       at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                       at::IntArrayRef outputPadding, int64_t groups) {
  bool hasBias = bias.has_value() && bias->defined();
  if (hasBias) {
    checkSameDevice("convolution", {{"input", &input}, {"weight", &weight}, {"bias", &*bias}});
  } else {
    checkSameDevice("convolution", {{"input", &input}, {"weight", &weight}});
  }
  c10::DeviceGuard guard(input.device());
  // at::_convolution checked the shapes before choosing this backend.
  std::vector<int64_t> outputSizes =
      transposed ? at::native::conv_input_size(input.sizes(), weight.sizes(), padding, outputPadding, stride,
                                               dilation, groups)
                 : at::native::conv_output_size(input.sizes(), weight.sizes(), padding, stride, dilation);
  at::Tensor output = at::empty(outputSizes, input.options(), layoutOf(input, weight));
  Dims s(stride), p(padding), d(dilation), o(outputPadding);
  auto kernel = [=](std::vector<at::Tensor>& v) {
    std::optional<at::Tensor> b = v.size() > 3 ? std::optional<at::Tensor>(v[3]) : std::nullopt;
    // LITERALINCLUDE START: CONVOLUTION_COMPUTE_INTO
    // The CPU convolution has no out= form: it returns its result, which a
    // speed layer may have it compute in the output's memory (SpeedLayer.h).
    speedLayer().computeInto("convolution", v, planArguments(s, p, d, o, transposed, groups), v[0], [&] {
      return std::vector<at::Tensor>{at::convolution(v[1], v[2], b, s, p, d, transposed, o, groups)};
    });
    // LITERALINCLUDE END: CONVOLUTION_COMPUTE_INTO
  };
  std::vector<at::Tensor> operands{output, input, weight};
  if (hasBias) operands.push_back(*bias);
  launchKernel("convolution", operands, std::move(kernel));
  return output;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolutionBackward(
    const at::Tensor& gradOutput, const at::Tensor& input, const at::Tensor& weight,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
    at::IntArrayRef outputPadding, int64_t groups, std::array<bool, 3> outputMask) {
  checkSameDevice("convolution_backward", {{"grad_output", &gradOutput}, {"input", &input}, {"weight", &weight}});
  c10::DeviceGuard guard(input.device());
  int64_t channels = transposed ? weight.size(1) * groups : weight.size(0);
  Dims biasSizes{channels};
  // Each gradient has the shape of what it is the gradient of.
  c10::MemoryFormat layout = layoutOf(input, weight);
  at::Tensor gradInput = emptyIf(outputMask[0], input.sizes(), input, layout);
  at::Tensor gradWeight = emptyIf(outputMask[1], weight.sizes(), weight, layout);
  at::Tensor gradBias = emptyIf(outputMask[2], biasSizes, weight, c10::MemoryFormat::Contiguous);
  std::vector<at::Tensor> operands{gradOutput, input, weight};
  for (const at::Tensor* g : {&gradInput, &gradWeight, &gradBias}) {
    if (g->defined()) operands.push_back(*g);
  }
  Dims s(stride), p(padding), d(dilation), o(outputPadding);
  launchKernel("convolution_backward", operands, [=](std::vector<at::Tensor>& v) {
    std::vector<at::Tensor> outputs(3);  // the wanted gradients' views follow the operands
    for (size_t i = 0, next = 3; i < 3; ++i) {
      if (outputMask[i]) outputs[i] = v[next++];
    }
    speedLayer().computeInto("convolution_backward", v, planArguments(s, p, d, o, transposed, groups, outputMask),
                             outputs, [&] {
      auto grads = at::convolution_backward(v[0], v[1], v[2], biasSizes, s, p, d, transposed, o,
                                            groups, outputMask);
      return std::vector<at::Tensor>{std::get<0>(grads), std::get<1>(grads), std::get<2>(grads)};
    });
  });
  return {gradInput, gradWeight, gradBias};
}

}  // namespace torch_openreg::native
