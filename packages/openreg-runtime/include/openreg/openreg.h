/*
 * openreg.h - the C API of the OpenReg simulated accelerator runtime.
 *
 * This is the interface a vendor runtime would offer (think cudaMalloc,
 * cudaMemcpyAsync, cudaStreamCreate): devices, memory the host cannot touch,
 * asynchronous streams, events and kernels. It deliberately knows nothing of
 * PyTorch; torch-openreg binds it exactly as a vendor binds its own runtime.
 *
 * Conventions, declared once:
 *  - Every function returns an orError_t; outputs come first in the argument
 *    list and are written only on orSuccess. A function whose comment says
 *    "Outputs last, as CUDA's cudaX" keeps CUDA's order instead, so that a
 *    port from CUDA reads alike (tools/api_check.py holds both rules).
 *  - Each parameter is marked in, out or in,out, and each comment names
 *    what a function returns and the functions to read beside it (Related).
 *  - A failing call also records its code as this thread's last error
 *    (orGetLastError, orPeekAtLastError) and a message naming what went wrong
 *    (orGetLastErrorMessage).
 *  - Sizes are in bytes, times in milliseconds unless the name says ns.
 *  - A null orStream_t means the default stream of the calling thread's
 *    current device.
 *  - Every function is safe to call from any thread. Functions marked
 *    "kernel only" may be called only from inside a running kernel.
 *  - A kernel runs on its stream's worker thread. A call made from inside a
 *    kernel that would wait for the kernel's own stream, or for every stream
 *    of its device, would wait for itself: it returns orErrorNotPermitted,
 *    with a message naming the call, instead of hanging. These are
 *    orDeviceSynchronize, orDeviceReset, orStreamSynchronize (own stream),
 *    orEventSynchronize (an event recorded on the own stream after the
 *    kernel was queued), orFree (memory of the own device), orFreeHost,
 *    orMemcpy and orMemset (touching the own device), and orMemcpyAsync
 *    with pageable host memory on the own stream. Queueing work (launches,
 *    async copies, event records) and waiting for other streams work.
 *  - Destroy and free functions accept null and then do nothing.
 *  - Two kinds of asynchronous failure (see orLaunchKernel): a device's
 *    sticky error stops all of its work; a stream error (orKernelFailStream)
 *    stops only the work ordered after the failed op: later work on its
 *    stream, and on every stream that waits for an event recorded after it.
 *    "The sticky or stream error" below means whichever applies to the
 *    stream or event the call waits for.
 */
#ifndef OPENREG_OPENREG_H
#define OPENREG_OPENREG_H

#include <stddef.h>
#include <stdint.h>

#include "openreg/version.h"

/* What the library exports: on Windows its DLL's exports and a program's
 * imports, elsewhere the symbols visible outside the shared library. */
#if defined(_WIN32)
#if defined(OPENREG_BUILDING_LIBRARY)
#define OPENREG_API __declspec(dllexport)
#else
#define OPENREG_API __declspec(dllimport)
#endif
#elif defined(OPENREG_BUILDING_LIBRARY)
#define OPENREG_API __attribute__((visibility("default")))
#else
#define OPENREG_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Status codes                                                              */
/* ------------------------------------------------------------------------ */

// LITERALINCLUDE START: OR_ERROR_CODES
typedef enum orError {
  orSuccess = 0,
  orErrorInvalidValue = 1,           /* an argument is out of range or null */
  orErrorMemoryAllocation = 2,       /* out of device or host memory */
  orErrorInitializationError = 3,    /* bad configuration, or used after fork */
  orErrorInvalidDevice = 4,          /* no such device, or the wrong device */
  orErrorInvalidDevicePointer = 5,   /* freed, never allocated, or interior */
  orErrorInvalidMemcpyDirection = 6, /* the copy kind contradicts the pointers */
  orErrorInvalidResourceHandle = 7,  /* unknown or destroyed stream or event */
  orErrorNotReady = 8,               /* queried work has not completed yet */
  orErrorIllegalAddress = 9,         /* a kernel reached outside an allocation */
  orErrorLaunchFailure = 10,         /* a kernel reported failure */
  orErrorNotPermitted = 11,          /* valid call, wrong context */
  orErrorUnknown = 12,
  orErrorStreamCaptureUnsupported = 13, /* not allowed while a stream captures */
  orErrorStreamCaptureInvalidated = 14  /* the capture failed; see its message */
} orError_t;
// LITERALINCLUDE END: OR_ERROR_CODES

