// stream.cpp - streams: in-order queues of work, each drained by a worker
// thread of its own, and the handle registry that makes a destroyed stream a
// clean error instead of a dangling pointer.
//
// Not here: what a kernel may do while it runs (kernel.cpp), event
// semantics (event.cpp).
#include <algorithm>
#include <chrono>
#include <functional>
#include <system_error>
#include <cstring>

#include "runtime.h"

namespace openreg::rt {

namespace {

using Clock = std::chrono::steady_clock;
// How long a waiting host thread, or an idle worker, polls before it blocks.
// Short enough to cost little CPU, long enough that back-to-back launches and
// synchronisations never pay for a futex wake-up.
constexpr auto kSpin = std::chrono::microseconds(50);

template <typename Ready>
bool spinUntil(Ready ready, Clock::duration spin = kSpin) {
  auto deadline = Clock::now() + spin;
  do {
    // Reading the clock costs more than a check; on a core shared with the
    // host thread (SMT), every instruction spent here is one the host loses.
    for (int i = 0; i < 16; ++i) {
      if (ready()) return true;
      cpuRelax();
    }
  } while (Clock::now() < deadline);
  return ready();
}

// Runs chunk(begin, length) over [0, count), splitting large ranges across
// the host's cores: a device's copy engine moves data at memory bandwidth,
// not at the speed of one core, and PyTorch's CPU copy_ (the yardstick for
// host-device copies) is multi-threaded too. The helpers are started once
// and shared by all streams; a stream whose copy finds them busy does its
// part alone rather than wait.
// LITERALINCLUDE START: OR_COPY_ENGINE
class CopyEngine {
 public:
  using Chunk = std::function<void(size_t, size_t)>;

  void run(size_t count, const Chunk& chunk) {
    constexpr size_t kMinBytesPerThread = size_t{4} << 20;
    constexpr size_t kPage = 4096;
    size_t parts = std::min(helpers() + 1, count / kMinBytesPerThread);
    std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
    if (parts <= 1 || !lock.owns_lock() || !idle_) {
      chunk(0, count);
      return;
    }
    size_t step = (count / parts + kPage - 1) / kPage * kPage;
    job_ = &chunk;
    jobCount_ = count;
    jobStep_ = step;
    pendingParts_ = (count - 1) / step;  // parts after the first, for helpers
    nextPart_ = 1;
    idle_ = false;
    ++generation_;
    lock.unlock();
    wake_.notify_all();
    chunk(0, std::min(step, count));
    lock.lock();
    done_.wait(lock, [&] { return pendingParts_ == 0; });
    job_ = nullptr;
    idle_ = true;
  }
  // LITERALINCLUDE END: OR_COPY_ENGINE

 private:
  size_t helpers() {
    std::call_once(started_, [this] {
      unsigned cores = std::max(1u, std::thread::hardware_concurrency());
      for (unsigned i = 1; i < cores; ++i) {
        try {
          std::thread([this] { serve(); }).detach();  // lives as long as the process
          ++helperCount_;
        } catch (const std::system_error&) {
          break;  // fewer helpers, same results
        }
      }
    });
    return helperCount_;
  }

  void serve() {
    std::unique_lock<std::mutex> lock(mutex_);
    uint64_t seen = 0;  // a job may already be waiting when this thread starts
    for (;;) {
      wake_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      while (job_ != nullptr && nextPart_ * jobStep_ < jobCount_) {
        size_t begin = nextPart_++ * jobStep_;
        size_t length = std::min(jobStep_, jobCount_ - begin);
        const Chunk* job = job_;
        lock.unlock();
        (*job)(begin, length);
        lock.lock();
        if (--pendingParts_ == 0) done_.notify_one();
      }
    }
  }

