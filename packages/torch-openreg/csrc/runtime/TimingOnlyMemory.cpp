// TimingOnlyMemory.cpp - Note [Memory timing-only mode never computed].
#include "runtime/TimingOnlyMemory.h"

#include <atomic>
#include <limits>
#include <mutex>
#include <string>
#include <unordered_set>

#include <torch_openreg/Kernel.h>

#include "runtime/AllocatorBlocks.h"
#include "runtime/Device.h"
#include "runtime/DeviceAllocator.h"

namespace torch_openreg {
namespace {

// A block marked by the allocator, before any work over it named itself.
const char kOnlyAllocated[] = "";

// Work names live as long as the marks that point at them.
const char* lasting(const char* work) {
  static std::mutex mutex;
  static std::unordered_set<std::string> names;
  std::lock_guard<std::mutex> lock(mutex);
  return names.insert(work).first->c_str();
}

// The storages this thread's launches write without reading (WritesWithoutReading).
thread_local c10::SmallVector<const c10::StorageImpl*, 4> writtenWithoutReading;

bool coversItsStorage(const at::Tensor& t) {
  return t.storage_offset() == 0 && t.is_non_overlapping_and_dense() &&
         static_cast<size_t>(t.numel()) * t.element_size() == t.storage().nbytes();
}

// In timing-only mode, the first work over a block marked by the allocator is what made it. Any work
// over it may change it: a value stated for it is forgotten.
void nameMaker(Block& block, const char* work) {
  block.hasStatedValue.store(false, std::memory_order_release);
  const char* mark = kOnlyAllocated;
  block.uncomputedBy.compare_exchange_strong(mark, lasting(work));
}

// Set once a block is marked (someMemoryMarked).
std::atomic<bool> marked{false};

}  // namespace

void markIfTimingOnly(Block& block) {
  bool mark = timingOnly();
  block.uncomputedBy.store(mark ? kOnlyAllocated : nullptr);
  if (mark) marked.store(true, std::memory_order_relaxed);
}

bool someMemoryMarked() { return marked.load(std::memory_order_relaxed); }

void noteOverwritten(const char* work, const at::Tensor& t) {
  Block* block = t.defined() ? blockOf(t.storage().data_ptr()) : nullptr;
  if (block == nullptr || block->uncomputedBy.load() == nullptr) return;
  if (timingOnly()) return nameMaker(*block, work);
  // A write of part of the block leaves the rest uncomputed.
  if (coversItsStorage(t)) block->uncomputedBy.store(nullptr);
}

void checkOperandComputed(const char* work, const at::Tensor& t) {
  Block* block = t.defined() ? blockOf(t.storage().data_ptr()) : nullptr;
  if (block == nullptr) return;
  const char* maker = block->uncomputedBy.load();
  if (maker == nullptr) return;  // the common case: computed values
  for (const c10::StorageImpl* written : writtenWithoutReading) {
    if (written == t.storage().unsafeGetStorageImpl()) return noteOverwritten(work, t);
  }
  if (timingOnly()) return nameMaker(*block, work);
  std::string made = *maker == '\0' ? std::string("allocated in timing-only mode and never written")
                                    : "made in timing-only mode by " + std::string(maker);
  TORCH_CHECK(false, "openreg: ", work, " reads a tensor on ", t.device(), " whose values were never computed: it "
              "was ", made, " (torch.openreg.set_timing_only(True), OPENREG_TIMING_ONLY=1 or "
              "openreg_perf.simulate(..., execute=False)), which queues work without running it. Compute it "
              "again outside timing-only mode, or overwrite it for real first (copy_, fill_, zero_)");
}

WritesWithoutReading::WritesWithoutReading(c10::ArrayRef<at::Tensor> written)
    : previousCount_(writtenWithoutReading.size()) {
  for (const at::Tensor& t : written) {
    if (t.defined()) writtenWithoutReading.push_back(t.storage().unsafeGetStorageImpl());
  }
}

WritesWithoutReading::~WritesWithoutReading() { writtenWithoutReading.resize(previousCount_); }

namespace {
std::atomic<bool> strictValueReads{false};
std::atomic<int64_t> nanReads{0};
}  // namespace

// Note [Values read in timing-only mode]
bool readsAsNaN(const char* what, c10::ScalarType type) {
  if (!timingOnly()) return false;
  if (strictValueReads.load()) checkValuesComputed(what);
  TORCH_CHECK(c10::isFloatingType(type) || c10::isComplexType(type), "openreg: ", what, " needs values of device "
              "memory, and openreg runs in timing-only mode, which computes none. This value is a ", type, ": an "
              "integer or boolean decides what the program does (an index, a size, a branch), so nothing can stand "
              "in for it. Leave it out of the region, or predict with execute=True");
  ++nanReads;
  TORCH_WARN("openreg: ", what, " in timing-only mode reads a value that was never computed: NaN stands for it ",
             "(Note [Values read in timing-only mode]; set_timing_only(True, strict=True) raises instead)");
  return true;
}

void stateTimingOnlyValue(const at::Tensor& t, double value) {
  TORCH_CHECK(isOpenRegTensor(t) && t.numel() == 1, "stateTimingOnlyValue: t must be an openreg tensor of one "
              "element, not ", t.defined() ? t.toString() : std::string("an undefined tensor"));
  Block* block = timingOnly() ? blockOf(t.storage().data_ptr()) : nullptr;
  if (block == nullptr || block->uncomputedBy.load() == nullptr) return;  // computed memory keeps its values
  block->statedValue.store(value, std::memory_order_relaxed);
  block->hasStatedValue.store(true, std::memory_order_release);
}

std::optional<at::Scalar> scalarReadInTimingOnlyMode(const char* what, const at::Tensor& t) {
  if (!timingOnly()) return std::nullopt;
  Block* block = blockOf(t.storage().data_ptr());
  if (block != nullptr && block->hasStatedValue.load(std::memory_order_acquire)) {
    return at::Scalar(block->statedValue.load(std::memory_order_relaxed));
  }
  readsAsNaN(what, t.scalar_type());  // throws where nothing can stand in for the value
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  return c10::isComplexType(t.scalar_type()) ? at::Scalar(c10::complex<double>(kNaN, kNaN)) : at::Scalar(kNaN);
}

void setStrictValueReads(bool strict) {
  strictValueReads = strict;
}

int64_t valuesReadAsNaN() {
  return nanReads.load();
}

}  // namespace torch_openreg