/* ------------------------------------------------------------------------ */
/* Handles and plain data                                                    */
/* ------------------------------------------------------------------------ */

/* Opaque handles. A handle stays distinguishable after it is destroyed:
 * using it then returns orErrorInvalidResourceHandle, never a crash. */
typedef struct orStream_st* orStream_t;
typedef struct orEvent_st* orEvent_t;
typedef struct orGraph_st* orGraph_t;         /* work recorded by a capture */
typedef struct orGraphExec_st* orGraphExec_t; /* a graph ready to launch */

typedef enum orMemcpyKind {
  orMemcpyHostToHost = 0,
  orMemcpyHostToDevice = 1,
  orMemcpyDeviceToHost = 2,
  orMemcpyDeviceToDevice = 3,
  orMemcpyDefault = 4 /* inferred from the pointers */
} orMemcpyKind;

typedef enum orMemoryType {
  orMemoryTypeUnregistered = 0, /* ordinary (pageable) host memory */
  orMemoryTypeHost = 1,         /* pinned host memory from orMallocHost */
  orMemoryTypeDevice = 2        /* device memory from orMalloc */
} orMemoryType;

typedef struct orPointerAttributes {
  orMemoryType type;
  int device;   /* the owning device, or -1 for host memory */
  void* base;   /* start of the allocation holding the pointer, or NULL */
  size_t size;  /* size of that allocation, or 0 */
} orPointerAttributes;

typedef struct orDeviceProp {
  char name[256];
  size_t totalGlobalMem; /* the device's capacity (OPENREG_DEVICE_MEMORY) */
  int major;             /* compute capability */
  int minor;
  int multiProcessorCount;
} orDeviceProp;

/* Event flags, combined with |. */
enum {
  orEventDefault = 0x0,       /* timing enabled, host waits by spinning then blocking */
  orEventBlockingSync = 0x1,  /* host waits block at once, never spin */
  orEventDisableTiming = 0x2  /* orEventElapsedTime refuses this event */
};

/* ------------------------------------------------------------------------ */
/* Errors and version                                                        */
/* ------------------------------------------------------------------------ */

/* Returns the static text describing a status code.
 * Unknown codes give "unrecognized error code". The result is never NULL
 * and lives for the whole process.
 * Related: orGetLastErrorMessage.
 *   error  in */
OPENREG_API const char* orGetErrorString(orError_t error);

/* Returns the short name of a status code ("orErrorInvalidValue").
 * Never NULL; lives for the whole process. Related: orGetErrorString.
 *   error  in */
OPENREG_API const char* orGetErrorName(orError_t error);

/* Returns this thread's last error and resets it to orSuccess.
 * The device's sticky error (see orLaunchKernel) is not reset by this.
 * Related: orPeekAtLastError, orGetLastErrorMessage. */
OPENREG_API orError_t orGetLastError(void);

/* Returns this thread's last error without resetting it.
 * Related: orGetLastError. */
OPENREG_API orError_t orPeekAtLastError(void);

/* Returns the message of this thread's most recent failing call, naming the
 * argument, device or kernel involved; "" if no call has failed.
 * Ownership: the runtime's; valid until this thread's next runtime call.
 * Related: orGetLastError. */
OPENREG_API const char* orGetLastErrorMessage(void);

/* Writes the runtime's version, OPENREG_VERSION_MAJOR * 10000 +
 * OPENREG_VERSION_MINOR * 100 + OPENREG_VERSION_PATCH, of the library
 * actually loaded (which may differ from the header compiled against).
 *   version  out
 * Returns orSuccess, orErrorInvalidValue (version is NULL).
 * Related: OPENREG_VERSION in openreg/version.h. */
OPENREG_API orError_t orRuntimeGetVersion(int* version);

/* ------------------------------------------------------------------------ */
/* Devices                                                                   */
/* ------------------------------------------------------------------------ */

/* Writes the number of devices: OPENREG_DEVICE_COUNT, default 2.
 *   count  out
 * Returns orSuccess, orErrorInvalidValue (count is NULL),
 * orErrorInitializationError (bad OPENREG_DEVICE_COUNT or
 * OPENREG_DEVICE_MEMORY, or called in a child forked after initialisation).
 * Related: orGetDeviceProperties. */
OPENREG_API orError_t orGetDeviceCount(int* count);

/* Makes device the calling thread's current device. Other threads are not
 * affected; a new thread starts on device 0.
 *   device  in
 * Returns orSuccess, orErrorInvalidDevice (not in [0, count)).
 * Related: orGetDevice. */
