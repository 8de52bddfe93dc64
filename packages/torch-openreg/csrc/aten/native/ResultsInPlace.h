// ResultsInPlace.h - running a CPU kernel that allocates its own results
// (no out= form, like convolution) so that they are allocated in the device
// outputs' memory, saving the copy into them. Not needed for kernels with an
// out= form: those write into the outputs directly (Launch.h).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/ScratchAllocator.h"

namespace torch_openreg {

// Kernel only: for a CPU kernel that allocates its results (it has no out=
// form), how many allocations of each output's size to pass over before
// lending it the output's memory (Note [Results written straight into device
// memory] in ScratchAllocator.cpp), learned per shape of the call. One per
// launch site, shared by the workers of every stream.
class LendingPlan {
 public:
  // A block per output (not on offer: undefined or not dense), with the
  // skips learned for operands' shapes.
  LentOutputs offer(c10::ArrayRef<at::Tensor> operands, c10::ArrayRef<at::Tensor> outputs);
  // Records which allocation of its size each result was, for the next call.
  void learn(c10::ArrayRef<at::Tensor> operands, const LentOutputs& lent, c10::ArrayRef<at::Tensor> results);

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, c10::SmallVector<int, 4>> skips_;  // by shapeKey
};

// Kernel only: leaves results[i] in outputs[i], copying unless the CPU
// kernel allocated it there already (in a block it took from lent). An
// undefined result, or an empty one where the output is not (a statistic
// the CPU kernel skipped), leaves its output as it is.
void storeResults(c10::ArrayRef<at::Tensor> outputs, std::vector<at::Tensor>& results, const LentOutputs& lent);

// LITERALINCLUDE START: COMPUTE_INTO
// Kernel only: calls compute(), a functional CPU kernel on (views of)
// operands returning one result per output (std::vector<at::Tensor>), and
// leaves each result in its output, allocated there in the first place
// where plan knows how.
template <typename Compute>
void computeInto(LendingPlan& plan, c10::ArrayRef<at::Tensor> operands, c10::ArrayRef<at::Tensor> outputs,
                 Compute compute) {
  LentOutputs lent = plan.offer(operands, outputs);
  std::vector<at::Tensor> results;
  {
    LendingScope lending(lent);
    results = compute();
  }
  plan.learn(operands, lent, results);
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