  std::once_flag started_;
  size_t helperCount_ = 0;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  bool idle_ = true;
  uint64_t generation_ = 0;
  const Chunk* job_ = nullptr;
  size_t jobCount_ = 0, jobStep_ = 0, nextPart_ = 0, pendingParts_ = 0;
};

CopyEngine& copyEngine() {
  static CopyEngine* engine = new CopyEngine();  // never destroyed, like its threads
  return *engine;
}

// Live streams by id. Ids are never reused, so an old handle finds nothing.
std::shared_mutex registryMutex;
std::unordered_map<uint64_t, std::shared_ptr<Stream>> registry;
uint64_t nextStreamId = 1;

// The kind of the record an op leaves on its stream when traced.
orActivityKind activityKindOf(Op::Kind kind) {
  switch (kind) {
    case Op::Kind::Kernel: return orActivityKindKernel;
    case Op::Kind::Copy: return orActivityKindMemcpy;
    case Op::Kind::Memset: return orActivityKindMemset;
    case Op::Kind::Mark: return orActivityKindEventRecord;
    case Op::Kind::Wait: return orActivityKindStreamWait;
  }
  return orActivityKindKernel;
}

}  // namespace

void Progress::waitFor(uint64_t seq, bool spin) {
  if (completed() >= seq) return;
  if (spin && spinUntil([&] { return completed() >= seq; })) return;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    // Ask advance() to wake us when op seq is done, not after every op: a
    // wake-up per op costs the worker a system call and the host its core.
    // Armed before the check below; see advance().
    if (seq < wakeAt_.load()) wakeAt_.store(seq);
    if (completed() >= seq) return;
    cv_.wait(lock);
  }
}

void Progress::advance() {
  uint64_t done = completed_.fetch_add(1) + 1;
  // Both sides use sequentially consistent atomics: either we see the
  // waiter's wakeAt_, or the waiter, which arms wakeAt_ before it checks,
  // sees our new count and does not sleep.
  if (done >= wakeAt_.load()) {
    std::lock_guard<std::mutex> lock(mutex_);
    wakeAt_.store(kNobodyWaiting);
    cv_.notify_all();  // waiters still short of their op re-arm wakeAt_
  }
}

// LITERALINCLUDE START: OR_STREAM_ERRORS
// Note [Stream errors]
// Some failures belong to the work that depends on a kernel, not to its
// device: a collective whose peers never came (openreg-distributed), or a
// copy from a device that faulted. Such a kernel calls orKernelFailStream,
// or the runtime fails the copy's stream, and the stream records the failure
// at the op that failed: every later op of the stream is skipped, the next
// launch onto it and every call that waits for it (stream, event or device
// synchronisation, a pageable copy) return the error, and an event recorded
// after the failed op (before or after the failure happened: recording
// succeeds either way) carries it to each stream that waits for the event,
// which fails in turn. The device and its other streams go on, so nothing
// that does not depend on the failed work sees the error, and nothing that
// does sees a value. orDeviceReset clears it, with the device's sticky error.
void Progress::recordFailure(orError_t code, std::string message) {
  std::lock_guard<std::mutex> lock(failureMutex_);
  if (failedAt_.load() != 0) return;  // the first failure wins
  failureCode_ = code;
  failureMessage_ = std::move(message);
  failedAt_.store(completed() + 1, std::memory_order_release);
}
// LITERALINCLUDE END: OR_STREAM_ERRORS

orError_t Progress::failure(std::string* message) const {
  std::lock_guard<std::mutex> lock(failureMutex_);
  if (message != nullptr) *message = failureMessage_;
  return failedAt_.load() == 0 ? orSuccess : failureCode_;
}

orError_t Progress::check() const {
  if (!failed()) return orSuccess;
  std::string message;
  orError_t code = failure(&message);
  return fail(code, message);
}

void Progress::clearFailure() {
  std::lock_guard<std::mutex> lock(failureMutex_);
  failedAt_.store(0);
  failureCode_ = orSuccess;
  failureMessage_.clear();
}

Stream::Stream(Device& device, uint64_t id, int priority)
    : device(device), id(id), priority(priority) {}

