// kernel.cpp - launching kernels and what a running kernel may do: translate
// device pointers to their host alias, and report failure.
//
// A kernel is an ordinary host function run by a stream's worker. The only
// way it reaches device memory is orKernelTranslatePointer, which checks the
// range against live allocations, so a kernel bug surfaces as an illegal
// address error naming the kernel rather than as silent corruption.
#include "runtime.h"

namespace openreg::rt {
namespace {

// What the runtime knows about the kernel running on this thread.
struct KernelContext {
  const Stream* stream = nullptr;
  const char* name = "";
  bool onWorker = true;  // false: a waiting host thread runs it (orKernelAnyThread)
  orError_t failure = orSuccess;  // set by a failed translation
  std::string message;
  orError_t streamFailure = orSuccess;  // orKernelFailStream
  std::string streamMessage;
  std::vector<AliasWindow> windows;  // OPENREG_CHECK_ALIASES
};
thread_local KernelContext* running = nullptr;

// Note [Host aliases end with their kernel]: the alias, in a mapping the
// running kernel gives up when it returns.
char* translateIntoWindow(char* alias, size_t count) {
  AliasWindow window;
  char* inWindow = platformOpenAliasWindow(alias, count, &window);
  if (inWindow != nullptr) running->windows.push_back(window);
  return inWindow;
}

}  // namespace

const Stream* runningStream() { return running == nullptr ? nullptr : running->stream; }

// Note [Waiting from inside a kernel]
// A kernel runs on its stream's worker, which runs nothing else until the
// kernel returns: a call made by the kernel that waits for that stream, or
// for its whole device, would wait for itself forever. Such calls return
// orErrorNotPermitted with a message naming the call instead. Calls that
// only queue work, and waits for other streams or devices, work as usual.
bool waitsForRunningKernel(const Stream& stream) {
  return running != nullptr && running->stream == &stream;
}

bool waitsForRunningKernel(int device) {
  return running != nullptr && running->stream->device.index == device;
}

orError_t refuseWaitForRunningKernel(const char* call) {
  return fail(orErrorNotPermitted,
              format("%s was called from inside kernel '%s' on openreg device %d (stream %llu) and "
                     "would wait for that kernel's own stream, which cannot finish until the kernel "
                     "returns; a kernel may not synchronise with its own stream or device: "
                     "synchronise from the host after the launch instead",
                     call, running->name, running->stream->device.index,
                     static_cast<unsigned long long>(running->stream->id)));
}

// Note [Host aliases end with their kernel]
// The address orKernelTranslatePointer returns lies in the device's host
// alias: one read-write mapping of all its pages, shared by every stream's
// kernels, the copies and the copy engine's threads at once. So host code
// that keeps the address past its kernel still reaches the memory, and
// after a free, whatever tensor lives there next. Taking that access away
// per kernel would take a mapping per translation and a TLB shootdown per
// kernel, several microseconds each, which would make every launch several
// times slower (tools/bench/runtime.py measures it). So it is a debugging
// switch, as compute-sanitizer's memcheck is for CUDA: with
// OPENREG_CHECK_ALIASES=1 each translation returns an address in a mapping
// of its own, which is made inaccessible when the kernel returns, and the
// fault handler names the kernel. (torch-openreg revokes the CPU tensors it
// hands a Python kernel when the kernel ends; views a C++ kernel body keeps
// are caught by this switch alone.)

// LITERALINCLUDE START: OR_KERNEL_RUNNER
void runKernel(Stream& stream, Op& op, bool onWorker) {
  KernelContext context;
  context.stream = &stream;
  context.name = op.name.c_str();
  context.onWorker = onWorker;
  running = &context;
  // An earlier kernel on this worker may have called orSetDevice; inside a
  // kernel the current device is always the stream's (orGetDevice).
  setCurrentDevice(stream.device.index);
  // Note [Timing-only mode]: the kernel is ordered, traced and released, not run.
  orError_t result = timingOnly() ? orSuccess : op.func(op.userData);
  running = nullptr;
  for (const AliasWindow& window : context.windows) platformRetireAliasWindow(window, context.name);
  if (op.release != nullptr) op.release(op.userData);
  if (context.failure != orSuccess) result = context.failure;
  if (result == orSuccess && context.streamFailure != orSuccess) {
    // The work's failure, not the device's (Note [Stream errors]).
    stream.progress->recordFailure(
        context.streamFailure,
        format("%s (kernel '%s' on openreg stream %llu of device %d failed its stream: work ordered after it "
               "does not run; the device and its other streams go on)", context.streamMessage.c_str(),
               op.name.c_str(), static_cast<unsigned long long>(stream.id), stream.device.index));
    return;
  }
  if (result == orSuccess) return;
  std::string detail = context.message.empty() ? orGetErrorString(result) : context.message;
  stream.device.setSticky(
      result, format("kernel '%s' failed on openreg device %d (stream %llu): %s",
                     op.name.c_str(), stream.device.index,
                     static_cast<unsigned long long>(stream.id), detail.c_str()));
}
// LITERALINCLUDE END: OR_KERNEL_RUNNER

}  // namespace openreg::rt