OPENREG_API orError_t orSetDevice(int device);

/* Writes the calling thread's current device. Inside a kernel this is the
 * device of the stream running it.
 *   device  out
 * Returns orSuccess, orErrorInvalidValue (device is NULL).
 * Related: orSetDevice. */
OPENREG_API orError_t orGetDevice(int* device);

/* Writes the properties of a device.
 *   prop    out
 *   device  in
 * Returns orSuccess, orErrorInvalidValue (prop is NULL),
 * orErrorInvalidDevice. Related: orMemGetInfo. */
OPENREG_API orError_t orGetDeviceProperties(orDeviceProp* prop, int device);

/* Blocks until all work queued on every stream of the current device has
 * finished.
 * Returns orSuccess, or the device's sticky error (orErrorLaunchFailure,
 * orErrorIllegalAddress) if a kernel failed, else the error of any of its
 * streams that failed (orKernelFailStream), orErrorNotPermitted (called
 * from a kernel of this device). Related: orStreamSynchronize. */
OPENREG_API orError_t orDeviceSynchronize(void);

/* Waits for the current device's queued work, then clears its sticky error
 * and the errors of its streams so the device can be used again. Unlike a hardware reset, allocations,
 * streams and events survive: a test process can go on after a kernel fault.
 * Returns orSuccess, orErrorNotPermitted (called from a kernel of this
 * device). Related: orDeviceSynchronize. */
OPENREG_API orError_t orDeviceReset(void);

/* Switches timing-only mode on (non-zero) or off for the whole process,
 * after waiting for the work queued on every device (which runs in the mode
 * it was queued in). In timing-only mode kernels are queued, ordered,
 * traced and released but their functions are not called, copies and
 * memsets move no bytes, and device memory is never touched (see Note
 * [Timing-only mode] in src/stream.cpp): a program runs for its shapes,
 * allocations, streams and events, to predict its time (openreg-perf).
 * OPENREG_TIMING_ONLY=1 starts the runtime in it.
 *   timingOnly  in
 * Returns orSuccess, orErrorNotPermitted (called from a kernel).
 * Related: orGetTimingOnly, orMemcpy (refuses a copy to host memory in
 * this mode). */
OPENREG_API orError_t orSetTimingOnly(int timingOnly);

/* Writes 1 to *timingOnly in timing-only mode, else 0.
 *   timingOnly  out
 * Returns orSuccess, orErrorInvalidValue (timingOnly is NULL).
 * Related: orSetTimingOnly. */
OPENREG_API orError_t orGetTimingOnly(int* timingOnly);

/* Writes the range of stream priorities. Lower numbers are higher priority,
 * as on CUDA: least is 0, greatest is -1. Priorities are recorded and
 * reported; every stream has its own worker, so none waits for another.
 *   leastPriority     out, may be NULL
 *   greatestPriority  out, may be NULL
 * Returns orSuccess. Related: orStreamCreateWithPriority. */
OPENREG_API orError_t orDeviceGetStreamPriorityRange(int* leastPriority,
                                                     int* greatestPriority);

/* Writes the handle of a device's default stream. The handle is never
 * destroyed; passing it to orStreamDestroy returns
 * orErrorInvalidResourceHandle.
 *   stream  out
 *   device  in
 * Returns orSuccess, orErrorInvalidValue (stream is NULL),
 * orErrorInvalidDevice. Related: orStreamCreate. */
OPENREG_API orError_t orDeviceGetDefaultStream(orStream_t* stream, int device);

/* ------------------------------------------------------------------------ */
/* Memory                                                                    */
/* ------------------------------------------------------------------------ */

/* Allocates size bytes on the current device, aligned to 512 bytes.
 * The pointer lies in the device's reserved address range: host code that
 * dereferences it faults (see Note [Device memory is never host-mapped] in
 * src/memory.cpp). size 0 writes NULL and succeeds. The bytes are
 * not initialised.
 *   devPtr  out
 *   size    in
 * Returns orSuccess, orErrorInvalidValue (devPtr is NULL),
 * orErrorMemoryAllocation (the device's capacity cannot hold size bytes;
 * nothing else changes). Related: orFree, orMemGetInfo. */
OPENREG_API orError_t orMalloc(void** devPtr, size_t size);

