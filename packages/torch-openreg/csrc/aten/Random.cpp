// Random.cpp - built-in ATen random operators registered for openreg, so
// they draw from openreg generators (the CPU fallback would use the CPU
// generator and ignore torch.openreg.manual_seed).
#include <torch/library.h>

#include "aten/kernels/Random.h"

namespace torch_openreg {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("normal_", TORCH_FN(native::normal));
  m.impl("uniform_", TORCH_FN(native::uniform));
  m.impl("random_", TORCH_FN(native::random));
  m.impl("random_.to", TORCH_FN(native::randomTo));
  m.impl("random_.from", TORCH_FN(native::randomFrom));
  m.impl("bernoulli_.float", TORCH_FN(native::bernoulli));
  m.impl("native_dropout", TORCH_FN(native::nativeDropout));
}

}  // namespace torch_openreg
