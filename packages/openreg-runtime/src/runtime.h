// runtime.h - internal declarations shared by libopenreg's source files.
//
// Not part of the installed API: openreg.h is. Each concept here has its own
// source file (errors, device, memory, stream, event, kernel, trace, ipc,
// and one platform file per OS); this header only lets them see each other.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "openreg/openreg.h"

namespace openreg::rt {

// ---------------------------------------------------------------- errors.cpp

// Records code and message as this thread's last error and returns code.
orError_t fail(orError_t code, std::string message);
// Keeps the calling thread's last error as it was while it runs other
// work's calls (a host thread running queued work, stream.cpp).
class LastErrorKeeper {
 public:
  LastErrorKeeper();
  ~LastErrorKeeper();

 private:
  orError_t code_;
  std::string message_;
};
// printf-style formatting for error messages (GCC and Clang check the arguments).
#if defined(__MINGW32__)  // MinGW's own printf (__USE_MINGW_ANSI_STDIO, CMakeLists.txt): C99's %zu
std::string format(const char* fmt, ...) __attribute__((format(gnu_printf, 1, 2)));
#elif defined(__GNUC__)
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
#else
std::string format(const char* fmt, ...);
#endif

// ------------------------- platform_linux.cpp, platform_macos.cpp, platform_windows.cpp
// Everything OS-specific lives in one file per OS (platform_<os>.cpp, the
// one CMake builds for the target; Linux and macOS share platform_posix.cpp),
// so a port to another OS adds one file.

// A device's two views of the same pages; see Note [Device memory is never
// host-mapped] in memory.cpp.
struct DeviceMapping {
  char* device = nullptr;  // reserved, no access: what orMalloc hands out
  char* host = nullptr;    // read-write alias used by copies and kernels
  size_t size = 0;
  int fd = -1;
};
bool platformMapDevice(int device, size_t size, DeviceMapping* out,
                       std::string* error);
// Gives the pages of [offset, offset + length) back to the OS; both multiples
// of platformPageSize().
void platformReleasePages(const DeviceMapping& mapping, size_t offset,
                          size_t length);
size_t platformPageSize();
// Installs the handler (SIGSEGV and SIGBUS, or an exception handler) that names
// the device and offset of a host access to device memory. Call after every
// device is mapped.
void platformInstallFaultHandler(const std::vector<DeviceMapping>& devices);
void* platformAllocateHost(size_t size);
void platformFreeHost(void* ptr, size_t size);
// Calls child() in the child process after fork().
void platformOnFork(void (*child)());

// Interprocess memory (ipc.cpp); see Note [How device memory crosses
// processes] there.
// The exporter's side: a small file per exported allocation whose content
// (a record of `bytes` bytes: what was exported) proves the export is live
// and whose read locks count its importers.
int platformCreateLease(const void* record, size_t bytes, std::string* error);  // -1 on failure
void platformRevokeLease(int fd);    // importers opening it from now on fail
bool platformLeaseInUse(int fd);     // another process holds it open
// The importer's side.
uint64_t platformFileInode(int fd);
int platformProcessId();
// Opens a file another process has open as fd, checking it is the same file
// (inode); -1 with error set if it is gone.
int platformOpenPeerFile(int pid, int fd, uint64_t inode, std::string* error);
// Takes a shared lock on a peer's lease and reads its record: false if the
// lock cannot be taken or the lease is revoked (empty).
bool platformHoldLease(int fd, void* record, size_t bytes);
void platformCloseFile(int fd);
// Both views of [offset, offset + length) of a device file, page-aligned.
bool platformMapPeerRange(int fd, size_t offset, size_t length,
                          DeviceMapping* out, std::string* error);
void platformUnmapPeerRange(const DeviceMapping& mapping);

// OPENREG_CHECK_ALIASES (Note [Host aliases end with their kernel] in
// kernel.cpp). A mapping of its own of the shared pages holding
// [alias, alias + count): returns the address of alias in it (null if the
// host cannot map it) and the window to retire.
struct AliasWindow {
  void* begin = nullptr;
  size_t size = 0;
};
char* platformOpenAliasWindow(char* alias, size_t count, AliasWindow* window);
// Makes the window's addresses fault from now on, naming kernel; the last
// 1024 windows keep their addresses (no other mapping can take them).
void platformRetireAliasWindow(const AliasWindow& window, const char* kernel);

// ---------------------------------------------------------------- faults.cpp
// What every platform's fault handler shares.

// The ranges of device addresses the handler names: every device's.
void setFaultRanges(const std::vector<DeviceMapping>& devices);
// Writes, through write, which device memory or retired alias window address
// is; nothing when it is neither. Safe inside a signal or exception handler.
void describeFault(uintptr_t address, void (*write)(const char*));
// Keeps a retired window (already made inaccessible) for describeFault,
// releasing the oldest of the last 1024 through release.
void quarantineAliasWindow(const AliasWindow& window, const char* kernel, void (*release)(void*, size_t));

// ---------------------------------------------------------------- memory.cpp

// The device's raw allocator: a best-fit free list over the device's
// reserved range. This is the runtime layer; caching belongs to the layers
// above (torch-openreg's DeviceAllocator).
class DeviceMemory {
 public:
  static constexpr size_t kAlignment = 512;