/* Frees memory from orMalloc, after waiting for all work queued on its
 * device (as cudaFree does), and returns its pages to the operating system.
 *   devPtr  in, may be NULL
 * Returns orSuccess, orErrorInvalidDevicePointer (freed already, never
 * allocated, or not the start of an allocation), orErrorInvalidValue (not a
 * device pointer), orErrorNotPermitted (called from a kernel of the
 * pointer's device; nothing is freed). Related: orMalloc. */
OPENREG_API orError_t orFree(void* devPtr);

/* Allocates size bytes of pinned host memory: ordinary host memory that the
 * runtime knows, so copies from and to it can run asynchronously. size 0
 * writes NULL and succeeds.
 *   hostPtr  out
 *   size     in
 * Returns orSuccess, orErrorInvalidValue, orErrorMemoryAllocation.
 * Related: orFreeHost, orMemcpyAsync. */
OPENREG_API orError_t orMallocHost(void** hostPtr, size_t size);

/* Frees memory from orMallocHost after waiting for all queued work on every
 * device, since any of it may still read the buffer.
 *   hostPtr  in, may be NULL
 * Returns orSuccess, orErrorInvalidValue (not pinned memory from
 * orMallocHost, or freed already), orErrorNotPermitted (called from a
 * kernel; nothing is freed). Related: orMallocHost. */
OPENREG_API orError_t orFreeHost(void* hostPtr);

/* Copies count bytes and returns when the copy is done. It first waits for
 * all work queued on the devices involved, so it sees their results.
 * count 0 succeeds at once.
 *   dst, src  in: host or device pointers, as kind says
 *   count     in
 *   kind      in: orMemcpyDefault infers the direction from the pointers
 * Returns orSuccess, orErrorInvalidValue (null pointer, unknown kind, range
 * overruns its allocation), orErrorInvalidDevicePointer (freed memory),
 * orErrorInvalidMemcpyDirection (kind contradicts the pointers),
 * orErrorNotPermitted (called from a kernel of a device involved, or a
 * copy to host memory in timing-only mode: orSetTimingOnly), or the
 * sticky error of a device involved. Related: orMemcpyAsync. */
OPENREG_API orError_t orMemcpy(void* dst, const void* src, size_t count,
                               orMemcpyKind kind);

/* Queues a copy of count bytes on stream. The call returns at once when the
 * host side is pinned (orMallocHost) or there is no host side; with
 * pageable host memory it returns only when the copy is done, as CUDA does.
 * Arguments are checked when the copy is queued.
 *   dst, src  in
 *   count     in
 *   kind      in
 *   stream    in, NULL for the current device's default stream
 * Returns as orMemcpy, plus orErrorInvalidResourceHandle; orErrorNotPermitted
 * only for pageable host memory on the calling kernel's own stream.
 * Related: orMemcpy, orStreamSynchronize. */
OPENREG_API orError_t orMemcpyAsync(void* dst, const void* src, size_t count,
                                    orMemcpyKind kind, orStream_t stream);

/* Sets count bytes of device memory to the byte value, then returns; waits
 * for the device's queued work first.
 *   devPtr  in
 *   value   in: only the low 8 bits are used
 *   count   in
 * Returns orSuccess, orErrorInvalidValue (not device memory, range
 * overruns), orErrorInvalidDevicePointer, orErrorNotPermitted (called from
 * a kernel of that device), or the sticky error. Related: orMemsetAsync. */
OPENREG_API orError_t orMemset(void* devPtr, int value, size_t count);

/* Queues a memset of device memory on stream and returns at once.
 *   devPtr  in
 *   value   in: only the low 8 bits are used
 *   count   in
 *   stream  in, NULL for the current device's default stream
 * Returns as orMemset, plus orErrorInvalidResourceHandle.
 * Related: orMemset. */
OPENREG_API orError_t orMemsetAsync(void* devPtr, int value, size_t count,
                                    orStream_t stream);

/* Describes the allocation a pointer lies in; interior pointers resolve to
 * their allocation. A pointer the runtime does not know (pageable memory,
 * freed memory) is orMemoryTypeUnregistered with device -1, not an error.
 *   attributes  out
 *   ptr         in
 * Returns orSuccess, orErrorInvalidValue (attributes is NULL).
 * Related: orMalloc, orMallocHost. */
OPENREG_API orError_t orPointerGetAttributes(orPointerAttributes* attributes,
                                             const void* ptr);

/* Writes the current device's free and total bytes. free is the capacity
 * minus the bytes held by live allocations.
 *   free, total  out, either may be NULL
 * Returns orSuccess. Related: orMalloc. */
OPENREG_API orError_t orMemGetInfo(size_t* free, size_t* total);

