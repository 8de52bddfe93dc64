// TimingOnlyMemory.h - memory whose values timing-only mode never computed.
//
// LITERALINCLUDE START: UNCOMPUTED_MEMORY_NOTE
// Note [Memory timing-only mode never computed]
// In timing-only mode (Note [Timing-only mode] in the runtime's stream.cpp)
// kernels and copies are queued but never run, so memory allocated then
// holds whatever its block held before: a `torch.ones` there sums to the
// freed block's old values. So the allocator marks each block it hands out
// in timing-only mode, and the first kernel or copy queued over it names
// itself on the mark ("made in timing-only mode by aten::fill_"). Work
// queued for real that reads a marked block is refused when it is queued,
// with that name; work that writes the whole block (a copy into it, fill_,
// zero_, a random fill, an out= result) clears the mark. Memory allocated
// for real and updated in timing-only mode (parameters, running statistics)
// keeps the values it had: the last ones computed, not garbage.
// The mode stays process-wide, not per thread: autograd runs the backward
// of an openreg graph on a device thread of its own, so a per-thread mode
// would compute the backward of a timing-only forward for real. A thread
// computing for real during a region gets the region's marks instead: its
// results are refused when read, never wrong.
// LITERALINCLUDE END: UNCOMPUTED_MEMORY_NOTE
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

#include <optional>
#include <vector>

#include <torch_openreg/Kernel.h>

namespace torch_openreg {

struct Block;

// The allocator's part: marks block if it is handed out in timing-only
// mode, clears its mark otherwise.
void markIfTimingOnly(Block& block);
// Whether any block was ever marked: until then no launch needs to know
// what it writes without reading (the executor skips working it out).
bool someMemoryMarked();

// Before queuing `work` (a kernel's or copy's name) over t:
//  - checkOperandComputed: work reads t, unless a WritesWithoutReading scope
//    names t's storage; throws c10::Error if t's values were never computed.
//  - noteOverwritten: work writes t without reading it.
// In timing-only mode neither throws; each names work as the maker of a
// block marked without a name yet, and forgets the values the host knew of
// it (Note [Values the host knows in timing-only mode]), unless `onlyReads`
// says that work does not change t (a copy's source).
void checkOperandComputed(const char* work, const at::Tensor& t, bool onlyReads = false);
void noteOverwritten(const char* work, const at::Tensor& t);
// Before a DLPack export of t: a tensor imported from it has no block to
// check, so memory never computed is refused here, in either mode.
void checkExportable(const at::Tensor& t);

// LITERALINCLUDE START: VALUES_READ_NOTE
// Note [Values read in timing-only mode]
// A training loop logs as it goes (print(loss.item()), print(t.cpu())):
// such a read in timing-only mode must neither stop the prediction nor
// hand back whatever the memory held. So a floating-point value read to
// the host (.item(), float(), a copy to the CPU) reads as NaN, which no
// one mistakes for a result, with a warning once per line of the program
// that reads it, and each read is counted (the prediction's report says
// how many). An integer or boolean value decides what the program does (an
// index, a size, `if loss < best`), so nothing can stand in for it: its
// read raises. Strict mode (set_timing_only(True, strict=True)) raises for
// every read. Values the host knows without computing are read exactly
// (Note [Values the host knows in timing-only mode]). Either way the copy
// to the host is queued and waited for, as on the device, so a prediction
// counts the synchronisation each read costs.
// LITERALINCLUDE END: VALUES_READ_NOTE
//
// LITERALINCLUDE START: KNOWN_VALUES_NOTE
// Note [Values the host knows in timing-only mode]
// Some values of a timing-only program need no computing: the metadata it
// copies from the host (DDP's parameter shapes and bucket indices, the
// length of a pickled object) and what a collective makes of such values
// on every rank. Training scripts read them back (DDP checks that every
// rank has the same shapes; broadcast_object_list unpickles), so NaN
// cannot stand for them. A copy from the host that fills its block with at
// most kLargestKnownValues bytes leaves the host a copy of them, and so
// does a value stated for a block (stateKnownValues: openreg-amp's
// found_inf = 0, occl's collectives on known values). A kernel whose
// tensors are known, or hold nothing yet, runs on the host too, on copies,
// so its results are known as well: a sum of lengths, a comparison of
// sizes, a small torch.zeros of integers. Reads (.item(), .tolist(), a copy to the CPU) get them exactly,
// integers too. Any other work queued over the block forgets them, since
// it did not run. The device memory is never written: once the mode ends,
// the block is still one the mode never computed.
// LITERALINCLUDE END: KNOWN_VALUES_NOTE
//
// In timing-only mode, `what` reads values of type `type` to the host:
// returns true where NaN stands for them (after the warning, counted),
// throws c10::Error otherwise. Outside timing-only mode: false.
bool readsAsNaN(const char* what, c10::ScalarType type);
// After a copy from host tensor src into the whole of dst's block in
// timing-only mode: the host keeps src's values if they are small enough.
void keepCopiedValues(const at::Tensor& dst, const at::Tensor& src);
// Storage.resize_() moved `bytes` of memory from `from` to `to`: in
// timing-only mode the values the host knew of the old memory are the new
// one's (all_gather_object grows its pickled bytes to the largest rank's).
void carryKnownValues(const c10::DataPtr& from, const c10::DataPtr& to, size_t bytes);
// Whether the host knows t's values: cheap while it knows none at all. The
// fast paths leave such operands to launchKernel, which computes them.
bool hasKnownValues(const at::Tensor& t);

// A kernel over known values runs on the host too, on copies of its
// tensors' blocks, whose values are then known: taken before the launch
// (whose checks forget the values) and run after it. It applies in
// timing-only mode when some of the kernel's tensors are known and each
// other one holds nothing yet (allocated by the mode and untouched, or
// written without being read), or when it fills integers.
class KernelOnKnownValues {
 public:
  static std::optional<KernelOnKnownValues> of(const std::vector<at::Tensor>& tensors, const KernelBody& body);
  // Runs the body; the blocks' values are then known, unless it threw.
  void run();

 private:
  // The host's copy of a block the kernel's tensors lie in: its values afterwards.
  struct HostBlock {
    Block* block;
    at::Tensor bytes;
  };
  std::vector<HostBlock> blocks_;
  std::vector<at::Tensor> views_;  // the kernel's tensors over blocks_, as its views over device memory
  KernelBody body_;
};
void setStrictValueReads(bool strict);
bool strictValueReadsOn();
// How many reads NaN stood for since the process started.
int64_t valuesReadAsNaN();
// While quiet, this thread's reads count but do not warn: its caller warns
// in its own words, naming the program's line (print(t): Note [Printing a
// tensor in timing-only mode] in torch_openreg/_printing.py). Returns the
// previous setting.
bool setQuietValueReads(bool quiet);

// While alive, the launches of this thread write these tensors without
// reading them (the executor's out= results and fill_, a random fill).
class WritesWithoutReading {
 public:
  explicit WritesWithoutReading(c10::ArrayRef<at::Tensor> written);
  ~WritesWithoutReading();
  WritesWithoutReading(const WritesWithoutReading&) = delete;
  WritesWithoutReading& operator=(const WritesWithoutReading&) = delete;

 private:
  size_t previousCount_;
};

}  // namespace torch_openreg