  DeviceMemory(int device, DeviceMapping mapping);
  orError_t allocate(size_t size, void** out);
  orError_t release(void* ptr);

  bool inRange(const void* ptr) const {
    auto p = static_cast<const char*>(ptr);
    return p >= mapping_.device && p < mapping_.device + mapping_.size;
  }
  // The live allocation holding ptr: false if ptr is in none.
  bool find(const void* ptr, char** base, size_t* size) const;
  // Host alias of [ptr, ptr + count), or null unless the range lies inside
  // one live allocation.
  char* translate(const void* ptr, size_t count) const;
  // Host alias of a pointer already checked by find/translate.
  char* alias(const void* ptr) const {
    return mapping_.host + (static_cast<const char*>(ptr) - mapping_.device);
  }
  size_t capacity() const { return mapping_.size; }
  size_t used() const;
  const DeviceMapping& mapping() const { return mapping_; }

 private:
  void addFreeBlock(size_t offset, size_t size);
  void removeFreeBlock(size_t offset, size_t size);

  const int device_;
  const DeviceMapping mapping_;
  mutable std::mutex mutex_;
  std::map<size_t, size_t> live_;             // offset -> size
  std::map<size_t, size_t> free_;             // offset -> size
  std::set<std::pair<size_t, size_t>> freeBySize_;  // (size, offset)
  size_t used_ = 0;
};

// Where a pointer lives, as copies and attributes need to know.
struct Location {
  orMemoryType type = orMemoryTypeUnregistered;
  int device = -1;          // for device memory
  bool inDeviceRange = false;  // true even for freed device memory
  char* base = nullptr;     // allocation start, if known
  size_t size = 0;          // allocation size, if known
};
Location locate(const void* ptr);

// ------------------------------------------------------------------- ipc.cpp

// Memory opened with orIpcOpenMemHandle: its device, allocation start and
// size; false if ptr lies in no open import.
bool ipcFindImport(const void* ptr, int* device, char** base, size_t* size);
// Host alias of [ptr, ptr + count) inside one open import, or null.
char* ipcTranslateImport(const void* ptr, size_t count);
// Called by orFree before releasing ptr. Sets *deferred when ptr was exported
// and another process still has it open: its range then stays reserved until
// ipcReclaim finds it closed everywhere.
orError_t ipcBeforeFree(void* ptr, bool* deferred);
// Releases deferred allocations that no other process has open any more.
void ipcReclaim();

// ---------------------------------------------------------------- stream.cpp

// A monotonically increasing count of finished operations on one stream,
// shared with the event captures that wait on it, so a stream can be
// destroyed while events still refer to points in its history.
class alignas(64) Progress {  // its own cache lines: the worker writes completed_ after every op
 public:
  // Sequentially consistent, to pair with advance()'s check of wakeAt_.
  uint64_t completed() const { return completed_.load(); }
  // Blocks until completed() >= seq; spins briefly first unless told not to.
  void waitFor(uint64_t seq, bool spin = true);
  void advance();

  // Note [Stream errors] (stream.cpp). Called by the thread running the
  // stream's ops: the op now running (number completed() + 1) failed, and
  // every op after it is skipped. The first failure is kept.
  void recordFailure(orError_t code, std::string message);
  bool failed() const { return failedAt_.load(std::memory_order_acquire) != 0; }
  // Whether the work up to op number seq includes the failure.
  bool failedBy(uint64_t seq) const {
    uint64_t at = failedAt_.load(std::memory_order_acquire);
    return at != 0 && at <= seq;
  }
  // The failure through fail() (this thread's last error), or orSuccess.
  orError_t check() const;
  // The failure's code and message, for a stream that inherits it.
  orError_t failure(std::string* message) const;
  void clearFailure();  // orDeviceReset