/* ------------------------------------------------------------------------ */
/* Streams                                                                   */
/* ------------------------------------------------------------------------ */

/* Creates a stream on the current device with priority 0. Work queued on a
 * stream runs in order, on a worker of its own; queueing returns at once,
 * unless the stream already holds 4096 queued operations: then the call
 * waits until the worker has run a quarter of them, as a CUDA launch waits
 * on a full queue. Queueing onto a full stream from inside a kernel returns
 * orErrorNotPermitted instead of waiting. With OPENREG_LAUNCH_BLOCKING=1
 * every queueing call also waits for its work.
 *   stream  out
 * Returns orSuccess, orErrorInvalidValue. Related: orStreamDestroy. */
OPENREG_API orError_t orStreamCreate(orStream_t* stream);

/* As orStreamCreate, with a priority clamped to
 * orDeviceGetStreamPriorityRange.
 *   stream    out
 *   priority  in
 * Returns orSuccess, orErrorInvalidValue.
 * Related: orDeviceGetStreamPriorityRange, orStreamGetPriority. */
OPENREG_API orError_t orStreamCreateWithPriority(orStream_t* stream,
                                                 int priority);

/* Destroys a stream after its queued work has finished. Using the handle
 * afterwards returns orErrorInvalidResourceHandle.
 *   stream  in, may be NULL
 * Returns orSuccess, orErrorInvalidResourceHandle (unknown, destroyed, or a
 * default stream).
 * Related: orStreamCreate. */
OPENREG_API orError_t orStreamDestroy(orStream_t stream);

/* Reports whether all work queued on stream has finished.
 *   stream  in, NULL for the current device's default stream
 * Returns orSuccess (finished), orErrorNotReady, orErrorInvalidResourceHandle,
 * or the sticky or stream error.
 * Related: orStreamSynchronize. */
OPENREG_API orError_t orStreamQuery(orStream_t stream);

/* Blocks until all work queued on stream has finished.
 *   stream  in, NULL for the current device's default stream
 * Returns orSuccess, orErrorInvalidResourceHandle, orErrorNotPermitted
 * (called from a kernel running on stream), or the sticky or stream error.
 * Related: orStreamQuery, orDeviceSynchronize. */
OPENREG_API orError_t orStreamSynchronize(orStream_t stream);

/* Makes all work queued on stream after this call wait until the work
 * captured by event's most recent orEventRecord has finished. The host does
 * not wait. An event never recorded imposes no wait. The event and stream
 * may belong to different devices. If the captured work failed with a
 * stream error, stream fails with it once it reaches the wait.
 *   stream  in, NULL for the current device's default stream
 *   event   in
 * Returns orSuccess, orErrorInvalidResourceHandle, the sticky error of the
 * event's device, or stream's own sticky or stream error.
 * Related: orEventRecord, orKernelFailStream. */
OPENREG_API orError_t orStreamWaitEvent(orStream_t stream, orEvent_t event);

/* Writes a stream's priority.
 *   stream    in
 *   priority  out
 * Returns orSuccess, orErrorInvalidValue, orErrorInvalidResourceHandle.
 * Outputs last, as CUDA's cudaStreamGetPriority. Related: orStreamCreateWithPriority. */
OPENREG_API orError_t orStreamGetPriority(orStream_t stream, int* priority);

/* Writes the device a stream belongs to.
 *   stream  in
 *   device  out
 * Returns orSuccess, orErrorInvalidValue, orErrorInvalidResourceHandle.
 * Outputs last, as CUDA's cudaStreamGetDevice. Related: orGetDevice. */
OPENREG_API orError_t orStreamGetDevice(orStream_t stream, int* device);

/* Writes a stream's process-unique id (never reused; default streams have
 * ids 1 .. device count, in device order). Used by tracing records.
 *   stream  in
 *   id      out
 * Returns orSuccess, orErrorInvalidValue, orErrorInvalidResourceHandle.
 * Outputs last, as CUDA's cudaStreamGetId. Related: orTraceDrain. */
OPENREG_API orError_t orStreamGetId(orStream_t stream, uint64_t* id);

/* ------------------------------------------------------------------------ */
/* Events                                                                    */
/* ------------------------------------------------------------------------ */

/* Creates an event on the current device, with timing enabled.
 *   event  out
 * Returns orSuccess, orErrorInvalidValue. Related: orEventCreateWithFlags. */
OPENREG_API orError_t orEventCreate(orEvent_t* event);

