// CpuProbe.h - launchKernel for kernels that run PyTorch's CPU code, with
// the CPU code's dtype checks made on the host first.
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
#include <torch_openreg/Kernel.h>

namespace torch_openreg {

// LITERALINCLUDE START: CPU_PROBE_LAUNCH
inline void launchAfterCpuProbe(const char* name, const std::vector<at::Tensor>& tensors, KernelBody body) {
  std::vector<at::Tensor> probes;
  probes.reserve(tensors.size());
  for (const at::Tensor& t : tensors) {
    probes.push_back(at::empty({0}, t.options().device(at::kCPU)));
  }
  body(probes);  // raises, now, whatever the CPU code raises for these dtypes
  launchKernel(name, tensors, std::move(body));
}
// LITERALINCLUDE END: CPU_PROBE_LAUNCH

}  // namespace torch_openreg
