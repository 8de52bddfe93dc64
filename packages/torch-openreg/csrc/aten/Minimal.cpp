// Minimal.cpp - registration scenario "built-in ATen operators": the minimal
// set of kernels a PrivateUse1 backend registers before anything else works.
// Each entry binds an aten operator to a kernel in aten/kernels/, or to
// PyTorch's own kernel where that one is device-generic.
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <torch/library.h>

#include "aten/kernels/Minimal.h"

namespace torch_openreg {

// LITERALINCLUDE START: MINIMAL_OPERATOR_SET
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(native::empty));
  m.impl("empty_strided", TORCH_FN(native::emptyStrided));
  m.impl("as_strided", TORCH_FN(native::asStrided));
  m.impl("resize_", TORCH_FN(native::resize));
  m.impl("_reshape_alias", TORCH_FN(native::reshapeAlias));
  m.impl("view", TORCH_FN(native::view));
  // Views cannot take the CPU fallback; PyTorch's own kernels are device-generic.
  m.impl("view_as_real", TORCH_FN(at::native::view_as_real));
  m.impl("view_as_complex", TORCH_FN(at::native::view_as_complex));
  m.impl("set_.source_Tensor", TORCH_FN(native::setSourceTensor));
  m.impl("set_.source_Storage", TORCH_FN(native::setSourceStorage));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(native::setSourceStorageOffset));
  m.impl("_copy_from", TORCH_FN(native::copyFrom));
  m.impl("_copy_from_and_resize", TORCH_FN(native::copyFromAndResize));
  m.impl("_local_scalar_dense", TORCH_FN(native::localScalarDense));
  m.impl("record_stream", TORCH_FN(native::recordStream));
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(native::hasCompatibleShallowCopyType));
}
// LITERALINCLUDE END: MINIMAL_OPERATOR_SET

}  // namespace torch_openreg

namespace torch_openreg {

// LITERALINCLUDE START: MATH_BITS_FALLTHROUGH
// _copy_from handles conjugated and negated views itself (kernels/Copy.cpp).
// Without these fallthroughs, PyTorch would resolve the bit first by cloning
// the view, and cloning on openreg copies through _copy_from: an endless loop.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
}
// LITERALINCLUDE END: MATH_BITS_FALLTHROUGH

}  // namespace torch_openreg