Stream::~Stream() {
  {
    std::lock_guard<std::mutex> lock(sleepMutex_);
    stopping_.store(true);
  }
  wake_.notify_one();
  if (!worker_.joinable()) return;
  if (worker_.get_id() == std::this_thread::get_id()) {
    worker_.detach();  // destroyed from one of its own kernels
  } else {
    worker_.join();  // the worker drains the queue before it stops
  }
}

// Prepares the cache lines of [begin, end) for the calling thread to write
// soon, without waiting for them.
static void prefetchForWrite(const void* begin, const void* end) {
  for (auto p = static_cast<const char*>(begin); p < static_cast<const char*>(end); p += 64) {
#if defined(__GNUC__)
    __builtin_prefetch(p, /*rw=*/1);
#endif
  }
}

// LITERALINCLUDE START: OR_STREAM_ENQUEUE
uint64_t Stream::enqueue(Op op) {
  uint64_t seq;
  {
    std::unique_lock<QueueLock> lock(producerLock_);
    if (!worker_.joinable()) {
      slots_.reset(new Op[kQueueSlots]);
      worker_ = std::thread([this] { work(); });
    }
    seq = published_.load(std::memory_order_relaxed) + 1;
    while (seq > knownCompleted_ + kQueueSlots) {  // the ring looks full
      // A kernel must not wait for a worker: the one it waits for may be
      // its own, or one waiting for it (an event).
      if (runningStream() != nullptr) {
        if (op.release != nullptr) op.release(op.userData);
        return 0;
      }
      // Wait for a quarter of the ring, not one slot: launching in lockstep
      // with the worker would read its progress once per launch. Run that
      // quarter here where it may (Note [Who runs queued work]: a full ring
      // means the worker is behind, and this thread's team is idle), then
      // block for the rest rather than poll (polling the line the worker
      // writes after every op would slow the worker this thread waits for),
      // and without the lock, which other launching threads spin on.
      uint64_t room = seq - kQueueSlots + kQueueSlots / 4;
      lock.unlock();
      if (executed_.load() < room) runQueuedWork(room);
      progress->waitFor(room, /*spin=*/false);
      lock.lock();
      knownCompleted_ = progress->completed();
      seq = published_.load(std::memory_order_relaxed) + 1;  // others may have launched
    }
    slots_[slotIndex(seq)] = std::move(op);
    published_.store(seq, std::memory_order_release);
    Op& next = slots_[slotIndex(seq + 1)];
    prefetchForWrite(&next, &next + 1);
  }
  // Note [Waking an idle worker], below.
  if (sleeping_.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lock(sleepMutex_);
    wake_.notify_one();
  }
  return seq;
}
// LITERALINCLUDE END: OR_STREAM_ENQUEUE

// LITERALINCLUDE START: OR_WHO_RUNS_QUEUED_WORK
// Note [Who runs queued work]
// A stream's worker runs its queue, one op after another. A host thread that
// synchronises with the stream has nothing to do until the queue has
// drained, yet the machine is the host's too: if the worker split a large
// kernel across an OpenMP team of its own, the process would hold two
// teams (the host's and the worker's), twice as many threads as cores, and
// the OpenMP runtime would make every team's threads sleep right after each
// parallel region (it throttles spin-waits once its threads outnumber the
// cores): CPU work in the same process, openreg's or the user's, would then
// pay a wake-up per parallel region. So the waiting thread runs the queued
// work itself, in order, with its own threads, while each op may run off the
// worker (copies, memsets, event records and waits, and kernels launched
// with orKernelAnyThread), and the worker steps aside until it is done: a
// large kernel uses every core when the host waits, and one team serves the
// whole process. Only one thread runs a stream's ops at a time (runMutex_).
// A thread inside a kernel does not: its own stream's work could wait on it.
// Every host wait for a stream's ops comes here: synchronising a stream or
// device, a pageable copy, an event's synchronisation, a full ring.
void Stream::synchronize(bool spin) { waitFor(lastEnqueued(), spin); }

orError_t Stream::check() const {
  orError_t status = device.checkSticky();
  return status != orSuccess ? status : progress->check();
}

