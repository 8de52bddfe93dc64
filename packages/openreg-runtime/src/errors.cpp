// errors.cpp - status codes as text, and the per-thread last error.
//
// A failing call records its code and a message naming what went wrong;
// orGetLastError reads and resets the code, orPeekAtLastError only reads it.
#include <cstdarg>
#include <cstdio>

#include "runtime.h"

namespace openreg::rt {
namespace {

thread_local orError_t lastError = orSuccess;
thread_local std::string lastMessage;

struct CodeText {
  const char* name;
  const char* text;
};

CodeText describe(orError_t error) {
  switch (error) {
    case orSuccess: return {"orSuccess", "no error"};
    case orErrorInvalidValue: return {"orErrorInvalidValue", "invalid argument"};
    case orErrorMemoryAllocation: return {"orErrorMemoryAllocation", "out of memory"};
    case orErrorInitializationError:
      return {"orErrorInitializationError", "initialization error"};
    case orErrorInvalidDevice: return {"orErrorInvalidDevice", "invalid device ordinal"};
    case orErrorInvalidDevicePointer:
      return {"orErrorInvalidDevicePointer", "invalid device pointer"};
    case orErrorInvalidMemcpyDirection:
      return {"orErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"};
    case orErrorInvalidResourceHandle:
      return {"orErrorInvalidResourceHandle", "invalid resource handle"};
    case orErrorNotReady: return {"orErrorNotReady", "device not ready"};
    case orErrorIllegalAddress:
      return {"orErrorIllegalAddress", "an illegal memory access was encountered"};
    case orErrorLaunchFailure: return {"orErrorLaunchFailure", "kernel failed"};
    case orErrorNotPermitted: return {"orErrorNotPermitted", "operation not permitted"};
    case orErrorUnknown: return {"orErrorUnknown", "unknown error"};
    case orErrorStreamCaptureUnsupported:
      return {"orErrorStreamCaptureUnsupported", "operation not permitted when stream is capturing"};
    case orErrorStreamCaptureInvalidated:
      return {"orErrorStreamCaptureInvalidated", "operation failed due to a previous error during capture"};
  }
  return {"orErrorUnrecognized", "unrecognized error code"};
}

}  // namespace

orError_t fail(orError_t code, std::string message) {
  lastError = code;
  lastMessage = std::move(message);
  return code;
}

LastErrorKeeper::LastErrorKeeper() : code_(lastError), message_(lastMessage) {}

LastErrorKeeper::~LastErrorKeeper() {
  lastError = code_;
  lastMessage = std::move(message_);
}

std::string format(const char* fmt, ...) {
  va_list args, measure;
  va_start(args, fmt);
  va_copy(measure, args);
  int length = vsnprintf(nullptr, 0, fmt, measure);
  va_end(measure);
  std::string text(length > 0 ? static_cast<size_t>(length) : 0, '\0');
  if (length > 0) vsnprintf(text.data(), text.size() + 1, fmt, args);
  va_end(args);
  return text;
}

}  // namespace openreg::rt

using namespace openreg::rt;

extern "C" {

const char* orGetErrorString(orError_t error) { return describe(error).text; }

const char* orGetErrorName(orError_t error) { return describe(error).name; }

orError_t orGetLastError(void) {
  orError_t error = lastError;
  lastError = orSuccess;
  return error;
}

orError_t orPeekAtLastError(void) { return lastError; }

const char* orGetLastErrorMessage(void) { return lastMessage.c_str(); }

orError_t orRuntimeGetVersion(int* version) {
  if (version == nullptr) return fail(orErrorInvalidValue, "orRuntimeGetVersion: version is NULL");
  *version = OPENREG_VERSION;
  return orSuccess;
}

}  // extern "C"
