// graph.cpp - stream capture and graphs: work queued on a capturing stream
// is recorded instead of run, and a graph launches the recorded work again.
//
// Not here: graphs built node by node, updating a graph after capture, or
// captures that span several streams (event record and wait are refused).
#include <cstdio>

#include "runtime.h"

namespace openreg::rt {

// LITERALINCLUDE START: OR_STREAM_CAPTURE
// Note [Stream capture]
// A capturing stream keeps a Capture. submit() checks one atomic flag per
// launch (capturing), and only when it is set takes the stream's capture
// lock and appends the operation, unrun, to the capture's list. Calls that
// would wait for the capturing stream's work can never see it finish, so
// they fail and invalidate the capture, as on CUDA: the stream itself then
// keeps capturing until orStreamEndCapture, which reports the reason and
// leaves the stream usable. Calls that wait for a whole device fail too,
// unless the capture's mode allows them to the calling thread.
struct Capture {
  orStreamCaptureMode mode = orStreamCaptureModeGlobal;
  std::thread::id owner;     // the thread that began the capture
  std::vector<Op> ops;       // recorded, in order; kernels' userData owned
  std::string invalidReason; // non-empty once invalidated
  ~Capture() {  // work recorded by a capture that made no graph
    for (Op& op : ops) {
      if (op.release != nullptr) op.release(op.userData);
    }
  }
};
// LITERALINCLUDE END: OR_STREAM_CAPTURE

namespace {

// The operations of a graph, shared by the graph and the graphs
// instantiated from it. The last owner releases the kernels' userData.
struct GraphNodes {
  std::vector<Op> ops;
  ~GraphNodes() {
    for (Op& op : ops) {
      if (op.release != nullptr) op.release(op.userData);
    }
  }
};

// A launchable graph: its nodes and, per stream it was launched on, the
// point that stream must reach before the nodes may be released.
struct GraphExec {
  std::shared_ptr<GraphNodes> nodes;
  std::map<uint64_t, std::pair<std::shared_ptr<Progress>, uint64_t>> launches;
};

std::atomic<int> activeCaptures{0};  // lets unsafe calls skip the scan when 0

// Handles are ids that are never reused, as for streams and events.
std::mutex graphsMutex;
std::unordered_map<uint64_t, std::shared_ptr<GraphNodes>> graphs;
std::unordered_map<uint64_t, std::shared_ptr<GraphExec>> execs;
uint64_t nextGraphId = 1;

uint64_t idOf(const void* handle) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle)); }

const char* modeName(orStreamCaptureMode mode) {
  switch (mode) {
    case orStreamCaptureModeGlobal: return "global";
    case orStreamCaptureModeThreadLocal: return "thread_local";
    case orStreamCaptureModeRelaxed: return "relaxed";
  }
  return "unknown";
}

// Marks the capture failed (the first reason wins) and returns the error
// the offending call reports. Needs the stream's capture lock.
orError_t invalidate(Capture& capture, uint64_t stream, std::string reason) {
  if (capture.invalidReason.empty()) capture.invalidReason = reason;
  return fail(orErrorStreamCaptureUnsupported,
              format("%s, while openreg stream %llu is capturing (capture mode %s); the capture "
                     "is invalidated: end it, then do this outside the capture",
                     reason.c_str(), static_cast<unsigned long long>(stream), modeName(capture.mode)));
}

void releaseOp(Op& op) {
  if (op.release != nullptr) op.release(op.userData);
  op.release = nullptr;
}

// Looks a handle up in one of the registries above.
template <typename Object>
orError_t findHandle(const std::unordered_map<uint64_t, std::shared_ptr<Object>>& registry, const void* handle,
                     const char* call, const char* what, std::shared_ptr<Object>* out) {
  std::lock_guard<std::mutex> lock(graphsMutex);
  auto it = registry.find(idOf(handle));
  if (it == registry.end()) {
    return fail(orErrorInvalidResourceHandle,
                format("%s: %p is not a live %s (destroyed, or never created)", call, handle, what));
  }
  *out = it->second;
  return orSuccess;
}

