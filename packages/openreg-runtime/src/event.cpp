// event.cpp - events: a captured point in a stream's history that the host
// can query, wait for and time, and that other streams can wait on.
//
// An event holds no queue of its own: recording queues a Mark op (which
// stamps the time) and remembers the stream's progress counter and the
// Mark's sequence number; the event has completed once the counter reaches it.
#include "runtime.h"

namespace openreg::rt {
namespace {

struct Event {
  int device;
  unsigned flags;
  std::mutex mutex;
  std::shared_ptr<EventCapture> capture;  // null until first recorded

  std::shared_ptr<EventCapture> current() {
    std::lock_guard<std::mutex> lock(mutex);
    return capture;
  }
};

std::shared_mutex registryMutex;
std::unordered_map<uint64_t, std::shared_ptr<Event>> registry;
// Event ids live far above stream ids, so a stream handle passed as an
// event (or the reverse) finds nothing instead of an unrelated object.
uint64_t nextEventId = uint64_t{1} << 40;

uint64_t idOf(orEvent_t handle) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle)); }

orError_t findEvent(orEvent_t handle, std::shared_ptr<Event>* out) {
  orError_t status = ensureInit();
  if (status != orSuccess) return status;
  {
    std::shared_lock<std::shared_mutex> lock(registryMutex);
    auto it = registry.find(idOf(handle));
    if (it != registry.end()) {
      *out = it->second;
      return orSuccess;
    }
  }
  return fail(orErrorInvalidResourceHandle,
              format("event handle %p is not a live event (destroyed, or never created)",
                     static_cast<void*>(handle)));
}

bool finished(const EventCapture& capture) { return capture.progress->completed() >= capture.seq; }

}  // namespace
}  // namespace openreg::rt

using namespace openreg::rt;

