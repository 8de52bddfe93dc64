// TimingOnlyMemory.cpp - Note [Memory timing-only mode never computed].
#include "runtime/TimingOnlyMemory.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <ATen/record_function.h>

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

// Guards every block's knownValues (Note [Values the host knows in timing-only mode]).
std::mutex knownValuesLock;

// How many blocks have known values: while none do, no launch looks further.
std::atomic<int64_t> blocksWithKnownValues{0};

void forgetKnownValues(Block& block) {
  if (!block.hasKnownValues.exchange(false)) return;  // the common case: none, and no lock taken
  --blocksWithKnownValues;
  std::lock_guard<std::mutex> lock(knownValuesLock);
  std::vector<char>().swap(block.knownValues);
}

// In timing-only mode, the first work over a block marked by the allocator is what made it. Work that may
// change it makes the values the host knew of it unknown.
void nameMaker(Block& block, const char* work, bool onlyReads = false) {
  if (!onlyReads) forgetKnownValues(block);
  const char* mark = kOnlyAllocated;
  block.uncomputedBy.compare_exchange_strong(mark, lasting(work));
}

// The block holding t's values as the host knows them, if it does. While the host knows none (every
// program that never enters timing-only mode), an atomic load is all a copy or launch pays.
Block* blockWithKnownValues(const at::Tensor& t) {
  if (blocksWithKnownValues.load(std::memory_order_relaxed) == 0) return nullptr;
  if (!timingOnly() || !isOpenRegTensor(t) || t.is_conj() || t.is_neg()) return nullptr;
  Block* block = blockOf(t.storage().data_ptr());
  return block != nullptr && block->hasKnownValues.load(std::memory_order_acquire) ? block : nullptr;
}

// A CPU tensor shaped as t over `size` bytes at `data` (the host's copy of t's storage), or undefined if t
// reaches past them. `keep` keeps the bytes alive as long as the view (nothing: the caller does).
at::Tensor viewOver(void* data, size_t size, const at::Tensor& t, std::function<void(void*)> keep = [](void*) {}) {
  int64_t last = t.storage_offset();
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  bool inside = t.numel() == 0 || (last + 1) * static_cast<int64_t>(t.element_size()) <= static_cast<int64_t>(size);
  if (!inside) return at::Tensor();
  int64_t elements = static_cast<int64_t>(size) / static_cast<int64_t>(t.element_size());
  return at::from_blob(data, {elements}, std::move(keep), at::TensorOptions().dtype(t.scalar_type()))
      .as_strided(t.sizes(), t.strides(), t.storage_offset());
}

at::Tensor viewOver(const at::Tensor& bytes, const at::Tensor& t) {
  return viewOver(bytes.data_ptr(), static_cast<size_t>(bytes.numel()), t, [bytes](void*) {});
}

// Set once a block is marked (someMemoryMarked).
std::atomic<bool> marked{false};

}  // namespace

