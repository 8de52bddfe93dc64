// SpeedLayer.h - the seam between the plain path and its speed layers.
//
// Note [Deletable speed layers]
// The plain path (the executor, its launch, the kernels) is the reference a
// vendor reads; the speed layers (csrc/fast/) make it fast on this machine
// and nothing else. They meet here only: at the few points where a speed
// layer may step in, the plain path calls the hook below, whose default is
// the plain behaviour. csrc/fast/ installs its own hooks when the library
// loads (unless OPENREG_FAST_PATHS=0). No plain file includes a fast/
// header, so deleting csrc/fast/, or building with
// -DOPENREG_SPEED_LAYERS=OFF, leaves the plain path alone, unchanged.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch_openreg/Kernel.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace torch_openreg {

// LITERALINCLUDE START: SPEED_LAYER_SEAM
struct SpeedLayer {
  // The Meta kernel's answer to op's call (results sized and typed), or
  // nullptr where it has none. Plain: inferOnMeta, every call.
  std::shared_ptr<const torch::jit::Stack> (*inferOnMeta)(const c10::OperatorHandle& op,
                                                          c10::ArrayRef<c10::IValue> args);
  // The out= twin a functional operator may be queued as. Plain: none.
  std::optional<c10::OperatorHandle> (*findOutVariant)(const c10::FunctionSchema& functional);
  // Queues op as outVariant writing straight into results (fresh device
  // outputs) and returns true; false, having done nothing, where it cannot.
  // Plain: false (the executor copies the CPU kernel's results over).
  bool (*launchIntoOutputs)(const c10::OperatorHandle& op, const std::optional<c10::OperatorHandle>& outVariant,
                            const std::string& label, c10::ArrayRef<c10::IValue> args,
                            const std::vector<c10::IValue>& results, c10::DeviceIndex device);
  // Queues body over tensors on device's current stream, after
  // launchKernel's checks. Plain: the plain launch (kernels/Launch.cpp).
  void (*launch)(const char* name, c10::DeviceIndex device, const std::vector<at::Tensor>& tensors,
                 KernelBody body);
  // Kernel only: calls compute(), a functional CPU kernel returning one
  // result per output, and leaves each result in its output (outputs:
  // fresh device views, overlapping neither operands nor each other).
  // plan names the call site (tensors and arguments key its calls). Plain:
  // compute, then copy each result into its output (storeResult).
  void (*computeInto)(const char* plan, c10::ArrayRef<at::Tensor> tensors, c10::IntArrayRef arguments,
                      c10::ArrayRef<at::Tensor> outputs, const std::function<std::vector<at::Tensor>()>& compute);
  // torch.openreg.empty_cache() (alsoOnEmptyCache): releases what the speed layer caches.
  // Plain: nothing.
  void (*emptyCache)();
  // Adds the speed layer's observation hooks for its tests to testing, the
  // PyObject* of the module torch_openreg._C._testing. Plain: none.
  void (*addTestingHooks)(void* testing);
};

// The hooks in force: the plain defaults, or those a speed layer installed.
const SpeedLayer& speedLayer();

// Called by a speed layer while the library loads: its hooks replace the
// plain ones from then on (fastPathsEnabled() turns true). A hook left
// null keeps the plain default.
void installSpeedLayer(const SpeedLayer& layer);
// LITERALINCLUDE END: SPEED_LAYER_SEAM

}  // namespace torch_openreg