extern "C" {

orError_t orEventCreate(orEvent_t* event) { return orEventCreateWithFlags(event, orEventDefault); }

orError_t orEventCreateWithFlags(orEvent_t* event, unsigned int flags) {
  orError_t status = ensureInit();
  if (status != orSuccess) return status;
  if (event == nullptr) return fail(orErrorInvalidValue, "orEventCreateWithFlags: event is NULL");
  if ((flags & ~unsigned{orEventBlockingSync | orEventDisableTiming}) != 0) {
    return fail(orErrorInvalidValue, format("orEventCreateWithFlags: unknown flags 0x%x", flags));
  }
  auto created = std::make_shared<Event>();
  created->device = currentDevice();
  created->flags = flags;
  std::unique_lock<std::shared_mutex> lock(registryMutex);
  uint64_t id = nextEventId++;
  registry[id] = std::move(created);
  *event = reinterpret_cast<orEvent_t>(static_cast<uintptr_t>(id));
  return orSuccess;
}

// LITERALINCLUDE START: OR_EVENT_RECORD
orError_t orEventRecord(orEvent_t handle, orStream_t streamHandle) {
  std::shared_ptr<Event> event;
  std::shared_ptr<Stream> stream;
  orError_t status = findEvent(handle, &event);
  if (status != orSuccess || (status = findStream(streamHandle, &stream)) != orSuccess) {
    return status;
  }
  if ((status = refuseOnCapturingStream(*stream, "orEventRecord")) != orSuccess) return status;
  if (stream->device.index != event->device) {
    return fail(orErrorInvalidDevice,
                format("orEventRecord: the event belongs to openreg device %d but the "
                       "stream to device %d; record it on a stream of device %d",
                       event->device, stream->device.index, event->device));
  }
  // A faulted device's work is skipped: a capture of it would complete
  // without the work, so report the failure here (Note [Sticky errors]). A
  // failed stream's error is the captured work's, not this call's: the
  // capture carries it to its waiters (Note [Stream errors]), whether the
  // failure came before this call or after it.
  if ((status = stream->device.checkSticky()) != orSuccess) return status;
  auto capture = std::make_shared<EventCapture>();
  capture->stream = stream;
  capture->progress = stream->progress;
  capture->device = stream->device.index;
  capture->streamId = stream->id;
  Op op;
  op.kind = Op::Kind::Mark;
  op.capture = capture;
  op.name = "eventRecord";
  LaunchTrace launch = beginLaunchTrace(op);  // on the stream's lane, as kernels are
  capture->correlationId = launch.correlationId;  // names the record in the waits' trace records
  // The lock orders concurrent records of one event: the later one wins.
  std::lock_guard<std::mutex> lock(event->mutex);
  capture->seq = stream->enqueue(std::move(op));
  if (capture->seq == 0) return refuseFullQueue(*stream);
  event->capture = std::move(capture);
  endLaunchTrace(launch, *stream);
  return orSuccess;
}
// LITERALINCLUDE END: OR_EVENT_RECORD

orError_t orEventQuery(orEvent_t handle) {
  std::shared_ptr<Event> event;
  orError_t status = findEvent(handle, &event);
  if (status != orSuccess) return status;
  auto capture = event->current();
  if (capture == nullptr) return orSuccess;
  // As orStreamQuery: a faulted device reports its sticky error.
  if ((status = runtime().devices[capture->device]->checkSticky()) != orSuccess) return status;
  if (finished(*capture)) return orSuccess;
  return orErrorNotReady;  // not a failure: the last error is left alone
}

orError_t orEventSynchronize(orEvent_t handle) {
  std::shared_ptr<Event> event;
  orError_t status = findEvent(handle, &event);
  if (status != orSuccess) return status;
  auto capture = event->current();
  if (capture == nullptr) return orSuccess;
  const Stream* self = runningStream();
  if (self != nullptr && self->progress == capture->progress && !finished(*capture)) {
    return refuseWaitForRunningKernel("orEventSynchronize");  // the capture awaits this kernel
  }
  uint64_t start = tracing() ? nowNs() : 0;
  bool spin = (event->flags & orEventBlockingSync) == 0;
  if (std::shared_ptr<Stream> stream = capture->stream.lock()) {
    stream->waitFor(capture->seq, spin);  // runs the queued work where it may
  } else {
    capture->progress->waitFor(capture->seq, spin);  // a destroyed stream's worker drains it
  }
  if (start != 0) {
    traceRecord(orActivityKindSynchronize, "orEventSynchronize", capture->device, capture->streamId, start,
                nowNs(), 0, 0, capture->correlationId);
  }
  if ((status = runtime().devices[capture->device]->checkSticky()) != orSuccess) return status;
  // The captured work failed (Note [Stream errors]): its results are not there.
  return capture->progress->failedBy(capture->seq) ? capture->progress->check() : orSuccess;
}

orError_t orEventElapsedTime(float* ms, orEvent_t startHandle, orEvent_t endHandle) {
  if (ms == nullptr) return fail(orErrorInvalidValue, "orEventElapsedTime: ms is NULL");
  std::shared_ptr<Event> start, end;
  orError_t status = findEvent(startHandle, &start);
  if (status != orSuccess || (status = findEvent(endHandle, &end)) != orSuccess) return status;
  if ((start->flags | end->flags) & orEventDisableTiming) {
    return fail(orErrorInvalidResourceHandle,
                "orEventElapsedTime: an event was created with orEventDisableTiming");
  }
  if (start->device != end->device) {  // each device has its own clock, as on CUDA
    return fail(orErrorInvalidResourceHandle,
                format("orEventElapsedTime: the events belong to different openreg devices "
                       "(%d and %d); time events recorded on streams of one device",
                       start->device, end->device));
  }
  auto a = start->current();
  auto b = end->current();
  if (a == nullptr || b == nullptr) {
    return fail(orErrorInvalidResourceHandle,
                "orEventElapsedTime: both events must have been recorded");
  }
  if (!finished(*a) || !finished(*b)) return orErrorNotReady;
  double delta = static_cast<double>(b->timeNs.load()) - static_cast<double>(a->timeNs.load());
  *ms = static_cast<float>(delta / 1e6);
  return orSuccess;
}

orError_t orEventDestroy(orEvent_t handle) {
  if (handle == nullptr) return orSuccess;
  orError_t status = ensureInit();
  if (status != orSuccess) return status;
  std::unique_lock<std::shared_mutex> lock(registryMutex);
  if (registry.erase(idOf(handle)) == 0) {
    return fail(orErrorInvalidResourceHandle,
                format("orEventDestroy: %p is not a live event (destroyed twice?)",
                       static_cast<void*>(handle)));
  }
  return orSuccess;
}

orError_t orStreamWaitEvent(orStream_t streamHandle, orEvent_t handle) {
  std::shared_ptr<Event> event;
  std::shared_ptr<Stream> stream;
  orError_t status = findEvent(handle, &event);
  if (status != orSuccess || (status = findStream(streamHandle, &stream)) != orSuccess) {
    return status;
  }
  if ((status = refuseOnCapturingStream(*stream, "orStreamWaitEvent")) != orSuccess) return status;
  auto capture = event->current();
  if (capture == nullptr) return orSuccess;
  // The waiting stream would go on with results the faulted device never
  // produced (as CUDA, the fault is reported to whoever depends on it).
  if ((status = runtime().devices[capture->device]->checkSticky()) != orSuccess) return status;
  if ((status = stream->check()) != orSuccess) return status;
  // A wait for work that failed is queued even when that work has ended:
  // running it, the stream inherits the failure in order (Note [Stream errors]).
  // While activity is recorded it is queued too: the dependency is the
  // program's, and whoever replays the trace (openreg-perf's prediction) must
  // see it however fast the simulator happened to run the work waited for.
  if (finished(*capture) && !capture->progress->failedBy(capture->seq) && !tracing()) {
    return orSuccess;
  }
  Op op;
  op.kind = Op::Kind::Wait;
  op.capture = std::move(capture);
  op.name = "streamWaitEvent";
  LaunchTrace launch = beginLaunchTrace(op);
  if (stream->enqueue(std::move(op)) == 0) return refuseFullQueue(*stream);
  endLaunchTrace(launch, *stream);
  return orSuccess;
}

}  // extern "C"
