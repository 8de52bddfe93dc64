// ResultsInPlace.h - speed layer: running a CPU kernel that allocates its own results
// (no out= form, like convolution) so that they are allocated in the device
// outputs' memory, saving the copy into them. Not needed for kernels with an
// out= form: those write into the outputs directly (OutVariant.h). With fast
// paths off, computeInto computes and copies.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "fast/FastPaths.h"
#include "fast/ScratchAllocator.h"

namespace torch_openreg {

// Kernel only: for a CPU kernel that allocates its results (it has no out=
// form), how many allocations of each output's size to pass over before
// lending it the output's memory (Note [Results written straight into device
// memory] in ScratchAllocator.cpp), learned per shape of the call. One per
// launch site, shared by the workers of every stream.
class LendingPlan {
 public:
  // What a plan knows a call by: the dtypes, sizes and strides of tensors
  // (operands and outputs) and the call's other arguments, as raw bytes.
  static std::string keyOf(c10::ArrayRef<at::Tensor> tensors, c10::IntArrayRef arguments);
  // A block per output (not on offer: undefined, not dense, or not aligned
  // as the CPU allocator aligns), with the skips learned under key.
  LentOutputs offer(const std::string& key, c10::ArrayRef<at::Tensor> outputs);
  // Records which allocation of its size each result was, if that result
  // would then be in place; else that its output is not to be lent.
  void learn(const std::string& key, const LentOutputs& lent, c10::ArrayRef<at::Tensor> outputs,
             c10::ArrayRef<at::Tensor> results);

 private:
  static constexpr size_t kMostKeys = 4096;  // then start again: dynamic shapes must not grow it forever
  std::mutex mutex_;
  std::unordered_map<std::string, c10::SmallVector<int, 4>> skips_;
};

// Kernel only: leaves results[i] in outputs[i], copying unless the CPU
// kernel allocated it there already (in a block it took from lent). An
// undefined result, or an empty one where the output is not (a statistic
// the CPU kernel skipped), leaves its output as it is.
void storeResults(c10::ArrayRef<at::Tensor> outputs, std::vector<at::Tensor>& results, const LentOutputs& lent);

// Whether any output is large enough for the scratch allocator to lend.
inline bool anyLendable(c10::ArrayRef<at::Tensor> outputs) {
  return std::any_of(outputs.begin(), outputs.end(),
                     [](const at::Tensor& t) { return t.defined() && t.nbytes() >= kSmallestScratchBytes; });
}

// LITERALINCLUDE START: COMPUTE_INTO
// Kernel only: calls compute(), a functional CPU kernel returning one result
// per output (std::vector<at::Tensor>), and leaves each result in its
// output, allocated there in the first place where plan knows how. The
// call is known to plan by keyOf(tensors, arguments).
// Contract: outputs are fresh device tensors, overlapping neither the
// operands nor each other, and compute keeps no tensor alive beyond its
// return but its results. Then a wrong guess of the plan costs a copy,
// never a wrong result.
template <typename Compute>
void computeInto(LendingPlan& plan, c10::ArrayRef<at::Tensor> tensors, c10::IntArrayRef arguments,
                 c10::ArrayRef<at::Tensor> outputs, Compute compute) {
  // A small kernel's outputs are never lent: no plan to consult or teach.
  bool lendable = anyLendable(outputs);
  std::string key = lendable ? LendingPlan::keyOf(tensors, arguments) : std::string();
  LentOutputs lent = lendable ? plan.offer(key, outputs) : LentOutputs{};
  std::vector<at::Tensor> results;
  {
    LendingScope lending(lent);
    results = compute();
  }
  TORCH_INTERNAL_ASSERT(results.size() == outputs.size(), "one result per output");
  if (lendable) plan.learn(key, lent, outputs, results);
  storeResults(outputs, results, lent);
}
// LITERALINCLUDE END: COMPUTE_INTO

// Results stored by storeResults since the process started: found in place
// in their outputs, or copied there.
struct ResultsInPlaceCounts {
  int64_t inPlace;
  int64_t copied;
};
ResultsInPlaceCounts resultsInPlaceCounts();

// Tests only: a kernel on the stream of outputs (openreg tensors of one
// size) whose CPU part allocates one result per output, in the given order,
// fills result i with i + 1 and stores them through computeInto with a
// fresh plan: the first allocation then lands in outputs[0]'s memory,
// whichever result it is.
void computeIntoForTesting(c10::ArrayRef<at::Tensor> outputs, std::vector<int64_t> order);

}  // namespace torch_openreg
