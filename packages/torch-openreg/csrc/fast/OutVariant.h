// OutVariant.h - speed layer: the executor runs a functional operator as its
// out= twin, so the CPU kernel writes its results straight into the device
// outputs (Note [Writing results straight into device memory] in
// OutVariant.cpp). Takes over at one seam of the executor's runAsync.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <optional>
#include <string>
#include <vector>

namespace torch_openreg::fast {

// The out= twin of a functional operator with a CPU kernel of its own, or
// nothing.
std::optional<c10::OperatorHandle> findOutVariant(const c10::FunctionSchema& functional);

// Queues op as outVariant, its out= twin (findOutVariant), as a kernel
// named label writing into results (fresh device outputs), and returns
// true; false, having done nothing, when op has no out= twin (it has none
// with fast paths off) or a result is not one tensor.
bool launchIntoOutputs(const c10::OperatorHandle& op, const std::optional<c10::OperatorHandle>& outVariant,
                       const std::string& label, c10::ArrayRef<c10::IValue> args,
                       const std::vector<c10::IValue>& results, c10::DeviceIndex device);

}  // namespace torch_openreg::fast
