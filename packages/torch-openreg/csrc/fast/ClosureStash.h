// ClosureStash.h - speed layer: recycles the memory of kernel closures
// between the launching threads and the stream workers, instead of a
// malloc on the host and a free on the worker per launch. Used by the fast
// launches (FastLaunch.h); openreg.hpp's plain openreg::launch allocates
// with new and lets the worker delete.
// Measured when it was introduced: with the stash a 1-element `a + b` cost
// the host 0.5-0.6 us more than the CPU's, against 1.0 us before.
#pragma once

#include <openreg/openreg.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <new>
#include <type_traits>
#include <utility>

namespace torch_openreg::fast {
namespace detail {

// Note [Who frees a kernel's closure]
// The launching thread allocates a kernel's closure and the stream's worker
// destroys it. If the worker also freed the memory, every launch would make
// the two threads take turns on the C library allocator's lock for the
// launching thread's heap. So the worker only destroys the closure and
// pushes its memory on retiredClosureBlocks, and launching threads reuse it.
// The host and the worker run on two cores, and a cache line that one
// writes costs the other a round trip between cores when it touches the
// line next (60 ns to over 700 ns on a VM), so:
//  - a launching thread keeps a stash of blocks by size, and takes the
//    worker's whole list only once its stash has none of the size it needs
//    and kLaunchesPerCollection launches have passed since it last did:
//    taking the list is an atomic exchange on a line the worker writes;
//  - the block the next launch of the same size will take is fetched into
//    the launching core's cache ahead of time (prefetchForWrite);
//  - closures (and the list's head) take whole cache lines, so a closure
//    the worker is running shares no line with one the host is building.
constexpr size_t kCacheLine = 64;

struct RetiredClosure {
  RetiredClosure* next;
  size_t lines;
};
// One list for the whole library (an inline variable).
alignas(kCacheLine) inline std::atomic<RetiredClosure*> retiredClosureBlocks{nullptr};

inline size_t closureLines(size_t size) {
  return (std::max(size, sizeof(RetiredClosure)) + kCacheLine - 1) / kCacheLine;
}

inline void freeClosureBlock(void* block) { ::operator delete(block, std::align_val_t{kCacheLine}); }

inline void prefetchForWrite(const void* block, size_t lines) {
  for (size_t line = 0; line < lines; ++line) {
    __builtin_prefetch(static_cast<const char*>(block) + line * kCacheLine, /*rw=*/1);
  }
}

// One launching thread's blocks (see the Note above).
class ClosureStash {
 public:
  static constexpr size_t kLaunchesPerCollection = 32;

  ClosureStash() = default;
  ClosureStash(const ClosureStash&) = delete;
  ClosureStash& operator=(const ClosureStash&) = delete;
  ~ClosureStash() {
    for (RetiredClosure*& list : bySize_) freeAll(list);
    freeAll(collected_);
  }

  // A block of `lines` cache lines, or null for the caller to allocate one.
  void* take(size_t lines) {
    ++launches_;
    bool stashed = lines < kSizes;  // larger blocks are freed, not reused
    if (stashed && bySize_[lines] == nullptr) sortCollected(lines);
    if ((!stashed || bySize_[lines] == nullptr) && launches_ >= kLaunchesPerCollection) {
      launches_ = 0;
      sortCollected(kSizes);  // all of it, before the list is replaced
      collected_ = retiredClosureBlocks.exchange(nullptr, std::memory_order_acquire);
      if (stashed) sortCollected(lines);
    }
    if (!stashed || bySize_[lines] == nullptr) return nullptr;
    RetiredClosure* block = bySize_[lines];
    bySize_[lines] = block->next;
    --counts_[lines];
    // The block the next launch of this size will take: the next one filed,
    // or else, most likely, the next one collected.
    RetiredClosure* next = bySize_[lines] != nullptr ? bySize_[lines] : collected_;
    if (next != nullptr) prefetchForWrite(next, lines);
    return block;
  }

 private:
  static constexpr size_t kSizes = 32;  // blocks of fewer lines are stashed
  static constexpr size_t kMaxPerSize = 64;

  // Files collected blocks by size (freeing those not stashed) until one of
  // `lines` lines is found; all of them for lines == kSizes.
  void sortCollected(size_t lines) {
    while (collected_ != nullptr && (lines == kSizes || bySize_[lines] == nullptr)) {
      RetiredClosure* block = collected_;
      collected_ = block->next;
      if (block->lines >= kSizes || counts_[block->lines] == kMaxPerSize) {
        freeClosureBlock(block);
        continue;
      }
      block->next = bySize_[block->lines];
      bySize_[block->lines] = block;
      ++counts_[block->lines];
    }
  }

  static void freeAll(RetiredClosure*& list) {
    while (list != nullptr) {
      RetiredClosure* next = list->next;
      freeClosureBlock(list);
      list = next;
    }
  }

  RetiredClosure* bySize_[kSizes] = {};
  size_t counts_[kSizes] = {};
  RetiredClosure* collected_ = nullptr;  // taken from the worker, not yet sorted
  size_t launches_ = 0;
};

inline void* allocateClosure(size_t size) {
  thread_local ClosureStash stash;
  size_t lines = closureLines(size);
  if (void* reused = stash.take(lines)) return reused;
  return ::operator new(lines * kCacheLine, std::align_val_t{kCacheLine}, std::nothrow);
}

// size: what the closure was allocated for.
inline void retireClosure(void* memory, size_t size) {
  auto* retired = new (memory) RetiredClosure{retiredClosureBlocks.load(std::memory_order_relaxed), closureLines(size)};
  while (!retiredClosureBlocks.compare_exchange_weak(retired->next, retired, std::memory_order_release,
                                                std::memory_order_relaxed)) {
  }
}

}  // namespace detail

// LITERALINCLUDE START: STASHED_LAUNCH
// openreg::launchInPlace (openreg.hpp) with the closure's memory taken from
// this thread's stash and given back to it by the worker: Callable is
// constructed from args where the kernel's closure lives.
template <typename Callable, typename... Args>
orError_t launchInPlace(orStream_t stream, const char* name, Args&&... args) {
  static_assert(alignof(Callable) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "over-aligned kernel closure");
  void* block = detail::allocateClosure(sizeof(Callable));
  if (block == nullptr) return orErrorMemoryAllocation;
  Callable* owned = nullptr;
  try {
    owned = new (block) Callable(std::forward<Args>(args)...);
  } catch (...) {
    detail::freeClosureBlock(block);  // fresh or reused, it is ours alone
    throw;
  }
  auto run = [](void* data) -> orError_t {
    try {
      (*static_cast<Callable*>(data))();
      return orSuccess;
    } catch (const std::exception& e) {
      orKernelSetErrorMessage(e.what());
    } catch (...) {
      orKernelSetErrorMessage("unknown C++ exception");
    }
    return orErrorLaunchFailure;
  };
  auto release = [](void* data) {
    static_cast<Callable*>(data)->~Callable();
    detail::retireClosure(data, sizeof(Callable));
  };
  // A fast kernel runs wherever the runtime runs it: on the worker, or on a
  // host thread that waits for the stream (Note [Who runs a fast kernel]).
  return orLaunchKernelWithFlags(stream, run, release, owned, name, orKernelAnyThread);
}
// LITERALINCLUDE END: STASHED_LAUNCH

}  // namespace torch_openreg::fast