// Removes a handle from its registry, handing its object to the caller.
template <typename Object>
orError_t takeHandle(std::unordered_map<uint64_t, std::shared_ptr<Object>>& registry, const void* handle,
                     const char* call, const char* what, std::shared_ptr<Object>* out) {
  std::lock_guard<std::mutex> lock(graphsMutex);
  auto it = registry.find(idOf(handle));
  if (it == registry.end()) {
    return fail(orErrorInvalidResourceHandle,
                format("%s: %p is not a live %s (destroyed twice?)", call, handle, what));
  }
  *out = std::move(it->second);
  registry.erase(it);
  return orSuccess;
}

orError_t findGraph(orGraph_t handle, const char* call, std::shared_ptr<GraphNodes>* out) {
  return findHandle(graphs, handle, call, "graph", out);
}

orError_t findExec(orGraphExec_t handle, const char* call, std::shared_ptr<GraphExec>* out) {
  return findHandle(execs, handle, call, "instantiated graph", out);
}

const char* kindName(Op::Kind kind) {
  switch (kind) {
    case Op::Kind::Kernel: return "kernel";
    case Op::Kind::Copy: return "memcpy";
    case Op::Kind::Memset: return "memset";
    case Op::Kind::Mark: return "event record";
    case Op::Kind::Wait: return "event wait";
  }
  return "?";
}

}  // namespace

bool captureOp(Stream& stream, Op& op, bool wait, orError_t* status) {
  {
    std::lock_guard<std::mutex> lock(stream.captureMutex);
    if (stream.capture == nullptr) return false;
    Capture& capture = *stream.capture;
    if (!capture.invalidReason.empty()) {
      *status = fail(orErrorStreamCaptureInvalidated,
                     format("%s: the capture of openreg stream %llu was invalidated earlier (%s)",
                            op.name.c_str(), static_cast<unsigned long long>(stream.id),
                            capture.invalidReason.c_str()));
    } else if (wait) {  // a synchronous copy or memset, or one from pageable memory
      *status = invalidate(capture, stream.id,
                           op.name + " would wait for its own completion (a synchronous copy, or "
                                     "one from pageable host memory: use pinned memory)");
    } else {
      capture.ops.push_back(std::move(op));
      *status = orSuccess;
      return true;
    }
  }
  releaseOp(op);  // outside the lock: a release may take other locks (Python's)
  return true;
}

orError_t refuseOnCapturingStream(Stream& stream, const char* call) {
  if (!stream.capturing.load(std::memory_order_acquire)) return orSuccess;
  std::lock_guard<std::mutex> lock(stream.captureMutex);
  if (stream.capture == nullptr) return orSuccess;
  return invalidate(*stream.capture, stream.id, format("%s waits for the capturing stream", call));
}

orError_t refuseUnsafeCall(int device, const char* call) {
  if (activeCaptures.load() == 0) return orSuccess;
  for (size_t d = 0; d < runtime().devices.size(); ++d) {
    if (device >= 0 && static_cast<int>(d) != device) continue;
    for (auto& stream : streamsOf(static_cast<int>(d))) {
      if (!stream->capturing.load()) continue;
      std::lock_guard<std::mutex> lock(stream->captureMutex);
      Capture* capture = stream->capture.get();
      if (capture == nullptr) continue;
      bool forbidden = capture->mode == orStreamCaptureModeGlobal ||
                       (capture->mode == orStreamCaptureModeThreadLocal &&
                        capture->owner == std::this_thread::get_id());
      if (forbidden) {
        return invalidate(*capture, stream->id,
                          format("%s waits for all work of openreg device %zu", call, d));
      }
    }
  }
  return orSuccess;
}

}  // namespace openreg::rt

using namespace openreg::rt;

