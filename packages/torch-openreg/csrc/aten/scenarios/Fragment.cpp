// Fragment.cpp - registration scenario "add to an existing namespace": a
// second file adds openreg::all_finite to the namespace that CustomOps.cpp
// defines. Not for defining a namespace (only one TORCH_LIBRARY may), and
// not where all_finite's Meta kernel or autograd fallthrough live (Meta.cpp,
// Fallthrough.cpp).
#include <ATen/ops/empty.h>
#include <ATen/ops/isfinite.h>
#include <torch/library.h>

#include "aten/kernels/CpuProbe.h"

namespace torch_openreg {
namespace {

// LITERALINCLUDE START: FRAGMENT_KERNEL
// Whether every element is finite, as a 0-dim bool tensor on the device: the
// answer stays on the device, so checking gradients for inf and nan (as
// gradient scaling does) never waits for the stream.
at::Tensor allFinite(const at::Tensor& self) {
  at::Tensor out = at::empty({}, self.options().dtype(at::kBool));
  launchAfterCpuProbe("all_finite", {out, self}, [](std::vector<at::Tensor>& v) {
    v[0].copy_(at::isfinite(v[1]).all());
  });
  return out;
}
// LITERALINCLUDE END: FRAGMENT_KERNEL

}  // namespace

// LITERALINCLUDE START: FRAGMENT_LIBRARY
TORCH_LIBRARY_FRAGMENT(openreg, m) {
  m.def("all_finite(Tensor self) -> Tensor");
}

TORCH_LIBRARY_IMPL(openreg, PrivateUse1, m) {
  m.impl("all_finite", TORCH_FN(allFinite));
}
// LITERALINCLUDE END: FRAGMENT_LIBRARY

}  // namespace torch_openreg
