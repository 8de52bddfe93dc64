// Stub.cpp - registration scenario "DispatchStub": abs runs through PyTorch's
// own native implementation, which calls abs_stub with the device type
// PrivateUse1; openreg fills that stub's PrivateUse1 entry. Not a pattern
// for operators without a stub (see CustomOps.cpp and Structured.cpp).
#include <ATen/TensorIterator.h>
#include <ATen/native/UnaryOps.h>
#include <ATen/ops/abs_native.h>
#include <torch/library.h>

#include "aten/kernels/CpuProbe.h"

namespace torch_openreg {
namespace {

// LITERALINCLUDE START: STUB_KERNEL
// PyTorch's abs_out built `iter` over the device tensors: devices and dtypes
// are checked and the output is resized before this runs. The kernel builds
// the same iterator over CPU views of the operands and calls the stub's CPU
// entry, so openreg computes exactly what the CPU computes.
void absKernel(at::TensorIteratorBase& iter) {
  launchAfterCpuProbe("abs", {iter.output(), iter.input()}, [](std::vector<at::Tensor>& v) {
    at::TensorIterator cpuIter = at::TensorIterator::unary_op(v[0], v[1]);
    at::native::abs_stub(c10::DeviceType::CPU, cpuIter);
  });
}
// LITERALINCLUDE END: STUB_KERNEL

}  // namespace
}  // namespace torch_openreg

// LITERALINCLUDE START: STUB_REGISTRATION
// The stub is declared in at::native, so its registration must be made there.
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(abs_stub, &torch_openreg::absKernel)
}  // namespace at::native

namespace torch_openreg {
// abs.out's CPU and CUDA kernel is the device-generic at::native::abs_out; it
// becomes openreg's too. abs and abs_ are CompositeExplicitAutograd kernels
// that call abs.out, so they need no registration of their own.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("abs.out", TORCH_FN(at::native::abs_out));
}
}  // namespace torch_openreg
// LITERALINCLUDE END: STUB_REGISTRATION