void Stream::waitFor(uint64_t seq, bool spin) {
  if (executed_.load() < seq && runningStream() == nullptr) runQueuedWork(seq);
  progress->waitFor(seq, spin);
}

void Stream::runQueuedWork(uint64_t until) {
  LastErrorKeeper lastError;  // the ops' failures are the device's, not this call's
  int device = currentDevice();
  hostsWaiting_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(runMutex_);
    hostsWaiting_.fetch_sub(1);
    runOps(until, /*onWorker=*/false);
  }
  setCurrentDevice(device);  // a kernel runs with its stream's device current
}
// LITERALINCLUDE END: OR_WHO_RUNS_QUEUED_WORK

void Stream::runOps(uint64_t until, bool onWorker) {
  // A copy of the ring's address: slots_ shares a line with the launching
  // threads' lock, which the worker should not read once per op.
  Op* const ring = slots_.get();
  for (uint64_t done = executed_.load(std::memory_order_relaxed); done < until; ++done) {
    // The op stays in its slot: the launching side destroys it when it
    // reuses the slot, so the worker frees nothing the host allocated.
    Op& op = ring[slotIndex(done + 1)];
    if (onWorker ? hostsWaiting_.load(std::memory_order_relaxed) != 0
                 : op.kind == Op::Kind::Kernel && !op.anyThread) {
      return;
    }
    execute(op, onWorker);
    if (op.capture) op.capture.reset();  // an event's capture should not outlive its op
    executed_.store(done + 1, std::memory_order_release);
    progress->advance();
  }
}

// LITERALINCLUDE START: OR_STREAM_WORKER
void Stream::work() {
  setCurrentDevice(device.index);
  for (;;) {
    uint64_t done = executed_.load(std::memory_order_acquire);  // a host thread may have run some
    uint64_t published = published_.load(std::memory_order_acquire);
    if (published == done) {
      spinUntil([&] { return published_.load(std::memory_order_acquire) != done; });
      published = published_.load(std::memory_order_acquire);
    }
    if (published == done) {
      if (stopping_.load()) return;  // and everything ran
      sleepUntilPublishedPast(done);
      continue;
    }
    {
      // Blocks while a host thread runs the queue (Note [Who runs queued work]).
      std::lock_guard<std::mutex> lock(runMutex_);
      runOps(published, /*onWorker=*/true);
    }
    // A host thread asked to run the queue: let it have runMutex_.
    if (hostsWaiting_.load(std::memory_order_relaxed) != 0) std::this_thread::yield();
  }
}
// LITERALINCLUDE END: OR_STREAM_WORKER

// Note [Waking an idle worker]
// The launching thread stores published_ and then reads sleeping_, without
// a fence between them: a fence would make every launch wait for its store
// to reach the worker's core. So a launch can read sleeping_ as false while
// its store is still on its way, just as the worker announces that it sleeps
// and looks at published_ one last time. The worker closes that window by
// polling a little longer after the announcement (a store reaches the other
// core within a microsecond or so), and then sleeps with a timeout, short at
// first, which bounds the delay should a store be slower still.
void Stream::sleepUntilPublishedPast(uint64_t done) {
  sleeping_.store(true);  // sequentially consistent: before the checks below
  auto hasWork = [&] { return published_.load() != done || stopping_.load(); };
  if (!spinUntil(hasWork, std::chrono::microseconds(10))) {
    auto timeout = std::chrono::milliseconds(1);
    std::unique_lock<std::mutex> lock(sleepMutex_);
    while (!hasWork()) {
      wake_.wait_for(lock, timeout);
      timeout = std::min(timeout * 2, std::chrono::milliseconds(128));
    }
  }
  sleeping_.store(false);
}

