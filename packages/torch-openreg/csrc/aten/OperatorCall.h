// OperatorCall.h - one boxed operator call taken apart for a kernel: what
// the executor (Executor.cpp) and its speed layer (fast/OutVariant.cpp)
// share. Reading an operator's schema, carrying its arguments to the
// stream's worker, calling its CPU kernel there. Not the decisions about
// when to run a call (ExecutorRules.h) or how (Executor.cpp).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/FunctionRef.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/Generator.h"

namespace torch_openreg {

using Stack = torch::jit::Stack;

// Rebuilds an argument with fn applied to every tensor inside it (a tensor,
// a list of tensors, a list of optional tensors), always in the same order.
template <typename Fn>
c10::IValue mapTensors(const c10::IValue& value, Fn&& fn) {
  if (value.isTensor()) return fn(value.toTensor());
  if (value.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : value.toTensorList()) out.push_back(fn(t));
    return out;
  }
  if (value.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> out;
    for (std::optional<at::Tensor> t : value.toOptionalTensorList()) {
      out.push_back(t.has_value() ? std::optional<at::Tensor>(fn(*t)) : std::nullopt);
    }
    return out;
  }
  return value;
}

// An operator's full name, "aten::add.out", as every count reports it.
std::string operatorName(const c10::OperatorHandle& op);

bool isGeneratorArgument(const c10::Argument& argument);
// An out= argument: written, and keyword-only.
bool isOutArgument(const c10::Argument& argument);
// Whether out is functional's out= twin (add.out of add.Tensor): the same
// arguments, then one out= tensor per result.
bool isOutVariantOf(const c10::FunctionSchema& out, const c10::FunctionSchema& functional);

// What an operator's schema says about its results.
struct Signature {
  bool returnsView = false;       // a result aliases an input without writing it
  bool returnsNonTensor = false;  // bool, int, float, Scalar, ...
  std::vector<int> writtenArgument;  // per result: the argument it is (-1: new)
};
Signature readSignature(const c10::FunctionSchema& schema);

// The operands of one call, ready for a kernel. Device tensors are handed
// to the launch (takeDeviceTensors) and come back inside the kernel as CPU
// views; CPU tensors are copied (the caller may change them before the
// kernel runs); generators become seeds drawn now, in program order. The
// object itself holds no device tensor, so the worker may destroy it
// without the GIL. outputs, if any, follow args (the out= arguments of an
// out= twin).
class KernelArguments {
 public:
  KernelArguments(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args, c10::DeviceIndex device,
                  c10::ArrayRef<c10::IValue> outputs = {});
  // The device tensors, in order, for launchKernel; call once.
  std::vector<at::Tensor> takeDeviceTensors() { return std::move(deviceTensors_); }
  // Kernel only: the CPU stack for the operator's CPU kernel, the device
  // tensors replaced by views (launchKernel's, in the same order).
  Stack cpuStack(const std::vector<at::Tensor>& views) const;

 private:
  std::vector<c10::IValue> template_;  // device tensors left undefined
  std::vector<bool> placeholder_;      // per tensor, in order: a device tensor
  std::vector<at::Tensor> deviceTensors_;
  std::vector<std::pair<size_t, KernelSeed>> seeds_;
};

// The Meta kernel's results for op on args (meta tensors), or null when it
// has none or cannot know them (data-dependent shapes). An out= operator
// without a Meta kernel takes its functional twin's (Note [An out= operator
// without a Meta kernel] in OperatorCall.cpp).
std::shared_ptr<const Stack> inferOnMeta(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args);
// Why op's Meta kernel gave no answer for args: the first line of its
// refusal, or "" where it answers, has none, or cannot answer without the
// data (a NotImplementedError: nonzero, unique).
std::string metaRefusal(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args);

// Kernel only: calls op's CPU kernel on the stack, out= kernels that would
// resize their device outputs rerun with temporaries.
Stack runOnCpu(const c10::OperatorHandle& op, const KernelArguments& operands, const std::vector<at::Tensor>& views);

// Kernel only: replaces the out= arguments with empty CPU tensors for the
// CPU kernel to size and fill. Returns their positions.
std::vector<size_t> useTemporaryOutputs(const c10::FunctionSchema& schema, Stack& stack);

// Runs attempt(), a CPU kernel that may refuse what another route accepts.
// Returns true if it ran, false if it threw an error isRefusal accepts (the
// warnings it raised on the way are dropped: the user never asked for that
// attempt). Any other error is rethrown with its warnings.
bool attemptQuietly(c10::function_ref<void()> attempt, c10::function_ref<bool(const c10::Error&)> isRefusal);

// Copies a CPU result into the matching device output view. A CPU kernel
// may return an empty tensor where the Meta kernel promised a shape
// (native_batch_norm's saved statistics outside training): those outputs
// carry no information and are left as allocated.
void storeTensor(const at::Tensor& cpu, const at::Tensor& device);
void storeResult(const c10::IValue& cpu, const c10::IValue& device);

}  // namespace torch_openreg