void markIfTimingOnly(Block& block) {
  forgetKnownValues(block);
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

namespace {

[[noreturn]] void refuseNeverComputed(const char* work, const at::Tensor& t, const char* maker) {
  std::string made = *maker == '\0' ? std::string("allocated in timing-only mode and never written")
                                    : "made in timing-only mode by " + std::string(maker);
  TORCH_CHECK(false, "openreg: ", work, " reads a tensor on ", t.device(), " whose values were never computed: it "
              "was ", made, " (torch.openreg.set_timing_only(True), OPENREG_TIMING_ONLY=1 or "
              "openreg_perf.simulate(..., execute=False)), which queues work without running it. Compute it "
              "again outside timing-only mode, or overwrite it for real first (copy_, fill_, zero_)");
}

}  // namespace

void checkOperandComputed(const char* work, const at::Tensor& t, bool onlyReads) {
  Block* block = t.defined() ? blockOf(t.storage().data_ptr()) : nullptr;
  if (block == nullptr) return;
  const char* maker = block->uncomputedBy.load();
  if (maker == nullptr) return;  // the common case: computed values
  for (const c10::StorageImpl* written : writtenWithoutReading) {
    if (written == t.storage().unsafeGetStorageImpl()) return noteOverwritten(work, t);
  }
  if (timingOnly()) return nameMaker(*block, work, onlyReads);
  refuseNeverComputed(work, t, maker);
}

void checkExportable(const at::Tensor& t) {
  Block* block = t.defined() ? blockOf(t.storage().data_ptr()) : nullptr;
  const char* maker = block != nullptr ? block->uncomputedBy.load() : nullptr;
  if (maker != nullptr) refuseNeverComputed("a DLPack export (its importer reads the memory unchecked)", t, maker);
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
thread_local bool quietValueReads = false;
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
  if (quietValueReads) return true;
  TORCH_WARN("openreg: ", what, " in timing-only mode reads a value that was never computed: NaN stands for it ",
             "(Note [Values read in timing-only mode]; set_timing_only(True, strict=True) raises instead)");
  return true;
}

std::optional<at::Tensor> knownValues(const at::Tensor& t) {
  Block* block = blockWithKnownValues(t);
  if (block == nullptr) return std::nullopt;
  at::DisableRecordFunctionGuard unseen;  // the host's own work: no operator of the program (openreg-perf records them)
  std::lock_guard<std::mutex> lock(knownValuesLock);
  if (!block->hasKnownValues.load()) return std::nullopt;  // forgotten meanwhile
  at::Tensor view = viewOver(block->knownValues.data(), block->knownValues.size(), t);
  if (!view.defined()) return std::nullopt;
  return view.clone(at::MemoryFormat::Preserve);
}

void stateKnownValues(const at::Tensor& t, const at::Tensor& values) {
  bool valid = isOpenRegTensor(t) && values.defined() && !isOpenRegTensor(values) && values.sizes() == t.sizes();
  auto described = [](const at::Tensor& x) { return x.defined() ? x.toString() : std::string("an undefined tensor"); };
  TORCH_CHECK(valid, "stateKnownValues: t must be an openreg tensor and values a host tensor of its shape; got ",
              described(t), " and ", described(values));
  Block* block = timingOnly() ? blockOf(t.storage().data_ptr()) : nullptr;
  // Computed memory keeps its values on the device; the conjugate and negative bits are the view's.
  if (block == nullptr || block->uncomputedBy.load() == nullptr || t.is_conj() || t.is_neg()) return;
  at::DisableRecordFunctionGuard unseen;
  std::lock_guard<std::mutex> lock(knownValuesLock);
  if (!block->hasKnownValues.load()) {
    // Known values are the whole storage's: a part of a block whose rest is unknown stays unknown.
    if (!coversItsStorage(t) || t.storage().nbytes() > static_cast<size_t>(kLargestKnownValues)) return;
    block->knownValues.assign(t.storage().nbytes(), 0);
  }
  at::Tensor view = viewOver(block->knownValues.data(), block->knownValues.size(), t);
  if (!view.defined()) return;
  view.copy_(values);
  if (!block->hasKnownValues.exchange(true)) ++blocksWithKnownValues;
}

void carryKnownValues(const c10::DataPtr& from, const c10::DataPtr& to, size_t bytes) {
  Block *old = blockOf(from), *fresh = blockOf(to);  // fresh: allocated in timing-only mode, so marked
  bool known = timingOnly() && old != nullptr && fresh != nullptr && old->hasKnownValues.load();
  if (!known || bytes > static_cast<size_t>(kLargestKnownValues)) return;
  std::lock_guard<std::mutex> lock(knownValuesLock);
  fresh->knownValues = old->knownValues;
  fresh->knownValues.resize(bytes, 0);  // beyond the old memory: nothing a program reads yet
  if (!fresh->hasKnownValues.exchange(true)) ++blocksWithKnownValues;
}

bool hasKnownValues(const at::Tensor& t) { return blockWithKnownValues(t) != nullptr; }

namespace {

bool writtenWithoutBeingRead(const at::Tensor& t) {
  return std::any_of(writtenWithoutReading.begin(), writtenWithoutReading.end(),
                     [&](const c10::StorageImpl* written) { return written == t.storage().unsafeGetStorageImpl(); });
}

// Holds nothing a correct program reads: memory the mode allocated (small enough for the host to know),
// untouched since, or written whole without being read.
bool holdsNothingYet(const at::Tensor& t) {
  Block* block = blockOf(t.storage().data_ptr());
  if (block == nullptr || t.storage().nbytes() > static_cast<size_t>(kLargestKnownValues)) return false;
  const char* maker = block->uncomputedBy.load();
  return maker == kOnlyAllocated || (maker != nullptr && coversItsStorage(t) && writtenWithoutBeingRead(t));
}

// The host's copy of t's block: its known values, or zeros where it holds nothing yet; undefined otherwise.
at::Tensor hostCopyOfBlock(const at::Tensor& t) {
  if (Block* block = blockWithKnownValues(t)) {
    std::lock_guard<std::mutex> lock(knownValuesLock);
    if (block->hasKnownValues.load()) {
      at::Tensor bytes = at::empty({static_cast<int64_t>(block->knownValues.size())}, at::kByte);
      std::copy(block->knownValues.begin(), block->knownValues.end(), static_cast<char*>(bytes.data_ptr()));
      return bytes;
    }
  }
  return holdsNothingYet(t) ? at::zeros({static_cast<int64_t>(t.storage().nbytes())}, at::kByte) : at::Tensor();
}

}  // namespace

std::optional<KernelOnKnownValues> KernelOnKnownValues::of(const std::vector<at::Tensor>& tensors,
                                                           const KernelBody& body) {
  // Its values follow from what the host knows: some operands are, or it fills integers (sizes, counts, flags)
  // from its scalars. Not floating-point fills: those are a step's data (a gradient's seed, a norm's weight),
  // and known operands would take the general route where the device's program takes the fast path. Both
  // tests cost an atomic load or two on a launch outside timing-only mode (the executor's scope of written
  // tensors is empty there).
  bool someKnown = std::any_of(tensors.begin(), tensors.end(), [](const at::Tensor& t) { return hasKnownValues(t); });
  auto filledInteger = [](const at::Tensor& t) {
    bool integers = c10::isIntegralType(t.scalar_type(), /*includeBool=*/true);
    return integers && writtenWithoutBeingRead(t) && holdsNothingYet(t);
  };
  bool fillsIntegers = !writtenWithoutReading.empty() && std::all_of(tensors.begin(), tensors.end(), filledInteger);
  if ((!someKnown && !fillsIntegers) || !timingOnly()) return std::nullopt;
  at::DisableRecordFunctionGuard unseen;  // the host's own work: no operator of the program (openreg-perf records them)
  KernelOnKnownValues kernel;
  for (const at::Tensor& t : tensors) {
    // One host copy per block, so that tensors sharing memory on the device share it on the host.
    Block* block = blockOf(t.storage().data_ptr());
    auto copied = std::find_if(kernel.blocks_.begin(), kernel.blocks_.end(),
                               [&](const HostBlock& seen) { return seen.block == block; });
    if (copied == kernel.blocks_.end()) {
      at::Tensor bytes = block != nullptr ? hostCopyOfBlock(t) : at::Tensor();
      if (!bytes.defined()) return std::nullopt;
      copied = kernel.blocks_.insert(kernel.blocks_.end(), HostBlock{block, bytes});
    }
    at::Tensor view = viewOver(copied->bytes, t);
    if (!view.defined()) return std::nullopt;
    kernel.views_.push_back(view);
  }
  kernel.body_ = body;
  return kernel;
}

void KernelOnKnownValues::run() {
  at::DisableRecordFunctionGuard unseen;
  try {
    body_(views_);
  } catch (const std::exception&) {
    return;  // the device's kernel did not run either: the values stay unknown
  }
  std::lock_guard<std::mutex> lock(knownValuesLock);
  for (const HostBlock& copied : blocks_) {
    const char* bytes = static_cast<const char*>(copied.bytes.data_ptr());
    copied.block->knownValues.assign(bytes, bytes + copied.bytes.numel());
    if (!copied.block->hasKnownValues.exchange(true)) ++blocksWithKnownValues;
  }
}

void stateTimingOnlyValue(const at::Tensor& t, double value) {
  TORCH_CHECK(isOpenRegTensor(t) && t.numel() == 1, "stateTimingOnlyValue: t must be an openreg tensor of one "
              "element, not ", t.defined() ? t.toString() : std::string("an undefined tensor"));
  stateKnownValues(t, at::full(t.sizes(), value, at::TensorOptions().dtype(at::kDouble)));
}

void keepCopiedValues(const at::Tensor& dst, const at::Tensor& src) {
  // Only memory the mode allocated can be known: until some is, a copy pays an atomic load.
  if (!someMemoryMarked() || dst.sizes() != src.sizes() || !timingOnly()) return;
  stateKnownValues(dst, src);
}

void setStrictValueReads(bool strict) {
  strictValueReads = strict;
}

bool strictValueReadsOn() { return strictValueReads.load(); }

int64_t valuesReadAsNaN() {
  return nanReads.load();
}

bool setQuietValueReads(bool quiet) {
  return std::exchange(quietValueReads, quiet);
}

}  // namespace torch_openreg