void Stream::execute(Op& op, bool onWorker) {
  // Note [Sticky errors], Note [Stream errors]: the work is skipped.
  bool skip = device.sticky() != orSuccess || progress->failed();
  uint64_t start = tracing() ? nowNs() : 0;
  switch (op.kind) {
    case Op::Kind::Kernel:
      if (skip) {
        if (op.release != nullptr) op.release(op.userData);
        return;
      }
      runKernel(*this, op, onWorker);
      break;
    case Op::Kind::Copy:
    case Op::Kind::Memset:
      if (skip) return;
      executeTransfer(op);
      break;
    case Op::Kind::Mark:
      op.capture->timeNs.store(start != 0 ? start : nowNs(), std::memory_order_relaxed);
      break;
    case Op::Kind::Wait:
      if (skip) break;
      op.capture->progress->waitFor(op.capture->seq);
      inheritFailure(*op.capture);
      break;
  }
  if (start != 0) {
    // An event record is an instant (the time the event captured); a wait
    // lasts until the event it waits for completes, and names its record.
    uint64_t end = op.kind == Op::Kind::Mark ? start : nowNs();
    uint64_t waitedFor = op.kind == Op::Kind::Wait ? op.capture->correlationId : 0;
    traceRecord(activityKindOf(op.kind), op.name, device.index, id, start, end, op.correlationId, 0, waitedFor);
  }
}

// LITERALINCLUDE START: OR_TIMING_ONLY
// Note [Timing-only mode]
// To predict a program too big for this machine (openreg-perf), the runtime
// can run it for its shapes, allocations, streams and events alone: kernels
// are queued, ordered and traced as usual but their functions are not
// called (their userData is still released), and copies and memsets move no
// bytes. Device memory is then reserved and never touched, so it costs the
// host nothing: a device of 80 GiB exists on a machine with a few. A copy
// to host memory is queued and timed too, and writes nothing: the host
// memory keeps what it held, and what the host reads instead is the
// framework's to decide (torch-openreg's Note [Values read in timing-only
// mode]). Switching (orSetTimingOnly) first waits for the work already
// queued, which runs in the mode it was queued in.
bool timingOnly() { return runtime().timingOnly.load(std::memory_order_relaxed); }
// LITERALINCLUDE END: OR_TIMING_ONLY

void Stream::executeTransfer(Op& op) {
  // A copy reads or writes both its sides: one on a faulted device fails
  // this stream, since the bytes it would move are not results.
  Location dst = locate(op.dst);
  Location src = op.kind == Op::Kind::Copy ? locate(op.src) : Location{};
  for (const Location* side : {&dst, &src}) {
    if (!side->inDeviceRange || side->device == device.index) continue;
    const Device& other = *runtime().devices[side->device];
    if (other.sticky() == orSuccess) continue;
    std::string why = other.stickyMessage();
    progress->recordFailure(other.sticky(),
                            format("%s on openreg stream %llu (device %d) did not run: its %s lies on openreg "
                                   "device %d, which holds a sticky error: %s", op.name.c_str(),
                                   static_cast<unsigned long long>(id), device.index,
                                   side == &dst ? "destination" : "source", side->device, why.c_str()));
    return;
  }
  // Checked when queued; checked again here because another thread may
  // have freed the memory since, which on hardware is an illegal access.
  char* to = dst.inDeviceRange ? runtime().devices[dst.device]->memory.translate(op.dst, op.count)
                               : static_cast<char*>(op.dst);
  const char* from = nullptr;
  if (op.kind == Op::Kind::Copy) {
    from = src.inDeviceRange ? runtime().devices[src.device]->memory.translate(op.src, op.count)
                             : static_cast<const char*>(op.src);
  }
  if (to == nullptr || (op.kind == Op::Kind::Copy && from == nullptr)) {
    device.setSticky(orErrorIllegalAddress,
                     format("%s on openreg device %d (stream %llu) reached freed device memory", op.name.c_str(),
                            device.index, static_cast<unsigned long long>(id)));
    return;
  }
  if (timingOnly()) return;  // Note [Timing-only mode]
  int value = op.value;
  bool isCopy = op.kind == Op::Kind::Copy;
  copyEngine().run(op.count, [&](size_t begin, size_t length) {
    if (isCopy) {
      std::memcpy(to + begin, from + begin, length);
    } else {
      std::memset(to + begin, value, length);
    }
  });
}

