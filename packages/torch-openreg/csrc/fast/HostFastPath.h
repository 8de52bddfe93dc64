// HostFastPath.h - speed layer: when an operator may take the host fast path
// (Note [The host fast path] in HostFastPath.cpp), shared by the functional
// operators there and the in-place ones in InPlaceFastPath.cpp. Not the
// operators themselves.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

#include <initializer_list>

namespace torch_openreg {

// The dtypes that every fast path's CPU kernel accepts.
bool fastPathDtype(at::ScalarType dtype);

// A scalar argument that the CPU kernels take for dtype.
bool plainScalar(const at::Scalar& scalar, at::ScalarType dtype);

// Every operand a contiguous openreg tensor of the first one's device and
// floating dtype (fastPathDtype).
bool plainOperands(std::initializer_list<const at::Tensor*> operands);

}  // namespace torch_openreg
