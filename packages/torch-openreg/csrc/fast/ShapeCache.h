// ShapeCache.h - speed layer: the executor's Meta answers, cached (Note
// [Caching shape inference] in ShapeCache.cpp). Replaces inferOnMeta
// (aten/Executor.h) at one seam of the executor.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <memory>

namespace torch_openreg::fast {

// inferOnMeta(op, args), answered from the cache when the same question
// was asked before. The answer is shared: callers must not change it.
std::shared_ptr<const torch::jit::Stack> cachedInferOnMeta(const c10::OperatorHandle& op,
                                                           c10::ArrayRef<c10::IValue> args);

}  // namespace torch_openreg::fast