 private:
  static constexpr uint64_t kNobodyWaiting = UINT64_MAX;
  std::atomic<uint64_t> completed_{0};
  std::atomic<uint64_t> failedAt_{0};  // the op that failed, 0 while none did
  // The lowest sequence number a blocked waiter needs (changed under mutex_).
  std::atomic<uint64_t> wakeAt_{kNobodyWaiting};
  std::mutex mutex_;
  std::condition_variable cv_;
  mutable std::mutex failureMutex_;
  orError_t failureCode_ = orSuccess;
  std::string failureMessage_;
};

class Stream;

// The point in a stream's history that an event recording captured.
struct EventCapture {
  std::weak_ptr<Stream> stream;  // whose queued work a waiting host may run
  std::shared_ptr<Progress> progress;
  uint64_t seq = 0;
  int device = 0;
  uint64_t streamId = 0;
  uint64_t correlationId = 0;  // of the record's Mark op, when traced
  std::atomic<uint64_t> timeNs{0};  // when the stream reached it
};

// One unit of queued work: a slot of a stream's queue, in whole cache lines.
struct alignas(64) Op {
  enum class Kind { Kernel, Copy, Memset, Mark, Wait } kind = Kind::Kernel;
  // Kernel
  orKernelFunc_t func = nullptr;
  void (*release)(void*) = nullptr;
  void* userData = nullptr;
  bool anyThread = false;  // orKernelAnyThread
  // Copy and Memset: pointers as the user gave them, checked when queued.
  void* dst = nullptr;
  const void* src = nullptr;
  size_t count = 0;
  int value = 0;
  // Mark (record) and Wait
  std::shared_ptr<EventCapture> capture;
  // Kernel name or copy label, for errors and traces.
  std::string name;
  uint64_t correlationId = 0;
};

struct Device;
struct Capture;  // graph.cpp

// Lets the other hyper-thread of the core run while this one waits.
inline void cpuRelax() {
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// The lock that launching threads take in turn to write a stream's queue:
// critical sections of a few instructions (a thread waiting for room in a
// full queue lets go of it). A std::mutex would make a futex system call
// whenever two threads meet; this one spins, then yields, and never sleeps.
class QueueLock {
 public:
  void lock() {
    int spins = 0;
    while (locked_.exchange(true, std::memory_order_acquire)) {
      do {
        if (++spins < 100) {
          cpuRelax();
        } else {
          std::this_thread::yield();  // the holder was descheduled
        }
      } while (locked_.load(std::memory_order_relaxed));
    }
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

// LITERALINCLUDE START: OR_STREAM_QUEUE
// Note [The launch queue]
// A stream's queue is a ring of kQueueSlots operations, written by the
// launching threads and read by the stream's worker. The host and the worker
// run on different cores, and every cache line that one writes and the
// other then touches crosses between them: on this kind of machine (a VM)
// that costs 60 ns to over 700 ns, depending on where the two cores sit, so
// the host's side of a launch touches as few shared lines as possible:
//  - launching threads take turns under producerLock_, a line the worker
//    never touches;
//  - published_, the count of operations written, is the one line the
//    host writes for the worker, with a plain store that the host does not
//    wait for; the worker polls it;
//  - the worker's progress is read only when the ring looks full
//    (knownCompleted_ remembers the last value read);
//  - the next slot is fetched into the host's cache after each launch.
// A full ring blocks the launching thread until a quarter of it has run, as
// CUDA's launch queue blocks when too much work is pending (the launching
// thread runs that quarter itself where it may: Note [Who runs queued
// work]); work queued from inside a kernel is refused instead, since the
// kernel would wait for a worker that may be waiting for it. The ring is
// allocated by the stream's first launch: many streams (a pool's) are never
// used.
class alignas(64) Stream {
 public:
  static constexpr uint64_t kQueueSlots = 4096;  // 512 KiB

  Stream(Device& device, uint64_t id, int priority);
  ~Stream();  // waits for queued work, then stops the worker
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Queues op; returns its sequence number (1 for the first op). When the
  // ring is full, waits for room, except inside a kernel: then releases op
  // and returns 0 (refuseFullQueue makes the error).
  uint64_t enqueue(Op op);
  uint64_t lastEnqueued() const { return published_.load(std::memory_order_acquire); }
  // Waits for every queued op; the calling thread runs them itself where
  // it may (Note [Who runs queued work]).
  void synchronize(bool spin = true);
  // The same, up to op number seq.
  void waitFor(uint64_t seq, bool spin = true);
  // The device's sticky error, else this stream's error (Note [Stream
  // errors]), through fail(); orSuccess if neither.
  orError_t check() const;

  Device& device;
  const uint64_t id;
  const int priority;
  const std::shared_ptr<Progress> progress = std::make_shared<Progress>();
  // Stream capture (graph.cpp). capturing is what submit() reads; capture
  // holds the recorded work and is changed only under captureMutex.
  std::atomic<bool> capturing{false};
  std::mutex captureMutex;
  std::shared_ptr<Capture> capture;

 private:
  void work();
  // Runs the ops after executed_ up to op number until, in order, on the
  // calling thread: all of them on the worker (which steps aside once a
  // host thread asks to run them), those that may run off the worker on a
  // host thread (which stops before the first that may not).
  void runOps(uint64_t until, bool onWorker);
  // The host's side of Note [Who runs queued work].
  void runQueuedWork(uint64_t until);
  void execute(Op& op, bool onWorker);
  // Runs a copy or memset op; fails the stream instead when a device it
  // touches holds a sticky error (Note [Stream errors]).
  void executeTransfer(Op& op);
  // Fails this stream with the failure of the work op's capture waited
  // for, if that work failed.
  void inheritFailure(const EventCapture& capture);
  // Waits until the worker sees an op past done, or the stream stops.
  void sleepUntilPublishedPast(uint64_t done);
  // Where op number seq (from 1) lives in the ring.
  static size_t slotIndex(uint64_t seq) { return (seq - 1) % kQueueSlots; }

  // The launching threads' line.
  alignas(64) QueueLock producerLock_;
  uint64_t knownCompleted_ = 0;
  std::unique_ptr<Op[]> slots_;  // set before the first op is published
  std::thread worker_;
  // The one line the host writes for the worker.
  alignas(64) std::atomic<uint64_t> published_{0};
  // Idle workers sleep here; the host looks at sleeping_ after each launch.
  alignas(64) std::atomic<bool> sleeping_{false};
  std::atomic<bool> stopping_{false};
  std::mutex sleepMutex_;
  std::condition_variable wake_;
  // Whoever runs ops holds runMutex_: the worker, or a host thread in
  // synchronize. executed_ counts the ops run (written under runMutex_);
  // hostsWaiting_ counts host threads asking to run them.
  alignas(64) std::mutex runMutex_;
  std::atomic<uint64_t> executed_{0};
  std::atomic<int> hostsWaiting_{0};
};
// LITERALINCLUDE END: OR_STREAM_QUEUE

// Creates a stream of device and registers its handle.
std::shared_ptr<Stream> createStream(Device& device, int priority);
// Resolves a handle (null: the current device's default stream).
orError_t findStream(orStream_t handle, std::shared_ptr<Stream>* out);
// Takes a live stream out of the registry (orStreamDestroy): an old handle
// then finds nothing. orErrorInvalidResourceHandle if it is not live.
orError_t unregisterStream(orStream_t handle, std::shared_ptr<Stream>* out);
std::vector<std::shared_ptr<Stream>> streamsOf(int device);
// orErrorNotPermitted, for work queued by a kernel on a full stream.
orError_t refuseFullQueue(const Stream& stream);
// Queues op on stream: refuses when the device holds a sticky error, traces
// the launch, and waits when OPENREG_LAUNCH_BLOCKING=1 (or wait is true).
orError_t submit(Stream& stream, Op op, bool wait = false);
inline orStream_t toHandle(uint64_t id) {
  return reinterpret_cast<orStream_t>(static_cast<uintptr_t>(id));
}
inline uint64_t idOf(orStream_t handle) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle)); }

// Whether kernels and copies run for their timing alone (Note [Timing-only
// mode] in stream.cpp).
bool timingOnly();

// ---------------------------------------------------------------- device.cpp

struct Device {
  Device(int index, DeviceMapping mapping) : index(index), memory(index, mapping) {}
  const int index;
  DeviceMemory memory;
  std::shared_ptr<Stream> defaultStream;

