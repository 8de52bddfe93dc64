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
// block marked without a name yet.
void checkOperandComputed(const char* work, const at::Tensor& t);
void noteOverwritten(const char* work, const at::Tensor& t);

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
// every read. Where the mode's assumptions fix a value, the kernel that
// makes it states it (stateTimingOnlyValue): GradScaler's check finds no
// overflow, and reads of its found_inf get 0, so the optimizer steps.
// LITERALINCLUDE END: VALUES_READ_NOTE
//
// In timing-only mode, `what` reads values of type `type` to the host:
// returns true where NaN stands for them (after the warning, counted),
// throws c10::Error otherwise. Outside timing-only mode: false.
bool readsAsNaN(const char* what, c10::ScalarType type);
// What `what` (.item()) reads of one-element t in timing-only mode: the
// value a kernel stated for it (stateTimingOnlyValue in the public
// Kernel.h) while no later work made it stale, else NaN as readsAsNaN
// says. Outside timing-only mode: nullopt, and the caller reads memory.
std::optional<at::Scalar> scalarReadInTimingOnlyMode(const char* what, const at::Tensor& t);
void setStrictValueReads(bool strict);
// How many reads NaN stood for since the process started.
int64_t valuesReadAsNaN();

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