extern "C" {

orError_t orStreamBeginCapture(orStream_t handle, orStreamCaptureMode mode) {
  std::shared_ptr<Stream> stream;
  orError_t status = ensureInit();
  if (status != orSuccess || (status = findStream(handle, &stream)) != orSuccess) return status;
  if (mode != orStreamCaptureModeGlobal && mode != orStreamCaptureModeThreadLocal &&
      mode != orStreamCaptureModeRelaxed) {
    return fail(orErrorInvalidValue, format("orStreamBeginCapture: unknown capture mode %d", mode));
  }
  if (stream->id <= runtime().devices.size()) {
    return fail(orErrorStreamCaptureUnsupported,
                format("orStreamBeginCapture: the default stream of openreg device %d cannot "
                       "capture; capture on a stream from orStreamCreate", stream->device.index));
  }
  std::lock_guard<std::mutex> lock(stream->captureMutex);
  if (stream->capture != nullptr) {
    return fail(orErrorNotPermitted,
                format("orStreamBeginCapture: openreg stream %llu is capturing already",
                       static_cast<unsigned long long>(stream->id)));
  }
  auto capture = std::make_shared<Capture>();
  capture->mode = mode;
  capture->owner = std::this_thread::get_id();
  stream->capture = std::move(capture);
  ++activeCaptures;
  stream->capturing.store(true, std::memory_order_release);
  return orSuccess;
}

orError_t orStreamEndCapture(orStream_t handle, orGraph_t* graph) {
  if (graph == nullptr) return fail(orErrorInvalidValue, "orStreamEndCapture: graph is NULL");
  std::shared_ptr<Stream> stream;
  orError_t status = ensureInit();
  if (status != orSuccess || (status = findStream(handle, &stream)) != orSuccess) return status;
  std::shared_ptr<Capture> capture;
  {
    std::lock_guard<std::mutex> lock(stream->captureMutex);
    if (stream->capture == nullptr) {
      return fail(orErrorNotPermitted,
                  format("orStreamEndCapture: openreg stream %llu is not capturing",
                         static_cast<unsigned long long>(stream->id)));
    }
    capture = std::move(stream->capture);
    stream->capturing.store(false, std::memory_order_release);
    --activeCaptures;
  }
  if (!capture->invalidReason.empty()) {  // ~Capture releases the recorded work
    *graph = nullptr;
    return fail(orErrorStreamCaptureInvalidated,
                format("orStreamEndCapture: the capture of openreg stream %llu was invalidated: %s",
                       static_cast<unsigned long long>(stream->id), capture->invalidReason.c_str()));
  }
  auto nodes = std::make_shared<GraphNodes>();
  nodes->ops = std::move(capture->ops);
  capture->ops.clear();
  std::lock_guard<std::mutex> lock(graphsMutex);
  uint64_t id = nextGraphId++;
  graphs[id] = std::move(nodes);
  *graph = reinterpret_cast<orGraph_t>(static_cast<uintptr_t>(id));
  return orSuccess;
}

orError_t orStreamIsCapturing(orStream_t handle, orStreamCaptureStatus* out) {
  if (out == nullptr) return fail(orErrorInvalidValue, "orStreamIsCapturing: status is NULL");
  std::shared_ptr<Stream> stream;
  orError_t status = ensureInit();
  if (status != orSuccess || (status = findStream(handle, &stream)) != orSuccess) return status;
  std::lock_guard<std::mutex> lock(stream->captureMutex);
  if (stream->capture == nullptr) {
    *out = orStreamCaptureStatusNone;
  } else {
    *out = stream->capture->invalidReason.empty() ? orStreamCaptureStatusActive
                                                  : orStreamCaptureStatusInvalidated;
  }
  return orSuccess;
}

orError_t orGraphGetNodeCount(orGraph_t graph, size_t* count) {
  if (count == nullptr) return fail(orErrorInvalidValue, "orGraphGetNodeCount: count is NULL");
  std::shared_ptr<GraphNodes> nodes;
  orError_t status = findGraph(graph, "orGraphGetNodeCount", &nodes);
  if (status == orSuccess) *count = nodes->ops.size();
  return status;
}

orError_t orGraphDebugDotPrint(orGraph_t graph, const char* path) {
  if (path == nullptr) return fail(orErrorInvalidValue, "orGraphDebugDotPrint: path is NULL");
  std::shared_ptr<GraphNodes> nodes;
  orError_t status = findGraph(graph, "orGraphDebugDotPrint", &nodes);
  if (status != orSuccess) return status;
  FILE* out = std::fopen(path, "w");
  if (out == nullptr) {
    return fail(orErrorInvalidValue, format("orGraphDebugDotPrint: cannot write %s", path));
  }
  std::fprintf(out, "openreg graph: %zu operations, run in this order on one stream\n", nodes->ops.size());
  for (size_t i = 0; i < nodes->ops.size(); ++i) {
    const Op& op = nodes->ops[i];
    std::fprintf(out, "%zu %s %s", i, kindName(op.kind), op.name.c_str());
    if (op.kind != Op::Kind::Kernel) {
      std::fprintf(out, " dst=%p src=%p bytes=%zu", op.dst, op.src, op.count);
    }
    std::fprintf(out, "\n");
  }
  bool written = std::fclose(out) == 0;
  return written ? orSuccess
                 : fail(orErrorInvalidValue, format("orGraphDebugDotPrint: writing %s failed", path));
}

orError_t orGraphInstantiate(orGraphExec_t* exec, orGraph_t graph) {
  if (exec == nullptr) return fail(orErrorInvalidValue, "orGraphInstantiate: exec is NULL");
  std::shared_ptr<GraphNodes> nodes;
  orError_t status = findGraph(graph, "orGraphInstantiate", &nodes);
  if (status != orSuccess) return status;
  auto created = std::make_shared<GraphExec>();
  created->nodes = std::move(nodes);
  std::lock_guard<std::mutex> lock(graphsMutex);
  uint64_t id = nextGraphId++;
  execs[id] = std::move(created);
  *exec = reinterpret_cast<orGraphExec_t>(static_cast<uintptr_t>(id));
  return orSuccess;
}

// LITERALINCLUDE START: OR_GRAPH_LAUNCH
orError_t orGraphLaunch(orGraphExec_t handle, orStream_t streamHandle) {
  std::shared_ptr<GraphExec> exec;
  std::shared_ptr<Stream> stream;
  orError_t status = ensureInit();
  if (status != orSuccess || (status = findExec(handle, "orGraphLaunch", &exec)) != orSuccess ||
      (status = findStream(streamHandle, &stream)) != orSuccess) {
    return status;
  }
  if (stream->capturing.load()) {
    return fail(orErrorStreamCaptureUnsupported,
                "orGraphLaunch: cannot launch a graph onto a capturing stream");
  }
  // The graph keeps its kernels' userData: a launch queues copies of the
  // operations that do not release it.
  for (const Op& recorded : exec->nodes->ops) {
    Op op = recorded;
    op.release = nullptr;
    if ((status = submit(*stream, std::move(op))) != orSuccess) return status;
  }
  std::lock_guard<std::mutex> lock(graphsMutex);
  exec->launches[stream->id] = {stream->progress, stream->lastEnqueued()};
  return orSuccess;
}
// LITERALINCLUDE END: OR_GRAPH_LAUNCH

orError_t orGraphExecDestroy(orGraphExec_t handle) {
  if (handle == nullptr) return orSuccess;
  std::shared_ptr<GraphExec> exec;
  orError_t status = takeHandle(execs, handle, "orGraphExecDestroy", "instantiated graph", &exec);
  if (status != orSuccess) return status;
  // Queued launches still run the nodes' kernels: wait for them before the
  // nodes (and the kernels' userData) may go.
  for (auto& [stream, point] : exec->launches) point.first->waitFor(point.second);
  return orSuccess;
}

orError_t orGraphDestroy(orGraph_t handle) {
  if (handle == nullptr) return orSuccess;
  std::shared_ptr<GraphNodes> nodes;  // released, if last, on return: outside the lock
  return takeHandle(graphs, handle, "orGraphDestroy", "graph", &nodes);
}

}  // extern "C"