  // LITERALINCLUDE START: OR_STICKY_ERRORS
  // Note [Sticky errors]: the first kernel failure on a device is kept here.
  // While set, queued work is skipped and synchronising calls return it,
  // as a faulted CUDA context does; orDeviceReset clears it.
  void setSticky(orError_t code, std::string message);
  orError_t sticky() const { return static_cast<orError_t>(stickyCode_.load()); }
  // Returns the sticky error through fail(), or orSuccess.
  orError_t checkSticky() const;
  std::string stickyMessage() const;
  void clearSticky();
  // LITERALINCLUDE END: OR_STICKY_ERRORS
  // Waits for every stream of this device; returns the sticky error, else
  // the error of any of its streams (Note [Stream errors]).
  orError_t synchronize();

 private:
  std::atomic<int> stickyCode_{orSuccess};
  mutable std::mutex stickyMutex_;
  std::string stickyMessage_;
};

struct Runtime {
  std::vector<std::unique_ptr<Device>> devices;
  bool launchBlocking = false;
  bool checkAliases = false;  // OPENREG_CHECK_ALIASES: Note [Host aliases end with their kernel]
  size_t traceRecords = 0;    // OPENREG_TRACE_RECORDS: how many may wait to be drained
  // OPENREG_TIMING_ONLY, orSetTimingOnly: Note [Timing-only mode] in stream.cpp.
  std::atomic<bool> timingOnly{false};
  orError_t initError = orSuccess;
  std::string initMessage;
};

// Initialises the runtime on first use; returns orSuccess or the reason it
// cannot be used (bad configuration, forked child) through fail().
orError_t ensureInit();
Runtime& runtime();  // only after ensureInit() succeeded
orError_t checkDevice(int index);  // orErrorInvalidDevice through fail()
int currentDevice();
// Makes device the current device of the calling thread (workers use it).
void setCurrentDevice(int device);

// ---------------------------------------------------------------- kernel.cpp

// Runs one kernel op on the calling thread (stream's worker or, for
// orKernelAnyThread kernels, a waiting host thread); reports failure to the
// device.
void runKernel(Stream& stream, Op& op, bool onWorker);
// The stream whose kernel the calling thread is running, or null.
const Stream* runningStream();
// Whether waiting for stream (or for every stream of device) would wait for
// the kernel the calling thread runs; see Note [Waiting from inside a
// kernel] in kernel.cpp.
bool waitsForRunningKernel(const Stream& stream);
bool waitsForRunningKernel(int device);
// orErrorNotPermitted through fail(), naming call and the running kernel.
orError_t refuseWaitForRunningKernel(const char* call);

// ----------------------------------------------------------------- graph.cpp

// Called by submit() for a stream whose capturing flag is set: records op
// into the capture (or refuses it, invalidating the capture, when the caller
// would wait for it) and returns true with the call's status in *status;
// false when the capture ended meanwhile and op should be queued as usual.
bool captureOp(Stream& stream, Op& op, bool wait, orError_t* status);
// For calls that wait for stream's work (synchronise, query, event record
// and wait): orErrorStreamCaptureUnsupported, invalidating the capture, if
// stream is capturing; else orSuccess.
orError_t refuseOnCapturingStream(Stream& stream, const char* call);
// For calls that wait for a whole device (device -1: every device): refuses
// as above when a capture on it forbids that call to this thread
// (orStreamCaptureMode).
orError_t refuseUnsafeCall(int device, const char* call);

// ----------------------------------------------------------------- trace.cpp

uint64_t nowNs();
bool tracing();
uint64_t nextCorrelationId();
void traceRecord(orActivityKind kind, const std::string& name, int device,
                 uint64_t stream, uint64_t startNs, uint64_t endNs,
                 uint64_t correlationId, uint64_t externalCorrelationId = 0,
                 uint64_t waitedForCorrelationId = 0);
// The calling thread's innermost orTracePushExternalCorrelationId, or 0.
uint64_t currentExternalCorrelationId();
// The Launch record of an op this thread queues: beginLaunchTrace, before
// the op is enqueued, gives it its correlation id (when tracing);
// endLaunchTrace, once it is enqueued on stream, records the launch.
struct LaunchTrace {
  uint64_t startNs = 0;  // 0: tracing was off
  uint64_t correlationId = 0;
  std::string name;
};
LaunchTrace beginLaunchTrace(Op& op);
void endLaunchTrace(const LaunchTrace& launch, const Stream& stream);

}  // namespace openreg::rt
