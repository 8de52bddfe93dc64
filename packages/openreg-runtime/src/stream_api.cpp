// stream_api.cpp - the C API of streams (orStream*): creating, destroying,
// querying and synchronising them through their handles. The streams
// themselves are stream.cpp's.
#include <algorithm>
#include <memory>

#include "runtime.h"

using namespace openreg::rt;

namespace {

orError_t createOnCurrentDevice(orStream_t* stream, int priority, const char* call) {
  orError_t status = ensureInit();
  if (status != orSuccess) return status;
  if (stream == nullptr) return fail(orErrorInvalidValue, format("%s: stream is NULL", call));
  int least = 0, greatest = 0;
  orDeviceGetStreamPriorityRange(&least, &greatest);
  priority = std::min(least, std::max(greatest, priority));
  *stream = toHandle(createStream(*runtime().devices[currentDevice()], priority)->id);
  return orSuccess;
}

// Resolves a handle after making sure the runtime is usable.
orError_t lookup(orStream_t handle, std::shared_ptr<Stream>* out) {
  orError_t status = ensureInit();
  return status != orSuccess ? status : findStream(handle, out);
}

}  // namespace

extern "C" {

orError_t orStreamCreate(orStream_t* stream) {
  return createOnCurrentDevice(stream, 0, "orStreamCreate");
}

orError_t orStreamCreateWithPriority(orStream_t* stream, int priority) {
  return createOnCurrentDevice(stream, priority, "orStreamCreateWithPriority");
}

orError_t orStreamDestroy(orStream_t stream) {
  if (stream == nullptr) return orSuccess;
  orError_t status = ensureInit();
  if (status != orSuccess) return status;
  uint64_t id = idOf(stream);
  if (runningStream() != nullptr && runningStream()->id == id) {
    return fail(orErrorNotPermitted,
                "orStreamDestroy: a kernel cannot destroy the stream it runs on");
  }
  if (id <= runtime().devices.size()) {
    return fail(orErrorInvalidResourceHandle,
                format("orStreamDestroy: %p is the default stream of openreg device "
                       "%llu, which cannot be destroyed", static_cast<void*>(stream),
                       static_cast<unsigned long long>(id - 1)));
  }
  std::shared_ptr<Stream> capturing;
  if (findStream(stream, &capturing) == orSuccess &&
      (status = refuseOnCapturingStream(*capturing, "orStreamDestroy")) != orSuccess) {
    return status;
  }
  std::shared_ptr<Stream> doomed;
  if ((status = unregisterStream(stream, &doomed)) != orSuccess) return status;
  // Another thread (say in orDeviceSynchronize) may still hold the stream,
  // so dropping our reference need not wait: wait for its work here.
  doomed->synchronize();
  doomed.reset();  // joins the worker once the last user lets go
  return orSuccess;
}

orError_t orStreamQuery(orStream_t handle) {
  std::shared_ptr<Stream> stream;
  orError_t status = lookup(handle, &stream);
  if (status != orSuccess) return status;
  if ((status = stream->check()) != orSuccess) return status;
  if ((status = refuseOnCapturingStream(*stream, "orStreamQuery")) != orSuccess) return status;
  if (stream->progress->completed() >= stream->lastEnqueued()) return orSuccess;
  return orErrorNotReady;  // not a failure: the last error is left alone
}

orError_t orStreamSynchronize(orStream_t handle) {
  std::shared_ptr<Stream> stream;
  orError_t status = lookup(handle, &stream);
  if (status != orSuccess) return status;
  if (waitsForRunningKernel(*stream)) return refuseWaitForRunningKernel("orStreamSynchronize");
  if ((status = refuseOnCapturingStream(*stream, "orStreamSynchronize")) != orSuccess) return status;
  uint64_t start = tracing() ? nowNs() : 0;
  stream->synchronize();
  if (start != 0) {
    traceRecord(orActivityKindSynchronize, "orStreamSynchronize", stream->device.index,
                stream->id, start, nowNs(), 0);
  }
  return stream->check();
}

orError_t orStreamGetPriority(orStream_t handle, int* priority) {
  if (priority == nullptr) return fail(orErrorInvalidValue, "orStreamGetPriority: priority is NULL");
  std::shared_ptr<Stream> stream;
  orError_t status = lookup(handle, &stream);
  if (status == orSuccess) *priority = stream->priority;
  return status;
}

orError_t orStreamGetDevice(orStream_t handle, int* device) {
  if (device == nullptr) return fail(orErrorInvalidValue, "orStreamGetDevice: device is NULL");
  std::shared_ptr<Stream> stream;
  orError_t status = lookup(handle, &stream);
  if (status == orSuccess) *device = stream->device.index;
  return status;
}

orError_t orStreamGetId(orStream_t handle, uint64_t* id) {
  if (id == nullptr) return fail(orErrorInvalidValue, "orStreamGetId: id is NULL");
  std::shared_ptr<Stream> stream;
  orError_t status = lookup(handle, &stream);
  if (status == orSuccess) *id = stream->id;
  return status;
}

}  // extern "C"