using namespace openreg::rt;

extern "C" {

orError_t orLaunchKernelWithFlags(orStream_t handle, orKernelFunc_t func,
                                  void (*release)(void*), void* userData,
                                  const char* name, unsigned int flags) {
  auto refuse = [&](orError_t status) {
    if (release != nullptr) release(userData);
    return status;
  };
  orError_t status = ensureInit();
  if (status != orSuccess) return refuse(status);
  if (func == nullptr) return refuse(fail(orErrorInvalidValue, "orLaunchKernel: func is NULL"));
  if ((flags & ~unsigned{orKernelAnyThread}) != 0) {
    return refuse(fail(orErrorInvalidValue,
                       format("orLaunchKernelWithFlags: unknown flags 0x%x; pass orKernelDefault "
                              "or orKernelAnyThread", flags)));
  }
  std::shared_ptr<Stream> stream;
  if ((status = findStream(handle, &stream)) != orSuccess) return refuse(status);
  Op op;
  op.kind = Op::Kind::Kernel;
  op.func = func;
  op.release = release;
  op.userData = userData;
  op.name = name != nullptr ? name : "<unnamed kernel>";
  op.anyThread = (flags & orKernelAnyThread) != 0;
  return submit(*stream, std::move(op));  // submit releases on refusal
}

orError_t orLaunchKernelWithRelease(orStream_t handle, orKernelFunc_t func,
                                    void (*release)(void*), void* userData,
                                    const char* name) {
  return orLaunchKernelWithFlags(handle, func, release, userData, name, orKernelDefault);
}

orError_t orLaunchKernel(orStream_t stream, orKernelFunc_t func, void* userData,
                         const char* name) {
  return orLaunchKernelWithRelease(stream, func, nullptr, userData, name);
}

// LITERALINCLUDE START: OR_KERNEL_TRANSLATE
orError_t orKernelTranslatePointer(void** hostPtr, const void* devPtr, size_t count) {
  if (running == nullptr) {
    return fail(orErrorNotPermitted,
                "orKernelTranslatePointer may only be called from inside a running "
                "kernel; from the host, copy device memory with orMemcpy");
  }
  if (hostPtr == nullptr) return fail(orErrorInvalidValue, "orKernelTranslatePointer: hostPtr is NULL");
  Location where = locate(devPtr);
  char* alias = nullptr;
  if (where.inDeviceRange) {
    alias = runtime().devices[where.device]->memory.translate(devPtr, count);
  }
  if (alias == nullptr) {
    std::string message =
        format("illegal address: %zu bytes at %p are not inside one live allocation "
               "of an openreg device", count, devPtr);
    if (running->failure == orSuccess) {
      running->failure = orErrorIllegalAddress;
      running->message = message;
    }
    return fail(orErrorIllegalAddress, message);
  }
  if (runtime().checkAliases) alias = translateIntoWindow(alias, count);
  if (alias == nullptr) {
    return fail(orErrorMemoryAllocation,
                format("orKernelTranslatePointer: OPENREG_CHECK_ALIASES=1 could not map a window of %zu bytes", count));
  }
  *hostPtr = alias;
  return orSuccess;
}
// LITERALINCLUDE END: OR_KERNEL_TRANSLATE

orError_t orKernelIsOnWorker(int* onWorker) {
  if (running == nullptr) return fail(orErrorNotPermitted, "orKernelIsOnWorker: not inside a running kernel");
  if (onWorker == nullptr) return fail(orErrorInvalidValue, "orKernelIsOnWorker: onWorker is NULL");
  *onWorker = running->onWorker ? 1 : 0;
  return orSuccess;
}

orError_t orKernelFailStream(orError_t code, const char* message) {
  if (running == nullptr) return fail(orErrorNotPermitted, "orKernelFailStream: not inside a running kernel");
  if (code == orSuccess) return fail(orErrorInvalidValue, "orKernelFailStream: code is orSuccess, not an error");
  if (running->streamFailure == orSuccess) {
    running->streamFailure = code;
    running->streamMessage = message != nullptr ? message : orGetErrorString(code);
  }
  return orSuccess;
}

orError_t orKernelSetErrorMessage(const char* message) {
  if (running == nullptr) {
    return fail(orErrorNotPermitted, "orKernelSetErrorMessage: not inside a running kernel");
  }
  if (running->message.empty()) running->message = message != nullptr ? message : "";
  return orSuccess;
}

}  // extern "C"
