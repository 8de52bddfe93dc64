// Convolution.cpp - convolution on openreg: output shapes come from the
// Meta implementation on the host, the arithmetic from PyTorch's CPU
// convolution inside a kernel on the current stream.
#include "aten/native/Convolution.h"

#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/DeviceGuard.h>

#include "aten/native/Launch.h"

namespace torch_openreg::native {
namespace {

at::Tensor meta(const at::Tensor& t) {
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta));
}

// A device tensor laid out like the meta tensor m (or undefined).
at::Tensor like(const at::Tensor& m, const at::Tensor& onDevice) {
  if (!m.defined()) return m;
  return at::empty_strided(m.sizes(), m.strides(), m.options().device(onDevice.device()));
}

}  // namespace

at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight,
                       const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                       at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                       at::IntArrayRef outputPadding, int64_t groups) {
  c10::DeviceGuard guard(input.device());
  bool hasBias = bias.has_value() && bias->defined();
  std::optional<at::Tensor> metaBias = hasBias ? std::optional<at::Tensor>(meta(*bias)) : std::nullopt;
  at::Tensor output = like(at::convolution(meta(input), meta(weight), metaBias, stride, padding,
                                           dilation, transposed, outputPadding, groups),
                           input);
  std::vector<at::Tensor> operands{output, input, weight};
  if (hasBias) operands.push_back(*bias);
  auto s = stride.vec(), p = padding.vec(), d = dilation.vec(), o = outputPadding.vec();
  launchOnStream("convolution", operands, [=](std::vector<at::Tensor>& v) {
    std::optional<at::Tensor> b = v.size() > 3 ? std::optional<at::Tensor>(v[3]) : std::nullopt;
    v[0].copy_(at::convolution(v[1], v[2], b, s, p, d, transposed, o, groups));
  });
  return output;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolutionBackward(
    const at::Tensor& gradOutput, const at::Tensor& input, const at::Tensor& weight,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
    at::IntArrayRef outputPadding, int64_t groups, std::array<bool, 3> outputMask) {
  c10::DeviceGuard guard(input.device());
  int64_t channels = transposed ? weight.size(1) * groups : weight.size(0);
  std::vector<int64_t> biasSizes{channels};
  auto [mi, mw, mb] = at::convolution_backward(meta(gradOutput), meta(input), meta(weight), biasSizes,
                                               stride, padding, dilation, transposed, outputPadding,
                                               groups, outputMask);
  at::Tensor gradInput = like(mi, input), gradWeight = like(mw, input), gradBias = like(mb, input);
  std::vector<at::Tensor> operands{gradOutput, input, weight};
  for (const at::Tensor& g : {gradInput, gradWeight, gradBias}) {
    if (g.defined()) operands.push_back(g);
  }
  auto s = stride.vec(), p = padding.vec(), d = dilation.vec(), o = outputPadding.vec();
  launchOnStream("convolution_backward", operands, [=](std::vector<at::Tensor>& v) {
    auto grads = at::convolution_backward(v[0], v[1], v[2], biasSizes, s, p, d, transposed, o,
                                          groups, outputMask);
    size_t next = 3;
    for (const at::Tensor& g : {std::get<0>(grads), std::get<1>(grads), std::get<2>(grads)}) {
      if (g.defined()) v[next++].copy_(g);
    }
  });
  return {gradInput, gradWeight, gradBias};
}

}  // namespace torch_openreg::native
