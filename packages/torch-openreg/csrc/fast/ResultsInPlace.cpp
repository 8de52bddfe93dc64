// ResultsInPlace.cpp - speed layer: see Note [Results written straight into
// device memory] in ScratchAllocator.cpp.
// Measured when introduced: conv2d at 1M elements went from 1.07-1.47x the
// CPU's time to 0.94-1.02x (tools/bench/torch_ops.py).
#include "fast/ResultsInPlace.h"

#include <ATen/Parallel.h>

#include <ATen/ops/empty_like.h>
#include <c10/core/alignment.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include <torch_openreg/Kernel.h>

#include "aten/kernels/Launch.h"
#include "fast/RawKey.h"

namespace torch_openreg {

namespace {

// Same elements at the same offsets from their starts.
bool sameLayout(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.strides() == b.strides() && a.scalar_type() == b.scalar_type() &&
         a.is_conj() == b.is_conj() && a.is_neg() == b.is_neg();
}

bool sameView(const at::Tensor& a, const at::Tensor& b) { return a.data_ptr() == b.data_ptr() && sameLayout(a, b); }

// Whether t's memory overlaps a block that an allocation took.
bool overlapsTakenBlock(const at::Tensor& t, const LentOutputs& lent) {
  if (!t.defined() || !t.has_storage() || t.storage().data() == nullptr) return false;
  auto start = reinterpret_cast<uintptr_t>(t.storage().data());
  uintptr_t end = start + t.storage().nbytes();
  return std::any_of(lent.blocks.begin(), lent.blocks.end(), [&](const LentOutputs::Block& b) {
    auto blockStart = reinterpret_cast<uintptr_t>(b.data);
    return b.taken && start < blockStart + b.bytes && blockStart < end;
  });
}

const void* storageStart(const at::Tensor& t) {
  return t.defined() && t.has_storage() ? t.storage().data() : nullptr;
}

// Whether result, allocated at the start of output's memory, would be output.
bool wouldBeInPlace(const at::Tensor& result, const at::Tensor& output) {
  return result.storage_offset() == 0 && sameLayout(result, output);
}

// A skip no allocation matches: the output is not lent.
constexpr int kNeverLend = -1;

std::atomic<int64_t> inPlace{0};
std::atomic<int64_t> copied{0};

}  // namespace

std::string LendingPlan::keyOf(c10::ArrayRef<at::Tensor> tensors, c10::IntArrayRef arguments) {
  std::string key;
  for (const at::Tensor& t : tensors) {
    key += t.defined() ? static_cast<char>(t.scalar_type()) : 'U';
    if (!t.defined()) continue;
    appendInts(key, t.sizes());
    appendInts(key, t.strides());
  }
  appendInts(key, arguments);
  // oneDNN allocates differently when it splits the work: a kernel run by a
  // waiting host's team is another call (Note [The threads of a kernel]).
  appendRaw(key, at::get_num_threads());
  return key;
}

LentOutputs LendingPlan::offer(const std::string& key, c10::ArrayRef<at::Tensor> outputs) {
  LentOutputs lent;
  lent.blocks.resize(outputs.size());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto known = skips_.find(key);
    if (known != skips_.end() && known->second.size() == outputs.size()) {
      for (size_t i = 0; i < outputs.size(); ++i) lent.blocks[i].skip = known->second[i];
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const at::Tensor& t = outputs[i];
    // Dense: its elements fill [data_ptr, data_ptr + nbytes) exactly, nothing
    // else does. Aligned: CPU kernels may count on c10's allocation alignment.
    bool lendable = t.defined() && t.numel() != 0 && t.is_non_overlapping_and_dense() &&
                    reinterpret_cast<uintptr_t>(t.data_ptr()) % c10::gAlignment == 0;
    if (lendable) {
      lent.blocks[i].data = t.data_ptr();
      lent.blocks[i].bytes = t.nbytes();
    }
  }
  return lent;
}

void LendingPlan::learn(const std::string& key, const LentOutputs& lent, c10::ArrayRef<at::Tensor> outputs,
                        c10::ArrayRef<at::Tensor> results) {
  c10::SmallVector<int, 4> skips;
  bool changed = false;
  for (size_t i = 0; i < lent.blocks.size(); ++i) {
    const LentOutputs::Block& block = lent.blocks[i];
    int index = block.bytes == 0 ? -1 : lent.indexOf(block.bytes, storageStart(results[i]));
    int skip = block.skip;  // kept unless the result was an allocation of its output's size
    if (index >= 0) skip = wouldBeInPlace(results[i], outputs[i]) ? index : kNeverLend;
    skips.push_back(skip);
    changed |= skip != block.skip;
  }
  if (!changed) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (skips_.size() >= kMostKeys) skips_.clear();
  skips_[key] = skips;
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
    } else if (overlapsTakenBlock(result, lent)) {
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
  std::vector<int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    TORCH_CHECK(sorted[i] == static_cast<int64_t>(i), "order must list each output once");
  }
  launchKernel("compute_into_for_testing", outputs.vec(), [order](std::vector<at::Tensor>& v) {
    LendingPlan plan;
    computeInto(plan, v, {}, v, [&] {
      std::vector<at::Tensor> results(v.size());
      for (int64_t i : order) results.at(i) = at::empty_like(v[i]).fill_(static_cast<double>(i + 1));
      return results;
    });
  });
}

}  // namespace torch_openreg