void Stream::inheritFailure(const EventCapture& capture) {
  if (!capture.progress->failedBy(capture.seq)) return;
  std::string message;
  orError_t code = capture.progress->failure(&message);
  progress->recordFailure(code, format("%s [openreg stream %llu waited for that work]", message.c_str(),
                                       static_cast<unsigned long long>(id)));
}

std::shared_ptr<Stream> createStream(Device& device, int priority) {
  std::unique_lock<std::shared_mutex> lock(registryMutex);
  uint64_t id = nextStreamId++;
  auto stream = std::make_shared<Stream>(device, id, priority);
  registry[id] = stream;
  return stream;
}

orError_t findStream(orStream_t handle, std::shared_ptr<Stream>* out) {
  if (handle == nullptr) {
    *out = runtime().devices[currentDevice()]->defaultStream;
    return orSuccess;
  }
  {
    std::shared_lock<std::shared_mutex> lock(registryMutex);
    auto it = registry.find(idOf(handle));
    if (it != registry.end()) {
      *out = it->second;
      return orSuccess;
    }
  }
  return fail(orErrorInvalidResourceHandle,
              format("stream handle %p is not a live stream (destroyed, or never "
                     "created)", static_cast<void*>(handle)));
}

orError_t unregisterStream(orStream_t handle, std::shared_ptr<Stream>* out) {
  std::unique_lock<std::shared_mutex> lock(registryMutex);
  auto it = registry.find(idOf(handle));
  if (it == registry.end()) {
    return fail(orErrorInvalidResourceHandle,
                format("orStreamDestroy: %p is not a live stream (destroyed twice?)", static_cast<void*>(handle)));
  }
  *out = std::move(it->second);
  registry.erase(it);
  return orSuccess;
}

std::vector<std::shared_ptr<Stream>> streamsOf(int device) {
  std::vector<std::shared_ptr<Stream>> result;
  std::shared_lock<std::shared_mutex> lock(registryMutex);
  for (auto& entry : registry) {
    if (entry.second->device.index == device) result.push_back(entry.second);
  }
  return result;
}

orError_t refuseFullQueue(const Stream& stream) {
  return fail(orErrorNotPermitted,
              format("a kernel queued work on openreg stream %llu, whose queue is full (%llu operations): "
                     "a kernel may not wait for a stream's worker; queue the work from the host",
                     static_cast<unsigned long long>(stream.id),
                     static_cast<unsigned long long>(Stream::kQueueSlots)));
}

// LITERALINCLUDE START: OR_STREAM_SUBMIT
orError_t submit(Stream& stream, Op op, bool wait) {
  orError_t status = stream.check();
  if (status != orSuccess) {
    if (op.release != nullptr) op.release(op.userData);
    return status;
  }
  if (stream.capturing.load(std::memory_order_acquire)) {  // Note [Stream capture]
    if (captureOp(stream, op, wait, &status)) return status;
  }
  LaunchTrace launch = beginLaunchTrace(op);
  uint64_t seq = stream.enqueue(std::move(op));
  if (seq == 0) return refuseFullQueue(stream);
  endLaunchTrace(launch, stream);
  // OPENREG_LAUNCH_BLOCKING cannot make a kernel wait for work it queued
  // on its own stream (Note [Waiting from inside a kernel]); callers that
  // must wait refused that case before queueing.
  if (!wait && (!runtime().launchBlocking || waitsForRunningKernel(stream))) return orSuccess;
  uint64_t waitStart = launch.startNs != 0 ? nowNs() : 0;
  stream.waitFor(seq);
  if (waitStart != 0) {  // the host's wait, naming the work it waited for
    traceRecord(orActivityKindSynchronize, launch.name + " wait", stream.device.index, stream.id, waitStart, nowNs(),
                0, 0, launch.correlationId);
  }
  return stream.check();
}
// LITERALINCLUDE END: OR_STREAM_SUBMIT

}  // namespace openreg::rt
