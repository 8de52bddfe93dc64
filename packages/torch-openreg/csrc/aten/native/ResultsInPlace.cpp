// ResultsInPlace.cpp - see Note [Results written straight into device
// memory] in runtime/ScratchAllocator.cpp.
#include "aten/native/ResultsInPlace.h"

#include <ATen/ops/empty_like.h>

#include <algorithm>
#include <atomic>

#include "aten/native/Launch.h"

namespace torch_openreg {

namespace {

bool sameView(const at::Tensor& a, const at::Tensor& b) {
  return a.data_ptr() == b.data_ptr() && a.sizes() == b.sizes() && a.strides() == b.strides() &&
         a.scalar_type() == b.scalar_type() && a.is_conj() == b.is_conj() && a.is_neg() == b.is_neg();
}

const void* storageStart(const at::Tensor& t) { return t.defined() && t.has_storage() ? t.storage().data() : nullptr; }

bool livesInTakenBlock(const at::Tensor& t, const LentOutputs& lent) {
  const void* start = storageStart(t);
  return std::any_of(lent.blocks.begin(), lent.blocks.end(),
                     [&](const LentOutputs::Block& b) { return b.taken && b.data == start; });
}

// What the operands' shapes are, as raw bytes: dtype, sizes and strides.
std::string shapeKey(c10::ArrayRef<at::Tensor> operands) {
  std::string key;
  auto append = [&](c10::IntArrayRef values) {
    int64_t count = static_cast<int64_t>(values.size());
    key.append(reinterpret_cast<const char*>(&count), sizeof(count));
    key.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t));
  };
  for (const at::Tensor& t : operands) {
    key += t.defined() ? static_cast<char>(t.scalar_type()) : 'U';
    if (!t.defined()) continue;
    append(t.sizes());
    append(t.strides());
  }
  return key;
}

std::atomic<int64_t> inPlace{0};
std::atomic<int64_t> copied{0};

}  // namespace

LentOutputs LendingPlan::offer(c10::ArrayRef<at::Tensor> operands, c10::ArrayRef<at::Tensor> outputs) {
  LentOutputs lent;
  lent.blocks.resize(outputs.size());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto known = skips_.find(shapeKey(operands));
    if (known != skips_.end()) {
      for (size_t i = 0; i < outputs.size(); ++i) lent.blocks[i].skip = known->second[i];
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const at::Tensor& t = outputs[i];
    // Dense: its elements fill [data_ptr, data_ptr + nbytes) exactly, nothing else does.
    if (t.defined() && t.numel() != 0 && t.is_non_overlapping_and_dense()) {
      lent.blocks[i].data = t.data_ptr();
      lent.blocks[i].bytes = t.nbytes();
    }
  }
  return lent;
}

void LendingPlan::learn(c10::ArrayRef<at::Tensor> operands, const LentOutputs& lent,
                        c10::ArrayRef<at::Tensor> results) {
  c10::SmallVector<int, 4> skips;
  bool changed = false;
  for (size_t i = 0; i < lent.blocks.size(); ++i) {
    const LentOutputs::Block& block = lent.blocks[i];
    int index = block.bytes == 0 ? -1 : lent.indexOf(block.bytes, storageStart(results[i]));
    // -1: the result was no allocation of its output's size (a view, a
    // scalar): nothing to learn.
    skips.push_back(index < 0 ? block.skip : index);
    changed |= skips.back() != block.skip;
  }
  if (!changed) return;
  std::lock_guard<std::mutex> lock(mutex_);
  skips_[shapeKey(operands)] = skips;
}

void storeResults(c10::ArrayRef<at::Tensor> outputs, std::vector<at::Tensor>& results, const LentOutputs& lent) {
  TORCH_INTERNAL_ASSERT(outputs.size() == results.size());
  for (size_t i = 0; i < results.size(); ++i) {
    at::Tensor& result = results[i];
    const at::Tensor& output = outputs[i];
    bool skipped = !result.defined() || !output.defined() || (result.numel() == 0 && output.numel() != 0);
    if (skipped || sameView(result, output)) {
      if (!skipped) ++inPlace;
      result = at::Tensor();  // nothing to store
    } else if (livesInTakenBlock(result, lent)) {
      // In the memory of some output, maybe not its own: moved out before
      // any output is written, so no store overwrites a result not yet stored.
      result = result.clone();
    }
  }
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].defined()) continue;
    outputs[i].copy_(results[i]);
    ++copied;
  }
}

ResultsInPlaceCounts resultsInPlaceCounts() { return {inPlace.load(), copied.load()}; }

void computeIntoForTesting(c10::ArrayRef<at::Tensor> outputs, std::vector<int64_t> order) {
  TORCH_CHECK(order.size() == outputs.size(), "one position per output");
  launchOnStream("compute_into_for_testing", outputs, [order](std::vector<at::Tensor>& v) {
    LendingPlan plan;
    computeInto(plan, v, v, [&] {
      std::vector<at::Tensor> results(v.size());
      for (int64_t i : order) results.at(i) = at::empty_like(v[i]).fill_(static_cast<double>(i + 1));
      return results;
    });
  });
}

}  // namespace torch_openreg