/* Creates an event on the current device with orEvent* flags.
 *   event  out
 *   flags  in: orEventDefault, orEventBlockingSync, orEventDisableTiming
 * Returns orSuccess, orErrorInvalidValue (NULL event, unknown flag bits).
 * Related: orEventCreate, orEventDestroy. */
OPENREG_API orError_t orEventCreateWithFlags(orEvent_t* event,
                                             unsigned int flags);

/* Captures the work queued on stream so far: the event completes when that
 * work has finished. Recording again replaces the capture.
 *   event   in
 *   stream  in: must belong to the event's device
 * On a stream that holds a stream error the record succeeds, whether the
 * failure came before or after the call: the event carries the error to
 * every stream and host that waits for it (Note [Stream errors]).
 * Returns orSuccess, orErrorInvalidResourceHandle, orErrorInvalidDevice
 * (stream of another device), or the device's sticky error.
 * Related: orStreamWaitEvent, orEventSynchronize. */
OPENREG_API orError_t orEventRecord(orEvent_t event, orStream_t stream);

/* Reports whether the captured work has finished. An event never recorded
 * has finished. A stream error of the captured work is not reported here
 * (the work has ended, as far as a caller polling for completion, such as
 * a caching allocator, is concerned); orEventSynchronize reports it.
 *   event  in
 * Returns orSuccess, orErrorNotReady, orErrorInvalidResourceHandle, or the
 * sticky error of the event's device.
 * Related: orEventSynchronize. */
OPENREG_API orError_t orEventQuery(orEvent_t event);

/* Blocks until the captured work has finished.
 *   event  in
 * Returns orSuccess, orErrorInvalidResourceHandle, orErrorNotPermitted
 * (called from a kernel that the captured work includes), the sticky
 * error, or the stream error if the captured work includes the failure.
 * Related: orEventQuery, orStreamSynchronize. */
OPENREG_API orError_t orEventSynchronize(orEvent_t event);

/* Writes the time in milliseconds between two completed records.
 *   ms          out
 *   start, end  in: recorded, completed, timing enabled
 * Returns orSuccess, orErrorInvalidValue (ms is NULL), orErrorNotReady
 * (either has not completed), orErrorInvalidResourceHandle (unknown,
 * destroyed, never recorded, created with orEventDisableTiming, or the two
 * events belong to different devices).
 * Related: orEventRecord. */
OPENREG_API orError_t orEventElapsedTime(float* ms, orEvent_t start,
                                         orEvent_t end);

/* Destroys an event. Work already waiting on it still waits for its capture.
 *   event  in, may be NULL
 * Returns orSuccess, orErrorInvalidResourceHandle.
 * Related: orEventCreate. */
OPENREG_API orError_t orEventDestroy(orEvent_t event);

/* ------------------------------------------------------------------------ */
/* Kernels                                                                   */
/* ------------------------------------------------------------------------ */

/* A kernel: a host function run by a stream's worker. It reaches device
 * memory only through orKernelTranslatePointer, and reports failure by
 * returning a code other than orSuccess. */
typedef orError_t (*orKernelFunc_t)(void* userData);

/* Queues func(userData) on stream and returns at once. name labels errors
 * and trace records (copied; may be NULL). userData is the caller's and
 * must stay valid until the kernel has run.
 *
 * A kernel that fails (returns non-success, or translates an address outside
 * every allocation) leaves a sticky error on its device: later work on the
 * device is skipped, and every synchronising call on the device, and every
 * launch onto it, returns the error with a message naming the kernel, until
 * orDeviceReset.
 *   stream    in, NULL for the current device's default stream
 *   func      in
 *   userData  in: the caller's; it must outlive the kernel
 *   name      in: copied; names the kernel in errors and traces
 * Returns orSuccess, orErrorInvalidValue (func is NULL),
 * orErrorInvalidResourceHandle, or the sticky error.
 * Related: orLaunchKernelWithRelease, openreg::launch in openreg.hpp. */
OPENREG_API orError_t orLaunchKernel(orStream_t stream, orKernelFunc_t func,
                                     void* userData, const char* name);

/* As orLaunchKernel, but the runtime owns userData: release(userData) is
 * called exactly once, after the kernel ran or was skipped, or before this
 * function returns an error.
 *   release  in, may be NULL
 *   stream, func, userData, name  in: as orLaunchKernel
 * Returns as orLaunchKernel. Related: orLaunchKernelWithFlags. */
