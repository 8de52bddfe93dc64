// CheckedLaunch.h - launchOnStream for kernels that run PyTorch's CPU code,
// with the CPU code's argument checks made on the host first.
//
// Note [Refusing on the host what the CPU kernel refuses]
// PyTorch's CPU kernels refuse some inputs ("abs_cpu" not implemented for
// 'Bool'). Run inside a stream kernel, that refusal would come late, as a
// sticky error that disables the device until it is reset. So the CPU code
// first runs once on the host, over empty CPU tensors of the operands'
// dtypes: it raises what the CPU raises, when the CPU raises it, and does
// no device work. Not a check of shapes or values, which the caller makes.
#pragma once

#include <ATen/ops/empty.h>

#include "aten/native/Launch.h"

namespace torch_openreg {

// LITERALINCLUDE START: CHECKED_LAUNCH
inline void launchCheckedOnStream(const char* name, const std::vector<at::Tensor>& tensors,
                                  CpuKernel fn) {
  std::vector<at::Tensor> probes;
  probes.reserve(tensors.size());
  for (const at::Tensor& t : tensors) {
    probes.push_back(at::empty({0}, t.options().device(at::kCPU)));
  }
  fn(probes);  // raises, now, whatever the CPU code raises for these dtypes
  launchOnStream(name, tensors, std::move(fn));
}
// LITERALINCLUDE END: CHECKED_LAUNCH

}  // namespace torch_openreg
