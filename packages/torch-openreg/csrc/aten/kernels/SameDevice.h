// SameDevice.h - the device check for kernels registered by hand.
//
// PyTorch generates this check around the kernels of its built-in backends;
// a kernel registered with m.impl gets no such wrapper, so it calls this
// before touching any operand. Not a dtype or shape check.
#pragma once

#include <ATen/core/op_registration/adaption.h>

#include <initializer_list>
#include <optional>
#include <utility>

namespace torch_openreg {

// LITERALINCLUDE START: SAME_DEVICE_CHECK
// Unless every defined tensor is on one device, throws PyTorch's message:
// "Expected all tensors to be on the same device, but got <name> is on
// openreg:1, different from other tensors on openreg:0 (when checking
// argument in method <op>)". CPU tensors are refused, even 0-dim ones.
inline void checkSameDevice(const char* op,
                            std::initializer_list<std::pair<const char*, const at::Tensor*>> args) {
  std::optional<at::Device> common;
  for (const auto& [name, tensor] : args) {
    c10::impl::check_and_update_common_device(common, *tensor, op, name);
  }
}
// LITERALINCLUDE END: SAME_DEVICE_CHECK

}  // namespace torch_openreg