OPENREG_API orError_t orLaunchKernelWithRelease(orStream_t stream,
                                                orKernelFunc_t func,
                                                void (*release)(void*),
                                                void* userData,
                                                const char* name);

/* Flags of orLaunchKernelWithFlags. */
typedef enum orKernelFlags {
  orKernelDefault = 0x0,    /* runs on its stream's worker thread */
  orKernelAnyThread = 0x1   /* may also run on a host thread that waits for
                               the stream (orKernelIsOnWorker tells which) */
} orKernelFlags;

/* As orLaunchKernelWithRelease, with flags (orKernelFlags). A kernel
 * launched with orKernelAnyThread promises not to depend on the thread that
 * runs it: a host thread that synchronises with the stream may run it,
 * with everything queued before it, instead of waiting for the worker
 * (Note [Who runs queued work] in stream.cpp). The order of the stream's
 * work, its errors and its events are the same on either thread.
 *   flags  in: orKernelDefault or orKernelAnyThread
 *   stream, func, release, userData, name  in: as orLaunchKernelWithRelease
 * Returns as orLaunchKernel, and orErrorInvalidValue for unknown flags.
 * Related: orKernelIsOnWorker. */
OPENREG_API orError_t orLaunchKernelWithFlags(orStream_t stream,
                                              orKernelFunc_t func,
                                              void (*release)(void*),
                                              void* userData,
                                              const char* name,
                                              unsigned int flags);

/* Kernel only. Writes 1 to *onWorker when the running kernel runs on its
 * stream's worker thread, 0 when a waiting host thread runs it (possible
 * only for orKernelAnyThread kernels).
 *   onWorker  out
 * Returns orSuccess, orErrorNotPermitted (not inside a kernel),
 * orErrorInvalidValue (onWorker is NULL).
 * Related: orLaunchKernelWithFlags. */
OPENREG_API orError_t orKernelIsOnWorker(int* onWorker);

/* Kernel only. Writes the host alias of count bytes of device memory at
 * devPtr: the address where those bytes can be read and written while the
 * kernel runs, and only then. Host code that keeps it past the kernel still
 * reaches the memory by default; with OPENREG_CHECK_ALIASES=1 it faults,
 * naming the kernel (Note [Host aliases end with their kernel] in
 * src/kernel.cpp). A failure also marks the running kernel failed with
 * orErrorIllegalAddress, as a memory fault on hardware would.
 *   hostPtr  out
 *   devPtr   in
 *   count    in: the range must lie inside one live allocation
 * Returns orSuccess, orErrorIllegalAddress, orErrorNotPermitted (not inside
 * a kernel), orErrorInvalidValue (hostPtr is NULL), orErrorMemoryAllocation
 * (OPENREG_CHECK_ALIASES=1 and the host cannot map another window).
 * Related: openreg::translate in openreg.hpp. */
OPENREG_API orError_t orKernelTranslatePointer(void** hostPtr,
                                               const void* devPtr,
                                               size_t count);

/* Kernel only. Attaches a message to the failure the running kernel is about
 * to return, as a device-side assertion would print one (copied).
 *   message  in: copied
 * Returns orSuccess, orErrorNotPermitted (not inside a kernel).
 * Related: orKernelFailStream, orGetLastErrorMessage. */
OPENREG_API orError_t orKernelSetErrorMessage(const char* message);

/* Kernel only. Fails the work that depends on the running kernel rather
 * than its device: once the kernel returns orSuccess, its stream holds a
 * stream error with code and message (copied; the first call wins). Later
 * work on the stream is skipped and every call that waits for it reports
 * the error; a stream that waits for an event recorded after the kernel
 * fails too; the device and its other streams go on (Note [Stream errors]
 * in src/stream.cpp). For failures that are the work's, not the hardware's:
 * a collective whose peers never came. A kernel that returns a failure
 * leaves the device's sticky error instead. orDeviceReset clears both.
 *   code     in: the error to report, not orSuccess
 *   message  in, may be NULL: what failed, naming the work
 * Returns orSuccess, orErrorNotPermitted (not inside a kernel),
 * orErrorInvalidValue (code is orSuccess).
 * Related: orKernelSetErrorMessage, orStreamWaitEvent. */
OPENREG_API orError_t orKernelFailStream(orError_t code, const char* message);

/* ------------------------------------------------------------------------ */
/* Tracing                                                                   */
/* ------------------------------------------------------------------------ */

typedef enum orActivityKind {
  orActivityKindKernel = 0,      /* a kernel running on a stream */
  orActivityKindMemcpy = 1,      /* a copy running on a stream */
  orActivityKindMemset = 2,      /* a memset running on a stream */
  orActivityKindLaunch = 3,      /* the host call that queued any stream record
                                    (kernel, copy, memset, event record, wait) */
  orActivityKindSynchronize = 4, /* the host blocked in a synchronising call */
  orActivityKindEventRecord = 5, /* a stream reaching an orEventRecord: the
                                    instant the event captured */
  orActivityKindStreamWait = 6   /* a stream held by orStreamWaitEvent, from
                                    reaching the wait to the event completing
                                    (a wait for an event already complete
                                    is queued only while tracing, so the
                                    trace holds every dependency) */
} orActivityKind;

typedef struct orActivity {
  orActivityKind kind;
  char name[64];          /* kernel name, "memcpyHtoD", "memcpyDtoH",
                             "memcpyDtoD" (one device), "memcpyPtoP"
                             (between devices), ...; truncated */
  int device;
  uint64_t stream;        /* orStreamGetId of the stream, 0 if none */
  uint64_t startNs;       /* orTraceGetTimestamp clock */
  uint64_t endNs;
  uint64_t correlationId; /* shared by a Launch record and its device record */
  uint64_t externalCorrelationId; /* Launch records: the launching thread's
                                     innermost orTracePushExternalCorrelationId,
                                     0 if none */
  uint64_t waitedForCorrelationId; /* StreamWait records, and Synchronize
                                      records of orEventSynchronize: the
                                      correlationId of the EventRecord waited
                                      for (0 if it was recorded while tracing
                                      was off). Synchronize records of a call
                                      that waits for the work it queued (a
                                      copy with pageable memory, orMemcpy,
                                      orMemset, OPENREG_LAUNCH_BLOCKING),
                                      named "<work> wait": that work's
                                      correlationId. 0 for other records */
} orActivity;

/* Switches recording of activity records on (non-zero) or off. Records
 * already taken stay until drained; switching on from off resets the
 * dropped count (orTraceGetDroppedCount).
 *   enable  in
 * Returns orSuccess.
 * Related: orTraceDrain, orTraceGetDroppedCount. */
OPENREG_API orError_t orTraceEnable(int enable);

/* Moves up to capacity records, oldest first, into records, and writes how
 * many were moved. A record appears once its activity has ended.
 *   records   out, may be NULL when capacity is 0
 *   capacity  in
 *   count     out
 * Returns orSuccess, orErrorInvalidValue.
 * Outputs last for count, which follows the buffer (records, capacity) it counts.
 * Related: orTraceEnable, orTraceGetDroppedCount. */
OPENREG_API orError_t orTraceDrain(orActivity* records, size_t capacity,
                                   size_t* count);

/* Writes how many records were not kept since recording was last switched
 * on, because OPENREG_TRACE_RECORDS records (2^20 unless set) were waiting
 * to be drained: a consumer that
 * finds a non-zero count must say its trace is incomplete (and drain more
 * often, as a profiler flushes its buffers during a long run).
 *   count  out
 * Returns orSuccess, orErrorInvalidValue (count is NULL).
 * Related: orTraceDrain, orTraceEnable. */
OPENREG_API orError_t orTraceGetDroppedCount(uint64_t* count);

/* Writes the tracing clock: a monotonic time in nanoseconds.
 *   ns  out
 * Returns orSuccess, orErrorInvalidValue.
 * Related: orActivity's startNs and endNs. */
OPENREG_API orError_t orTraceGetTimestamp(uint64_t* ns);

/* Pushes a caller-chosen id onto the calling thread's stack of external
 * correlation ids: every Launch record the thread makes until the matching
 * pop carries the innermost id, so a profiler can tie the device work to
 * its own operator (as CUPTI's external correlation does).
 *   id  in: any value; 0 reads as "none"
 * Returns orSuccess. Related: orTracePopExternalCorrelationId. */
OPENREG_API orError_t orTracePushExternalCorrelationId(uint64_t id);

/* Pops the calling thread's innermost external correlation id.
 *   id  out, may be NULL
 * Returns orSuccess, orErrorInvalidValue (the stack is empty; id is left
 * alone). Related: orTracePushExternalCorrelationId. */
OPENREG_API orError_t orTracePopExternalCorrelationId(uint64_t* id);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* Interprocess memory, stream capture and graphs: the rest of the C API, in
 * headers of their own. */
#include "openreg/graph.h"
#include "openreg/ipc.h"

#endif /* OPENREG_OPENREG_H */
